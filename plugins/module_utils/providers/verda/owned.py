# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The verda adapter's listing for the orphan sweep (``Provider.list_owned``).

Verda's listings (``GET /instances``, ``/sshkeys``, ``/scripts``) are account-wide and
unpaginated, so ``sweep_locations`` is the single location ``ANY_REGION``.

* instances whose description or tags carry gpuprov's identity (``gpuprov-vm-name=<vm>``
  and/or ``gpuprov-journal-id=<id>``; the hostname is the VM name), with their status and
  ``price_per_hour``; discontinued ones are gone and omitted. Their OS volume goes with them.
* SSH keys and startup scripts (account-wide, region ``global``) named
  ``gpuprov-<vm>-<12 hex>[-j<8 hex>]``: the journal id is the adapter's own when the mark is
  its hash, else ``j<8 hex>`` (the name holds only the hash of another journal's id).
"""

from __future__ import annotations

import re
from typing import List

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    ANY_REGION, VM_NAME_TAG, Location, Owned, ResourceKind, Status,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.owned_common import (
    GLOBAL, UNPLACED, journal_of_mark, lists_global, lists_region,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.verda import (
    GONE_STATUSES, SCRIPTS, SSH_KEYS, STATUS_MAP, catalog,
)

_SIDE_RE = re.compile(r"^gpuprov-(?P<vm>.+)-[0-9a-f]{12}(?:-j(?P<mark>[0-9a-f]{8}))?$")
_SIDE_KINDS = ((SSH_KEYS, ResourceKind.SSH_KEY), (SCRIPTS, ResourceKind.OTHER))


def sweep_locations(provider) -> List[Location]:
    """One location: every listing is account-wide. No API call."""
    return [Location(provider.name, ANY_REGION)]


def list_owned(provider, location: Location) -> List[Owned]:
    found = []
    for inst in provider._list("instances"):
        vm = str(inst.get("hostname") or "")
        region = str(inst.get("location") or UNPLACED)
        raw = str(inst.get("status") or "unknown")
        if (not vm or not catalog.ours(inst, vm) or raw in GONE_STATUSES
                or not inst.get("id") or not lists_region(location, region)):
            continue
        described = dict(w.split("=", 1) for w in str(inst.get("description")).split() if "=" in w)
        found.append(Owned(
            kind=ResourceKind.INSTANCE, resource_id=str(inst["id"]), location=Location(provider.name, region),
            vm_name=described.get(VM_NAME_TAG) or vm, journal_id=catalog.instance_journal(inst),
            status=STATUS_MAP.get(raw, Status.PENDING), price_per_hour=catalog.price(inst.get("price_per_hour")),
            name=vm))
    if lists_global(location):
        for path, kind in _SIDE_KINDS:
            for item in provider._list(path):
                match = _SIDE_RE.match(str(item.get("name") or ""))
                if match and item.get("id"):
                    found.append(Owned(
                        kind=kind, resource_id=str(item["id"]), location=Location(provider.name, GLOBAL),
                        vm_name=match.group("vm"), journal_id=journal_of_mark(match.group("mark"), provider.journal_id),
                        name=item["name"]))
    return found
