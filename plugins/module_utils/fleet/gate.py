# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet's gate in front of one cloud's adapter (issue 28): what a launch's workers share.

A fleet of N VMs is N Ansible workers, each running its own launch. Left alone, each asks the cloud the
same catalog question, lists the same location at every poll, and backs off on its own when the cloud
says "too many requests" while the others go on asking. ``GatedAdapter`` stands in front of the adapter
of a run that drives a machine (the vm task) and shares, through the journal (fleet/shared.py):

* **the plan** of one request shape on one account: the first worker asks, the others reuse its answer
  for PLAN_SHARE_S (the offers are re-checked at prepare and create, as always, so a stale one fails over
  like any offer gone since); a search's later rounds (``retry_until_up``) ask afresh;
* **one listing of a location per poll** (``Provider.observe_all``, where the adapter has it), serving
  every VM booting there, once another than this one boots there: a Booting VM takes a listing made after it entered Booting and no older than
  its own next poll, or makes it; the Creating step's observe-before-create is never shared (a listing
  from before the create could hide an instance and make a second);
* **the lookups prepare makes** per account and region (``Provider.remembered``: an image, a default
  network), for LOOKUP_SHARE_S; what prepare makes per VM (a key, a firewall) is never shared;
* **a throttle answer** (``ProviderError.throttled``): it holds every worker's calls to that account for
  the delay asked (Retry-After) or a doubling one, so the whole fleet slows, not only the worker that
  got it. A held call is never made: the step waits (``SharedWait``, which costs no retry budget) and
  runs again;
* **an API budget** per account (``Provider.api_limits``, the vendor's documented limits, as token buckets):
  every request of every worker takes one, so the fleet's requests together stay under the limits.

While one worker asks a shared question, the others wait SHARE_WAIT_S and look again; its claim lasts
CLAIM_S, so a worker killed mid-call holds nobody up for longer. Waits are the executor's (a ``SharedWait``,
cancellable) but for two: a request's slot in the budget, slept out here just before it is sent (a step run
again would lose the requests it made already), and any wait of a call made outside a machine's step
(``FleetShare.in_machine``), which has no step to run again.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any, Callable, Dict, Iterator, List, Optional, TypeVar

from ansible_collections.gpuprov.cloud.plugins.module_utils.fleet.scope import account_scope, question_key
from ansible_collections.gpuprov.cloud.plugins.module_utils.fleet.shared import THROTTLE_HOLD_MAX_S, FleetRows
from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.executor import SharedWait
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    Location, Observed, Offer, Provider, ProviderError, ResourceRequest, validate_vm_name,
)

# How long a plan stays the fleet's answer to its request shape on one account.
PLAN_SHARE_S = 60.0
# How long a lookup prepare makes (an image, a region's default subnets) stays the fleet's answer.
LOOKUP_SHARE_S = 120.0
# How long a worker waits for another's answer before it looks again, and how long a claim lasts.
SHARE_WAIT_S = 0.5
CLAIM_S = 30.0

T = TypeVar("T")

# The adapter calls the gate holds while the account is throttled (all that reach the cloud).
GATED_CALLS = ("verify_credentials", "prepare", "create", "observe", "delete", "cleanup", "diagnose",
               "retag", "list_owned")


def lists_whole_locations(adapter: Provider) -> bool:
    """True when ``adapter`` overrides ``Provider.observe_all`` (one listing serves every VM of a location)."""
    return type(adapter).observe_all is not Provider.observe_all


class FleetShare:
    """One run's view of what its fleet shares: the journal's fleet rows, written as ``owner``.

    ``in_machine``: a machine's step is running (the run sets it around the executor), so a wait is a
    ``SharedWait`` the executor carries out. Outside one (a call the vm task makes after Ready) there is no
    step to run again: the gate sleeps the wait out itself, and asks what it would have waited for."""

    def __init__(self, journal: Any, owner: str, sleep: Callable[[float], None] = time.sleep):
        self.rows = FleetRows(journal)
        self.owner = owner
        self.journal_id: Optional[str] = getattr(journal, "journal_id", None)
        self.in_machine = False
        self._sleep = sleep

    @contextlib.contextmanager
    def machine_running(self) -> Iterator[None]:
        """Around the executor's run: the gate's waits become SharedWaits."""
        self.in_machine = True
        try:
            yield
        finally:
            self.in_machine = False

    def wait(self, seconds: float, note: str) -> None:
        """Wait ``seconds`` for the fleet: a SharedWait inside a machine's step, else a sleep here."""
        if self.in_machine:
            raise SharedWait(seconds, note)
        self.sleep(seconds)

    def sleep(self, seconds: float) -> None:
        """Sleep ``seconds`` (at most THROTTLE_HOLD_MAX_S) here: a request's turn in the budget, or any wait
        outside a machine."""
        self._sleep(max(0.0, min(seconds, THROTTLE_HOLD_MAX_S)))

    def gate(self, cloud: str, adapter: Provider, options: Dict[str, Any], public: Dict[str, Any]) -> "GatedAdapter":
        """``adapter`` gated; ``options``: all it was built with (the account), ``public``: those a plan depends
        on that may be journalled (no secrets: the plan's key is a digest of them)."""
        scope = account_scope(cloud, options, adapter.secret_options, self.journal_id)
        return GatedAdapter(adapter, self, cloud, scope, public)


class GatedAdapter:
    """``adapter`` with the fleet's gate in front (see the module's doc); anything else passes through."""

    def __init__(self, adapter: Provider, share: FleetShare, cloud: str, scope: str, public: Dict[str, Any]):
        self._adapter = adapter
        self._share = share
        self._cloud = cloud
        self._public = dict(public)
        self.scope = scope
        adapter.lookups = self._lookup
        self._buckets = [limit.bucket() for limit in adapter.api_limits]
        if self._buckets:
            adapter.pacer = self._pace
        # A search's later rounds plan afresh (vm/launch.py sets it).
        self.fresh_plans = False

    def _pace(self) -> None:
        """Before each request the adapter sends (``Provider.paced``): its slot in the account's budget, waited
        for here. Not a SharedWait: a step run again would lose the requests it made already, and the fleet
        could then spend its whole budget on first requests (a livelock)."""
        wait = self._share.rows.take(self.scope, self._buckets)
        if wait > 0:
            self._share.sleep(wait)

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._adapter, name)
        if name in GATED_CALLS:
            return lambda *args, **kwargs: self._call(found, *args, **kwargs)
        return found

    def now(self) -> float:
        """The journal's clock, which the shared answers are stamped with."""
        return self._share.rows.now()

    # -- the throttle ----------------------------------------------------------------------
    def _call(self, call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        rows = self._share.rows
        hold = rows.hold(self.scope)
        if hold is not None:
            self._share.wait(hold.seconds, "%s asked this account to slow down: every VM holds its calls %.1f s "
                             "more (%s)" % (self._cloud, hold.seconds, hold.reason))
        try:
            return call(*args, **kwargs)
        except ProviderError as exc:
            if exc.throttled:
                rows.throttled(self.scope, exc.msg[:300], exc.retry_after)
            raise

    # -- shared answers --------------------------------------------------------------------
    def _shared(self, kind: str, parts: List[Any], fresh: Callable[[Optional[float]], bool],
                ask: Callable[[], Any], waiting: str) -> Any:
        """The fleet's answer to a question (``kind`` on ``parts``): a stored one that ``fresh(taken_at)``
        accepts, else this worker asks (``ask``, through the throttle) while the others wait for it."""
        rows, owner = self._share.rows, self._share.owner
        key = question_key(kind, self.scope, *parts)
        known = rows.answer(key)
        if known is not None and fresh(known.taken_at):
            return known.value
        if not rows.claim(key, owner, CLAIM_S, known):
            answered = rows.answer(key)   # it came while this worker looked: take it if it will do
            if answered is not None and fresh(answered.taken_at):
                return answered.value
            if self._share.in_machine:
                raise SharedWait(SHARE_WAIT_S, waiting)
            return self._call(ask)   # no step to run again: ask, as if alone
        try:
            value = self._call(ask)
        except BaseException:
            rows.release(key, owner)
            raise
        if value is None:   # no answer to share (see observe_booting)
            rows.release(key, owner)
        else:
            rows.put(key, owner, value)
        return value

    def _lookup(self, what: str, parts: List[Any], read: Callable[[], Any]) -> Any:
        """A lookup the adapter's prepare makes (``Provider.remembered``), shared for LOOKUP_SHARE_S."""
        now = self._share.rows.now()

        def fresh(taken_at: Optional[float]) -> bool:
            return taken_at is not None and now - taken_at <= LOOKUP_SHARE_S

        return self._shared("lookup:" + what, [self._public, parts], fresh, read,
                            "another VM of the fleet is looking up %s on %s" % (what, self._cloud))

    def plan(self, request: ResourceRequest) -> List[Offer]:
        """The adapter's plan of ``request``, shared by the fleet for PLAN_SHARE_S (see the module's doc)."""
        validate_vm_name(request.vm_name)   # what the adapter's plan would check; the rest is the VM's shape
        shape = {k: v for k, v in request.to_dict().items() if k != "vm_name"}
        now = self._share.rows.now()
        fresh_plans = self.fresh_plans

        def fresh(taken_at: Optional[float]) -> bool:
            return not fresh_plans and taken_at is not None and now - taken_at <= PLAN_SHARE_S

        def ask() -> List[Dict[str, Any]]:
            return [offer.to_dict() for offer in self._adapter.plan(request)]

        offers = self._shared("plan", [self._public, shape], fresh, ask,
                              "another VM of the fleet is planning this request on %s" % self._cloud)
        return [Offer.from_dict(offer) for offer in offers]

    def observe_booting(self, location: Location, vm_name: str, since: float, max_age: float) -> List[Observed]:
        """What a Booting VM polls: one listing of ``location`` made after ``since`` (journal clock) and
        at most ``max_age`` s old, shared by every VM booting there; ``observe`` where the adapter has no
        listing of whole locations. The caller picks its instance out by id."""
        # A VM booting alone there is observed on its own: a listing of a location would read every VM of the
        # journal there (thousands, in a big one) to serve one.
        if not lists_whole_locations(self._adapter) or not self._share.rows.booting_beside(
                vm_name, location.cloud, location.region):
            return self._call(self._adapter.observe, location, vm_name)
        now = self._share.rows.now()

        def fresh(taken_at: Optional[float]) -> bool:
            return taken_at is not None and taken_at >= since and now - taken_at <= max_age

        def ask() -> Optional[List[Dict[str, Any]]]:
            listed = self._adapter.observe_all(location)
            return None if listed is None else [seen.to_dict() for seen in listed]

        shared = self._shared("observe", [location.to_dict()], fresh, ask,
                              "another VM of the fleet is listing %s" % location)
        if shared is None:   # the adapter cannot list this location whole after all (no journal id)
            return self._call(self._adapter.observe, location, vm_name)
        return [Observed.from_dict(seen) for seen in shared]
