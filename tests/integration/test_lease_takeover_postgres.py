"""A controller SIGKILLed while it holds a VM's lease on a PostgreSQL journal, with the real
ansible-playbook (killed at a crash point by the test-only callback, tests/crashpoints/), and a
second controller (another HOME) that then provisions the same name:

  * the killed controller ran on this host: it is provably dead (its pid is gone), so the second
    takes the lease over at once, resumes the launch and adopts the instance the first made;
  * the killed controller ran on another host (its own UTS namespace, so its lease names another
    hostname): liveness across hosts is by lease expiry only, so the second is refused, clearly,
    naming the holder and when its lease expires, and makes nothing.

Not here: the takeover once the other host's lease expired. LEASE_TTL_S is 120 s and there is no
user option to shorten it; waiting it out has no place in a test. The journal's expiry itself
(server clock, takeover after expiry) is tested at the API level in tests/unit/test_journal_backends.py."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journals import open_journal
from ansible_collections.gpuprov.cloud.tests import pg_server
from ansible_collections.gpuprov.cloud.tests.crashpoints import harness
from ansible_collections.gpuprov.cloud.tests.integration.conftest import Ansible, kill_sshds, live_sshd_folders

# The adapter's create returned: the instance exists and the launch, holding the lease, has yet to record it.
KILL_POINT = "after create #1"
OTHER_HOST = "controller-on-another-host"


@pytest.fixture(scope="module")
def server():
    reason = pg_server.unavailable()
    if reason:
        pytest.skip("PostgreSQL journal tests: %s" % reason)
    srv = pg_server.PgServer()
    yield srv
    srv.destroy()


@pytest.fixture
def controllers(tmp_path, server):
    if not shutil.which("sshd") and not os.path.exists("/usr/sbin/sshd"):
        pytest.skip("openssh-server (sshd) is not installed; .ci/run installs it")
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o700)
    dsn = server.new_database()
    # One SSH key for both, as an AWX credential gives every job the same key.
    key = shared / "ssh_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    runners = []
    for index in (1, 2):
        home = tmp_path / ("job%d-home" % index)
        home.mkdir(mode=0o700)
        runner = Ansible(home)
        runner.env.update(GPUPROV_JOURNAL=dsn, PGPASSWORD=pg_server.PASSWORD, GPUPROV_SSH_KEY_FILE=str(key))
        runners.append(runner)
    try:
        yield shared, dsn, runners
    finally:
        kill_sshds(shared)


def _args(shared, vm):
    return ["-e", "vm=%s" % vm, "-e", "k8s=false",
            "-e", json.dumps({"gpuprov_cloud_options": {"local": {"root": str(shared / "local")}}})]


def _row(dsn, vm):
    journal = open_journal(dsn, password=pg_server.PASSWORD)
    try:
        return journal.load(vm)
    finally:
        journal.close()


def _killed_mid_launch(job, shared, vm, tmp_path, prefix=()):
    """Run provision as ``job`` until the crash point kills it (``prefix``: what runs it, e.g. unshare)."""
    folder = tmp_path / ("crash-" + vm)
    env = dict(job.env, **harness.crash_env(KILL_POINT, folder, job.env))
    # Output to a file, not a pipe: the VM's sshd, started by the killed run, would hold a pipe open.
    log = tmp_path / ("crash-%s.log" % vm)
    with open(log, "w") as out:
        subprocess.run(list(prefix) + job.command("provision", *_args(shared, vm)), env=env, cwd=str(job.home),
                       stdout=out, stderr=subprocess.STDOUT, timeout=300, check=False)
    assert harness.killed_at(folder) == KILL_POINT, log.read_text()
    [instance] = [os.path.basename(f) for f in live_sshd_folders(shared)]
    row = _row(dsn_of(job), vm)
    assert row.lease_owner and not row.terminal, (row.lease_owner, row.label)   # killed holding the lease
    return instance, row.lease_owner


def dsn_of(job):
    return job.env["GPUPROV_JOURNAL"]


def test_a_killed_controller_on_this_host_is_taken_over_at_once(controllers, tmp_path):
    shared, dsn, (job1, job2) = controllers
    instance, _holder = _killed_mid_launch(job1, shared, "lt1", tmp_path)
    again = job2.playbook("provision", *_args(shared, "lt1"), timeout=240)
    assert again.rc == 0, again
    assert "Traceback" not in again.out and pg_server.PASSWORD not in again.out
    # One VM: the instance the killed run made, adopted; the lease released.
    assert [os.path.basename(f) for f in live_sshd_folders(shared)] == [instance]
    row = _row(dsn, "lt1")
    assert row.state["kind"] == "Ready" and row.state["vm"]["instance_id"] == instance
    assert row.lease_owner is None


def test_a_killed_controller_on_another_host_holds_its_lease_until_it_expires(controllers, tmp_path):
    shared, dsn, (job1, job2) = controllers
    if os.geteuid() != 0 or not shutil.which("unshare") or subprocess.run(
            ["unshare", "--uts", "true"], capture_output=True, check=False).returncode != 0:
        pytest.skip("needs root and unshare --uts to run a controller under another hostname")
    prefix = ["unshare", "--uts", "sh", "-c", 'hostname "$0" && exec "$@"', OTHER_HOST]
    instance, holder = _killed_mid_launch(job1, shared, "lt2", tmp_path, prefix=prefix)
    assert holder.startswith(OTHER_HOST + ":")
    refused = job2.playbook("provision", *_args(shared, "lt2"), timeout=120)
    assert refused.rc != 0 and refused.recap()["lt2"]["changed"] == 0, refused
    assert holder in refused.out and "retry after the lease expires" in refused.out, refused
    assert "Traceback" not in refused.out
    # Nothing was made or changed: the lease and the launch are the killed run's until the lease expires.
    assert [os.path.basename(f) for f in live_sshd_folders(shared)] == [instance]
    row = _row(dsn, "lt2")
    assert row.lease_owner == holder and not row.terminal
