# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""RunPod's GPU type ids -> canonical GPU names, the identity a pod carries in its
environment, the SSH key line the pod gets (and the account registers), and the pod's
SSH endpoint.

GPU ids are RunPod's ``GpuType.id`` (docs: references/gpu-types, the ids pod create
takes). Ids without a canonical name in providers/gpus.py are not offered.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from typing import Any, Dict, Optional, Tuple

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    ErrorKind, ProviderError, SshEndpoint,
)

GPU_IDS = {
    "AMD Instinct MI300X OAM": "MI300X",
    "NVIDIA RTX 4000 SFF Ada Generation": "RTX4000ADA",
    "NVIDIA RTX PRO 4500 Blackwell": "RTXPRO4500",
    "NVIDIA A100 80GB PCIe": "A100-80GB",
    "NVIDIA A100-SXM4-80GB": "A100-80GB",
    "NVIDIA A40": "A40",
    "NVIDIA B200": "B200",
    "NVIDIA B300 SXM6 AC": "B300",
    "NVIDIA GeForce RTX 3090": "RTX3090",
    "NVIDIA GeForce RTX 4080": "RTX4080",
    "NVIDIA GeForce RTX 4090": "RTX4090",
    "NVIDIA GeForce RTX 5090": "RTX5090",
    "NVIDIA H100 80GB HBM3": "H100",
    "NVIDIA H100 PCIe": "H100",
    "NVIDIA H100 NVL": "H100-NVL",
    "NVIDIA H200": "H200",
    "NVIDIA L4": "L4",
    "NVIDIA L40": "L40",
    "NVIDIA L40S": "L40S",
    "NVIDIA RTX 6000 Ada Generation": "RTX6000ADA",
    "NVIDIA RTX A4000": "A4000",
    "NVIDIA RTX A4500": "A4500",
    "NVIDIA RTX A5000": "A5000",
    "NVIDIA RTX A6000": "A6000",
    "NVIDIA RTX PRO 6000 Blackwell Server Edition": "RTXPRO6000",
    "NVIDIA RTX PRO 6000 Blackwell Workstation Edition": "RTXPRO6000",
    "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition": "RTXPRO6000",
    "Tesla V100-PCIE-16GB": "V100",
    "Tesla V100-SXM2-16GB": "V100",
    "Tesla V100-SXM2-32GB": "V100-32GB",
    "Tesla V100-PCIE-32GB": "V100-32GB",
    "Tesla T4": "T4",
    "NVIDIA A30": "A30",
    "NVIDIA H200 NVL": "H200-NVL",
    "NVIDIA RTX 2000 Ada Generation": "RTX2000ADA",
    "NVIDIA RTX 4000 Ada Generation": "RTX4000ADA",
    "NVIDIA RTX 5000 Ada Generation": "RTX5000ADA",
    "NVIDIA GeForce RTX 5080": "RTX5080",
}

# Catalog stock levels, best first.
AVAILABILITY_RANK = {"HIGH": 0, "MEDIUM": 1, "LOW": 2, "NONE": 3}

# Pods have no tags: the identity rides in the pod's environment, which GET returns.
VM_NAME_ENV = "GPUPROV_VM_NAME"
JOURNAL_ID_ENV = "GPUPROV_JOURNAL_ID"
# The container convention RunPod's images follow: sshd authorises the keys in this variable.
PUBLIC_KEY_ENV = "PUBLIC_KEY"

# What the v2 API accepts as a key line (UpdateSshKeysRequest's pattern), without the comment.
_KEY_TYPE = re.compile(r"^(ssh|ecdsa|sk)-[^\s]+$")
DEFAULT_SSH_USER = "root"


def canonical(gpu_id: Any) -> Optional[str]:
    """The canonical name of a RunPod GPU type id; None for one this adapter does not offer."""
    return GPU_IDS.get(gpu_id) if isinstance(gpu_id, str) else None


def instance_type(gpu_id: str, count: int) -> str:
    """The offer's instance type: the GPU type id and the count (``NVIDIA L4 x2``)."""
    return "%s x%d" % (gpu_id, count)


def key_line(vm_name: str, public_key: str) -> Dict[str, str]:
    """The controller's key as the pod gets it: ``<type> <blob> gpuprov-<vm>-<12 hex>``, the
    comment naming the VM and the first 12 hex of the sha256 of the decoded key blob (of
    its text, when it is not base64)."""
    parts = (public_key or "").split()
    if len(parts) < 2 or not _KEY_TYPE.match(parts[0]):
        raise ProviderError(ErrorKind.INVALID_REQUEST,
                            "ssh_public_key: expected an OpenSSH public key line ('<type> <base64> [comment]')")
    try:
        blob = base64.b64decode(parts[1].encode("ascii"), validate=True)
    except (binascii.Error, ValueError, UnicodeEncodeError):
        # Not our call to judge the material (sshd will); the name stays stable per key.
        blob = parts[1].encode("utf-8", "replace")
    name = "gpuprov-%s-%s" % (vm_name, hashlib.sha256(blob).hexdigest()[:12])
    return {"name": name, "line": "%s %s %s" % (parts[0], parts[1], name)}


_KEY_NAME = re.compile(r"^gpuprov-(?P<vm>.+)-[0-9a-f]{12}$")


def material(line: Any) -> Optional[Tuple[str, str]]:
    """``(type, base64 blob)`` of an authorized_keys line; None for one that is not a key."""
    parts = line.split() if isinstance(line, str) else []
    return (parts[0], parts[1]) if len(parts) >= 2 and _KEY_TYPE.match(parts[0]) else None


def key_vm(line: Any) -> Optional[str]:
    """The VM a registered line belongs to: its comment is ``gpuprov-<vm>-<12 hex>`` (else None)."""
    parts = line.split(None, 2) if isinstance(line, str) else []
    found = _KEY_NAME.match(parts[2].strip()) if len(parts) == 3 else None
    return found.group("vm") if found else None


def ssh_endpoint(pod: Dict[str, Any]) -> Optional[SshEndpoint]:
    """The pod's direct SSH endpoint: ``ssh.direct`` (host, port, username), else the
    runtime port whose private side is 22/tcp (ip, public). None until both the host and
    the public port are known; the proxy (``ssh.runpod.io``) is never used: it carries an
    interactive shell only (no scp, sftp or port forwarding)."""
    direct = (pod.get("ssh") or {}).get("direct") if isinstance(pod.get("ssh"), dict) else None
    if isinstance(direct, dict):
        host, port = direct.get("host"), direct.get("port")
        if _usable(host, port):
            return SshEndpoint(host=host, port=int(port), user=direct.get("username") or DEFAULT_SSH_USER)
    runtime = pod.get("runtime") if isinstance(pod.get("runtime"), dict) else {}
    for mapping in runtime.get("ports") or []:
        if not isinstance(mapping, dict) or mapping.get("private") != 22 or mapping.get("type") != "tcp":
            continue
        if _usable(mapping.get("ip"), mapping.get("public")):
            return SshEndpoint(host=mapping["ip"], port=int(mapping["public"]), user=DEFAULT_SSH_USER)
    return None


def _usable(host: Any, port: Any) -> bool:
    return (isinstance(host, str) and bool(host.strip()) and isinstance(port, int) and not isinstance(port, bool)
            and 0 < port < 65536)
