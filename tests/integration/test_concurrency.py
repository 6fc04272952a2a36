"""Concurrency with real ansible-playbook processes on the local cloud (real sshd), one journal:

  * 20 provisions of one name started together give exactly one VM; every other run ends in a
    clear lease error or a no-op Ready;
  * 20 provisions of different names at once give 20 VMs, and no "database is locked";
  * provision against down of one name, 10 times: a down that succeeded while the provision
    could still create never leaves a VM behind, and the journal's final state agrees with
    what exists (Ready <=> exactly one sshd, anything else <=> none).
"""

from __future__ import annotations

import concurrent.futures
import os
import re
import shutil
import signal
import subprocess
import threading
import time

import pytest

from ansible_collections.gpuprov.cloud.tests.crashpoints import harness

CLEAR_REFUSAL = re.compile(r"another run|lease|cancel", re.I)
NEVER = ("database is locked", "Traceback", "stopped on an unexpected")


@pytest.fixture
def local(tmp_path):
    if not shutil.which("sshd") and not os.path.exists("/usr/sbin/sshd"):
        pytest.skip("openssh-server (sshd) is not installed; .ci/run installs it")
    sandbox = harness.Sandbox(tmp_path, harness.LocalCloud().args())
    try:
        yield sandbox
    finally:
        for pid in harness.sshd_pids(sandbox.home / "local"):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        sandbox.close()


def _start(sandbox: harness.Sandbox, playbook: str, vm: str, *extra: str, env=None) -> subprocess.Popen:
    command = [str(harness.BIN / "ansible-playbook"), "gpuprov.cloud.%s" % playbook] + harness.vm_args(vm) + \
        sandbox.cloud_args + list(extra)
    return subprocess.Popen(command, env=dict(sandbox.env, **(env or {})), cwd=str(sandbox.home),
                            stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True, start_new_session=True)


def _finish(proc: subprocess.Popen, timeout: float = 600) -> harness.Run:
    out, _err = proc.communicate(timeout=timeout)
    return harness.Run(proc.returncode, out, 0.0, None)


def _result(run: harness.Run, vm: str) -> str:
    """changed | no-op | refused | what went wrong (for a provision, "changed" means it created the VM)"""
    recap = re.search(r"^%s\s*:\s*ok=\d+\s+changed=(\d+)" % re.escape(vm), run.out, re.M)
    if run.rc == 0 and recap:
        return "changed" if recap.group(1) != "0" else "no-op"
    message = run.failure()
    if run.rc != 0 and CLEAR_REFUSAL.search(message):
        return "refused"
    return "rc %s: %s" % (run.rc, message)


def _never(runs) -> None:
    for index, run in enumerate(runs):
        for text in NEVER:
            assert text not in run.out, "run %d printed %r:\n%s" % (index, text, run.tail(40))


def _agrees(sandbox: harness.Sandbox, vm: str) -> str:
    """'' when the journal and the machine agree, else what disagrees."""
    row = sandbox.journal(vm)
    found = harness.LocalCloud().instances(sandbox, vm)
    if row["state"] == "Ready":
        return "" if found == [row["instance_id"]] else "journal Ready (%s) but %s run" % (row["instance_id"], found)
    if found:
        return "journal says %s (%s) but %s run" % (row["label"], row["kind"], found)
    if not row["terminal"] or row["state"] == "Leaked":
        return "journal says %s (%s), though nothing runs and no run is live" % (row["label"], row["kind"])
    return ""


def test_twenty_provisions_of_one_name(local):
    started = time.monotonic()
    procs = [_start(local, "provision", "same") for _run in range(20)]
    runs = [_finish(p) for p in procs]
    took = time.monotonic() - started
    results = [_result(run, "same") for run in runs]
    summary = {r: results.count(r) for r in set(results)}
    print("\n20 provisions of one name, %.0f s: %s" % (took, summary))
    _never(runs)
    unclear = [(i, r) for i, r in enumerate(results) if r not in ("changed", "no-op", "refused")]
    assert not unclear, "runs neither created, no-op, nor a clear lease error: %s" % unclear
    assert results.count("changed") == 1, summary
    assert len(harness.LocalCloud().instances(local, "same")) == 1
    assert _agrees(local, "same") == ""
    down = local.fleet("down", ["same"])
    assert not down.failed, down.failed
    assert harness.LocalCloud().instances(local, "same") == []


def test_twenty_names_into_one_journal(local):
    names = ["many%02d" % i for i in range(20)]
    started = time.monotonic()
    procs = [_start(local, "provision", vm) for vm in names]
    runs = [_finish(p) for p in procs]
    took = time.monotonic() - started
    print("\n20 provisions of 20 names into one journal: %.0f s" % took)
    _never(runs)
    failed = {vm: run.failure() for vm, run in zip(names, runs, strict=True) if run.rc != 0}
    assert not failed, failed
    cloud = harness.LocalCloud()
    counts = {vm: len(cloud.instances(local, vm)) for vm in names}
    assert set(counts.values()) == {1}, counts
    disagree = {vm: _agrees(local, vm) for vm in names if _agrees(local, vm)}
    assert not disagree, disagree
    down = local.fleet("down", names)
    assert not down.failed, down.failed
    _never([down.run])
    assert {vm: cloud.instances(local, vm) for vm in names if cloud.instances(local, vm)} == {}


# Where the provision is, live and holding its lease, when down comes, in each of the 10
# rounds: nowhere yet (both start together), or held at one of these crash points (the test-only
# callback pauses it there until down has begun, so the race is the same on a fast machine).
RACE_PAUSES = (None, "after commit begin Reconciling #1", "after commit Reconciling -> Planning #1",
               "after commit Planning -> Preparing #1", "after commit Preparing -> Creating #1",
               "after create #1", "after commit Creating -> Booting #1", "after commit Booting -> Connecting #1",
               "before commit Connecting -> Ready #1", "after commit Connecting -> Ready #1")


def _race(sandbox: harness.Sandbox, index: int, pause) -> dict:
    """One round: provision (held at ``pause``), and down while it is held there."""
    vm = "race%02d" % index
    points = sandbox.home.parent / ("race-points-%s" % vm)
    env = harness.crash_env(pause, points, sandbox.env, action="PAUSE") if pause else {}
    provision = _start(sandbox, "provision", vm, "-e", "retry_until_up=true", env=env)
    lines = []
    vm_task_over = threading.Event()   # the provision's gpuprov.cloud.vm task has its result
    result_line = re.compile(r"^(ok|changed|fatal): \[%s\]" % re.escape(vm))

    def read():
        progress = False
        for line in provision.stdout:
            lines.append(line)
            progress = progress or line.startswith("gpuprov [%s" % vm)
            if progress and result_line.match(line):
                vm_task_over.set()
        vm_task_over.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    if pause:
        deadline = time.monotonic() + 300
        while not (points / "paused.json").exists() and provision.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
    down_started = time.time()
    down_proc = _start(sandbox, "down", vm)
    down_lines = []

    def read_down():
        for line in down_proc.stdout:
            down_lines.append(line)

    down_reader = threading.Thread(target=read_down, daemon=True)
    down_reader.start()
    if pause:
        # Let the provision go once down is at work on the VM (it printed progress) or done.
        while down_proc.poll() is None and not any(line.startswith("gpuprov [%s" % vm) for line in list(down_lines)):
            time.sleep(0.05)
        time.sleep(0.5)
        (points / "resume").write_text("")
    down_proc.wait(timeout=900)
    down_reader.join(timeout=60)
    down = harness.Run(down_proc.returncode, "".join(down_lines), 0.0, None)
    # Once its vm task is over the provision creates nothing more; what is left of the play
    # may wait up to 300 s (wait_for_connection) for a VM that this down removed: stop it.
    vm_task_over.wait(timeout=600)
    stopped = False
    try:
        provision.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(provision.pid, signal.SIGKILL)
        provision.wait(timeout=60)
        stopped = True
    reader.join(timeout=60)
    prov = harness.Run(provision.returncode, "".join(lines), 0.0, None)
    began = _launch_began(sandbox, vm)
    return {"vm": vm, "pause": pause or "together", "provision": prov, "down": down, "stopped": stopped,
            "began_before_down": began is not None and began < down_started}


def _launch_began(sandbox: harness.Sandbox, vm: str):
    """When the provision's launch took the journal (its first 'begin' of kind launch)."""
    import sqlite3

    if not sandbox.journal_path.exists():
        return None
    db = sqlite3.connect(str(sandbox.journal_path), timeout=30)
    try:
        row = db.execute("SELECT MIN(at) FROM machine_events WHERE key = ? AND event = 'begin' "
                         "AND to_label LIKE 'Reconciling%'", (vm,)).fetchone()
        return row[0] if row else None
    finally:
        db.close()


def test_provision_against_down(local):
    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        rounds = list(pool.map(lambda args: _race(local, *args), enumerate(RACE_PAUSES)))
    took = time.monotonic() - started
    cloud = harness.LocalCloud()
    problems = []
    lines = []
    for r in rounds:
        vm, down, prov = r["vm"], r["down"], r["provision"]
        found = cloud.instances(local, vm)
        row = local.journal(vm)
        lines.append("%s (provision at %-38s): provision rc %s%s, down rc %s (%s), journal %s, %d sshd"
                     % (vm, r["pause"], prov.rc, " (stopped after its vm task)" if r["stopped"] else "",
                        down.rc, _result(down, vm), row["label"], len(found)))
        for name, run in (("provision", prov), ("down", down)):
            for text in NEVER:
                if text in run.out:
                    problems.append("%s: the %s printed %r" % (vm, name, text))
        if down.rc == 0 and r["began_before_down"] and found:
            problems.append("%s: down succeeded while the provision (already running) could still create, "
                            "and %s runs now" % (vm, found))
        if down.rc != 0 and _result(down, vm).startswith("rc"):
            problems.append("%s: down failed without a clear reason: %s" % (vm, down.failure()))
        disagreement = _agrees(local, vm)
        if disagreement:
            problems.append("%s: %s" % (vm, disagreement))
    cleanup = local.fleet("down", [r["vm"] for r in rounds])
    for r in rounds:
        if r["vm"] in cleanup.failed or cloud.instances(local, r["vm"]):
            problems.append("%s: the final down failed or left %s: %s"
                            % (r["vm"], cloud.instances(local, r["vm"]), cleanup.failed.get(r["vm"])))
    print("\nprovision against down, 10 rounds, %.0f s:\n  %s" % (took, "\n  ".join(lines)))
    assert not problems, "\n".join(problems)
