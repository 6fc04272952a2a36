# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The VM watchdog (plugins/module_utils/expiry/watchdog.py) on a real machine: containers of the docker test
cloud's base image on the real Docker engine, PID 1 docker-init (``docker run --init``) over ``sleep``, no systemd,
no controller. Each is installed through ``watchdog_boot_part`` (the loop route, started with setsid) with a 1-second
check interval and must stop itself: its PID 1 takes the watchdog's ``kill -TERM 1`` (the base image has no
``poweroff``). One has its deadline moved with ``deadline_update_command`` before it passes and stays up; one
runs a FAKE ``nvidia-smi`` that reports a GPU process (kept up), then none (stopped for idleness).

Nothing waits a fixed time: each wait is on a condition (the container's state, a line of the watchdog's log).
Skipped, with the reason, only when no Docker engine answers. Containers are named ``wdg-<hex>-...`` and removed
at the end, pass or fail.
"""

from __future__ import annotations

import time
import uuid

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.expiry import watchdog
from ansible_collections.gpuprov.cloud.plugins.module_utils.expiry.limits import Limits
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import VM_NAME_TAG
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.docker import DEFAULT_BASE_IMAGE
from ansible_collections.gpuprov.cloud.tests.fakes import docker_engine as de
from ansible_collections.gpuprov.cloud.tests.unit.helpers import wait_for

pytestmark = pytest.mark.xdist_group("docker")

PREFIX = "wdg-%s" % uuid.uuid4().hex[:6]
GRACE_S = 1
INTERVAL_S = 1
FAKE_NVIDIA_SMI = b"""#!/bin/sh
# FAKE nvidia-smi (tests only): --query-compute-apps prints the pids in /srv/fake-nvidia-smi/pids
case "$*" in
    *--query-compute-apps=pid*) cat /srv/fake-nvidia-smi/pids ;;
    *) echo "FAKE nvidia-smi (tests only): unsupported $*" >&2; exit 2 ;;
esac
"""


class Vm:
    """A container of the base image playing a VM with no systemd: PID 1 docker-init, then sleep."""

    def __init__(self, client, tag):
        self.name = "%s-%s-%s" % (PREFIX, tag, uuid.uuid4().hex[:4])
        self.container = client.containers.run(DEFAULT_BASE_IMAGE, ["sleep", "infinity"], detach=True, name=self.name,
                                               labels={VM_NAME_TAG: self.name}, init=True)

    def put(self, files, mode=0o755):
        """Write {absolute path: bytes} into the container (its folders made)."""
        de.put_files(self.container, files, mode)

    def sh(self, script):
        code, out = self.container.exec_run(["sh", "-c", script])
        return code, out.decode(errors="replace")

    def boot(self, limits):
        """What a boot script does: run the watchdog's boot part (as root), here over docker exec."""
        self.put({"/opt/gpuprov-test/boot.sh": ("#!/bin/sh\nset -eu\n" + watchdog.watchdog_boot_part(
            limits, GRACE_S, interval_s=INTERVAL_S)).encode()})
        code, out = self.sh("sh /opt/gpuprov-test/boot.sh")
        assert code == 0 and "gpuprov watchdog: installed" in out, out

    def state(self):
        self.container.reload()
        return self.container.status

    def clock(self):
        return int(self.sh("date +%s")[1].strip())

    def read(self, path):
        """A file's text, from a running or a stopped container ("" when it is not there)."""
        return de.read_file(self.container, path)

    def checks(self):
        """The watchdog's log as (now, kept|stop, what) per check."""
        return de.watchdog_checks(self.container)

    def stopped(self):
        return de.watchdog_stopped(self.container)


@pytest.fixture(scope="module")
def engine():
    client, why = de.engine()
    if client is None:
        pytest.skip("the watchdog's docker tests need a Docker engine: %s" % why)
    de.ensure_base_image(client, DEFAULT_BASE_IMAGE)
    try:
        yield client
    finally:
        de.remove_containers(client, PREFIX)


@pytest.fixture
def vm(engine):
    made = []

    def make(tag):
        made.append(Vm(engine, tag))
        return made[-1]

    try:
        yield make
    finally:
        for found in made:
            de.remove_containers(engine, found.name)


def test_a_vm_past_its_deadline_stops_itself_with_no_controller_and_says_why(vm):
    host = vm("deadline")
    deadline = host.clock() + 4
    host.boot(Limits(expires_at=deadline))
    assert host.read("/etc/gpuprov/limits").splitlines()[0] == "deadline=%d" % deadline
    wait_for(lambda: host.state() == "exited", "the container to stop itself at its deadline", limit_s=90, step_s=0.5)
    stopped = host.stopped()
    assert stopped["reason"] == "deadline", stopped
    assert int(stopped["at"]) > deadline + GRACE_S
    checks = host.checks()
    assert checks[-1][1] == "stop" and checks[-1][2].startswith("deadline: now "), checks
    assert all(kind == "kept" for now, kind, _what in checks[:-1] if now <= deadline + GRACE_S), checks


def test_a_deadline_moved_before_it_passes_keeps_the_vm_up(vm):
    host = vm("extend")
    old = host.clock() + 8
    host.boot(Limits(expires_at=old))
    code, out = host.sh(watchdog.deadline_update_command(Limits(expires_at=old + 3600)))
    assert code == 0, out
    assert "deadline=%d" % (old + 3600) in host.read("/etc/gpuprov/limits").splitlines()
    # The old deadline, its grace and two more checks have passed, and a check that late kept the VM up.
    after = old + GRACE_S + 2 * INTERVAL_S

    def kept_after_the_old_deadline():
        return any(now > after and kind == "kept" for now, kind, _what in host.checks())

    wait_for(kept_after_the_old_deadline, "a check after the old deadline that kept the VM up", limit_s=90, step_s=0.5)
    assert host.state() == "running"
    assert not any(kind == "stop" for _now, kind, _what in host.checks())
    assert host.stopped() == {}
    # a second run of the boot part keeps the controller's limits and starts no second loop
    host.boot(Limits(expires_at=old))
    assert "deadline=%d" % (old + 3600) in host.read("/etc/gpuprov/limits").splitlines()

    def loops():
        return host.sh("ps -eo args | grep -c '^/bin/sh /usr/local/sbin/gpuprov-watchdog$'")[1].strip()

    wait_for(lambda: loops() == "1", "the second loop to leave, the first running", limit_s=30, step_s=0.5)
    assert host.state() == "running"


def test_idle_stop_keeps_a_vm_with_a_gpu_process_and_stops_it_once_none_is_left(vm):
    host = vm("idle")
    idle_stop = 3
    host.put({"/srv/fake-nvidia-smi/pids": b"4242\n"}, mode=0o644)
    host.put({"/usr/local/bin/nvidia-smi": FAKE_NVIDIA_SMI})
    host.boot(Limits(idle_stop_s=idle_stop))
    started = host.clock()

    def busy_for_longer_than_idle_stop():
        return any(now > started + idle_stop + INTERVAL_S and kind == "kept" and "busy:" in what
                   and "gpu processes 1" in what for now, kind, what in host.checks())

    wait_for(busy_for_longer_than_idle_stop, "busy checks (a GPU process) for longer than idle_stop", limit_s=90, step_s=0.5)
    assert host.state() == "running"
    freed = time.time()
    host.put({"/srv/fake-nvidia-smi/pids": b""}, mode=0o644)
    wait_for(lambda: host.state() == "exited", "the container to stop itself once idle for idle_stop", limit_s=90, step_s=0.5)
    stopped = host.stopped()
    assert stopped["reason"] == "idle" and "gpu processes 0" in stopped["detail"], stopped
    assert int(stopped["at"]) >= int(freed) + idle_stop - 1      # the clocks are the same host's; idle counts from the
    #                                                              first idle check, at most one interval after the file
    idle_checks = [what for _now, kind, what in host.checks() if kind == "kept" and "idle for" in what]
    assert idle_checks and all("gpu processes 0" in what for what in idle_checks), idle_checks
