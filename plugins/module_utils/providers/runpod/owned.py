# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The runpod adapter's listing for the orphan sweep (``Provider.list_owned``).

One ``GET /v2/pods`` lists every pod of the account (unpaginated), so ``sweep_locations``
is the single location ``ANY_REGION``; a data center narrows the result, not the call.
Pods have no tags: gpuprov's identity is in the pod's env (``GPUPROV_VM_NAME``,
``GPUPROV_JOURNAL_ID``), and a pod without it is not gpuprov's. The price is the pod's
``cost`` (USD per hour, as RunPod bills it).

The account's SSH key lines whose comment is ``gpuprov-<vm>-<12 hex>`` (what prepare
registers) are listed too, at region ``global`` (one ``GET /v2/account/ssh-keys``); a
line has no id, so its comment is its resource id, and no journal id (a key is shared by
every journal using the same key material).
"""

from __future__ import annotations

from typing import List

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    ANY_REGION, Location, Owned, ResourceKind, Status,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.owned_common import (
    GLOBAL, UNPLACED, lists_global, lists_region, number,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.runpod import GONE, STATUS_MAP, catalog


def sweep_locations(provider) -> List[Location]:
    """One location: the pod listing is account-wide. No API call."""
    return [Location(provider.name, ANY_REGION)]


def list_owned(provider, location: Location) -> List[Owned]:
    body = provider.api.get("pods")
    pods = body.get("pods") if isinstance(body, dict) else None
    if not isinstance(pods, list):
        raise provider._malformed("GET /v2/pods", "expected {\"pods\": [...]}")
    found = []
    for pod in pods:
        env = pod.get("env") if isinstance(pod, dict) else None
        if not isinstance(env, dict) or not env.get(catalog.VM_NAME_ENV) or not isinstance(pod.get("id"), str):
            continue
        region = pod.get("dataCenterId") or UNPLACED
        if pod.get("status") == GONE or not lists_region(location, region):
            continue
        found.append(Owned(
            kind=ResourceKind.INSTANCE, resource_id=pod["id"], location=Location(provider.name, region),
            vm_name=env[catalog.VM_NAME_ENV], journal_id=env.get(catalog.JOURNAL_ID_ENV) or None,
            status=STATUS_MAP.get(pod.get("status"), Status.PENDING), price_per_hour=number(pod.get("cost")),
            name=pod.get("name")))
    if lists_global(location):
        for line in provider._account_keys():
            vm = catalog.key_vm(line)
            if vm:
                name = line.split(None, 2)[2].strip()
                found.append(Owned(kind=ResourceKind.SSH_KEY, resource_id=name, location=Location(provider.name, GLOBAL),
                                   vm_name=vm, name=name))
    return found
