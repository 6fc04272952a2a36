"""Breaks found from the outside (issue 24), each against the local cloud (real sshd) in a temporary
state directory: the sweep against a provision of the name it is removing, the sweep against what the
``instance`` module made, ``recreate`` with a request no cloud can meet, and ``down`` on a journal that
holds no record of a VM another journal made."""

from __future__ import annotations

import os
import signal

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks import primitives
from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journal import Journal
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    InstanceSpec, Location, ResourceRequest,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.local import LocalProvider
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import projection
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks import sweep
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.service import VmService
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm.ssh import ensure_controller_key
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.sweep import ORPHAN, OWNED

BASE = {"name": "svc", "state": "present", "clouds": ["local"], "gpu": None, "gpu_count": 1, "regions": [],
        "spot": False, "retry_until_up": False, "boot_timeout": None, "ssh_timeout": 60, "teardown_timeout": 60,
        "journal": None, "ssh_key": None, "ssh_user": None, "cloud_options": {}, "k8s": None, "boot_script": None}
LOCAL = Location("local", "local")


@pytest.fixture
def home(home):
    """conftest.py's home, when sshd is installed; at the end every local instance's sshd is stopped."""
    if not os.path.exists("/usr/sbin/sshd"):
        pytest.skip("the local cloud needs openssh-server (sshd)")
    yield home
    root = home / "local"
    for vm_name in os.listdir(root) if root.is_dir() else []:   # never leave an sshd behind
        for instance_id in os.listdir(root / vm_name):
            for pid in LocalProvider._processes(str(root / vm_name / instance_id)):
                try:
                    os.kill(pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass


def _journal(home, name="journal.sqlite"):
    return projection.open_journal(str(home / name))


def _provider(home, journal_id):
    return LocalProvider({"root": str(home / "local")}, journal_id=journal_id)


def _plant(home, vm_name, journal_id):
    """An instance carrying ``vm_name`` and ``journal_id`` that no journal row records (an orphan)."""
    provider = _provider(home, journal_id)
    spec = InstanceSpec(vm_name=vm_name, ssh_public_key=ensure_controller_key(str(home / "id_ed25519")))
    offer = provider.plan(ResourceRequest(vm_name))[0]
    return provider.create(offer, provider.prepare(offer, spec), spec)


def _live(home, vm_name, journal_id=None):
    return sorted(o.instance_id for o in _provider(home, journal_id).observe(LOCAL, vm_name) if o.live)


# -- 1. the sweep holds the name while it removes it -----------------------------------------

def test_a_provision_while_the_sweep_deletes_an_orphan_of_its_name_never_adopts_it(home):
    journal = _journal(home)
    orphan = _plant(home, "svc", journal.journal_id)
    provider = _provider(home, journal.journal_id)
    real_delete = LocalProvider.delete
    during = {}

    def delete_while_a_provision_runs(location, vm_name, instance_ids):
        # The sweep's delete is in flight (on a real cloud: one API call and its wait).
        during["provision"] = VmService(dict(BASE)).run()
        real_delete(provider, location, vm_name, instance_ids)

    provider.delete = delete_while_a_provision_runs
    result = sweep.sweep(journal, {"local": {"root": str(home / "local")}}, ["local"], [], True,
                         providers={"local": provider})
    provision = during["provision"]
    assert provision["failed"] and not provision.get("vm"), provision
    assert "orphan sweep" in provision["msg"] and "svc" in provision["msg"]
    assert "adopted" not in " ".join(e["note"] or "" for e in provision.get("events") or [])
    assert [e["id"] for e in result["removed"]] == [orphan] and result["not_removed"] == []
    assert _live(home, "svc") == [] and journal.load("svc") is None
    assert journal.query("SELECT key FROM leases") == []   # the sweep let go of every name it held
    # Once the sweep is done the name is free: the same provision now makes a VM of its own.
    again = VmService(dict(BASE)).run()
    assert again["state"] == "Ready" and _live(home, "svc") == [again["vm"]["instance_id"]] != [orphan]
    assert VmService(dict(BASE, state="absent")).run()["state"] == "Done"
    journal.close()


def test_a_sweep_meeting_a_provision_that_holds_the_name_removes_nothing(home):
    journal = _journal(home)
    orphan = _plant(home, "svc", journal.journal_id)
    sweeper = sweep.Sweeper(journal, {"local": {"root": str(home / "local")}}, ["local"])
    entries = sweeper.find()["entries"]
    assert [e["category"] for e in entries] == [ORPHAN]
    journal.acquire("svc", "some-other-host:1:1:deadbeef", 120.0)   # a provision that has not written a row yet
    outcome = sweeper.remove(entries)
    assert outcome["removed"] == [] and "svc is being worked on by another run" in outcome["not_removed"][0]["error"]
    assert _live(home, "svc", journal.journal_id) == [orphan]
    journal.release("svc", "some-other-host:1:1:deadbeef")
    journal.close()


# -- 2. what the instance module made is owned ------------------------------------------------

def _instance(home, state="present", **extra):
    params = dict(name="prim", cloud="local", state=state, cloud_options={"local": {"root": str(home / "local")}},
                  journal=str(home / "journal.sqlite"), wait=True, wait_timeout=60)
    params.update(extra)
    return primitives.instance(params)


def test_an_instance_the_instance_module_made_is_owned_not_an_orphan(home):
    made = _instance(home)
    assert made["changed"] and not made.get("failed"), made
    instance_id = made["instance"]["instance_id"]
    journal = _journal(home)
    row = journal.load("instance:local:prim")
    assert (row.kind, row.state["kind"], row.state["instance_id"]) == ("instance", "Present", instance_id)
    options = {"local": {"root": str(home / "local")}}
    found = sweep.sweep(journal, options, ["local"], [], False)
    assert [(e["id"], e["category"]) for e in found["resources"]] == [(instance_id, OWNED)]
    assert "instance:local:prim (Present)" in found["resources"][0]["why"]
    removed = sweep.sweep(journal, options, ["local"], [], True)
    assert removed["removed"] == [] and _live(home, "prim") == [instance_id]
    # A re-run keeps it and its record; state=absent tears it down, and then nothing owns the name.
    assert _instance(home)["changed"] is False and journal.load("instance:local:prim").version == row.version
    gone = _instance(home, state="absent")
    assert gone["deleted"] == [instance_id] and journal.load("instance:local:prim").state["kind"] == "Done"
    assert _live(home, "prim") == [] and sweep.sweep(journal, options, ["local"], [], False)["resources"] == []
    journal.close()


def test_the_instance_module_cannot_create_while_a_sweep_holds_its_name(home):
    journal = _journal(home)
    journal.acquire("instance:local:prim", "some-other-host:1:1:sweep-deadbeef", 120.0)
    refused = _instance(home)
    assert refused["failed"] and "orphan sweep" in refused["msg"] and _live(home, "prim") == []
    journal.release("instance:local:prim", "some-other-host:1:1:sweep-deadbeef")
    journal.close()


# -- 3. recreate never destroys a VM for a request nothing can meet ---------------------------

def test_recreate_with_a_request_no_cloud_can_meet_keeps_the_vm(home):
    up = VmService(dict(BASE)).run()
    assert up["state"] == "Ready", up
    kept = VmService(dict(BASE, recreate=True, gpu="H100")).run()
    assert kept["failed"] and "nothing was torn down and the VM is kept" in kept["msg"], kept
    assert "gpu: the VM has no GPU, the request asks for H100" in kept["msg"]
    assert _live(home, "svc") == [up["vm"]["instance_id"]]
    # The VM is still the journal's: the request it has reuses it, changing nothing.
    again = VmService(dict(BASE)).run()
    assert again["state"] == "Ready" and again["vm"]["instance_id"] == up["vm"]["instance_id"]
    assert again["vm"]["reused"] is True
    assert VmService(dict(BASE, state="absent")).run()["state"] == "Done"


# -- 6. down on a journal that holds no record of the VM --------------------------------------

def test_down_on_another_journal_touches_nothing_and_says_what_it_found(home):
    other = str(home / "other" / "journal.sqlite")
    up = VmService(dict(BASE, journal=other)).run()
    assert up["state"] == "Ready", up
    made_by = Journal(other).journal_id
    down = VmService(dict(BASE, state="absent")).run()
    default = Journal(str(home / "journal.sqlite"))
    assert down["changed"] is False and not down.get("failed")
    assert "it holds no record of svc" in down["msg"] and str(home / "journal.sqlite") in down["msg"]
    assert default.journal_id in down["msg"] and "resources carrying that name exist on local" in down["msg"]
    [warning] = down["warnings"]
    assert up["vm"]["instance_id"] in warning and "made by journal %s" % made_by in warning
    assert "left alone" in warning
    assert VmService(dict(BASE, state="absent")).run(check_mode=True)["warnings"] == [warning]
    assert _live(home, "svc", made_by) == [up["vm"]["instance_id"]]
    assert VmService(dict(BASE, state="absent", journal=other)).run()["state"] == "Done"
    assert "warnings" not in VmService(dict(BASE, state="absent")).run()


def test_down_while_a_sweep_holds_the_name_waits_for_it_and_never_cancels_it(home):
    import threading
    from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.owners import new_owner
    journal = _journal(home)
    sweeper = new_owner("sweep")
    journal.acquire("svc", sweeper, 120.0)
    lines = []
    let_go = threading.Timer(0.5, lambda: _journal(home).release("svc", sweeper))
    let_go.start()
    try:
        down = VmService(dict(BASE, state="absent"), progress=lines.append).run()
    finally:
        let_go.join()
    assert down["msg"].startswith("waited for the orphan sweep that was removing it; svc has nothing to tear down")
    assert down["changed"] is False
    assert any("an orphan sweep (%s) is removing what it found of it" % sweeper in line for line in lines), lines
    assert journal.query("SELECT key FROM machines WHERE cancel_owner IS NOT NULL") == []
    journal.close()
