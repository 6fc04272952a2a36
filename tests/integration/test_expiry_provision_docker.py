"""Limits end to end on the docker cloud (issue 27): the real ansible-playbook provisions a container VM with a ttl
of seconds (``limits_grace=2s``); with no controller process alive the container powers itself off at its deadline
plus the grace (its watchdog, installed by the boot script); ``status`` then shows it Expired, a dry-run ``reap``
sees it stopped itself (and journals that, so ``status`` says so), ``reap -e delete=true`` removes the rest and a
second reap changes nothing. A ttl extended before the deadline keeps the VM up. ``idle_stop`` given to a VM that
was up without limits installs the watchdog over SSH; a FAKE ``nvidia-smi`` reporting a GPU process keeps it up
past its idle_stop, and once it reports none the VM stops itself for idleness.

Nothing waits a fixed time: each wait is on a condition (a container's state, a line of the watchdog's log, the
journal's deadline). Skipped, with the reason, only when no Docker engine answers. VM names are ``tex-<hex>-...``;
every container is removed at the end, pass or fail.
"""

from __future__ import annotations

import datetime
import os
import shutil
import tempfile
import time
import uuid

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.expiry import watchdog
from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journal import Journal
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers import docker as docker_mod
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import VM_NAME_TAG
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.status import read_status
from ansible_collections.gpuprov.cloud.tests.fakes import docker_engine as de
from ansible_collections.gpuprov.cloud.tests.integration.conftest import Ansible
from ansible_collections.gpuprov.cloud.tests.unit.helpers import wait_for

pytestmark = pytest.mark.xdist_group("docker")

PREFIX = "tex-%s" % uuid.uuid4().hex[:6]
GRACE = ("-e", "limits_grace=2s")   # the watchdog checks every second
FAKE_NVIDIA_SMI = b"""#!/bin/sh
# FAKE nvidia-smi (tests only): --query-compute-apps prints the pids in /srv/fake-nvidia-smi/pids
case "$*" in
    *--query-compute-apps=pid*) cat /srv/fake-nvidia-smi/pids ;;
    *) echo "FAKE nvidia-smi (tests only): unsupported $*" >&2; exit 2 ;;
esac
"""


@pytest.fixture(scope="module")
def engine():
    client, why = de.engine()
    if client is None:
        pytest.skip("the limits' docker end-to-end tests need a Docker engine: %s" % why)
    de.ensure_base_image(client, docker_mod.DEFAULT_BASE_IMAGE)
    try:
        yield client
    finally:
        de.remove_containers(client, PREFIX)


class Controller(Ansible):
    """ansible-playbook on a throw-away state directory, on the docker cloud."""

    def __init__(self, home, client, control_dir):
        super().__init__(home)
        self.client = client
        self.env["ANSIBLE_SSH_CONTROL_PATH_DIR"] = control_dir   # a socket path must fit 108 bytes

    def container(self, vm):
        found = self.client.containers.list(all=True, filters={"label": "%s=%s" % (VM_NAME_TAG, vm)})
        return found[0] if len(found) == 1 else None

    def state(self, vm):
        container = self.container(vm)
        if container is None:
            return "none"
        container.reload()
        return container.status

    def alive(self):
        """ansible-playbook processes of this state directory (the controller)."""
        found = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open("/proc/%s/environ" % pid, "rb") as handle:
                    environ = handle.read().split(b"\0")
                with open("/proc/%s/cmdline" % pid, "rb") as handle:
                    cmdline = handle.read()
            except OSError:
                continue
            if b"ansible-playbook" in cmdline and ("GPUPROV_HOME=%s" % self.home).encode() in environ:
                found.append(int(pid))
        return found

    def label(self, vm):
        journal = Journal(str(self.journal_path))
        try:
            row = journal.load(vm)
            return row.label if row is not None else None
        finally:
            journal.close()


@pytest.fixture
def ctl(engine, tmp_path):
    home = tmp_path / "gpuprov-home"
    home.mkdir(mode=0o700)
    control_dir = tempfile.mkdtemp(prefix="gpcp-")
    runner = Controller(home, engine, control_dir)
    try:
        yield runner
    finally:
        de.remove_containers(engine, PREFIX)
        shutil.rmtree(control_dir, ignore_errors=True)


def _epoch(iso):
    return datetime.datetime.strptime(iso, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc).timestamp()


def _status_row(ctl, vm):
    [row] = read_status(str(ctl.journal_path), vm)["vms"]
    return row


def _reap_removes_it(ctl, vm, reason):
    """A dry-run reap lists ``vm`` as stopped by its limits and journals it; delete removes it; a second changes
    nothing."""
    dry = ctl.playbook("reap")
    assert dry.rc == 0 and dry.recap()["localhost"]["changed"] == 0, dry
    assert "WOULD REAP %s (docker/" % vm in dry.out and reason in dry.out, dry
    assert ctl.state(vm) == "exited"
    status = ctl.playbook("status", "-e", "vm=%s" % vm)
    assert status.rc == 0 and "stopped itself" in status.out, status
    assert "EXPIRED %s: %s" % (vm, reason) in status.out and "its cloud showed it stopped itself" in status.out, status

    reaped = ctl.playbook("reap", "-e", "delete=true")
    assert reaped.rc == 0 and reaped.recap()["localhost"]["changed"] == 1, reaped
    assert "REAPED %s (docker/" % vm in reaped.out and "reaped 1 VM" in reaped.out, reaped
    assert ctl.state(vm) == "none"                          # the container and what it held are gone
    assert ctl.label(vm) == "Done"
    again = ctl.playbook("reap", "-e", "delete=true")
    assert again.rc == 0 and again.recap()["localhost"]["changed"] == 0 and "nothing to reap" in again.out, again


def test_a_vm_with_a_ttl_stops_itself_with_no_controller_alive_and_reap_removes_the_rest(ctl):
    vm = "%s-ttl" % PREFIX
    up = ctl.playbook("provision", "-e", "clouds=docker", "-e", "vm=%s" % vm, "-e", "ttl=40s", *GRACE)
    assert up.rc == 0, up
    assert "limits:" in up.out, up
    assert ctl.alive() == []   # the controller is gone: only the VM's own watchdog can stop it now
    deadline = _epoch(_status_row(ctl, vm)["limits"]["deadline"])
    assert ctl.state(vm) == "running"
    assert "deadline=%d" % deadline in de.read_file(ctl.container(vm), "/etc/gpuprov/limits").splitlines()

    wait_for(lambda: ctl.state(vm) == "exited", "the container to power itself off at its deadline",
             limit_s=180, step_s=0.5)
    stopped = de.watchdog_stopped(ctl.container(vm))
    assert stopped["reason"] == "deadline" and int(stopped["at"]) > deadline, stopped
    checks = de.watchdog_checks(ctl.container(vm))
    assert checks[-1][1] == "stop" and all(kind == "kept" for now, kind, _what in checks if now <= deadline), checks

    # status reads the journal alone: past its deadline the VM shows Expired, not yet looked at
    status = ctl.playbook("status", "-e", "vm=%s" % vm)
    assert status.rc == 0, status
    assert "%s  Expired" % vm in status.out and "EXPIRED %s: past its expiry" % vm in status.out, status
    assert "[WARNING]: %s is past its expiry" % vm in status.out, status
    health = ctl.playbook("health", "-e", "vm=%s" % vm, "-e", "fail_on_disagreement=false")
    assert health.rc == 0 and "(expired)" in health.out and "not a leak" in health.out, health
    _reap_removes_it(ctl, vm, "expired (stopped itself): past its expiry")


def test_a_ttl_extended_before_its_deadline_keeps_the_vm_up(ctl):
    vm = "%s-ext" % PREFIX
    up = ctl.playbook("provision", "-e", "clouds=docker", "-e", "vm=%s" % vm, "-e", "ttl=30s", *GRACE)
    assert up.rc == 0, up
    old = _epoch(_status_row(ctl, vm)["limits"]["deadline"])
    longer = ctl.playbook("provision", "-e", "clouds=docker", "-e", "vm=%s" % vm, "-e", "ttl=2h", *GRACE, "--diff")
    assert longer.rc == 0 and longer.recap()[vm]["changed"] == 1, longer
    assert time.time() < old, "the extension must land before the old deadline for this test to mean anything"
    container = ctl.container(vm)
    assert "deadline=%d" % (old - 30 + 7200) in de.read_file(container, "/etc/gpuprov/limits").splitlines()

    def kept_well_after_the_old_deadline():
        return any(now > old + 2 + 2 and kind == "kept" for now, kind, _what in de.watchdog_checks(container))

    wait_for(kept_well_after_the_old_deadline, "a watchdog check past the old deadline and its grace that kept it up",
             limit_s=120, step_s=0.5)
    assert ctl.state(vm) == "running" and de.watchdog_stopped(container) == {}
    same = ctl.playbook("provision", "-e", "clouds=docker", "-e", "vm=%s" % vm, "-e", "ttl=2h", *GRACE)
    assert same.rc == 0 and same.recap()[vm]["changed"] == 0, same   # the same ttl again changes nothing
    down = ctl.playbook("down", "-e", "vm=%s" % vm)
    assert down.rc == 0 and ctl.state(vm) == "none", down


def test_idle_stop_given_to_a_running_vm_installs_the_watchdog_over_ssh_and_stops_it_once_idle(ctl):
    vm = "%s-idle" % PREFIX
    up = ctl.playbook("provision", "-e", "clouds=docker", "-e", "vm=%s" % vm)
    assert up.rc == 0, up
    container = ctl.container(vm)
    assert de.read_file(container, watchdog.INSTALLED_AT) == ""   # booted without limits: no watchdog
    de.put_files(container, {"/srv/fake-nvidia-smi/pids": b"4242\n"}, mode=0o644)
    de.put_files(container, {"/usr/local/bin/nvidia-smi": FAKE_NVIDIA_SMI})

    limited = ctl.playbook("provision", "-e", "clouds=docker", "-e", "vm=%s" % vm, "-e", "idle_stop=1m", *GRACE)
    assert limited.rc == 0 and limited.recap()[vm]["changed"] == 1, limited
    assert "could not be installed" not in limited.out, limited
    assert de.read_file(container, watchdog.INSTALLED_AT) == watchdog.WATCHDOG_SCRIPT   # over SSH
    started = time.time()

    def busy_past_idle_stop():
        return any(now > started + 60 + 2 and kind == "kept" and "gpu processes 1" in what
                   for now, kind, what in de.watchdog_checks(container))

    wait_for(busy_past_idle_stop, "checks that found a GPU process for longer than idle_stop", limit_s=180, step_s=0.5)
    assert ctl.state(vm) == "running"
    de.put_files(container, {"/srv/fake-nvidia-smi/pids": b""}, mode=0o644)
    wait_for(lambda: ctl.state(vm) == "exited", "the container to stop itself once idle for idle_stop",
             limit_s=180, step_s=0.5)
    stopped = de.watchdog_stopped(container)
    assert stopped["reason"] == "idle" and "gpu processes 0" in stopped["detail"], stopped
    # the journal alone cannot know an idle stop: status shows it Ready until a command looks at the cloud
    assert _status_row(ctl, vm)["limits"]["expired"] is False
    _reap_removes_it(ctl, vm, "expired (stopped itself): idle for its idle_stop of 1m")
