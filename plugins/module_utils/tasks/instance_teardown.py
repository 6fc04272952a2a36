# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""``gpuprov.cloud.instance state=absent``: the teardown machine (vm/teardown.py) run on
the journal under the key ``instance:<cloud>:<vm name>``, so it is crash-safe and
resumable like ``down``, and removes only what its journal may remove.

* The key never meets a VM row (VM names are DNS labels, without ``:``). One key per
  cloud and name: a run resumes what an interrupted one left (Requesting, AwaitingGone,
  CleaningUp), and a run after a Leaked one clears the leaked locations too.
* ``state=present`` leaves a row of kind ``instance`` on the same key naming where it made
  (or kept) its instance, so the orphan sweep treats it as owned; the teardown takes that
  location over as a target, and its Done row owns nothing any more.
* ``wait=false``: once deletion is requested and instances are still leaving, the run
  ends in DeletionRequested, which is terminal for a run that does not wait and resumed
  as AwaitingGone by one that does (so a later ``wait=true`` run waits and cleans up).
* The machine acts only on instances carrying this journal's id or none (legacy);
  another journal's are reported, never deleted.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Set, Tuple

from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.executor import Next, Poll, StepCx, StepResult
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import Location, Observed, Provider
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import teardown_states as ts
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.status import INSTANCE_KEY_PREFIX
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm.teardown import TeardownMachine
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm.teardown_states import (
    AwaitingGone, DeletionRequested, InstanceRecord, Leaked, Requesting, TeardownState,
)

DELETION_REQUESTED = DeletionRequested.kind
# The kind of the row a state=present task leaves on the same key (teardown_states.InstanceRecord, written by primitives.InstanceRecorder).
INSTANCE_RECORD_KIND = ts.INSTANCE_RECORD_KIND


def journal_key(cloud: str, vm_name: str) -> str:
    """The journal key of the instance teardowns of ``vm_name`` on ``cloud``."""
    return "%s%s:%s" % (INSTANCE_KEY_PREFIX, cloud, vm_name)


class InstanceTeardown(TeardownMachine):
    """The teardown machine with ``wait=false`` support (see the module docstring)."""

    KIND = ts.INSTANCE_TEARDOWN_KIND

    def __init__(self, ctx: Any, wait: bool = True):
        super().__init__(ctx)
        self.wait = wait

    def is_terminal(self, state: TeardownState) -> bool:
        return super().is_terminal(state) or (not self.wait and isinstance(state, DeletionRequested))

    def step(self, state: TeardownState, cx: StepCx) -> StepResult[TeardownState]:
        # The teardown machine resumes a DeletionRequested as AwaitingGone (a run that waits resumes the wait).
        result = super().step(state, cx)
        if not self.wait and isinstance(state, (AwaitingGone, DeletionRequested)) and isinstance(result, Poll):
            return Next(ts.moved(DeletionRequested, state), "%s; not waiting (wait=false)" % result.note)
        return result


def initial_for(vm_name: str, where: Location) -> Any:
    """The executor's ``initial``: this run's location, plus the locations (and ids) a
    previous run left Leaked or only requested to delete, or where a state=present task made
    (or kept) its instance, so none is forgotten."""
    def initial(previous: Optional[Dict[str, Any]], previous_kind: Optional[str]) -> Requesting:
        carried: List[ts.Target] = []
        if previous and previous_kind == InstanceTeardown.KIND:
            left = ts.from_dict(previous)
            if isinstance(left, (Leaked, DeletionRequested)):
                carried = left.targets
        elif previous and previous_kind == INSTANCE_RECORD_KIND:
            carried = InstanceRecord.from_dict(previous).targets
        return ts.initial(vm_name, ts.merge_targets([ts.target(where.to_dict())], carried), "instance state=absent")
    return initial


def covers(state: Dict[str, Any], where: Location) -> bool:
    """Whether the run that reached ``state`` (a journalled teardown state) acted on ``where`` (a resumed
    run may not have)."""
    return any(str(Location.from_dict(t["location"])) == str(where) for t in ts.from_dict(state).targets)


class WatchedProvider:
    """An adapter as the machine sees it, remembering per location what this run last
    observed, which live instances it asked to delete, and where it cleaned up: the
    task's result says what this run did, not what the journal had planned."""

    def __init__(self, provider: Provider):
        self._provider = provider
        self.seen: Dict[str, List[Observed]] = {}
        self.requested: Set[Tuple[str, str]] = set()   # (location, instance id)
        self.cleaned: Set[str] = set()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._provider, name)

    def observe(self, location: Location, vm_name: str) -> List[Observed]:
        found = list(self._provider.observe(location, vm_name))
        self.seen[str(location)] = list(found)
        return found

    def delete(self, location: Location, vm_name: str, instance_ids: List[str]) -> None:
        self._provider.delete(location, vm_name, instance_ids)
        last = {o.instance_id: o for o in self.seen.get(str(location), [])}
        # Asking again for one already leaving (or gone) changes nothing.
        self.requested.update((str(location), i) for i in instance_ids if i in last and not last[i].leaving)

    def cleanup(self, location: Location, vm_name: str) -> None:
        self._provider.cleanup(location, vm_name)
        self.cleaned.add(str(location))

    def deleted_at(self, where: Location) -> List[str]:
        return sorted(i for at, i in self.requested if at == str(where))
