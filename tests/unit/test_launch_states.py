"""The typed states (vm/launch_states.py, vm/teardown_states.py): every shape the machines journal
reads back as its state and writes back as the same JSON; the one load-time migration; what readers
ask of a state (the accessors); the JSON keys the projection's SQL reads."""

from __future__ import annotations

import json

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import Offer
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import launch_states as ls
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import projection, teardown_states as ts

LOC = {"cloud": "fakea", "region": "r1", "zone": "r1-a"}
LOC_B = {"cloud": "fakeb", "region": "eu-1", "zone": None}
OFFER = Offer("fakea", "r1", "gpu.1x", zone="r1-a", gpu="H100", gpu_count=1, price_per_hour=2.5).to_dict()
RUNNING = {"plan": "0123456789abcdef", "size": 2, "cursor": 0, "offer": OFFER, "blocked": [], "round": 0}
BLOCK = {"scope": "region", "cloud": "fakea", "region": "r0", "instance_type": "gpu.1x",
         "offer_id": "fakea:r0:gpu.1x", "reason": "quota"}
ERROR = {"kind": "Capacity", "msg": "no capacity", "block": "offer"}
HISTORY = [{"offer": "fakea:r0:gpu.1x", "outcome": "Quota", "error": dict(ERROR, kind="Quota", block="region")}]
WHOLE = {"offers": [OFFER], "cursor": 0, "blocked": [BLOCK], "history": HISTORY, "round": 1}
ENDPOINT = {"host": "fakea-i-0001.fakea.test", "port": 22, "user": "ubuntu"}
VM = {"name": "vm1", "location": LOC, "instance_id": "fakea-i-0001", "instance_type": "gpu.1x", "gpu": "H100",
      "gpu_count": 1, "ssh": ENDPOINT, "host_key_alias": "gpuprov-vm1-0123456789ab", "price_per_hour": 2.5,
      "places": ["r1", "r1-a"], "regions_fold": False}
TARGET = {"location": LOC, "instance_ids": ["fakea-i-0001"], "created": True}
SIDE_ONLY = {"location": LOC_B, "instance_ids": [], "created": False}


def teardown_state(kind, **extra):
    return dict({"kind": kind, "vm_name": "vm1", "targets": [TARGET], "reason": "down requested"}, **extra)


READY = {"kind": "Ready", "vm": VM, "reused": False, "search": WHOLE}

# Every shape of every launch state, as the launch machine journals it.
LAUNCH_SHAPES = {
    "Reconciling": {"kind": "Reconciling", "previous": None, "previous_kind": None},
    "Reconciling after Ready": {"kind": "Reconciling", "previous": READY, "previous_kind": "launch"},
    "Reconciling after a teardown": {"kind": "Reconciling", "previous": teardown_state("AwaitingGone"),
                                     "previous_kind": "teardown"},
    "Planning": {"kind": "Planning", "round": 2},
    "Preparing": {"kind": "Preparing", "search": RUNNING},
    "Preparing, whole search": {"kind": "Preparing", "search": dict(WHOLE, history=[])},
    "Creating": {"kind": "Creating", "search": RUNNING, "prepared": {"security_group": "sg-1"}},
    "Booting": {"kind": "Booting", "search": RUNNING, "instance_id": "fakea-i-0001", "adopted": True},
    "Connecting": {"kind": "Connecting", "search": RUNNING, "instance_id": "fakea-i-0001", "endpoint": ENDPOINT,
                   "reused": False, "zone": "r1-a"},
    "Connecting, reused": {"kind": "Connecting", "search": None, "instance_id": "fakea-i-0001",
                           "endpoint": ENDPOINT, "reused": True, "zone": None, "vm": VM},
    "NextOffer": {"kind": "NextOffer", "search": RUNNING, "error": ERROR},
    "NextOffer, blocked": {"kind": "NextOffer", "search": RUNNING, "error": None},
    "Compensating": {"kind": "Compensating", "search": RUNNING, "then": "NextOffer", "error": ERROR,
                     "reason": "no capacity", "teardown": teardown_state("Requesting", reason="no capacity")},
    "Compensating an interrupted teardown": {"kind": "Compensating", "search": None, "then": "Planning",
                                             "error": None, "reason": "finishing an interrupted teardown",
                                             "teardown": teardown_state("CleaningUp")},
    "Exhausted": {"kind": "Exhausted", "search": WHOLE, "reason": "every offer failed or was blocked (1 tried)"},
    "Ready": READY,
    "Ready, reused": {"kind": "Ready", "vm": VM, "reused": True, "search": None},
    "Aborted": {"kind": "Aborted", "reason": "cancelled by the user", "targets": []},
    "Aborted, kept a VM": {"kind": "Aborted", "reason": "request differs; VM kept", "targets": [], "vm": VM},
    "Aborted, with its search": {"kind": "Aborted", "reason": "refused everywhere", "targets": [], "search": WHOLE},
    "Aborted, unsure": {"kind": "Aborted", "reason": "cannot reconcile", "targets": [TARGET], "vm": VM},
    "Leaked": {"kind": "Leaked", "targets": [TARGET, SIDE_ONLY], "reason": "instances still present after 60 s"},
}

TEARDOWN_SHAPES = {
    "Requesting": teardown_state("Requesting"),
    "AwaitingGone": teardown_state("AwaitingGone"),
    "DeletionRequested": teardown_state("DeletionRequested", reason="instance state=absent"),
    "CleaningUp": teardown_state("CleaningUp"),
    "Done": teardown_state("Done"),
    "Leaked": teardown_state("Leaked", reason="teardown failed in AwaitingGone: api 503"),
    "Requesting, a sweep's": teardown_state("Requesting", reason="orphan sweep", journal_ids=[None, "a" * 32]),
    "Done, a sweep's, skipped": teardown_state("Done", reason="orphan sweep", journal_ids=["a" * 32],
                                               skipped="a run of vm1 is in progress"),
}


def test_every_state_has_its_shapes():
    assert {shape["kind"] for shape in LAUNCH_SHAPES.values()} == {cls.kind for cls in ls.STATES}
    assert {shape["kind"] for shape in TEARDOWN_SHAPES.values()} == {cls.kind for cls in ts.STATES}


@pytest.mark.parametrize("name", sorted(LAUNCH_SHAPES))
def test_a_launch_state_reads_back_and_writes_the_same_json(name):
    shape = LAUNCH_SHAPES[name]
    state = ls.from_dict(json.loads(json.dumps(shape)))
    assert state.kind == shape["kind"] and type(state).__name__ == shape["kind"]
    assert state.to_dict() == shape
    assert ls.from_dict(json.loads(json.dumps(state.to_dict()))) == state


@pytest.mark.parametrize("name", sorted(TEARDOWN_SHAPES))
def test_a_teardown_state_reads_back_and_writes_the_same_json(name):
    shape = TEARDOWN_SHAPES[name]
    state = ts.from_dict(json.loads(json.dumps(shape)))
    assert state.kind == shape["kind"] and isinstance(state, ts.TeardownFields)
    assert state.to_dict() == shape
    assert ts.from_dict(state.to_dict()) == state


def test_nested_states_and_searches_are_typed():
    reconciling = ls.from_dict(LAUNCH_SHAPES["Reconciling after Ready"])
    assert isinstance(reconciling.previous, ls.Ready) and isinstance(reconciling.previous.search, ls.WholeSearch)
    assert isinstance(ls.from_dict(LAUNCH_SHAPES["Reconciling after a teardown"]).previous, ts.AwaitingGone)
    compensating = ls.from_dict(LAUNCH_SHAPES["Compensating"])
    assert isinstance(compensating.teardown, ts.Requesting) and isinstance(compensating.search, ls.RunningSearch)
    assert isinstance(ls.from_dict(LAUNCH_SHAPES["Preparing, whole search"]).search, ls.WholeSearch)
    connecting = ls.from_dict(LAUNCH_SHAPES["Connecting"])
    assert connecting.endpoint.host == ENDPOINT["host"] and connecting.vm is None


def test_the_aborted_shapes_of_0_1_0_read_as_the_one_written_now():
    # A resumed step that kept failing wrote no targets; a reconcile that failed without a VM wrote vm: null.
    assert ls.from_dict({"kind": "Aborted", "reason": "OSError: disk full"}).to_dict() == {
        "kind": "Aborted", "reason": "OSError: disk full", "targets": []}
    assert ls.from_dict({"kind": "Aborted", "reason": "cannot reconcile", "targets": [], "vm": None}).to_dict() == {
        "kind": "Aborted", "reason": "cannot reconcile", "targets": []}
    assert ls.from_dict({"kind": "Aborted", "reason": "x", "targets": [], "search": None}) == ls.Aborted("x")
    assert ls.migrate_state("Ready", READY) is READY    # every other shape is this version's own


def test_a_vm_record_and_a_reused_connecting_of_9faadf1_gain_what_0_1_0_writes_now():
    before_places = {k: v for k, v in VM.items() if k not in ("places", "regions_fold")}
    ready = ls.from_dict(dict(READY, vm=dict(before_places, location=LOC_B)))
    assert ready.vm == dict(before_places, location=LOC_B, places=["eu-1"], regions_fold=False)
    reused = {k: v for k, v in LAUNCH_SHAPES["Connecting, reused"].items() if k != "zone"}
    assert ls.from_dict(dict(reused, vm=before_places)).to_dict() == LAUNCH_SHAPES["Connecting, reused"]
    kept = ls.from_dict(dict(LAUNCH_SHAPES["Aborted, kept a VM"], vm=before_places))
    assert kept == ls.from_dict(LAUNCH_SHAPES["Aborted, kept a VM"])
    reconciling = ls.from_dict(dict(LAUNCH_SHAPES["Reconciling after Ready"], previous=dict(READY, vm=before_places)))
    assert reconciling.previous == ready.__class__(VM, False, ls.WholeSearch.from_dict(WHOLE))


def test_a_state_no_version_wrote_is_refused_by_name():
    with pytest.raises(ValueError, match="unknown launch state 'Hibernating'"):
        ls.from_dict({"kind": "Hibernating"})
    with pytest.raises(ValueError, match="unknown teardown state 'Draining'"):
        ts.from_dict({"kind": "Draining"})
    with pytest.raises(ls.UnreadableState, match=r"a launch state this version cannot read \(KeyError: 'search'\)"):
        ls.load_journalled({"kind": "Booting", "instance_id": "i-1", "adopted": False}, "launch")
    with pytest.raises(ls.UnreadableState, match="unknown machine kind 'k3s'"):
        ls.load_journalled({"kind": "Ready"}, "k3s")
    with pytest.raises(ValueError, match="unknown next state 'Sleeping'"):
        ls.from_dict(dict(LAUNCH_SHAPES["Compensating"], then="Sleeping"))


def test_a_journal_row_loads_as_the_state_of_its_machine():
    assert ls.load_journalled(None, None) is None
    assert isinstance(ls.load_journalled(READY, "launch"), ls.Ready)
    for machine in ts.TEARDOWN_KINDS:
        assert isinstance(ls.load_journalled(teardown_state("Leaked"), machine), ts.Leaked)
    record = {"kind": "Present", "vm_name": "vm1", "location": LOC, "instance_id": "fakea-i-0001",
              "targets": [TARGET]}
    loaded = ls.load_journalled(record, "instance")
    assert isinstance(loaded, ts.InstanceRecord) and loaded.to_dict() == record


# -- the accessors ------------------------------------------------------------------------------

def owned(name):
    return ls.owned_targets(ls.from_dict(LAUNCH_SHAPES[name]))


def test_what_each_launch_state_owns():
    at_offer = {"location": LOC, "instance_ids": [], "created": True}
    assert owned("Reconciling") == [] and owned("Planning") == [] and owned("NextOffer") == []
    assert owned("Reconciling after Ready") == [TARGET]
    assert owned("Reconciling after a teardown") == [TARGET]
    # Preparing: no create call yet; Creating: an instance may exist; Booting and Connecting know its id.
    assert owned("Preparing") == [dict(at_offer, created=False)]
    assert owned("Creating") == [at_offer]
    assert owned("Booting") == [TARGET] and owned("Connecting") == [TARGET] and owned("Connecting, reused") == [TARGET]
    assert owned("Compensating") == [TARGET]
    assert owned("Exhausted") == [] and owned("Aborted") == [] and owned("Aborted, with its search") == []
    assert owned("Ready") == [TARGET] and owned("Aborted, kept a VM") == [TARGET]
    assert owned("Leaked") == [TARGET, SIDE_ONLY]
    assert ls.owned_targets(None) == []
    assert ls.owned_targets(ts.from_dict(teardown_state("Done", targets=[]))) == []


def test_the_vm_record_a_state_keeps():
    ready, reconciling = ls.from_dict(READY), ls.from_dict(LAUNCH_SHAPES["Reconciling after Ready"])
    assert ls.vm_record(ready) == VM and ls.ready_vm(ready) == VM
    assert ls.vm_record(ls.from_dict(LAUNCH_SHAPES["Aborted, kept a VM"])) == VM
    assert ls.vm_record(ls.from_dict(LAUNCH_SHAPES["Connecting, reused"])) == VM
    assert ls.ready_vm(ls.from_dict(LAUNCH_SHAPES["Aborted, kept a VM"])) is None
    assert ls.vm_record(reconciling) is None and ls.last_vm_record(reconciling) == VM
    assert ls.vm_record(ls.from_dict(LAUNCH_SHAPES["Connecting"])) is None
    assert ls.last_vm_record(ls.from_dict(LAUNCH_SHAPES["Reconciling after a teardown"])) is None


def test_the_search_and_the_offer_in_hand():
    preparing = ls.from_dict(LAUNCH_SHAPES["Preparing"])
    assert ls.search_of(preparing) == ls.RunningSearch.from_dict(RUNNING) and ls.offer_in_hand(preparing) == OFFER
    assert ls.offer_in_hand(ls.from_dict(LAUNCH_SHAPES["Preparing, whole search"])) == OFFER
    assert ls.search_of(ls.from_dict(READY)).history == HISTORY
    assert ls.offer_in_hand(ls.from_dict(READY)) is None                     # not an attempt
    assert ls.offer_in_hand(ls.from_dict(LAUNCH_SHAPES["Connecting, reused"])) is None
    assert ls.search_of(ls.from_dict(LAUNCH_SHAPES["Planning"])) is None
    assert ls.empty_search(3).current is None and ls.empty_search(3).size == 0
    assert ls.search_from_dict(RUNNING).size == 2 and ls.search_from_dict(WHOLE).size == 1


def test_reasons_and_targets_named():
    assert ls.reason_of(ls.from_dict(LAUNCH_SHAPES["Leaked"])) == "instances still present after 60 s"
    assert ls.reason_of(ts.from_dict(teardown_state("Requesting"))) == "down requested"
    assert ls.reason_of(ls.from_dict(READY)) is None and ls.reason_of(None) is None
    assert ls.targets_of(ls.from_dict(LAUNCH_SHAPES["Aborted, unsure"])) == [TARGET]
    assert ls.targets_of(ls.from_dict(READY)) == [] and ls.targets_of(None) == []


# -- the projection's JSON keys -------------------------------------------------------------------

def test_the_ready_vm_json_keys_are_those_ready_writes():
    kind_key, ready, vm_key = ls.READY_VM_JSON
    written = ls.Ready(VM, False, None).to_dict()
    assert written[kind_key] == ready == ls.Ready.kind and written[vm_key] == VM
    assert ls.ready_vm_in(written) == VM and ls.ready_vm_in(ls.ready_part(VM)) == VM
    assert ls.ready_vm_in(LAUNCH_SHAPES["Aborted, kept a VM"]) is None and ls.ready_vm_in(None) is None


def test_the_projection_reads_a_ready_state_s_vm_record_in_sql(tmp_path):
    journal = projection.open_journal(str(tmp_path / "journal.sqlite"))
    try:
        for name, state in (("vm1", READY), ("vm2", LAUNCH_SHAPES["Aborted, kept a VM"])):
            journal.begin(name, "launch", state, state["kind"], True, "test:1:x", 60, None)
            projection.upsert_vm(journal, name, status="running")
        listed = {row["name"]: vm for row, vm in projection.vms_with_ready_vm(journal)}
    finally:
        journal.close()
    assert listed == {"vm1": VM, "vm2": None}
