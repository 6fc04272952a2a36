"""Journals written by commit 9faadf1 (tests/unit/data/journals_9faadf1, made by make_journals.py
there), one per non-terminal launch and teardown state: each loads as the typed state it holds, means
the same written back, and resumes to Ready (launch) or Done (teardown) under the current code, on the
scripted cloud as it was when that run was killed."""

from __future__ import annotations

import json
import pathlib
import shutil

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import Location, Offer
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import launch_states, teardown_states
from ansible_collections.gpuprov.cloud.tests.fakes.scripted_provider import (
    BootProfile, FakeInstance, ScriptedProvider, World,
)

DATA = pathlib.Path(__file__).resolve().parent / "data" / "journals_9faadf1"
MANIFEST = json.loads((DATA / "manifest.json").read_text())
LAUNCH_STATES = {"Reconciling", "Planning", "Preparing", "Creating", "Booting", "Connecting", "NextOffer",
                 "Compensating", "Exhausted"}
TEARDOWN_STATES = {"Requesting", "AwaitingGone", "CleaningUp"}


def restored_cloud(saved):
    """The scripted cloud as make_journals.py saved it (instances, side resources, serial numbers)."""
    cloud = ScriptedProvider(saved["cloud"], [Offer.from_dict(o) for o in saved["offers"]],
                             boot_observes=saved["boot_observes"], gone_after=saved["gone_after"])
    for data in saved["instances"]:
        inst = FakeInstance(**dict(data, location=Location.from_dict(data["location"]),
                                   profile=BootProfile(**data["profile"])))
        cloud.instances[inst.instance_id] = inst
    cloud.gone, cloud.created = list(saved["gone"]), list(saved["created"])
    cloud.side = {(vm, where): group for vm, where, group in saved["side"]}
    cloud.side_removed = list(saved["side_removed"])
    cloud._serial = saved["serial"]
    return cloud


def world_of(tmp_path, entry):
    shutil.copyfile(DATA / (entry["name"] + ".sqlite"), tmp_path / "journal.sqlite")
    cloud = restored_cloud(json.loads((DATA / (entry["name"] + ".cloud.json")).read_text()))
    return World(tmp_path, [cloud], clouds=entry["clouds"], vm_name=entry["vm_name"], **entry["settings"]), cloud


def by_name(entry):
    return entry["name"]


def test_every_non_terminal_state_has_a_journal():
    launch = {e["kind"] for e in MANIFEST if e["machine"] == "launch"}
    teardown = {e["kind"] for e in MANIFEST if e["machine"] == "teardown"}
    assert launch == LAUNCH_STATES and teardown == TEARDOWN_STATES
    compensating = {e["label"] for e in MANIFEST if e["kind"] == "Compensating"}
    assert compensating == {"Compensating/%s" % kind for kind in TEARDOWN_STATES}


@pytest.mark.parametrize("entry", MANIFEST, ids=by_name)
def test_a_9faadf1_state_loads_and_means_the_same_written_back(tmp_path, entry):
    world, _cloud = world_of(tmp_path, entry)
    row = world.row()
    assert (row.kind, row.label, row.terminal) == (entry["machine"], entry["label"], False)
    state = launch_states.load_journalled(row.state, row.kind)
    assert state.kind == entry["kind"]
    machine = (launch_states if row.kind == "launch" else teardown_states)
    written = state.to_dict()
    assert_means_the_same(row.state, written)
    assert machine.from_dict(written) == state


# What this version adds to a state 9faadf1 wrote (launch_states.migrate_state): a reused VM's Connecting
# names its zone (none), and a VM record its places (its region and zone) and regions_fold (false).
ADDED = {"zone": None, "places": None, "regions_fold": False}


def assert_means_the_same(stored, written, where="state"):
    """Every value 9faadf1 wrote comes back as it was, at every depth; the only keys added are ADDED's."""
    if isinstance(stored, dict):
        assert isinstance(written, dict), where
        for key, value in stored.items():
            assert key in written, "%s.%s is gone" % (where, key)
            assert_means_the_same(value, written[key], "%s.%s" % (where, key))
        added = set(written) - set(stored)
        assert added <= set(ADDED), "%s: %s added" % (where, sorted(added))
        if "places" in added:
            location = written["location"]
            assert written["places"] == [p for p in (location["region"], location["zone"]) if p], where
        for key in added - {"places"}:
            assert written[key] == ADDED[key], "%s.%s" % (where, key)
    elif isinstance(stored, list):
        assert isinstance(written, list) and len(written) == len(stored), where
        for index, (old, new) in enumerate(zip(stored, written, strict=True)):
            assert_means_the_same(old, new, "%s[%d]" % (where, index))
    else:
        assert written == stored, where


@pytest.mark.parametrize("entry", [e for e in MANIFEST if e["machine"] == "launch"], ids=by_name)
def test_a_9faadf1_launch_resumes_to_ready(tmp_path, entry):
    world, cloud = world_of(tmp_path, entry)

    out = world.launch()

    assert out.resumed and out.state["kind"] == "Ready", out.state
    kept = out.state["vm"]["instance_id"]
    assert [i.instance_id for i in cloud.live(entry["vm_name"])] == [kept]
    world.assert_clean(keep=kept)
    assert world.row().state == out.state and world.row().terminal


@pytest.mark.parametrize("entry", [e for e in MANIFEST if e["machine"] == "teardown"], ids=by_name)
def test_a_9faadf1_teardown_resumes_to_done(tmp_path, entry):
    world, cloud = world_of(tmp_path, entry)

    out = world.down()

    assert out.resumed and out.state["kind"] == "Done", out.state
    assert cloud.live(entry["vm_name"]) == [] and cloud.side_resources(entry["vm_name"]) == {}
    world.assert_clean()
