"""A VM's limits through the vm task (issue 27): options checked before anything is made, the vm_limits row
journalled once the VM is up, re-runs (changed and diff only when the limits change, unset limits kept, up_since
kept for the same instance and reset for a new one), and state=absent forgetting them. On the local cloud
(a real sshd) in a temporary state directory, and on a journal alone for the store."""

from __future__ import annotations

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.expiry import limits as lim
from ansible_collections.gpuprov.cloud.plugins.module_utils.expiry import store, vm_task
from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journal import Journal
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.service import VmService

BASE = {"name": "lim", "state": "present", "clouds": ["local"], "gpu": None, "gpu_count": 1, "regions": [],
        "spot": False, "retry_until_up": False, "boot_timeout": None, "ssh_timeout": 60, "teardown_timeout": 60,
        "journal": None, "ssh_key": None, "ssh_user": None, "cloud_options": {}, "k8s": None, "boot_script": None}


@pytest.fixture
def home(home):
    """conftest.py's home; at the end this file's VM is taken down."""
    yield home
    if (home / "journal.sqlite").exists():   # never leave an sshd behind
        VmService(dict(BASE, state="absent")).run()


def _row(home, key="lim"):
    journal = Journal(str(home / "journal.sqlite"))
    try:
        return store.read(journal, key)
    finally:
        journal.close()


@pytest.mark.parametrize("change, message", [
    ({"ttl": "eight hours"}, "ttl: expected a duration such as 8h or 45m, got 'eight hours'"),
    ({"ttl": "8h", "expires_at": "2030-01-01T00:00:00Z"}, "ttl: cannot be given with expires_at"),
    ({"expires_at": "2030-01-01T00:00:00"}, "expires_at:"),
    ({"idle_stop": "10s"}, "idle_stop: expected at least 1m"),
    ({"limits_grace": "later"}, "limits_grace: expected a duration"),
    ({"max_spend": "-3"}, "max_spend: expected an amount in US dollars above 0"),
])
def test_a_bad_limit_fails_the_task_naming_the_option_before_anything_is_made(home, change, message):
    result = VmService(dict(BASE, **change)).run()
    assert result["failed"] and result["changed"] is False and result["msg"].startswith(message), result
    assert not (home / "local" / "lim").exists()
    assert not (home / "journal.sqlite").exists()


def test_limits_are_journalled_once_up_and_a_rerun_changes_them_only_when_they_change(home):
    up = VmService(dict(BASE, ttl="2h", max_spend="25")).run(diff=True)
    assert not up.get("failed"), up
    row = _row(home)
    assert row.instance_id == up["vm"]["instance_id"] and row.limits.max_spend_usd == 25.0
    assert row.limits.expires_at == int(row.up_since) + 7200
    assert up["limits"]["time_left_s"] > 7000 and up["limits"]["max_spend"] == "$25"
    assert up["limits"]["spend_usd"] == 0.0   # the local cloud is free
    [warned] = up["warnings"]   # local VMs run no watchdog: only the reap enforces, and the task says so
    assert warned.startswith("lim: no watchdog on the local cloud"), warned

    same = VmService(dict(BASE, ttl="2h")).run(diff=True)
    assert same["changed"] is False, same
    assert _row(home).up_since == row.up_since and _row(home).limits == row.limits   # max_spend unset: kept

    longer = VmService(dict(BASE, ttl="3h")).run(diff=True)
    assert longer["changed"] is True
    assert longer["diff"]["before"]["limits"]["expires_at"] == lim.iso_utc(row.up_since + 7200)
    assert longer["diff"]["after"]["limits"]["expires_at"] == lim.iso_utc(row.up_since + 3 * 3600)
    assert longer["diff"]["after"]["limits"]["max_spend"] == "$25"
    assert _row(home).up_since == row.up_since

    soon = VmService(dict(BASE, ttl="10m")).run()
    assert soon["changed"] is True
    assert any(w.startswith("lim expires in") for w in soon["warnings"]), soon

    down = VmService(dict(BASE, state="absent")).run()
    assert down["changed"] is True and _row(home) is None


def test_a_new_instance_of_the_name_starts_a_new_row(tmp_path, clock):
    journal = Journal(str(tmp_path / "journal.sqlite"), clock=clock)
    first = vm_task.apply_limits(journal, "vm1", {"instance_id": "i-1", "price_per_hour": 2.0}, {"ttl": "1h"})
    assert first.changed and first.stored.up_since == 1000.0 and first.stored.limits.expires_at == 4600
    clock.advance(1800)
    assert vm_task.limits_result(first.stored, clock())["spend_usd"] == 1.0
    again = vm_task.apply_limits(journal, "vm1", {"instance_id": "i-1", "price_per_hour": 2.0}, {})
    assert not again.changed and again.stored.limits.expires_at == 4600
    other = vm_task.apply_limits(journal, "vm1", {"instance_id": "i-2", "price_per_hour": 2.0}, {"max_spend": 3})
    assert other.before is None and other.stored.up_since == 2800.0
    assert other.stored.limits == lim.Limits(max_spend_usd=3.0)   # the old instance's ttl is not carried over
    assert vm_task.limits_result(other.stored, clock())["deadline"] == lim.iso_utc(2800 + 5400)
    vm_task.forget(journal, "vm1")
    assert store.read_all(journal) == []
    journal.close()


def test_warnings_name_the_vms_near_or_past_their_deadline(tmp_path, clock):
    journal = Journal(str(tmp_path / "journal.sqlite"), clock=clock)
    for name, ttl in (("far", "1d"), ("near", "30m"), ("past", "1s")):
        vm_task.apply_limits(journal, name, {"instance_id": name, "price_per_hour": 1.5}, {"ttl": ttl})
    vm_task.apply_limits(journal, "free", {"instance_id": "free"}, {})
    clock.advance(5)
    warned = vm_task.journalled_warnings(journal, clock())
    assert [w.split()[0] for w in warned] == ["near", "past"], warned
    assert "gpuprov.cloud.reap -e delete=true" in warned[1]
    journal.close()
