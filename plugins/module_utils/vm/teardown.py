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

from typing import Any, Dict, List, Optional

from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.executor import (
    Machine, Next, Poll, Retry,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.retry import RetryPolicy
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    Location, ProviderError,
)

TERMINAL = ("Done", "Leaked")


def target(location: Dict[str, Any], instance_ids: Optional[List[str]] = None,
           created: bool = True) -> Dict[str, Any]:
    """A location to clear. ``created`` False: no create call was ever made there, so at
    most free side resources (a security group) can exist; it is never reported Leaked."""
    return {"location": dict(location), "instance_ids": sorted(set(instance_ids or [])), "created": bool(created)}


def created_at(t: Dict[str, Any]) -> bool:
    """Whether a create call may have been made at the target (states journalled before
    this flag existed say nothing: assume it was)."""
    return bool(t.get("created", True) or t["instance_ids"])


def merge_targets(*groups: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Union of targets by location, ids merged, order kept."""
    out: Dict[str, Dict[str, Any]] = {}
    for group in groups:
        for t in group or []:
            key = str(Location.from_dict(t["location"]))
            if key in out:
                out[key]["instance_ids"] = sorted(set(out[key]["instance_ids"]) | set(t["instance_ids"]))
                out[key]["created"] = out[key]["created"] or created_at(t)
            else:
                out[key] = target(t["location"], t["instance_ids"], created_at(t))
    return list(out.values())


def initial(vm_name: str, targets: List[Dict[str, Any]], reason: str = "") -> Dict[str, Any]:
    return {"kind": "Requesting", "vm_name": vm_name, "targets": merge_targets(targets), "reason": reason}


class TeardownMachine(Machine):
    """Removes every resource carrying the VM identity at the given locations."""

    KIND = "teardown"

    def __init__(self, ctx):
        self.ctx = ctx  # a VmContext: providers, settings, controller files

    def is_terminal(self, state: Dict[str, Any]) -> bool:
        return state["kind"] in TERMINAL

    def label(self, state: Dict[str, Any]) -> str:
        return state["kind"]

    def retry_policy(self, state: Dict[str, Any]) -> RetryPolicy:
        if not any(created_at(t) for t in state["targets"]):
            # Only side resources of a location that never saw a create: a short budget,
            # so an unreachable cloud does not hold up the failover for minutes.
            return RetryPolicy(max_attempts=3, initial_backoff=1.0, max_backoff=4.0)
        return RetryPolicy(max_attempts=self.ctx.settings.teardown_attempts, initial_backoff=2.0, max_backoff=30.0)

    def on_retries_exhausted(self, state: Dict[str, Any], last_error: str) -> Dict[str, Any]:
        return self._given_up(state, "teardown failed in %s: %s" % (state["kind"], last_error))

    def _given_up(self, state: Dict[str, Any], reason: str) -> Dict[str, Any]:
        if not any(created_at(t) for t in state["targets"]):
            # Leaked means "something may bill": nothing was ever created here.
            return dict(state, kind="Done", reason="%s (no instance was ever requested at %s; side resources "
                                                   "such as firewall rules may remain)"
                        % (reason, _describe(state["targets"])))
        return self._leaked(state, state["targets"], reason)

    def on_cancel(self, state: Dict[str, Any]) -> Optional[Dict[str, Any]]:
        return None  # a teardown always runs to its end (bounded by its budget)

    @staticmethod
    def _leaked(state: Dict[str, Any], targets: List[Dict[str, Any]], reason: str) -> Dict[str, Any]:
        return {"kind": "Leaked", "vm_name": state["vm_name"], "targets": targets, "reason": reason}

    def step(self, state: Dict[str, Any], cx):
        handler = getattr(self, "_step_" + state["kind"])
        try:
            return handler(state, cx)
        except ProviderError as exc:
            if exc.fatal:
                # Missing or refused credentials, a refused request: retrying cannot help. Where the
                # resources may still bill, say so now (Leaked), never a silent Done; where no instance was
                # ever requested, stop at once, saying what may remain.
                return Next(self._given_up(state, "teardown cannot proceed: %s" % exc), str(exc))
            # Anything else is retried within the budget; its exhaustion ends in Leaked.
            return Retry(str(exc), after=exc.retry_after)

    def _observe_all(self, state: Dict[str, Any]):
        """[(target, [Observed])] for every target location: only what this journal may
        delete (its own journal id, or none: resources made before journal ids)."""
        name = state["vm_name"]
        journal_id = getattr(self.ctx, "journal_id", None)
        found = []
        for t in state["targets"]:
            location = Location.from_dict(t["location"])
            observed = self.ctx.provider(location.cloud).observe(location, name)
            found.append((t, [o for o in observed if o.owned_by(journal_id)]))
        return found

    def _step_Requesting(self, state: Dict[str, Any], cx):
        name = state["vm_name"]
        found = self._observe_all(state)
        merged = [target(t["location"], sorted(set(t["instance_ids"]) | {o.instance_id for o in observed}),
                         created_at(t) or bool(observed))
                  for t, observed in found]
        if merged != state["targets"]:
            # Journal every id found by identity before deleting, so a Leaked names them all.
            return Next(dict(state, targets=merged), "found %s" % _describe(merged))
        targets = []
        for t in state["targets"]:
            location = Location.from_dict(t["location"])
            ids = t["instance_ids"]
            if ids:
                cx.fence()
                self.ctx.provider(location.cloud).delete(location, name, ids)
            targets.append(target(t["location"], ids, created_at(t)))
        return Next(dict(state, kind="AwaitingGone", targets=targets),
                    "deletion requested for %s" % _describe(targets))

    def _step_AwaitingGone(self, state: Dict[str, Any], cx):
        name = state["vm_name"]
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
            return Next(dict(state, kind="CleaningUp"), "all instances gone")
        if cx.in_state > self.ctx.settings.teardown_timeout:
            return Next(self._leaked(state, merge_targets(remaining, state["targets"]),
                                     "instances still present after %.0f s: %s"
                                     % (self.ctx.settings.teardown_timeout, _describe(remaining))))
        return Poll(self.ctx.poll_interval(remaining[0]["location"]["cloud"]),
                    "waiting for %s to go" % _describe(remaining))

    def _step_CleaningUp(self, state: Dict[str, Any], cx):
        for t in state["targets"]:
            location = Location.from_dict(t["location"])
            cx.fence()
            self.ctx.provider(location.cloud).cleanup(location, state["vm_name"])
        return Next(dict(state, kind="Done"), "side resources removed")


def _describe(targets: List[Dict[str, Any]]) -> str:
    parts = []
    for t in targets:
        where = str(Location.from_dict(t["location"]))
        parts.append("%s [%s]" % (where, ", ".join(t["instance_ids"]) or "no instances"))
    return "; ".join(parts) or "nothing"
