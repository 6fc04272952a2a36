"""Controller SSH: key generation, host key pinning, ssh_config blocks, and the real
login check against a local-cloud sshd."""

from __future__ import annotations

import os
import pwd
import stat
import subprocess
import threading
import time

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.private_files import PrivateFileError
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    InstanceSpec, Location, ResourceRequest, SshEndpoint,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.local import LocalProvider
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import ssh
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm.launch import HostKeyMismatch, SshNotReady


# How long a just-created local VM's sshd may take to listen (long on a loaded CI machine).
SSHD_START_S = 60


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


def test_public_key_fingerprint_is_what_ssh_keygen_prints(tmp_path):
    key = tmp_path / "mine"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    printed = subprocess.run(["ssh-keygen", "-l", "-E", "sha256", "-f", str(key) + ".pub"], capture_output=True,
                             text=True, check=True).stdout.split()[1]
    assert ssh.public_key_fingerprint(ssh.public_key_of(str(key))) == printed
    assert ssh.public_key_fingerprint("ssh-ed25519 not*base64") is None
    assert ssh.public_key_fingerprint("") is None


def _row(name, alias, key, port=2222, status="running"):
    return {"name": name, "host_key_alias": alias, "ssh_host": "10.0.0.1", "ssh_port": port, "ssh_user": "ubuntu",
            "status": status, "detail": {"host_key": {"type": "ssh-ed25519", "key": key} if key else None}}


def test_known_hosts_and_ssh_config_are_generated_from_the_journal(tmp_path):
    files = ssh.ControllerFiles(str(tmp_path / "fresh"), str(tmp_path / "key"))
    rows = [_row("a", "gpuprov-a-000000000001", "AAAAa"),
            _row("b", "gpuprov-b-000000000002", "AAAAb", status="leaked"),
            _row("c", "gpuprov-c-000000000003", None)]
    files.write_from_journal(lambda: rows)
    assert files.known_key("gpuprov-a-000000000001") == ("ssh-ed25519", "AAAAa")
    assert files.known_key("gpuprov-b-000000000002") is None          # not running: not reachable
    config = open(files.ssh_config).read()
    assert "Host a\n    HostName 10.0.0.1\n    Port 2222\n" in config and "Host b" not in config
    assert "IdentityFile %s\n" % files.key_path in config and "HostKeyAlias gpuprov-a-000000000001" in config
    assert _mode(files.known_hosts) == 0o600 and _mode(files.ssh_config) == 0o600

    # The journal wins over a stale pin; a pin the journal does not know yet (a VM between its
    # first contact and Ready) is kept.
    files.pin("gpuprov-d-000000000004", "ssh-ed25519", "AAAAd")
    files.write_from_journal(lambda: [_row("a", "gpuprov-a-000000000001", "AAAAz", port=2200)])
    assert files.known_key("gpuprov-a-000000000001") == ("ssh-ed25519", "AAAAz")
    assert files.known_key("gpuprov-d-000000000004") == ("ssh-ed25519", "AAAAd")
    assert open(files.ssh_config).read().count("Host a\n") == 1 and "Port 2200" in open(files.ssh_config).read()


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
    deadline = time.monotonic() + SSHD_START_S    # sshd may need a moment to bind after create
    while True:
        try:
            fingerprint = checker(endpoint, "gpuprov-sshcheck-000000000000")
            break
        except SshNotReady:
            if time.monotonic() > deadline:
                pytest.fail("sshd never accepted the login")
            time.sleep(0.1)
    assert fingerprint.startswith("ssh-ed25519 SHA256:")
    assert files.known_key("gpuprov-sshcheck-000000000000")[0] == "ssh-ed25519"
    assert checker(endpoint, "gpuprov-sshcheck-000000000000") == fingerprint   # pinned key matches


def test_ssh_check_refuses_a_changed_host_key(local_vm):
    provider, location, instance, files = local_vm
    files.pin("gpuprov-sshcheck-000000000000", "ssh-ed25519",
              "AAAAC3NzaC1lZDI1NTE5AAAAIB7k2nRbRwx9ZLMWKp3yjhQ8p0h5l3Y2rT7a0mK5Xy0a")
    checker = ssh.SshChecker(files, timeout=5)
    endpoint = _endpoint(provider, location, instance)
    deadline = time.monotonic() + SSHD_START_S
    while time.monotonic() < deadline:
        try:
            checker(endpoint, "gpuprov-sshcheck-000000000000")
        except SshNotReady:
            time.sleep(0.1)
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


class ScriptedLogins(ssh.SshChecker):
    """SshChecker whose login is scripted per user and held at a gate: what ``begin`` and the call
    do with a login made ahead is then checked without a real sshd's timing (under load a real
    login begun ahead can time out, which is not what this test is about)."""

    def __init__(self, files, outcomes):
        super().__init__(files, timeout=5)
        self.outcomes = outcomes          # (user, alias) -> a fingerprint or an exception per login, in order
        self.logins = []
        self.gate = threading.Event()

    def _login(self, endpoint, alias):
        self.logins.append((endpoint.user, alias))
        assert self.gate.wait(30), "the test never opened the gate"
        outcome = self.outcomes[(endpoint.user, alias)].pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome


def test_a_login_begun_ahead_is_taken_by_the_same_endpoint_only(tmp_path):
    files = ssh.ControllerFiles(str(tmp_path), str(tmp_path / "id"))
    endpoint = SshEndpoint("10.0.0.7", 2222, "ubuntu")
    other_user = SshEndpoint(endpoint.host, endpoint.port, "gpuprov-nobody")
    alias, alias_b, alias_c = ("gpuprov-sshcheck-00000000000%d" % n for n in range(3))
    checker = ScriptedLogins(files, {
        ("ubuntu", alias): ["SHA256:ahead", SshNotReady("connect: refused")],
        ("gpuprov-nobody", alias): [SshNotReady("login as gpuprov-nobody: Authentication failed.")],
        ("ubuntu", alias_b): ["SHA256:b"], ("ubuntu", alias_c): ["SHA256:c"],
    })

    checker.begin(endpoint, alias)
    checker.begin(endpoint, alias)            # already begun: no second login
    checker.begin(other_user, alias)
    checker.gate.set()

    # The same endpoint and alias take the login made ahead (the call waits for it) ...
    assert checker(endpoint, alias) == "SHA256:ahead"
    assert sorted(checker.logins) == [("gpuprov-nobody", alias), ("ubuntu", alias)]
    # ... once: the next call logs in again, and raises what that login found.
    with pytest.raises(SshNotReady, match="connect: refused"):
        checker(endpoint, alias)
    assert len(checker.logins) == 3
    # Another user's login was its own, and its failure is raised by the call that takes it.
    with pytest.raises(SshNotReady) as info:
        checker(other_user, alias)
    assert "login as gpuprov-nobody" in str(info.value) and len(checker.logins) == 3
    # A login begun for one alias is not taken by another alias of the same endpoint.
    checker.begin(endpoint, alias_b)
    assert checker(endpoint, alias_c) == "SHA256:c"
    assert checker(endpoint, alias_b) == "SHA256:b"
    assert sorted(checker.logins[3:]) == [("ubuntu", alias_b), ("ubuntu", alias_c)]


def test_a_local_vm_command_runs_in_a_shell_that_reads_no_rc_file(local_vm):
    """bash reads the account's ~/.bashrc for a command sshd runs when it is the first shell level: the
    local cloud's sessions start at the second, as a fresh VM's account has no interactive setup to run."""
    if not pwd.getpwuid(os.getuid()).pw_shell.endswith("bash"):
        pytest.skip("the account's shell is not bash")
    provider, location, instance, files = local_vm
    checker = ssh.SshChecker(files, timeout=5, command='echo "$SHLVL ${BASH_VERSION:+bash}"')
    endpoint = _endpoint(provider, location, instance)
    deadline = time.monotonic() + SSHD_START_S
    while True:
        try:
            checker(endpoint, "gpuprov-sshcheck-000000000000")
            break
        except SshNotReady:
            if time.monotonic() > deadline:
                pytest.fail("sshd never accepted the login")
            time.sleep(0.1)
    assert checker.outputs["gpuprov-sshcheck-000000000000"] == "2 bash"


def test_a_failure_begun_ahead_is_raised_by_the_call_that_takes_it(tmp_path):
    files = ssh.ControllerFiles(str(tmp_path), str(tmp_path / "id"))
    ssh.ensure_controller_key(files.key_path)
    checker = ssh.SshChecker(files, timeout=2)
    checker.begin(SshEndpoint("127.0.0.1", 1, "root"), "gpuprov-x-000000000000")
    with pytest.raises(SshNotReady) as info:
        checker(SshEndpoint("127.0.0.1", 1, "root"), "gpuprov-x-000000000000")
    assert "connect" in str(info.value)
    assert checker._ahead == {}


# -- what a fresh provision prints, and what an unusable state directory says ----------------------

_SILENT_CHECK = r'''
import io, json, sys, tempfile
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import SshEndpoint
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import ssh
state = tempfile.mkdtemp()
files = ssh.ControllerFiles(state, state + "/id_ed25519")
ssh.ensure_controller_key(files.key_path)
# An Ansible worker process: stray stderr is collected and shown as a warning.
sys.stderr = io.StringIO()
try:
    ssh.SshChecker(files, timeout=5)(SshEndpoint("127.0.0.1", int(sys.argv[1]), "root"), "gpuprov-x-000000000000")
    error = ""
except ssh.SshNotReady as exc:
    error = str(exc)
stray, sys.stderr = sys.stderr.getvalue(), sys.__stderr__
print(json.dumps({"error": error, "stray": stray}))
'''


def test_ssh_check_against_a_port_that_drops_connections_prints_nothing(tmp_path):
    """docker-proxy accepts on the published port before sshd runs, then drops the connection:
    paramiko's transport thread logs that with a traceback, which must not reach stderr (Ansible
    prints stray stderr as a warning); the reason goes into SshNotReady instead."""
    import json
    import socket
    import sys
    import threading

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    stop = threading.Event()

    def drop_every_connection():
        while not stop.is_set():
            try:
                conn, _addr = listener.accept()
            except OSError:
                return
            conn.close()

    thread = threading.Thread(target=drop_every_connection, daemon=True)
    thread.start()
    try:
        proc = subprocess.run([sys.executable, "-c", _SILENT_CHECK, str(listener.getsockname()[1])],
                              capture_output=True, text=True, timeout=60, check=False,
                              env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    finally:
        stop.set()
        listener.close()
    assert proc.returncode == 0, proc.stderr
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert found["stray"] == "", found["stray"]
    assert found["error"].startswith("handshake:") and "banner" in found["error"], found


def test_state_dirs_are_0700_at_every_level_under_umask_000(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    state = home / ".local" / "state" / "gpuprov"
    previous = os.umask(0)
    try:
        ssh.ensure_controller_key(str(state / "id_ed25519"))
        files = ssh.ControllerFiles(str(state), str(state / "id_ed25519"))
        files.write_vm({"name": "a", "ssh": {"host": "h", "port": 22, "user": "u"},
                        "host_key_alias": "gpuprov-a-0123456789ab"})
        files.pin("gpuprov-a-0123456789ab", "ssh-ed25519", "AAAAa")
    finally:
        os.umask(previous)
    for level in (home / ".local", home / ".local" / "state", state):
        assert _mode(level) == 0o700, level
    for private in ("id_ed25519", "ssh_config", "known_hosts", "ssh_config.lock", "known_hosts.lock"):
        assert _mode(state / private) == 0o600, private
    assert _mode(state / "id_ed25519.pub") == 0o644


class ReadOnly:
    """A directory this process cannot write in. chmod does not stop root, so as root it is a
    tmpfs mounted there and remounted read-only (skipped where mounting is not allowed)."""

    def __init__(self, path):
        self.path = path
        path.mkdir()
        self.mounted = False
        if os.geteuid() == 0:
            mount = subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=0700", "tmpfs", str(path)],
                                   capture_output=True, text=True, check=False)
            if mount.returncode != 0:
                pytest.skip("running as root and cannot mount a read-only tmpfs: %s" % mount.stderr.strip())
            self.mounted = True

    def seal(self):
        if self.mounted:
            subprocess.run(["mount", "-o", "remount,ro", str(self.path)], check=True)
        else:
            os.chmod(self.path, 0o500)

    def close(self):
        if self.mounted:
            subprocess.run(["umount", str(self.path)], check=False)
        else:
            os.chmod(self.path, 0o700)


@pytest.fixture
def read_only(tmp_path):
    found = ReadOnly(tmp_path / "ro")
    try:
        yield found
    finally:
        found.close()


def test_key_creation_in_a_read_only_state_dir_names_the_path(read_only):
    read_only.seal()
    with pytest.raises(PrivateFileError) as info:
        ssh.ensure_controller_key(str(read_only.path / "gpuprov" / "id_ed25519"))
    assert info.value.path == str(read_only.path / "gpuprov")
    assert str(read_only.path) in str(info.value) and "not writable" in str(info.value)
    with pytest.raises(PrivateFileError) as info:
        ssh.ensure_controller_key(str(read_only.path / "id_ed25519"))
    assert "cannot lock %s" % (read_only.path / "id_ed25519") in str(info.value)


def test_ssh_config_and_known_hosts_in_a_read_only_state_dir_name_the_path(read_only):
    files = ssh.ControllerFiles(str(read_only.path), str(read_only.path / "id_ed25519"))
    ssh.ensure_controller_key(files.key_path)
    vm = {"name": "a", "ssh": {"host": "h", "port": 22, "user": "u"}, "host_key_alias": "gpuprov-a-0123456789ab"}
    files.write_vm(vm)
    files.pin(vm["host_key_alias"], "ssh-ed25519", "AAAAa")
    files.ensure_writable()
    read_only.seal()
    for attempt in (files.ensure_writable,        # what a run checks before any cloud call
                    lambda: files.write_vm(dict(vm, name="b")),
                    lambda: files.pin("gpuprov-b-0123456789ab", "ssh-ed25519", "AAAAb"),
                    lambda: files.remove_vm("a")):
        with pytest.raises(PrivateFileError) as info:
            attempt()
        assert str(read_only.path) in str(info.value) and "not writable" in str(info.value), info.value
    assert files.known_key(vm["host_key_alias"]) == ("ssh-ed25519", "AAAAa")     # nothing lost
