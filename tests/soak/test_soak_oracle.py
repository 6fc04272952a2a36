"""The soak's oracle (tests/soak/oracle.py) on synthetic histories: each kind of broken promise is caught,
and the legal interleavings next to it are not (a down overlapping a provision, a killed run, another
journal's instance, an orphan nobody claimed)."""

from __future__ import annotations

from typing import Dict, List, Optional

from ansible_collections.gpuprov.cloud.tests.soak import oracle
from ansible_collections.gpuprov.cloud.tests.soak.history import History
from ansible_collections.gpuprov.cloud.tests.soak.oracle import Instance, JournalFacts, RowFacts, Snapshot
from ansible_collections.gpuprov.cloud.tests.soak.runner import schedule

J1, J2 = "1" * 32, "2" * 32


def _history(*ops: Dict) -> History:
    history = History(seed="test")
    for spec in ops:
        spec = dict(spec)
        start, end = spec.pop("at")
        op = history.new_op(round=1, kind=spec.pop("kind"), controller=spec.pop("controller", "c1"),
                            journal=spec.pop("journal", "shared"), name=spec.pop("name", "a"), **spec)
        op.start, op.end = start, end
        if op.rc is None and not op.skipped:
            op.rc = 0
    return history


def _snap(instances: List[Instance] = (), rows: Optional[Dict[str, RowFacts]] = None,
          events: Optional[Dict[str, List[Dict]]] = None, at: float = 100.0,
          own_rows: Optional[Dict[str, RowFacts]] = None) -> Snapshot:
    journals = {"shared": JournalFacts("shared", J1, dict(rows or {}), dict(events or {})),
                "own": JournalFacts("own", J2, dict(own_rows or {}), {})}
    return Snapshot(at=at, round=1, instances=list(instances), journals=journals)


def _live(instance_id: str, name: str = "a", journal_id: str = J1, status: str = "Running") -> Instance:
    return Instance("local", instance_id, name, journal_id, status)


def _ev(at: float, to: str, note: str = "", frm: Optional[str] = None) -> Dict:
    return {"at": at, "to": to, "from": frm, "note": note, "event": "transition"}


def _checks(found: List[oracle.Violation]) -> List[str]:
    return sorted(v.check for v in found)


# -- (a) one live instance per name per journal ----------------------------------------------------------

def test_a_two_live_instances_of_one_name_and_journal():
    found = oracle.check_a(_history(), _snap([_live("x"), _live("y")]))
    assert _checks(found) == ["a"] and "2 live instances" in found[0].detail


def test_a_the_same_name_on_two_journals_or_a_failed_leftover_is_fine():
    snap = _snap([_live("x"), _live("y", journal_id=J2), _live("z", status="Failed")])
    assert oracle.check_a(_history(), snap) == []


# -- (b) nothing after a successful down, unless something made it since -----------------------------------

def test_b_an_instance_after_a_successful_down_with_nothing_since():
    history = _history({"kind": "provision", "at": (1, 3), "ready_id": "x"}, {"kind": "down", "at": (10, 12)})
    found = oracle.check_b(history, _snap([_live("x")]))
    assert _checks(found) == ["b"] and "#2 down(a)@c1 succeeded" in found[0].detail


def test_b_a_provision_overlapping_or_after_the_down_excuses_it():
    for window in ((11, 15), (20, 25), (5, 10.5)):
        history = _history({"kind": "down", "at": (10, 12)}, {"kind": "provision", "at": window, "rc": 2})
        assert oracle.check_b(history, _snap([_live("x")])) == [], window


def test_b_a_failed_down_or_another_journals_down_says_nothing():
    history = _history({"kind": "down", "at": (10, 12), "rc": 2},
                       {"kind": "down", "at": (13, 14), "journal": "own", "controller": "c3"})
    assert oracle.check_b(history, _snap([_live("x")])) == []


def test_b_an_orphan_the_soak_planted_and_nobody_claimed_is_not_the_downs():
    history = _history({"kind": "plant", "at": (1, 1.1), "made_id": "x"}, {"kind": "down", "at": (10, 12)})
    assert oracle.check_b(history, _snap([_live("x")])) == []
    # Once a row named it (a provision adopted it), the down had to take it.
    claimed = {"a": [_ev(2, "Booting", "adopted x")]}
    assert _checks(oracle.check_b(history, _snap([_live("x")], events=claimed))) == ["b"]


# -- (c) a Ready provision left its instance, live and reachable ------------------------------------------

def test_c_a_ready_instance_gone_with_nothing_that_could_remove_it():
    history = _history({"kind": "provision", "at": (1, 3), "ready_id": "x"})
    found = oracle.check_c(history, _snap([]))
    assert _checks(found) == ["c"] and "is gone" in found[0].detail


def test_c_a_down_a_recreate_or_a_killed_provision_later_or_concurrent_excuses_it():
    for excuse in ({"kind": "down", "at": (5, 8), "rc": 2}, {"kind": "recreate", "at": (2, 9), "rc": 2},
                   {"kind": "provision", "at": (5, 8), "signal": "KILL", "signal_at": "t+1s", "rc": -9},
                   {"kind": "recreate_bad", "at": (5, 8), "signal": "INT", "signal_at": "t+1s", "rc": 99}):
        history = _history({"kind": "provision", "at": (1, 3), "ready_id": "x"}, excuse)
        assert oracle.check_c(history, _snap([])) == [], excuse


def test_c_an_impossible_recreate_a_sweep_or_another_journals_down_is_no_excuse():
    for culprit, says in (({"kind": "recreate_bad", "at": (5, 8), "rc": 2}, "is gone"),
                          ({"kind": "sweep_delete", "at": (5, 8), "name": None}, "sweeps since: #2"),
                          ({"kind": "down", "at": (5, 8), "journal": "own", "controller": "c3"},
                           "on another journal: #2")):
        history = _history({"kind": "provision", "at": (1, 3), "ready_id": "x"}, culprit)
        found = oracle.check_c(history, _snap([]))
        assert _checks(found) == ["c"] and says in found[0].detail, culprit


def test_c_a_ready_instance_replaced_without_a_recreate():
    history = _history({"kind": "provision", "at": (1, 3), "ready_id": "x"},
                       {"kind": "provision", "at": (5, 8), "ready_id": "y"})
    found = oracle.check_c(history, _snap([_live("y")]))
    assert _checks(found) == ["c"] and "replaced by y" in found[0].detail


def test_c_the_latest_ready_vm_must_answer_ssh():
    history = _history({"kind": "provision", "at": (1, 3), "ready_id": "x", "controller": "c2"})
    snap = _snap([_live("x")])
    assert oracle.reach_targets(history, snap) == [("c2", "a", "x")]
    snap.reach["c2/a"] = (True, "")
    assert oracle.check_c(history, snap) == []
    snap.reach["c2/a"] = (False, "rc 255: Connection refused")
    found = oracle.check_c(history, snap)
    assert _checks(found) == ["c"] and "Connection refused" in found[0].detail


def test_c_no_ssh_check_once_something_could_have_changed_the_vm():
    history = _history({"kind": "provision", "at": (1, 3), "ready_id": "x"}, {"kind": "down", "at": (5, 8), "rc": 2})
    assert oracle.reach_targets(history, _snap([_live("x")])) == []


# -- (d) the sweep removes orphans only ------------------------------------------------------------------

def _removed(instance_id: str, name: str = "a", journal_id: str = J1) -> List[Dict]:
    return [{"cloud": "local", "kind": "instance", "id": instance_id, "vm_name": name, "journal_id": journal_id}]


def test_d_a_sweep_removed_what_a_provision_had_reported_ready():
    history = _history({"kind": "provision", "at": (1, 3), "ready_id": "x"},
                       {"kind": "sweep_delete", "at": (5, 8), "name": None, "removed": _removed("x")})
    found = oracle.check_d(history, _snap([]), {})
    assert _checks(found) == ["d"] and "#1 provision(a)@c1 had reported" in found[0].detail


def test_d_a_provision_overlapping_the_sweep_that_reported_ready_counts_too():
    history = _history({"kind": "sweep_delete", "at": (1, 8), "name": None, "removed": _removed("x")},
                       {"kind": "provision", "at": (2, 6), "ready_id": "x"})
    assert _checks(oracle.check_d(history, _snap([]), {})) == ["d"]


def test_d_removing_an_instance_a_down_had_released_is_fine():
    history = _history({"kind": "provision", "at": (1, 3), "ready_id": "x"}, {"kind": "down", "at": (4, 6), "rc": 2},
                       {"kind": "sweep_delete", "at": (5, 8), "name": None, "removed": _removed("x")})
    assert oracle.check_d(history, _snap([]), {}) == []


def test_d_removing_an_orphan_nobody_reported_is_the_sweeps_job():
    history = _history({"kind": "plant", "at": (1, 1.1), "made_id": "x"},
                       {"kind": "sweep_delete", "at": (5, 8), "name": None, "removed": _removed("x")})
    assert oracle.check_d(history, _snap([]), {}) == []


def test_d_a_sweep_removed_another_journals_instance():
    history = _history({"kind": "sweep_delete", "at": (5, 8), "name": None, "removed": _removed("x", journal_id=J2)})
    found = oracle.check_d(history, _snap([]), {})
    assert _checks(found) == ["d"] and "another journal's id" in found[0].detail
    # Known only from the snapshots (a killed sweep's journal events): the same.
    events = {"sweep:a": [_ev(10, "Requesting"), _ev(11, "AwaitingGone", "deletion requested for local/local [x]")]}
    found = oracle.check_d(_history(), _snap([], events=events), {"x": J2})
    assert _checks(found) == ["d"]


def test_d_the_journal_says_the_row_held_the_name_for_the_whole_delete_window():
    sweep = [_ev(10, "Requesting"), _ev(11, "AwaitingGone", "deletion requested for local/local [x]")]
    held = {"sweep:a": sweep, "a": [_ev(5, "Reconciling"), _ev(6, "Ready")]}
    found = oracle.check_d(_history(), _snap([], events=held), {})
    assert _checks(found) == ["d"] and "held the name" in found[0].detail
    for row in ([_ev(5, "Ready"), _ev(9, "Done")],                 # released before the sweep began
                [_ev(5, "Done"), _ev(10.5, "Reconciling")],        # a run began inside the window: ambiguous
                []):                                              # no row at all: an orphan
        assert oracle.check_d(_history(), _snap([], events={"sweep:a": sweep, "a": row}), {}) == [], row


def test_sweep_deletions_are_read_from_the_sweep_rows_events():
    facts = JournalFacts("shared", J1, {}, {
        "sweep:a": [_ev(10, "Requesting"), _ev(11, "AwaitingGone", "deletion requested for local/local [x, y]")],
        "sweep:%s:b" % J2: [_ev(12, "Requesting"), _ev(13, "AwaitingGone", "deletion requested for docker/local [z]")],
        "a": [_ev(1, "Compensating/AwaitingGone", "deletion requested for local/local [w]")]})
    found = oracle.sweep_deletions(facts)
    assert [(d["name"], d["cloud"], d["ids"], d["t0"], d["t1"], d["foreign"]) for d in found] == [
        ("a", "local", ["x", "y"], 10, 11, False), ("b", "docker", ["z"], 12, 13, True)]


# -- (e) Done never while something of the name exists ---------------------------------------------------

def _done(key: str = "a", kind: str = "teardown") -> Dict[str, RowFacts]:
    return {key: RowFacts(key, kind, "Done", "Done", True)}


def test_e_done_while_an_instance_the_journal_knew_exists():
    events = {"a": [_ev(1, "Booting", "created x"), _ev(9, "Done")]}
    found = oracle.check_e(_history(), _snap([_live("x", status="Terminating")], rows=_done(), events=events))
    assert _checks(found) == ["e"] and "says teardown Done while" in found[0].detail


def test_e_an_instance_rows_done_counts_per_cloud():
    snap = _snap([_live("x", name="i")], rows=_done("instance:local:i", "instance-teardown"),
                 events={"instance:local:i": [_ev(1, "Present", "Present: x at local/local")]})
    assert _checks(oracle.check_e(_history(), snap)) == ["e"]
    snap.instances = [Instance("docker", "x", "i", J1, "Running")]
    assert oracle.check_e(_history(), snap) == []


def test_e_not_for_an_unclaimed_orphan_or_while_a_provision_runs():
    history = _history({"kind": "plant", "at": (1, 1.1), "made_id": "x"})
    assert oracle.check_e(history, _snap([_live("x")], rows=_done())) == []
    history = _history({"kind": "provision", "at": (90, 0)})
    assert oracle.check_e(history, _snap([_live("x")], rows=_done())) == []


# -- (f) at quiescence -----------------------------------------------------------------------------------

def _ready(instance_id: str) -> Dict[str, RowFacts]:
    return {"a": RowFacts("a", "launch", "Ready", "Ready", True, instance_id)}


def test_f_settled_up_ready_is_exactly_the_journalled_instance():
    assert oracle.check_settled_up(_history(), _snap([_live("x")], rows=_ready("x")), ["a"]) == []
    for instances in ([], [_live("y")], [_live("x"), _live("y")]):
        found = oracle.check_settled_up(_history(), _snap(instances, rows=_ready("x")), ["a"])
        assert _checks(found) == ["f"], instances


def test_f_settled_up_not_ready_means_nothing_live():
    aborted = {"a": RowFacts("a", "launch", "Aborted", "Aborted", True)}
    assert _checks(oracle.check_settled_up(_history(), _snap([_live("x")], rows=aborted), ["a"])) == ["f"]
    # Another controller's instance of the name (a journal outside the soak) is not this journal's.
    assert oracle.check_settled_up(_history(), _snap([_live("x", journal_id="3" * 32)], rows=aborted), ["a"]) == []


def test_f_settled_down_every_down_succeeds_and_leaves_nothing():
    history = _history({"kind": "down", "at": (1, 2), "rc": 2, "lines": ["fatal: it failed"]},
                       {"kind": "down", "at": (1, 2), "name": "b"})
    downs = history.ops
    rows = {"a": RowFacts("a", "launch", "Ready", "Ready", True, "x"),
            "b": RowFacts("b", "launch", "Aborted", "Aborted", True)}
    found = oracle.check_settled_down(history, _snap([_live("x")], rows=rows), downs, ["a", "b"], [])
    details = " | ".join(v.detail for v in found)
    assert _checks(found) == ["f", "f", "f"], details
    assert "at quiescence failed" in details and "row a says launch Ready" in details and "x (Running) is left" in details


def test_f_swept_nothing_of_the_journals_is_left():
    assert oracle.check_swept(_snap([_live("x", name="zz", journal_id="3" * 32)])) == []
    assert _checks(oracle.check_swept(_snap([_live("x", name="zz")]))) == ["f"]


# -- the schedule ----------------------------------------------------------------------------------------

def test_the_schedule_is_a_function_of_the_seed_and_the_round():
    names, inst = {"n-a": "local", "n-b": "local", "n-c": "docker"}, {"n-i": "local"}
    assert schedule("7", 3, names, inst, 4) == schedule("7", 3, names, inst, 4)
    rounds = [schedule("7", r, names, inst, 4) for r in range(1, 30)]
    assert rounds != [schedule("8", r, names, inst, 4) for r in range(1, 30)]
    ops = [p for r in rounds for p in r]
    assert {p.kind for p in ops} >= {"provision", "down", "sweep_delete"}
    assert all(2 <= len([p for p in r if p.kind != "plant"]) <= 4 for r in rounds)
    assert {p.cloud for p in ops if p.kind == "provision" and p.name == "n-c"} == {"docker"}


def test_a_gated_race_holds_its_run_until_the_other_one_is_held():
    names, inst = {"n-a": "local", "n-b": "local", "n-c": "docker"}, {"n-i": "local"}
    races = [p for r in range(1, 80) for p in schedule("9", r, names, inst, 3, focus=1.0)
             if p.nemesis.get("mode") == "gate"]
    assert races, "no gated race in 80 rounds"
    for p in races:
        assert p.kind in ("provision", "instance_present") and p.nemesis["gate_index"] >= 0, p


def test_most_runs_on_a_name_go_to_its_home_journal():
    from ansible_collections.gpuprov.cloud.tests.soak.runner import JOURNAL_OF, home_journal
    names, inst = {"n-a": "local", "n-b": "local", "n-c": "docker"}, {"n-i": "local"}
    assert [home_journal(n, names, inst) for n in ("n-a", "n-b", "n-c", "n-i")] == ["shared", "own", "shared", "own"]
    runs = [p for r in range(1, 200) for p in schedule("3", r, names, inst, 3, focus=0.0)
            if p.name in names and p.kind != "health"]
    home = [p for p in runs if JOURNAL_OF[p.controller] == home_journal(p.name, names, inst)]
    assert 0.7 < len(home) / len(runs) < 0.97
