# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""DigitalOcean's names: size slugs -> canonical GPUs and counts, droplet statuses ->
base.Status, the identity tags (within DigitalOcean's tag rules) and the names gpuprov
gives its SSH keys and firewalls.

GPU size slugs read ``gpu-<model>x<count>-<total memory>gb[-<variant>]``
(``gpu-h100x1-80gb``, ``gpu-h100x8-640gb``, ``gpu-4000adax1-20gb``, ``gpu-mi300x1-192gb``);
the size's ``gpu_info`` {count, model (``nvidia_h100``)} wins where it is given.
"""

from __future__ import annotations

import base64
import hashlib
import re
from typing import Any, Dict, Optional, Tuple

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    JOURNAL_ID_TAG, VM_NAME_TAG, ErrorKind, ProviderError, Status,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.gpus import canonical_gpu

_SLUG_RE = re.compile(r"^gpu-(?P<model>[a-z0-9]+?)x(?P<count>\d+)-(?P<memory>\d+)gb(?P<variant>-[a-z0-9-]+)?$")

# model token of the slug -> canonical name
MODELS = {
    "h100": "H100", "h200": "H200", "l40s": "L40S", "4000ada": "RTX4000ADA", "6000ada": "RTX6000ADA",
    "a100": "A100-80GB", "mi300": "MI300X", "mi325": "MI325X", "b300": "B300", "b200": "B200",
}
AMD_MODELS = ("mi300", "mi325", "mi350", "mi355")

# DigitalOcean's droplet statuses (OpenAPI droplet.status enum). "archive": DigitalOcean has
# archived it (it no longer runs and will not come back on its own).
STATUSES = {
    "new": Status.PENDING,
    "active": Status.RUNNING,
    "off": Status.STOPPED,
    "archive": Status.TERMINATING,
}

# DigitalOcean's AI/ML-ready GPU images (its GPU Droplet docs) and the plain Ubuntu one.
IMAGE_NVIDIA_ONE = "gpu-h100x1-base"
IMAGE_NVIDIA_EIGHT = "gpu-h100x8-base"
IMAGE_AMD = "gpu-amd-base"
IMAGE_CPU = "ubuntu-24-04-x64"


def gpu_of(size: Dict[str, Any]) -> Tuple[Optional[str], int, Optional[str]]:
    """``(canonical GPU, count, vendor)`` of a size; ``(None, 0, None)`` for a CPU size or a GPU
    this adapter does not know (it is then not offered for a GPU request)."""
    slug = str(size.get("slug") or "")
    info = size.get("gpu_info") if isinstance(size.get("gpu_info"), dict) else {}
    found = _SLUG_RE.match(slug)
    if not found and not info:
        return None, 0, None
    token = found.group("model") if found else ""
    count = info.get("count") if isinstance(info.get("count"), int) else (int(found.group("count")) if found else 0)
    model = str(info.get("model") or "")
    vendor = "amd" if token in AMD_MODELS or model.startswith("amd") else "nvidia"
    gpu = MODELS.get(token) or _from_model(model)
    return (gpu, count, vendor) if gpu and count > 0 else (None, 0, None)


def _from_model(model: str) -> Optional[str]:
    """``nvidia_h100`` -> H100, ``amd_mi300x`` -> MI300X; None when unknown."""
    name = re.sub(r"^(nvidia|amd)_", "", model or "").replace("_", "")
    if not name:
        return None
    try:
        return canonical_gpu(name)
    except ProviderError:
        return None


def is_spot(slug: str) -> bool:
    """Sizes whose slug ends in ``-spot`` (DigitalOcean's preemptible GPU sizes)."""
    return str(slug).endswith("-spot")


def default_image(vendor: Optional[str], count: int) -> str:
    if vendor is None:
        return IMAGE_CPU
    if vendor == "amd":
        return IMAGE_AMD
    return IMAGE_NVIDIA_EIGHT if count >= 8 else IMAGE_NVIDIA_ONE


# -- tags -------------------------------------------------------------------------------
# DigitalOcean tag names: letters, digits, ':', '-' and '_', at most 255 characters; their
# capitalisation is fixed by whoever made the tag first, so values are kept to [a-z0-9-] and
# anything else is written as _xx (its UTF-8 bytes in hex).
TAG_MAX = 255
_TAG_SAFE = re.compile(r"[a-z0-9-]")
FIREWALL_TAG = "gpuprov-firewall"


def encode_tag_value(value: str) -> str:
    return "".join(ch if _TAG_SAFE.match(ch) else "".join("_%02x" % b for b in ch.encode("utf-8"))
                   for ch in value)


def decode_tag_value(value: str) -> str:
    """The inverse of encode_tag_value (a value it did not make comes back as it is)."""
    data, i = bytearray(), 0
    while i < len(value):
        escape = re.match(r"_([0-9a-f]{2})", value[i:i + 3])
        if escape:
            data.append(int(escape.group(1), 16))
            i += 3
        else:
            data += value[i].encode("utf-8")
            i += 1
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return value


def tag(key: str, value: str) -> str:
    """``key:value`` as a tag name; a value that would not fit is its sha256 (journal ids only)."""
    text = "%s:%s" % (key, encode_tag_value(value))
    if len(text) > TAG_MAX:
        text = "%s:h%s" % (key, hashlib.sha256(value.encode("utf-8")).hexdigest())
    return text


def tag_values(tags: Any) -> Dict[str, str]:
    """A droplet's ``tags`` [str] as {key: raw value} for the keys gpuprov writes."""
    out = {}
    for name in tags or []:
        if isinstance(name, str) and ":" in name:
            key, _sep, value = name.partition(":")
            out.setdefault(key, value)
    return out


def vm_tag(vm_name: str) -> str:
    return tag(VM_NAME_TAG, vm_name)


def journal_tag(journal_id: str) -> str:
    return tag(JOURNAL_ID_TAG, journal_id)


def firewall_name(vm_name: str, journal_id: Optional[str]) -> str:
    """``gpuprov-<vm>-j<8 hex of sha256(journal id)>`` (firewall names: letters, digits, '.' and '-').
    Firewalls have no tags of their own: the journal lives in the name."""
    if not journal_id:
        return "gpuprov-%s" % vm_name
    return "gpuprov-%s-j%s" % (vm_name, hashlib.sha256(journal_id.encode("utf-8")).hexdigest()[:8])


def firewall_tag(name: str) -> str:
    """The tag that attaches the firewall ``name`` to the VM's droplets (it names exactly one firewall)."""
    return "%s:%s" % (FIREWALL_TAG, name)


# -- ssh keys -----------------------------------------------------------------------------

def public_key_material(public_key: str) -> Tuple[str, str]:
    """``(type, base64 blob)`` of an OpenSSH public key line (the comment is not material)."""
    parts = (public_key or "").split()
    if len(parts) < 2:
        raise ProviderError(ErrorKind.INVALID_REQUEST, "ssh_key: expected an OpenSSH public key line "
                                                       "('<type> <base64> [comment]')")
    return parts[0], parts[1]


def _blob(encoded: str) -> bytes:
    try:
        return base64.b64decode(encoded.encode("ascii"), validate=True)
    except (ValueError, UnicodeEncodeError):
        return encoded.encode("utf-8", "replace")


def fingerprint(public_key: str) -> str:
    """DigitalOcean's key fingerprint: the MD5 of the key blob, as colon-separated hex."""
    digest = hashlib.md5(_blob(public_key_material(public_key)[1])).hexdigest()  # nosec: an identifier
    return ":".join(digest[i:i + 2] for i in range(0, 32, 2))


def key_prefix(vm_name: str) -> str:
    return "gpuprov-%s-" % vm_name


def key_name(vm_name: str, public_key: str) -> str:
    """``gpuprov-<vm>-<first 12 hex of sha256 of the key blob>``."""
    blob = _blob(public_key_material(public_key)[1])
    return "%s%s" % (key_prefix(vm_name), hashlib.sha256(blob).hexdigest()[:12])


def public_ipv4(droplet: Dict[str, Any]) -> Optional[str]:
    """The droplet's public IPv4 address (``networks.v4`` entry of type public), None before it has one."""
    networks = droplet.get("networks") if isinstance(droplet.get("networks"), dict) else {}
    for net in networks.get("v4") or []:
        if isinstance(net, dict) and net.get("type") == "public" and net.get("ip_address"):
            return str(net["ip_address"])
    return None


def region_of(droplet: Dict[str, Any]) -> Optional[str]:
    region = droplet.get("region")
    if isinstance(region, dict):
        return region.get("slug")
    return region if isinstance(region, str) else None
