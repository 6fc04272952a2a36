# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The launch machine's states (vm/launch.py), typed, and what readers may ask of any journalled state.

  Reconciling -> Planning -> [Preparing -> Creating -> Booting -> Connecting]* -> Ready
  with NextOffer, Compensating (embeds a teardown state), Exhausted, Aborted, Leaked.

Each state is a frozen dataclass with its ``kind`` tag; ``to_dict`` is the JSON the journal holds
and ``from_dict`` reads it back (through ``migrate_state``, the one place that upgrades an older
shape). The payloads inside stay the JSON they are journalled as, each made in one place: offers
(``Offer.to_dict``), errors (``ProviderError.to_dict``), targets (``teardown_states.target``), the
VM record (``LaunchMachine._vm_record``) and a search's blocks and history rows (vm/offer_blocks.py,
``LaunchMachine._leave_offer``).

A search has two layouts. A running one (``RunningSearch``) holds its cursor and the offer in hand,
its planned offers and history being rows of the journal's launch_search table (vm/search_rows.py);
a finished one (``WholeSearch``) holds every offer and its whole history: Ready, Exhausted and
Aborted carry it. An attempt state journalled before the launch_search table holds a WholeSearch
too (0.1.0's release notes promise such a search resumes; the launch moves it to the table at its
next offer).

Readers (service, health, status, sweep, primitives, the inventory) load a journal row with
``load_journalled`` and ask it through the accessors at the end: ``owned_targets``, ``vm_record``,
``last_vm_record``, ``ready_vm``, ``search_of``, ``offer_in_hand``, ``reason_of``, ``targets_of``.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Dict, List, Literal, Optional, Tuple, Union

from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journal_sql import JournalError
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import Offer, SshEndpoint
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import teardown_states as ts
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm.teardown_states import (
    InstanceRecord, Target, TeardownState,
)

# The journal's machine kind of a launch row (LaunchMachine.KIND).
LAUNCH_KIND = "launch"

# JSON payloads, as journalled (see the module docstring for where each is made).
OfferData = Dict[str, Any]
ErrorData = Dict[str, Any]
Block = Dict[str, Any]
HistoryRow = Dict[str, Any]
VmRecord = Dict[str, Any]
Then = Literal["NextOffer", "Planning", "Aborted"]


# -- searches ---------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class RunningSearch:
    """A search under way: ``plan`` names its rows in launch_search; ``blocked`` keeps only the blocks
    that can still skip a later offer."""

    plan: str
    size: int
    cursor: int
    offer: OfferData
    blocked: List[Block]
    round: int

    def to_dict(self) -> Dict[str, Any]:
        return {"plan": self.plan, "size": self.size, "cursor": self.cursor, "offer": self.offer,
                "blocked": self.blocked, "round": self.round}

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "RunningSearch":
        return cls(data["plan"], data["size"], data["cursor"], data["offer"], data["blocked"], data["round"])

    @property
    def current(self) -> OfferData:
        return self.offer


@dataclasses.dataclass(frozen=True)
class WholeSearch:
    """Every offer of a search (``cursor``: the one it reached), what became of each offer it left
    (``history``) and every block it met."""

    offers: List[OfferData]
    cursor: int
    blocked: List[Block]
    history: List[HistoryRow]
    round: int

    def to_dict(self) -> Dict[str, Any]:
        return {"offers": self.offers, "cursor": self.cursor, "blocked": self.blocked, "history": self.history,
                "round": self.round}

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "WholeSearch":
        return cls(data["offers"], data["cursor"], data["blocked"], data["history"], data["round"])

    @property
    def size(self) -> int:
        return len(self.offers)

    @property
    def current(self) -> Optional[OfferData]:
        """The offer at the cursor (the one a Ready VM came up on); None for a search without offers."""
        return self.offers[self.cursor] if self.cursor < len(self.offers) else None


Search = Union[RunningSearch, WholeSearch]


def empty_search(round_no: int) -> WholeSearch:
    return WholeSearch([], 0, [], [], round_no)


def search_from_dict(data: Dict[str, Any]) -> Search:
    """Either layout, as journalled (a running search has a plan id)."""
    if "plan" in data:
        return RunningSearch.from_dict(data)
    return WholeSearch.from_dict(data)


def _search_or_none(data: Optional[Dict[str, Any]]) -> Optional[Search]:
    return search_from_dict(data) if data is not None else None


def _whole_or_none(data: Optional[Dict[str, Any]]) -> Optional[WholeSearch]:
    return WholeSearch.from_dict(data) if data is not None else None


def _dump(search: Optional[Search]) -> Optional[Dict[str, Any]]:
    return search.to_dict() if search is not None else None


# -- the states -------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Reconciling:
    """The first state of a run: what the key's journal row held before it (``previous``, a state of the
    ``previous_kind`` machine), to reuse, finish or clear before anything new is planned."""

    previous: Optional[Union["LaunchState", TeardownState]]
    previous_kind: Optional[str]
    kind: ClassVar[Literal["Reconciling"]] = "Reconciling"

    def to_dict(self) -> Dict[str, Any]:
        return {"kind": self.kind, "previous": self.previous.to_dict() if self.previous is not None else None,
                "previous_kind": self.previous_kind}

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "Reconciling":
        previous = load_journalled(data["previous"], data["previous_kind"])
        if isinstance(previous, InstanceRecord):
            raise ValueError("Reconciling: a launch never follows an instance record")
        return cls(previous, data["previous_kind"])


@dataclasses.dataclass(frozen=True)
class Planning:
    """Ask every cloud for offers (``round``: how many searches of this run came before)."""

    round: int
    kind: ClassVar[Literal["Planning"]] = "Planning"

    def to_dict(self) -> Dict[str, Any]:
        return {"kind": self.kind, "round": self.round}

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "Planning":
        return cls(data["round"])


@dataclasses.dataclass(frozen=True)
class Preparing:
    """Make the offer's side resources (prepare); nothing billable yet."""

    search: Search
    kind: ClassVar[Literal["Preparing"]] = "Preparing"

    def to_dict(self) -> Dict[str, Any]:
        return {"kind": self.kind, "search": self.search.to_dict()}

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "Preparing":
        return cls(search_from_dict(data["search"]))


@dataclasses.dataclass(frozen=True)
class Creating:
    """Journalled with the prepared data before create is called: from here on an instance may exist."""

    search: Search
    prepared: Dict[str, Any]
    kind: ClassVar[Literal["Creating"]] = "Creating"

    def to_dict(self) -> Dict[str, Any]:
        return {"kind": self.kind, "search": self.search.to_dict(), "prepared": self.prepared}

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "Creating":
        return cls(search_from_dict(data["search"]), data["prepared"])


@dataclasses.dataclass(frozen=True)
class Booting:
    """Wait for the instance (``adopted``: made by an earlier attempt whose commit was lost) to run."""

    search: Search
    instance_id: str
    adopted: bool
    kind: ClassVar[Literal["Booting"]] = "Booting"

    def to_dict(self) -> Dict[str, Any]:
        return {"kind": self.kind, "search": self.search.to_dict(), "instance_id": self.instance_id,
                "adopted": self.adopted}

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "Booting":
        return cls(search_from_dict(data["search"]), data["instance_id"], data["adopted"])


@dataclasses.dataclass(frozen=True)
class Connecting:
    """Log in over SSH. A new instance: its search and the ``zone`` the cloud placed it in. A VM kept from
    an earlier run (``reused``): no search, its journalled ``vm`` record."""

    search: Optional[Search]
    instance_id: str
    endpoint: SshEndpoint
    reused: bool
    zone: Optional[str] = None
    vm: Optional[VmRecord] = None
    kind: ClassVar[Literal["Connecting"]] = "Connecting"

    def to_dict(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {"kind": self.kind, "search": _dump(self.search), "instance_id": self.instance_id,
                               "endpoint": self.endpoint.to_dict(), "reused": self.reused, "zone": self.zone}
        if self.vm is not None:
            out["vm"] = self.vm
        return out

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "Connecting":
        return cls(_search_or_none(data["search"]), data["instance_id"], SshEndpoint.from_dict(data["endpoint"]),
                   data["reused"], data["zone"], data.get("vm"))


@dataclasses.dataclass(frozen=True)
class NextOffer:
    """Leave the offer in hand (``error``: why; None: it was blocked) for the next one the blocks allow."""

    search: Search
    error: Optional[ErrorData]
    kind: ClassVar[Literal["NextOffer"]] = "NextOffer"

    def to_dict(self) -> Dict[str, Any]:
        return {"kind": self.kind, "search": self.search.to_dict(), "error": self.error}

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "NextOffer":
        return cls(search_from_dict(data["search"]), data["error"])


@dataclasses.dataclass(frozen=True)
class Compensating:
    """Run ``teardown`` (the teardown machine's state) over what the attempt may own, then go on to ``then``
    (with ``error``, the attempt's, for NextOffer; ``reason`` for Aborted)."""

    search: Optional[Search]
    then: Then
    error: Optional[ErrorData]
    reason: str
    teardown: TeardownState
    kind: ClassVar[Literal["Compensating"]] = "Compensating"

    def to_dict(self) -> Dict[str, Any]:
        return {"kind": self.kind, "search": _dump(self.search), "then": self.then, "error": self.error,
                "reason": self.reason, "teardown": self.teardown.to_dict()}

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "Compensating":
        if data["then"] not in ("NextOffer", "Planning", "Aborted"):
            raise ValueError("Compensating: unknown next state %r" % (data["then"],))
        return cls(_search_or_none(data["search"]), data["then"], data["error"], data["reason"],
                   ts.from_dict(data["teardown"]))


@dataclasses.dataclass(frozen=True)
class Exhausted:
    """Every offer failed or was blocked. Terminal, unless the run retries until up (then: plan again)."""

    search: WholeSearch
    reason: str
    kind: ClassVar[Literal["Exhausted"]] = "Exhausted"

    def to_dict(self) -> Dict[str, Any]:
        return {"kind": self.kind, "search": self.search.to_dict(), "reason": self.reason}

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "Exhausted":
        return cls(WholeSearch.from_dict(data["search"]), data["reason"])


@dataclasses.dataclass(frozen=True)
class Ready:
    """Terminal: the VM is up and logged into; ``vm`` is its record (what every later run reads)."""

    vm: VmRecord
    reused: bool
    search: Optional[WholeSearch]
    kind: ClassVar[Literal["Ready"]] = "Ready"

    def to_dict(self) -> Dict[str, Any]:
        return {"kind": self.kind, "vm": self.vm, "reused": self.reused, "search": _dump(self.search)}

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "Ready":
        return cls(data["vm"], data["reused"], _whole_or_none(data["search"]))


@dataclasses.dataclass(frozen=True)
class Aborted:
    """Terminal: the run stopped for ``reason``. ``targets``: what it may still own (a reconcile that could
    not tell); ``vm``: a VM it kept (never torn down for a failed re-check); ``search``: the search it ran."""

    reason: str
    targets: List[Target] = dataclasses.field(default_factory=list)
    vm: Optional[VmRecord] = None
    search: Optional[WholeSearch] = None
    kind: ClassVar[Literal["Aborted"]] = "Aborted"

    def to_dict(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {"kind": self.kind, "reason": self.reason, "targets": self.targets}
        if self.vm is not None:
            out["vm"] = self.vm
        if self.search is not None:
            out["search"] = self.search.to_dict()
        return out

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "Aborted":
        return cls(data["reason"], data.get("targets") or [], data.get("vm"), _whole_or_none(data.get("search")))


@dataclasses.dataclass(frozen=True)
class Leaked:
    """Terminal: a compensation gave up; ``targets`` names every location and id that may still bill (the
    next run starts by compensating them)."""

    targets: List[Target]
    reason: str
    kind: ClassVar[Literal["Leaked"]] = "Leaked"

    def to_dict(self) -> Dict[str, Any]:
        return {"kind": self.kind, "targets": self.targets, "reason": self.reason}

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "Leaked":
        return cls(data["targets"], data["reason"])


LaunchState = Union[Reconciling, Planning, Preparing, Creating, Booting, Connecting, NextOffer, Compensating,
                    Exhausted, Ready, Aborted, Leaked]
STATES: Tuple[Any, ...] = (Reconciling, Planning, Preparing, Creating, Booting, Connecting, NextOffer, Compensating,
                           Exhausted, Ready, Aborted, Leaked)
_BY_KIND: Dict[str, Any] = {cls.kind: cls for cls in STATES}
# Attempt states: each may own resources at its offer's location.
Attempt = Union[Preparing, Creating, Booting, Connecting]
ATTEMPT = (Preparing, Creating, Booting, Connecting)
TERMINAL = (Ready, Aborted, Leaked)


def migrate_state(kind: str, data: Dict[str, Any]) -> Dict[str, Any]:
    """``data`` (a journalled launch state of ``kind``) in the shape this version writes: the one place
    an older shape is upgraded, so that every state a released version journalled loads (0.1.0, and
    commit 9faadf1 within it; tests/unit/test_journals_9faadf1.py resumes one of each).

    * Aborted is written with ``targets`` always, ``vm`` and ``search`` only when it has them; 0.1.0 left
      out ``targets`` where a resumed step kept failing, and wrote ``"vm": null`` where a reconcile failed
      without a VM: both mean the same.
    * Connecting always names its ``zone``; 0.1.0 wrote none for a reused VM (its record has it).
    * A VM record (Ready's, a kept one of Aborted, a reused VM's in Connecting) written before records
      kept their offer's places (9faadf1 among them): its region and zone are its places, matched case by
      case, as the reuse check judged such a record (vm/request_match.py)."""
    if kind == Aborted.kind:
        data = dict(data, targets=data.get("targets") or [])
        if data.get("vm") is None:
            data.pop("vm", None)
        if data.get("search") is None:
            data.pop("search", None)
    if kind == Connecting.kind and "zone" not in data:
        data = dict(data, zone=None)
    vm = data.get("vm") if kind in (Ready.kind, Aborted.kind, Connecting.kind) else None
    if isinstance(vm, dict) and "places" not in vm:
        location = vm["location"]
        data = dict(data, vm=dict(vm, places=[p for p in (location["region"], location.get("zone")) if p],
                                  regions_fold=False))
    return data


def from_dict(data: Dict[str, Any]) -> LaunchState:
    """The launch state a journalled dict holds (KeyError, TypeError or ValueError for one no version wrote)."""
    kind = data["kind"]
    cls = _BY_KIND.get(kind)
    if cls is None:
        raise ValueError("unknown launch state %r" % (kind,))
    state: LaunchState = cls.from_dict(migrate_state(kind, data))
    return state


# -- what readers ask of a journal row ---------------------------------------------------------

JournalledState = Union[LaunchState, TeardownState, InstanceRecord]


class UnreadableState(JournalError):
    """A journalled state this version cannot read; ``what`` says so without the state's JSON."""

    def __init__(self, what: str, data: Any):
        super().__init__("%s: %.300s" % (what, data))
        self.what = what


def load_journalled(data: Optional[Dict[str, Any]], machine_kind: Optional[str]) -> Optional[JournalledState]:
    """The typed state of a journal row (its JSON ``state`` and machine ``kind``); None for no row.
    Raises UnreadableState for a machine kind or a state this version cannot read."""
    if data is None:
        return None
    try:
        if machine_kind == LAUNCH_KIND:
            return from_dict(data)
        if machine_kind in ts.TEARDOWN_KINDS:
            return ts.from_dict(data)
        if machine_kind == ts.INSTANCE_RECORD_KIND:
            return InstanceRecord.from_dict(data)
    except (KeyError, TypeError, ValueError) as exc:
        raise UnreadableState("a %s state this version cannot read (%s: %s)" % (machine_kind, type(exc).__name__, exc),
                              data) from exc
    raise UnreadableState("a row of an unknown machine kind %r" % (machine_kind,), data)


def held_search(state: Union[Attempt, NextOffer, Compensating]) -> Search:
    """The search of a state that holds one (ValueError: it holds none)."""
    if state.search is None:
        raise ValueError("%s holds no search" % state.kind)
    return state.search


def held_offer(state: Union[Attempt, NextOffer]) -> OfferData:
    """The offer in hand of a state at one: an attempt state of a search, NextOffer (ValueError: none)."""
    offer = state.search.current if state.search is not None else None
    if offer is None:
        raise ValueError("%s holds no offer" % state.kind)
    return offer


def offer_in_hand(state: Optional[JournalledState]) -> Optional[OfferData]:
    """The offer an attempt state is at (as journalled: ``Offer.to_dict``); None for any other state."""
    if isinstance(state, ATTEMPT) and state.search is not None:
        return state.search.current
    return None


def owned_targets(state: Optional[JournalledState]) -> List[Target]:
    """Every location (and instance id) a journalled state may own, of any machine."""
    match state:
        case None:
            return []
        case Reconciling():
            return owned_targets(state.previous)
        case InstanceRecord():
            return ts.merge_targets(state.targets)
        case ts.TeardownFields():
            return ts.merge_targets(state.targets)
    out: List[Target] = []
    vm = vm_record(state)
    if vm:
        out.append(ts.target(vm["location"], [vm["instance_id"]]))
    targets = targets_of(state)
    if targets:
        out = ts.merge_targets(out, targets)
    if isinstance(state, Compensating):
        out = ts.merge_targets(out, state.teardown.targets)
    offer = offer_in_hand(state)
    if offer is not None:
        ids = [state.instance_id] if isinstance(state, (Booting, Connecting)) and state.instance_id else []
        # Creating is journalled before the create call: from there on, an instance may exist.
        created = not isinstance(state, Preparing)
        out = ts.merge_targets(out, [ts.target(Offer.from_dict(offer).location.to_dict(), ids, created)])
    return out


def vm_record(state: Optional[JournalledState]) -> Optional[VmRecord]:
    """The VM record a launch state carries itself: Ready's, the one an Aborted run kept, a reused VM's
    while it is logged into (Connecting); None otherwise."""
    if isinstance(state, (Ready, Aborted, Connecting)):
        return state.vm
    return None


def last_vm_record(state: Optional[JournalledState]) -> Optional[VmRecord]:
    """``vm_record``, or, while a run reconciles it, the record of the launch state before it."""
    if isinstance(state, Reconciling):
        return vm_record(state.previous)
    return vm_record(state)


def ready_vm(state: Optional[JournalledState]) -> Optional[VmRecord]:
    """The VM record of a Ready state; None for any other."""
    return state.vm if isinstance(state, Ready) else None


def search_of(state: Optional[JournalledState]) -> Optional[Search]:
    """The search a launch state carries (running or whole); None for none."""
    if isinstance(state, (Preparing, Creating, Booting, Connecting, NextOffer, Compensating, Exhausted, Ready, Aborted)):
        return state.search
    return None


def reason_of(state: Optional[JournalledState]) -> Optional[str]:
    """Why the state is where it is, where it says (an ending's reason, a compensation's, a teardown's)."""
    if isinstance(state, (Compensating, Exhausted, Aborted, Leaked, ts.TeardownFields)):
        return state.reason
    return None


def targets_of(state: Optional[JournalledState]) -> List[Target]:
    """The targets the state itself names (a teardown's, a Leaked or Aborted launch's, an instance record's),
    as journalled; [] for a state that names none."""
    if isinstance(state, (Aborted, Leaked, InstanceRecord, ts.TeardownFields)):
        return state.targets
    return []


# The Ready state's VM record, as the journal's SQL reads it (vm/projection.py): the JSON keys of the kind
# tag and of Ready's record, named here beside the dataclass (tests/unit/test_launch_states.py checks them
# against ``to_dict``).
READY_VM_JSON = ("kind", Ready.kind, "vm")


def ready_vm_in(data: Optional[Dict[str, Any]]) -> Optional[VmRecord]:
    """The VM record of a journalled Ready state, read from its JSON without loading the state (or from the
    part of it READY_VM_JSON names, ``ready_part``): listings of many VMs parse no search. None for any other."""
    kind_key, ready, vm_key = READY_VM_JSON
    vm = data.get(vm_key) if isinstance(data, dict) and data.get(kind_key) == ready else None
    return vm if isinstance(vm, dict) else None


def ready_part(vm: VmRecord) -> Dict[str, Any]:
    """The part of a Ready state's JSON that READY_VM_JSON names: what a listing keeps of it."""
    kind_key, ready, vm_key = READY_VM_JSON
    return {kind_key: ready, vm_key: vm}
