# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The executor: runs a Machine to a terminal state, journalling every transition.

Invariants (the seed's 4.2):
  * Write-ahead: a transition is committed before the next step runs, so every
    handle a step produced is durable before any wait begins.
  * Steps are idempotent (they observe before they act); a crash between a side
    effect and its commit is recovered by re-running the step.
  * Consecutive Retry results are capped by the state's RetryPolicy, with
    exponential backoff and jitter; on exhaustion the machine names the next state.
  * Poll deadlines are the machine's, measured by ``cx.in_state``.
  * Cancellation only at step boundaries: a signal never interrupts a cloud call;
    ``on_cancel`` maps the state, and the machine runs on to a terminal state.
  * A run holds a lease on its key; a lost lease stops it before the next step,
    and every write is fenced by version and lease in the journal.
  * Another run (``down``) may ask the lease holder to stop through the journal
    (``JournalStore.request_cancel``): that is a cancellation like a signal, seen at the
    next step boundary and within about a second of any wait.
"""

from __future__ import annotations

import random
import signal
import threading
import time
from typing import Any, Callable, Dict, Generic, Optional, Sequence, Tuple, TypeVar, Union, cast

from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journal_sql import (
    Conflict, JournalError, JournalStore,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.owners import new_owner
from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.retry import RetryPolicy


# A machine's own state type: a JSON-able dict for a plain machine, a typed value for one that
# converts at the journal (Machine.load_state / dump_state).
S = TypeVar("S")


class Next(Generic[S]):
    """Transition to ``state``; committed before the next step runs. ``rows``: (sql, args)
    writes to the machine's own tables, committed atomically with the state."""

    __slots__ = ("state", "note", "rows")

    def __init__(self, state: S, note: str = "", rows: Sequence[Tuple[str, Sequence[Any]]] = ()):
        self.state = state
        self.note = note
        self.rows = rows


class Poll:
    """Not done yet: same state, no budget consumed, step again after ``after`` s.

    ``first``: this is a wait for readiness that may come at any moment (a boot, an SSH
    login); the executor then schedules it (``poll_delay``): ``first`` s at the start, growing
    with the time already spent in the state, up to ``after`` (the cloud's rate-limit-safe
    interval), so a readiness is seen at most about POLL_LATENESS of the wait late."""

    __slots__ = ("after", "note", "first")

    def __init__(self, after: float, note: str = "", first: Optional[float] = None):
        self.after = after
        self.note = note
        self.first = first


# A readiness poll waits this fraction of the time already spent in its state (between its
# ``first`` and ``after``): what it may be late by, relative to the wait so far.
POLL_LATENESS = 0.04


def poll_delay(poll: Poll, in_state: float) -> float:
    """The wait before the next step after ``poll``, ``in_state`` seconds into its state."""
    if poll.first is None:
        return poll.after
    return min(poll.after, max(poll.first, POLL_LATENESS * in_state))


# The longest server-requested delay (Retry-After) a retry honours; a longer one is capped
# so that a misbehaving rate limiter cannot park a launch for hours.
MAX_RETRY_AFTER_S = 300.0


class Retry:
    """Transient failure: same state, backoff, one unit of the retry budget consumed.

    ``after`` is the delay the server asked for (a 429's Retry-After): the backoff is at
    least that long (up to MAX_RETRY_AFTER_S), never shorter."""

    __slots__ = ("error", "after")

    def __init__(self, error: str, after: Optional[float] = None):
        self.error = error
        self.after = after


class SharedWait(Exception):
    """Raised inside a step by what the fleet shares (fleet/gate.py): the cloud holds this account's
    calls (a throttle answer another worker got), or another worker is asking the question this step
    needs answered. Nothing was called: the step runs again after ``after`` s, as a Poll (no budget)."""

    def __init__(self, after: float, note: str):
        super().__init__(note)
        self.after = after
        self.note = note


class LeaseLost(Exception):
    """Another run owns the key now; this run must not make another external call."""


class HardCancel(BaseException):
    """A second interrupt: exit at once, leaving the journal resumable."""


# What a step returns: the next state, or the same state again (after a wait or a backoff).
StepResult = Union[Next[S], Poll, Retry]


class Machine(Generic[S]):
    """A state machine over states of type ``S``, journalled as JSON-able dicts carrying a ``kind``
    tag. ``load_state`` and ``dump_state`` convert between the two at the journal; by default a
    state is that dict itself."""

    KIND = "machine"

    def load_state(self, data: Dict[str, Any]) -> S:
        """The state a journalled dict holds (raises KeyError, TypeError or ValueError for one it cannot read)."""
        return cast(S, data)

    def dump_state(self, state: S) -> Dict[str, Any]:
        """The JSON-able dict the journal holds for ``state``."""
        return cast(Dict[str, Any], state)

    def is_terminal(self, state: S) -> bool:
        raise NotImplementedError

    def label(self, state: S) -> str:
        return str(self.dump_state(state)["kind"])

    def step(self, state: S, cx: "StepCx") -> StepResult[S]:
        raise NotImplementedError

    def retry_policy(self, state: S) -> RetryPolicy:
        return RetryPolicy()

    def on_retries_exhausted(self, state: S, last_error: str) -> S:
        raise NotImplementedError

    def on_cancel(self, state: S) -> Optional[S]:
        return None


class CancelToken:
    """Cancellation requests. A burst of signals (Ansible sends SIGINT then SIGTERMs
    at once on Ctrl-C) counts as one request; a later signal is a hard cancel."""

    BURST_S = 2.0

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self._event = threading.Event()
        self.first_at: Optional[float] = None
        self._saved: Dict[int, Any] = {}

    @property
    def requested(self) -> bool:
        return self._event.is_set()

    def request(self) -> None:
        if self.first_at is None:
            self.first_at = self.clock()
        self._event.set()

    def wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds``; return early (True) when cancellation is requested."""
        return self._event.wait(max(0.0, seconds))

    def _handle(self, signum: int, frame: Any) -> None:
        if self.first_at is not None and self.clock() - self.first_at > self.BURST_S:
            raise HardCancel("second interrupt (signal %d): stopping at once; the journal is resumable" % signum)
        self.request()

    def install(self) -> None:
        """Route SIGINT/SIGTERM here (main thread only; elsewhere this is a no-op)."""
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._saved[sig] = signal.signal(sig, self._handle)

    def uninstall(self) -> None:
        for sig, handler in self._saved.items():
            signal.signal(sig, handler)
        self._saved.clear()


class StepCx:
    """What a step may know about its run: time in state, the lease, the journal."""

    def __init__(self, executor: "Executor[Any]", key: str, entered: float, attempt: int):
        self._executor = executor
        self.key = key
        self._entered = entered
        self.attempt = attempt

    @property
    def in_state(self) -> float:
        """Seconds since this process entered the current state (a resume starts afresh)."""
        return self._executor.clock() - self._entered

    @property
    def journal(self) -> JournalStore:
        return self._executor.journal

    @property
    def owner(self) -> str:
        """The lease owner this run writes as."""
        return self._executor.owner

    @property
    def cancelled(self) -> bool:
        return self._executor.cancel.requested

    def fence(self) -> None:
        """Call before an external mutation: raises LeaseLost if another run took over."""
        self._executor.fence(self.key)


class Outcome:
    """How a run ended; ``state`` is the final state as the journal holds it (the machine's dump_state)."""

    def __init__(self, key: str, state: Dict[str, Any], label: str, resumed: bool,
                 transitions: int, cancelled: bool):
        self.key = key
        self.state = state
        self.label = label
        self.resumed = resumed
        self.transitions = transitions
        self.cancelled = cancelled


class _Heartbeat(threading.Thread):
    """Renews the lease while a long step runs, on its own connection."""

    def __init__(self, reopen: Callable[[], JournalStore], key: str, owner: str, ttl: float):
        super().__init__(name="gpuprov-lease", daemon=True)
        self.reopen, self.key, self.owner, self.ttl = reopen, key, owner, ttl
        self.stop_event = threading.Event()
        self.lost = False

    def run(self) -> None:
        # The connection is opened at the first beat, not before: most runs end sooner (a fleet's VMs on a fast
        # cloud), and an opening costs each of them a few milliseconds of the controller's CPU for nothing.
        journal: Optional[JournalStore] = None
        try:
            while not self.stop_event.wait(self.ttl / 3.0):
                if journal is None:
                    try:
                        journal = self.reopen()
                    except JournalError:
                        return   # no heartbeat: the run's own writes stay fenced by version and lease
                try:
                    renewed = journal.renew(self.key, self.owner, self.ttl)
                except JournalError:
                    continue   # the server is away (a restart): try again at the next beat
                if not renewed:
                    self.lost = True
                    return
        finally:
            if journal is not None:
                journal.close()


class Executor(Generic[S]):
    """Runs one machine on one journal. ``clock``, ``rng`` and ``run``'s ``wait_poll`` are injectable (a test's fake
    time and draws); the production callers leave them to their defaults."""

    def __init__(self, journal: JournalStore, machine: Machine[S], owner: Optional[str] = None,
                 lease_ttl: float = 120.0, clock: Callable[[], float] = time.monotonic,
                 cancel: Optional[CancelToken] = None, on_event: Optional[Callable[[str, Dict[str, Any]], None]] = None,
                 rng: Optional[random.Random] = None, heartbeat: bool = True):
        self.journal = journal
        self.machine = machine
        self.owner = owner or new_owner()
        self.lease_ttl = lease_ttl
        self.clock = clock
        self.cancel = cancel or CancelToken(clock)
        self.on_event = on_event or (lambda kind, data: None)
        self.rng = rng or random.Random()
        self.use_heartbeat = heartbeat
        self._heartbeat: Optional[_Heartbeat] = None
        self.cancel_reason = "cancelled by interrupt"

    # How often a waiting run looks for a cancellation asked through the journal.
    CANCEL_CHECK_S = 1.0

    def fence(self, key: str) -> None:
        if (self._heartbeat is not None and self._heartbeat.lost) or not self.journal.holds(key, self.owner):
            raise LeaseLost("%s: the lease was taken over by another run; stopping before any further "
                            "cloud call" % key)

    def _journal_cancel(self, key: str) -> bool:
        """Turn a cancellation asked through the journal into this run's cancel request."""
        if self.cancel.requested:
            return True
        reason = self.journal.cancel_request(key, self.owner)
        if reason:
            self.cancel_reason = reason
            self.cancel.request()
        return self.cancel.requested

    def _cancellable_wait(self, key: str, seconds: float) -> None:
        """Sleep up to ``seconds``, ending early on a signal or a journal cancellation."""
        deadline = self.clock() + max(0.0, seconds)
        while True:
            left = deadline - self.clock()
            if left <= 0 or self.cancel.wait(min(left, self.CANCEL_CHECK_S)) or self._journal_cancel(key):
                return

    def _emit(self, kind: str, **data: Any) -> None:
        try:
            self.on_event(kind, data)
        except Exception:  # a broken progress printer must never stop a launch
            pass

    def run(self, key: str, initial: Callable[[Optional[Dict[str, Any]], Optional[str]], S],
            wait_poll: Optional[Callable[[float], Any]] = None) -> Outcome:
        """Resume ``key`` if its journalled state is non-terminal and of this machine,
        else start from ``initial(previous_state, previous_kind)`` (the journalled dict and
        machine kind of the key's row, None for none)."""
        self.journal.acquire(key, self.owner, self.lease_ttl)
        try:
            return self._run(key, initial, wait_poll)
        finally:
            if self._heartbeat is not None:
                self._heartbeat.stop_event.set()
                self._heartbeat = None
            self.journal.release(key, self.owner)

    def _load(self, key: str, data: Dict[str, Any]) -> S:
        """The machine's state of the journalled ``data``; a state it cannot read is a JournalError naming it."""
        try:
            return self.machine.load_state(data)
        except (KeyError, TypeError, ValueError) as exc:
            raise JournalError("%s: the journal %s holds a %s state this version cannot read (%s: %s): %.300s"
                               % (key, self.journal.location, self.machine.KIND, type(exc).__name__, exc, data)) from exc

    def _start(self, key: str, initial: Callable[[Optional[Dict[str, Any]], Optional[str]], S]) -> Tuple[S, int, bool]:
        """(state, version, resumed) after resuming or beginning ``key``."""
        machine = self.machine
        row = self.journal.load(key)
        # Terminality is the machine's call with this run's settings (e.g. retry_until_up).
        if row is not None and row.kind == machine.KIND:
            journalled = self._load(key, row.state)
            if not machine.is_terminal(journalled):
                self.journal.renew(key, self.owner, self.lease_ttl)
                self.journal.note(key, self.owner, row.version, row.label, "resumed by %s" % self.owner,
                                  event="resume")
                self._emit("resume", label=row.label)
                return journalled, row.version, True
        state = initial(row.state if row else None, row.kind if row else None)
        version = self.journal.begin(key, machine.KIND, machine.dump_state(state), machine.label(state),
                                     machine.is_terminal(state), self.owner, self.lease_ttl,
                                     row.version if row else None, note="started by %s" % self.owner)
        self._emit("begin", label=machine.label(state))
        return state, version, False

    def _run(self, key: str, initial: Callable[[Optional[Dict[str, Any]], Optional[str]], S],
             wait_poll: Optional[Callable[[float], Any]]) -> Outcome:
        machine = self.machine
        state, version, resumed = self._start(key, initial)
        if self.use_heartbeat:
            self._heartbeat = _Heartbeat(self.journal.reopen, key, self.owner, self.lease_ttl)
            self._heartbeat.start()
        calm = threading.Event()  # never set: plain, signal-interruptible sleeps
        cancel_mapped = False

        def wait(seconds: float) -> None:
            if wait_poll is not None:
                wait_poll(seconds)
            elif cancel_mapped:
                calm.wait(max(0.0, seconds))  # compensation keeps its pace after a cancel
            else:
                self._cancellable_wait(key, seconds)

        transitions = 0
        entered = self.clock()
        attempts = 0
        last_poll_note = None
        while not machine.is_terminal(state):
            self.fence(key)
            if not cancel_mapped and self._journal_cancel(key):
                cancel_mapped = True
                mapped = machine.on_cancel(state)
                self._emit("cancel", label=machine.label(state), reason=self.cancel_reason)
                if mapped is not None and mapped != state:
                    version = self._commit(key, version, state, mapped, self.cancel_reason)
                    state, entered, attempts, last_poll_note = mapped, self.clock(), 0, None
                    transitions += 1
                    continue
            cx = StepCx(self, key, entered, attempts)
            result: StepResult[S]
            held = False
            try:
                result = machine.step(state, cx)
            except (LeaseLost, HardCancel, Conflict):
                raise
            except SharedWait as wait_for:
                result, held = Poll(max(0.0, wait_for.after), wait_for.note), True
            except Exception as exc:  # an unexpected bug is a budgeted retry, never a silent loss
                result = Retry("%s: %s" % (type(exc).__name__, exc))
            if isinstance(result, Next):
                version = self._commit(key, version, state, result.state, result.note, result.rows)
                state, entered, attempts, last_poll_note = result.state, self.clock(), 0, None
                transitions += 1
            elif isinstance(result, Poll):
                if not held:
                    # The budget counts consecutive failures; a good observe ends a streak (a wait for the fleet
                    # is none: a Retry streak goes on counting across it).
                    attempts = 0
                if result.note and result.note != last_poll_note:
                    self.journal.note(key, self.owner, version, machine.label(state), result.note)
                    last_poll_note = result.note
                self._emit("poll", label=machine.label(state), note=result.note, in_state=cx.in_state)
                wait(poll_delay(result, cx.in_state))
            elif isinstance(result, Retry):
                attempts += 1
                policy = machine.retry_policy(state)
                self.journal.note(key, self.owner, version, machine.label(state),
                                  "attempt %d/%d failed: %s" % (attempts, policy.max_attempts, result.error),
                                  event="retry")
                if attempts >= policy.max_attempts:
                    nxt = machine.on_retries_exhausted(state, result.error)
                    version = self._commit(key, version, state, nxt,
                                           "retries exhausted after %d attempts: %s" % (attempts, result.error))
                    state, entered, attempts, last_poll_note = nxt, self.clock(), 0, None
                    transitions += 1
                else:
                    delay = policy.backoff(attempts, self.rng)
                    if result.after:
                        delay = max(delay, min(float(result.after), MAX_RETRY_AFTER_S))
                    self._emit("retry", label=machine.label(state), error=result.error,
                               attempt=attempts, max_attempts=policy.max_attempts, delay=delay)
                    wait(delay)
            else:
                raise TypeError("step returned %r; expected Next, Poll or Retry" % (result,))
        return Outcome(key, machine.dump_state(state), machine.label(state), resumed, transitions,
                       self.cancel.requested)

    def _commit(self, key: str, version: int, old: S, new: S, note: str,
                rows: Sequence[Tuple[str, Sequence[Any]]] = ()) -> int:
        machine = self.machine
        journalled = machine.dump_state(new)
        version = self.journal.transition(key, self.owner, version, journalled, machine.label(new),
                                          machine.is_terminal(new), machine.label(old), note, rows=rows)
        self._emit("transition", frm=machine.label(old), to=machine.label(new), note=note, state=journalled)
        return version
