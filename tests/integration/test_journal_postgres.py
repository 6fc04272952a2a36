"""The real playbooks on a PostgreSQL journal (a throw-away server, tests/pg_server.py), the
local cloud's instance records in a shared folder (its ``root`` option), each controller with a
HOME of its own, as AWX jobs are:

  * two controllers provisioning one name at once make exactly one VM;
  * the server restarted mid-launch: the run fails cleanly or resumes, a re-run finishes, and
    nothing is lost (one VM, the journal says Ready);
  * a refused connection or a wrong password: a clear error naming the journal, no password.
"""

from __future__ import annotations

import os
import re
import threading
import time

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journals import open_journal
from ansible_collections.gpuprov.cloud.tests import pg_server
from ansible_collections.gpuprov.cloud.tests.crashpoints import harness as crashpoints
from ansible_collections.gpuprov.cloud.tests.integration.conftest import (
    journal_row, live_sshd_folders, local_args, pg_controllers,
)

NEVER = ("Traceback", "database is locked", pg_server.PASSWORD)


@pytest.fixture
def controllers(tmp_path, postgres):
    with pg_controllers(tmp_path, postgres) as found:
        yield found


def _never(*runs):
    for run in runs:
        for text in NEVER:
            assert text not in run.out, run


def test_two_controllers_provisioning_one_name_at_once_make_one_vm(controllers):
    shared, dsn, (job1, job2) = controllers
    results = [None, None]

    def provision(index, job):
        results[index] = job.playbook("provision", *local_args(shared, "pgone"))
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
    row = journal_row(dsn, "pgone")
    assert row.state["kind"] == "Ready" and row.lease_owner is None
    assert row.state["vm"]["instance_id"] == os.path.basename(live_sshd_folders(shared)[0])


def test_a_server_restart_mid_launch_loses_nothing(controllers, postgres):
    shared, dsn, (job1, _job2) = controllers
    # The run is held at its create (journalled Creating, mid-launch) by the crash-point callback while the server
    # restarts, then let go: a local launch is otherwise over before a poll of the journal could catch it.
    points = shared.parent / "pgrestart-points"
    proc = job1.popen("provision", *local_args(shared, "pgrestart"),
                      extra_env=crashpoints.crash_env("before create #1", points, job1.env, action="PAUSE"))
    deadline = time.time() + 300
    while not (points / "paused.json").exists():
        if proc.poll() is not None or time.time() > deadline:
            if proc.poll() is None:
                proc.kill()
            out, _err = proc.communicate(timeout=60)
            pytest.fail("the launch never reached its create (rc %s): %s" % (proc.returncode, out[-3000:]))
        time.sleep(0.1)
    row = journal_row(dsn, "pgrestart")
    assert row is not None and not row.terminal, row
    postgres.restart()
    (points / "resume").touch()
    out, _err = proc.communicate(timeout=600)
    first = "%s" % out
    assert pg_server.PASSWORD not in first and "Traceback" not in first, first
    if proc.returncode != 0:
        assert "PostgreSQL journal" in first and "run again" in first, first
    again = job1.playbook("provision", *local_args(shared, "pgrestart"))
    _never(again)
    assert again.rc == 0, again
    row = journal_row(dsn, "pgrestart")
    assert row.state["kind"] == "Ready"
    assert [os.path.basename(f) for f in live_sshd_folders(shared)] == [row.state["vm"]["instance_id"]]
    events = [e["to"] for e in open_journal(dsn, password=pg_server.PASSWORD).events("pgrestart")]
    assert events[0] and events[-1] == "Ready"


@pytest.mark.parametrize("problem", ["refused", "wrong password"])
def test_an_unreachable_journal_is_a_clear_error_without_the_password(controllers, postgres, problem):
    shared, dsn, (job1, _job2) = controllers
    if problem == "refused":
        secret = "inline-secret-1"
        target = "postgresql://gpuprov:%s@127.0.0.1:%d/nowhere" % (secret, pg_server._free_port())  # noqa
        shown = "postgresql://gpuprov@127.0.0.1:"
    else:
        secret = "not-the-password"
        target = dsn
        shown = dsn
    run = job1.playbook("provision", *local_args(shared, "pgerr"),
                        extra_env={"GPUPROV_JOURNAL": target, "PGPASSWORD": secret})
    assert run.rc != 0, run
    assert shown in run.out and "journal" in run.out, run
    assert secret not in run.out, run
    assert ("accepts connections" if problem == "refused" else "password authentication failed") in run.out, run
    assert live_sshd_folders(shared) == []
