"""Controller SSH: key generation, host key pinning, ssh_config blocks, and the real
login check against a local-cloud sshd."""

from __future__ import annotations

import os
import stat
import subprocess

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    InstanceSpec, Location, ResourceRequest, SshEndpoint,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.local import LocalProvider
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import ssh
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm.launch import HostKeyMismatch, SshNotReady


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_controller_key_is_generated_once_0600(tmp_path):
    key = tmp_path / "state" / "id_ed25519"
    public = ssh.ensure_controller_key(str(key))
    assert public.startswith("ssh-ed25519 ")
    assert _mode(key) == 0o600 and _mode(key.parent) == 0o700
    before = key.read_bytes()
    assert ssh.ensure_controller_key(str(key)) == public
    assert key.read_bytes() == before
    # ssh-keygen agrees the pair is valid OpenSSH.
    derived = subprocess.run(["ssh-keygen", "-y", "-f", str(key)], capture_output=True, text=True, check=True)
    assert derived.stdout.split()[1] == public.split()[1]


def test_public_key_of_a_user_key_without_pub_file(tmp_path):
    key = tmp_path / "mine"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    expected = (tmp_path / "mine.pub").read_text().split()[1]
    os.unlink(tmp_path / "mine.pub")
    assert ssh.public_key_of(str(key)).split()[1] == expected


def test_pin_records_first_key_and_refuses_another(tmp_path):
    files = ssh.ControllerFiles(str(tmp_path), str(tmp_path / "id"))
    files.pin("gpuprov-a-000000000001", "ssh-ed25519", "b25lb25l")
    files.pin("gpuprov-a-000000000001", "ssh-ed25519", "b25lb25l")   # same key: fine
    with pytest.raises(HostKeyMismatch) as info:
        files.pin("gpuprov-a-000000000001", "ssh-ed25519", "dHdvdHdv")
    assert "pinned" in str(info.value) and "presented" in str(info.value)
    assert files.known_key("gpuprov-a-000000000001") == ("ssh-ed25519", "b25lb25l")
    assert _mode(files.known_hosts) == 0o600


def test_ssh_config_blocks_and_removal_touch_only_their_vm(tmp_path):
    files = ssh.ControllerFiles(str(tmp_path), str(tmp_path / "id"))
    vm = {"name": "a", "ssh": {"host": "10.0.0.1", "port": 22, "user": "ubuntu"}, "host_key_alias": "gpuprov-a-0123456789ab"}
    other = {"name": "a-b", "ssh": {"host": "10.0.0.2", "port": 2222, "user": "root"},
             "host_key_alias": "gpuprov-a-b-0123456789ab"}
    files.write_vm(vm)
    files.write_vm(other)
    files.write_vm(dict(vm, ssh={"host": "10.0.0.9", "port": 22, "user": "ubuntu"}))   # rewrite in place
    files.pin(vm["host_key_alias"], "ssh-ed25519", "AAAAa")
    files.pin(other["host_key_alias"], "ssh-ed25519", "AAAAb")
    text = open(files.ssh_config).read()
    assert text.count("Host a\n") == 1 and "HostName 10.0.0.9" in text and "10.0.0.1" not in text
    assert "HostKeyAlias gpuprov-a-b-0123456789ab" in text and _mode(files.ssh_config) == 0o600
    files.remove_vm("a")
    text = open(files.ssh_config).read()
    assert "Host a\n" not in text and "Host a-b\n" in text
    assert files.known_key(vm["host_key_alias"]) is None
    assert files.known_key(other["host_key_alias"]) == ("ssh-ed25519", "AAAAb")


@pytest.fixture
def local_vm(tmp_path):
    if not os.path.exists("/usr/sbin/sshd"):
        pytest.skip("needs openssh-server")
    key = str(tmp_path / "id_ed25519")
    public = ssh.ensure_controller_key(key)
    provider = LocalProvider({"root": str(tmp_path / "local")})
    spec = InstanceSpec(vm_name="sshcheck", ssh_public_key=public)
    offer = provider.plan(ResourceRequest(vm_name="sshcheck"))[0]
    instance = provider.create(offer, provider.prepare(offer, spec), spec)
    location = Location("local", "local")
    try:
        yield provider, location, instance, ssh.ControllerFiles(str(tmp_path), key)
    finally:
        provider.delete(location, "sshcheck", [instance])


def _endpoint(provider, location, instance):
    found = [o for o in provider.observe(location, "sshcheck") if o.instance_id == instance]
    return found[0].endpoint


def test_ssh_check_logs_in_and_pins(local_vm):
    provider, location, instance, files = local_vm
    checker = ssh.SshChecker(files, timeout=5)
    endpoint = _endpoint(provider, location, instance)
    for _attempt in range(200):     # sshd may need a moment to bind after create
        try:
            fingerprint = checker(endpoint, "gpuprov-sshcheck-000000000000")
            break
        except SshNotReady:
            continue
    else:
        pytest.fail("sshd never accepted the login")
    assert fingerprint.startswith("ssh-ed25519 SHA256:")
    assert files.known_key("gpuprov-sshcheck-000000000000")[0] == "ssh-ed25519"
    assert checker(endpoint, "gpuprov-sshcheck-000000000000") == fingerprint   # pinned key matches


def test_ssh_check_refuses_a_changed_host_key(local_vm):
    provider, location, instance, files = local_vm
    files.pin("gpuprov-sshcheck-000000000000", "ssh-ed25519",
              "AAAAC3NzaC1lZDI1NTE5AAAAIB7k2nRbRwx9ZLMWKp3yjhQ8p0h5l3Y2rT7a0mK5Xy0a")
    checker = ssh.SshChecker(files, timeout=5)
    endpoint = _endpoint(provider, location, instance)
    for _attempt in range(200):
        try:
            checker(endpoint, "gpuprov-sshcheck-000000000000")
        except SshNotReady:
            continue
        except HostKeyMismatch as exc:
            assert "pinned" in str(exc)
            return
        pytest.fail("a changed host key was accepted")
    pytest.fail("sshd never answered")


def test_ssh_check_wrong_user_is_not_ready(local_vm):
    provider, location, instance, files = local_vm
    checker = ssh.SshChecker(files, timeout=5)
    endpoint = _endpoint(provider, location, instance)
    wrong = SshEndpoint(endpoint.host, endpoint.port, "gpuprov-nobody")
    with pytest.raises(SshNotReady):
        checker(wrong, "gpuprov-sshcheck-000000000001")


def test_ssh_check_refused_port_is_not_ready(tmp_path):
    files = ssh.ControllerFiles(str(tmp_path), str(tmp_path / "id"))
    ssh.ensure_controller_key(files.key_path)
    with pytest.raises(SshNotReady) as info:
        ssh.SshChecker(files, timeout=2)(SshEndpoint("127.0.0.1", 1, "root"), "gpuprov-x-000000000000")
    assert "connect" in str(info.value)
