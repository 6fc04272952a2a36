"""Two controllers (two HOMEs, as two AWX jobs in fresh containers) sharing one journal and
nothing else: the second reaches, reuses and tears down what the first made, from the journal
alone. The local cloud's instance records live in a shared folder (its ``root`` option): they
are that cloud's "cloud side", the one thing allowed to stay on the machine."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

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
