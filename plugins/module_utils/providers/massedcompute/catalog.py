# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Massed Compute's names: products -> canonical GPUs and counts, instance statuses ->
base.Status, the names gpuprov gives its instances and SSH keys, and the boot command.

Products read ``gpu_<count>x_<model...>`` (``gpu_1x_l40``, ``gpu_8x_DGX_A100``,
``gpu_4x_h100_nvl_nvlink``) with a description ``"<count>x <model> (<memory>GB)
[annotation] <interconnect>"`` ("1x L40 (48GB)", "4x H100 NVL", "2x RTX A6000 (48GB)
NVLink", "4x H200 NVL (141GB) NVLink [Spot]", "CPU-only instance"); the description's
model (with its memory, where that tells two GPUs apart) picks the canonical name.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from typing import Any, Dict, Optional, Tuple

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    BootScript, ErrorKind, ProviderError, Status,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.gpus import canonical_gpu

_COUNT_IN_NAME = re.compile(r"^gpu_(?P<count>\d+)x_", re.IGNORECASE)
_COUNT_IN_DESCRIPTION = re.compile(r"^\s*(?P<count>\d+)\s*x\s+(?P<model>.+)$", re.IGNORECASE)
_MEMORY = re.compile(r"\((?P<gb>\d+)\s*GB\)", re.IGNORECASE)
_ANNOTATION = re.compile(r"\[[^\]]*\]")
# words that name a form factor or a box, not the GPU (NVL stays: H100 NVL is its own GPU)
_NOT_THE_MODEL = {"DGX", "HGX", "NVLINK", "PCIE", "SXM", "SXM4", "SXM5", "SXM6", "NVIDIA"}


def is_spot(name: Any, description: Any) -> bool:
    """A spot ("[Spot]", ``_spot``/``_discount``) product: not offered (brevdev: not launchable as on-demand)."""
    text = "%s %s" % (name or "", description or "")
    return "[spot]" in text.lower() or str(name or "").lower().endswith(("_spot", "_discount"))


def gpu_of(name: Any, description: Any) -> Tuple[Optional[str], int]:
    """``(canonical GPU, count)`` of a product; ``(None, 0)`` for a CPU product or a GPU this
    adapter does not know (it is then not offered for a GPU request)."""
    found = _COUNT_IN_DESCRIPTION.match(str(description or ""))
    if not found:
        return None, 0
    by_name = _COUNT_IN_NAME.match(str(name or ""))
    count = int(by_name.group("count")) if by_name else int(found.group("count"))
    text = found.group("model")
    memory = _MEMORY.search(text)
    text = _ANNOTATION.sub(" ", _MEMORY.sub(" ", text))
    words = [w for w in text.split() if w.upper() not in _NOT_THE_MODEL]
    model = "".join(words)
    candidates = ([model + "-" + memory.group("gb") + "GB"] if memory else []) + [model]
    for candidate in candidates:
        try:
            gpu = canonical_gpu(candidate)
        except ProviderError:
            continue
        if gpu:
            return gpu, count
    return None, 0


# Massed Compute publishes example statuses only (rented, booting, terminated); the rest are
# the ones brevdev's provider maps.
STATUSES = {
    "rented": Status.RUNNING, "active": Status.RUNNING, "running": Status.RUNNING,
    "booting": Status.PENDING, "pending": Status.PENDING, "provisioning": Status.PENDING,
    "stopping": Status.STOPPING, "stopped": Status.STOPPED,
    "terminating": Status.TERMINATING, "deleting": Status.TERMINATING,
    "failed": Status.FAILED, "error": Status.FAILED,
}
GONE = ("terminated", "deleted")


def status_of(instance: Dict[str, Any]) -> Tuple[Optional[str], Optional[str]]:
    """``(normalised status, reason)``; status None for an instance that is gone. A ``rented``
    instance whose OS has not booted (``os_booted: 0``) or has no ip yet is still Pending."""
    raw = str(instance.get("status") or "").strip().lower()
    if raw in GONE:
        return None, None
    status = STATUSES.get(raw, Status.PENDING)
    if status == Status.RUNNING and (instance.get("os_booted") in (0, "0", False) or not instance.get("ip")):
        return Status.PENDING, "massedcompute status %s, the OS has not booted yet" % raw
    if status == Status.RUNNING:
        return status, None
    if status == Status.FAILED:
        return status, "massedcompute reports the instance %s" % raw
    return status, "massedcompute status %s" % (raw or "unknown")


# -- instance names: the VM name, then '_' and the journal id -------------------------------
# VM names are DNS labels (no '_'), so the first '_' ends the VM name; brevdev's live
# validation names instances with '_' and '-' (no tags or labels exist).
JOURNAL_SEPARATOR = "_"


def instance_name(vm_name: str, journal_id: Optional[str]) -> str:
    return vm_name + JOURNAL_SEPARATOR + journal_id if journal_id else vm_name


def instance_identity(name: Any, vm_name: str) -> Tuple[bool, Optional[str]]:
    """``(an instance of vm_name, the journal id its name carries or None)``."""
    if not isinstance(name, str):
        return False, None
    if name == vm_name:
        return True, None
    head, sep, journal_id = name.partition(JOURNAL_SEPARATOR)
    if head == vm_name and sep and journal_id:
        return True, journal_id
    return False, None


# -- SSH keys: no punctuation but spaces in a key name (brevdev) ----------------------------
NAME_MAX = 63   # brevdev bounds its managed names to 63 characters; the vendor publishes no limit


def public_key_material(public_key: str) -> Tuple[str, str]:
    """``(type, base64 blob)`` of an OpenSSH public key line (the comment is not material)."""
    parts = (public_key or "").split()
    if len(parts) < 2:
        raise ProviderError(ErrorKind.INVALID_REQUEST, "ssh_public_key: expected an OpenSSH public key line "
                                                       "('<type> <base64> [comment]')")
    return parts[0], parts[1]


def _hex(text: str, digits: int) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:digits]


def key_fingerprint(public_key: str) -> str:
    """First 12 hex of the sha256 of the decoded key blob (of its text when it is not base64)."""
    encoded = public_key_material(public_key)[1]
    try:
        blob = base64.b64decode(encoded.encode("ascii"), validate=True)
    except (binascii.Error, ValueError, UnicodeEncodeError):
        blob = encoded.encode("utf-8", "replace")
    return hashlib.sha256(blob).hexdigest()[:12]


def key_prefix(vm_name: str) -> str:
    """``gpuprov <vm words> `` ('-' read as ' '; a VM name too long for 63 characters keeps its
    head and 8 hex of its sha256)."""
    room = NAME_MAX - len("gpuprov  ") - 12 - len(" j") - 8
    words = vm_name if len(vm_name) <= room else "%s-%s" % (vm_name[:room - 9].rstrip("-"), _hex(vm_name, 8))
    return "gpuprov %s " % words.replace("-", " ")


def journal_mark(journal_id: Optional[str]) -> str:
    return " j" + _hex(journal_id, 8) if journal_id else ""


def key_name(vm_name: str, public_key: str, journal_id: Optional[str]) -> str:
    """``gpuprov <vm words> <12 hex of the key> j<8 hex of the journal id>``."""
    return key_prefix(vm_name) + key_fingerprint(public_key) + journal_mark(journal_id)


def key_owner(name: Any, vm_name: str) -> Tuple[bool, Optional[str]]:
    """``(a key gpuprov registered for vm_name, its journal mark (' j<8 hex>') or None)``."""
    if not isinstance(name, str):
        return False, None
    found = re.match(r"^%s[0-9a-f]{12}(?P<mark> j[0-9a-f]{8})?$" % re.escape(key_prefix(vm_name)), name)
    if not found:
        return False, None
    return True, found.group("mark")


# -- the boot script as the launch's startup command ----------------------------------------

def boot_command(script: BootScript) -> str:
    """The startup ``command``: the script (environment exported first) written to a file and
    run as root with its own interpreter. brevdev's startup command goes through ``sudo -n``:
    the command does not run as root by itself."""
    encoded = base64.b64encode(script.to_shell().encode("utf-8")).decode("ascii")
    return ("f=$(mktemp /tmp/gpuprov-boot.XXXXXX) && printf %%s '%s' | base64 --decode > \"$f\" && "
            "chmod 0755 \"$f\" && sudo -n \"$f\"" % encoded)


def region_of(instance: Dict[str, Any]) -> Optional[str]:
    """The region an instance reports (``region`` {name}: undocumented, read by brevdev)."""
    region = instance.get("region")
    if isinstance(region, dict):
        return region.get("name") or None
    return region if isinstance(region, str) and region else None
