"""Two controllers (two HOMEs, as two AWX jobs in fresh containers) sharing one journal and
nothing else: the second reaches, reuses and tears down what the first made, from the journal
alone. The local cloud's instance records live in a shared folder (its ``root`` option): they
are that cloud's "cloud side", the one thing allowed to stay on the machine."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journal import Journal
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import projection
from ansible_collections.gpuprov.cloud.tests.integration.conftest import Ansible, kill_sshds, live_sshd_folders


@pytest.fixture
def two_controllers(tmp_path):
    if not shutil.which("sshd") and not os.path.exists("/usr/sbin/sshd"):
        pytest.skip("openssh-server (sshd) is not installed; .ci/run installs it")
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o700)
    journal = shared / "journal.sqlite"
    controllers = []
    for index in (1, 2):
        home = tmp_path / ("job%d-home" % index)
        home.mkdir(mode=0o700)
        runner = Ansible(home)
        runner.env["GPUPROV_JOURNAL"] = str(journal)
        controllers.append(runner)
    try:
        yield shared, journal, controllers
    finally:
        kill_sshds(shared)


def _options(shared) -> list:
    return ["-e", json.dumps({"gpuprov_cloud_options": {"local": {"root": str(shared / "local")}}})]


def _events(journal_path, name):
    journal = Journal(str(journal_path))
    try:
        return journal.events(name)
    finally:
        journal.close()


def _row(journal_path, name):
    journal = Journal(str(journal_path))
    try:
        row = journal.load(name)
        return row.kind, row.state
    finally:
        journal.close()


def test_second_controller_reuses_and_tears_down_the_first_ones_vm(two_controllers):
    shared, journal_path, (job1, job2) = two_controllers
    key = shared / "machine_credential_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    # Job 1 holds the key as AWX's Machine credential gives it.
    up = job1.playbook("provision", "-e", "vm=awx1", "-e", "k8s=false", "-e", "ansible_ssh_private_key_file=%s" % key,
                       *_options(shared))
    assert up.rc == 0, up
    _kind, state = _row(journal_path, "awx1")
    instance = state["vm"]["instance_id"]
    assert [os.path.basename(f) for f in live_sshd_folders(shared)] == [instance]

    # Job 2, a fresh HOME without the key: refused before it touches the VM.
    before = _events(journal_path, "awx1")
    refused = job2.playbook("provision", "-e", "vm=awx1", "-e", "k8s=false", *_options(shared), timeout=120)
    assert refused.rc != 0 and refused.recap()["awx1"]["changed"] == 0, refused
    assert "was made for the SSH key" in refused.out and "GPUPROV_SSH_KEY_FILE" in refused.out, refused
    assert _events(journal_path, "awx1") == before
    assert [os.path.basename(f) for f in live_sshd_folders(shared)] == [instance]

    # Job 2 with the key: a no-op, SSH included, through files generated from the journal.
    again = job2.playbook("provision", "-e", "vm=awx1", "-e", "k8s=false", *_options(shared),
                          extra_env={"GPUPROV_SSH_KEY_FILE": str(key)})
    assert again.rc == 0, again
    assert again.recap()["awx1"]["changed"] == 0, again
    assert "is gone" not in again.out and "smoke command: Linux" in again.out, again
    _kind, state = _row(journal_path, "awx1")
    assert state["vm"]["instance_id"] == instance and state["reused"] is True
    assert [os.path.basename(f) for f in live_sshd_folders(shared)] == [instance]
    login = subprocess.run(["ssh", "-F", str(job2.home / "ssh_config"), "-o", "BatchMode=yes", "awx1", "echo", "job2"],
                           capture_output=True, text=True, timeout=60, check=False)
    assert login.returncode == 0 and "job2" in login.stdout, login.stderr

    # Job 3, another fresh HOME, tears it down without the key; the journal tells the truth.
    job3 = Ansible(job2.home.parent / "job3-home")
    job3.home.mkdir(mode=0o700)
    job3.env["GPUPROV_JOURNAL"] = str(journal_path)
    down = job3.playbook("down", "-e", "vm=awx1", *_options(shared))
    assert down.rc == 0, down
    assert down.recap()["awx1"]["changed"] == 1, down
    assert live_sshd_folders(shared) == []
    kind, state = _row(journal_path, "awx1")
    assert (kind, state["kind"]) == ("teardown", "Done")
    assert state["targets"][0]["instance_ids"] == [instance]
    journal = Journal(str(journal_path))
    try:
        assert projection.vm(journal, "awx1") is None
    finally:
        journal.close()

    second_down = job1.playbook("down", "-e", "vm=awx1", *_options(shared))
    assert second_down.rc == 0 and second_down.recap()["awx1"]["changed"] == 0, second_down


def _fresh_job(base, name, journal_path, key=None):
    """Another job: a HOME of its own on the shared journal, holding the key as AWX's SSH key credential
    gives it (GPUPROV_SSH_KEY_FILE)."""
    job = Ansible(base / name)
    job.home.mkdir(mode=0o700)
    job.env["GPUPROV_JOURNAL"] = str(journal_path)
    if key is not None:
        job.env["GPUPROV_SSH_KEY_FILE"] = str(key)
    # ssh's ControlPath is a Unix socket (at most 108 bytes): a short folder, whatever pytest's tmp path.
    job.env["ANSIBLE_SSH_CONTROL_PATH_DIR"] = tempfile.mkdtemp(prefix="gp-cp-")
    return job


class BannerServer:
    """A TCP service on the "VM" (the local cloud's VM is this host) that only the tunnel reaches: it
    sends one line to whoever connects."""

    def __init__(self, banner: bytes):
        self.banner = banner
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4)
        self.port = self.sock.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while True:
            try:
                conn, _peer = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.sendall(self.banner)

    def close(self):
        self.sock.close()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _read_through(port: int, tunnel: subprocess.Popen) -> bytes:
    """The first bytes served at 127.0.0.1:port once the tunnel listens there (it fails if the tunnel exits)."""
    deadline = time.monotonic() + 90
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
                data = conn.recv(100)
                if data:
                    return data
        except OSError:
            pass
        assert tunnel.poll() is None, tunnel.stdout.read()
        assert time.monotonic() < deadline, "the tunnel never came up"
        time.sleep(0.5)


def test_fresh_homes_check_reach_and_tunnel_to_a_vm_from_the_journal_alone(two_controllers):
    """The health job, the journal inventory and the tunnel, each from a HOME that has never seen the VM:
    the pinned host key, the ssh config and the key all come from the journal and the job's credential."""
    shared, journal_path, (job1, _job2) = two_controllers
    key = shared / "machine_credential_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    up = job1.playbook("provision", "-e", "vm=awx2", "-e", "k8s=false", "-e", "ansible_ssh_private_key_file=%s" % key,
                       *_options(shared))
    assert up.rc == 0, up
    base = job1.home.parent

    # Health from a fresh HOME: the login is checked against the journal's pinned host key.
    health = _fresh_job(base, "health-home", journal_path, key)
    checked = health.playbook("health", "-e", "vm=awx2", *_options(shared), timeout=120)
    assert checked.rc == 0, checked
    assert "awx2: ssh ok: login as" in checked.out, checked
    assert "UNKNOWN" not in checked.out, checked
    pinned = (health.home / "known_hosts").read_text()
    assert pinned.startswith("gpuprov-awx2-") and " ssh-ed25519 " in pinned

    # The journal inventory from another fresh HOME: Ansible reaches the VM with StrictHostKeyChecking=yes.
    inventory = _fresh_job(base, "inventory-home", journal_path, key)
    (inventory.home / "gpuprov.yml").write_text("plugin: gpuprov.cloud.journal\n")
    ping = inventory.tool("ansible", "-i", "gpuprov.yml", "awx2", "-m", "ansible.builtin.ping", timeout=120)
    assert ping.rc == 0 and '"ping": "pong"' in ping.out, ping.out + ping.err
    assert (inventory.home / "known_hosts").read_text() == pinned

    # The tunnel from a third fresh HOME reaches a port of the VM that only SSH can.
    service = BannerServer(b"behind-the-tunnel\n")
    tunnel_job = _fresh_job(base, "tunnel-home", journal_path, key)
    port = _free_port()
    tunnel = tunnel_job.popen("tunnel", "-e", "vm=awx2", "-e", "local_port=%d" % port,
                              "-e", "remote_port=%d" % service.port)
    try:
        assert _read_through(port, tunnel) == b"behind-the-tunnel\n"
    finally:
        tunnel.send_signal(signal.SIGINT)
        tunnel.wait(timeout=30)
        service.close()
    assert "Host awx2\n" in (tunnel_job.home / "ssh_config").read_text()

    # A VM the journal does not have: the tunnel says to provision it, and forwards nothing.
    missing = tunnel_job.playbook("tunnel", "-e", "vm=nothere", timeout=120)
    assert missing.rc != 0 and "nothere has no running VM with a pinned host key in the journal" in missing.out, \
        missing

    down = job1.playbook("down", "-e", "vm=awx2", *_options(shared))
    assert down.rc == 0, down
    assert live_sshd_folders(shared) == []
