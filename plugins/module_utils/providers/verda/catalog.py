# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Verda's instance types read into canonical GPUs, and the names and descriptions that
carry a VM's identity (Verda instances have no tags in its Python SDK's API).

An instance type (``GET /instance-types``) names its GPU in ``model`` (``V100``,
``A100``, ``H100``, ``RTX PRO 6000``...) and its size in ``gpu.number_of_gpus`` and
``gpu_memory.size_in_gigabytes`` (all GPUs together); the memory per GPU tells the
A100 40 GB from the 80 GB, the V100 16 GB from the 32 GB and the H100 from the H100 NVL.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from typing import Any, Dict, List, Optional

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    JOURNAL_ID_TAG, VM_NAME_TAG, ErrorKind, ProviderError,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.gpus import canonical_gpu

# Verda documents at most 100 characters of instance description (brevdev/cloud keeps to it).
DESCRIPTION_MAX = 100
# Verda's locations as its Python SDK lists them (verda.constants.Locations, 1.x); plan also takes
# those the availability answer names and, for a request naming none of these, GET /locations.
LOCATIONS = ("FIN-01", "FIN-02", "FIN-03", "ICE-01")
_MEMORY_SUFFIX = re.compile(r"\s+(\d+)\s*GB$")
_SPELLING = re.compile(r"NVIDIA|TESLA|[\s_-]")
_JOURNAL_IN_DESCRIPTION = re.compile(r"(?:^|\s)%s=(\S+)" % re.escape(JOURNAL_ID_TAG))


def _number(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return 0.0


def gpu_count(instance_type: Dict[str, Any]) -> int:
    gpu = instance_type.get("gpu")
    return int(_number(gpu.get("number_of_gpus"))) if isinstance(gpu, dict) else 0


def gpu_of(instance_type: Dict[str, Any]) -> Optional[str]:
    """The canonical GPU of a Verda instance type; None for a CPU type or a GPU the
    collection has no name for (such types are never offered)."""
    count = gpu_count(instance_type)
    if count < 1:
        return None
    model = str(instance_type.get("model") or "").upper().strip()
    memory = instance_type.get("gpu_memory")
    per_gpu = _number(memory.get("size_in_gigabytes")) / count if isinstance(memory, dict) else 0.0
    suffix = _MEMORY_SUFFIX.search(model)
    if suffix:  # "A100 80GB": the model names its memory
        per_gpu = float(suffix.group(1))
        model = model[:suffix.start()]
    key = _SPELLING.sub("", model)
    if key == "A100" and per_gpu >= 60:
        key = "A100-80GB"
    elif key == "V100" and per_gpu >= 30:
        key = "V100-32GB"
    elif key == "H100" and 90 <= per_gpu < 100:
        key = "H100-NVL"
    try:
        return canonical_gpu(key)
    except ProviderError:
        return None


def price(value: Any) -> Optional[float]:
    """A Verda price (a string such as "1.29", or a number); None when absent or not positive."""
    amount = _number(value)
    return amount if amount > 0 else None


def _journal_mark(journal_id: Optional[str]) -> str:
    return "-j" + hashlib.sha256(journal_id.encode("utf-8")).hexdigest()[:8] if journal_id else ""


def side_name(vm_name: str, material: str, journal_id: Optional[str]) -> str:
    """The name of a startup script made for ``vm_name`` (its key's is key_name):
    ``gpuprov-<vm>-<12 hex of sha256(material)>[-j<8 hex of sha256(journal id)>]``."""
    digest = hashlib.sha256(material.encode("utf-8")).hexdigest()[:12]
    return "gpuprov-%s-%s%s" % (vm_name, digest, _journal_mark(journal_id))


def key_fingerprint(public_key: str) -> str:
    """12 hex of the SHA-256 of the decoded key blob (the digest ``ssh-keygen -l`` shows in
    base64), as every gpuprov adapter names keys; of the text when it is not base64."""
    parts = (public_key or "").split()
    encoded = parts[1] if len(parts) >= 2 else public_key or ""
    try:
        blob = base64.b64decode(encoded.encode("ascii"), validate=True)
    except (binascii.Error, ValueError, UnicodeEncodeError):
        blob = encoded.encode("utf-8", "replace")
    return hashlib.sha256(blob).hexdigest()[:12]


def key_name(vm_name: str, public_key: str, journal_id: Optional[str]) -> str:
    """``gpuprov-<vm>-<key fingerprint prefix>[-j<8 hex of sha256(journal id)>]``."""
    return "gpuprov-%s-%s%s" % (vm_name, key_fingerprint(public_key), _journal_mark(journal_id))


def cleanable(name: Any, vm_name: str, journal_id: Optional[str]) -> bool:
    """Whether a key or script named ``name`` was made for ``vm_name`` by this journal (or
    before journal ids): another VM's (``<vm>-b``) or another journal's never is."""
    prefix = "gpuprov-%s-" % vm_name
    if not isinstance(name, str) or not name.startswith(prefix):
        return False
    found = re.fullmatch(r"[0-9a-f]{12}(-j[0-9a-f]{8})?", name[len(prefix):])
    return bool(found) and found.group(1) in (None, _journal_mark(journal_id))


def description(vm_name: str, journal_id: Optional[str]) -> str:
    """The instance description carrying the identity: ``gpuprov-vm-name=<vm>
    gpuprov-journal-id=<id>``, or the journal id alone when both do not fit in 100
    characters (the hostname is the VM name)."""
    full = "%s=%s" % (VM_NAME_TAG, vm_name)
    if journal_id:
        mark = "%s=%s" % (JOURNAL_ID_TAG, journal_id)
        if len(mark) > DESCRIPTION_MAX or any(c.isspace() for c in journal_id):
            raise ProviderError(ErrorKind.INVALID_REQUEST, "journal id %r does not fit Verda's %d-character "
                                "instance description" % (journal_id, DESCRIPTION_MAX))
        full = "%s %s" % (full, mark)
        return full if len(full) <= DESCRIPTION_MAX else mark
    return full


def carries_identity(text: Any, vm_name: str) -> bool:
    """Whether an instance description was written by this collection for ``vm_name``
    (an instance of the same hostname made by hand is never ours to adopt or delete)."""
    if not isinstance(text, str):
        return False
    words = text.split()
    return "%s=%s" % (VM_NAME_TAG, vm_name) in words or any(w.startswith(JOURNAL_ID_TAG + "=") for w in words)


def journal_of(text: Any) -> Optional[str]:
    """The journal id an instance description carries, None when it carries none."""
    found = _JOURNAL_IN_DESCRIPTION.search(text) if isinstance(text, str) else None
    return found.group(1) if found else None


# -- tags (api.verda.com/v1/docs, changelog 2026-09-11 "Resource tags") -------------------
#
# POST /v1/instances takes ``tags`` [{key (<= 63 chars, lowercased by the API), value
# (<= 127 chars)}], at most 10, and every instance read carries ``tags`` [{id, key, value}].
# The identity goes there too; the description stays the record for instances made before.

TAG_VALUE_MAX = 127


def identity_tags(vm_name: str, journal_id: Optional[str]) -> List[Dict[str, str]]:
    """``[{key: gpuprov-vm-name, value: <vm>}, {key: gpuprov-journal-id, value: <id>}]``
    (the journal id left out when longer than a tag value may be: the description has it)."""
    made = [{"key": VM_NAME_TAG, "value": vm_name}]
    if journal_id and len(journal_id) <= TAG_VALUE_MAX:
        made.append({"key": JOURNAL_ID_TAG, "value": journal_id})
    return made


def tag_value(instance: Dict[str, Any], key: str) -> Optional[str]:
    """The value of an instance's tag ``key`` (compared lowercased, as the API stores keys)."""
    tags = instance.get("tags")
    for tag in tags if isinstance(tags, list) else []:
        if isinstance(tag, dict) and str(tag.get("key") or "").lower() == key.lower():
            value = tag.get("value")
            return str(value) if value not in (None, "") else None
    return None


def ours(instance: Dict[str, Any], vm_name: str) -> bool:
    """Whether an instance was made by this collection for ``vm_name``: its hostname, and
    its description or its tags carrying the identity (a hand-made namesake never is)."""
    return instance.get("hostname") == vm_name and (
        carries_identity(instance.get("description"), vm_name) or tag_value(instance, VM_NAME_TAG) == vm_name)


def instance_journal(instance: Dict[str, Any]) -> Optional[str]:
    """The journal id an instance carries, in its description or its tags."""
    return journal_of(instance.get("description")) or tag_value(instance, JOURNAL_ID_TAG)
