"""End to end with the real ansible-playbook against the local cloud (real sshd)."""

from __future__ import annotations

import os
import signal
import sqlite3
import stat
import subprocess

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journal import Journal


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def _journal(ansible) -> Journal:
    return Journal(str(ansible.journal_path))


def _state(ansible, name):
    journal = _journal(ansible)
    try:
        row = journal.load(name)
        return row.kind, row.state, journal.events(name)
    finally:
        journal.close()


def test_provision_reuse_down(ansible):
    first = ansible.playbook("provision", "-e", "name=e2e1")
    assert first.rc == 0, first
    assert first.recap()["e2e1"]["changed"] == 1, first
    assert "smoke command: Linux" in first.out
    # live progress lines from the action plugin
    assert "gpuprov [e2e1" in first.out and "Booting" in first.out and "-> Ready" in first.out
    kind, state, _events = _state(ansible, "e2e1")
    assert (kind, state["kind"]) == ("launch", "Ready")
    instance = state["vm"]["instance_id"]
    assert [os.path.basename(f) for f in ansible.live_sshd()] == [instance]

    # Secrets and state are private.
    for name in ("journal.sqlite", "id_ed25519", "known_hosts", "ssh_config"):
        assert _mode(ansible.home / name) == 0o600, name
    config = (ansible.home / "ssh_config").read_text()
    assert "Host e2e1\n" in config and "StrictHostKeyChecking yes" in config
    assert state["vm"]["host_key_alias"] in (ansible.home / "known_hosts").read_text()
    # `ssh e2e1` works through the written config, with the pinned host key.
    ssh = subprocess.run(["ssh", "-F", str(ansible.home / "ssh_config"), "-o", "BatchMode=yes", "e2e1",
                          "echo", "via-ssh-config"], capture_output=True, text=True, timeout=60, check=False)
    assert ssh.returncode == 0 and "via-ssh-config" in ssh.stdout, ssh.stderr

    second = ansible.playbook("provision", "-e", "name=e2e1")
    assert second.rc == 0, second
    assert second.recap()["e2e1"]["changed"] == 0, second
    kind, state, events = _state(ansible, "e2e1")
    assert state["vm"]["instance_id"] == instance and state["reused"] is True
    run = events[[i for i, e in enumerate(events) if e["event"] == "begin"][-1]:]
    assert [e["to"] for e in run if e["event"] == "transition"] == ["Connecting", "Ready"]
    assert [os.path.basename(f) for f in ansible.live_sshd()] == [instance]

    down = ansible.playbook("down", "-e", "name=e2e1")
    assert down.rc == 0, down
    assert down.recap()["e2e1"]["changed"] == 1, down
    assert ansible.live_sshd() == []
    assert not (ansible.home / "local" / "e2e1").exists()
    kind, state, _events = _state(ansible, "e2e1")
    assert (kind, state["kind"]) == ("teardown", "Done")
    assert "Host e2e1" not in (ansible.home / "ssh_config").read_text()
    assert state["vm_name"] == "e2e1" and state["targets"][0]["instance_ids"] == [instance]

    again = ansible.playbook("down", "-e", "name=e2e1")
    assert again.rc == 0 and again.recap()["e2e1"]["changed"] == 0, again

    status = ansible.playbook("status")
    assert status.rc == 0, status
    assert "e2e1" in status.out and "Done" in status.out


def test_two_vms_in_one_play(ansible):
    inventory = ansible.home / "fleet.yml"
    inventory.write_text("gpuprov_vms:\n  hosts:\n    fleet-a:\n    fleet-b:\n")
    up = ansible.playbook("provision", "-i", str(inventory), "--forks", "2")
    assert up.rc == 0, up
    recap = up.recap()
    assert recap["fleet-a"]["changed"] == 1 and recap["fleet-b"]["changed"] == 1, up
    assert len(ansible.live_sshd()) == 2
    journal = _journal(ansible)
    try:
        assert sorted(v["name"] for v in journal.vms()) == ["fleet-a", "fleet-b"]
        ports = {v["ssh_port"] for v in journal.vms()}
    finally:
        journal.close()
    assert len(ports) == 2

    status = ansible.playbook("status")
    assert "fleet-a" in status.out and "fleet-b" in status.out and "running" in status.out

    down = ansible.playbook("down", "-i", str(inventory), "--forks", "2")
    assert down.rc == 0, down
    assert ansible.live_sshd() == []


@pytest.mark.parametrize("args, expected", [
    (["-e", "name=e2e-bad", "-e", "clouds=nimbus"], "clouds: unknown cloud 'nimbus'"),
    (["-e", "name=Bad_Name"], "name: expected a DNS label"),
    (["-e", "name=e2e-bad", "-e", "gpu=Z9000"], "gpu: unknown GPU 'Z9000'"),
    (["-e", "name=e2e-bad", "-e", "gpu_count=0"], "gpu_count: expected an integer >= 1, got 0"),
    (["-e", "name=e2e-bad", "-e", "gpu=H100"], "gpu: the local cloud has no GPUs"),
    (["-e", "name=e2e-bad", "-e", '{"gpuprov_cloud_options": {"local": {"sshd": "/nonexistent/sshd"}}}'],
     "apt-get install openssh-server"),
])
def test_bad_input_is_one_clear_failure(ansible, args, expected):
    run = ansible.playbook("provision", *args)
    assert run.rc != 0, run
    assert expected in run.out, run
    assert "Traceback" not in run.out, run
    assert ansible.live_sshd() == []
    if ansible.journal_path.exists():
        journal = _journal(ansible)
        try:
            row = journal.load("e2e-bad")
            # Either nothing was written, or a complete terminal row that owns nothing.
            assert row is None or (row.terminal and row.state["kind"] == "Aborted" and not row.state["targets"])
        finally:
            journal.close()


def test_unreadable_journal_is_a_clear_failure(ansible):
    bad = ansible.home / "not-a-journal.sqlite"
    bad.write_bytes(b"this is not sqlite" * 100)
    run = ansible.playbook("provision", "-e", "name=e2e-j", "-e", "gpuprov_journal=%s" % bad)
    assert run.rc != 0, run
    assert "is not a readable gpuprov journal" in run.out and "Traceback" not in run.out, run
    assert bad.read_bytes() == b"this is not sqlite" * 100   # nothing written into it
    assert ansible.live_sshd() == []


def test_crash_after_create_is_adopted(ansible):
    """SIGKILL right after create returned, before Booting is journalled: the re-run adopts."""
    crashed = ansible.playbook("provision", "-e", "name=e2e-crash",
                               extra_env={"GPUPROV_TEST_KILL_BEFORE_COMMIT": "Creating"})
    assert crashed.rc != 0, crashed
    kind, state, _events = _state(ansible, "e2e-crash")
    assert state["kind"] == "Creating"     # the create happened, its commit did not
    orphans = ansible.live_sshd()
    assert len(orphans) == 1

    rerun = ansible.playbook("provision", "-e", "name=e2e-crash")
    assert rerun.rc == 0, rerun
    assert "adopted" in rerun.out
    kind, state, _events = _state(ansible, "e2e-crash")
    assert state["kind"] == "Ready"
    assert ansible.live_sshd() == orphans   # the same sshd, no second one
    assert state["vm"]["instance_id"] == os.path.basename(orphans[0])
    assert ansible.playbook("down", "-e", "name=e2e-crash").rc == 0
    assert ansible.live_sshd() == []


def test_ctrl_c_compensates_and_journals_the_outcome(ansible):
    """Interrupt while Connecting: the worker compensates (stops the sshd) and the
    journal says Aborted, although ansible-playbook prints nothing after the interrupt."""
    # A login user the VM never accepts keeps the launch in Connecting.
    proc = ansible.popen("provision", "-e", "name=e2e-int", "-e",
                         '{"gpuprov_cloud_options": {"local": {"user": "gpuprov-nobody"}}}')
    seen = []
    try:
        for line in proc.stdout:
            seen.append(line)
            if "waiting for SSH" in line:
                break
        else:
            pytest.fail("never reached Connecting:\n" + "".join(seen))
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode != 0
    kind, state, events = _state(ansible, "e2e-int")
    assert (kind, state["kind"]) == ("launch", "Aborted"), events
    assert state["reason"] == "cancelled by the user"
    assert any(e["note"] == "cancelled by interrupt" for e in events)
    assert ansible.live_sshd() == []
    assert not sqlite3.connect(str(ansible.journal_path)).execute(
        "SELECT lease_owner FROM machines WHERE key = 'e2e-int'").fetchone()[0]
