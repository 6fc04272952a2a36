# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Launch machine (the seed's 4.3):

  Reconciling -> Planning -> [Preparing -> Creating -> Booting -> Connecting]* -> Ready
  with NextOffer, Compensating (embeds the teardown machine), Exhausted, Aborted, Leaked.

The failover cursor travels in every attempt state, so it survives a crash. While a search
runs, its state is small and of constant size whatever the number of offers:
``search = {plan, size, cursor, offer, blocked, round}``: the planned offers (and the
offers planning skipped) are written once per search round to the launch_search table
(seq 0), and each offer left adds one row there (seq = its cursor + 1: what happened to it,
and the block it caused); each of those rows is committed in the same transaction as the
state that refers to it (``Next(rows=...)``), so a crash between any two writes resumes
exactly. ``blocked`` keeps only the blocks that can still skip a later offer (an
offer-scoped block skips just the offer already left). Ready, Exhausted and Aborted carry
the whole search, ``{offers, cursor, blocked, history, round}`` (also the layout of every
state a journal written before the launch_search table holds; a search resumed from such a
state moves to the table at its next offer).

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

import hashlib
import json
import uuid
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.executor import (
    Machine, Next, Poll, Retry,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.retry import RetryPolicy
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    BlockScope, ErrorKind, Location, Offer, ProviderError, SshEndpoint, Status,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.request_params import choose_offers
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import projection, teardown as td
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm.planning import PlanOutcome, plan_clouds
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm.request_match import request_mismatch, request_of
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm.offer_blocks import (
    is_blocked, make_block, next_cursor, search_size,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm.search_rows import (
    SEARCH_TABLES, plan_body, whole_search,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm.ssh import (
    HostKeyMismatch, SshNotReady, public_key_fingerprint,
)

TERMINAL = ("Ready", "Aborted", "Leaked")
# Attempt states: each may own resources at its offer's location.
ATTEMPT = ("Preparing", "Creating", "Booting", "Connecting")

# Readiness waits (the executor's schedule, machine/executor.py poll_delay): a boot is observed
# after 1 s, then less often as it goes on, up to the cloud's poll_interval_s; an SSH login is
# retried after 0.25 s (a fresh sshd answers within a moment), backing off to 2 s. A cloud whose
# instances are up within moments gives its own first wait (readiness_poll_first_s).
BOOT_POLL_FIRST_S = 1.0
SSH_POLL_FIRST_S = 0.25
SSH_POLL_MAX_S = 2.0


def host_key_alias(vm_name: str, location: Dict[str, Any], instance_id: str) -> str:
    """known_hosts name of one instance: a new instance never trips over an old key."""
    digest = hashlib.sha256(("%s|%s" % (Location.from_dict(location), instance_id)).encode()).hexdigest()
    return "gpuprov-%s-%s" % (vm_name, digest[:12])


def _offer(state: Dict[str, Any]) -> Dict[str, Any]:
    search = state["search"]
    if "offer" in search:
        return search["offer"]
    return search["offers"][search["cursor"]]


def _clear_search_rows(key: str) -> Tuple[str, Sequence[Any]]:
    return ("DELETE FROM launch_search WHERE key = ?", (key,))


def _error(kind: str, msg: str, block: Optional[str] = None) -> Dict[str, Any]:
    return ProviderError(kind, msg, block).to_dict()


def initial(previous: Optional[Dict[str, Any]], previous_kind: Optional[str]) -> Dict[str, Any]:
    """The first state of a launch, carrying what the journal knew before it."""
    return {"kind": "Reconciling", "previous": previous, "previous_kind": previous_kind}


def owned_targets(state: Optional[Dict[str, Any]], kind: Optional[str]) -> List[Dict[str, Any]]:
    """Every location (and instance id) a journalled state may own, of either machine."""
    if not state:
        return []
    if kind == td.TeardownMachine.KIND:
        return td.merge_targets(state.get("targets", []))
    if state.get("kind") == "Reconciling":
        return owned_targets(state.get("previous"), state.get("previous_kind"))
    out: List[Dict[str, Any]] = []
    if state.get("vm"):
        vm = state["vm"]
        out.append(td.target(vm["location"], [vm["instance_id"]]))
    if state.get("targets"):
        out = td.merge_targets(out, state["targets"])
    if state.get("teardown"):
        out = td.merge_targets(out, state["teardown"]["targets"])
    if state.get("search") and state["kind"] in ATTEMPT:
        offer = _offer(state)
        ids = [state["instance_id"]] if state.get("instance_id") else []
        # Creating is journalled before the create call: from there on, an instance may exist.
        created = state["kind"] != "Preparing"
        out = td.merge_targets(out, [td.target(Offer.from_dict(offer).location.to_dict(), ids, created)])
    return out


class LaunchMachine(Machine):
    KIND = "launch"

    def __init__(self, ctx):
        self.ctx = ctx
        self.teardown = td.TeardownMachine(ctx)
        self._cx = None
        self._tables_on = None
        self._plan: Tuple[Optional[str], List[Dict[str, Any]]] = (None, [])   # the last plan read or made
        # The attempts (_attempt_key) for which this process has called prepare or create, seen an instance of
        # ours, or resumed from the journal (the run that journalled it may have made something). A
        # Credentials error of an attempt not in it made nothing: the cloud is left without compensating.
        self._touched: set = set()
        self._stepped = False

    # -- Machine interface -----------------------------------------------------------
    def is_terminal(self, state: Dict[str, Any]) -> bool:
        if state["kind"] == "Exhausted":
            return not self.ctx.settings.retry_until_up
        return state["kind"] in TERMINAL

    def label(self, state: Dict[str, Any]) -> str:
        kind = state["kind"]
        if kind == "Compensating":
            return "Compensating/%s" % state["teardown"]["kind"]
        if state.get("search") and kind in ATTEMPT:
            search = state["search"]
            offer_id = Offer.from_dict(_offer(state)).offer_id
            return "%s (offer %d of %d: %s)" % (kind, search["cursor"] + 1, search_size(search), offer_id)
        return kind

    def retry_policy(self, state: Dict[str, Any]) -> RetryPolicy:
        if state["kind"] == "Compensating":
            return self.teardown.retry_policy(state["teardown"])
        return RetryPolicy(max_attempts=self.ctx.settings.step_attempts)

    def on_retries_exhausted(self, state: Dict[str, Any], last_error: str) -> Dict[str, Any]:
        kind = state["kind"]
        if kind == "Compensating":
            return self._after_teardown(state, self.teardown.on_retries_exhausted(state["teardown"], last_error)).state
        if kind == "Reconciling":
            # Fail closed: never plan a second VM while the first one's fate is unknown.
            return {"kind": "Aborted", "reason": "cannot reconcile the journalled VM: %s" % last_error,
                    "targets": owned_targets(state, None), "vm": (state.get("previous") or {}).get("vm")}
        if kind == "Planning":
            return self._exhausted(state.get("search") or _empty_search(state.get("round", 0)),
                                   "planning failed: %s" % last_error)
        if kind == "Connecting" and state.get("reused"):
            return self._keep_reused(state, "SSH login kept failing: %s" % last_error)
        if kind in ("Preparing", "Creating"):
            # The cloud kept failing transiently (unreachable, throttling): block all of it for
            # the rest of this search and try the next cloud.
            return self._compensate(state, "NextOffer", _error(
                ErrorKind.FAILED, "%s did not answer: %s" % (_offer(state)["cloud"], last_error), BlockScope.CLOUD))
        if kind in ATTEMPT:
            return self._compensate(state, "NextOffer", _error(ErrorKind.FAILED, last_error))
        return {"kind": "Aborted", "reason": last_error}

    def on_cancel(self, state: Dict[str, Any]) -> Optional[Dict[str, Any]]:
        kind = state["kind"]
        if kind in ("Reconciling", "Planning", "NextOffer", "Exhausted"):
            aborted = {"kind": "Aborted", "reason": "cancelled by the user",
                       "targets": owned_targets(state, None) if kind == "Reconciling" else []}
            if kind == "Reconciling" and (state.get("previous") or {}).get("vm"):
                aborted["vm"] = state["previous"]["vm"]   # an interrupted reuse check keeps the VM
            return aborted
        if kind == "Connecting" and state.get("reused"):
            return self._keep_reused(state, "cancelled by the user")
        if kind in ATTEMPT:
            return self._compensate(state, "Aborted", None, reason="cancelled by the user")
        if kind == "Compensating" and state["then"] != "Aborted":
            return dict(state, then="Aborted", reason="cancelled by the user")
        return None

    def step(self, state: Dict[str, Any], cx):
        self._cx = cx
        if not self._stepped:
            self._stepped = True
            if state["kind"] in ATTEMPT and state.get("search"):
                self._touched.add(self._attempt_key(state))   # resumed: made by the run that journalled it?
        if self._tables_on is not cx.journal:
            cx.journal.ensure_tables(SEARCH_TABLES)
            self._tables_on = cx.journal
        return getattr(self, "_step_" + state["kind"])(state, cx)

    # -- the search's rows -------------------------------------------------------------
    def _plan_body(self, search: Dict[str, Any]) -> Dict[str, Any]:
        return plan_body(self._cx.journal, self._cx.key, search)

    def _offers(self, search: Dict[str, Any]) -> List[Dict[str, Any]]:
        if "offers" in search:
            return search["offers"]
        if self._plan[0] != search["plan"]:
            self._plan = (search["plan"], self._plan_body(search)["offers"])
        return self._plan[1]

    def _full_search(self, search: Optional[Dict[str, Any]], left: Optional[Dict[str, Any]] = None
                     ) -> Optional[Dict[str, Any]]:
        return whole_search(self._cx.journal, self._cx.key, search, left)

    def _new_plan(self, key: str, offers: List[Dict[str, Any]], history: List[Dict[str, Any]],
                  blocked: List[Dict[str, Any]]) -> Tuple[str, List[Tuple[str, Sequence[Any]]]]:
        """A plan id for ``offers`` and the rows that write it (replacing the key's older plans)."""
        plan = uuid.uuid4().hex[:16]
        self._plan = (plan, offers)
        body = json.dumps({"offers": offers, "history": history, "blocked": blocked}, sort_keys=True)
        return plan, [_clear_search_rows(key),
                      ("INSERT INTO launch_search (key, plan, seq, body) VALUES (?, ?, 0, ?)", (key, plan, body))]

    # -- helpers ---------------------------------------------------------------------
    def _compensate(self, state: Dict[str, Any], then: str, error: Optional[Dict[str, Any]],
                    reason: str = "", targets: Optional[List[Dict[str, Any]]] = None) -> Dict[str, Any]:
        targets = targets if targets is not None else owned_targets(state, None)
        why = reason or (error["msg"] if error else "")
        return {"kind": "Compensating", "search": state.get("search"), "then": then, "error": error,
                "reason": why, "teardown": td.initial(self.ctx.settings.vm_name, targets, why)}

    def _leaked(self, teardown_state: Dict[str, Any]) -> Dict[str, Any]:
        return {"kind": "Leaked", "targets": teardown_state["targets"], "reason": teardown_state["reason"]}

    def _exhausted(self, search: Dict[str, Any], reason: str) -> Dict[str, Any]:
        return {"kind": "Exhausted", "search": search, "reason": reason}

    def _keep_reused(self, state: Dict[str, Any], reason: str) -> Dict[str, Any]:
        """A VM that was up before this run is never torn down for a failed re-check."""
        return {"kind": "Aborted", "reason": reason, "vm": state["vm"], "targets": []}

    def _provider_for(self, offer: Dict[str, Any]):
        return self.ctx.provider(offer["cloud"])

    @staticmethod
    def _attempt_key(state: Dict[str, Any]) -> Tuple[str, str, int]:
        search = state["search"]
        return (state["kind"], search.get("plan") or Offer.from_dict(_offer(state)).offer_id, search["cursor"])

    def _handle(self, state: Dict[str, Any], exc: ProviderError, created: bool, made_nothing: bool = False,
                instance_possible: bool = True):
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
            where = Offer.from_dict(_offer(state)).location.to_dict()
            targets = None if instance_possible else [td.target(where, [], created=False)]
            return Next(self._compensate(state, "NextOffer", error, targets=targets), str(exc))
        if exc.fatal:
            return Next(self._compensate(state, "Aborted", exc.to_dict()), str(exc))
        if exc.kind == ErrorKind.UNAVAILABLE and not created:
            # Nothing to undo: straight on to the next offer, in one write.
            return self._leave_offer(state, exc.to_dict(), str(exc))
        return Next(self._compensate(state, "NextOffer", exc.to_dict()), str(exc))

    def _next_offer(self, state: Dict[str, Any], error: Optional[Dict[str, Any]]) -> Dict[str, Any]:
        return {"kind": "NextOffer", "search": state["search"], "error": error}

    # -- steps -----------------------------------------------------------------------
    def _step_Reconciling(self, state: Dict[str, Any], cx):
        previous, previous_kind = state.get("previous"), state.get("previous_kind")
        if previous_kind == td.TeardownMachine.KIND and previous and previous["kind"] not in td.TERMINAL:
            # A down was interrupted: finish it before planning anything new.
            return Next({"kind": "Compensating", "search": None, "then": "Planning", "error": None,
                         "reason": "finishing an interrupted teardown", "teardown": previous},
                        "an interrupted teardown is finished first")
        vm = (previous or {}).get("vm")
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
                planned = self._plan_all()
                if not planned.chosen:
                    if planned.transient:
                        return Retry("recreate: cannot tell yet whether the new request can be met: %s"
                                     % planned.transient_text())
                    kept = ("%s; no cloud can try the new request (%s), so nothing was torn down and the VM is "
                            "kept" % (why, "; ".join(planned.reasons()) or "no offers"))
                    return Next(self._keep_reused(dict(state, vm=vm), kept), "recreate refused; VM kept")
                stale = td.merge_targets(owned_targets(previous, previous_kind),
                                         [td.target(vm["location"], [o.instance_id for o in found])])
                return Next(self._compensate(state, "Planning", None, reason=why, targets=stale), why)
            if differs and mine:
                why = ("%s exists but does not match the request: %s; set recreate: true to replace it, or ask "
                       "for what it has" % (self.ctx.settings.vm_name, "; ".join(differs)))
                return Next(self._keep_reused(dict(state, vm=vm), why), "request differs; VM kept")
            if mine and mine[0].usable:
                return Next({"kind": "Connecting", "search": None, "vm": vm, "reused": True,
                             "instance_id": vm["instance_id"], "endpoint": mine[0].endpoint.to_dict()},
                            "reusing %s %s (Running)" % (location, vm["instance_id"]))
            stale = td.merge_targets(owned_targets(previous, previous_kind),
                                     [td.target(vm["location"], [o.instance_id for o in found])])
            why = ("journalled instance %s is %s" % (vm["instance_id"], mine[0].status) if mine
                   else "journalled instance %s is gone" % vm["instance_id"])
            return Next(self._compensate(state, "Planning", None, reason=why, targets=stale), why)
        targets = owned_targets(previous, previous_kind)
        if targets and previous and previous["kind"] != "Done":
            why = previous.get("reason") or "the previous run may have left resources"
            return Next(self._compensate(state, "Planning", None, reason="resolving: %s" % why, targets=targets),
                        "compensating what the previous run left: %s" % why)
        return Next({"kind": "Planning", "round": 0}, "nothing to reuse; planning")

    def _step_Planning(self, state: Dict[str, Any], cx):
        settings = self.ctx.settings
        # Journal the (non-secret) options this search reaches each cloud with, before any
        # cloud call can make something: later steps and ``down`` look where it was made.
        for cloud, options in sorted(self.ctx.adopt_current_options().items()):
            cx.journal.set_options(cx.key, cx.owner, cloud, options)
        planned = self._plan_all()
        offers = [offer.to_dict() for offer in planned.chosen]
        history = planned.history
        search = {"offers": offers, "cursor": 0, "blocked": [], "history": history, "round": state.get("round", 0)}
        if planned.transient and not offers:
            # Only retry planning when no other cloud has an offer to try meanwhile, no sooner
            # than the slowest Retry-After asked.
            return Retry(planned.transient_text(),
                         after=max(exc.retry_after or 0 for _cloud, exc in planned.transient) or None)
        if not offers:
            # Aborted only when every cloud refused the request for good: a cloud that planned without an
            # error but has nothing free now makes it Exhausted (retry_until_up waits for it).
            if len(planned.errors) == len(self.ctx.settings.clouds) and all(e.fatal for e in planned.errors):
                return Next({"kind": "Aborted", "reason": "; ".join(e.msg for e in planned.errors), "targets": []},
                            "no cloud can plan this request")
            return Next(self._exhausted(search, "no offer available: " + "; ".join(planned.reasons() or ["no offers"])),
                        "no offers")
        plan, rows = self._new_plan(cx.key, offers, history, [])
        compact = {"plan": plan, "size": len(offers), "cursor": 0, "offer": offers[0], "blocked": [],
                   "round": search["round"]}
        return Next({"kind": "Preparing", "search": compact},
                    "%d offer(s) from %s" % (len(offers), ", ".join(settings.clouds)), rows=rows)

    def _plan_all(self) -> "PlanOutcome":
        """Every cloud's plan of this run's request, and the offers the search would try."""
        settings = self.ctx.settings
        outcome = PlanOutcome()
        planned: List[Offer] = []
        # A cloud without credentials is left before any call (check_credentials), never retried.
        for cloud_plan in plan_clouds(settings.clouds, self.ctx.provider, settings.request):
            planned.extend(cloud_plan.offers)
            exc = cloud_plan.error
            if exc is None:
                continue
            if exc.kind == ErrorKind.TRANSIENT:
                outcome.transient.append((cloud_plan.cloud, exc))
            else:
                outcome.errors.append(exc)
            outcome.history.append({"offer": cloud_plan.cloud, "outcome": "skipped", "error": exc.to_dict()})
        outcome.chosen, skipped = choose_offers(planned, settings.prefer, settings.max_price_per_hour)
        outcome.history.extend({"offer": offer.offer_id, "outcome": "unavailable" if not offer.available else "skipped",
                                "error": _error(ErrorKind.UNAVAILABLE, reason)} for offer, reason in skipped)
        return outcome

    def _step_Preparing(self, state: Dict[str, Any], cx):
        offer = _offer(state)
        if is_blocked(offer, state["search"]["blocked"]):
            return Next(self._next_offer(state, None), "offer blocked by an earlier failure")
        key = self._attempt_key(state)
        made_nothing = key not in self._touched
        self._touched.add(key)
        cx.fence()
        try:
            prepared = self._provider_for(offer).prepare(Offer.from_dict(offer), self.ctx.spec_for(offer["cloud"]))
        except ProviderError as exc:
            return self._handle(state, exc, created=False, made_nothing=made_nothing, instance_possible=False)
        return Next({"kind": "Creating", "search": state["search"], "prepared": prepared}, "prepared")

    def _step_Creating(self, state: Dict[str, Any], cx):
        offer = _offer(state)
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
                return Next(self._booting(state, live[0].instance_id, adopted=True),
                            "adopted %s (created by an earlier attempt)" % live[0].instance_id)
            # A create interrupted half-way left something that will never boot: remove it and
            # create afresh now, rather than adopt it and wait out a boot timeout.
            broken = [o.instance_id for o in found if not o.leaving]
            if broken:
                cx.fence()
                provider.delete(location, name, broken)
            self._touched.add(key)
            cx.fence()
            instance_id = provider.create(Offer.from_dict(offer), state["prepared"], self.ctx.spec_for(offer["cloud"]))
        except ProviderError as exc:
            # Even an Unavailable create compensates: prepare may have made side resources here.
            return self._handle(state, exc, created=True, instance_possible=key in self._touched)
        return Next(self._booting(state, instance_id, adopted=False), "created %s" % instance_id)

    @staticmethod
    def _booting(state, instance_id: str, adopted: bool) -> Dict[str, Any]:
        return {"kind": "Booting", "search": state["search"], "instance_id": instance_id, "adopted": adopted}

    def _step_Booting(self, state: Dict[str, Any], cx):
        offer = _offer(state)
        location = Offer.from_dict(offer).location
        try:
            found = self._provider_for(offer).observe(location, self.ctx.settings.vm_name)
        except ProviderError as exc:
            return self._handle(state, exc, created=True)
        mine = [o for o in found if o.instance_id == state["instance_id"]]
        boot_timeout = self.ctx.boot_timeout(offer["cloud"])
        interval = self.ctx.poll_interval(offer["cloud"])
        if not mine:
            # Listings lag creation on some clouds; only a lasting absence means vanished.
            if cx.in_state < min(60.0, boot_timeout / 4.0):
                return Poll(interval, "instance %s not listed yet" % state["instance_id"],
                            first=self._first_poll(offer["cloud"], BOOT_POLL_FIRST_S))
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
        if inst.usable:
            # The zone the cloud placed it in, where the offer named only a region (AWS picks one of several).
            zone = inst.location.zone if inst.location else None
            return Next({"kind": "Connecting", "search": state["search"], "instance_id": inst.instance_id,
                         "endpoint": inst.endpoint.to_dict(), "reused": False, "zone": zone},
                        "running at %s:%d" % (inst.endpoint.host, inst.endpoint.port))
        if cx.in_state > boot_timeout:
            err = _error(ErrorKind.FAILED, "boot timeout: not Running with an SSH endpoint after %.0f s" % boot_timeout)
            return Next(self._compensate(state, "NextOffer", err), err["msg"])
        no_endpoint = "" if inst.endpoint else ", no endpoint yet"
        return Poll(interval, "instance %s: %s%s" % (inst.instance_id, inst.status, no_endpoint),
                    first=self._first_poll(offer["cloud"], BOOT_POLL_FIRST_S))

    def _first_poll(self, cloud: str, default: float) -> float:
        """The first wait of a readiness poll on ``cloud``: its own where it gives one, else ``default``."""
        first = self.ctx.capabilities(cloud).readiness_poll_first_s
        return default if first is None else first

    def _step_Connecting(self, state: Dict[str, Any], cx):
        if state.get("reused"):
            vm = dict(state["vm"], python_interpreter=self.ctx.capabilities(
                state["vm"]["location"]["cloud"]).python_interpreter)
        else:
            vm = self._vm_record(state)
        endpoint = SshEndpoint.from_dict(state["endpoint"])
        endpoint = SshEndpoint(endpoint.host, endpoint.port, endpoint.user or vm["ssh"].get("user"))
        try:
            fingerprint = self.ctx.ssh_check(endpoint, vm["host_key_alias"])
        except HostKeyMismatch as exc:
            reason = "host key mismatch on %s:%d: %s" % (endpoint.host, endpoint.port, exc)
            if state.get("reused"):
                return Next(self._keep_reused(state, reason), reason)
            return Next(self._compensate(state, "Aborted", _error(ErrorKind.FAILED, reason)), reason)
        except SshNotReady as exc:
            if cx.in_state > self.ctx.settings.ssh_timeout:
                reason = "SSH login failed for %.0f s: %s" % (self.ctx.settings.ssh_timeout, exc)
                if state.get("reused"):
                    return Next(self._keep_reused(state, reason), reason)
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
        projection.upsert_vm(cx.journal, vm["name"], cloud=vm["location"]["cloud"], region=vm["location"]["region"],
                             zone=vm["location"].get("zone") or vm.get("zone"), instance_id=vm["instance_id"],
                             instance_type=vm.get("instance_type"), gpu=vm.get("gpu"),
                             gpu_count=vm.get("gpu_count"), ssh_host=vm["ssh"]["host"],
                             ssh_port=vm["ssh"]["port"], ssh_user=vm["ssh"]["user"],
                             host_key_alias=vm["host_key_alias"], status="running", stage="Ready",
                             detail={"python_interpreter": vm.get("python_interpreter"),
                                     "host_key": vm.get("host_key"),
                                     "ssh_key_fingerprint": vm["ssh_key_fingerprint"]})
        return Next({"kind": "Ready", "vm": vm, "reused": bool(state.get("reused")),
                     "search": self._full_search(state.get("search"))}, "SSH login OK as %s" % vm["ssh"]["user"],
                    rows=[_clear_search_rows(cx.key)])

    def _vm_record(self, state: Dict[str, Any]) -> Dict[str, Any]:
        offer = _offer(state)
        provider = self._provider_for(offer)
        location = Offer.from_dict(offer).location.to_dict()
        endpoint = state["endpoint"]
        return {"name": self.ctx.settings.vm_name, "location": location, "instance_id": state["instance_id"],
                "request": request_of(self.ctx.settings),
                "zone": location.get("zone") or state.get("zone"),
                "instance_type": offer["instance_type"], "gpu": offer.get("gpu"),
                "gpu_count": offer.get("gpu_count"), "spot": offer.get("spot", False),
                "price_per_hour": offer.get("price_per_hour"), "tags": dict(self.ctx.settings.spec.tags),
                # The names a later request's regions are judged by, as this cloud's plan matched the offer.
                "places": provider.offer_places(Offer.from_dict(offer)), "regions_fold": bool(provider.regions_fold),
                "ssh": {"host": endpoint["host"], "port": endpoint["port"],
                        "user": endpoint.get("user") or self.ctx.settings.spec.ssh_user},
                "host_key_alias": host_key_alias(self.ctx.settings.vm_name, location, state["instance_id"]),
                "python_interpreter": self.ctx.capabilities(offer["cloud"]).python_interpreter}

    def _step_NextOffer(self, state: Dict[str, Any], cx):
        return self._leave_offer(state, state.get("error"))

    def _leave_offer(self, state: Dict[str, Any], error: Optional[Dict[str, Any]], why: str = "") -> Next:
        """Record why the current offer is left, and go to the next unblocked one (or Exhausted)."""
        cx = self._cx
        search = state["search"]
        offers = self._offers(search)
        rows: List[Tuple[str, Sequence[Any]]] = []
        if "offers" in search:
            # Written before the launch_search table: the search moves there now.
            plan, rows = self._new_plan(cx.key, offers, search["history"], search["blocked"])
        else:
            plan = search["plan"]
        cursor = search["cursor"]
        offer = offers[cursor]
        block = make_block(offer, error["block"], error["msg"]) if error and error.get("block") else None
        left = {"history": {"offer": Offer.from_dict(offer).offer_id, "outcome": error["kind"] if error else "skipped",
                            "error": error}, "block": block}
        # An offer-scoped block skips only this offer, which the cursor leaves behind.
        blocked = [b for b in search["blocked"] if b["scope"] != BlockScope.OFFER]
        if block and block["scope"] != BlockScope.OFFER:
            blocked.append(block)
        following = next_cursor(offers, blocked, cursor + 1)
        if following is None:
            full = self._full_search(search, left) if not rows else dict(
                search, history=search["history"] + [left["history"]],
                blocked=search["blocked"] + ([block] if block else []))
            tried = [h for h in full["history"] if h.get("error")]
            refused = self._refused_everywhere(full["history"])
            if refused:
                # No cloud of the search can ever take this request as it stands (missing credentials, a
                # request it refuses): say why, once per cloud; no later round could do better.
                return Next({"kind": "Aborted", "reason": refused, "targets": [], "search": full},
                            "; ".join(filter(None, (why, "no offer left"))), rows=[_clear_search_rows(cx.key)])
            return Next(self._exhausted(full, "every offer failed or was blocked (%d tried)" % len(tried)),
                        "; ".join(filter(None, (why, "no offer left"))), rows=[_clear_search_rows(cx.key)])
        rows.append(("INSERT INTO launch_search (key, plan, seq, body) VALUES (?, ?, ?, ?)",
                     (cx.key, plan, cursor + 1, json.dumps(left, sort_keys=True))))
        compact = {"plan": plan, "size": len(offers), "cursor": following, "offer": offers[following],
                   "blocked": blocked, "round": search.get("round", 0)}
        trying = "trying %s" % Offer.from_dict(offers[following]).offer_id
        return Next({"kind": "Preparing", "search": compact}, "; ".join(filter(None, (why, trying))), rows=rows)

    def _refused_everywhere(self, history: List[Dict[str, Any]]) -> str:
        """The reasons, one per cloud, when every cloud of the search failed with a fatal error
        (Credentials, InvalidRequest); '' when some cloud failed otherwise (it may do better later)."""
        reasons: Dict[str, str] = {}
        for row in history:
            error = row.get("error") or {}
            if error.get("kind") in ErrorKind.FATAL:
                reasons.setdefault(row["offer"].split(":", 1)[0], error["msg"])
        clouds = self.ctx.settings.clouds
        if not clouds or any(cloud not in reasons for cloud in clouds):
            return ""
        return "; ".join(dict.fromkeys(reasons[cloud] for cloud in clouds))

    def _step_Exhausted(self, state: Dict[str, Any], cx):
        wait = self.ctx.settings.exhausted_wait
        if cx.in_state < wait:
            return Poll(wait - cx.in_state, "all offers exhausted; planning again in %.0f s (retry_until_up)"
                        % (wait - cx.in_state))
        return Next({"kind": "Planning", "round": state["search"].get("round", 0) + 1},
                    "planning again (retry_until_up)")

    def _step_Compensating(self, state: Dict[str, Any], cx):
        result = self.teardown.step(state["teardown"], cx)
        if not isinstance(result, Next):
            return result
        return self._after_teardown(state, result.state, result.note)

    def _after_teardown(self, state: Dict[str, Any], inner: Dict[str, Any], note: str = "") -> Next:
        """The launch state once its compensating teardown has moved to ``inner``."""
        if inner["kind"] == "Leaked":
            return Next(self._leaked(inner), note or inner["reason"])
        if inner["kind"] != "Done":
            return Next(dict(state, teardown=inner), note)
        note = "compensated; " + (inner.get("reason") if inner.get("reason") != state["teardown"].get("reason")
                                  else note or "")
        then = state["then"]
        if then == "NextOffer":
            return Next(self._next_offer(state, state.get("error")), note)
        if then == "Planning":
            return Next({"kind": "Planning", "round": 0}, note + "; planning")
        return Next({"kind": "Aborted", "reason": state.get("reason") or "aborted", "targets": [],
                     "search": self._full_search(state.get("search"))}, note + "; aborting")


def _empty_search(round_no: int) -> Dict[str, Any]:
    return {"offers": [], "cursor": 0, "blocked": [], "history": [], "round": round_no}
