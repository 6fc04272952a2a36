# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Stock of the nebius offers, from the capacity advisor (nebius/api capacity/v1/resource_advice.proto):
``capacity.v1.ResourceAdviceService.List`` of the tenant (``parent_id`` is the tenant, not the project)
answers one ResourceAdvice per region x fabric x platform x preset, each with the on-demand and the
preemptible availability (``availability_level``, ``data_state``, ``available`` units clipped by quota).

The tenant is ``cloud_options.nebius.tenant_id``, else the project's ``metadata.parent_id``
(``iam.v2.ProjectService.Get``; v1 is deprecated). Conservative: an offer is unavailable only when every advice of its
region, platform and preset reports, with fresh data, ``AVAILABILITY_LEVEL_LIMIT_REACHED`` (the one level
that says nothing can be allocated); HIGH / MEDIUM / LOW (a risk, not a refusal) / UNKNOWN keep it
available. An advisor (or tenant lookup) that fails for any reason leaves every offer available with the
reason in ``detail["capacity_unknown"]``: the advisor is a separate service on its own host
(``capacity-advisor.billing-cpl``), and its absence must not take the cloud's offers away."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import ErrorKind, Offer
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.nebius.errors import NebiusError, malformed
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.paging import collect, message_key

try:
    from nebius.api.nebius.capacity.v1 import ListResourceAdviceRequest, ResourceAdviceServiceClient
    from nebius.api.nebius.iam.v2 import GetProjectRequest, ProjectServiceClient
except ImportError:  # the adapter says how to install the SDK on its first call
    pass

NO_CAPACITY = "LIMIT_REACHED"
FRESH = "FRESH"
MAX_PAGES = 20          # one listing, paged; bounded so a looping page token cannot hang plan
PAGE_SIZE = 1000
LEVEL_MEANING = {
    "HIGH": "plenty of room", "MEDIUM": "room for medium requests", "LOW": "high risk of not enough resources",
    "LIMIT_REACHED": "not enough quota or capacity block on the customer's side", "UNKNOWN": "no data",
}


def _short_name(value: Any, prefix: str) -> str:
    name = getattr(value, "name", None) or str(value)
    return name[len(prefix):] if name.startswith(prefix) else name


def tenant(provider: Any) -> str:
    """The tenant of the advisor: the option, else the project's parent (one ProjectService.Get)."""
    if provider.options["tenant_id"]:
        return provider.options["tenant_id"]
    project = provider._call("ProjectService.Get", ProjectServiceClient, "get", GetProjectRequest(id=provider.project))
    parent = project.metadata.parent_id if project.metadata is not None else ""
    if not parent:
        raise malformed("ProjectService.Get", "project %s names no parent (tenant)" % provider.project)
    return parent


def advice(provider: Any, tenant_id: str) -> List[Any]:
    def page(token: str):
        reply = provider._call("ResourceAdviceService.List", ResourceAdviceServiceClient, "list",
                               ListResourceAdviceRequest(parent_id=tenant_id, page_size=PAGE_SIZE, page_token=token))
        return reply.items, reply.next_page_token
    # Its failures are NebiusErrors, as the call's: a listing that cannot end leaves the offers available.
    return collect(page, "nebius ResourceAdviceService.List", max_pages=MAX_PAGES, key=message_key,
                   error=lambda message: NebiusError(ErrorKind.FAILED, message))


def _levels(items: List[Any], region: str, spot: bool) -> Dict[Tuple[str, str], List[Tuple[str, str, Any]]]:
    """(platform, preset) -> [(level, data state, the Availability)] of the region's advice."""
    levels: Dict[Tuple[str, str], List[Tuple[str, str, Any]]] = {}
    for item in items:
        spec = item.spec
        compute = getattr(spec, "compute_instance", None) if spec is not None else None
        if compute is None or spec.region != region or item.status is None:
            continue
        availability = item.status.preemptible if spot else item.status.on_demand
        if availability is None:
            continue
        key = (compute.platform, compute.preset.name if compute.preset is not None else "")
        levels.setdefault(key, []).append((
            _short_name(availability.availability_level, "AVAILABILITY_LEVEL_"),
            _short_name(availability.data_state, "DATA_STATE_"), availability))
    return levels


def apply(provider: Any, offers: List[Offer], region: str, spot: bool) -> None:
    """Marks the offers the advisor reports out of stock unavailable, with its level; notes the rest."""
    try:
        items = advice(provider, tenant(provider))
    except NebiusError as err:
        for offer in offers:
            offer.detail["capacity_unknown"] = "nebius capacity advisor not consulted: %s" % err.msg
        return
    levels = _levels(items, region, spot)
    kind = "preemptible" if spot else "on-demand"
    for offer in offers:
        seen = levels.get((offer.detail["platform"], offer.detail["preset"]))
        if not seen:
            offer.detail["capacity_unknown"] = "nebius capacity advisor lists no %s advice for %s in %s" % (
                kind, offer.instance_type, region)
            continue
        offer.detail["capacity"] = sorted({level for level, _state, _a in seen})
        if all(level == NO_CAPACITY and state == FRESH for level, state, _a in seen):
            offer.available = False
            offer.unavailable_reason = _reason(kind, offer.instance_type, region, seen[0][2])


def _reason(kind: str, instance_type: str, region: str, availability: Any) -> Optional[str]:
    return ("nebius capacity advisor: %s %s in %s: AVAILABILITY_LEVEL_LIMIT_REACHED (%s; %d available of limit %d)"
            % (kind, instance_type, region, LEVEL_MEANING[NO_CAPACITY], int(availability.available or 0),
               int(availability.limit or 0)))
