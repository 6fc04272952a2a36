# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Planning every cloud of a search, as the launch (vm/launch.py), check mode
(tasks/service.py) and the ``offers`` module (primitives.py) all do it, so that the three
tell the same truth: build the cloud's adapter, check its credentials before anything
else (``Provider.check_credentials``: local, no call), then plan.

A launch leaves a cloud without credentials at once: it is not planned. A preview
(``offers``, check mode) also asks the cloud once whether it accepts the credentials
(``Provider.verify_credentials``, for a cloud whose plan makes no call), and still plans a
cloud whose credentials are missing or refused, where its plan needs no call, so that it
can show what would be tried: every offer unavailable, with that reason.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ansible_collections.gpuprov.cloud.plugins.module_utils.money import usd
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    ErrorKind, Offer, Provider, ProviderError, ResourceRequest,
)


@dataclasses.dataclass
class CloudPlan:
    """One cloud's part of a search: its offers (marked unavailable when its credentials are
    missing or refused), and the error that left it out or made them so, with where it came
    from (``load``: building the adapter; ``credentials``; ``plan``)."""

    cloud: str
    offers: List[Offer]
    error: Optional[ProviderError] = None
    primitive: Optional[str] = None

    @property
    def refused(self) -> bool:
        """Its credentials are missing or refused: nothing of this cloud can be tried."""
        return self.primitive == "credentials"


def _credentials_problem(provider: Provider, verify: bool) -> Optional[ProviderError]:
    """The Credentials error that rules the cloud out, or None. A verification that cannot tell
    (the cloud does not answer) rules nothing out: the launch's own calls will tell."""
    try:
        provider.check_credentials()
    except ProviderError as exc:
        return exc
    if verify:
        try:
            provider.verify_credentials()
        except ProviderError as exc:
            if exc.kind == ErrorKind.CREDENTIALS:
                return exc
    return None


def plan_clouds(clouds: Sequence[str], provider_of: Callable[[str], Provider], request: ResourceRequest,
                preview: bool = False) -> List[CloudPlan]:
    """Each cloud of ``clouds``, in order, planned for ``request`` (see the module's doc)."""
    out: List[CloudPlan] = []
    for cloud in clouds:
        try:
            provider = provider_of(cloud)
        except ProviderError as exc:
            out.append(CloudPlan(cloud, [], exc, "load"))
            continue
        problem = _credentials_problem(provider, verify=preview)
        if problem is not None and not preview:
            out.append(CloudPlan(cloud, [], problem, "credentials"))
            continue
        try:
            offers = provider.plan(request)
        except ProviderError as exc:
            out.append(CloudPlan(cloud, [], problem or exc, "credentials" if problem else "plan"))
            continue
        if problem is not None:
            offers = [dataclasses.replace(o, available=False, unavailable_reason=problem.msg) for o in offers]
        out.append(CloudPlan(cloud, offers, problem, "credentials" if problem else None))
    return out


class PlanOutcome:
    """What planning every cloud of a request gave: the offers to try, in order, and why the
    others were skipped (``history`` rows), with the errors that came back."""

    def __init__(self) -> None:
        self.chosen: List[Offer] = []
        self.history: List[Dict[str, Any]] = []
        self.errors: List[ProviderError] = []
        self.transient: List[Tuple[str, ProviderError]] = []

    def reasons(self) -> List[str]:
        return [h["error"]["msg"] for h in self.history]

    def transient_text(self) -> str:
        return "; ".join("plan %s: %s" % (cloud, exc) for cloud, exc in self.transient)


def plan_search(settings: Any, provider_of: Callable[[str], Provider]) -> PlanOutcome:
    """Every cloud's plan of a launch's request (``settings``: its VmSettings), and the offers its
    search would try, in order; the others and the clouds left out are history rows."""
    outcome = PlanOutcome()
    planned: List[Offer] = []
    # A cloud without credentials is left before any call (check_credentials), never retried.
    for cloud_plan in plan_clouds(settings.clouds, provider_of, settings.request):
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
                            "error": ProviderError(ErrorKind.UNAVAILABLE, reason).to_dict()} for offer, reason in skipped)
    return outcome


def choose_offers(planned: List[Offer], prefer: str = "order",
                  max_price_per_hour: Optional[float] = None) -> Tuple[List[Offer], List[Tuple[Offer, str]]]:
    """The offers a search tries, in order, and the ones it skips with the reason why.

    ``prefer`` "order" keeps the order of ``clouds`` (each cloud's own order within it);
    "price" orders every cloud's offers by hourly price, cheapest first, offers of unknown
    price last (in cloud order). ``max_price_per_hour`` skips dearer offers, and offers whose
    price the cloud does not report (they cannot be shown to be under it). Offers out of
    stock are skipped with the vendor's reason."""
    chosen: List[Offer] = []
    skipped: List[Tuple[Offer, str]] = []
    for offer in planned:
        price = offer.price_per_hour
        if not offer.available:
            skipped.append((offer, offer.unavailable_reason or "unavailable"))
        elif max_price_per_hour is not None and price is None:
            skipped.append((offer, "the cloud reports no price, and max_price_per_hour is %s"
                            % usd(max_price_per_hour)))
        elif max_price_per_hour is not None and price > max_price_per_hour:
            skipped.append((offer, "%s/h is above max_price_per_hour %s" % (usd(price), usd(max_price_per_hour))))
        else:
            chosen.append(offer)
    if prefer == "price":
        # sorted() is stable: equal prices keep the order of clouds.
        chosen = sorted(chosen, key=lambda o: (o.price_per_hour is None, o.price_per_hour or 0.0))
    return chosen, skipped
