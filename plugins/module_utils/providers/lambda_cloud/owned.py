# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The lambda adapter's listing for the orphan sweep (``Provider.list_owned``).

Lambda's listings are account-wide and unpaginated (``GET /instances``, ``/firewall-rulesets``,
``/ssh-keys``), so ``sweep_locations`` is the single location ``ANY_REGION``; a region narrows
the result, not the calls.

* instances: those tagged ``gpuprov-vm-name`` (status, and the price of their instance
  type, ``price_cents_per_hour``); terminated ones are gone and omitted.
* firewall rulesets (regional, no tags): named ``gpuprov-<vm>`` or ``gpuprov-<vm>-j<8 hex>``;
  the journal id is the adapter's own when the mark is its hash, else ``j<8 hex>``.
* SSH keys (account-wide, at region ``global``): named ``gpuprov-<vm>-<12 hex>``; keys are
  shared by every journal using the same key material, so they carry no journal id.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    ANY_REGION, JOURNAL_ID_TAG, VM_NAME_TAG, Location, Owned, ResourceKind, Status,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.lambda_cloud import catalog
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.owned_common import (
    GLOBAL, UNPLACED, dollars, journal_of_mark, lists_global, lists_region,
)

_RULESET_RE = re.compile(r"^gpuprov-(?P<vm>.+?)(?:-j(?P<mark>[0-9a-f]{8}))?$")
_KEY_RE = re.compile(r"^gpuprov-(?P<vm>.+)-[0-9a-f]{12}$")


def sweep_locations(provider) -> List[Location]:
    """One location: every listing is account-wide. No API call."""
    return [Location(provider.name, ANY_REGION)]


def list_owned(provider, location: Location) -> List[Owned]:
    found = [_instance(provider, i) for i in provider._instances()
             if catalog.tags_of(i).get(VM_NAME_TAG) and i.get("id") and i.get("status") != catalog.GONE
             and lists_region(location, catalog.region_of(i))]
    for ruleset in provider._get("/firewall-rulesets"):
        match = _RULESET_RE.match(str(ruleset.get("name") or "")) if isinstance(ruleset, dict) else None
        region = catalog.region_of(ruleset) if match else None
        if match and ruleset.get("id") and region and lists_region(location, region):
            found.append(Owned(
                kind=ResourceKind.FIREWALL, resource_id=str(ruleset["id"]), location=Location(provider.name, region),
                vm_name=match.group("vm"), journal_id=journal_of_mark(match.group("mark"), provider.journal_id),
                name=ruleset["name"]))
    if lists_global(location):
        for key in provider._get("/ssh-keys"):
            match = _KEY_RE.match(str(key.get("name") or "")) if isinstance(key, dict) else None
            if match and key.get("id"):
                found.append(Owned(kind=ResourceKind.SSH_KEY, resource_id=str(key["id"]),
                                   location=Location(provider.name, GLOBAL), vm_name=match.group("vm"),
                                   name=key["name"]))
    return found


def _instance(provider, instance: Dict[str, Any]) -> Owned:
    tags = catalog.tags_of(instance)
    kind = instance.get("instance_type")
    return Owned(
        kind=ResourceKind.INSTANCE, resource_id=str(instance["id"]),
        location=Location(provider.name, catalog.region_of(instance) or UNPLACED),
        vm_name=tags[VM_NAME_TAG], journal_id=tags.get(JOURNAL_ID_TAG) or None,
        status=catalog.STATUSES.get(instance.get("status"), Status.PENDING),
        price_per_hour=dollars(kind.get("price_cents_per_hour")) if isinstance(kind, dict) else None,
        name=instance.get("name"))
