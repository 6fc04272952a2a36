# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The massedcompute adapter's listing for the orphan sweep (``Provider.list_owned``).

``GET /instance`` and ``GET /ssh-keys`` are account-wide and unpaginated, so
``sweep_locations`` is the single location ``ANY_REGION``. Massed Compute has no tags: the
identity is in the names (catalog.py).

* instances named ``<vm>_<journal id>`` (a VM name is a DNS label, so the first '_' ends it),
  with their status and the product's ``final_price_hr`` (else ``price_hr``). An instance named
  only ``<vm>``, made before journal ids, cannot be told from any other instance of the
  account and is not listed. Terminated ones are gone and omitted.
* SSH keys (account-wide, region ``global``) named ``gpuprov <vm words> <12 hex>[ j<8 hex>]``:
  the journal id is the adapter's own when the mark is its hash, else ``j<8 hex>``.
"""

from __future__ import annotations

import re
from typing import List

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    ANY_REGION, Location, Owned, ResourceKind,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.massedcompute import catalog
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.owned_common import (
    GLOBAL, UNPLACED, journal_of_mark, lists_global, lists_region, number, vm_name_or_none,
)

_KEY_RE = re.compile(r"^gpuprov (?P<words>[a-z0-9 ]+) [0-9a-f]{12}(?: j(?P<mark>[0-9a-f]{8}))?$")


def sweep_locations(provider) -> List[Location]:
    """One location: both listings are account-wide. No API call."""
    return [Location(provider.name, ANY_REGION)]


def list_owned(provider, location: Location) -> List[Owned]:
    found = []
    for instance in provider._instances():
        vm, _sep, journal_id = str(instance.get("name") or "").partition(catalog.JOURNAL_SEPARATOR)
        region = catalog.region_of(instance) or UNPLACED
        status, _reason = catalog.status_of(instance)
        if not (vm_name_or_none(vm) and journal_id) or status is None or not lists_region(location, region):
            continue
        product = instance.get("product") if isinstance(instance.get("product"), dict) else {}
        price = number(product.get("final_price_hr"))
        found.append(Owned(
            kind=ResourceKind.INSTANCE, resource_id=str(instance["uuid"]), location=Location(provider.name, region),
            vm_name=vm, journal_id=journal_id, status=status, name=instance.get("name"),
            price_per_hour=price if price is not None else number(product.get("price_hr"))))
    if lists_global(location):
        for key in provider._get("/ssh-keys", "sshKeys"):
            match = _KEY_RE.match(str(key.get("name") or "")) if isinstance(key, dict) else None
            vm = vm_name_or_none(match.group("words").replace(" ", "-")) if match else None
            if vm and key.get("id"):
                found.append(Owned(
                    kind=ResourceKind.SSH_KEY, resource_id=str(key["id"]), location=Location(provider.name, GLOBAL),
                    vm_name=vm, journal_id=journal_of_mark(match.group("mark"), provider.journal_id),
                    name=key["name"]))
    return found
