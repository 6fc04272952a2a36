# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Nebius names: platforms to canonical GPUs, the names gpuprov gives its resources,
and the cloud-init user data that carries the login user, its key and the boot script
(Nebius has no SSH-key resource: keys reach a VM only through cloud-init)."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from typing import Dict, List, Optional, Tuple

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import BootScript, ProviderError
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.gpus import canonical_gpu

# Platform id -> canonical GPU (platform ids as PlatformService.List and the docs name them).
PLATFORM_GPUS: Dict[str, str] = {
    "gpu-h100-sxm": "H100",
    "gpu-h200-sxm": "H200",
    "gpu-b200-sxm": "B200",
    "gpu-b200-sxm-a": "B200",
    "gpu-b300-sxm": "B300",
    "gpu-gb200-nvl72": "GB200",
    "gpu-gb300-nvl72": "GB300",
    "gpu-l40s-a": "L40S",
    "gpu-l40s-d": "L40S",
    "gpu-rtx6000-pro": "RTXPRO6000",
}
BOOT_SCRIPT_PATH = "/var/lib/gpuprov/boot.sh"
_GPU_IN_NAME = re.compile(r"^gpu-([a-z0-9]+?)(?:-sxm|-nvl\d*|-pcie|-[a-z])?(?:-.*)?$")


def gpu_of(platform_id: str, human_name: str = "") -> Optional[str]:
    """The canonical GPU of a platform, None for a CPU platform or one not known here."""
    if platform_id in PLATFORM_GPUS:
        return PLATFORM_GPUS[platform_id]
    if not platform_id.startswith("gpu-"):
        return None
    match = _GPU_IN_NAME.match(platform_id)
    for guess in ((match.group(1),) if match else ()) + tuple(human_name.replace("NVIDIA", "").split()):
        try:
            found = canonical_gpu(guess.upper())
        except ProviderError:  # an unknown name is not this platform's GPU
            continue
        if found:
            return found
    return None


def security_group_name(vm: str, journal_id: Optional[str]) -> str:
    """The VM's security group: per VM and journal, so another journal's cleanup never takes it."""
    if not journal_id:
        return "gpuprov-%s" % vm
    return "gpuprov-%s-j%s" % (vm, hashlib.sha256(journal_id.encode()).hexdigest()[:8])


def boot_disk_name(vm: str) -> str:
    return "%s-boot" % vm


def cloud_init(user: str, public_key: str, boot_script: Optional[BootScript]) -> str:
    """``#cloud-config`` making ``user`` with the key (sudo without password) and running the
    boot script once (written to BOOT_SCRIPT_PATH, then run by runcmd). JSON is YAML, so
    every value is quoted safely."""
    config: Dict[str, object] = {"users": ["default", {
        "name": user, "sudo": "ALL=(ALL) NOPASSWD:ALL", "shell": "/bin/bash",
        "ssh_authorized_keys": [public_key.strip()]}]}
    if boot_script is not None:
        config["write_files"] = [{"path": BOOT_SCRIPT_PATH, "permissions": "0755", "encoding": "b64",
                                  "content": base64.b64encode(boot_script.to_shell().encode()).decode()}]
        config["runcmd"] = [[BOOT_SCRIPT_PATH]]
    return "#cloud-config\n" + json.dumps(config, indent=1, sort_keys=True) + "\n"


def authorized_keys(user_data: str) -> List[Tuple[str, str]]:
    """(user, key) pairs a cloud-config made by :func:`cloud_init` authorises (for diagnose and tests)."""
    if not user_data.startswith("#cloud-config"):
        return []
    try:
        config = json.loads(user_data.split("\n", 1)[1])
    except ValueError:
        return []
    return [(u.get("name"), k) for u in config.get("users") or [] if isinstance(u, dict)
            for k in u.get("ssh_authorized_keys") or []]


def public_address(address: str) -> str:
    """``a.b.c.d/32`` as Nebius reports it -> ``a.b.c.d``."""
    return (address or "").split("/", 1)[0]
