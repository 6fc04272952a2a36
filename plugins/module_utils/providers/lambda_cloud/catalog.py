# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Lambda Cloud's names: instance types -> canonical GPUs and counts, instance
statuses -> base.Status, and the names gpuprov gives its SSH keys and rulesets.

Instance type names read ``gpu_<count>x_<model>[_<memory>][_<form factor>]``
(``gpu_1x_a10``, ``gpu_8x_a100_80gb_sxm4``, ``gpu_8x_h100_sxm5``); the model token
(with its memory, where it tells two GPUs apart) picks the canonical name, and
``gpu_description`` ("A100 (40 GB PCIe)") is the fallback for a model not listed.
"""

from __future__ import annotations

import base64
import hashlib
import re
from typing import Any, Dict, Optional, Tuple

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    ErrorKind, ProviderError, Status,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.gpus import canonical_gpu

_TYPE_RE = re.compile(r"^gpu_(?P<count>\d+)x_(?P<model>.+)$")

# model token of the type name (memory and form factor included where they matter) -> canonical
MODELS = {
    "a100_80gb": "A100-80GB", "a100": "A100", "a10": "A10", "a6000": "A6000", "rtx6000": "RTX6000",
    "v100": "V100", "h100": "H100", "h200": "H200", "gh200": "GH200", "b200": "B200", "b300": "B300",
    "gb200": "GB200", "a4000": "A4000", "a5000": "A5000", "rtxpro6000": "RTXPRO6000", "rtx_pro_6000": "RTXPRO6000",
}
# form-factor and memory words that follow the model in a type name
_SUFFIXES = ("sxm4", "sxm5", "sxm6", "pcie", "nvl", "n", "40gb", "16gb", "32gb", "96gb")

# Lambda's documented statuses; "preempted" is seen only in a third-party client.
STATUSES = {
    "booting": Status.PENDING,
    "active": Status.RUNNING,
    "unhealthy": Status.FAILED,
    "terminating": Status.TERMINATING,
    "preempted": Status.FAILED,
}
GONE = "terminated"

# The regions of Lambda's PublicRegionCode enum (OpenAPI v1): where an instance type with
# no capacity anywhere is reported unavailable when the request names no region, and (with
# any other region the answer lists capacity in) the regions a request may name.
KNOWN_REGIONS = (
    "us-east-1", "us-east-2", "us-east-3", "us-west-1", "us-west-2", "us-west-3", "us-south-1", "us-south-2",
    "us-south-3", "us-midwest-1", "us-midwest-2", "europe-central-1", "asia-northeast-1", "asia-northeast-2",
    "asia-south-1", "australia-east-1", "me-west-1",
)


def gpu_of(type_name: str, gpu_description: Optional[str] = None,
           specs: Any = None) -> Tuple[Optional[str], int]:
    """``(canonical GPU, count)`` of an instance type; ``(None, 0)`` for a type that is not a GPU
    type this adapter knows (it is then not offered for a GPU request). The count is
    ``specs.gpus`` where the listing gives it, else the one in the name."""
    found = _TYPE_RE.match(type_name or "")
    if not found:
        return None, 0
    count = int(found.group("count"))
    listed = specs.get("gpus") if isinstance(specs, dict) else None
    if isinstance(listed, int) and not isinstance(listed, bool) and listed > 0:
        count = listed
    model = found.group("model")
    words = model.split("_")
    for cut in range(len(words), 0, -1):  # longest known prefix: a100_80gb before a100
        head = "_".join(words[:cut])
        if head in MODELS and all(w in _SUFFIXES for w in words[cut:]):
            return MODELS[head], count
    gpu = _from_description(gpu_description)
    return (gpu, count) if gpu else (None, 0)


def _from_description(text: Optional[str]) -> Optional[str]:
    """"A100 (80 GB SXM4)" -> A100-80GB; "Tesla V100 (16 GB)" -> V100; None when unknown."""
    if not text:
        return None
    head = re.sub(r"^(NVIDIA|Tesla|Quadro)\s+", "", text.strip(), flags=re.I)
    model = head.split("(")[0].strip()
    memory = re.search(r"(\d+)\s*GB", head)
    for candidate in ((model + "-" + memory.group(1) + "GB") if memory else None, model):
        if not candidate:
            continue
        try:
            return canonical_gpu(candidate)
        except ProviderError:
            continue
    return None


def public_key_material(public_key: str) -> Tuple[str, str]:
    """``(type, base64 blob)`` of an OpenSSH public key line (the comment is not material)."""
    parts = (public_key or "").split()
    if len(parts) < 2:
        raise ProviderError(ErrorKind.INVALID_REQUEST, "ssh_key: expected an OpenSSH public key line "
                                                       "('<type> <base64> [comment]')")
    return parts[0], parts[1]


def _blob(encoded: str) -> bytes:
    """The key blob (its base64 text itself when it does not decode: still a stable fingerprint)."""
    try:
        return base64.b64decode(encoded.encode("ascii"), validate=True)
    except (ValueError, UnicodeEncodeError):
        return encoded.encode("utf-8", "replace")


NAME_MAX = 64   # Lambda's limit on instance and SSH key names (applied to rulesets too)


def _short(vm_name: str, room: int) -> str:
    """``vm_name``, or when longer than ``room`` its head plus 8 hex of its sha256 (still unique)."""
    if len(vm_name) <= room:
        return vm_name
    return "%s-%s" % (vm_name[:room - 9].rstrip("-"), hashlib.sha256(vm_name.encode("utf-8")).hexdigest()[:8])


def key_name(vm_name: str, public_key: str) -> str:
    """``gpuprov-<vm>-<first 12 hex of sha256 of the key blob>`` (a VM name too long for Lambda's
    64 characters is shortened with a hash of it)."""
    blob = _blob(public_key_material(public_key)[1])
    return "%s%s" % (key_prefix(vm_name), hashlib.sha256(blob).hexdigest()[:12])


def key_prefix(vm_name: str) -> str:
    return "gpuprov-%s-" % _short(vm_name, NAME_MAX - len("gpuprov--") - 12)


def ruleset_name(vm_name: str, journal_id: Optional[str]) -> str:
    """The VM's firewall ruleset: ``gpuprov-<vm>-j<8 hex of sha256(journal id)>``. Rulesets have
    no tags, so the journal lives in the name: two controllers' rulesets for one VM name differ."""
    if not journal_id:
        return "gpuprov-%s" % _short(vm_name, NAME_MAX - len("gpuprov-"))
    return "gpuprov-%s-j%s" % (_short(vm_name, NAME_MAX - len("gpuprov--j") - 8),
                               hashlib.sha256(journal_id.encode("utf-8")).hexdigest()[:8])


# The launch request's tag rules (RequestedTagEntry): key ^[a-z][a-z0-9-:]+$ of at most 55
# characters, value at most 128 characters.
_TAG_KEY = re.compile(r"^[a-z][a-z0-9-:]+$")
TAG_KEY_MAX, TAG_VALUE_MAX = 55, 128


def check_tags(tags: Dict[str, Any]) -> Dict[str, str]:
    """``tags`` with string values, or InvalidRequest naming the first one Lambda would refuse."""
    out = {}
    for key, value in sorted(tags.items()):
        value = "" if value is None else str(value)
        if not (isinstance(key, str) and _TAG_KEY.match(key) and len(key) <= TAG_KEY_MAX):
            raise ProviderError(ErrorKind.INVALID_REQUEST, "tags.%s: a lambda tag name is 2-%d characters of a-z, "
                                "0-9, '-' and ':', starting with a letter" % (key, TAG_KEY_MAX))
        if len(value) > TAG_VALUE_MAX:
            raise ProviderError(ErrorKind.INVALID_REQUEST, "tags.%s: a lambda tag value is at most %d characters, "
                                "got %d" % (key, TAG_VALUE_MAX, len(value)))
        out[key] = value
    return out


def tags_of(instance: Dict[str, Any]) -> Dict[str, str]:
    """An instance's ``tags`` [{key, value}] as a dict (malformed entries skipped)."""
    out = {}
    for tag in instance.get("tags") or []:
        if isinstance(tag, dict) and isinstance(tag.get("key"), str):
            out[tag["key"]] = str(tag.get("value") if tag.get("value") is not None else "")
    return out


def region_of(entry: Dict[str, Any]) -> Optional[str]:
    """The region name of an instance or ruleset (``region`` is {name, description})."""
    region = entry.get("region")
    if isinstance(region, dict):
        return region.get("name")
    return region if isinstance(region, str) else None
