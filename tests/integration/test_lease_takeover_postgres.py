"""A controller SIGKILLed while it holds a VM's lease on a PostgreSQL journal, with the real
ansible-playbook (killed at a crash point by the test-only callback, tests/crashpoints/), and a
second controller (another HOME) that then provisions the same name:

  * the killed controller ran on this host: it is provably dead (its pid is gone), so the second
    takes the lease over at once, resumes the launch and adopts the instance the first made;
  * the killed controller ran on another host (its own UTS namespace, so its lease names another
    hostname): liveness across hosts is by lease expiry only, so the second is refused, clearly,
    naming the holder and when its lease expires, and makes nothing;
  * the same with a short lease (lease_ttl, here from GPUPROV_LEASE_TTL): refused first, then, once
    the lease expired by the PostgreSQL server's clock, the second takes over, adopts the instance
    (one VM) and ``down`` leaves none. The journal's expiry itself is also tested at the API level in
    tests/unit/test_journal_backends.py."""

from __future__ import annotations

import os
import shutil
import subprocess
import time

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journals import open_journal
from ansible_collections.gpuprov.cloud.tests import pg_server
from ansible_collections.gpuprov.cloud.tests.crashpoints import harness
from ansible_collections.gpuprov.cloud.tests.integration.conftest import (
    journal_row, live_sshd_folders, local_args, pg_controllers,
)

# The adapter's create returned: the instance exists and the launch, holding the lease, has yet to record it.
KILL_POINT = "after create #1"
OTHER_HOST = "controller-on-another-host"
# The killed controller's lease_ttl: long enough that the second controller's first run (an
# ansible-playbook start on a busy machine) still meets the lease, short enough to wait out.
SHORT_LEASE_TTL = 30
# How long the test waits, at most, for that lease to expire by the server's clock: a bound, not a measure.
EXPIRY_WAIT_BOUND_S = 3 * SHORT_LEASE_TTL


@pytest.fixture
def controllers(tmp_path, postgres):
    with pg_controllers(tmp_path, postgres, shared_key=True) as found:
        yield found


def _killed_mid_launch(job, shared, vm, tmp_path, prefix=()):
    """Run provision as ``job`` until the crash point kills it (``prefix``: what runs it, e.g. unshare)."""
    folder = tmp_path / ("crash-" + vm)
    env = dict(job.env, **harness.crash_env(KILL_POINT, folder, job.env))
    # Output to a file, not a pipe: the VM's sshd, started by the killed run, would hold a pipe open.
    log = tmp_path / ("crash-%s.log" % vm)
    with open(log, "w") as out:
        subprocess.run(list(prefix) + job.command("provision", *local_args(shared, vm)), env=env, cwd=str(job.home),
                       stdout=out, stderr=subprocess.STDOUT, timeout=300, check=False)
    assert harness.killed_at(folder) == KILL_POINT, log.read_text()
    [instance] = [os.path.basename(f) for f in live_sshd_folders(shared)]
    row = journal_row(dsn_of(job), vm)
    assert row.lease_owner and not row.terminal, (row.lease_owner, row.label)   # killed holding the lease
    return instance, row.lease_owner


def _on_another_host():
    """What runs a command as a controller on another host (its own UTS namespace and hostname)."""
    if os.geteuid() != 0 or not shutil.which("unshare") or subprocess.run(
            ["unshare", "--uts", "true"], capture_output=True, check=False).returncode != 0:
        pytest.skip("needs root and unshare --uts to run a controller under another hostname")
    return ["unshare", "--uts", "sh", "-c", 'hostname "$0" && exec "$@"', OTHER_HOST]


def _wait_until_lease_expired(dsn, vm, bound_s):
    """Poll the journal until ``vm``'s lease has expired by the PostgreSQL server's clock (at most
    ``bound_s`` seconds; a bound, not a measure). True when it did."""
    journal = open_journal(dsn, password=pg_server.PASSWORD)
    try:
        give_up = time.monotonic() + bound_s
        while True:
            [(left,)] = journal.query("SELECT lease_expires - EXTRACT(EPOCH FROM now()) FROM machines WHERE key = ?",
                                      (vm,))
            if left is None or left <= 0:
                return True
            if time.monotonic() > give_up:
                return False
            time.sleep(min(left, 1.0) + 0.1)
    finally:
        journal.close()


def dsn_of(job):
    return job.env["GPUPROV_JOURNAL"]


def test_a_killed_controller_on_this_host_is_taken_over_at_once(controllers, tmp_path):
    shared, dsn, (job1, job2) = controllers
    instance, _holder = _killed_mid_launch(job1, shared, "lt1", tmp_path)
    again = job2.playbook("provision", *local_args(shared, "lt1"), timeout=240)
    assert again.rc == 0, again
    assert "Traceback" not in again.out and pg_server.PASSWORD not in again.out
    # One VM: the instance the killed run made, adopted; the lease released.
    assert [os.path.basename(f) for f in live_sshd_folders(shared)] == [instance]
    row = journal_row(dsn, "lt1")
    assert row.state["kind"] == "Ready" and row.state["vm"]["instance_id"] == instance
    assert row.lease_owner is None


def test_a_killed_controller_on_another_host_holds_its_lease_until_it_expires(controllers, tmp_path):
    shared, dsn, (job1, job2) = controllers
    instance, holder = _killed_mid_launch(job1, shared, "lt2", tmp_path, prefix=_on_another_host())
    assert holder.startswith(OTHER_HOST + ":")
    refused = job2.playbook("provision", *local_args(shared, "lt2"), timeout=120)
    assert refused.rc != 0 and refused.recap()["lt2"]["changed"] == 0, refused
    assert holder in refused.out and "retry after the lease expires" in refused.out, refused
    assert "Traceback" not in refused.out
    # Nothing was made or changed: the lease and the launch are the killed run's until the lease expires.
    assert [os.path.basename(f) for f in live_sshd_folders(shared)] == [instance]
    row = journal_row(dsn, "lt2")
    assert row.lease_owner == holder and not row.terminal


def test_a_killed_controller_on_another_host_is_taken_over_once_its_short_lease_expires(controllers, tmp_path):
    shared, dsn, (job1, job2) = controllers
    prefix = _on_another_host()
    job1.env["GPUPROV_LEASE_TTL"] = str(SHORT_LEASE_TTL)
    instance, holder = _killed_mid_launch(job1, shared, "lt3", tmp_path, prefix=prefix)
    assert holder.startswith(OTHER_HOST + ":")
    # Before it expires: refused, naming the holder; nothing made.
    refused = job2.playbook("provision", *local_args(shared, "lt3"), timeout=120)
    assert refused.rc != 0 and refused.recap()["lt3"]["changed"] == 0, refused
    assert holder in refused.out and "retry after the lease expires" in refused.out, refused
    assert [os.path.basename(f) for f in live_sshd_folders(shared)] == [instance]
    # Expired by the server's clock (the killed run renews nothing): the second controller takes over.
    assert _wait_until_lease_expired(dsn, "lt3", EXPIRY_WAIT_BOUND_S), journal_row(dsn, "lt3").lease_expires
    taken = job2.playbook("provision", *local_args(shared, "lt3"), timeout=240)
    assert taken.rc == 0, taken
    assert "Traceback" not in taken.out and pg_server.PASSWORD not in taken.out
    # One VM: the instance the killed run made, adopted; the lease released.
    assert [os.path.basename(f) for f in live_sshd_folders(shared)] == [instance]
    row = journal_row(dsn, "lt3")
    assert row.state["kind"] == "Ready" and row.state["vm"]["instance_id"] == instance
    assert row.lease_owner is None
    down = job2.playbook("down", *local_args(shared, "lt3"), timeout=240)
    assert down.rc == 0, down
    assert live_sshd_folders(shared) == []
    assert journal_row(dsn, "lt3").terminal
