# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""cloud-init user data for the AWS adapter: the SSH key and the boot script.

The document is ``#cloud-config`` followed by JSON (JSON is YAML, so cloud-init
reads it and no YAML library is needed), rendered deterministically: the same spec
gives the same bytes, which keeps RunInstances' ClientToken idempotency valid.
EC2 takes at most 16 KiB of user data; larger documents are gzipped (cloud-init
detects the gzip magic), and a document still too large is an InvalidRequest.
"""

from __future__ import annotations

import gzip
import json
from typing import Any, Dict, Optional, Union

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    BootScript, ErrorKind, InstanceSpec, ProviderError,
)

USER_DATA_LIMIT = 16 * 1024
BOOT_SCRIPT_PATH = "/var/lib/gpuprov/boot.sh"


def cloud_config(spec: InstanceSpec, user: str, image_user: str) -> Dict[str, Any]:
    """The cloud-config mapping: key for ``user``, then the boot script as root."""
    key = (spec.ssh_public_key or "").strip()
    if not key or "\n" in key or not key.split(" ", 1)[0].startswith(("ssh-", "ecdsa-", "sk-")):
        raise ProviderError(ErrorKind.INVALID_REQUEST,
                            "ssh_public_key: expected one OpenSSH public key line (ssh-ed25519 AAAA...)")
    config: Dict[str, Any] = {}
    if user == image_user:
        config["ssh_authorized_keys"] = [key]
    else:
        config["users"] = ["default", {
            "name": user, "shell": "/bin/bash", "sudo": "ALL=(ALL) NOPASSWD:ALL",
            "ssh_authorized_keys": [key],
        }]
    boot: Optional[BootScript] = spec.boot_script
    if isinstance(boot, dict):
        boot = BootScript.from_dict(boot)
    if boot is not None:
        # write_files + runcmd: the script (with its env exported) lands root-only,
        # because the env may carry secrets such as a k3s token.
        config["write_files"] = [{
            "path": BOOT_SCRIPT_PATH, "owner": "root:root", "permissions": "0700",
            "content": boot.to_shell(),
        }]
        config["runcmd"] = [[BOOT_SCRIPT_PATH]]
    return config


def render_user_data(spec: InstanceSpec, user: str, image_user: str) -> Union[str, bytes]:
    """User data for RunInstances (str, or gzip bytes when over the size limit)."""
    text = "#cloud-config\n" + json.dumps(cloud_config(spec, user, image_user), indent=1, sort_keys=True) + "\n"
    if len(text.encode("utf-8")) <= USER_DATA_LIMIT:
        return text
    packed = gzip.compress(text.encode("utf-8"), mtime=0)
    if len(packed) > USER_DATA_LIMIT:
        raise ProviderError(ErrorKind.INVALID_REQUEST,
                            "boot_script: the cloud-init user data is %d bytes gzipped; EC2 accepts %d"
                            % (len(packed), USER_DATA_LIMIT))
    return packed


def parse_user_data(data: Union[str, bytes]) -> Dict[str, Any]:
    """Inverse of render_user_data (tests and diagnose)."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    text = raw.decode("utf-8")
    if not text.startswith("#cloud-config\n"):
        raise ValueError("not a #cloud-config document")
    return json.loads(text.split("\n", 1)[1])
