# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Prime Intellect's vocabulary: its GPU type names, its availability items read into
offers, its pod statuses, its ``sshConnection`` string, and the names gpuprov gives
pods and SSH keys (which carry the VM identity: Prime pods and keys have no tags)."""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from typing import Any, Dict, List, Optional, Tuple

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    ErrorKind, Offer, ProviderError, SshEndpoint, Status,
)

CLOUD = "primeintellect"

# Prime's gpuType (the GPUType enum of its OpenAPI) -> canonical name in providers/gpus.py.
# Types with no canonical name (A30, RTX3090Ti, RTX3070/3080, P100...) are left out: plan
# never offers them. GH200 superchips are listed by total memory (96, 480, 624 GB): one GPU.
GPU_TYPES = {
    "T4_16GB": "T4", "L4_24GB": "L4", "A10_24GB": "A10", "L40_48GB": "L40", "L40S_48GB": "L40S",
    "A40_48GB": "A40", "A6000_48GB": "A6000", "RTX4090_24GB": "RTX4090", "RTX6000Ada_48GB": "RTX6000ADA",
    "V100_16GB": "V100", "V100_32GB": "V100-32GB", "A100_40GB": "A100", "A100_80GB": "A100-80GB",
    "H100_80GB": "H100", "H200_141GB": "H200", "GH200_96GB": "GH200", "GH200_480GB": "GH200",
    "GH200_624GB": "GH200", "B200_180GB": "B200", "B300_262GB": "B300", "MI300X_192GB": "MI300X",
    "A4000_16GB": "A4000", "A4500_20GB": "A4500", "A5000_24GB": "A5000", "RTX3090_24GB": "RTX3090",
    "RTX4080_16GB": "RTX4080", "RTX5090_32GB": "RTX5090", "RTX6000_24GB": "RTX6000",
    "RTX_PRO_6000B_96GB": "RTXPRO6000",
}
CPU_NODE = "CPU_NODE"
# Pods are single nodes; larger asks go to multi-node clusters, which gpuprov does not make.
MAX_GPUS_PER_POD = 16

# stockStatus values Prime documents or shows: Available, High, Medium, Low. Anything that
# says there is none is an offer that exists without capacity now.
OUT_OF_STOCK = frozenset(("unavailable", "none", "out of stock", "out_of_stock", "sold out", ""))


def vendor_types(canonical: Optional[str]) -> List[str]:
    """Prime's gpuType names for a canonical GPU (``[CPU_NODE]`` for no GPU)."""
    if canonical is None:
        return [CPU_NODE]
    return sorted(t for t, name in GPU_TYPES.items() if name == canonical)


def _price(item: Dict[str, Any]) -> Optional[float]:
    """The pod's hourly price, the configuration's (all of its ``gpuCount`` GPUs) as Prime's CLI
    shows it: a community-cloud offer's ``prices.communityPrice`` (the CLI's ``Prices.price``
    reads it first), a secure-cloud offer's ``prices.onDemand``; the other when that is null."""
    prices = item.get("prices") or {}
    fields = ("onDemand", "communityPrice")
    if item.get("security") == "community_cloud":
        fields = fields[::-1]
    for field in fields:
        value = prices.get(field)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
            return float(value)
    return None


def region_of(item: Dict[str, Any]) -> str:
    """The offer's region: its data center, else its country."""
    return str(item.get("dataCenter") or item.get("country") or "global")


def instance_type(item: Dict[str, Any]) -> str:
    """``<provider>/<count>x<gpuType>/<cloudId>`` (plus ``/spot``, ``/community``): one
    configuration of one underlying provider, unique within a region."""
    name = "%s/%sx%s/%s" % (item.get("provider") or "prime", item.get("gpuCount"), item.get("gpuType"),
                            item.get("cloudId"))
    if item.get("isSpot"):
        name += "/spot"
    if item.get("security") == "community_cloud":
        name += "/community"
    return name


def offer_from(item: Dict[str, Any], image: str) -> Optional[Offer]:
    """One availability item as an Offer, or None when it lacks what create needs."""
    cloud_id, gpu_type, provider = item.get("cloudId"), item.get("gpuType"), item.get("provider")
    if not cloud_id or not gpu_type or not provider or not isinstance(item.get("gpuCount"), int):
        return None
    stock = item.get("stockStatus")
    reason = None
    if stock is None or str(stock).strip().lower() in OUT_OF_STOCK:
        reason = "stockStatus %s at %s (%s)" % (stock, region_of(item), provider)
    images = item.get("images") or []
    if reason is None and images and image not in images:
        reason = "image %s is not offered here (offered: %s)" % (image, ", ".join(map(str, images)))
    price = _price(item)
    if reason is None and price is None:
        reason = "no on-demand price listed"
    return Offer(
        cloud=CLOUD, region=region_of(item), instance_type=instance_type(item),
        gpu=GPU_TYPES.get(gpu_type), gpu_count=0 if gpu_type == CPU_NODE else item["gpuCount"],
        price_per_hour=price, spot=bool(item.get("isSpot")), available=reason is None,
        unavailable_reason=reason,
        detail={"cloud_id": cloud_id, "gpu_type": gpu_type, "gpu_count": item["gpuCount"],
                "socket": item.get("socket"), "provider": provider, "data_center": item.get("dataCenter"),
                "country": item.get("country"), "prime_region": item.get("region"), "security": item.get("security"),
                "image": image,
                "stock_status": stock, "price_basis": "per pod per hour"},
    )


def ordered(offers: List[Offer]) -> List[Offer]:
    """Available first, cheapest first, unpriced last; one offer per offer id (the best)."""
    ranked = sorted(offers, key=lambda o: (not o.available, o.price_per_hour is None,
                                           o.price_per_hour or 0.0, o.offer_id))
    seen, result = set(), []
    for offer in ranked:
        if offer.offer_id not in seen:
            seen.add(offer.offer_id)
            result.append(offer)
    return result


# -- identity in names ------------------------------------------------------------------
#
# Prime pods and SSH keys have no tags, labels or description, and a pod does not return
# the envVars it was made with, so the identity lives in the name: the VM name, then '-'
# and the journal id as a token. Prime's CLI takes pod names of letters, digits and dashes
# with at least one letter (its API documents no rule, and neither states a length), so the
# token is ``j<journal id>`` for an id of 8 or more lowercase hex digits (the uuid4 hex a
# gpuprov journal has), else ``x<the id's UTF-8 bytes in hex>``. The token holds no '-', so
# the last '-' of a name ends the VM name; another journal's observe reads the whole id back.
# A name needs the token's shape (``j`` and 8+ hex digits, or ``x`` and 2+ printable bytes)
# to pass for gpuprov's, so a pod named ``train-jupyter`` is nobody's journal. A pod named
# exactly the VM name was made before journal ids.
#
# Names made before these, ``<vm>.<journal id>`` (a VM name is a DNS label, so it never
# holds a '.': the split is unambiguous), are still read: observe adopts such a pod, delete
# and the sweep take it, cleanup removes such a key.

LEGACY_SEPARATOR = "."
_HEX_ID = re.compile(r"^[0-9a-f]{8,}$")
_TOKEN = re.compile(r"^(?:j(?P<id>[0-9a-f]{8,})|x(?P<hex>(?:[0-9a-f]{2}){2,}))$")


def name_allowed(name: str) -> bool:
    """Prime's CLI rule for a pod name (``prime pods create``): letters, digits and dashes, at least one letter."""
    return bool(name) and any(c.isalpha() for c in name) and all(c.isalnum() or c == "-" for c in name)


def journal_token(journal_id: str) -> str:
    """The journal id as a name token inside the CLI's rule and without '-' (see above)."""
    if _HEX_ID.match(journal_id):
        return "j" + journal_id
    return "x" + journal_id.encode("utf-8").hex()


def token_journal(token: str) -> Optional[str]:
    """The journal id a name token carries, None for a string that is no token."""
    found = _TOKEN.match(token)
    if not found:
        return None
    if found.group("id"):
        return found.group("id")
    try:
        text = bytes.fromhex(found.group("hex")).decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text if text.isprintable() else None


def pod_name(vm_name: str, journal_id: Optional[str]) -> str:
    """``<vm>-<journal token>`` (``<vm>`` without a journal id); InvalidRequest for a name Prime's rule refuses."""
    name = vm_name + "-" + journal_token(journal_id) if journal_id else vm_name
    if not name_allowed(name):
        raise ProviderError(ErrorKind.INVALID_REQUEST, "name: %r cannot be a primeintellect pod name (letters, "
                                                       "digits and dashes, at least one letter)" % (name,))
    return name


def parse_pod_name(name: Any) -> Optional[Tuple[str, str]]:
    """``(VM name, journal id)`` of a pod name carrying a journal, ``<vm>-<journal token>`` or the legacy
    ``<vm>.<journal id>``; None for any other name (a bare VM name included)."""
    if not isinstance(name, str):
        return None
    if LEGACY_SEPARATOR in name:
        vm, _sep, journal_id = name.partition(LEGACY_SEPARATOR)
        return (vm, journal_id) if vm and journal_id else None
    vm, _sep, token = name.rpartition("-")
    journal_id = token_journal(token) if vm else None
    return (vm, journal_id) if journal_id else None


def pod_identity(name: Any, vm_name: str) -> Tuple[bool, Optional[str]]:
    """``(is a pod of vm_name, the journal id its name carries or None)``. A pod named exactly the VM
    (made before journal ids) is ours with none. (For VM ``a``, ``a-j<hex>`` is journal ``<hex>``'s pod,
    which a journal-less VM named ``a-j<hex>`` would also take for its own.)"""
    if name == vm_name:
        return True, None
    parsed = parse_pod_name(name)
    if parsed and parsed[0] == vm_name:
        return True, parsed[1]
    return False, None


def key_fingerprint(public_key: str) -> str:
    """The first 12 hex digits of the SHA-256 of the decoded key blob (of its text, when it is
    not base64: sshd judges the material, the name only needs to be stable per key)."""
    parts = (public_key or "").split()
    if len(parts) < 2:
        raise ProviderError(ErrorKind.INVALID_REQUEST, "ssh_public_key: expected an OpenSSH public key line "
                                                       "('<type> <base64> [comment]')")
    try:
        blob = base64.b64decode(parts[1].encode("ascii"), validate=True)
    except (binascii.Error, ValueError, UnicodeEncodeError):
        blob = parts[1].encode("utf-8", "replace")
    return hashlib.sha256(blob).hexdigest()[:12]


def same_key(a: Any, b: str) -> bool:
    """Whether two public key lines hold the same key material (type and blob)."""
    if not isinstance(a, str):
        return False
    return a.split()[:2] == b.split()[:2]


def key_name(vm_name: str, public_key: str, journal_id: Optional[str]) -> str:
    """``gpuprov-<vm>-<fingerprint prefix>``, then '-' and the journal token."""
    name = "gpuprov-%s-%s" % (vm_name, key_fingerprint(public_key))
    return name + "-" + journal_token(journal_id) if journal_id else name


# A key gpuprov registered: ``gpuprov-<vm>-<12 hex>``, then ``-<journal token>`` or the legacy ``.<journal id>``
# (a token starts with j or x, neither a hex digit, so the 12 hex digits end the VM name).
_KEY_RE = re.compile(r"^gpuprov-(?P<vm>[a-z0-9-]+)-[0-9a-f]{12}(?:-(?P<token>[jx][0-9a-f]+)|\.(?P<legacy>.+))?$")


def parse_key_name(name: Any) -> Optional[Tuple[str, Optional[str]]]:
    """``(VM name, journal id or None)`` of a key name gpuprov gave; None for any other name."""
    found = _KEY_RE.match(name) if isinstance(name, str) else None
    if not found:
        return None
    if found.group("token"):
        journal_id = token_journal(found.group("token"))
        return (found.group("vm"), journal_id) if journal_id else None
    return found.group("vm"), found.group("legacy")


def key_owner(name: Any, vm_name: str) -> Tuple[bool, Optional[str]]:
    """``(a key gpuprov registered for vm_name, the journal id its name carries or None)``."""
    parsed = parse_key_name(name)
    if parsed and parsed[0] == vm_name:
        return True, parsed[1]
    return False, None


# -- pods -------------------------------------------------------------------------------

_PENDING = ("PROVISIONING", "PENDING", "INSTALLING")
_INSTALL_FAILED = ("ERROR", "FAILED")
_INSTALL_DONE = ("FINISHED", "COMPLETED", "DONE")


def pod_status(pod: Dict[str, Any]) -> Tuple[Optional[str], Optional[str]]:
    """``(normalised status, reason)``; status None for a pod that is gone (TERMINATED)."""
    status = str(pod.get("status") or "").upper()
    install = str(pod.get("installationStatus") or "").upper()
    failure = pod.get("installationFailure")
    if status == "TERMINATED":
        return None, None
    if status == "ERROR" or install in _INSTALL_FAILED:
        return Status.FAILED, "Prime pod status %s%s" % (status, (": %s" % failure) if failure else "")
    if status == "DELETING":
        return Status.TERMINATING, None
    if status == "STOPPED":
        return Status.STOPPED, None
    if status == "ACTIVE":
        # The CLI calls a pod ready once ACTIVE and its installation FINISHED.
        if install and install not in _INSTALL_DONE:
            return Status.PENDING, "ACTIVE, installation %s (%s%%)" % (install, pod.get("installationProgress"))
        return Status.RUNNING, None
    if status in _PENDING:
        return Status.PENDING, None
    return Status.PENDING, "unknown Prime pod status %r" % (pod.get("status"),)


def _first(value: Any) -> Optional[str]:
    """A connection field that may be a string, a list (multi-node; ``[null]`` before
    it is known) or null: its first non-empty string."""
    values = value if isinstance(value, list) else [value]
    for item in values:
        if isinstance(item, str) and item.strip():
            return item.strip()
    return None


_SSH_RE = re.compile(r"^(?:ssh\s+)?(?P<user>[^@\s]+)@(?P<host>[^\s:]+)(?P<rest>.*)$")
_PORT_RE = re.compile(r"(?:^|\s)-p\s*(?P<port>\d+)(?:\s|$)")


def ssh_endpoint(pod: Dict[str, Any]) -> Optional[SshEndpoint]:
    """The endpoint from ``sshConnection`` ("root@1.2.3.4 -p 22": user, host, port; no
    ``-p`` means 22), the string Prime's own CLI (``prime pods ssh``) connects with; ``ip``
    only stands in for a host the string lacks. None until user, host and port are known."""
    connection = _first(pod.get("sshConnection"))
    if not connection:
        return None
    found = _SSH_RE.match(connection)
    if not found:
        return None
    port_found = _PORT_RE.search(found.group("rest"))
    port = int(port_found.group("port")) if port_found else 22
    host = found.group("host") or _first(pod.get("ip"))
    if not host or not 0 < port < 65536:
        return None
    return SshEndpoint(host=host, port=port, user=found.group("user"))
