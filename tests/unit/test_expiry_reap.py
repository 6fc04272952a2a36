"""gpuprov.cloud.reap's controller side (issue 27): on the local cloud (a real sshd) a VM past its ttl is listed by
a dry run and left up, torn down as `down` does with delete, and a second reap changes nothing; what the cloud says
(a VM stopped by its own watchdog, a cloud that cannot be asked) and a teardown that fails, on a journal alone."""

from __future__ import annotations

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import launch_states as ls, projection
from ansible_collections.gpuprov.cloud.plugins.module_utils.expiry import decide as dec
from ansible_collections.gpuprov.cloud.plugins.module_utils.expiry import reap, store, vm_task
from ansible_collections.gpuprov.cloud.plugins.module_utils.expiry.limits import Limits
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import teardown_states as ts
from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journal import Journal
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.service import VmService
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.status import read_status
from ansible_collections.gpuprov.cloud.tests.unit.helpers import wait_for

BASE = {"name": "reaped", "state": "present", "clouds": ["local"], "gpu": None, "gpu_count": 1, "regions": [],
        "spot": False, "retry_until_up": False, "boot_timeout": None, "ssh_timeout": 60, "teardown_timeout": 60,
        "journal": None, "ssh_key": None, "ssh_user": None, "cloud_options": {}, "k8s": None, "boot_script": None}
REAP = {"delete": False, "name": None, "journal": None, "cloud_options": {}}


@pytest.fixture
def home(home):
    """conftest.py's home; at the end this file's VMs are taken down."""
    yield home
    if (home / "journal.sqlite").exists():   # never leave an sshd behind
        for name in ("reaped", "kept"):
            VmService(dict(BASE, name=name, state="absent")).run()


def _expired(home, name):
    vms = read_status(str(home / "journal.sqlite"), name)["vms"]
    return bool(vms and (vms[0].get("limits") or {}).get("expired"))


def test_a_vm_past_its_ttl_is_listed_then_reaped_and_a_second_reap_changes_nothing(home):
    assert not VmService(dict(BASE, ttl="1s")).run().get("failed")
    kept = VmService(dict(BASE, name="kept", ttl="1d")).run()
    assert not kept.get("failed"), kept
    wait_for(lambda: _expired(home, "reaped"), "status to say reaped expired", limit_s=60)

    dry = reap.run_task(dict(REAP), check_mode=False)
    assert dry["changed"] is False and dry["removed"] == []
    assert [e["name"] for e in dry["would_remove"]] == ["reaped"], dry
    assert dry["would_remove"][0]["reason"].startswith("past its expiry")
    assert dry["would_remove"][0]["saved_per_hour"] == 0.0   # the local cloud is free
    assert [e["name"] for e in dry["kept"]] == ["kept"]
    assert "would reap 1 VM" in dry["msg"] and dry["lines"][0].startswith("WOULD REAP reaped (local/local ")
    assert (home / "local" / "reaped").exists()   # a dry run touches nothing

    checked = reap.run_task(dict(REAP, delete=True), check_mode=True)
    assert checked["removed"] == [] and [e["name"] for e in checked["would_remove"]] == ["reaped"]

    done = reap.run_task(dict(REAP, delete=True), check_mode=False)
    assert done["changed"] is True and [e["name"] for e in done["removed"]] == ["reaped"], done
    assert done["removed"][0]["targets"] and done["msg"].startswith("reaped 1 VM")
    journal = Journal(str(home / "journal.sqlite"))
    try:
        assert journal.load("reaped").state["kind"] == "Done" and store.read(journal, "reaped") is None
        assert store.read(journal, "kept") is not None
    finally:
        journal.close()

    again = reap.run_task(dict(REAP, delete=True), check_mode=False)
    assert again["changed"] is False and again["removed"] == [] and again["msg"] == "nothing to reap"


def _journal_with(tmp_path, clock, ttl):
    """A journal whose row "vm1" is Ready on the local cloud with ``ttl``, as the launch leaves it."""
    journal = Journal(str(tmp_path / "journal.sqlite"), clock=clock)
    vm = {"name": "vm1", "instance_id": "i-1", "price_per_hour": 3.5,
          "location": {"cloud": "local", "region": "local", "zone": None}}
    journal.acquire("vm1", "test", 60)
    journal.begin("vm1", "launch", ls.Ready(vm, reused=False, search=None).to_dict(), "Ready", False, owner="test", ttl=60,
                  expected_version=None)
    journal.release("vm1", "test")
    vm_task.apply_limits(journal, "vm1", vm, {"ttl": ttl})
    return journal


def test_a_vm_stopped_by_its_watchdog_is_expired_never_a_leak(tmp_path, clock):
    journal = _journal_with(tmp_path, clock, "10s")
    projection.upsert_vm(journal, "vm1", status="running", instance_id="i-1")
    clock.advance(5)
    before = reap.reap(journal, dict(REAP), delete=False, observe=lambda vm, options, journal_id: dec.STOPPED)
    assert before["would_remove"] == [] and projection.vm(journal, "vm1")["status"] == "running"   # not by its limits
    clock.advance(15)
    result = reap.reap(journal, dict(REAP), delete=False, observe=lambda vm, options, journal_id: dec.STOPPED)
    # the dry run recorded what it saw, so status (which reads the journal only) shows it stopped itself
    assert projection.vm(journal, "vm1")["status"] == "stopped itself"
    journal.close()
    [entry] = result["would_remove"]
    assert entry["reason"].startswith("expired (stopped itself)") and entry["expired"] is True
    assert entry["saved_per_hour"] is None   # what a stopped VM bills is its cloud's to say
    [vm] = read_status(str(tmp_path / "journal.sqlite"), "vm1")["vms"]
    assert vm["status"] == "stopped itself" and vm["limits"]["expired"]


def test_a_cloud_that_cannot_be_asked_leaves_the_vm_taken_as_billing(tmp_path, clock):
    journal = _journal_with(tmp_path, clock, "10s")
    clock.advance(20)
    failed = []
    result = reap.reap(journal, dict(REAP), delete=True, observe=lambda vm, options, journal_id: None,
                       teardown=lambda params: failed.append(params) or {"failed": True, "msg": "lease held"})
    journal.close()
    assert result["removed"] == [] and result["saved_per_hour"] == 0.0
    [entry] = result["not_removed"]
    assert entry["saved_per_hour"] == 3.5 and entry["error"] == "lease held"
    [params] = failed
    assert (params["name"], params["state"], params["clouds"]) == ("vm1", "absent", ["local"])


# --- a teardown killed half-way, or after Done: the next reap finishes it (issue 27) ----------------------------------

LOCAL = {"cloud": "local", "region": "local", "zone": None}


def _torn(journal, state, instance_id="i-1", price=3.5):
    """Row "vm1" as down (or a reap) leaves it killed at ``state`` (a teardown state), with the limits it had."""
    journal.acquire("vm1", "test", 60)
    journal.begin("vm1", ts.TEARDOWN_KIND, state.to_dict(), state.kind, isinstance(state, ts.TERMINAL), owner="test",
                  ttl=60, expected_version=None)
    journal.release("vm1", "test")
    store.write(journal, store.StoredLimits(key="vm1", instance_id=instance_id, limits=Limits(expires_at=10 ** 10),
                                            up_since=900.0, price_per_hour=price))


def _teardown_state(cls, ids=("i-1",)):
    return cls("vm1", [ts.target(LOCAL, list(ids))], "down requested")


def _never_observed(vm, options, journal_id):
    raise AssertionError("a teardown's VM is not observed by reap: its machine observes when resumed")


@pytest.mark.parametrize("cls, reason, saved", [
    (ts.Requesting, "its teardown was interrupted: resumes it", 3.5),
    (ts.AwaitingGone, "its teardown was interrupted: resumes it", 3.5),
    (ts.CleaningUp, "its teardown was interrupted: resumes it", 3.5),
    (ts.Leaked, "its last teardown left resources that may bill: retries it", 3.5),
    (ts.Done, "torn down already: clears what the journal still lists", 0.0),
])
def test_a_teardown_left_half_way_is_listed_to_reap_before_its_deadline(tmp_path, clock, cls, reason, saved):
    journal = Journal(str(tmp_path / "journal.sqlite"), clock=clock)
    _torn(journal, _teardown_state(cls))
    result = reap.reap(journal, dict(REAP), delete=False, observe=_never_observed)
    journal.close()
    [entry] = result["would_remove"]
    assert (entry["name"], entry["cloud"], entry["region"], entry["instance_id"]) == ("vm1", "local", "local", "i-1")
    assert (entry["reason"], entry["saved_per_hour"], entry["expired"]) == (reason, saved, False)
    assert result["kept"] == [] and result["would_save_per_hour"] == saved
    assert reap.lines(result) == ["WOULD REAP vm1 (local/local i-1): %s; saves $%s/h" % (reason, saved if saved else 0)]


def test_a_teardown_of_another_instance_or_another_machine_is_left_alone(tmp_path, clock):
    journal = Journal(str(tmp_path / "journal.sqlite"), clock=clock)
    _torn(journal, _teardown_state(ts.Requesting, ids=["i-other"]))
    assert reap.reap(journal, dict(REAP), delete=False, observe=_never_observed)["would_remove"] == []
    journal.close()
    swept = Journal(str(tmp_path / "swept.sqlite"), clock=clock)
    swept.acquire("vm1", "test", 60)
    swept.begin("vm1", ts.SWEEP_TEARDOWN_KIND, _teardown_state(ts.Requesting).to_dict(), "Requesting", False,
                owner="test", ttl=60, expected_version=None)
    swept.release("vm1", "test")
    store.write(swept, store.StoredLimits(key="vm1", instance_id="i-1", limits=Limits(expires_at=1), up_since=900.0,
                                          price_per_hour=1.0))
    found = reap.reap(swept, dict(REAP), delete=False, observe=_never_observed)
    swept.close()
    assert found["would_remove"] == [] and found["kept"] == []   # the sweep's own teardown, not reap's to resume


@pytest.mark.parametrize("cls, cleared", [(ts.AwaitingGone, False), (ts.Done, True)])
def test_deleting_resumes_as_down_and_a_vm_torn_down_already_is_cleared_never_said_reaped(tmp_path, clock, cls,
                                                                                          cleared):
    path = str(tmp_path / "journal.sqlite")
    journal = Journal(path, clock=clock)
    _torn(journal, _teardown_state(cls))
    journal.close()
    asked = []
    result = reap.run_task(dict(REAP, delete=True, journal=path), check_mode=False, observe=_never_observed,
                           teardown=lambda params: asked.append(params) or {"targets": []})
    [params] = asked
    assert (params["name"], params["state"], params["clouds"]) == ("vm1", "absent", ["local"])
    [entry] = result["removed"]
    assert entry["cleared"] is cleared and result["changed"] is True
    if cleared:
        assert result["lines"] == ["CLEARED vm1 (local/local i-1): torn down already: clears what the journal "
                                   "still lists; saves $0/h"]
        assert result["msg"] == "cleared from the journal 1 VM torn down already" and result["saved_per_hour"] == 0.0
    else:
        assert result["lines"] == ["REAPED vm1 (local/local i-1): its teardown was interrupted: resumes it; "
                                   "saves $3.5/h"]
        assert result["msg"] == "reaped 1 VM, saving $3.5/h"


@pytest.mark.parametrize("cls", [ts.Requesting, ts.CleaningUp, ts.Done])
def test_the_next_reap_finishes_a_teardown_killed_half_way_and_clears_the_vms_rows(home, cls):
    """Through the real down (the vm service, the local cloud): killed in ``cls`` with its limits and its VM-list
    row still journalled, one reap -e delete=true leaves the teardown Done and neither row."""
    journal = projection.open_journal(str(home / "journal.sqlite"))
    try:
        _torn(journal, _teardown_state(cls))
        projection.upsert_vm(journal, "vm1", cloud="local", region="local", instance_id="i-1", status="running")
    finally:
        journal.close()
    result = reap.run_task(dict(REAP, delete=True, name="vm1"), check_mode=False)
    assert not result.get("failed") and [e["name"] for e in result["removed"]] == ["vm1"], result
    assert result["removed"][0]["cleared"] is (cls is ts.Done)
    journal = projection.open_journal(str(home / "journal.sqlite"))
    try:
        assert journal.load("vm1").state["kind"] == "Done"
        assert store.read(journal, "vm1") is None and projection.vm(journal, "vm1") is None
    finally:
        journal.close()
    again = reap.run_task(dict(REAP, delete=True), check_mode=False)
    assert again["msg"] == "nothing to reap" and again["changed"] is False
