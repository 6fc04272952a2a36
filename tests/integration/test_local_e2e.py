"""End to end with the real ansible-playbook against the local cloud (real sshd)."""

from __future__ import annotations

import os
import shlex
import signal
import sqlite3
import stat
import subprocess

import pytest
import yaml

from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journal import Journal
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import projection
from ansible_collections.gpuprov.cloud.tests.crashpoints import harness as crashpoints

from ansible_collections.gpuprov.cloud.tests.integration.conftest import kill_sshds


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
    first = ansible.playbook("provision", "-e", "vm=e2e1")
    assert first.rc == 0, first
    assert first.recap()["e2e1"]["changed"] == 1, first
    assert "smoke command: Linux" in first.out
    assert "reserved name" not in first.out, first        # -e vm=, not Ansible's reserved `name`
    # live progress lines from the action plugin
    assert "gpuprov [e2e1" in first.out and "Booting" in first.out and "-> Ready" in first.out
    kind, state, _events = _state(ansible, "e2e1")
    assert (kind, state["kind"]) == ("launch", "Ready")
    instance, alias = state["vm"]["instance_id"], state["vm"]["host_key_alias"]
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

    second = ansible.playbook("provision", "-e", "name=e2e1")    # the old variable still works
    assert second.rc == 0, second
    assert second.recap()["e2e1"]["changed"] == 0, second
    kind, state, events = _state(ansible, "e2e1")
    assert state["vm"]["instance_id"] == instance and state["reused"] is True
    run = events[[i for i, e in enumerate(events) if e["event"] == "begin"][-1]:]
    assert [e["to"] for e in run if e["event"] == "transition"] == ["Connecting", "Ready"]
    assert [os.path.basename(f) for f in ansible.live_sshd()] == [instance]

    down = ansible.playbook("down", "-e", "vm=e2e1")
    assert down.rc == 0, down
    assert down.recap()["e2e1"]["changed"] == 1, down
    assert ansible.live_sshd() == []
    assert not (ansible.home / "local" / "e2e1").exists()
    kind, state, _events = _state(ansible, "e2e1")
    assert (kind, state["kind"]) == ("teardown", "Done")
    assert "Host e2e1" not in (ansible.home / "ssh_config").read_text()
    assert alias not in (ansible.home / "known_hosts").read_text()
    assert state["vm_name"] == "e2e1" and state["targets"][0]["instance_ids"] == [instance]

    again = ansible.playbook("down", "-e", "vm=e2e1")
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
        assert sorted(v["name"] for v in projection.vms(journal)) == ["fleet-a", "fleet-b"]
        ports = {v["ssh_port"] for v in projection.vms(journal)}
    finally:
        journal.close()
    assert len(ports) == 2

    status = ansible.playbook("status")
    assert "fleet-a" in status.out and "fleet-b" in status.out and "running" in status.out

    down = ansible.playbook("down", "-i", str(inventory), "--forks", "2")
    assert down.rc == 0, down
    assert ansible.live_sshd() == []


def test_the_journal_inventory_drives_provision_and_down_in_its_own_journal(ansible):
    """A journal inventory host's gpuprov dict is what provision and down read: its journal (not the default
    one) and its cloud, so both act on the VM where it is, with no -e naming the journal."""
    elsewhere = ansible.home / "team" / "journal.sqlite"
    elsewhere.parent.mkdir()
    up = ansible.playbook("provision", "-e", "vm=inv1", "-e", "gpuprov_journal=%s" % elsewhere)
    assert up.rc == 0 and up.recap()["inv1"]["changed"] == 1, up
    source = ansible.home / "team.gpuprov.yml"
    source.write_text("plugin: gpuprov.cloud.journal\njournal: %s\n" % elsewhere)
    again = ansible.playbook("provision", "-i", str(source))
    assert again.rc == 0 and again.recap()["inv1"]["changed"] == 0, again
    assert not ansible.journal_path.exists()          # the default journal was never opened
    down = ansible.playbook("down", "-i", str(source))
    assert down.rc == 0 and down.recap()["inv1"]["changed"] == 1, down
    assert ansible.live_sshd() == []


@pytest.mark.parametrize("args, expected", [
    (["-e", "vm=e2e-bad", "-e", "clouds=nimbus"], "clouds: unknown cloud 'nimbus'"),
    (["-e", "vm=Bad_Name"], "name: expected a DNS label"),
    (["-e", "vm=e2e-bad", "-e", "gpu=Z9000"], "gpu: unknown GPU 'Z9000'"),
    (["-e", "vm=e2e-bad", "-e", "gpu_count=0"], "gpu_count: expected an integer >= 1, got 0"),
    (["-e", "vm=e2e-bad", "-e", "gpu=H100"], "gpu: the local cloud has no GPUs"),
    (["-e", "vm=e2e-bad", "-e", '{"gpuprov_cloud_options": {"local": {"sshd": "/nonexistent/sshd"}}}'],
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
    run = ansible.playbook("provision", "-e", "vm=e2e-j", "-e", "gpuprov_journal=%s" % bad)
    assert run.rc != 0, run
    assert "journal: %s is not" % bad in run.out and "gpuprov journal" in run.out, run
    assert "Traceback" not in run.out, run
    assert bad.read_bytes() == b"this is not sqlite" * 100   # nothing written into it
    assert ansible.live_sshd() == []


def test_crash_after_create_is_adopted(ansible):
    """SIGKILL right after create returned, before Booting is journalled: the re-run adopts."""
    point = "before commit Creating -> Booting #1"
    points = ansible.home.parent / "crashpoints"
    crashed = ansible.playbook("provision", "-e", "vm=e2e-crash",
                               extra_env=crashpoints.crash_env(point, points, ansible.env))
    assert crashed.rc == -signal.SIGKILL and crashpoints.killed_at(points) == point, crashed
    kind, state, _events = _state(ansible, "e2e-crash")
    assert state["kind"] == "Creating"     # the create happened, its commit did not
    orphans = ansible.live_sshd()
    assert len(orphans) == 1

    rerun = ansible.playbook("provision", "-e", "vm=e2e-crash")
    assert rerun.rc == 0, rerun
    assert "adopted" in rerun.out
    kind, state, _events = _state(ansible, "e2e-crash")
    assert state["kind"] == "Ready"
    assert ansible.live_sshd() == orphans   # the same sshd, no second one
    assert state["vm"]["instance_id"] == os.path.basename(orphans[0])
    assert ansible.playbook("down", "-e", "vm=e2e-crash").rc == 0
    assert ansible.live_sshd() == []


def test_ctrl_c_compensates_and_journals_the_outcome(ansible):
    """Interrupt while Connecting: the worker compensates (stops the sshd) and the
    journal says Aborted, although ansible-playbook prints nothing after the interrupt."""
    # A login user the VM never accepts keeps the launch in Connecting.
    proc = ansible.popen("provision", "-e", "vm=e2e-int", "-e",
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


K3S_YAML = """apiVersion: v1
clusters:
- cluster: {certificate-authority-data: Q0E=, server: 'https://127.0.0.1:6443'}
  name: default
contexts:
- context: {cluster: default, user: default}
  name: default
current-context: default
kind: Config
users:
- name: default
  user: {client-certificate-data: Q0VSVA==, client-key-data: S0VZ}
"""


def test_down_removes_the_vms_cluster_credentials_host_block_and_host_keys(ansible, tmp_path):
    """k3s does not run on the local cloud, so the kubeconfig is written by the k3s role's own
    action (as the role does after the install); `down` then takes it, its merged context and the
    VM's SSH entries away, and leaves the user's own kubeconfig entries alone."""
    home = tmp_path / "user-home"
    home.mkdir()
    env = {"HOME": str(home)}
    mine = {"apiVersion": "v1", "kind": "Config", "current-context": "mine", "preferences": {},
            "clusters": [{"name": "mine", "cluster": {"server": "https://mine:6443"}}],
            "users": [{"name": "mine", "user": {"token": "t"}}],
            "contexts": [{"name": "mine", "context": {"cluster": "mine", "user": "mine"}}]}
    (home / ".kube").mkdir(mode=0o700)
    (home / ".kube" / "config").write_text(yaml.safe_dump(mine))
    up = ansible.playbook("provision", "-e", "vm=e2e-kube", extra_env=env)
    assert up.rc == 0, up
    alias = _state(ansible, "e2e-kube")[1]["vm"]["host_key_alias"]
    play = ansible.home / "kubeconfig.yml"
    play.write_text(yaml.safe_dump([{"hosts": "localhost", "gather_facts": False, "tasks": [
        {"gpuprov.cloud.k3s_kubeconfig": {"name": "e2e-kube", "k3s_yaml": K3S_YAML, "server": "https://127.0.0.1:6443",
                                          "merge": True, "set_current_context": True}},
        {"gpuprov.cloud.k3s_kubeconfig": {"name": "e2e-kube", "k3s_yaml": K3S_YAML, "server": "https://127.0.0.1:6443",
                                          "dir": str(home / "other-dir")}}]}]))
    wrote = ansible.tool("ansible-playbook", str(play), extra_env=env)
    assert wrote.rc == 0, wrote.out + wrote.err
    own = [home / ".kube" / "gpuprov-e2e-kube.yaml", home / "other-dir" / "gpuprov-e2e-kube.yaml"]
    assert all(_mode(path) == 0o600 for path in own)
    merged = yaml.safe_load((home / ".kube" / "config").read_text())
    assert merged["current-context"] == "e2e-kube" and len(merged["contexts"]) == 2

    down = ansible.playbook("down", "-e", "vm=e2e-kube", extra_env=env)
    assert down.rc == 0, down
    assert not any(path.exists() for path in own)
    left = yaml.safe_load((home / ".kube" / "config").read_text())
    assert {k: v for k, v in mine.items() if k != "current-context"} == left    # current-context was the VM's
    assert _mode(home / ".kube" / "config") == 0o600
    assert "Host e2e-kube" not in (ansible.home / "ssh_config").read_text()
    assert alias not in (ansible.home / "known_hosts").read_text()
    assert ansible.live_sshd() == []


def test_state_directory_is_private_at_every_level_under_umask_000(ansible, tmp_path):
    """With GPUPROV_HOME unset, the state goes to ~/.local/state/gpuprov: each level created 0700."""
    home = tmp_path / "fresh-home"
    home.mkdir()
    env = dict(ansible.env, HOME=str(home))
    env.pop("GPUPROV_HOME")
    up = subprocess.run(["bash", "-c", "umask 000 && exec %s" % " ".join(
        shlex.quote(arg) for arg in ansible.command("provision", "-e", "vm=e2e-umask"))],
        env=env, cwd=str(ansible.home), capture_output=True, text=True, timeout=300, check=False)
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        state = home / ".local" / "state" / "gpuprov"
        for level in (home / ".local", home / ".local" / "state", state):
            assert _mode(level) == 0o700, level
        for private in ("id_ed25519", "known_hosts", "ssh_config", "journal.sqlite"):
            assert _mode(state / private) == 0o600, private
    finally:
        subprocess.run(ansible.command("down", "-e", "vm=e2e-umask"), env=env, cwd=str(ansible.home),
                       capture_output=True, timeout=300, check=False)
        kill_sshds(home / ".local" / "state" / "gpuprov")
