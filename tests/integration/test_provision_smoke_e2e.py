"""provision on the local cloud (real sshd): the smoke command runs in the vm task's verified SSH
session, so the play makes no second login of its own; a run that did not log in (check mode on a
kept VM) still runs the smoke command through Ansible's connection."""

from __future__ import annotations

import re

SMOKE = "Run a smoke command on the VM"


def _outcome(out: str, task: str, host: str) -> str:
    """What the default callback printed for ``host`` under ``task``: ok, changed, skipping, failed...,
    or "not run" when the play that holds the task had no host to run it on."""
    if "TASK [%s]" % task not in out:
        return "not run"
    start = out.index("TASK [%s]" % task)
    block = re.split(r"\n(?:TASK \[|PLAY RECAP)", out[start + 1:], maxsplit=1)[0]
    found = re.search(r"^(\w+): \[%s\]" % re.escape(host), block, re.MULTILINE)
    assert found, block
    return found.group(1)


def _provision(ansible, *args: str):
    run = ansible.playbook("provision", *args)
    assert run.rc == 0, run
    return run


def test_the_smoke_command_runs_in_the_vm_tasks_login(ansible):
    try:
        first = _provision(ansible, "-e", "vm=smoke1")
        # No second login: the play's own smoke command is not run (the VM is not even in the play that holds it),
        # and nothing waits for Ansible's connection ...
        assert _outcome(first.out, SMOKE, "smoke1") == "not run", first
        assert "wait_for_connection" not in first.out and "TASK [Wait" not in first.out, first
        # ... and the user still sees the smoke line: uname -a, run in the vm task's SSH session.
        assert re.search(r"smoke command: Linux \S+", first.out), first

        # A re-run reuses the VM and logs in again (Connecting): again no second login.
        again = _provision(ansible, "-e", "vm=smoke1")
        assert again.recap()["smoke1"]["changed"] == 0, again
        assert _outcome(again.out, SMOKE, "smoke1") == "not run", again
        assert re.search(r"smoke command: Linux \S+", again.out), again

        # Check mode keeps the VM without logging in: the play's own smoke command runs, through Ansible's SSH.
        check = _provision(ansible, "-e", "vm=smoke1", "--check")
        assert _outcome(check.out, SMOKE, "smoke1") == "ok", check
        assert re.search(r"smoke command: Linux \S+", check.out), check
        assert "would keep smoke1: up at 127.0.0.1" in check.out, check
    finally:
        down = ansible.playbook("down", "-e", "vm=smoke1")
        assert down.rc == 0, down
    assert ansible.live_sshd() == []
