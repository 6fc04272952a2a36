"""The executor, with toy machines (tests/fakes/toy_machine.py) on a real SQLite
journal under tmp_path: write-ahead persistence, resume after a crash at every point,
retry budgets and backoff, polls and time in state, cancellation, version guards,
leases and fencing. Time is a FakeClock and waits are injected, so nothing sleeps
(the two heartbeat tests wait on a condition in millisecond steps) and nothing
asserts on elapsed wall time."""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import threading
import time

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.executor import (
    CancelToken, Executor, HardCancel, LeaseLost, Machine, Next, Poll, Retry,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journal import (
    Conflict, Journal, LeaseHeld,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.retry import RetryPolicy
from ansible_collections.gpuprov.cloud.tests.fakes.commit_hook import with_commit_hook
from ansible_collections.gpuprov.cloud.tests.fakes.toy_machine import (
    Crash, FakeClock, ScriptedMachine, ToyMachine, ToyWorld, deadline_poller, toy_initial,
)
from ansible_collections.gpuprov.cloud.tests.unit.helpers import wait_for

KEY = "vm1"
SEED = 1234


# -- helpers (clock, jpath, journals and journal are tests/unit/conftest.py's) ---------------

class Sleeper:
    """An injected wait: records each delay and moves the fake clock by it."""

    def __init__(self, clock, cancel=None, on_wait=None):
        self.clock, self.cancel, self.on_wait = clock, cancel, on_wait
        self.waits = []

    def __call__(self, seconds):
        self.waits.append(seconds)
        if self.on_wait is not None:
            self.on_wait(len(self.waits), seconds)
        self.clock.advance(seconds)
        return bool(self.cancel is not None and self.cancel.requested)


class FakeWaitToken(CancelToken):
    """A CancelToken whose wait keeps its contract (return early when cancellation is
    requested) but moves a fake clock instead of sleeping."""

    def __init__(self, clock):
        super().__init__(clock)
        self.waits = []

    def wait(self, seconds):
        self.waits.append(seconds)
        if self.requested:
            return True
        self.clock.advance(seconds)
        return False


def executor(journal, machine, clock, before_commit=None, **kw):
    """The executor on ``journal``; ``before_commit(old, new)`` runs right before each commit (commit_hook.py)."""
    kw.setdefault("heartbeat", False)
    kw.setdefault("rng", random.Random(SEED))
    return Executor(with_commit_hook(journal, before_commit), machine, clock=clock, **kw)


def row_of(path, key=KEY):
    """The machines row as another process would see it (a fresh connection)."""
    db = sqlite3.connect(path)
    try:
        return db.execute("SELECT kind, state, label, terminal, version, lease_owner, lease_expires "
                          "FROM machines WHERE key = ?", (key,)).fetchone()
    finally:
        db.close()


def events_of(path, key=KEY):
    db = sqlite3.connect(path)
    try:
        return db.execute("SELECT id, version, event, from_label, to_label, note, owner FROM machine_events "
                          "WHERE key = ? ORDER BY id", (key,)).fetchall()
    finally:
        db.close()


def transitions(journal, key=KEY):
    return [(e["from"], e["to"], e["note"]) for e in journal.events(key) if e["event"] == "transition"]


def scripted_initial(kind="A"):
    return lambda prev, prev_kind: {"kind": kind}


# -- persistence / write-ahead -----------------------------------------------------------------

def test_every_transition_is_committed_with_version_and_event(journal, jpath, clock):
    world = ToyWorld()
    ex = executor(journal, ToyMachine(world), clock, owner="run-1")
    outcome = ex.run(KEY, toy_initial)

    assert (outcome.key, outcome.label, outcome.resumed, outcome.transitions, outcome.cancelled) == (
        KEY, "ToyDone", False, 3, False)
    assert outcome.state == {"kind": "Done", "handles": ["res-A", "res-B", "res-C"]}
    row = journal.load(KEY)
    assert (row.kind, row.label, row.terminal, row.version) == ("toy", "ToyDone", True, 4)
    assert row.state == outcome.state
    assert (row.lease_owner, row.lease_expires) == (None, None)   # released at the end
    events = journal.events(KEY)
    assert [(e["version"], e["event"], e["from"], e["to"], e["note"], e["owner"]) for e in events] == [
        (1, "begin", None, "ToyA", "started by run-1", "run-1"),
        (2, "transition", "ToyA", "ToyB", "A made res-A", "run-1"),
        (3, "transition", "ToyB", "ToyC", "B made res-B", "run-1"),
        (4, "transition", "ToyC", "ToyDone", "C made res-C", "run-1"),
    ]
    assert world.created == {"res-A": 1, "res-B": 1, "res-C": 1}
    assert world.steps == {"A": 1, "B": 1, "C": 1}


def test_write_ahead_each_step_sees_the_previous_transition_committed(journals, jpath, clock):
    """From inside each step, a separate connection (another process, in effect) already
    sees the transition into this state: state JSON, version +1 and its event."""
    journal = journals()
    observer = journals()
    checked = []

    def check(expected_kind, expected_version, expected_handles):
        def hook(state, cx):
            row = observer.load(KEY)
            assert row.state == {"kind": expected_kind, "handles": expected_handles}
            assert row.version == expected_version
            assert row.state == state       # what the step runs on is what is durable
            last = observer.events(KEY)[-1]
            assert (last["event"], last["to"], last["version"]) == (
                "begin" if expected_version == 1 else "transition", "Toy" + expected_kind, expected_version)
            raw = row_of(jpath)
            assert (raw[0], raw[4], raw[5]) == ("toy", expected_version, cx._executor.owner)
            checked.append(expected_kind)
            return None
        return hook

    world = ToyWorld()
    machine = ToyMachine(world, hooks={"A": check("A", 1, []), "B": check("B", 2, ["res-A"]),
                                       "C": check("C", 3, ["res-A", "res-B"])})
    executor(journal, machine, clock).run(KEY, toy_initial)
    assert checked == ["A", "B", "C"]


def test_a_handle_is_durable_before_any_wait_begins(journals, jpath, clock):
    journal, observer = journals(), journals()
    seen = []

    def on_wait(n, seconds):
        seen.append(observer.load(KEY).state)

    polls = iter([Poll(5, "booting"), Poll(5, "booting")])
    machine = ScriptedMachine({
        "Creating": [Next({"kind": "Booting", "instance_id": "i-42"}, "created i-42")],
        "Booting": lambda state, cx: next(polls, Next({"kind": "Done", "instance_id": state["instance_id"]})),
    })
    executor(journal, machine, clock).run(KEY, scripted_initial("Creating"), wait_poll=Sleeper(clock, on_wait=on_wait))
    assert seen == [{"kind": "Booting", "instance_id": "i-42"}] * 2


def test_before_commit_sees_old_and_new_state_before_the_commit(journals, jpath, clock):
    journal, observer = journals(), journals()
    calls = []

    def before_commit(old, new):
        calls.append((old["kind"], new["kind"], observer.load(KEY).state["kind"]))

    executor(journal, ToyMachine(ToyWorld()), clock, before_commit=before_commit).run(KEY, toy_initial)
    # at hook time the journal still holds the old state
    assert calls == [("A", "B", "A"), ("B", "C", "B"), ("C", "Done", "C")]


# -- resume after a crash at every point --------------------------------------------------------

CRASH_POINTS = (
    [pytest.param(("before_commit", k), id="before-commit-%s" % k) for k in ("A", "B", "C")] +
    [pytest.param(("step-before-effect", k), id="in-step-%s-before-effect" % k) for k in ("A", "B", "C")] +
    [pytest.param(("step-after-effect", k), id="in-step-%s-after-effect" % k) for k in ("A", "B", "C")]
)


@pytest.mark.parametrize("point", CRASH_POINTS)
def test_resume_after_a_crash_at_each_point(journals, jpath, clock, point):
    where, kind = point
    order = ["A", "B", "C"]
    world = ToyWorld()
    first = journals()
    if where == "before_commit":
        def before_commit(old, new):
            if old["kind"] == kind:
                raise Crash("killed before committing %s -> %s" % (old["kind"], new["kind"]))
        machine = ToyMachine(world)
        ex1 = executor(first, machine, clock, owner="run-1", before_commit=before_commit)
    else:
        machine = ToyMachine(world, crash=(kind, "before" if where == "step-before-effect" else "after"))
        ex1 = executor(first, machine, clock, owner="run-1")

    with pytest.raises(Crash):
        ex1.run(KEY, toy_initial)

    # the journal holds the last committed state: the crashed state, never a later one
    idx = order.index(kind)
    row = first.load(KEY)
    assert row.state == {"kind": kind, "handles": ["res-%s" % k for k in order[:idx]]}
    assert (row.version, row.terminal) == (idx + 1, False)
    assert row.lease_owner is None     # the finally released it; see the SIGKILL test for a held one
    effect_done = where != "step-before-effect"
    assert ("res-%s" % kind in world.resources) == effect_done

    # a new process: new connection, new executor, same journal file and key, no crash
    second = journals()
    resumed = executor(second, ToyMachine(world), clock, owner="run-2")
    outcome = resumed.run(KEY, lambda prev, pk: pytest.fail("a non-terminal state must be resumed"))

    assert outcome.resumed is True
    assert outcome.state == {"kind": "Done", "handles": ["res-A", "res-B", "res-C"]}
    assert outcome.transitions == 3 - idx
    # every side effect happened exactly once; only the crashed step ran twice
    assert world.created == {"res-A": 1, "res-B": 1, "res-C": 1}
    assert world.steps == {k: (2 if k == kind else 1) for k in order}
    events = second.events(KEY)
    resume_events = [e for e in events if e["event"] == "resume"]
    assert len(resume_events) == 1
    assert resume_events[0]["note"] == "resumed by run-2" and resume_events[0]["to"] == "Toy%s" % kind
    assert [(f, t) for f, t, _x1 in transitions(second)] == [
        ("ToyA", "ToyB"), ("ToyB", "ToyC"), ("ToyC", "ToyDone")]
    assert [e["owner"] for e in events if e["event"] == "transition"] == (
        ["run-1"] * idx + ["run-2"] * (3 - idx))
    final = second.load(KEY)
    assert (final.version, final.terminal, final.lease_owner) == (4, True, None)


def test_resume_after_sigkill_waits_for_the_dead_runs_lease(journals, jpath, clock):
    """A SIGKILL runs no finally: the dead run's lease stays until it expires."""
    world = ToyWorld()
    first = journals()
    with pytest.raises(Crash):
        executor(first, ToyMachine(world, crash=("B", "after")), clock, owner="dead", lease_ttl=60.0).run(
            KEY, toy_initial)
    # put back what the kill would have left: the dead owner's unexpired lease
    first.acquire(KEY, "dead", 60.0)
    second = journals()
    with pytest.raises(LeaseHeld) as info:
        executor(second, ToyMachine(world), clock, owner="run-2").run(KEY, toy_initial)
    assert "dead" in str(info.value) and KEY in str(info.value)
    assert world.steps == {"A": 1, "B": 1}          # the refused run stepped nothing
    assert second.load(KEY).lease_owner == "dead"
    clock.advance(61)
    outcome = executor(second, ToyMachine(world), clock, owner="run-2").run(KEY, toy_initial)
    assert outcome.resumed and outcome.state["kind"] == "Done"
    assert world.created == {"res-A": 1, "res-B": 1, "res-C": 1}


def test_a_terminal_row_starts_afresh_from_initial(journal, clock):
    world = ToyWorld()
    executor(journal, ToyMachine(world), clock).run(KEY, toy_initial)
    seen = []

    def initial(prev, prev_kind):
        seen.append((prev, prev_kind))
        return {"kind": "A", "handles": []}

    world2 = ToyWorld()
    outcome = executor(journal, ToyMachine(world2), clock, owner="again").run(KEY, initial)
    assert seen == [({"kind": "Done", "handles": ["res-A", "res-B", "res-C"]}, "toy")]
    assert outcome.resumed is False and outcome.state["kind"] == "Done"
    assert journal.load(KEY).version == 8   # 4 + begin + 3 transitions
    begins = [e for e in journal.events(KEY) if e["event"] == "begin"]
    assert [e["version"] for e in begins] == [1, 5] and begins[1]["note"] == "started by again"


def test_a_row_of_another_machine_kind_is_replaced_not_resumed(journal, clock):
    journal.begin(KEY, "scripted", {"kind": "Booting", "id": "i-1"}, "Booting", False, "old", 1.0, None)
    journal.release(KEY, "old")
    seen = []

    def initial(prev, prev_kind):
        seen.append((prev, prev_kind))
        return {"kind": "A", "handles": [], "adopted": prev["id"]}

    world = ToyWorld()
    began = []
    machine = ToyMachine(world, hooks={"A": lambda state, cx: began.append(journal.load(KEY).state)})
    outcome = executor(journal, machine, clock).run(KEY, initial)
    assert seen == [({"kind": "Booting", "id": "i-1"}, "scripted")]
    assert began == [{"kind": "A", "handles": [], "adopted": "i-1"}]
    assert outcome.resumed is False
    row = journal.load(KEY)
    assert (row.kind, row.version, row.state["kind"]) == ("toy", 5, "Done")


def test_an_initial_terminal_state_runs_no_step(journal, clock):
    machine = ScriptedMachine({})
    outcome = executor(journal, machine, clock).run(KEY, scripted_initial("Done"))
    assert outcome.state == {"kind": "Done"} and outcome.transitions == 0
    row = journal.load(KEY)
    assert (row.terminal, row.version, row.lease_owner) == (True, 1, None)
    assert machine.seen == []


# -- retry budgets ------------------------------------------------------------------------------

def test_retries_are_capped_and_the_machine_names_the_failure_state(journal, clock):
    policy = RetryPolicy(max_attempts=3, initial_backoff=1.0, max_backoff=10.0, jitter=0.5)
    machine = ScriptedMachine({"A": [Retry("throttled 1"), Retry("throttled 2"), Retry("throttled 3"),
                                     Next({"kind": "Done"})]}, policy=policy)
    sleeper = Sleeper(clock)
    events_seen = []
    outcome = executor(journal, machine, clock, on_event=lambda k, d: events_seen.append((k, d))).run(
        KEY, scripted_initial(), wait_poll=sleeper)

    assert outcome.state == {"kind": "Failed", "from": "A", "error": "throttled 3"}   # the machine's choice
    assert machine.exhausted == [("A", "throttled 3")]
    assert [s[2] for s in machine.seen] == [0, 1, 2]     # cx.attempt counts failures so far
    # backoff between attempts (none after the last): exponential with seeded jitter
    twin = random.Random(SEED)
    assert sleeper.waits == [policy.backoff(1, twin), policy.backoff(2, twin)]
    assert 0.5 <= sleeper.waits[0] <= 1.0 and 1.0 <= sleeper.waits[1] <= 2.0
    retry_notes = [e["note"] for e in journal.events(KEY) if e["event"] == "retry"]
    assert retry_notes == ["attempt 1/3 failed: throttled 1", "attempt 2/3 failed: throttled 2",
                           "attempt 3/3 failed: throttled 3"]
    assert transitions(journal) == [("A", "Failed", "retries exhausted after 3 attempts: throttled 3")]
    row = journal.load(KEY)
    assert (row.label, row.terminal, row.version) == ("Failed", True, 2)
    retries = [d for k, d in events_seen if k == "retry"]
    assert [(d["attempt"], d["max_attempts"], d["error"]) for d in retries] == [
        (1, 3, "throttled 1"), (2, 3, "throttled 2")]
    assert [d["delay"] for d in retries] == sleeper.waits


def test_exhaustion_goes_wherever_the_machine_says_and_the_run_continues(journal, clock):
    machine = ScriptedMachine(
        {"A": [Retry("no capacity")] * 2, "Cleanup": [Next({"kind": "Done", "cleaned": True})]},
        policy=RetryPolicy(max_attempts=2),
        exhausted_to=lambda state, err: {"kind": "Cleanup", "why": err})
    outcome = executor(journal, machine, clock).run(KEY, scripted_initial(), wait_poll=Sleeper(clock))
    assert outcome.state == {"kind": "Done", "cleaned": True}
    assert [(f, t) for f, t, _x1 in transitions(journal)] == [("A", "Cleanup"), ("Cleanup", "Done")]
    assert transitions(journal)[0][2] == "retries exhausted after 2 attempts: no capacity"


def test_a_next_resets_the_retry_count(journal, clock):
    machine = ScriptedMachine({
        "A": [Retry("a1"), Retry("a2"), Next({"kind": "B"})],
        "B": [Retry("b1"), Retry("b2"), Next({"kind": "Done"})],
    }, policy=RetryPolicy(max_attempts=3))
    outcome = executor(journal, machine, clock).run(KEY, scripted_initial(), wait_poll=Sleeper(clock))
    assert outcome.state == {"kind": "Done"}
    assert machine.exhausted == []
    assert [(k, a) for k, _x1, a in machine.seen] == [("A", 0), ("A", 1), ("A", 2), ("B", 0), ("B", 1), ("B", 2)]
    notes = [e["note"] for e in journal.events(KEY) if e["event"] == "retry"]
    assert notes == ["attempt 1/3 failed: a1", "attempt 2/3 failed: a2",
                     "attempt 1/3 failed: b1", "attempt 2/3 failed: b2"]


def test_the_policy_is_per_state(journal, clock):
    machine = ScriptedMachine({"A": [Retry("x")], "B": [Retry("y")] * 4},
                              policies={"A": RetryPolicy(max_attempts=1), "B": RetryPolicy(max_attempts=4)},
                              exhausted_to=lambda s, e: {"kind": "B"} if s["kind"] == "A" else {"kind": "Failed"})
    executor(journal, machine, clock).run(KEY, scripted_initial(), wait_poll=Sleeper(clock))
    assert machine.exhausted == [("A", "x"), ("B", "y")]
    assert len([k for k, _x1, _x2 in machine.seen if k == "B"]) == 4


def test_an_exception_in_a_step_is_a_budgeted_retry_not_a_crash(journal, clock):
    machine = ScriptedMachine({"A": [ValueError("bad parse"), KeyError("instance_id"), Next({"kind": "Done"})]},
                              policy=RetryPolicy(max_attempts=3))
    sleeper = Sleeper(clock)
    outcome = executor(journal, machine, clock).run(KEY, scripted_initial(), wait_poll=sleeper)
    assert outcome.state == {"kind": "Done"}
    assert len(sleeper.waits) == 2   # backed off like any Retry
    notes = [e["note"] for e in journal.events(KEY) if e["event"] == "retry"]
    assert notes == ["attempt 1/3 failed: ValueError: bad parse", "attempt 2/3 failed: KeyError: 'instance_id'"]


def test_a_step_that_always_raises_ends_in_the_machines_failure_state(journal, clock):
    machine = ScriptedMachine({"A": [RuntimeError("bug %d" % i) for i in range(3)]},
                              policy=RetryPolicy(max_attempts=3))
    outcome = executor(journal, machine, clock).run(KEY, scripted_initial(), wait_poll=Sleeper(clock))
    assert outcome.state == {"kind": "Failed", "from": "A", "error": "RuntimeError: bug 2"}
    assert machine.exhausted == [("A", "RuntimeError: bug 2")]
    assert transitions(journal) == [("A", "Failed", "retries exhausted after 3 attempts: RuntimeError: bug 2")]
    assert journal.load(KEY).lease_owner is None


def test_a_step_returning_something_else_is_a_type_error_and_releases_the_lease(journal, clock):
    machine = ScriptedMachine({"A": ["not a result"]})
    with pytest.raises(TypeError) as info:
        executor(journal, machine, clock).run(KEY, scripted_initial())
    assert "Next, Poll or Retry" in str(info.value)
    row = journal.load(KEY)
    assert (row.state, row.lease_owner) == ({"kind": "A"}, None)


def test_an_executor_built_as_the_production_callers_build_it_backs_off_and_retries(journal, clock):
    """tasks/service.py, tasks/sweep.py and primitives.py inject no rng: the executor draws its own jitter."""
    policy = RetryPolicy(max_attempts=3, initial_backoff=1.0, max_backoff=10.0, jitter=0.5)
    machine = ScriptedMachine({"A": [Retry("throttled"), Retry("throttled"), Next({"kind": "Done"})]}, policy=policy)
    sleeper = Sleeper(clock)

    outcome = Executor(journal, machine, clock=clock, heartbeat=False).run(KEY, scripted_initial(), wait_poll=sleeper)

    assert outcome.state == {"kind": "Done"} and machine.exhausted == []
    assert len(sleeper.waits) == 2
    assert 0.5 <= sleeper.waits[0] <= 1.0 and 1.0 <= sleeper.waits[1] <= 2.0


def test_the_first_state_after_a_cancel_gets_its_whole_retry_budget(journal, clock):
    """A cancel maps the state (here to a compensation) and that state starts with no failures counted,
    even when the cancelled state had failed before: a compensation with one retry fewer may leak."""
    token = CancelToken(clock)

    def cancel_after_first_failure(count, seconds):
        token.request()
    machine = ScriptedMachine({"A": [Retry("a1")],
                               "Compensating": [Retry("c1"), Retry("c2"), Next({"kind": "Cancelled"})]},
                              policy=RetryPolicy(max_attempts=3))
    machine.on_cancel = lambda state: {"kind": "Compensating"} if state["kind"] == "A" else None

    outcome = executor(journal, machine, clock, cancel=token).run(
        KEY, scripted_initial(), wait_poll=Sleeper(clock, on_wait=cancel_after_first_failure))

    assert outcome.state == {"kind": "Cancelled"} and machine.exhausted == []
    assert [(k, a) for k, _x1, a in machine.seen] == [("A", 0), ("Compensating", 0), ("Compensating", 1),
                                                      ("Compensating", 2)]


# -- RetryPolicy.backoff ---------------------------------------------------------------------------

def test_backoff_without_jitter_is_exponential_and_capped():
    policy = RetryPolicy(initial_backoff=1.0, max_backoff=30.0, multiplier=2.0, jitter=0.0)
    rng = random.Random(0)
    assert [policy.backoff(n, rng) for n in range(1, 9)] == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0]
    assert policy.backoff(0, rng) == 1.0 and policy.backoff(-3, rng) == 1.0


def test_backoff_with_jitter_matches_the_seeded_draws():
    policy = RetryPolicy(initial_backoff=2.0, max_backoff=20.0, multiplier=3.0, jitter=0.5)
    assert policy.backoff(1, random.Random(SEED)) == 2.0 * 0.5 + 2.0 * 0.5 * random.Random(SEED).random()
    rng, twin = random.Random(SEED), random.Random(SEED)
    got = [policy.backoff(n, rng) for n in range(1, 7)]
    bases = [2.0, 6.0, 18.0, 20.0, 20.0, 20.0]
    assert got == [b * 0.5 + b * 0.5 * twin.random() for b in bases]
    for value, base in zip(got, bases, strict=True):
        assert base * 0.5 <= value <= base
    assert len(set(got[3:])) == 3        # capped, yet still spread by jitter


def test_backoff_jitter_bounds_over_many_draws():
    policy = RetryPolicy(initial_backoff=1.0, max_backoff=8.0, jitter=1.0)
    rng = random.Random(7)
    for attempt in range(1, 12):
        base = min(8.0, 2.0 ** (attempt - 1))
        for _x1 in range(50):
            assert 0.0 <= policy.backoff(attempt, rng) <= base


def test_backoff_is_reproducible_with_the_same_seed_and_defaults_are_sane():
    policy = RetryPolicy()
    assert (policy.max_attempts, policy.initial_backoff, policy.max_backoff, policy.multiplier, policy.jitter) == (
        5, 1.0, 30.0, 2.0, 0.5)
    a = [policy.backoff(n, random.Random(99)) for n in range(1, 10)]
    b = [policy.backoff(n, random.Random(99)) for n in range(1, 10)]
    assert a == b
    assert max(a) <= 30.0


# -- polls and time in state -----------------------------------------------------------------------

def test_polls_consume_no_retry_budget(journal, clock):
    machine = ScriptedMachine({"A": [Poll(1, "waiting")] * 10 + [Retry("blip"), Next({"kind": "Done"})]},
                              policy=RetryPolicy(max_attempts=2))
    sleeper = Sleeper(clock)
    outcome = executor(journal, machine, clock).run(KEY, scripted_initial(), wait_poll=sleeper)
    assert outcome.state == {"kind": "Done"}
    assert machine.exhausted == []
    assert [a for _x1, _x2, a in machine.seen] == [0] * 11 + [1]
    assert sleeper.waits[:10] == [1] * 10


def test_many_polls_with_a_budget_of_one(journal, clock):
    machine = ScriptedMachine({"A": [Poll(30, "slow")] * 50 + [Next({"kind": "Done"})]},
                              policy=RetryPolicy(max_attempts=1))
    outcome = executor(journal, machine, clock).run(KEY, scripted_initial(), wait_poll=Sleeper(clock))
    assert outcome.state == {"kind": "Done"} and machine.exhausted == []


def test_in_state_grows_with_the_injected_clock(journal, clock):
    machine = ScriptedMachine({"Booting": deadline_poller(deadline=100, ready_after=30, interval=10)})
    sleeper = Sleeper(clock)
    outcome = executor(journal, machine, clock).run(KEY, scripted_initial("Booting"), wait_poll=sleeper)
    assert outcome.state == {"kind": "Done"}
    assert [s for _x1, s, _x2 in machine.seen] == [0, 10, 20, 30]
    assert sleeper.waits == [10, 10, 10]
    assert transitions(journal) == [("Booting", "Done", "ready after 30 s")]


def test_a_poll_deadline_via_in_state_times_out(journal, clock):
    machine = ScriptedMachine({"Booting": deadline_poller(deadline=25, ready_after=None, interval=10)},
                              policy=RetryPolicy(max_attempts=1))
    outcome = executor(journal, machine, clock).run(KEY, scripted_initial("Booting"), wait_poll=Sleeper(clock))
    assert outcome.state == {"kind": "TimedOut"}
    assert [s for _x1, s, _x2 in machine.seen] == [0, 10, 20, 30]
    assert [e for e in journal.events(KEY) if e["event"] == "retry"] == []


def test_in_state_restarts_at_each_transition(journal, clock):
    machine = ScriptedMachine({
        "A": [Poll(5), Poll(5), Next({"kind": "B"})],
        "B": [Poll(7), Next({"kind": "Done"})],
    })
    executor(journal, machine, clock).run(KEY, scripted_initial(), wait_poll=Sleeper(clock))
    assert [(k, s) for k, s, _x1 in machine.seen] == [("A", 0), ("A", 5), ("A", 10), ("B", 0), ("B", 7)]


def test_time_elsewhere_does_not_count_but_time_in_a_step_does(journal, clock):
    def slow_step(state, cx):
        clock.advance(4)      # a slow cloud call
        return Next({"kind": "B"})

    machine = ScriptedMachine({"A": [slow_step], "B": [Poll(1), Next({"kind": "Done"})]})
    clock.advance(500)        # before the run
    executor(journal, machine, clock).run(KEY, scripted_initial(), wait_poll=Sleeper(clock))
    assert [(k, s) for k, s, _x1 in machine.seen] == [("A", 0), ("B", 0), ("B", 1)]


def test_a_resume_gets_a_fresh_but_bounded_window(journals, clock):
    first = journals()

    def crash_at_20(state, cx):
        if cx.in_state >= 20:
            raise Crash("killed while waiting")
        return Poll(10, "waiting")

    with pytest.raises(Crash):
        executor(first, ScriptedMachine({"Booting": crash_at_20}), clock).run(
            KEY, scripted_initial("Booting"), wait_poll=Sleeper(clock))
    clock.advance(1000)    # however long the controller was down
    machine = ScriptedMachine({"Booting": deadline_poller(deadline=25, ready_after=None, interval=10)})
    outcome = executor(journals(), machine, clock).run(
        KEY, scripted_initial("Booting"), wait_poll=Sleeper(clock))
    assert outcome.resumed and outcome.state == {"kind": "TimedOut"}
    assert [s for _x1, s, _x2 in machine.seen] == [0, 10, 20, 30]


def test_poll_notes_are_journalled_once_per_distinct_note(journal, clock):
    machine = ScriptedMachine({"A": [Poll(1, "pending"), Poll(1, "pending"), Poll(1, "pending"),
                                     Poll(1, "running"), Poll(1, "running"), Poll(1, ""), Poll(1, "pending"),
                                     Next({"kind": "Done"})]})
    emitted = []
    executor(journal, machine, clock, on_event=lambda k, d: emitted.append((k, d))).run(
        KEY, scripted_initial(), wait_poll=Sleeper(clock))
    polls = [e for e in journal.events(KEY) if e["event"] == "poll"]
    assert [(e["note"], e["from"], e["to"], e["version"]) for e in polls] == [
        ("pending", "A", "A", 1), ("running", "A", "A", 1), ("pending", "A", "A", 1)]
    assert journal.load(KEY).version == 2     # polls never bump the version
    assert [d["note"] for k, d in emitted if k == "poll"] == [
        "pending", "pending", "pending", "running", "running", "", "pending"]


def test_without_wait_poll_the_cancel_tokens_wait_is_used(journal, clock):
    token = FakeWaitToken(clock)
    machine = ScriptedMachine({"A": [Poll(3, "a"), Retry("r"), Poll(2, "b"), Next({"kind": "Done"})]},
                              policy=RetryPolicy(max_attempts=5, initial_backoff=1.0, jitter=0.0))
    executor(journal, machine, clock, cancel=token).run(KEY, scripted_initial())
    # Waits run in slices of at most CANCEL_CHECK_S, checking the journal for a cancel between them.
    assert token.waits == [1.0] * 6
    assert [s for _x1, s, _x2 in machine.seen] == [0, 3, 4, 6]


def test_a_cancel_asked_through_the_journal_ends_a_wait_within_one_slice(journal, clock):
    class CancellableMachine(ScriptedMachine):
        def on_cancel(self, state):
            return {"kind": "Cancelled"}

    class AskingToken(FakeWaitToken):
        def wait(self, seconds):
            if len(self.waits) == 2:
                assert journal.request_cancel(KEY, ex.owner, "cancelled: down requested by test")
            return super().wait(seconds)

    token = AskingToken(clock)
    ex = executor(journal, CancellableMachine({"A": [Poll(600, "long wait")]}), clock, cancel=token)
    outcome = ex.run(KEY, scripted_initial())

    assert outcome.state == {"kind": "Cancelled"} and outcome.cancelled
    assert token.waits == [1.0, 1.0, 1.0]   # asked during the third slice: it ends with that slice
    assert journal.events(KEY)[-1]["note"] == "cancelled: down requested by test"


# -- cancellation ---------------------------------------------------------------------------------

def test_cancel_requested_before_the_run_maps_the_first_state(journal, clock):
    world = ToyWorld()
    machine = ToyMachine(world)
    token = CancelToken(clock)
    token.request()
    outcome = executor(journal, machine, clock, cancel=token).run(KEY, toy_initial)
    assert outcome.cancelled is True
    assert outcome.state == {"kind": "Cancelled", "handles": [], "from": "A"}
    assert world.steps == {"Compensating": 1}      # A's step never ran
    assert machine.cancel_calls == ["A"]
    assert transitions(journal) == [("ToyA", "ToyCompensating", "cancelled by interrupt"),
                                    ("ToyCompensating", "ToyCancelled", "compensated")]
    assert journal.load(KEY).terminal


def test_cancel_between_steps_finishes_the_in_flight_step_then_compensates(journal, clock):
    world = ToyWorld()
    token = CancelToken(clock)

    def signal_arrives_mid_call(state, cx):
        token.request()          # Ctrl-C during A's cloud call: the call is not dropped
        assert cx.cancelled
        return None

    machine = ToyMachine(world, hooks={"A": signal_arrives_mid_call})
    emitted = []
    outcome = executor(journal, machine, clock, cancel=token, on_event=lambda k, d: emitted.append(k)).run(
        KEY, toy_initial)
    assert world.created == {"res-A": 1}           # A's effect completed and its handle was journalled
    assert world.deleted == {"res-A": 1}           # and the compensation removed it
    assert "B" not in world.steps
    assert machine.cancel_calls == ["B"]
    assert transitions(journal) == [("ToyA", "ToyB", "A made res-A"),
                                    ("ToyB", "ToyCompensating", "cancelled by interrupt"),
                                    ("ToyCompensating", "ToyCancelled", "compensated")]
    assert outcome.state["kind"] == "Cancelled" and outcome.cancelled and outcome.transitions == 3
    assert "cancel" in emitted


def test_cancel_during_a_poll_wait_is_mapped_at_the_next_boundary(journal, clock):
    token = CancelToken(clock)
    world = ToyWorld()
    polls = iter([Poll(30, "waiting")] * 5)
    machine = ToyMachine(world, hooks={"B": lambda state, cx: next(polls)})
    sleeper = Sleeper(clock, cancel=token, on_wait=lambda n, s: token.request() if n == 2 else None)
    outcome = executor(journal, machine, clock, cancel=token).run(KEY, toy_initial, wait_poll=sleeper)
    assert world.steps["B"] == 2
    assert outcome.state["kind"] == "Cancelled" and world.deleted == {"res-A": 1}
    assert ("ToyB", "ToyCompensating", "cancelled by interrupt") in transitions(journal)


def test_on_cancel_returning_none_keeps_going_to_the_terminal_state(journal, clock):
    world = ToyWorld()
    token = CancelToken(clock)
    token.request()
    machine = ToyMachine(world, cancel_map={})    # every state: None
    outcome = executor(journal, machine, clock, cancel=token).run(KEY, toy_initial)
    assert outcome.state["kind"] == "Done" and outcome.cancelled is True
    assert world.created == {"res-A": 1, "res-B": 1, "res-C": 1}
    assert machine.cancel_calls == ["A"]
    assert all(note != "cancelled by interrupt" for _x1, _x2, note in transitions(journal))


def test_on_cancel_returning_the_same_state_keeps_going(journal, clock):
    world = ToyWorld()
    token = CancelToken(clock)
    token.request()
    machine = ToyMachine(world, cancel_map={"A": {"kind": "A", "handles": []}})
    outcome = executor(journal, machine, clock, cancel=token).run(KEY, toy_initial)
    assert outcome.state["kind"] == "Done"
    assert len(transitions(journal)) == 3


def test_a_cancel_mapping_is_durable_and_resumes_as_compensation(journals, clock):
    world = ToyWorld()
    token = CancelToken(clock)

    def die_in_compensation(state, cx):
        raise Crash("killed during compensation")

    first = journals()
    with pytest.raises(Crash):
        executor(first, ToyMachine(world, hooks={"A": lambda s, cx: token.request(),
                                                 "Compensating": die_in_compensation}),
                 clock, cancel=token).run(KEY, toy_initial)
    assert first.load(KEY).state == {"kind": "Compensating", "handles": ["res-A"], "from": "B"}
    outcome = executor(journals(), ToyMachine(world), clock).run(KEY, toy_initial)
    assert outcome.resumed and outcome.state["kind"] == "Cancelled"
    assert world.resources == {} and world.deleted == {"res-A": 1}


def test_handle_first_signal_requests_a_burst_counts_once_a_later_one_hard_cancels():
    clock = FakeClock(50.0)
    token = CancelToken(clock)
    assert not token.requested
    token._handle(signal.SIGINT, None)
    assert token.requested and token.first_at == 50.0
    clock.advance(0.5)
    token._handle(signal.SIGTERM, None)     # Ansible's SIGINT+SIGTERM burst: still one request
    clock.advance(CancelToken.BURST_S - 0.5)
    token._handle(signal.SIGTERM, None)     # exactly at the window's edge: still the burst
    assert token.first_at == 50.0
    clock.advance(0.01)
    with pytest.raises(HardCancel) as info:
        token._handle(signal.SIGINT, None)
    assert "resumable" in str(info.value) and "signal %d" % signal.SIGINT in str(info.value)
    assert not issubclass(HardCancel, Exception)   # no `except Exception` in a step swallows it


def test_wait_returns_early_once_cancelled():
    token = CancelToken(FakeClock())
    assert token.wait(0) is False
    assert token.wait(-5) is False
    token.request()
    assert token.wait(3600) is True     # returns at once; no sleep


def test_install_routes_sigint_and_sigterm_and_uninstall_restores():
    assert threading.current_thread() is threading.main_thread()
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    token = CancelToken(FakeClock())
    token.install()
    try:
        for sig in (signal.SIGINT, signal.SIGTERM):
            assert signal.getsignal(sig) == token._handle
        os.kill(os.getpid(), signal.SIGTERM)
        for _x1 in range(1000):        # the Python-level handler runs at the next bytecode boundary
            if token.requested:
                break
            time.sleep(0.001)
        assert token.requested
    finally:
        token.uninstall()
    assert {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)} == before


def test_install_off_the_main_thread_is_a_no_op():
    before = signal.getsignal(signal.SIGINT)
    token = CancelToken(FakeClock())
    errors = []

    def body():
        try:
            token.install()
        except Exception as exc:   # pragma: no cover - the assertion below reports it
            errors.append(exc)
    t = threading.Thread(target=body)
    t.start()
    t.join()
    assert errors == [] and token._saved == {}
    assert signal.getsignal(signal.SIGINT) == before


def test_a_second_signal_mid_step_hard_cancels_leaving_the_journal_resumable(journals, clock):
    """Real signals through an installed token: Ctrl-C in A (compensation mapped), then
    a second Ctrl-C after the burst window, during the compensating step's cloud call."""
    world = ToyWorld()
    token = CancelToken(clock)
    shots = {"comp": 0}

    def first_ctrl_c(state, cx):
        os.kill(os.getpid(), signal.SIGINT)
        return None

    def second_ctrl_c(state, cx):
        shots["comp"] += 1
        clock.advance(CancelToken.BURST_S + 1)
        os.kill(os.getpid(), signal.SIGINT)
        for _x1 in range(1000):     # the handler raises HardCancel here, mid "cloud call"
            time.sleep(0.001)
        pytest.fail("the second signal did not hard-cancel")

    first = journals()
    token.install()
    try:
        with pytest.raises(HardCancel):
            executor(first, ToyMachine(world, hooks={"A": first_ctrl_c, "Compensating": second_ctrl_c}),
                     clock, cancel=token).run(KEY, toy_initial)
    finally:
        token.uninstall()
    assert shots["comp"] == 1
    row = first.load(KEY)
    assert row.terminal is False and row.state["kind"] == "Compensating"
    assert row.lease_owner is None or row.lease_expires is not None
    # resumable: a later run finishes the compensation
    outcome = executor(journals(), ToyMachine(world), clock).run(KEY, toy_initial)
    assert outcome.resumed and outcome.state["kind"] == "Cancelled"
    assert world.deleted == {"res-A": 1} and world.resources == {}


def test_hard_cancel_is_never_turned_into_a_retry(journal, clock):
    machine = ScriptedMachine({"A": [HardCancel("second interrupt")]})
    with pytest.raises(HardCancel):
        executor(journal, machine, clock).run(KEY, scripted_initial())
    row = journal.load(KEY)
    assert (row.state, row.terminal, row.lease_owner) == ({"kind": "A"}, False, None)
    assert [e for e in journal.events(KEY) if e["event"] == "retry"] == []


def test_waits_after_a_mapped_cancel_still_honour_their_delays(journal, clock, monkeypatch):
    # Real CancelToken; only the sleeping primitives are faked (they move the fake
    # clock), so this holds whichever of them a fix uses.
    def fake_event_wait(event, timeout=None):
        if event.is_set():
            return True
        clock.advance(timeout or 0.0)
        return False

    monkeypatch.setattr(threading.Event, "wait", fake_event_wait)
    monkeypatch.setattr(time, "sleep", clock.advance)
    token = CancelToken(clock)
    polls = iter([Poll(10, "deleting")] * 3 + [Retry("throttled")])

    def compensating(state, cx):
        return next(polls, Next({"kind": "Cancelled", "handles": []}))

    world = ToyWorld()
    machine = ToyMachine(world, hooks={"A": lambda s, cx: token.request(), "Compensating": compensating},
                         policy=RetryPolicy(max_attempts=3, initial_backoff=5.0, jitter=0.0))
    start = clock.now
    outcome = executor(journal, machine, clock, cancel=token).run(KEY, toy_initial)
    assert outcome.state["kind"] == "Cancelled"
    # three 10 s polls and one 5 s backoff must elapse, not spin
    assert clock.now - start >= 35


def test_cancel_is_consulted_once_per_run(journal, clock):
    """Documented behaviour: on_cancel is asked once, at the first boundary after the
    request; a None there means the machine runs on without asking again."""
    world = ToyWorld()
    token = CancelToken(clock)
    token.request()
    machine = ToyMachine(world, cancel_map={"A": None, "B": {"kind": "Compensating", "handles": ["res-A"]}})
    outcome = executor(journal, machine, clock, cancel=token).run(KEY, toy_initial)
    assert machine.cancel_calls == ["A"]
    assert outcome.state["kind"] == "Done"


# -- version guard -----------------------------------------------------------------------------------

def test_a_stale_run_whose_version_moved_conflicts_and_changes_nothing(journals, jpath, clock):
    journal, other = journals(), journals()
    snapshot = {}

    def someone_else_writes(state, cx):
        owner = cx._executor.owner
        other.transition(KEY, owner, 1, {"kind": "X", "handles": []}, "ToyX", False, "ToyA", "interloper")
        snapshot["row"], snapshot["events"] = row_of(jpath), events_of(jpath)
        return None

    world = ToyWorld()
    with pytest.raises(Conflict) as info:
        executor(journal, ToyMachine(world, hooks={"A": someone_else_writes}), clock).run(KEY, toy_initial)
    assert "version 1" in str(info.value)
    row = row_of(jpath)
    assert row[:5] == snapshot["row"][:5]            # state/version untouched by the stale run
    assert events_of(jpath) == snapshot["events"]
    assert world.steps == {"A": 1}


# -- leases and fencing -------------------------------------------------------------------------------

def test_a_second_run_on_a_held_key_raises_lease_held(journals, jpath, clock):
    journal, other = journals(), journals()
    refused = []
    world = ToyWorld()
    world2 = ToyWorld()

    def start_a_second_run(state, cx):
        with pytest.raises(LeaseHeld) as info:
            executor(other, ToyMachine(world2), clock, owner="job-2").run(KEY, toy_initial)
        refused.append(str(info.value))
        return None

    outcome = executor(journal, ToyMachine(world, hooks={"B": start_a_second_run}), clock, owner="job-1",
                       lease_ttl=120.0).run(KEY, toy_initial)
    assert outcome.state["kind"] == "Done"
    assert len(refused) == 1
    msg = refused[0]
    assert KEY in msg and "job-1" in msg and "another run" in msg and "120 s" in msg
    assert world2.steps == {}
    assert all(e["owner"] == "job-1" for e in journal.events(KEY))
    # once the first run is over, the key is free again
    again = executor(other, ToyMachine(world2), clock, owner="job-2").run(KEY, toy_initial)
    assert again.state["kind"] == "Done" and not again.resumed


def test_lease_taken_over_mid_step_makes_the_fence_raise_before_the_external_call(journals, jpath, clock):
    journal, thief = journals(), journals()
    snapshot = {}

    def lease_expires_and_is_taken(state, cx):
        clock.advance(61)
        thief.acquire(KEY, "thief", 60.0)
        snapshot["row"], snapshot["events"] = row_of(jpath), events_of(jpath)
        return None      # the toy step goes on to cx.fence() before creating res-B

    world = ToyWorld()
    with pytest.raises(LeaseLost) as info:
        executor(journal, ToyMachine(world, hooks={"B": lease_expires_and_is_taken}), clock,
                 lease_ttl=60.0).run(KEY, toy_initial)
    assert KEY in str(info.value) and "taken over" in str(info.value)
    assert "res-B" not in world.resources and world.created == {"res-A": 1}
    assert row_of(jpath) == snapshot["row"]          # lease still the thief's, state B v2
    assert snapshot["row"][4:6] == (2, "thief")
    assert events_of(jpath) == snapshot["events"]


def test_lease_stolen_by_a_direct_update_stops_the_run_before_the_next_step(journals, jpath, clock):
    journal = journals()
    steps = []

    def steal(state, cx):
        steps.append(state["kind"])
        db = sqlite3.connect(jpath)
        db.execute("UPDATE machines SET lease_owner = 'other-controller' WHERE key = ?", (KEY,))
        db.commit()
        db.close()
        return Poll(5)        # no note: nothing to write before the next boundary

    machine = ScriptedMachine({"A": steal})
    before = {}
    sleeper = Sleeper(clock, on_wait=lambda n, s: before.update(row=row_of(jpath), events=events_of(jpath)))
    with pytest.raises(LeaseLost):
        executor(journal, machine, clock).run(KEY, scripted_initial(), wait_poll=sleeper)
    assert steps == ["A"]     # the next step never ran
    assert row_of(jpath) == before["row"] and events_of(jpath) == before["events"]
    assert row_of(jpath)[5] == "other-controller"


def test_a_next_after_the_lease_was_lost_is_refused(journals, jpath, clock):
    journal, thief = journals(), journals()
    snapshot = {}

    def steal_then_next(state, cx):
        clock.advance(61)
        thief.acquire(KEY, "thief", 60.0)
        snapshot["row"], snapshot["events"] = row_of(jpath), events_of(jpath)
        return Next({"kind": "B", "handles": ["res-A"]})

    world = ToyWorld()
    with pytest.raises((LeaseLost, Conflict)):
        executor(journal, ToyMachine(world, hooks={"A": steal_then_next}), clock, lease_ttl=60.0).run(
            KEY, toy_initial)
    assert row_of(jpath) == snapshot["row"] and events_of(jpath) == snapshot["events"]
    assert "B" not in world.steps


@pytest.mark.parametrize("result", [pytest.param(Poll(5, "still booting"), id="poll-note"),
                                    pytest.param(Retry("throttled"), id="retry-note")])
def test_a_run_that_lost_its_lease_writes_nothing_more(journals, jpath, clock, result):
    journal, thief = journals(), journals()
    snapshot = {}

    def steal(state, cx):
        clock.advance(61)
        thief.acquire(KEY, "thief", 60.0)
        snapshot["row"], snapshot["events"] = row_of(jpath), events_of(jpath)
        return result

    with pytest.raises((LeaseLost, Conflict)):
        executor(journal, ScriptedMachine({"A": steal}), clock, lease_ttl=60.0).run(
            KEY, scripted_initial(), wait_poll=Sleeper(clock))
    assert row_of(jpath) == snapshot["row"]
    assert events_of(jpath) == snapshot["events"]


def test_the_lease_is_released_after_every_kind_of_ending(journal, clock):
    executor(journal, ToyMachine(ToyWorld()), clock).run("ok", toy_initial)
    with pytest.raises(Crash):
        executor(journal, ToyMachine(ToyWorld(), crash=("B", "after")), clock).run("crash", toy_initial)
    with pytest.raises(TypeError):
        executor(journal, ScriptedMachine({"A": [object()]}), clock).run("bad", scripted_initial())
    for key in ("ok", "crash", "bad"):
        row = journal.load(key)
        assert (row.lease_owner, row.lease_expires) == (None, None), key


def test_a_failing_initial_does_not_leave_the_key_leased(journal, clock):
    executor(journal, ToyMachine(ToyWorld()), clock).run(KEY, toy_initial)   # a terminal row exists

    def bad_initial(prev, prev_kind):
        raise ValueError("invalid parameters")

    with pytest.raises(ValueError):
        executor(journal, ToyMachine(ToyWorld()), clock, owner="failed-run").run(KEY, bad_initial)
    outcome = executor(journal, ToyMachine(ToyWorld()), clock, owner="next-run").run(KEY, toy_initial)
    assert outcome.state["kind"] == "Done"


def test_the_heartbeat_renews_the_lease_during_a_long_step(tmp_path):
    path = str(tmp_path / "hb.sqlite")
    journal = Journal(path)             # real time: the heartbeat's own connection uses it too
    try:
        def long_step(state, cx):
            first = journal.load(KEY).lease_expires
            wait_for(lambda: journal.load(KEY).lease_expires > first, "the heartbeat to renew the lease", step_s=0.001)
            assert journal.holds(KEY, cx._executor.owner)
            return Next({"kind": "Done"})

        outcome = Executor(journal, ScriptedMachine({"A": [long_step]}), lease_ttl=0.06).run(
            KEY, scripted_initial())
        assert outcome.state == {"kind": "Done"}
        assert journal.load(KEY).lease_owner is None
    finally:
        journal.close()


def test_a_heartbeat_that_lost_the_lease_makes_the_fence_raise(tmp_path):
    path = str(tmp_path / "hb.sqlite")
    journal = Journal(path)
    try:
        def step(state, cx):
            ex = cx._executor
            journal._db.execute("UPDATE machines SET lease_owner = 'thief' WHERE key = ?", (KEY,))
            wait_for(lambda: ex._heartbeat.lost, "the heartbeat to see the lease lost", step_s=0.001)
            # even if the row said ours again, a heartbeat that lost it stops the run
            journal._db.execute("UPDATE machines SET lease_owner = ? WHERE key = ?", (ex.owner, KEY))
            cx.fence()
            pytest.fail("fence did not raise")

        with pytest.raises(LeaseLost):
            Executor(journal, ScriptedMachine({"A": step}), lease_ttl=0.06).run(KEY, scripted_initial())
    finally:
        journal.close()


# -- events and hooks ------------------------------------------------------------------------------

def test_on_event_reports_the_run_and_a_broken_printer_never_stops_it(journal, clock):
    kinds = []

    def printer(kind, data):
        kinds.append(kind)
        raise RuntimeError("broken terminal")

    machine = ScriptedMachine({"A": [Poll(1, "p"), Retry("r"), Next({"kind": "Done"})]})
    outcome = executor(journal, machine, clock, on_event=printer).run(
        KEY, scripted_initial(), wait_poll=Sleeper(clock))
    assert outcome.state == {"kind": "Done"}
    assert kinds == ["begin", "poll", "retry", "transition"]


def test_resume_is_reported_and_journalled(journals, clock):
    with pytest.raises(Crash):
        executor(journals(), ToyMachine(ToyWorld(), crash=("A", "after")), clock).run(KEY, toy_initial)
    emitted = []
    ex = executor(journals(), ToyMachine(ToyWorld()), clock, owner="r2",
                  on_event=lambda k, d: emitted.append((k, d.get("label"))))
    ex.run(KEY, toy_initial)
    assert emitted[0] == ("resume", "ToyA")


def test_before_commit_is_called_for_every_committed_transition(journal, clock):
    token = CancelToken(clock)
    calls = []
    machine = ScriptedMachine({"A": [Retry("x")], "B": [Next({"kind": "C"})],
                               "C": [lambda s, cx: token.request() or Poll(1)], "Comp": [Next({"kind": "Done"})]},
                              policy=RetryPolicy(max_attempts=1),
                              exhausted_to=lambda s, e: {"kind": "B"})
    machine.on_cancel = lambda state: {"kind": "Comp"} if state["kind"] == "C" else None
    executor(journal, machine, clock, cancel=token,
             before_commit=lambda old, new: calls.append((old["kind"], new["kind"]))).run(
        KEY, scripted_initial(), wait_poll=Sleeper(clock, cancel=token))
    assert [(f, t) for f, t, _x1 in transitions(journal)] == [("A", "B"), ("B", "C"), ("C", "Comp"), ("Comp", "Done")]
    assert calls == [("A", "B"), ("B", "C"), ("C", "Comp"), ("Comp", "Done")]


def test_machine_base_defaults():
    m = Machine()
    assert m.label({"kind": "X"}) == "X"
    assert m.on_cancel({"kind": "X"}) is None
    assert m.retry_policy({"kind": "X"}) == RetryPolicy()
    for call in (lambda: m.is_terminal({}), lambda: m.step({}, None), lambda: m.on_retries_exhausted({}, "e")):
        with pytest.raises(NotImplementedError):
            call()
