# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Hyperstack's names: flavor GPU models -> canonical GPUs, VM statuses -> base.Status,
and the names and labels gpuprov gives its environments, keys and VMs.

A flavor (``n3-H100x1``, ``n3-A100x8``) names its GPU model in ``gpu`` as Hyperstack
writes it (``A100-80G-PCIe``, ``H100-80G-SXM5``, ``RTX-A6000``, ``L40``): model, memory
and form factor joined by '-'. The pricebook prices one GPU of that model per hour
under the same name.
"""

from __future__ import annotations

import base64
import hashlib
import re
from typing import Any, Dict, List, Optional, Tuple

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    ErrorKind, ProviderError, Status,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.gpus import canonical_gpu

# Hyperstack's model names whose canonical name the generic reading below would miss.
MODELS = {
    "A100-80G-PCIE": "A100-80GB", "A100-80G-PCIE-NVLINK": "A100-80GB", "A100-80G-SXM4": "A100-80GB",
    "A100-80G-SXM": "A100-80GB", "H100-80G-PCIE": "H100", "H100-80G-PCIE-NVLINK": "H100", "H100-80G-SXM5": "H100",
    "H100-80G-SXM": "H100", "H200-141G-SXM5": "H200", "H200-141G-SXM": "H200", "RTX-6000-ADA": "RTX6000ADA",
    "RTX-PRO-6000": "RTXPRO6000", "GH200-96G": "GH200", "B200-180G-SXM": "B200",
}
# form-factor words and memory sizes that follow the model
_SUFFIX = re.compile(r"^(PCIE|SXM\d?|NVLINK|NVL|\d+GB?)$", re.I)

# Status values (SkyPilot's Hyperstack provisioner lists the first ten).
STATUSES = {
    "BUILD": Status.PENDING, "CREATING": Status.PENDING, "STARTING": Status.PENDING,
    "REBOOTING": Status.PENDING, "HARD_REBOOT": Status.PENDING, "RESIZING": Status.PENDING,
    "ACTIVE": Status.RUNNING,
    "STOPPING": Status.STOPPING, "HIBERNATING": Status.STOPPING,
    "SHUTOFF": Status.STOPPED, "HIBERNATED": Status.STOPPED,
    "DELETING": Status.TERMINATING,
    "ERROR": Status.FAILED,
}
GONE = ("DELETED",)

NAME_MAX = 50   # "A string with a maximum length of 50 characters" (create VM)


def gpu_of(model: Optional[str]) -> Optional[str]:
    """The canonical GPU of a flavor's ``gpu`` (None for CPU flavors and models not known)."""
    text = (model or "").strip()
    if not text:
        return None
    upper = text.upper()
    if upper in MODELS:
        return MODELS[upper]
    words = upper.split("-")
    memory = next((w for w in words[1:] if re.match(r"^\d+GB?$", w)), None)
    for cut in range(len(words), 0, -1):  # the longest head that is a GPU: RTX-A6000 before RTX
        if not all(_SUFFIX.match(w) for w in words[cut:]):
            continue
        head = "-".join(words[:cut])
        candidates = ([head + "-" + re.match(r"\d+", memory).group(0) + "GB"] if memory else []) + [head]
        for candidate in candidates:
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
    try:
        return base64.b64decode(encoded.encode("ascii"), validate=True)
    except (ValueError, UnicodeEncodeError):
        return encoded.encode("utf-8", "replace")


def short(vm_name: str, room: int) -> str:
    """``vm_name``, or when longer than ``room`` its head plus 8 hex of its sha256 (still unique)."""
    if len(vm_name) <= room:
        return vm_name
    return "%s-%s" % (vm_name[:room - 9].rstrip("-"), hashlib.sha256(vm_name.encode("utf-8")).hexdigest()[:8])


def vm_name(vm: str) -> str:
    """The VM's name on Hyperstack: the vm name itself, hashed short past 50 characters (the
    label keeps the full name)."""
    return short(vm, NAME_MAX)


def key_prefix(vm: str) -> str:
    return "gpuprov-%s-" % short(vm, NAME_MAX - len("gpuprov--") - 12)


def key_name(vm: str, public_key: str) -> str:
    """``gpuprov-<vm>-<first 12 hex of sha256 of the key blob>``."""
    blob = _blob(public_key_material(public_key)[1])
    return "%s%s" % (key_prefix(vm), hashlib.sha256(blob).hexdigest()[:12])


def environment_name(region: str) -> str:
    """The environment gpuprov keeps its keys and VMs of ``region`` in."""
    return "gpuprov-%s" % region


def labels(tags: Dict[str, str]) -> List[str]:
    """Identity tags as Hyperstack labels (plain strings): ``key=value``."""
    return ["%s=%s" % (k, v) for k, v in sorted(tags.items())]


def tags_of(instance: Dict[str, Any]) -> Dict[str, str]:
    """The ``key=value`` labels of an instance as a dict (other labels skipped)."""
    found = {}
    for label in instance.get("labels") or []:
        text = label.get("label") if isinstance(label, dict) else label
        if isinstance(text, str) and "=" in text:
            key, value = text.split("=", 1)
            found[key] = value
    return found


def environment_of(entry: Dict[str, Any]) -> Optional[str]:
    """The environment name of an instance, key, volume or firewall (``environment`` {name}), or
    of a Kubernetes cluster (``environment_name``)."""
    env = entry.get("environment")
    if isinstance(env, dict):
        return env.get("name")
    if isinstance(env, str):
        return env
    named = entry.get("environment_name")
    return named if isinstance(named, str) else None
