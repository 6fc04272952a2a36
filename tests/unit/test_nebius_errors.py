"""The nebius adapter's error table, row by row: each (gRPC status code, ServiceError
detail) goes through the real SDK client (one attempt) against the gRPC fake, as
``grpc-status-details-bin`` on the wire, and must come out as its ErrorKind and block
scope; plus the failures that carry no gRPC status (transport, a malformed reply)."""

from __future__ import annotations

import pytest

pytest.importorskip("nebius")

import grpc  # noqa: E402

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (  # noqa: E402
    BlockScope, ErrorKind, Location, ProviderError, ResourceRequest,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.nebius import NebiusProvider  # noqa: E402
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.nebius import errors  # noqa: E402
from ansible_collections.gpuprov.cloud.tests.fakes.nebius_grpc import NebiusGrpcFake, service_error  # noqa: E402

from nebius.api.nebius.common.v1 import (  # noqa: E402
    BadRequest, BadResourceState, NotEnoughResources, OperationConflict, OutOfRange, PermissionDenied, QuotaFailure,
    ResourceConflict, ResourceNotFound, TooManyRequests,
)

K, B, C = ErrorKind, BlockScope, grpc.StatusCode

NER = dict(not_enough_resources=NotEnoughResources(violations=[NotEnoughResources.Violation(
    resource_type="gpu-h100-sxm", requested="8", message="not enough resources")]))
QUOTA = dict(quota_failure=QuotaFailure(violations=[QuotaFailure.Violation(
    quota="compute.instance.gpu.h100", limit="8", requested="16", message="Quota limit exceeded")]))

# (code, message, ServiceError code, detail) -> (kind, block); errors.RULES, one row each.
ROWS = [
    (C.RESOURCE_EXHAUSTED, "not enough resources", "NotEnoughResources", NER, K.CAPACITY, B.OFFER),
    (C.RESOURCE_EXHAUSTED, "quota", "QuotaFailure", QUOTA, K.QUOTA, B.REGION),
    (C.RESOURCE_EXHAUSTED, "too many requests", "TooManyRequests",
     dict(too_many_requests=TooManyRequests(violation="rate")), K.TRANSIENT, None),
    (C.RESOURCE_EXHAUSTED, "Quota limit exceeded", None, None, K.QUOTA, B.REGION),
    (C.RESOURCE_EXHAUSTED, "Not enough resources in the zone", None, None, K.CAPACITY, B.OFFER),
    (C.RESOURCE_EXHAUSTED, "slow down", None, None, K.TRANSIENT, None),
    (C.UNAUTHENTICATED, "invalid or expired IAM token", "Unauthenticated", {}, K.CREDENTIALS, B.CLOUD),
    (C.PERMISSION_DENIED, "permission denied", "PermissionDenied",
     dict(permission_denied=PermissionDenied(resource_id="project-e00x")), K.CREDENTIALS, B.CLOUD),
    (C.INVALID_ARGUMENT, "bad", "BadRequest", dict(bad_request=BadRequest(violations=[BadRequest.Violation(
        field="spec.resources.preset", message="unknown preset")])), K.INVALID_REQUEST, None),
    (C.OUT_OF_RANGE, "too big", "OutOfRange", dict(out_of_range=OutOfRange(requested="9", limit="8")),
     K.INVALID_REQUEST, None),
    (C.NOT_FOUND, "missing", "ResourceNotFound", dict(resource_not_found=ResourceNotFound(resource_id="x")),
     K.INVALID_REQUEST, None),
    (C.ALREADY_EXISTS, "exists", "AlreadyExists", {}, K.INVALID_REQUEST, None),
    (C.UNIMPLEMENTED, "no such method", None, None, K.INVALID_REQUEST, None),
    (C.FAILED_PRECONDITION, "in use", "BadResourceState",
     dict(bad_resource_state=BadResourceState(resource_id="x", message="in use")), K.TRANSIENT, None),
    (C.FAILED_PRECONDITION, "conflict", "ResourceConflict",
     dict(resource_conflict=ResourceConflict(resource_id="x", message="busy")), K.TRANSIENT, None),
    (C.FAILED_PRECONDITION, "conflict", "OperationConflict",
     dict(operation_conflict=OperationConflict(resource_id="x", conflicting_operation_id="op")), K.TRANSIENT, None),
    (C.FAILED_PRECONDITION, "platform not allowed here", None, None, K.FAILED, B.OFFER),
    (C.ABORTED, "aborted", None, None, K.TRANSIENT, None),
    (C.UNAVAILABLE, "unavailable", None, None, K.TRANSIENT, None),
    (C.DEADLINE_EXCEEDED, "deadline", None, None, K.TRANSIENT, None),
    (C.INTERNAL, "internal", None, None, K.TRANSIENT, None),
    (C.UNKNOWN, "unknown", None, None, K.TRANSIENT, None),
]


@pytest.fixture(scope="module")
def fake(tmp_path_factory):
    made = NebiusGrpcFake(str(tmp_path_factory.mktemp("nebius-errors")))
    yield made
    made.stop()


def adapter(fake, **extra) -> NebiusProvider:
    options = {"api_endpoint": fake.api_endpoint, "api_insecure": True, "iam_token": fake.token,
               "project_id": fake.project_id, "request_timeout_s": 10}
    options.update(extra)
    return NebiusProvider({k: v for k, v in options.items() if v is not None}, journal_id="j1")


@pytest.mark.parametrize("code,message,error_code,detail,kind,block", ROWS, ids=lambda v: str(v)[:40])
def test_each_row_of_the_table(fake, code, message, error_code, detail, kind, block):
    fake.clear_faults()
    error = service_error(error_code, **detail) if error_code else None
    fake.fail_next("platforms.list", code, message, error)
    before = len([c for c in fake.calls if c[0] == "platforms.list"])
    with pytest.raises(ProviderError) as raised:
        adapter(fake).plan(ResourceRequest(vm_name="e", gpu="H100"))
    assert (raised.value.kind, raised.value.block_scope) == (kind, block or _default(kind)), raised.value
    assert code.name in raised.value.msg
    # one attempt: the SDK's own retries are off, the core retries
    assert len([c for c in fake.calls if c[0] == "platforms.list"]) == before + 1


def _default(kind):
    from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import DEFAULT_BLOCK_SCOPE
    return DEFAULT_BLOCK_SCOPE.get(kind)


def test_the_table_without_the_sdk():
    assert errors.classify("RESOURCE_EXHAUSTED", ["not_enough_resources"], "") == (K.CAPACITY, B.OFFER)
    assert errors.classify("RESOURCE_EXHAUSTED", ["quota_failure"], "") == (K.QUOTA, B.REGION)
    assert errors.classify("SOMETHING_NEW", [], "") == (K.TRANSIENT, None)


def test_a_bad_token_is_credentials(fake):
    fake.clear_faults()
    with pytest.raises(ProviderError) as raised:
        adapter(fake, iam_token="not-the-token").plan(ResourceRequest(vm_name="e", gpu="H100"))
    assert raised.value.kind == K.CREDENTIALS and "not-the-token" not in str(raised.value)


def test_no_credentials_is_credentials_naming_the_options(fake, monkeypatch):
    monkeypatch.delenv("NEBIUS_IAM_TOKEN", raising=False)
    provider = adapter(fake, iam_token=None)
    provider.capabilities()  # no call, no credentials needed
    with pytest.raises(ProviderError) as raised:
        provider.plan(ResourceRequest(vm_name="e", gpu="H100"))
    assert raised.value.kind == K.CREDENTIALS and "iam_token" in raised.value.msg


def test_the_token_falls_back_to_the_sdk_environment_variable(fake, monkeypatch):
    monkeypatch.setenv("NEBIUS_IAM_TOKEN", fake.token)
    assert adapter(fake, iam_token=None).plan(ResourceRequest(vm_name="e", gpu="H100"))


def test_no_server_is_transient(fake):
    with pytest.raises(ProviderError) as raised:
        adapter(fake, api_endpoint="127.0.0.1:1", request_timeout_s=3).plan(ResourceRequest(vm_name="e", gpu="H100"))
    assert raised.value.kind == K.TRANSIENT


def test_an_operation_without_resource_id_is_transient(fake):
    provider = adapter(fake)
    with pytest.raises(ProviderError) as raised:
        provider._operation_resource("InstanceService.Create", object())
    assert raised.value.kind == K.TRANSIENT and "outcome unknown" in raised.value.msg


def test_delete_and_observe_take_not_found_as_gone(fake):
    fake.clear_faults()
    provider = adapter(fake)
    location = Location("nebius", fake.region)
    provider.delete(location, "gone-vm", ["computeinstance-e00unknown"])
    assert provider.observe(location, "gone-vm") == []


# -- a finished Operation's status: errors.OPERATION_RULES, one row each --------------------------------------
# (status code, message, ServiceError code, detail) -> (kind, block); the operation is over: nothing is Transient.
OPERATION_ROWS = [
    (C.RESOURCE_EXHAUSTED, "Not enough resources", "NotEnoughResources", NER, K.CAPACITY, B.OFFER),
    (C.RESOURCE_EXHAUSTED, "Quota limit exceeded", "QuotaFailure", QUOTA, K.QUOTA, B.REGION),
    (C.RESOURCE_EXHAUSTED, "too many requests", "TooManyRequests",
     dict(too_many_requests=TooManyRequests(violation="rate")), K.FAILED, B.OFFER),
    (C.RESOURCE_EXHAUSTED, "Quota limit exceeded for compute.instance.gpu", None, None, K.QUOTA, B.REGION),
    (C.RESOURCE_EXHAUSTED, "Resource exhausted", None, None, K.CAPACITY, B.OFFER),
    (C.PERMISSION_DENIED, "permission denied", "PermissionDenied",
     dict(permission_denied=PermissionDenied(resource_id="project-e00x")), K.CREDENTIALS, B.CLOUD),
    (C.CANCELLED, "cancelled", None, None, K.FAILED, B.OFFER),
    (C.ABORTED, "aborted by a newer operation", None, None, K.FAILED, B.OFFER),
    (C.FAILED_PRECONDITION, "image family not found", None, None, K.FAILED, B.OFFER),
    (C.INTERNAL, "internal error", None, None, K.FAILED, B.OFFER),
]


def finished_operation(code, message, error=None):
    """An Operation as the wire carries it: status = google.rpc.Status with the ServiceError packed in details."""
    from nebius.api.google.protobuf import Any as PbAny
    from nebius.api.google.rpc import Status as RpcStatus
    from nebius.api.nebius.common.v1 import Operation
    details = [PbAny(type_url="type.googleapis.com/nebius.common.v1.ServiceError", value=error.SerializeToString())
               ] if error is not None else []
    sent = Operation(id="computeoperation-e00row", resource_id="computeinstance-e00row",
                     status=RpcStatus(code=code.value[0], message=message, details=details))
    return Operation.FromString(sent.SerializeToString())


@pytest.mark.parametrize("code,message,error_code,detail,kind,block", OPERATION_ROWS, ids=lambda v: str(v)[:40])
def test_each_row_of_the_operation_table(code, message, error_code, detail, kind, block):
    error = service_error(error_code, **detail) if error_code else None
    failure = errors.from_operation(finished_operation(code, message, error), "InstanceService.Create")
    assert (failure.kind, failure.block_scope) == (kind, block), failure
    assert failure.code == code.name and code.name in failure.msg and "computeoperation-e00row" in failure.msg
    assert failure.details == ([error_code] if error_code else [])


def test_an_operation_running_or_done_is_no_failure():
    from nebius.api.nebius.common.v1 import Operation
    assert errors.from_operation(Operation(id="op"), "InstanceService.Create") is None   # no status: running
    assert errors.from_operation(finished_operation(C.OK, ""), "InstanceService.Create") is None


def test_the_operation_table_without_the_sdk():
    rules = errors.OPERATION_RULES
    assert errors.classify("RESOURCE_EXHAUSTED", ["not_enough_resources"], "", rules) == (K.CAPACITY, B.OFFER)
    assert errors.classify("RESOURCE_EXHAUSTED", ["quota_failure"], "", rules) == (K.QUOTA, B.REGION)
    assert errors.classify("SOMETHING_NEW", [], "", rules) == (K.FAILED, B.OFFER)
    # a call's table is unchanged: a bare RESOURCE_EXHAUSTED call is a rate limit, retried
    assert errors.classify("RESOURCE_EXHAUSTED", [], "slow down") == (K.TRANSIENT, None)
