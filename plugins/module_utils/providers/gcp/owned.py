# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The gcp adapter's listing for the orphan sweep (``Provider.list_owned``).

One ``instances.aggregatedList`` (every zone, all pages) filtered to instances that
carry the ``gpuprov-vm-name`` label, so ``sweep_locations`` is the single location
``ANY_REGION``; a region or zone narrows the result, not the call. Firewall rules are
global and have no labels: one ``firewalls.list`` (all pages) of the rules named
``gpuprov-...`` whose description carries the identity prepare writes into it
(``(gpuprov-vm-name=<vm>, gpuprov-journal-id=<id>)``; a rule of that name without it is
not gpuprov's). They are listed at ``Location("gcp", "global")``, when asked about
``ANY_REGION`` or ``global``, so that a sweep over several regions lists each once.
"""

from __future__ import annotations

from typing import List, Optional

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    ANY_REGION, JOURNAL_ID_TAG, VM_NAME_TAG, Location, Owned, ResourceKind, Status,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.gcp import STATUS_MAP, catalog

try:
    from google.cloud import compute_v1
except ImportError:  # ansible-test sanity imports module_utils without SDKs; the adapter says so first
    compute_v1 = None

GLOBAL = "global"   # where GCP's global resources (firewall rules) live


def sweep_locations(provider) -> List[Location]:
    """One location: the aggregated list covers every zone. No API call."""
    return [Location(provider.name, ANY_REGION)]


def list_owned(provider, location: Location) -> List[Owned]:
    """Labelled instances in ``location`` (every zone for ``ANY_REGION``), then the
    gpuprov firewall rules when ``location`` is ``ANY_REGION`` or ``global``."""
    found = []
    if location.region != GLOBAL:
        found.extend(_instances(provider, location))
    if location.region in (ANY_REGION, GLOBAL):
        found.extend(_firewalls(provider))
    return found


def _instances(provider, location: Location) -> List[Owned]:
    request = compute_v1.AggregatedListInstancesRequest(
        project=provider.project, filter="labels.%s:*" % VM_NAME_TAG)
    pairs = provider._call("instances.aggregatedList", provider._client("instances").aggregated_list,
                           request=request, timeout=provider.timeout, retry=provider.read_retry)
    out = []
    for scope, scoped in pairs:
        if not scope.startswith("zones/"):
            continue
        zone = scope.split("/", 1)[1]
        region = catalog.region_of(zone)
        if location.region != ANY_REGION and (region != location.region or location.zone not in (None, zone)):
            continue
        for inst in scoped.instances:
            vm_name = inst.labels.get(VM_NAME_TAG)
            if not vm_name:
                continue
            out.append(Owned(
                kind=ResourceKind.INSTANCE, resource_id=inst.name, location=Location(provider.name, region, zone),
                vm_name=vm_name, journal_id=inst.labels.get(JOURNAL_ID_TAG) or None,
                status=STATUS_MAP.get(inst.status, Status.PENDING), price_per_hour=_price(inst), name=inst.name))
    return sorted(out, key=lambda o: (o.location.zone, o.resource_id))


def _price(inst) -> Optional[float]:
    """The catalog's on-demand price of the machine type (with its attached GPUs); None for
    Spot/preemptible (the price varies) or a shape the catalog does not know."""
    if inst.scheduling.provisioning_model == "SPOT" or inst.scheduling.preemptible:
        return None
    machine_type = inst.machine_type.rsplit("/", 1)[-1]
    attached = {(a.accelerator_type.rsplit("/", 1)[-1], a.accelerator_count) for a in inst.guest_accelerators}
    prices = {rung.price for rung in catalog.LADDER if rung.machine_type == machine_type and (
        attached == {(rung.accelerator, rung.count)} if rung.attached else not attached)}
    return prices.pop() if len(prices) == 1 else None


def _firewalls(provider) -> List[Owned]:
    request = compute_v1.ListFirewallsRequest(project=provider.project, filter='name eq "gpuprov-.*"')
    rules = provider._call("firewalls.list", provider._client("firewalls").list, request=request,
                           timeout=provider.timeout, retry=provider.read_retry)
    out = []
    for rule in rules:
        identity = catalog.described_identity(rule.description)
        if not rule.name.startswith("gpuprov-") or not identity.get(VM_NAME_TAG):
            continue
        out.append(Owned(
            kind=ResourceKind.FIREWALL, resource_id=rule.name, location=Location(provider.name, GLOBAL),
            vm_name=identity[VM_NAME_TAG], journal_id=identity.get(JOURNAL_ID_TAG), name=rule.name))
    return sorted(out, key=lambda o: o.resource_id)
