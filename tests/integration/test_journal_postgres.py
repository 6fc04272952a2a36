"""The real playbooks on a PostgreSQL journal (a throw-away server, tests/pg_server.py), the
local cloud's instance records in a shared folder (its ``root`` option), each controller with a
HOME of its own, as AWX jobs are:

  * two controllers provisioning one name at once make exactly one VM;
  * the server restarted mid-launch: the run fails cleanly or resumes, a re-run finishes, and
    nothing is lost (one VM, the journal says Ready);
  * a refused connection or a wrong password: a clear error naming the journal, no password.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import threading
import time

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journals import open_journal
from ansible_collections.gpuprov.cloud.tests import pg_server
from ansible_collections.gpuprov.cloud.tests.integration.conftest import Ansible, kill_sshds, live_sshd_folders

NEVER = ("Traceback", "database is locked", pg_server.PASSWORD)


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
    runners = []
    for index in (1, 2):
        home = tmp_path / ("job%d-home" % index)
        home.mkdir(mode=0o700)
        runner = Ansible(home)
        runner.env.update(GPUPROV_JOURNAL=dsn, PGPASSWORD=pg_server.PASSWORD)
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


def _never(*runs):
    for run in runs:
        for text in NEVER:
            assert text not in run.out, run


def test_two_controllers_provisioning_one_name_at_once_make_one_vm(controllers):
    shared, dsn, (job1, job2) = controllers
    results = [None, None]

    def provision(index, job):
        results[index] = job.playbook("provision", *_args(shared, "pgone"))
    threads = [threading.Thread(target=provision, args=(i, job)) for i, job in enumerate((job1, job2))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(600)
    _never(*results)
    assert any(run.rc == 0 and run.recap()["pgone"]["changed"] for run in results), results
    for run in results:
        assert run.rc == 0 or re.search(r"another run|lease|key|fingerprint", run.out, re.I), run
    assert len(live_sshd_folders(shared)) == 1
    row = _row(dsn, "pgone")
    assert row.state["kind"] == "Ready" and row.lease_owner is None
    assert row.state["vm"]["instance_id"] == os.path.basename(live_sshd_folders(shared)[0])


def test_a_server_restart_mid_launch_loses_nothing(controllers, server):
    shared, dsn, (job1, _job2) = controllers
    proc = job1.popen("provision", *_args(shared, "pgrestart"))
    deadline = time.time() + 120
    while time.time() < deadline:
        row = _row(dsn, "pgrestart")
        if row is not None and not row.terminal:
            break
        time.sleep(0.2)
    else:
        proc.kill()
        pytest.fail("the launch never reached the journal")
    server.restart()
    out, _err = proc.communicate(timeout=600)
    first = "%s" % out
    assert pg_server.PASSWORD not in first and "Traceback" not in first, first
    if proc.returncode != 0:
        assert "PostgreSQL journal" in first and "run again" in first, first
    again = job1.playbook("provision", *_args(shared, "pgrestart"))
    _never(again)
    assert again.rc == 0, again
    row = _row(dsn, "pgrestart")
    assert row.state["kind"] == "Ready"
    assert [os.path.basename(f) for f in live_sshd_folders(shared)] == [row.state["vm"]["instance_id"]]
    events = [e["to"] for e in open_journal(dsn, password=pg_server.PASSWORD).events("pgrestart")]
    assert events[0] and events[-1] == "Ready"


@pytest.mark.parametrize("problem", ["refused", "wrong password"])
def test_an_unreachable_journal_is_a_clear_error_without_the_password(controllers, server, problem):
    shared, dsn, (job1, _job2) = controllers
    if problem == "refused":
        secret = "inline-secret-1"
        target = "postgresql://gpuprov:%s@127.0.0.1:%d/nowhere" % (secret, pg_server._free_port())  # noqa
        shown = "postgresql://gpuprov@127.0.0.1:"
    else:
        secret = "not-the-password"
        target = dsn
        shown = dsn
    run = job1.playbook("provision", *_args(shared, "pgerr"),
                        extra_env={"GPUPROV_JOURNAL": target, "PGPASSWORD": secret})
    assert run.rc != 0, run
    assert shown in run.out and "journal" in run.out, run
    assert secret not in run.out, run
    assert ("accepts connections" if problem == "refused" else "password authentication failed") in run.out, run
    assert live_sshd_folders(shared) == []
