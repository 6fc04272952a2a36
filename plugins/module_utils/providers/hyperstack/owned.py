# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The hyperstack adapter's listing for the orphan sweep (``Provider.list_owned``).

Hyperstack's listings are account-wide (every environment, all ``page``/``pageSize`` pages),
so ``sweep_locations`` is the single location ``ANY_REGION``; a region narrows the result.
Everything sits in an environment, and an environment in one region: that is its location.

* VMs labelled ``gpuprov-vm-name=<vm>`` (and ``gpuprov-journal-id=<id>``), with their status
  and the price of their flavor: ``GET /pricebook`` (USD per GPU-hour of the flavor's GPU
  model) times its GPUs, as plan prices it (None for a model the pricebook does not list).
  Their security rules travel inside the VM and go with it.
* SSH keys named ``gpuprov-<vm>-<12 hex>``, in their environment; a key is shared by every
  journal using the same key material, so it carries no journal id.
* environments named ``gpuprov-<region>``, which gpuprov keeps per region for every VM and
  journal (no VM name, no journal id); cleanup removes one once nothing is left in it.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    ANY_REGION, JOURNAL_ID_TAG, VM_NAME_TAG, Location, Owned, ResourceKind, Status,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.hyperstack import catalog
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.owned_common import UNPLACED, lists_region

_KEY_RE = re.compile(r"^gpuprov-(?P<vm>.+)-[0-9a-f]{12}$")


def sweep_locations(provider) -> List[Location]:
    """One location: the listings cover every environment and region. No API call."""
    return [Location(provider.name, ANY_REGION)]


def list_owned(provider, location: Location) -> List[Owned]:
    environments = provider._list("/core/environments", "environments")
    regions = {env.get("name"): env.get("region") for env in environments}

    def where(entry: Dict[str, Any]) -> str:
        ref = entry.get("environment")
        return (ref.get("region") if isinstance(ref, dict) else None) or regions.get(
            catalog.environment_of(entry)) or UNPLACED

    found = []
    vms = [i for i in provider._list("/core/virtual-machines", "instances")
           if i.get("id") is not None and catalog.tags_of(i).get(VM_NAME_TAG)
           and str(i.get("status") or "").upper() not in catalog.GONE and lists_region(location, where(i))]
    prices = provider._prices() if vms else {}
    for vm in vms:
        tags = catalog.tags_of(vm)
        found.append(Owned(
            kind=ResourceKind.INSTANCE, resource_id=str(vm["id"]), location=Location(provider.name, where(vm)),
            vm_name=tags[VM_NAME_TAG], journal_id=tags.get(JOURNAL_ID_TAG) or None,
            status=catalog.STATUSES.get(str(vm.get("status") or "").upper(), Status.PENDING),
            price_per_hour=_price(vm, prices), name=vm.get("name")))
    for key in provider._list("/core/keypairs", "keypairs"):
        match = _KEY_RE.match(str(key.get("name") or ""))
        if match and key.get("id") is not None and lists_region(location, where(key)):
            found.append(Owned(kind=ResourceKind.SSH_KEY, resource_id=str(key["id"]),
                               location=Location(provider.name, where(key)), vm_name=match.group("vm"),
                               name=key["name"]))
    for env in environments:
        region = env.get("region")
        if env.get("id") is not None and region and env.get("name") == catalog.environment_name(region) \
                and lists_region(location, region):
            found.append(Owned(kind=ResourceKind.ENVIRONMENT, resource_id=str(env["id"]),
                               location=Location(provider.name, region), name=env["name"]))
    return found


def _price(vm: Dict[str, Any], prices: Dict[str, float]) -> Optional[float]:
    flavor = vm.get("flavor") if isinstance(vm.get("flavor"), dict) else {}
    gpus = flavor.get("gpu_count")
    per_gpu = prices.get(str(flavor.get("gpu") or "").upper())
    if per_gpu is None or isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1:
        return None
    return round(per_gpu * gpus, 4)
