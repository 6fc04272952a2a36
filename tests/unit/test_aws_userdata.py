"""cloud-init rendering of the AWS adapter: deterministic, size-limited, parseable."""

from __future__ import annotations

import gzip
import os

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.aws.userdata import (
    BOOT_SCRIPT_PATH, USER_DATA_LIMIT, cloud_config, parse_user_data, render_user_data,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    BootScript, ErrorKind, InstanceSpec, ProviderError,
)

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIUserDataTestKey user@test"


def test_key_only_for_the_image_user():
    text = render_user_data(InstanceSpec(vm_name="u1", ssh_public_key=KEY), "ubuntu", "ubuntu")
    assert isinstance(text, str) and text.startswith("#cloud-config\n")
    assert parse_user_data(text) == {"ssh_authorized_keys": [KEY]}


def test_boot_script_with_env_in_a_root_only_file():
    spec = InstanceSpec(vm_name="u2", ssh_public_key=KEY,
                        boot_script=BootScript("set -e\necho \"$A\"", {"A": "it's", "B": "2"}))
    config = parse_user_data(render_user_data(spec, "ubuntu", "ubuntu"))
    assert config["write_files"] == [{
        "path": BOOT_SCRIPT_PATH, "owner": "root:root", "permissions": "0700",
        "content": "#!/bin/sh\nexport A='it'\"'\"'s'\nexport B='2'\nset -e\necho \"$A\"",
    }]
    assert config["runcmd"] == [[BOOT_SCRIPT_PATH]]


def test_boot_script_as_a_dict_from_the_journal():
    spec = InstanceSpec.from_dict({"vm_name": "u3", "ssh_public_key": KEY,
                                   "boot_script": {"script": "echo hi", "env": {}}})
    assert cloud_config(spec, "ubuntu", "ubuntu")["write_files"][0]["content"] == "#!/bin/sh\necho hi"


def test_rendering_is_deterministic():
    spec = InstanceSpec(vm_name="u4", ssh_public_key=KEY, boot_script=BootScript("x" * 40000, {"Z": "1", "A": "2"}))
    first = render_user_data(spec, "ubuntu", "ubuntu")
    assert first == render_user_data(spec, "ubuntu", "ubuntu")


def test_large_documents_are_gzipped_under_the_limit():
    spec = InstanceSpec(vm_name="u5", ssh_public_key=KEY, boot_script=BootScript("echo k3s\n" * 5000))
    data = render_user_data(spec, "ubuntu", "ubuntu")
    assert isinstance(data, bytes) and data[:2] == b"\x1f\x8b" and len(data) <= USER_DATA_LIMIT
    assert gzip.decompress(data).startswith(b"#cloud-config\n")
    assert parse_user_data(data)["write_files"][0]["content"].endswith("echo k3s\n")


def test_incompressible_oversize_is_invalid():
    spec = InstanceSpec(vm_name="u6", ssh_public_key=KEY, boot_script=BootScript(os.urandom(20000).hex()))
    with pytest.raises(ProviderError) as info:
        render_user_data(spec, "ubuntu", "ubuntu")
    assert info.value.kind == ErrorKind.INVALID_REQUEST and info.value.msg.startswith("boot_script")


@pytest.mark.parametrize("key", ["", "not a key", KEY + "\n" + KEY, "-----BEGIN OPENSSH PRIVATE KEY-----"])
def test_bad_keys_are_rejected(key):
    with pytest.raises(ProviderError) as info:
        cloud_config(InstanceSpec(vm_name="u7", ssh_public_key=key), "ubuntu", "ubuntu")
    assert info.value.kind == ErrorKind.INVALID_REQUEST and info.value.msg.startswith("ssh_public_key")


def test_parse_rejects_other_documents():
    with pytest.raises(ValueError):
        parse_user_data("#!/bin/sh\necho not cloud-config")
