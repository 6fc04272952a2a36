"""gpuprov.cloud.health end to end: the real ansible-playbook on the local cloud (real sshd),
with disagreements made on purpose behind the journal's back, in both directions: an
instance deleted while the journal says Ready, and an sshd that outlived its teardown
while the journal says Done. Then the docker cloud, when an engine answers."""

from __future__ import annotations

import os
import re
import shutil
import signal
import sqlite3
import subprocess
import tempfile
import uuid

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journal import Journal
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers import docker as docker_mod
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers import local as local_mod
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import VM_NAME_TAG
from ansible_collections.gpuprov.cloud.tests.fakes import docker_engine as de
from ansible_collections.gpuprov.cloud.tests.integration.conftest import Ansible

# Docker-engine tests share one engine: under pytest-xdist (make test) they run on one worker, one at a time.
pytestmark = pytest.mark.xdist_group("docker")


def _vm_record(ansible, name):
    journal = Journal(str(ansible.journal_path))
    try:
        return journal.load(name).state["vm"]
    finally:
        journal.close()


def _journal_rows(ansible):
    db = sqlite3.connect(str(ansible.journal_path))
    try:
        return (db.execute("SELECT key, version, state, lease_owner FROM machines ORDER BY key").fetchall(),
                db.execute("SELECT COUNT(*) FROM machine_events").fetchone())
    finally:
        db.close()


def _kill_serving(folder):
    """SIGKILL every sshd serving the instance folder (found in /proc by its sshd_config path)."""
    for pid, cmdline in local_mod._sshd_processes():
        if os.path.join(folder, "sshd_config") in cmdline:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_health_calls_out_an_instance_deleted_behind_the_journals_back(ansible):
    for name in ("hl-up", "hl-gone"):
        up = ansible.playbook("provision", "-e", "vm=%s" % name)
        assert up.rc == 0, up
    healthy = ansible.playbook("health")
    assert healthy.rc == 0, healthy
    assert re.search(r"hl-gone\s+Ready\s+Running local-\w+\s+ok\s+-\s+ok", healthy.out), healthy
    assert "DISAGREE" not in healthy.out, healthy

    # Behind the journal's back: the instance's sshd and folder disappear.
    record = _vm_record(ansible, "hl-gone")
    folder = str(ansible.home / "local" / "hl-gone" / record["instance_id"])
    _kill_serving(folder)
    shutil.rmtree(folder)
    rows = _journal_rows(ansible)

    sick = ansible.playbook("health")
    assert sick.rc != 0 and sick.recap()["localhost"]["failed"] == 1, sick
    assert ("DISAGREE hl-gone (instance_gone): the journal says Ready with instance %s on local/local, but the "
            "instance is gone" % record["instance_id"]) in sick.out, sick
    assert re.search(r"hl-gone\s+Ready\s+gone\s+-\s+-\s+DISAGREES", sick.out), sick
    assert re.search(r"hl-up\s+Ready\s+Running local-\w+\s+ok\s+-\s+ok", sick.out), sick
    assert "1 disagreement(s): hl-gone: instance_gone" in sick.out, sick

    report_only = ansible.playbook("health", "-e", "fail_on_disagreement=false")
    assert report_only.rc == 0 and "DISAGREE hl-gone (instance_gone)" in report_only.out, report_only
    checked = ansible.playbook("health", "--check")
    assert checked.rc != 0 and "DISAGREE hl-gone (instance_gone)" in checked.out, checked
    one = ansible.playbook("health", "-e", "vm=hl-up")
    assert one.rc == 0 and "hl-gone" not in one.out, one
    assert _journal_rows(ansible) == rows           # read-only, in every mode

    # The fix it names works: down forgets it, and health agrees again.
    assert ansible.playbook("down", "-e", "vm=hl-gone").rc == 0
    again = ansible.playbook("health")
    assert again.rc == 0 and "DISAGREE" not in again.out, again
    assert re.search(r"hl-gone\s+Done\s+nothing\s+-\s+-\s+ok", again.out), again


def test_health_calls_out_an_sshd_that_outlived_its_teardown(ansible):
    assert ansible.playbook("provision", "-e", "vm=hl-zombie").rc == 0
    record = _vm_record(ansible, "hl-zombie")
    folder = str(ansible.home / "local" / "hl-zombie" / record["instance_id"])
    keep = tempfile.mkdtemp(prefix="gp-health-")
    try:
        shutil.copytree(folder, os.path.join(keep, "instance"))
        down = ansible.playbook("down", "-e", "vm=hl-zombie")
        assert down.rc == 0 and not os.path.exists(folder), down
        # The instance comes back with its identity (its folder, its config), the journal still says Done.
        shutil.copytree(os.path.join(keep, "instance"), folder)
        started = subprocess.run(["/usr/sbin/sshd", "-f", os.path.join(folder, "sshd_config"),
                                  "-E", os.path.join(folder, "sshd.log")], capture_output=True, text=True,
                                 timeout=30, check=False)
        assert started.returncode == 0, started.stderr

        sick = ansible.playbook("health")
        assert sick.rc != 0, sick
        assert ("DISAGREE hl-zombie (untracked_instance): instance %s (Running) on local/local carries this "
                "journal's identity, but the journal says Done: it may bill" % record["instance_id"]) in sick.out, sick
        assert re.search(r"hl-zombie\s+Done\s+Running %s\s+-\s+-\s+DISAGREES" % record["instance_id"], sick.out), sick

        # The fix it names works: provision adopts the instance, down removes it, health agrees again.
        adopted = ansible.playbook("provision", "-e", "vm=hl-zombie")
        assert adopted.rc == 0, adopted
        assert _vm_record(ansible, "hl-zombie")["instance_id"] == record["instance_id"]
        assert ansible.playbook("down", "-e", "vm=hl-zombie").rc == 0
        again = ansible.playbook("health")
        assert again.rc == 0 and "DISAGREE" not in again.out, again
    finally:
        _kill_serving(folder)
        shutil.rmtree(keep, ignore_errors=True)


# --- docker ------------------------------------------------------------------------------------

PREFIX = "tdh-%s" % uuid.uuid4().hex[:6]


@pytest.fixture
def dock(tmp_path):
    client, why = de.engine()
    if client is None:
        pytest.skip("the docker health test needs a Docker engine: %s" % why)
    de.ensure_base_image(client, docker_mod.DEFAULT_BASE_IMAGE)
    home = tmp_path / "gpuprov-home"
    home.mkdir(mode=0o700)
    runner = Ansible(home)
    control_dir = tempfile.mkdtemp(prefix="gpcp-")   # ssh's ControlPath must fit a socket address
    runner.env["ANSIBLE_SSH_CONTROL_PATH_DIR"] = control_dir
    runner.client = client
    try:
        yield runner
    finally:
        de.remove_containers(client, PREFIX)
        shutil.rmtree(control_dir, ignore_errors=True)


def test_health_on_docker_sees_a_killed_then_removed_container(dock):
    name = de.unique_name(PREFIX)
    up = dock.playbook("provision", "-e", "vm=%s" % name, "-e", "clouds=docker", "-e", "k8s=false")
    assert up.rc == 0, up
    healthy = dock.playbook("health")
    assert healthy.rc == 0 and "DISAGREE" not in healthy.out, healthy
    [container] = dock.client.containers.list(all=True, filters={"label": "%s=%s" % (VM_NAME_TAG, name)})

    container.kill(signal="SIGKILL")
    container.wait(timeout=60)
    stopped = dock.playbook("health")
    assert stopped.rc != 0, stopped
    assert re.search(r"DISAGREE %s \(instance_not_running\): the journal says Ready, but instance %s on "
                     r"docker/local is Failed: container exited with exit code 137" % (name, container.id),
                     stopped.out), stopped
    assert "last log lines:" in stopped.out, stopped      # the engine's own view, from diagnose

    container.remove(force=True)
    gone = dock.playbook("health")
    assert gone.rc != 0 and "DISAGREE %s (instance_gone)" % name in gone.out, gone
