# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fakes for the executor and journal tests: a fake clock, a simulated crash, a toy
"cloud" that records side effects, and two toy machines over it.

ToyMachine     A -> B -> C -> Done. Every step observes before it acts (a resource
               named after the state is created only when the toy world lacks it), so
               re-running a step after a crash repeats no completed side effect.
               Crash points (before/after the side effect) and per-state hooks are
               injectable; on_cancel maps A/B/C to Compensating, which deletes what
               was created and ends in Cancelled.
ScriptedMachine  each state's step returns the next item of a script (Next/Poll/Retry,
               an exception to raise, or a callable(state, cx) returning one), and
               records what the step saw (cx.in_state, cx.attempt).
Nothing here sleeps or touches a real cloud.
"""

from __future__ import annotations

import collections
from typing import Any, Callable, Dict, List, Optional

from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.executor import (
    Machine, Next, Poll, Retry,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.retry import RetryPolicy


class Crash(BaseException):
    """A simulated process death: not an Exception, so nothing in the executor may
    swallow it (like SIGKILL, it just ends the run where it is)."""


class FakeClock:
    """A settable clock: ``clock()`` reads it, ``advance`` moves it. Never sleeps."""

    def __init__(self, start: float = 1000.0):
        self.now = float(start)

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += float(seconds)


class ToyWorld:
    """The toy machine's external system: what exists, and how often each thing was
    created, deleted or stepped (the evidence that steps are idempotent)."""

    def __init__(self) -> None:
        self.resources: Dict[str, Dict[str, Any]] = {}
        self.created: collections.Counter = collections.Counter()
        self.deleted: collections.Counter = collections.Counter()
        self.steps: collections.Counter = collections.Counter()
        self.log: List[str] = []


TOY_ORDER = ("A", "B", "C", "Done")
TOY_TERMINAL = frozenset(("Done", "Failed", "Cancelled"))


def toy_initial(prev_state: Optional[Dict[str, Any]] = None, prev_kind: Optional[str] = None) -> Dict[str, Any]:
    return {"kind": "A", "handles": []}


class ToyMachine(Machine):
    """A -> B -> C -> Done over a ToyWorld; see the module docstring."""

    KIND = "toy"

    def __init__(self, world: ToyWorld, crash: Optional[tuple] = None,
                 hooks: Optional[Dict[str, Callable]] = None,
                 cancel_map: Optional[Dict[str, Optional[Dict[str, Any]]]] = None,
                 policy: Optional[RetryPolicy] = None):
        self.world = world
        self.crash = crash            # (state kind, "before" | "after") the side effect
        self.hooks = hooks or {}      # kind -> callable(state, cx), run first in the step
        self.cancel_map = cancel_map  # kind -> mapped state (None keeps going); None: default
        self.policy = policy or RetryPolicy(max_attempts=3, initial_backoff=1.0, max_backoff=4.0)
        self.exhausted: List[tuple] = []
        self.cancel_calls: List[str] = []

    def is_terminal(self, state: Dict[str, Any]) -> bool:
        return state["kind"] in TOY_TERMINAL

    def label(self, state: Dict[str, Any]) -> str:
        return "Toy%s" % state["kind"]

    def retry_policy(self, state: Dict[str, Any]) -> RetryPolicy:
        return self.policy

    def on_retries_exhausted(self, state: Dict[str, Any], last_error: str) -> Dict[str, Any]:
        self.exhausted.append((state["kind"], last_error))
        return {"kind": "Failed", "handles": state["handles"], "reason": "%s: %s" % (state["kind"], last_error)}

    def on_cancel(self, state: Dict[str, Any]) -> Optional[Dict[str, Any]]:
        self.cancel_calls.append(state["kind"])
        if self.cancel_map is not None:
            return self.cancel_map.get(state["kind"])
        if state["kind"] in ("A", "B", "C"):
            return {"kind": "Compensating", "handles": state["handles"], "from": state["kind"]}
        return None

    def step(self, state: Dict[str, Any], cx):
        kind = state["kind"]
        self.world.steps[kind] += 1
        self.world.log.append("step %s" % kind)
        hook = self.hooks.get(kind)
        if hook is not None:
            result = hook(state, cx)
            if result is not None:
                return result
        if kind == "Compensating":
            for handle in state["handles"]:
                if handle in self.world.resources:   # observe first: deleting twice is a no-op
                    cx.fence()
                    del self.world.resources[handle]
                    self.world.deleted[handle] += 1
            return Next({"kind": "Cancelled", "handles": [], "from": state.get("from")}, note="compensated")
        if self.crash == (kind, "before"):
            raise Crash("crash in %s before its side effect" % kind)
        name = "res-%s" % kind
        if name not in self.world.resources:           # observe before acting
            cx.fence()
            self.world.resources[name] = {"made_in": kind}
            self.world.created[name] += 1
        if self.crash == (kind, "after"):
            raise Crash("crash in %s after its side effect" % kind)
        nxt = TOY_ORDER[TOY_ORDER.index(kind) + 1]
        return Next({"kind": nxt, "handles": state["handles"] + [name]}, note="%s made %s" % (kind, name))


class ScriptedMachine(Machine):
    """Each state's step returns the next scripted item; see the module docstring.

    ``script`` maps a state kind to a step function ``(state, cx)`` or to a list
    consumed in order. An item is a Next/Poll/
    Retry, an Exception instance (raised, as a buggy step would), or a callable
    ``(state, cx) -> result``. ``seen`` records (kind, in_state, attempt) per step."""

    KIND = "scripted"

    def __init__(self, script: Dict[str, List[Any]], policy: Optional[RetryPolicy] = None,
                 terminal=("Done", "Failed", "Cancelled", "TimedOut"),
                 exhausted_to: Optional[Callable[[Dict[str, Any], str], Dict[str, Any]]] = None,
                 policies: Optional[Dict[str, RetryPolicy]] = None):
        self.script = {k: (v if callable(v) else list(v)) for k, v in script.items()}
        self.policy = policy or RetryPolicy(max_attempts=3)
        self.policies = policies or {}
        self.terminal = frozenset(terminal)
        self.exhausted_to = exhausted_to
        self.exhausted: List[tuple] = []
        self.seen: List[tuple] = []

    def is_terminal(self, state: Dict[str, Any]) -> bool:
        return state["kind"] in self.terminal

    def retry_policy(self, state: Dict[str, Any]) -> RetryPolicy:
        return self.policies.get(state["kind"], self.policy)

    def on_retries_exhausted(self, state: Dict[str, Any], last_error: str) -> Dict[str, Any]:
        self.exhausted.append((state["kind"], last_error))
        if self.exhausted_to is not None:
            return self.exhausted_to(state, last_error)
        return {"kind": "Failed", "from": state["kind"], "error": last_error}

    def step(self, state: Dict[str, Any], cx):
        kind = state["kind"]
        self.seen.append((kind, cx.in_state, cx.attempt))
        items = self.script[kind]
        if callable(items):
            return items(state, cx)
        if not items:
            raise AssertionError("script for %s ran out" % kind)
        item = items.pop(0)
        if isinstance(item, BaseException):
            raise item
        if callable(item) and not isinstance(item, (Next, Poll, Retry)):
            return item(state, cx)
        return item


def deadline_poller(deadline: float, ready_after: Optional[float], interval: float) -> Callable:
    """A step that polls every ``interval`` s until ``ready_after`` s in state (then
    Next Done), or gives up once ``cx.in_state`` passes ``deadline`` (Next TimedOut)."""

    def step(state, cx):
        if ready_after is not None and cx.in_state >= ready_after:
            return Next({"kind": "Done"}, note="ready after %.0f s" % cx.in_state)
        if cx.in_state > deadline:
            return Next({"kind": "TimedOut"}, note="timed out after %.0f s" % cx.in_state)
        return Poll(interval, "waiting")
    return step
