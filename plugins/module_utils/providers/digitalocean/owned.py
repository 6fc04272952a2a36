# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The digitalocean adapter's listing for the orphan sweep (``Provider.list_owned``).

DigitalOcean's listings are account-wide (``links.pages.next``, 200 a page), so
``sweep_locations`` is the single location ``ANY_REGION``; a region narrows the droplets.

* droplets tagged ``gpuprov-vm-name:<vm>`` (and ``gpuprov-journal-id:<id>``), with their status
  and their size's ``price_hourly``. ``GET /droplets`` lists only CPU droplets unless asked
  for ``type=gpus``, so the droplets are two listings: without a type, and with ``gpus``.
* account-wide side resources, at region ``global``: cloud firewalls named ``gpuprov-<vm>`` or
  ``gpuprov-<vm>-j<8 hex>`` (the journal id is the adapter's own when the mark is its hash,
  else ``j<8 hex>``), their tags ``gpuprov-firewall:<firewall name>`` (the same identity), and
  SSH keys named ``gpuprov-<vm>-<12 hex>`` (shared by every journal using the key material,
  so without a journal id). The identity tags themselves stay, as cleanup leaves them.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    ANY_REGION, VM_NAME_TAG, Location, Owned, ResourceKind, Status,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.digitalocean import catalog
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.owned_common import (
    GLOBAL, UNPLACED, journal_of_mark, lists_global, lists_region, number,
)

_FIREWALL_RE = re.compile(r"^gpuprov-(?P<vm>.+?)(?:-j(?P<mark>[0-9a-f]{8}))?$")
_KEY_RE = re.compile(r"^gpuprov-(?P<vm>.+)-[0-9a-f]{12}$")


def sweep_locations(provider) -> List[Location]:
    """One location: every listing is account-wide. No API call."""
    return [Location(provider.name, ANY_REGION)]


def list_owned(provider, location: Location) -> List[Owned]:
    found = []
    droplets = provider._list("/droplets", "droplets") + provider._list("/droplets", "droplets", type="gpus")
    for droplet in droplets:
        vm = catalog.tag_values(droplet.get("tags")).get(VM_NAME_TAG)
        region = catalog.region_of(droplet) or UNPLACED
        if vm and droplet.get("id") is not None and lists_region(location, region):
            found.append(_droplet(provider, droplet, catalog.decode_tag_value(vm), region))
    if not lists_global(location):
        return found
    for firewall in provider._list("/firewalls", "firewalls"):
        owned = _named(provider, ResourceKind.FIREWALL, firewall.get("id"), firewall.get("name"))
        if owned:
            found.append(owned)
    for tag in provider._list("/tags", "tags"):
        name = str(tag.get("name") or "")
        prefix = catalog.FIREWALL_TAG + ":"
        owned = _named(provider, ResourceKind.OTHER, name, name[len(prefix):], name) if name.startswith(prefix) \
            else None
        if owned:
            found.append(owned)
    for key in provider._list("/account/keys", "ssh_keys"):
        match = _KEY_RE.match(str(key.get("name") or ""))
        if match and key.get("id") is not None:
            found.append(Owned(kind=ResourceKind.SSH_KEY, resource_id=str(key["id"]),
                               location=Location(provider.name, GLOBAL), vm_name=match.group("vm"), name=key["name"]))
    return found


def _droplet(provider, droplet: Dict[str, Any], vm: str, region: str) -> Owned:
    size = droplet.get("size") if isinstance(droplet.get("size"), dict) else {}
    return Owned(
        kind=ResourceKind.INSTANCE, resource_id=str(droplet["id"]), location=Location(provider.name, region),
        vm_name=vm, journal_id=provider._journal_of(droplet),
        status=catalog.STATUSES.get(droplet.get("status"), Status.PENDING),
        price_per_hour=number(size.get("price_hourly")), name=droplet.get("name"))


def _named(provider, kind: str, resource_id: Any, firewall_name: Any, name: Any = None):
    """The Owned of a firewall (or its tag) whose name says gpuprov's identity, else None."""
    match = _FIREWALL_RE.match(str(firewall_name or ""))
    if not match or resource_id in (None, ""):
        return None
    return Owned(kind=kind, resource_id=str(resource_id), location=Location(provider.name, GLOBAL),
                 vm_name=match.group("vm"), journal_id=journal_of_mark(match.group("mark"), provider.journal_id),
                 name=str(name or firewall_name))
