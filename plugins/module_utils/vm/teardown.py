# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Teardown machine: Requesting -> AwaitingGone -> CleaningUp -> Done | Leaked.

Used on its own by ``down`` and embedded in the launch machine's Compensating
state, so one teardown serves both. Every step finds the VM's resources by its
identity (observe), so instances adopted or created by a lost call are removed too.

Recovery (seed 004): the durable fact before any delete is the Requesting state
with its targets (locations + known ids). A crash after a delete and before the
commit re-runs Requesting: observe, then delete again (idempotent). A teardown that
cannot finish within its budget ends in Leaked, which names every remaining
location and instance id; the next provision or down starts by compensating it.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Optional, Tuple, assert_never

from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.executor import (
    Machine, Next, Poll, Retry, StepCx, StepResult,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.retry import RetryPolicy
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    Location, Observed, ProviderError,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import teardown_states as ts
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm.teardown_states import (  # the machine's API too
    AwaitingGone, CleaningUp, DeletionRequested, Done, Leaked, Requesting, Target, TeardownState,
    created_at, describe_targets, initial, merge_targets, moved, target,
)

__all__ = ["AwaitingGone", "CleaningUp", "DeletionRequested", "Done", "Leaked", "Requesting", "Target", "TeardownMachine",
           "TeardownState", "created_at", "describe_targets", "initial", "merge_targets", "moved", "target"]


class TeardownMachine(Machine[TeardownState]):
    """Removes every resource carrying the VM identity at the given locations."""

    KIND = ts.TEARDOWN_KIND

    def __init__(self, ctx: Any):
        self.ctx = ctx  # a VmContext: providers, settings, controller files

    def load_state(self, data: Dict[str, Any]) -> TeardownState:
        return ts.from_dict(data)

    def dump_state(self, state: TeardownState) -> Dict[str, Any]:
        return state.to_dict()

    def is_terminal(self, state: TeardownState) -> bool:
        return isinstance(state, ts.TERMINAL)

    def label(self, state: TeardownState) -> str:
        return state.kind

    def retry_policy(self, state: TeardownState) -> RetryPolicy:
        if not any(created_at(t) for t in state.targets):
            # Only side resources of a location that never saw a create: a short budget,
            # so an unreachable cloud does not hold up the failover for minutes.
            return RetryPolicy(max_attempts=3, initial_backoff=1.0, max_backoff=4.0)
        return RetryPolicy(max_attempts=self.ctx.settings.teardown_attempts, initial_backoff=2.0, max_backoff=30.0)

    def on_retries_exhausted(self, state: TeardownState, last_error: str) -> TeardownState:
        return self._given_up(state, "teardown failed in %s: %s" % (state.kind, last_error))

    def _given_up(self, state: TeardownState, reason: str) -> TeardownState:
        if not any(created_at(t) for t in state.targets):
            # Leaked means "something may bill": nothing was ever created here.
            return moved(Done, state, reason="%s (no instance was ever requested at %s; side resources such as "
                                             "firewall rules may remain)" % (reason, describe_targets(state.targets)))
        return moved(Leaked, state, reason=reason)

    def on_cancel(self, state: TeardownState) -> Optional[TeardownState]:
        return None  # a teardown always runs to its end (bounded by its budget)

    def step(self, state: TeardownState, cx: StepCx) -> StepResult[TeardownState]:
        try:
            match state:
                case Requesting():
                    return self._step_requesting(state, cx)
                case AwaitingGone():
                    return self._step_awaiting_gone(state, cx)
                case DeletionRequested():
                    # Left without waiting (instance module, wait=false): a run that steps it waits now.
                    return self._step_awaiting_gone(moved(AwaitingGone, state), cx)
                case CleaningUp():
                    return self._step_cleaning_up(state, cx)
                case Done() | Leaked():
                    raise ValueError("%s is terminal: there is no step to take" % state.kind)
                case _:
                    assert_never(state)
        except ProviderError as exc:
            if exc.fatal:
                # Missing or refused credentials, a refused request: retrying cannot help. Where the
                # resources may still bill, say so now (Leaked), never a silent Done; where no instance was
                # ever requested, stop at once, saying what may remain.
                return Next(self._given_up(state, "teardown cannot proceed: %s" % exc), str(exc))
            # Anything else is retried within the budget; its exhaustion ends in Leaked.
            return Retry(str(exc), after=exc.retry_after)

    def _observe_all(self, state: TeardownState) -> List[Tuple[Target, List[Observed]]]:
        """[(target, [Observed])] for every target location: only what this journal may
        delete (its own journal id, or none: resources made before journal ids)."""
        name = state.vm_name
        journal_id = getattr(self.ctx, "journal_id", None)
        found = []
        for t in state.targets:
            location = Location.from_dict(t["location"])
            observed = self.ctx.provider(location.cloud).observe(location, name)
            found.append((t, [o for o in observed if o.owned_by(journal_id)]))
        return found

    def _step_requesting(self, state: Requesting, cx: StepCx) -> StepResult[TeardownState]:
        name = state.vm_name
        found = self._observe_all(state)
        merged = [target(t["location"], sorted(set(t["instance_ids"]) | {o.instance_id for o in observed}),
                         created_at(t) or bool(observed))
                  for t, observed in found]
        if merged != state.targets:
            # Journal every id found by identity before deleting, so a Leaked names them all.
            return Next(dataclasses.replace(state, targets=merged), "found %s" % describe_targets(merged))
        targets = []
        for t in state.targets:
            location = Location.from_dict(t["location"])
            ids = t["instance_ids"]
            if ids:
                cx.fence()
                self.ctx.provider(location.cloud).delete(location, name, ids)
            targets.append(target(t["location"], ids, created_at(t)))
        return Next(moved(AwaitingGone, state, targets=targets),
                    "deletion requested for %s" % describe_targets(targets))

    def _step_awaiting_gone(self, state: AwaitingGone, cx: StepCx) -> StepResult[TeardownState]:
        name = state.vm_name
        remaining = []
        for t, observed in self._observe_all(state):
            if not observed:
                continue
            location = Location.from_dict(t["location"])
            again = [o.instance_id for o in observed if not o.leaving]
            if again:
                cx.fence()
                self.ctx.provider(location.cloud).delete(location, name, again)
            remaining.append(target(t["location"], [o.instance_id for o in observed]))  # present: created
        if not remaining:
            return Next(moved(CleaningUp, state), "all instances gone")
        if cx.in_state > self.ctx.settings.teardown_timeout:
            return Next(moved(Leaked, state, targets=merge_targets(remaining, state.targets),
                              reason="instances still present after %.0f s: %s"
                              % (self.ctx.settings.teardown_timeout, describe_targets(remaining))))
        return Poll(self.ctx.poll_interval(remaining[0]["location"]["cloud"]),
                    "waiting for %s to go" % describe_targets(remaining))

    def _step_cleaning_up(self, state: CleaningUp, cx: StepCx) -> StepResult[TeardownState]:
        for t in state.targets:
            location = Location.from_dict(t["location"])
            cx.fence()
            self.ctx.provider(location.cloud).cleanup(location, state.vm_name)
        return Next(moved(Done, state), "side resources removed")
