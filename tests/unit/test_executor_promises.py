"""The executor's smaller promises, each pinned by value: what every progress event carries,
the heartbeat's beat and its endings, the lease a run takes by default, the readiness-poll
schedule, the cap on a server-requested delay, the burst window of a Ctrl-C, and the run's
transition count. Time is a FakeClock; the heartbeat is driven beat by beat through a
scripted stop event, so nothing sleeps."""

from __future__ import annotations

import random
import signal

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.machine import executor as executor_module
from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.executor import (
    MAX_RETRY_AFTER_S, POLL_LATENESS, CancelToken, Executor, HardCancel, Next, Poll, Retry, poll_delay,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journal_sql import JournalError
from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.retry import RetryPolicy
from ansible_collections.gpuprov.cloud.tests.fakes.toy_machine import FakeClock, ScriptedMachine

KEY = "vm1"


def start_at(kind):
    return lambda prev, prev_kind: {"kind": kind}


class Waits:
    """An injected wait that records each delay and moves the fake clock by it."""

    def __init__(self, clock):
        self.clock, self.delays = clock, []

    def __call__(self, seconds):
        self.delays.append(seconds)
        self.clock.advance(seconds)


# -- progress events --------------------------------------------------------------------------------

def test_every_progress_event_carries_what_the_printer_shows(journal, clock):
    events = []
    machine = ScriptedMachine({"A": [Poll(7, "booting"), Retry("HTTP 503", after=None), Next({"kind": "Done"}, "up")]},
                              policy=RetryPolicy(max_attempts=3, initial_backoff=2.0, max_backoff=30.0, jitter=0.0))
    waits = Waits(clock)
    outcome = Executor(journal, machine, clock=clock, heartbeat=False, rng=random.Random(1),
                       on_event=lambda kind, data: events.append((kind, data))).run(KEY, start_at("A"), wait_poll=waits)
    assert outcome.state == {"kind": "Done"} and outcome.transitions == 1 and not outcome.resumed
    assert events == [
        ("begin", {"label": "A"}),
        ("poll", {"label": "A", "note": "booting", "in_state": 0.0}),
        ("retry", {"label": "A", "error": "HTTP 503", "attempt": 1, "max_attempts": 3, "delay": 2.0}),
        ("transition", {"frm": "A", "to": "Done", "note": "up", "state": {"kind": "Done"}}),
    ]
    assert waits.delays == [7, 2.0]


def test_a_cancel_event_names_the_state_and_the_reason_asked_through_the_journal(journals, clock):
    journal = journals()
    events = []

    def ask_down(state, cx):
        journals().request_cancel(KEY, cx.owner, "down asked by run-2")
        return Poll(1, "waiting")

    machine = ScriptedMachine({"A": [ask_down], "Comp": [Next({"kind": "Cancelled"})]})
    machine.on_cancel = lambda state: {"kind": "Comp"} if state["kind"] == "A" else None
    ex = Executor(journal, machine, clock=clock, heartbeat=False, rng=random.Random(1),
                  on_event=lambda kind, data: events.append((kind, data)))
    outcome = ex.run(KEY, start_at("A"), wait_poll=Waits(clock))
    assert outcome.cancelled and outcome.state == {"kind": "Cancelled"} and outcome.transitions == 2
    assert ("cancel", {"label": "A", "reason": "down asked by run-2"}) in events
    assert [kind for kind, _data in events] == ["begin", "poll", "cancel", "transition", "transition"]
    assert events[3] == ("transition", {"frm": "A", "to": "Comp", "note": "down asked by run-2",
                                        "state": {"kind": "Comp"}})


def test_a_retry_event_reports_the_delay_actually_waited(journal, clock):
    events = []
    machine = ScriptedMachine({"A": [Retry("429", after=45.0), Next({"kind": "Done"})]},
                              policy=RetryPolicy(max_attempts=5, initial_backoff=1.0, max_backoff=30.0, jitter=0.0))
    waits = Waits(clock)
    Executor(journal, machine, clock=clock, heartbeat=False, rng=random.Random(1),
             on_event=lambda kind, data: events.append((kind, data))).run(KEY, start_at("A"), wait_poll=waits)
    retry = [data for kind, data in events if kind == "retry"]
    assert retry == [{"label": "A", "error": "429", "attempt": 1, "max_attempts": 5, "delay": 45.0}]
    assert waits.delays == [45.0]


# -- the transition count -------------------------------------------------------------------------

def test_the_outcome_counts_every_committed_transition_and_nothing_else(journal, clock):
    machine = ScriptedMachine({"A": [Poll(1), Retry("x"), Next({"kind": "B"})],
                               "B": [Retry("y")], "C": [Next({"kind": "Done"})]},
                              policy=RetryPolicy(max_attempts=1), policies={"A": RetryPolicy(max_attempts=3)},
                              exhausted_to=lambda s, e: {"kind": "C"})
    outcome = Executor(journal, machine, clock=clock, heartbeat=False, rng=random.Random(1)).run(
        KEY, start_at("A"), wait_poll=Waits(clock))
    # A -> B (Next), B -> C (exhausted), C -> Done: a poll and a retry in A are no transitions
    assert outcome.transitions == 3 and outcome.state == {"kind": "Done"}


# -- the readiness-poll schedule and the cap on Retry-After ---------------------------------------

@pytest.mark.parametrize("in_state, expected", [
    (0.0, 1.0),          # the start: the poll's first delay
    (10.0, 1.0),         # 4% of 10 s is 0.4 s: still the first delay
    (500.0, 20.0),       # 4% of the time already spent
    (1000.0, 40.0),
    (5000.0, 60.0),      # never longer than the cloud's rate-limit-safe interval
])
def test_a_readiness_poll_waits_four_percent_of_the_time_in_state_between_first_and_after(in_state, expected):
    assert POLL_LATENESS == 0.04
    assert poll_delay(Poll(60.0, first=1.0), in_state) == pytest.approx(expected)


def test_a_poll_without_first_waits_its_interval():
    assert poll_delay(Poll(15.0), 10_000.0) == 15.0


def test_a_server_requested_delay_is_capped_at_five_minutes(journal, clock):
    assert MAX_RETRY_AFTER_S == 300.0
    machine = ScriptedMachine({"A": [Retry("429", after=86_400), Retry("429", after=299.5), Next({"kind": "Done"})]},
                              policy=RetryPolicy(max_attempts=5, initial_backoff=1.0, max_backoff=30.0, jitter=0.0))
    waits = Waits(clock)
    Executor(journal, machine, clock=clock, heartbeat=False, rng=random.Random(1)).run(
        KEY, start_at("A"), wait_poll=waits)
    assert waits.delays == [300.0, 299.5]


# -- the lease a run takes ------------------------------------------------------------------------

def test_a_run_leases_its_key_for_two_minutes_unless_told_otherwise(journal, clock):
    seen = []

    def look(state, cx):
        row = cx.journal.load(KEY)
        seen.append((row.lease_owner, row.lease_expires))
        return Next({"kind": "Done"})

    ex = Executor(journal, ScriptedMachine({"A": [look]}), clock=clock, heartbeat=False)
    ex.run(KEY, start_at("A"))
    assert seen == [(ex.owner, clock() + 120.0)]


# -- the heartbeat, beat by beat ----------------------------------------------------------------------

class ScriptedStop:
    """The heartbeat's stop event: ``wait`` records its timeout and answers from a script
    (False: beat again; True: stopped)."""

    def __init__(self, answers):
        self.answers, self.timeouts = list(answers), []

    def wait(self, timeout):
        self.timeouts.append(timeout)
        return self.answers.pop(0)

    def set(self):
        self.answers = [True]


class RenewingJournal:
    """A journal connection of the heartbeat's own: ``renew`` answers from a script (True,
    False, or an exception to raise); records every call and whether it was closed."""

    def __init__(self, answers):
        self.answers, self.renewals, self.closed = list(answers), [], False

    def renew(self, key, owner, ttl):
        self.renewals.append((key, owner, ttl))
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def close(self):
        self.closed = True


def beat(answers, stops, ttl=90.0):
    journal = RenewingJournal(answers)
    heartbeat = executor_module._Heartbeat(lambda: journal, KEY, "run-1", ttl)
    heartbeat.stop_event = ScriptedStop(stops)
    heartbeat.run()
    return heartbeat, journal


def test_the_heartbeat_renews_every_third_of_the_ttl_until_stopped_then_closes_its_connection():
    heartbeat, journal = beat([True, True], [False, False, True], ttl=90.0)
    assert heartbeat.stop_event.timeouts == [30.0, 30.0, 30.0]
    assert journal.renewals == [(KEY, "run-1", 90.0)] * 2
    assert journal.closed and not heartbeat.lost


def test_a_heartbeat_whose_renewal_is_refused_marks_the_lease_lost_and_stops_beating():
    heartbeat, journal = beat([True, False], [False, False, False])
    assert heartbeat.lost and len(journal.renewals) == 2 and journal.closed
    assert heartbeat.stop_event.answers == [False]      # it stopped beating at the refusal


def test_a_heartbeat_keeps_beating_through_a_journal_outage():
    heartbeat, journal = beat([JournalError("server restarting"), True], [False, False, True])
    assert not heartbeat.lost and len(journal.renewals) == 2 and journal.closed


def test_a_heartbeat_that_cannot_open_its_connection_ends_without_a_beat():
    def unreachable():
        raise JournalError("no server")
    heartbeat = executor_module._Heartbeat(unreachable, KEY, "run-1", 90.0)
    heartbeat.stop_event = ScriptedStop([False])
    heartbeat.run()
    assert heartbeat.stop_event.timeouts == [30.0] and not heartbeat.lost   # it waited for its first beat only


def test_a_heartbeat_stopped_before_its_first_beat_never_opens_a_connection():
    """Most runs end within a third of the lease: their heartbeat costs no journal connection."""
    opened = []
    heartbeat = executor_module._Heartbeat(lambda: opened.append(1) or RenewingJournal([]), KEY, "run-1", 90.0)
    heartbeat.stop_event = ScriptedStop([True])
    heartbeat.run()
    assert opened == [] and heartbeat.stop_event.timeouts == [30.0] and not heartbeat.lost


def test_the_heartbeat_is_a_daemon_thread_so_it_never_keeps_a_finished_process_alive():
    heartbeat = executor_module._Heartbeat(lambda: RenewingJournal([]), KEY, "run-1", 90.0)
    assert heartbeat.daemon and heartbeat.name == "gpuprov-lease"


def test_a_run_stops_its_heartbeat_when_it_ends(journal, clock, monkeypatch):
    started = []

    class RecordingHeartbeat(executor_module._Heartbeat):
        def start(self):
            started.append(self)

    monkeypatch.setattr(executor_module, "_Heartbeat", RecordingHeartbeat)
    ex = Executor(journal, ScriptedMachine({"A": [Next({"kind": "Done"})]}), clock=clock, lease_ttl=60.0)
    ex.run(KEY, start_at("A"))
    [heartbeat] = started
    assert (heartbeat.key, heartbeat.owner, heartbeat.ttl) == (KEY, ex.owner, 60.0)
    assert heartbeat.stop_event.is_set() and ex._heartbeat is None


def test_a_run_told_not_to_beat_starts_no_heartbeat(journal, clock, monkeypatch):
    monkeypatch.setattr(executor_module, "_Heartbeat", None)   # building one would fail the run
    outcome = Executor(journal, ScriptedMachine({"A": [Next({"kind": "Done"})]}), clock=clock,
                       heartbeat=False).run(KEY, start_at("A"))
    assert outcome.state == {"kind": "Done"}


# -- the Ctrl-C burst window -----------------------------------------------------------------------

@pytest.mark.parametrize("later, hard", [(1.99, False), (2.0, False), (2.01, True), (30.0, True)])
def test_signals_within_two_seconds_of_the_first_are_one_request(later, hard):
    assert CancelToken.BURST_S == 2.0
    clock = FakeClock(10.0)
    token = CancelToken(clock)
    token._handle(signal.SIGINT, None)
    clock.advance(later)
    if hard:
        with pytest.raises(HardCancel):
            token._handle(signal.SIGTERM, None)
    else:
        token._handle(signal.SIGTERM, None)
        assert token.requested and token.first_at == 10.0


# -- waits shorter than a second are kept short ----------------------------------------------------

class RecordingEvent:
    """Stands in for threading.Event where a wait's timeout is what the test reads."""

    def __init__(self):
        self.timeouts, self.flag = [], False

    def wait(self, timeout=None):
        self.timeouts.append(timeout)
        return self.flag

    def is_set(self):
        return self.flag

    def set(self):
        self.flag = True


def test_a_cancel_tokens_wait_never_asks_for_a_negative_or_padded_timeout():
    token = CancelToken(FakeClock())
    token._event = RecordingEvent()
    token.wait(-5.0)
    token.wait(0.25)
    assert token._event.timeouts == [0.0, 0.25]


def test_a_wait_of_a_quarter_second_waits_a_quarter_second(journal, clock):
    class MovingToken(CancelToken):
        def __init__(self, clock):
            super().__init__(clock)
            self.waits = []

        def wait(self, seconds):
            self.waits.append(seconds)
            clock.advance(seconds)
            return False

    token = MovingToken(clock)
    ex = Executor(journal, ScriptedMachine({}), clock=clock, cancel=token, heartbeat=False)
    ex._cancellable_wait(KEY, 0.25)
    assert token.waits == [0.25]
    ex._cancellable_wait(KEY, 2.5)      # in slices of CANCEL_CHECK_S, so a journal cancel is seen
    assert token.waits == [0.25, 1.0, 1.0, 0.5]


def test_compensation_after_a_cancel_keeps_its_exact_pace(journal, clock, monkeypatch):
    token = CancelToken(clock)          # made before the patch: its own event is a real one
    calm = []

    class PacedEvent(RecordingEvent):
        def __init__(self):
            super().__init__()
            calm.append(self)

    monkeypatch.setattr(executor_module.threading, "Event", PacedEvent)

    def cancel_now(state, cx):
        token.request()
        return Poll(1)

    machine = ScriptedMachine({"A": [cancel_now], "Comp": [Retry("throttled"), Next({"kind": "Cancelled"})]},
                              policy=RetryPolicy(max_attempts=3, initial_backoff=0.5, jitter=0.0))
    machine.on_cancel = lambda state: {"kind": "Comp"} if state["kind"] == "A" else None
    waits = []
    monkeypatch.setattr(Executor, "_cancellable_wait", lambda self, key, seconds: waits.append(seconds))
    outcome = Executor(journal, machine, clock=clock, cancel=token, heartbeat=False).run(KEY, start_at("A"))
    assert outcome.state == {"kind": "Cancelled"}
    assert waits == [1]                          # the poll before the cancel: cancellable
    assert [event.timeouts for event in calm] == [[0.5]]   # the backoff after it: a plain wait, exactly 0.5 s


def test_uninstall_restores_the_handlers_once(monkeypatch):
    installed = {}
    monkeypatch.setattr(executor_module.signal, "signal",
                        lambda sig, handler: installed.setdefault(sig, []).append(handler) or "previous-%d" % sig)
    token = CancelToken(FakeClock())
    token.install()
    token.uninstall()
    token.uninstall()                            # nothing saved any more: restores nothing again
    assert installed == {signal.SIGINT: [token._handle, "previous-%d" % signal.SIGINT],
                         signal.SIGTERM: [token._handle, "previous-%d" % signal.SIGTERM]}
