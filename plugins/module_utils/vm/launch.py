# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Launch machine (the seed's 4.3):

  Reconciling -> Planning -> [Preparing -> Creating -> Booting -> Connecting]* -> Ready
  with NextOffer, Compensating (embeds the teardown machine), Exhausted, Aborted, Leaked.

The states are the typed values of vm/launch_states.py, which also says how a search is
journalled; ``step`` dispatches by ``match`` over every state (a state without a handler
fails the type check). The failover cursor travels in every attempt state, so it survives a
crash. A running search's state is of constant size whatever the number of offers: its plan
is written once per round to the launch_search table (seq 0) and each offer left adds a row
(seq = its cursor + 1: what happened to it, and the block it caused), each committed in the
same transaction as the state that refers to it (``Next(rows=...)``), so a crash between any
two writes resumes exactly. ``blocked`` keeps only the blocks that can still skip a later
offer (an offer-scoped block skips just the offer already left).

Recovery points (seed 004), per transition:
  * Creating is journalled (with the offer and prepared data) before create is
    called; Creating always observes first, so a crash between create and the
    commit of Booting adopts the instance that carries the VM identity instead of
    creating a second one. An ambiguous create (a Transient error) is reconciled
    the same way on the retry.
  * Booting carries the instance id: every wait after create is resumable.
  * Compensating carries the teardown's own state; a crash inside it resumes the
    teardown, whose steps observe before they delete.
  * Leaked names every location and id still present; the next run starts by
    compensating it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import uuid
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple, Union, assert_never

from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import run_options
from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.executor import (
    Machine, Next, Poll, Retry, StepCx, StepResult, poll_delay,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.retry import RetryPolicy
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    BlockScope, ErrorKind, Location, Offer, Provider, ProviderError, SshEndpoint, Status,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import launch_states as ls, projection
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import teardown as td, teardown_states as ts
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm.launch_states import (
    ATTEMPT, TERMINAL, Aborted, Attempt, Booting, Compensating, Connecting, Creating, ErrorData, Exhausted,
    LaunchState, Leaked, NextOffer, OfferData, Planning, Preparing, Ready, Reconciling, RunningSearch, Search,
    Then, VmRecord, WholeSearch, empty_search, held_offer, held_search, search_of,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm.planning import plan_search
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm.request_match import request_mismatch, request_of
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm.offer_blocks import (
    is_blocked, make_block, next_cursor, refused_everywhere,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm.search_rows import (
    SEARCH_TABLES, clear_rows, plan_body, plan_rows, whole_search,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm.ssh import (
    HostKeyMismatch, SshNotReady, public_key_fingerprint,
)

# Readiness waits (the executor's schedule, machine/executor.py poll_delay): a boot is observed
# after 1 s, then less often as it goes on, up to the cloud's poll_interval_s; an SSH login is
# retried after 0.25 s (a fresh sshd answers within a moment), backing off to 2 s. A cloud whose
# instances are up within moments gives its own first wait (readiness_poll_first_s).
BOOT_POLL_FIRST_S = 1.0
SSH_POLL_FIRST_S = 0.25
SSH_POLL_MAX_S = 2.0

Row = Tuple[str, Sequence[Any]]
AttemptKey = Tuple[str, str, int]


def host_key_alias(vm_name: str, location: Dict[str, Any], instance_id: str) -> str:
    """known_hosts name of one instance: a new instance never trips over an old key."""
    digest = hashlib.sha256(("%s|%s" % (Location.from_dict(location), instance_id)).encode()).hexdigest()
    return "gpuprov-%s-%s" % (vm_name, digest[:12])


def _error(kind: str, msg: str, block: Optional[str] = None) -> ErrorData:
    return ProviderError(kind, msg, block).to_dict()


def initial(previous: Optional[Dict[str, Any]], previous_kind: Optional[str]) -> Reconciling:
    """The first state of a launch, carrying what the journal knew before it (the key's row: its JSON
    state and machine kind, as the executor gives them)."""
    found = ls.load_journalled(previous, previous_kind)
    if isinstance(found, ts.InstanceRecord):
        raise ls.UnreadableState("a launch never follows an instance record (%s)" % previous_kind, previous)
    return Reconciling(found, previous_kind)


def owned_targets(state: Optional[Dict[str, Any]], kind: Optional[str]) -> List[ts.Target]:
    """Every location (and instance id) a journal row's state (its JSON and machine kind) may own, of
    any machine (launch_states.owned_targets, of the row)."""
    return ls.owned_targets(ls.load_journalled(state, kind))


class LaunchMachine(Machine[LaunchState]):
    KIND = ls.LAUNCH_KIND

    def __init__(self, ctx: Any):
        self.ctx = ctx
        self.teardown = td.TeardownMachine(ctx)
        self._cx: Optional[StepCx] = None
        self._tables_on: Any = None
        self._plan: Tuple[Optional[str], List[OfferData]] = (None, [])   # the last plan read or made
        # The attempts (_attempt_key) for which this process has called prepare or create, seen an instance of
        # ours, or resumed from the journal (the run that journalled it may have made something). A
        # Credentials error of an attempt not in it made nothing: the cloud is left without compensating.
        self._touched: Set[AttemptKey] = set()
        self._stepped = False

    # -- Machine interface -----------------------------------------------------------
    def load_state(self, data: Dict[str, Any]) -> LaunchState:
        return ls.from_dict(data)

    def dump_state(self, state: LaunchState) -> Dict[str, Any]:
        return state.to_dict()

    def is_terminal(self, state: LaunchState) -> bool:
        if isinstance(state, Exhausted):
            return not self.ctx.settings.retry_until_up
        return isinstance(state, TERMINAL)

    def label(self, state: LaunchState) -> str:
        if isinstance(state, Compensating):
            return "Compensating/%s" % state.teardown.kind
        if isinstance(state, ATTEMPT) and state.search is not None:
            search = state.search
            offer_id = Offer.from_dict(held_offer(state)).offer_id
            return "%s (offer %d of %d: %s)" % (state.kind, search.cursor + 1, search.size, offer_id)
        return state.kind

    def retry_policy(self, state: LaunchState) -> RetryPolicy:
        if isinstance(state, Compensating):
            return self.teardown.retry_policy(state.teardown)
        return RetryPolicy(max_attempts=self.ctx.settings.step_attempts)

    def on_retries_exhausted(self, state: LaunchState, last_error: str) -> LaunchState:
        match state:
            case Compensating():
                return self._after_teardown(state, self.teardown.on_retries_exhausted(state.teardown, last_error)).state
            case Reconciling():
                # Fail closed: never plan a second VM while the first one's fate is unknown.
                return Aborted("cannot reconcile the journalled VM: %s" % last_error, ls.owned_targets(state),
                               vm=ls.vm_record(state.previous))
            case Planning():
                return Exhausted(empty_search(state.round), "planning failed: %s" % last_error)
            case Connecting() if state.reused:
                return self._keep_reused(state.vm, "SSH login kept failing: %s" % last_error)
            case Preparing() | Creating():
                # The cloud kept failing transiently (unreachable, throttling): block all of it for
                # the rest of this search and try the next cloud.
                return self._compensate(state, "NextOffer", _error(
                    ErrorKind.FAILED, "%s did not answer: %s" % (held_offer(state)["cloud"], last_error), BlockScope.CLOUD))
            case Booting() | Connecting():
                return self._compensate(state, "NextOffer", _error(ErrorKind.FAILED, last_error))
            case NextOffer() | Exhausted() | Ready() | Aborted() | Leaked():
                return Aborted(last_error)
            case _:
                assert_never(state)

    def on_cancel(self, state: LaunchState) -> Optional[LaunchState]:
        match state:
            case Reconciling():
                # An interrupted reuse check keeps the VM.
                return Aborted("cancelled by the user", ls.owned_targets(state), vm=ls.vm_record(state.previous))
            case Planning() | NextOffer() | Exhausted():
                return Aborted("cancelled by the user")
            case Connecting() if state.reused:
                return self._keep_reused(state.vm, "cancelled by the user")
            case Preparing() | Creating() | Booting() | Connecting():
                return self._compensate(state, "Aborted", None, reason="cancelled by the user")
            case Compensating():
                if state.then != "Aborted":
                    return dataclasses.replace(state, then="Aborted", reason="cancelled by the user")
                return None
            case Ready() | Aborted() | Leaked():
                return None
            case _:
                assert_never(state)

    def step(self, state: LaunchState, cx: StepCx) -> StepResult[LaunchState]:
        self._cx = cx
        if not self._stepped:
            self._stepped = True
            if isinstance(state, ATTEMPT) and state.search is not None:
                self._touched.add(self._attempt_key(state))   # resumed: made by the run that journalled it?
        if self._tables_on is not cx.journal:
            cx.journal.ensure_tables(SEARCH_TABLES)
            self._tables_on = cx.journal
        match state:
            case Reconciling():
                return self._step_reconciling(state, cx)
            case Planning():
                return self._step_planning(state, cx)
            case Preparing():
                return self._step_preparing(state, cx)
            case Creating():
                return self._step_creating(state, cx)
            case Booting():
                return self._step_booting(state, cx)
            case Connecting():
                return self._step_connecting(state, cx)
            case NextOffer():
                return self._leave_offer(state, state.error)
            case Compensating():
                return self._step_compensating(state, cx)
            case Exhausted():
                return self._step_exhausted(state, cx)
            case Ready() | Aborted() | Leaked():
                raise ValueError("%s is terminal: there is no step to take" % state.kind)
            case _:
                assert_never(state)

    # -- the search's rows -------------------------------------------------------------
    @property
    def _step_cx(self) -> StepCx:
        if self._cx is None:
            raise ValueError("the launch machine reads its search rows only while it steps")
        return self._cx

    def _offers(self, search: Search) -> List[OfferData]:
        if isinstance(search, WholeSearch):
            return search.offers
        if self._plan[0] != search.plan:
            self._plan = (search.plan, plan_body(self._step_cx.journal, self._step_cx.key, search)["offers"])
        return self._plan[1]

    def _full_search(self, search: Optional[Search], left: Optional[Dict[str, Any]] = None) -> Optional[WholeSearch]:
        return whole_search(self._step_cx.journal, self._step_cx.key, search, left)

    def _new_plan(self, key: str, offers: List[OfferData], history: List[Dict[str, Any]],
                  blocked: List[Dict[str, Any]]) -> Tuple[str, List[Row]]:
        """A plan id for ``offers`` and the rows that write it (replacing the key's older plans)."""
        plan = uuid.uuid4().hex[:16]
        self._plan = (plan, offers)
        body = json.dumps({"offers": offers, "history": history, "blocked": blocked}, sort_keys=True)
        return plan, plan_rows(key, plan, body)

    # -- helpers ---------------------------------------------------------------------
    def _compensate(self, state: LaunchState, then: Then, error: Optional[ErrorData],
                    reason: str = "", targets: Optional[List[ts.Target]] = None) -> Compensating:
        targets = targets if targets is not None else ls.owned_targets(state)
        why = reason or (error["msg"] if error else "")
        return Compensating(search_of(state), then, error, why, ts.initial(self.ctx.settings.vm_name, targets, why))

    @staticmethod
    def _keep_reused(vm: Optional[VmRecord], reason: str) -> Aborted:
        """A VM that was up before this run is never torn down for a failed re-check."""
        return Aborted(reason, vm=vm)

    def _provider_for(self, offer: OfferData) -> Provider:
        provider: Provider = self.ctx.provider(offer["cloud"])
        return provider

    @staticmethod
    def _attempt_key(state: Attempt) -> AttemptKey:
        search = held_search(state)
        which = search.plan if isinstance(search, RunningSearch) else Offer.from_dict(held_offer(state)).offer_id
        return (state.kind, which, search.cursor)

    def _handle(self, state: Attempt, exc: ProviderError, created: bool, made_nothing: bool = False,
                instance_possible: bool = True) -> StepResult[LaunchState]:
        """Map a classified failure of an attempt state to the core's action. ``made_nothing``: no call
        that makes anything was made for this attempt before the failing one; ``instance_possible``: a
        create call may have been made (or an instance of ours was seen) here."""
        if exc.kind == ErrorKind.TRANSIENT:
            return Retry(str(exc), after=exc.retry_after)
        if exc.kind == ErrorKind.CREDENTIALS:
            # Never retried: the cloud refuses these credentials, so all of it is left for this search and
            # the search goes on; what may exist here is still compensated (a refused teardown is Leaked).
            error = dict(exc.to_dict(), block=BlockScope.CLOUD)
            if made_nothing:
                return self._leave_offer(state, error, str(exc))
            where = Offer.from_dict(held_offer(state)).location.to_dict()
            targets = None if instance_possible else [ts.target(where, [], created=False)]
            return Next(self._compensate(state, "NextOffer", error, targets=targets), str(exc))
        if exc.fatal:
            return Next(self._compensate(state, "Aborted", exc.to_dict()), str(exc))
        if exc.kind == ErrorKind.UNAVAILABLE and not created:
            # Nothing to undo: straight on to the next offer, in one write.
            return self._leave_offer(state, exc.to_dict(), str(exc))
        return Next(self._compensate(state, "NextOffer", exc.to_dict()), str(exc))

    @staticmethod
    def _next_offer(state: Union[Attempt, Compensating], error: Optional[ErrorData]) -> NextOffer:
        return NextOffer(held_search(state), error)

    # -- steps -----------------------------------------------------------------------
    def _step_reconciling(self, state: Reconciling, cx: StepCx) -> StepResult[LaunchState]:
        previous, previous_kind = state.previous, state.previous_kind
        if (previous_kind == td.TeardownMachine.KIND and isinstance(previous, ts.TeardownFields)
                and not isinstance(previous, ts.TERMINAL)):
            # A down was interrupted: finish it before planning anything new.
            return Next(Compensating(None, "Planning", None, "finishing an interrupted teardown", previous),
                        "an interrupted teardown is finished first")
        vm = ls.vm_record(previous)
        if vm:
            location = Location.from_dict(vm["location"])
            begin_login = getattr(self.ctx.ssh_check, "begin", None)
            if begin_login is not None and vm.get("ssh"):
                # Usually the VM is still there at its endpoint: log in while the cloud answers
                # (Connecting takes the outcome when the endpoint it observes is the same).
                begin_login(SshEndpoint.from_dict(vm["ssh"]), vm["host_key_alias"])
            try:
                observed = self.ctx.provider(location.cloud).observe(location, self.ctx.settings.vm_name)
            except ProviderError as exc:
                if not exc.fatal:
                    raise   # retried within the budget, then Aborted (on_retries_exhausted)
                # Missing or refused credentials: no retry can tell what became of the VM; fail closed now.
                return Next(self.on_retries_exhausted(state, str(exc)), str(exc))
            found = [o for o in observed if o.owned_by(self.ctx.journal_id)]
            mine = [o for o in found if o.instance_id == vm["instance_id"]]
            differs = request_mismatch(vm, self.ctx.settings)
            if differs and mine and self.ctx.settings.recreate:
                why = "recreate: the VM does not match the request (%s)" % "; ".join(differs)
                # Plan the new request before anything is torn down: a request no cloud can try
                # (a typo, a GPU nowhere on offer) must never cost the user the VM they have.
                planned = plan_search(self.ctx.settings, self.ctx.provider)
                if not planned.chosen:
                    if planned.transient:
                        return Retry("recreate: cannot tell yet whether the new request can be met: %s"
                                     % planned.transient_text())
                    kept = ("%s; no cloud can try the new request (%s), so nothing was torn down and the VM is "
                            "kept" % (why, "; ".join(planned.reasons()) or "no offers"))
                    return Next(self._keep_reused(vm, kept), "recreate refused; VM kept")
                stale = ts.merge_targets(ls.owned_targets(previous),
                                         [ts.target(vm["location"], [o.instance_id for o in found])])
                return Next(self._compensate(state, "Planning", None, reason=why, targets=stale), why)
            if differs and mine:
                why = ("%s exists but does not match the request: %s; set recreate: true to replace it, or ask "
                       "for what it has" % (self.ctx.settings.vm_name, "; ".join(differs)))
                return Next(self._keep_reused(vm, why), "request differs; VM kept")
            if mine and mine[0].usable and mine[0].endpoint is not None:
                return Next(Connecting(None, vm["instance_id"], mine[0].endpoint, True, vm=vm),
                            "reusing %s %s (Running)" % (location, vm["instance_id"]))
            stale = ts.merge_targets(ls.owned_targets(previous),
                                     [ts.target(vm["location"], [o.instance_id for o in found])])
            why = ("journalled instance %s is %s" % (vm["instance_id"], mine[0].status) if mine
                   else "journalled instance %s is gone" % vm["instance_id"])
            return Next(self._compensate(state, "Planning", None, reason=why, targets=stale), why)
        targets = ls.owned_targets(previous)
        if targets and previous is not None and not isinstance(previous, ts.Done):
            why = ls.reason_of(previous) or "the previous run may have left resources"
            return Next(self._compensate(state, "Planning", None, reason="resolving: %s" % why, targets=targets),
                        "compensating what the previous run left: %s" % why)
        return Next(Planning(0), "nothing to reuse; planning")

    def _step_planning(self, state: Planning, cx: StepCx) -> StepResult[LaunchState]:
        settings = self.ctx.settings
        # Journal the (non-secret) options this search reaches each cloud with, before any
        # cloud call can make something: later steps and ``down`` look where it was made.
        for cloud, options in sorted(self.ctx.adopt_current_options().items()):
            run_options.record(cx.journal, cx.key, cx.owner, cloud, options)
        # Round 0 may take the fleet's recent plan of this request; a later round asks again what is free now.
        self.ctx.plan_afresh(state.round > 0)
        planned = plan_search(self.ctx.settings, self.ctx.provider)
        offers = [offer.to_dict() for offer in planned.chosen]
        history = planned.history
        if planned.transient and not offers:
            # Only retry planning when no other cloud has an offer to try meanwhile, no sooner
            # than the slowest Retry-After asked.
            return Retry(planned.transient_text(),
                         after=max(exc.retry_after or 0 for _cloud, exc in planned.transient) or None)
        if not offers:
            # Aborted only when every cloud refused the request for good: a cloud that planned without an
            # error but has nothing free now makes it Exhausted (retry_until_up waits for it).
            if len(planned.errors) == len(self.ctx.settings.clouds) and all(e.fatal for e in planned.errors):
                return Next(Aborted("; ".join(e.msg for e in planned.errors)), "no cloud can plan this request")
            return Next(Exhausted(WholeSearch(offers, 0, [], history, state.round),
                                  "no offer available: " + "; ".join(planned.reasons() or ["no offers"])),
                        "no offers")
        plan, rows = self._new_plan(cx.key, offers, history, [])
        compact = RunningSearch(plan, len(offers), 0, offers[0], [], state.round)
        return Next(Preparing(compact), "%d offer(s) from %s" % (len(offers), ", ".join(settings.clouds)), rows=rows)

    def _step_preparing(self, state: Preparing, cx: StepCx) -> StepResult[LaunchState]:
        offer = held_offer(state)
        if is_blocked(offer, state.search.blocked):
            return Next(self._next_offer(state, None), "offer blocked by an earlier failure")
        key = self._attempt_key(state)
        made_nothing = key not in self._touched
        self._touched.add(key)
        cx.fence()
        try:
            prepared = self._provider_for(offer).prepare(Offer.from_dict(offer), self.ctx.spec_for(offer["cloud"]))
        except ProviderError as exc:
            return self._handle(state, exc, created=False, made_nothing=made_nothing, instance_possible=False)
        return Next(Creating(state.search, prepared), "prepared")

    def _step_creating(self, state: Creating, cx: StepCx) -> StepResult[LaunchState]:
        offer = held_offer(state)
        provider = self._provider_for(offer)
        location = Offer.from_dict(offer).location
        name = self.ctx.settings.vm_name
        key = self._attempt_key(state)
        try:
            # Observe first: a create whose commit was lost left an instance with our identity.
            found = provider.observe(location, name)
            if found:
                self._touched.add(key)
            foreign = [o for o in found if not o.owned_by(self.ctx.journal_id)]
            if foreign:
                raise ProviderError(ErrorKind.INVALID_REQUEST, "%s exists on %s (%s), made by another controller "
                                    "(journal %s); choose another name, or remove it from the controller that "
                                    "made it" % (name, location, foreign[0].instance_id, foreign[0].journal_id))
            live = [o for o in found if o.live]
            if live:
                return Next(Booting(state.search, live[0].instance_id, True),
                            "adopted %s (created by an earlier attempt)" % live[0].instance_id)
            # A create interrupted half-way left something that will never boot: remove it and
            # create afresh now, rather than adopt it and wait out a boot timeout.
            broken = [o.instance_id for o in found if not o.leaving]
            if broken:
                cx.fence()
                provider.delete(location, name, broken)
            self._touched.add(key)
            cx.fence()
            instance_id = provider.create(Offer.from_dict(offer), state.prepared, self.ctx.spec_for(offer["cloud"]))
        except ProviderError as exc:
            # Even an Unavailable create compensates: prepare may have made side resources here.
            return self._handle(state, exc, created=True, instance_possible=key in self._touched)
        return Next(Booting(state.search, instance_id, False), "created %s" % instance_id)

    def _step_booting(self, state: Booting, cx: StepCx) -> StepResult[LaunchState]:
        offer = held_offer(state)
        location = Offer.from_dict(offer).location
        boot_timeout = self.ctx.boot_timeout(offer["cloud"])
        interval = self.ctx.poll_interval(offer["cloud"])
        first = self._first_poll(offer["cloud"], BOOT_POLL_FIRST_S)
        try:
            # A listing the fleet shares will do if it is no older than this VM's own next poll would be.
            found = self.ctx.observe_booting(offer["cloud"], location, self.ctx.settings.vm_name, cx.in_state,
                                             poll_delay(Poll(interval, first=first), cx.in_state))
        except ProviderError as exc:
            return self._handle(state, exc, created=True)
        mine = [o for o in found if o.instance_id == state.instance_id]
        if not mine:
            # Listings lag creation on some clouds; only a lasting absence means vanished.
            if cx.in_state < min(60.0, boot_timeout / 4.0):
                return Poll(interval, "instance %s not listed yet" % state.instance_id, first=first)
            return Next(self._compensate(state, "NextOffer", _error(ErrorKind.FAILED, "instance vanished while booting")),
                        "instance vanished")
        inst = mine[0]
        if inst.error_kind and inst.status in (Status.FAILED, Status.STOPPED):
            # The cloud said why (a create it accepted, then refused): block as it classified.
            err = _error(inst.error_kind, "instance %s while booting: %s" % (
                inst.status.lower(), inst.reason or "no reason given"), inst.error_block)
            return Next(self._compensate(state, "NextOffer", err), err["msg"])
        if inst.status == Status.FAILED:
            err = _error(ErrorKind.FAILED, "instance failed while booting: %s" % (inst.reason or "no reason given"))
            return Next(self._compensate(state, "NextOffer", err), err["msg"])
        if inst.status in (Status.STOPPED, Status.STOPPING, Status.TERMINATING):
            err = _error(ErrorKind.CAPACITY, "instance %s while booting (preempted?)" % inst.status.lower())
            return Next(self._compensate(state, "NextOffer", err), err["msg"])
        if inst.usable and inst.endpoint is not None:
            # The zone the cloud placed it in, where the offer named only a region (AWS picks one of several).
            zone = inst.location.zone if inst.location else None
            return Next(Connecting(state.search, inst.instance_id, inst.endpoint, False, zone=zone),
                        "running at %s:%d" % (inst.endpoint.host, inst.endpoint.port))
        if cx.in_state > boot_timeout:
            err = _error(ErrorKind.FAILED, "boot timeout: not Running with an SSH endpoint after %.0f s" % boot_timeout)
            return Next(self._compensate(state, "NextOffer", err), err["msg"])
        no_endpoint = "" if inst.endpoint else ", no endpoint yet"
        return Poll(interval, "instance %s: %s%s" % (inst.instance_id, inst.status, no_endpoint), first=first)

    def _first_poll(self, cloud: str, default: float) -> float:
        """The first wait of a readiness poll on ``cloud``: its own where it gives one, else ``default``."""
        first: Optional[float] = self.ctx.capabilities(cloud).readiness_poll_first_s
        return default if first is None else first

    def _step_connecting(self, state: Connecting, cx: StepCx) -> StepResult[LaunchState]:
        if state.reused and state.vm is not None:
            vm = dict(state.vm, python_interpreter=self.ctx.capabilities(
                state.vm["location"]["cloud"]).python_interpreter)
        else:
            vm = self._vm_record(state)
        endpoint = SshEndpoint(state.endpoint.host, state.endpoint.port, state.endpoint.user or vm["ssh"].get("user"))
        try:
            fingerprint = self.ctx.ssh_check(endpoint, vm["host_key_alias"])
        except HostKeyMismatch as exc:
            reason = "host key mismatch on %s:%d: %s" % (endpoint.host, endpoint.port, exc)
            if state.reused:
                return Next(self._keep_reused(state.vm, reason), reason)
            return Next(self._compensate(state, "Aborted", _error(ErrorKind.FAILED, reason)), reason)
        except SshNotReady as exc:
            if cx.in_state > self.ctx.settings.ssh_timeout:
                reason = "SSH login failed for %.0f s: %s" % (self.ctx.settings.ssh_timeout, exc)
                if state.reused:
                    return Next(self._keep_reused(state.vm, reason), reason)
                return Next(self._compensate(state, "NextOffer", _error(ErrorKind.FAILED, reason)), reason)
            return Poll(SSH_POLL_MAX_S, "waiting for SSH on %s:%d: %s" % (endpoint.host, endpoint.port, exc),
                        first=self._first_poll(vm["location"]["cloud"], SSH_POLL_FIRST_S))
        vm = dict(vm, ssh=endpoint.to_dict(), host_key_fingerprint=fingerprint)
        if self.ctx.files is not None:
            # Journalled with the VM: a controller without this known_hosts regenerates it from the journal.
            pinned = self.ctx.files.known_key(vm["host_key_alias"])
            if pinned:
                vm["host_key"] = {"type": pinned[0], "key": pinned[1]}
            self.ctx.files.write_vm(vm)
        # The key that logged in: a later run holding another one is refused before it touches the VM.
        vm["ssh_key_fingerprint"] = public_key_fingerprint(self.ctx.settings.spec.ssh_public_key)
        return Next(Ready(vm, bool(state.reused), self._full_search(state.search)),
                    "SSH login OK as %s" % vm["ssh"]["user"],
                    rows=projection.ready_vm_rows(cx.journal, vm) + [clear_rows(cx.key)])

    def _vm_record(self, state: Connecting) -> VmRecord:
        offer = held_offer(state)
        provider = self._provider_for(offer)
        location = Offer.from_dict(offer).location.to_dict()
        endpoint = state.endpoint
        return {"name": self.ctx.settings.vm_name, "location": location, "instance_id": state.instance_id,
                "request": request_of(self.ctx.settings),
                "zone": location.get("zone") or state.zone,
                "instance_type": offer["instance_type"], "gpu": offer.get("gpu"),
                "gpu_count": offer.get("gpu_count"), "spot": offer.get("spot", False),
                "price_per_hour": offer.get("price_per_hour"), "tags": dict(self.ctx.settings.spec.tags),
                # The names a later request's regions are judged by, as this cloud's plan matched the offer.
                "places": provider.offer_places(Offer.from_dict(offer)), "regions_fold": bool(provider.regions_fold),
                "ssh": {"host": endpoint.host, "port": endpoint.port,
                        "user": endpoint.user or self.ctx.settings.spec.ssh_user},
                "host_key_alias": host_key_alias(self.ctx.settings.vm_name, location, state.instance_id),
                "python_interpreter": self.ctx.capabilities(offer["cloud"]).python_interpreter}

    def _leave_offer(self, state: Union[Attempt, NextOffer], error: Optional[ErrorData], why: str = "") -> Next[LaunchState]:
        """Record why the current offer is left, and go to the next unblocked one (or Exhausted)."""
        cx = self._step_cx
        search = held_search(state)
        offers = self._offers(search)
        rows: List[Row] = []
        if isinstance(search, WholeSearch):
            # Journalled before the launch_search table: the search moves there now.
            plan, rows = self._new_plan(cx.key, offers, search.history, search.blocked)
        else:
            plan = search.plan
        cursor = search.cursor
        offer = offers[cursor]
        block = make_block(offer, error["block"], error["msg"]) if error and error.get("block") else None
        history = {"offer": Offer.from_dict(offer).offer_id, "outcome": error["kind"] if error else "skipped", "error": error}
        left: Dict[str, Any] = {"history": history, "block": block}
        # An offer-scoped block skips only this offer, which the cursor leaves behind.
        blocked = [b for b in search.blocked if b["scope"] != BlockScope.OFFER]
        if block and block["scope"] != BlockScope.OFFER:
            blocked.append(block)
        following = next_cursor(offers, blocked, cursor + 1)
        if following is None:
            full = dataclasses.replace(search, history=search.history + [left["history"]],
                                       blocked=search.blocked + ([block] if block else [])) \
                if isinstance(search, WholeSearch) else self._full_search(search, left)
            if full is None:
                raise ValueError("the search of %s is missing" % cx.key)
            tried = [h for h in full.history if h.get("error")]
            refused = refused_everywhere(full.history, self.ctx.settings.clouds)
            if refused:
                # No cloud of the search can ever take this request as it stands (missing credentials, a
                # request it refuses): say why, once per cloud; no later round could do better.
                return Next(Aborted(refused, search=full), "; ".join(filter(None, (why, "no offer left"))),
                            rows=[clear_rows(cx.key)])
            return Next(Exhausted(full, "every offer failed or was blocked (%d tried)" % len(tried)),
                        "; ".join(filter(None, (why, "no offer left"))), rows=[clear_rows(cx.key)])
        rows.append(("INSERT INTO launch_search (key, plan, seq, body) VALUES (?, ?, ?, ?)",
                     (cx.key, plan, cursor + 1, json.dumps(left, sort_keys=True))))
        compact = RunningSearch(plan, len(offers), following, offers[following], blocked, search.round)
        trying = "trying %s" % Offer.from_dict(offers[following]).offer_id
        return Next(Preparing(compact), "; ".join(filter(None, (why, trying))), rows=rows)

    def _step_exhausted(self, state: Exhausted, cx: StepCx) -> StepResult[LaunchState]:
        wait = self.ctx.settings.exhausted_wait
        if cx.in_state < wait:
            return Poll(wait - cx.in_state, "all offers exhausted; planning again in %.0f s (retry_until_up)"
                        % (wait - cx.in_state))
        return Next(Planning(state.search.round + 1), "planning again (retry_until_up)")

    def _step_compensating(self, state: Compensating, cx: StepCx) -> StepResult[LaunchState]:
        result = self.teardown.step(state.teardown, cx)
        if not isinstance(result, Next):
            return result
        return self._after_teardown(state, result.state, result.note)

    def _after_teardown(self, state: Compensating, inner: ts.TeardownState, note: str = "") -> Next[LaunchState]:
        """The launch state once its compensating teardown has moved to ``inner``."""
        if isinstance(inner, ts.Leaked):
            return Next(Leaked(inner.targets, inner.reason), note or inner.reason)
        if not isinstance(inner, ts.Done):
            return Next(dataclasses.replace(state, teardown=inner), note)
        note = "compensated; " + (inner.reason if inner.reason != state.teardown.reason else note or "")
        if state.then == "NextOffer":
            return Next(self._next_offer(state, state.error), note)
        if state.then == "Planning":
            return Next(Planning(0), note + "; planning")
        return Next(Aborted(state.reason or "aborted", search=self._full_search(state.search)), note + "; aborting")
