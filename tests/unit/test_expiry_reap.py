"""gpuprov.cloud.reap's controller side (issue 27): on the local cloud (a real sshd) a VM past its ttl is listed by
a dry run and left up, torn down as `down` does with delete, and a second reap changes nothing; what the cloud says
(a VM stopped by its own watchdog, a cloud that cannot be asked) and a teardown that fails, on a journal alone."""

from __future__ import annotations

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import launch_states as ls, projection
from ansible_collections.gpuprov.cloud.plugins.module_utils.expiry import decide as dec
from ansible_collections.gpuprov.cloud.plugins.module_utils.expiry import reap, store, vm_task
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
