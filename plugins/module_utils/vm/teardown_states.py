# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The teardown machine's states (vm/teardown.py), typed, and the targets they carry.

  Requesting -> AwaitingGone -> CleaningUp -> Done | Leaked
  (DeletionRequested: ``gpuprov.cloud.instance state=absent wait=false`` stopped waiting in AwaitingGone.)

Each state is a frozen dataclass with its ``kind`` tag; ``to_dict`` is the JSON the journal holds
and ``from_dict`` reads it back. The same states serve ``down``, the launch's Compensating state,
the orphan sweep (whose states also name the journals whose instances it may remove,
``journal_ids``) and the instance module's teardown. Also here: the record an instance task
leaves on its key (``InstanceRecord``), which a teardown takes over.

A target is plain JSON, as ``target()`` makes it: ``{"location": Location.to_dict(),
"instance_ids": [sorted ids], "created": bool}``.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Dict, List, Literal, Optional, Tuple, Type, TypeVar, Union

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import Location

# The journal's machine kinds whose rows hold these states (the machines' KIND).
TEARDOWN_KIND = "teardown"
SWEEP_TEARDOWN_KIND = "sweep-teardown"
INSTANCE_TEARDOWN_KIND = "instance-teardown"
TEARDOWN_KINDS = (TEARDOWN_KIND, SWEEP_TEARDOWN_KIND, INSTANCE_TEARDOWN_KIND)
# The kind of the row a ``gpuprov.cloud.instance state=present`` task leaves (InstanceRecord).
INSTANCE_RECORD_KIND = "instance"

Target = Dict[str, Any]
JournalIds = List[Optional[str]]


def target(location: Dict[str, Any], instance_ids: Optional[List[str]] = None,
           created: bool = True) -> Target:
    """A location to clear. ``created`` False: no create call was ever made there, so at
    most free side resources (a security group) can exist; it is never reported Leaked."""
    return {"location": dict(location), "instance_ids": sorted(set(instance_ids or [])), "created": bool(created)}


def created_at(t: Target) -> bool:
    """Whether a create call may have been made at the target (an instance id there says so too)."""
    return bool(t["created"] or t["instance_ids"])


def merge_targets(*groups: Optional[List[Target]]) -> List[Target]:
    """Union of targets by location, ids merged, order kept."""
    out: Dict[str, Target] = {}
    for group in groups:
        for t in group or []:
            key = str(Location.from_dict(t["location"]))
            if key in out:
                out[key]["instance_ids"] = sorted(set(out[key]["instance_ids"]) | set(t["instance_ids"]))
                out[key]["created"] = out[key]["created"] or created_at(t)
            else:
                out[key] = target(t["location"], t["instance_ids"], created_at(t))
    return list(out.values())


def describe_targets(targets: List[Target]) -> str:
    """``cloud/region [ids]; ...`` for messages."""
    parts = []
    for t in targets:
        where = str(Location.from_dict(t["location"]))
        parts.append("%s [%s]" % (where, ", ".join(t["instance_ids"]) or "no instances"))
    return "; ".join(parts) or "nothing"


@dataclasses.dataclass(frozen=True)
class TeardownFields:
    """The fields every teardown state carries."""

    vm_name: str
    targets: List[Target]
    reason: str
    # The orphan sweep's (tasks/sweep.py): the journal ids whose instances it may remove (None: any other teardown).
    journal_ids: Optional[JournalIds] = None

    kind: ClassVar[str]

    def to_dict(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {"kind": self.kind, "vm_name": self.vm_name, "targets": self.targets,
                               "reason": self.reason}
        if self.journal_ids is not None:
            out["journal_ids"] = self.journal_ids
        return out


@dataclasses.dataclass(frozen=True)
class Requesting(TeardownFields):
    """Observe every target (journalling each id found by identity), then ask for the deletion."""

    kind: ClassVar[Literal["Requesting"]] = "Requesting"

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "Requesting":
        return _read(cls, data)


@dataclasses.dataclass(frozen=True)
class AwaitingGone(TeardownFields):
    """Deletion asked for: wait until no instance is left at any target (deleting again what is not leaving)."""

    kind: ClassVar[Literal["AwaitingGone"]] = "AwaitingGone"

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "AwaitingGone":
        return _read(cls, data)


@dataclasses.dataclass(frozen=True)
class DeletionRequested(TeardownFields):
    """The instance module's ``wait=false``: AwaitingGone, left without waiting; a run that waits resumes it
    as AwaitingGone."""

    kind: ClassVar[Literal["DeletionRequested"]] = "DeletionRequested"

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "DeletionRequested":
        return _read(cls, data)


@dataclasses.dataclass(frozen=True)
class CleaningUp(TeardownFields):
    """Every instance is gone: remove the side resources at each target."""

    kind: ClassVar[Literal["CleaningUp"]] = "CleaningUp"

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "CleaningUp":
        return _read(cls, data)


@dataclasses.dataclass(frozen=True)
class Done(TeardownFields):
    """Terminal: nothing of the VM is left at the targets. ``skipped``: the sweep stopped because a run of
    the VM name owns a target now (nothing was removed)."""

    skipped: Optional[str] = None
    kind: ClassVar[Literal["Done"]] = "Done"

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "Done":
        return _read(cls, data)

    def to_dict(self) -> Dict[str, Any]:
        out = super().to_dict()
        if self.skipped is not None:
            out["skipped"] = self.skipped
        return out


@dataclasses.dataclass(frozen=True)
class Leaked(TeardownFields):
    """Terminal: the teardown gave up; ``targets`` names every location and id that may still bill. It names
    no journal ids (a later sweep lists what is left anew)."""

    kind: ClassVar[Literal["Leaked"]] = "Leaked"

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "Leaked":
        return _read(cls, data)


_Next = TypeVar("_Next", bound=TeardownFields)


def _read(cls: Type[_Next], data: Dict[str, Any]) -> _Next:
    # Every field by name, as providers/base.py reads its records; a key this version does not know is left out.
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in data.items() if k in names})


def moved(to: Type[_Next], state: TeardownFields, targets: Optional[List[Target]] = None,
          reason: Optional[str] = None) -> _Next:
    """The state of class ``to`` that ``state`` moves to: the same VM, targets, reason and journal ids,
    but for ``targets`` or ``reason`` where given."""
    return to(state.vm_name, state.targets if targets is None else targets,
              state.reason if reason is None else reason, None if to is Leaked else state.journal_ids)


TeardownState = Union[Requesting, AwaitingGone, DeletionRequested, CleaningUp, Done, Leaked]
TERMINAL = (Done, Leaked)
STATES: Tuple[Any, ...] = (Requesting, AwaitingGone, DeletionRequested, CleaningUp, Done, Leaked)
_BY_KIND: Dict[str, Any] = {cls.kind: cls for cls in STATES}


def initial(vm_name: str, targets: List[Target], reason: str = "") -> Requesting:
    return Requesting(vm_name, merge_targets(targets), reason)


def migrate_state(kind: str, data: Dict[str, Any]) -> Dict[str, Any]:
    """``data`` (a journalled teardown state of ``kind``) in the shape this version writes.

    Every shape written since the first release (0.1.0) is this version's own: nothing to upgrade yet.
    The place for the next shape change, so that ``from_dict`` reads every journal ever released."""
    del kind
    return data


def from_dict(data: Dict[str, Any]) -> TeardownState:
    """The teardown state a journalled dict holds (KeyError or ValueError for one no version wrote)."""
    kind = data["kind"]
    cls = _BY_KIND.get(kind)
    if cls is None:
        raise ValueError("unknown teardown state %r" % (kind,))
    state: TeardownState = cls.from_dict(migrate_state(kind, data))
    return state


@dataclasses.dataclass(frozen=True)
class InstanceRecord:
    """Where a ``gpuprov.cloud.instance state=present`` task made (or found and kept) its instance: the row
    of kind ``instance`` on ``instance:<cloud>:<vm name>`` (primitives.InstanceRecord writes it). ``kind``:
    ``Creating`` (journalled before the create call: whatever appears there is the task's) or ``Present``
    (with its id). Both are terminal; the instance teardown takes the targets over."""

    kind: Literal["Creating", "Present"]
    vm_name: str
    location: Dict[str, Any]
    instance_id: Optional[str]
    targets: List[Target]

    def to_dict(self) -> Dict[str, Any]:
        return {"kind": self.kind, "vm_name": self.vm_name, "location": self.location,
                "instance_id": self.instance_id, "targets": self.targets}

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "InstanceRecord":
        if data["kind"] not in ("Creating", "Present"):
            raise ValueError("unknown instance record %r" % (data["kind"],))
        return cls(data["kind"], data["vm_name"], data["location"], data.get("instance_id"), data["targets"])
