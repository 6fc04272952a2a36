# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Why a Nebius instance never came up: the failed Operation behind it.

``InstanceService.Create`` answers an Operation at once; a create that then finds no hosts
for the preset, or runs into the project's quota, finishes that Operation later with a
google.rpc.Status (RESOURCE_EXHAUSTED with a ``NotEnoughResources`` or ``QuotaFailure``
ServiceError; nebius/api common/v1/operation.proto and error.proto) and leaves the instance
behind, STOPPED (as dstack's issue #2977 and SkyPilot's PR #6856 saw it) or ERROR (the
lifecycle docs: "Stopped or Error" when Compute cannot start a VM for lack of resources).
The instance's own status says nothing of why.

So observe, finding an instance in one of those states, reads its operations once:
``common.v1.OperationService.List`` by the instance's id, on the compute endpoint (the
OperationService has no endpoint of its own: nebius/api README, "API Endpoints"), one page.
The newest failed operation (a Create before any other) is classified by
``errors.OPERATION_RULES``. The read is best effort: completed operations may be deleted
(README, "Retention Policy"), and an observe that teardown relies on must not fail because
an explanation could not be read.
"""

from __future__ import annotations

from typing import Any, Optional, Tuple

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import ProviderError
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.nebius.errors import (
    NebiusError, from_operation,
)

try:
    from nebius.api.nebius.common.v1 import ListOperationsRequest
    from nebius.api.nebius.compute.v1 import InstanceServiceClient
except ImportError:  # the adapter says how to install the SDK on its first call
    pass

# The states a failed create (or start) leaves an instance in.
EXPLAINED_STATES = ("STOPPED", "ERROR")
# One page of the instance's operations: a VM gpuprov made has a handful (create, updates, delete).
OPERATIONS_PAGE = 100
CREATE_REQUEST = "nebius.compute.v1.CreateInstanceRequest"


def _operation_client(sdk: Any) -> Any:
    """The OperationService client routed to the compute endpoint, as the SDK itself builds it."""
    return InstanceServiceClient(sdk).operation_service()


def _started(operation: Any) -> float:
    created = getattr(operation, "created_at", None)
    try:
        return created.timestamp() if created is not None else 0.0
    except (AttributeError, OverflowError, OSError, ValueError):
        return 0.0


def _is_create(operation: Any) -> bool:
    request = getattr(operation, "request", None)
    return (getattr(request, "type_url", "") or "").endswith("/" + CREATE_REQUEST)


def instance_failure(provider: Any, instance_id: str) -> Optional[NebiusError]:
    """The classified failure of the instance's newest failed operation (its Create first),
    None when none failed (or none is kept). Raises NebiusError when the list cannot be read."""
    reply = provider._call("OperationService.List", _operation_client, "list",
                           ListOperationsRequest(resource_id=instance_id, page_size=OPERATIONS_PAGE))
    failed = []
    for operation in getattr(reply, "operations", None) or []:
        what = "InstanceService.Create" if _is_create(operation) else (
            getattr(operation, "description", "") or "operation")
        error = from_operation(operation, what)
        if error is not None:
            failed.append((_is_create(operation), _started(operation), error))
    if not failed:
        return None
    failed.sort(key=lambda item: (item[0], item[1]), reverse=True)
    return failed[0][2]


def failure_reason(provider: Any, instance: Any, state: str) -> Tuple[str, Optional[NebiusError]]:
    """The Observed reason of an instance in ``state`` (one of EXPLAINED_STATES): the kind and block
    scope its failed operation classifies as, with the vendor's words, and that classified error;
    the bare state and None otherwise."""
    bare = "nebius state %s" % state
    try:
        error = instance_failure(provider, instance.metadata.id)
    except ProviderError as err:
        return "%s (its operations could not be read: %s)" % (bare, err.msg), None
    if error is None:
        return bare, None
    return "%s: %s (block %s; %s)" % (error.kind, error.msg, error.block_scope, bare), error
