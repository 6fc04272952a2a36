# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The primeintellect adapter's listing for the orphan sweep (``Provider.list_owned``).

``GET /api/v1/pods/`` and ``GET /api/v1/ssh_keys/`` (each all its ``offset``/``limit``
pages) are account-wide, so ``sweep_locations`` is the single location ``ANY_REGION``.
Prime has no tags: the identity is in the names (catalog.py).

* pods named ``<vm>-<journal token>`` (``j<journal id>``, or ``x<its bytes in hex>`` for an id
  that is not hex: catalog.py) or, as gpuprov named them before, ``<vm>.<journal id>`` (the VM
  name is a DNS label, so the first '.' splits them), with their status and ``priceHr``. A
  pod named only ``<vm>``, made before journal ids, cannot be told from any other pod of the
  account and is not listed. The pod listing names no data center: pods are at region
  ``unplaced``.
* SSH keys (account-wide, region ``global``) named ``gpuprov-<vm>-<12 hex>[-<journal token>]``
  (or the earlier ``gpuprov-<vm>-<12 hex>.<journal id>``).
"""

from __future__ import annotations

from typing import List

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    ANY_REGION, Location, Owned, ResourceKind,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.owned_common import (
    GLOBAL, UNPLACED, lists_global, lists_region, number, vm_name_or_none,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.primeintellect import catalog


def sweep_locations(provider) -> List[Location]:
    """One location: both listings are account-wide. No API call."""
    return [Location(provider.name, ANY_REGION)]


def list_owned(provider, location: Location) -> List[Owned]:
    found = []
    if lists_region(location, UNPLACED):
        for pod in provider._pods():
            vm, journal_id = catalog.parse_pod_name(pod.get("name")) or (None, None)
            status, _reason = catalog.pod_status(pod)
            if not (vm and vm_name_or_none(vm) and journal_id and pod.get("id")) or status is None:
                continue
            found.append(Owned(
                kind=ResourceKind.INSTANCE, resource_id=str(pod["id"]), location=Location(provider.name, UNPLACED),
                vm_name=vm, journal_id=journal_id, status=status, price_per_hour=number(pod.get("priceHr")),
                name=pod.get("name")))
    if lists_global(location):
        for key in provider._keys():
            vm, journal_id = catalog.parse_key_name(key.get("name")) or (None, None)
            if vm and key.get("id") and vm_name_or_none(vm):
                found.append(Owned(
                    kind=ResourceKind.SSH_KEY, resource_id=str(key["id"]), location=Location(provider.name, GLOBAL),
                    vm_name=vm, journal_id=journal_id, name=key["name"]))
    return found
