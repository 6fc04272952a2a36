# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The nebius adapter's listing for the orphan sweep (``Provider.list_owned``).

A Nebius project lives in one region (the ``region`` option), so ``sweep_locations`` is that
region. Two listings of the project, each all its pages (``next_page_token``):
``InstanceService.List`` and ``SecurityGroupService.List``, kept to what carries the
``gpuprov-vm-name`` label (and ``gpuprov-journal-id``). An instance's boot disk goes with it
and a security group's rules with the group (cleanup removes them first), so neither is
listed on its own. The listing gives no price: instances have none (never guessed).
"""

from __future__ import annotations

from typing import Any, Callable, List

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    ANY_REGION, JOURNAL_ID_TAG, VM_NAME_TAG, Location, Owned, ResourceKind, Status,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.common import require_sdk
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.nebius import HAS_SDK, SDK_IMPORT_ERROR, STATES
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.paging import collect, message_key

if HAS_SDK:
    from nebius.api.nebius.compute.v1 import InstanceServiceClient, ListInstancesRequest
    from nebius.api.nebius.vpc.v1 import ListSecurityGroupsRequest, SecurityGroupServiceClient

MAX_PAGES = 100


def sweep_locations(provider) -> List[Location]:
    """The project's region. No API call."""
    return [Location(provider.name, provider.options["region"])]


def list_owned(provider, location: Location) -> List[Owned]:
    region = provider.options["region"]
    if location.region not in (ANY_REGION, region):
        return []  # the project has nothing elsewhere
    require_sdk("nebius", HAS_SDK, "nebius", SDK_IMPORT_ERROR)
    found = []
    for instance in _all(provider, "InstanceService.List", InstanceServiceClient, ListInstancesRequest):
        labels = dict(instance.metadata.labels or {})
        if labels.get(VM_NAME_TAG):
            state = instance.status.state.name if instance.status is not None else "UNSPECIFIED"
            found.append(Owned(
                kind=ResourceKind.INSTANCE, resource_id=instance.metadata.id, location=Location(provider.name, region),
                vm_name=labels[VM_NAME_TAG], journal_id=labels.get(JOURNAL_ID_TAG) or None,
                status=STATES.get(state, Status.PENDING), name=instance.metadata.name))
    for group in _all(provider, "SecurityGroupService.List", SecurityGroupServiceClient, ListSecurityGroupsRequest):
        labels = dict(group.metadata.labels or {})
        if labels.get(VM_NAME_TAG):
            found.append(Owned(
                kind=ResourceKind.SECURITY_GROUP, resource_id=group.metadata.id,
                location=Location(provider.name, region), vm_name=labels[VM_NAME_TAG],
                journal_id=labels.get(JOURNAL_ID_TAG) or None, name=group.metadata.name))
    return found


def _all(provider, what: str, client: type, request: Callable[..., Any]) -> List[Any]:
    """Every item of one List of the project, each once, page by page until the last (or a page
    or token that repeats one: a server ignoring page_token); paging.collect."""
    def page(token: str):
        reply = provider._call(what, client, "list", request(parent_id=provider.project, page_token=token))
        return reply.items, reply.next_page_token
    return collect(page, "nebius " + what, max_pages=MAX_PAGES, key=message_key)
