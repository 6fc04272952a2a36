"""Every row of the GCP error classification table (providers/gcp/errors.py)."""

from __future__ import annotations

import concurrent.futures

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    BlockScope, ErrorKind, ProviderError,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.gcp.errors import (
    classify, classify_exception, classify_operation, from_exception, from_operation,
)

K = ErrorKind
ZONE_MSG = ("The zone 'projects/p/zones/us-central1-a' does not have enough resources available to "
            "fulfill the request.  '(resource type:compute)'.")


def op_item(code, message="", metric=None, limit=None, reason=None):
    item = {"code": code, "message": message}
    if metric or limit:
        item["quota_metric"], item["quota_limit"] = metric, limit
    if reason:
        item["error_reason"] = reason
    return item


def http_item(reason, message=""):
    return {"reason": reason, "domain": "global", "message": message}


# (id, status, items, message, kind, block scope)
ROWS = [
    # capacity (zone): operation codes, the bulk-API reason, SkyPilot's extra codes, message fallback
    ("pool-exhausted", 503, [op_item("ZONE_RESOURCE_POOL_EXHAUSTED", ZONE_MSG)], "SERVICE UNAVAILABLE",
     K.CAPACITY, BlockScope.OFFER),
    ("pool-exhausted-details", 503, [op_item("ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS", ZONE_MSG)], "",
     K.CAPACITY, BlockScope.OFFER),
    ("pool-exhausted-no-status", None, [op_item("ZONE_RESOURCE_POOL_EXHAUSTED")], "", K.CAPACITY, BlockScope.OFFER),
    ("resource-not-available", 503, [op_item("RESOURCE_NOT_AVAILABLE", "not available")], "",
     K.CAPACITY, BlockScope.OFFER),
    ("insufficient-capacity-http", 503, [http_item("insufficientCapacity", "no capacity")], "no capacity",
     K.CAPACITY, BlockScope.OFFER),
    ("unsupported-operation", 400, [op_item("UNSUPPORTED_OPERATION", "preempted during creation")], "",
     K.CAPACITY, BlockScope.OFFER),
    ("resource-not-found-op", 404, [op_item("RESOURCE_NOT_FOUND", "gone")], "", K.CAPACITY, BlockScope.OFFER),
    ("resource-not-found-accelerator", 404, [op_item("RESOURCE_NOT_FOUND", "The resource 'projects/p/zones/z/"
                                                     "acceleratorTypes/nvidia-l4' was not found")], "",
     K.CAPACITY, BlockScope.OFFER),
    ("stockout-error-info", 503, [op_item("SOMETHING_NEW", "no luck", reason="resource_availability")], "",
     K.CAPACITY, BlockScope.OFFER),
    ("stockout-error-info-upper", None, [op_item("SOMETHING_NEW", "no luck", reason="RESOURCE_AVAILABILITY")], "",
     K.CAPACITY, BlockScope.OFFER),
    ("capacity-by-message", None, [op_item("SOMETHING_NEW", ZONE_MSG)], "", K.CAPACITY, BlockScope.OFFER),
    ("capacity-unavailable-message", None,
     [op_item("SOMETHING_NEW", "A a3-highgpu-8g VM instance is currently unavailable in the us-east4-c zone.")], "",
     K.CAPACITY, BlockScope.OFFER),
    # quota: GPUS_ALL_REGIONS blocks the whole cloud, every other metric the region
    ("quota-all-regions-metric", 403, [op_item("QUOTA_EXCEEDED", "Quota exceeded.",
                                               metric="compute.googleapis.com/gpus_all_regions")], "FORBIDDEN",
     K.QUOTA, BlockScope.CLOUD),
    ("quota-all-regions-limit", 403, [op_item("QUOTA_EXCEEDED", "Quota exceeded.",
                                              limit="GPUS-ALL-REGIONS-per-project")], "", K.QUOTA, BlockScope.CLOUD),
    ("quota-all-regions-message", 403, [op_item("QUOTA_EXCEEDED",
                                                "Quota 'GPUS_ALL_REGIONS' exceeded.  Limit: 0.0 globally.")], "",
     K.QUOTA, BlockScope.CLOUD),
    ("quota-all-regions-http", 403,
     [http_item("quotaExceeded", "Quota 'GPUS_ALL_REGIONS' exceeded. Limit: 1.0 globally.")], "",
     K.QUOTA, BlockScope.CLOUD),
    ("quota-cpus-all-regions-message", 403, [op_item("QUOTA_EXCEEDED",
                                                     "Quota 'CPUS_ALL_REGIONS' exceeded.  Limit: 32.0 globally.")],
     "", K.QUOTA, BlockScope.CLOUD),
    ("quota-cpus-all-regions-metric", 403, [op_item("QUOTA_EXCEEDED", "Quota exceeded.",
                                                    metric="compute.googleapis.com/cpus_all_regions")], "",
     K.QUOTA, BlockScope.CLOUD),
    ("quota-cpus-all-regions-http", 403, [http_item("quotaExceeded", "Quota 'CPUS_ALL_REGIONS' exceeded. Limit: 24.0 "
                                                    "globally.")], "", K.QUOTA, BlockScope.CLOUD),
    ("quota-regional-gpu", 403, [op_item("QUOTA_EXCEEDED", "Quota 'NVIDIA_A100_GPUS' exceeded.  Limit: 0.0 in region "
                                         "us-central1.", metric="compute.googleapis.com/nvidia_a100_gpus")], "",
     K.QUOTA, BlockScope.REGION),
    ("quota-regional-preemptible", 403, [op_item("QUOTA_EXCEEDED", "Quota 'PREEMPTIBLE_NVIDIA_L4_GPUS' exceeded.")], "",
     K.QUOTA, BlockScope.REGION),
    ("quota-regional-cpus-http", 403, [http_item("quotaExceeded", "Quota 'CPUS' exceeded. Limit: 24.0 in region "
                                                 "us-east4.")], "", K.QUOTA, BlockScope.REGION),
    # throttling / not ready / backend trouble -> retry the step
    ("rate-limit-403", 403, [http_item("rateLimitExceeded", "Rate Limit Exceeded")], "", K.TRANSIENT, None),
    ("user-rate-limit", 403, [http_item("userRateLimitExceeded")], "", K.TRANSIENT, None),
    ("operation-rate", None, [op_item("RESOURCE_OPERATION_RATE_EXCEEDED")], "", K.TRANSIENT, None),
    ("resource-not-ready", 400, [op_item("RESOURCE_NOT_READY")], "", K.TRANSIENT, None),
    ("resource-not-ready-http", 400, [http_item("resourceNotReady")], "", K.TRANSIENT, None),
    ("backend-error", 500, [http_item("backendError")], "", K.TRANSIENT, None),
    ("internal-error", None, [http_item("internalError")], "", K.TRANSIENT, None),
    # credentials / permission / API not enabled
    ("iam-denied", 403, [op_item("IAM_PERMISSION_DENIED", "Required 'compute.instances.create' permission")], "",
     K.CREDENTIALS, None),
    ("forbidden", 403, [http_item("forbidden", "Required 'compute.firewalls.create' permission")], "",
     K.CREDENTIALS, None),
    ("not-enabled", 403, [http_item("accessNotConfigured", "Compute Engine API has not been used in project 1 "
                                    "before or it is disabled.")], "", K.CREDENTIALS, None),
    ("service-disabled", 403, [{"reason": "SERVICE_DISABLED"}], "", K.CREDENTIALS, None),
    ("auth-error", 401, [http_item("authError", "Invalid Credentials")], "", K.CREDENTIALS, None),
    ("unauthorized", None, [http_item("unauthorized")], "", K.CREDENTIALS, None),
    ("scope-insufficient", 403, [{"reason": "ACCESS_TOKEN_SCOPE_INSUFFICIENT"}], "", K.CREDENTIALS, None),
    # invalid request
    ("invalid", 400, [http_item("invalid", "Invalid value for field 'resource.name'")], "", K.INVALID_REQUEST, None),
    ("invalid-field-value", None, [op_item("INVALID_FIELD_VALUE")], "", K.INVALID_REQUEST, None),
    ("bad-request", 400, [http_item("badRequest")], "", K.INVALID_REQUEST, None),
    ("invalid-parameter", 400, [http_item("invalidParameter")], "", K.INVALID_REQUEST, None),
    ("vpc-not-found", None, [op_item("VPC_NOT_FOUND")], "", K.INVALID_REQUEST, None),
    ("subnet-not-found", None, [op_item("SUBNET_NOT_FOUND_FOR_VPC")], "", K.INVALID_REQUEST, None),
    ("disk-too-small", 400, [http_item("invalid", "Requested disk size cannot be smaller than the image size (50 GB)")],
     "", K.INVALID_REQUEST, None),
    # bare HTTP statuses
    ("bare-401", 401, [], "Login Required", K.CREDENTIALS, None),
    ("bare-401-required", 401, [http_item("required", "Login Required.")], "", K.CREDENTIALS, None),
    ("bare-403", 403, [], "denied", K.CREDENTIALS, None),
    ("bare-400", 400, [], "bad", K.INVALID_REQUEST, None),
    ("project-not-found", 404, [http_item("notFound", "The resource 'projects/nope' was not found")], "",
     K.INVALID_REQUEST, None),
    ("not-found", 404, [http_item("notFound", "The resource 'projects/p/zones/z/acceleratorTypes/x' was not found")],
     "", K.UNAVAILABLE, BlockScope.OFFER),
    ("timeout-408", 408, [], "", K.TRANSIENT, None),
    ("precondition-412", 412, [http_item("conditionNotMet")], "", K.TRANSIENT, None),
    ("too-many-429", 429, [], "", K.TRANSIENT, None),
    ("server-500", 500, [], "", K.TRANSIENT, None),
    ("server-502", 502, [], "", K.TRANSIENT, None),
    ("server-503", 503, [http_item("backendError")], "", K.TRANSIENT, None),
    ("server-504", 504, [], "", K.TRANSIENT, None),
    ("conflict-409", 409, [http_item("alreadyExists")], "", K.FAILED, BlockScope.OFFER),
    # unknown
    ("unknown-code", None, [op_item("SOMETHING_NEVER_SEEN", "odd")], "", K.FAILED, BlockScope.OFFER),
    ("unknown-status", 418, [], "", K.FAILED, BlockScope.OFFER),
    ("nothing", None, [], "", K.FAILED, BlockScope.OFFER),
]


@pytest.mark.parametrize("status,items,message,kind,block", [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_classification_row(status, items, message, kind, block):
    err = classify(status, items, message, where="gcp instances.insert")
    assert isinstance(err, ProviderError)
    assert err.kind == kind
    assert err.block_scope == block
    assert err.msg.startswith(("gcp instances.insert", "project: gcp instances.insert"))


MISSING = [
    ("network", "projects/p/global/networks/no-such-vpc"),
    ("network", "projects/p/regions/us-central1/subnetworks/no-such-subnet"),
    ("image_family", "projects/ubuntu-os-accelerator-images/global/images/family/no-such-family"),
    ("image_family", "projects/p/global/images/gone-v1"),
    ("firewall", "projects/p/global/firewalls/gpuprov-x"),
    ("image_family", "https://www.googleapis.com/compute/v1/projects/p/global/images/gone-v1"),
]


@pytest.mark.parametrize("field,path", MISSING)
@pytest.mark.parametrize("status,item", [(404, op_item), (None, op_item), (404, http_item)])
def test_missing_configuration_is_a_bad_request_naming_it(field, path, status, item):
    code = "RESOURCE_NOT_FOUND" if item is op_item else "notFound"
    err = classify(status, [item(code, "The resource '%s' was not found" % path)], "", where="gcp instances.insert")
    assert (err.kind, err.block_scope) == (K.INVALID_REQUEST, None)
    assert err.msg.startswith("%s: %s does not exist" % (field, path[path.index("projects/"):]))


def test_project_not_found_names_the_field():
    err = classify(404, [http_item("notFound", "The resource 'projects/nope' was not found")], "")
    assert err.msg.startswith("project:")


def test_message_carries_codes_and_text():
    err = classify(503, [op_item("ZONE_RESOURCE_POOL_EXHAUSTED", ZONE_MSG)], "SERVICE UNAVAILABLE", where="w")
    assert "ZONE_RESOURCE_POOL_EXHAUSTED" in err.msg and "does not have enough resources" in err.msg
    assert "SERVICE UNAVAILABLE" in err.msg


def test_codes_beat_statuses():
    # 403 is Credentials alone, but quota and rate-limit reasons win.
    assert classify(403, [http_item("quotaExceeded", "Quota 'CPUS' exceeded.")]).kind == K.QUOTA
    assert classify(403, [http_item("rateLimitExceeded")]).kind == K.TRANSIENT
    # 503 is Transient alone, but a pool-exhausted code makes it Capacity.
    assert classify(503, [op_item("ZONE_RESOURCE_POOL_EXHAUSTED")]).kind == K.CAPACITY
    # capacity wins over quota when both appear
    assert classify(403, [op_item("QUOTA_EXCEEDED"), op_item("ZONE_RESOURCE_POOL_EXHAUSTED")]).kind == K.CAPACITY


# -- normalising SDK objects ----------------------------------------------------------------

try:
    from google.api_core import exceptions as gexc
    from google.cloud import compute_v1
except ImportError:  # the pure rows above still run
    compute_v1 = gexc = None
pytestmark_sdk = pytest.mark.skipif(compute_v1 is None, reason="google-cloud-compute not installed")


def _operation(code, message, http_status, metric=None):
    details = [compute_v1.ErrorDetails(quota_info=compute_v1.QuotaExceededInfo(
        metric_name=metric, limit_name=metric.upper().replace("_", "-") + "-per-project"))] if metric else []
    return compute_v1.Operation(
        name="operation-1", status=compute_v1.Operation.Status.DONE, http_error_status_code=http_status,
        http_error_message="FORBIDDEN", error=compute_v1.Error(errors=[compute_v1.Errors(
            code=code, message=message, error_details=details)]))


@pytestmark_sdk
def test_from_operation_reads_proto_errors_and_quota_info():
    op = _operation("QUOTA_EXCEEDED", "Quota exceeded.", 403, metric="compute.googleapis.com/gpus_all_regions")
    status, items, message = from_operation(op)
    assert status == 403 and message == "FORBIDDEN"
    assert items[0]["code"] == "QUOTA_EXCEEDED"
    assert items[0]["quota_metric"] == "compute.googleapis.com/gpus_all_regions"
    err = classify_operation(op, "gcp instances.insert")
    assert (err.kind, err.block_scope) == (K.QUOTA, BlockScope.CLOUD)


@pytestmark_sdk
def test_from_operation_regional_quota():
    op = _operation("QUOTA_EXCEEDED", "Quota 'NVIDIA_L4_GPUS' exceeded.", 403,
                    metric="compute.googleapis.com/nvidia_l4_gpus")
    err = classify_operation(op)
    assert (err.kind, err.block_scope) == (K.QUOTA, BlockScope.REGION)


@pytestmark_sdk
def test_from_operation_reads_json_shaped_errors():
    class Op:  # a dict-shaped Operation, as parsed from the REST body
        http_error_status_code = 503
        http_error_message = "SERVICE UNAVAILABLE"

        class error:
            errors = [{"code": "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS", "message": ZONE_MSG,
                       "errorDetails": [{"quotaInfo": {"metricName": "m", "limitName": "l"}}]}]
    status, items, _message = from_operation(Op)
    assert status == 503 and items[0]["quota_metric"] == "m"
    assert classify_operation(Op).kind == K.CAPACITY


STOCKOUT_DETAILS = [
    {"errorInfo": {"reason": "resource_availability", "domain": "compute.googleapis.com",
                   "metadatas": {"zone": "us-central1-a", "vmType": "a3-highgpu-8g"}}},
    {"localizedMessage": {"locale": "en-US", "message": "A a3-highgpu-8g VM instance is currently unavailable "
                                                        "in the us-central1-a zone."}},
]


@pytestmark_sdk
def test_from_operation_reads_the_stockout_error_info():
    proto = compute_v1.Operation(
        name="operation-3", status=compute_v1.Operation.Status.DONE, http_error_status_code=503,
        error=compute_v1.Error(errors=[compute_v1.Errors(
            code="SOMETHING_NEW", message="odd", error_details=[compute_v1.ErrorDetails(
                error_info=compute_v1.ErrorInfo(reason="resource_availability", domain="compute.googleapis.com",
                                                metadatas={"zone": "us-central1-a"}))])]))

    class Op:  # the same, dict-shaped
        http_error_status_code = 503
        http_error_message = "SERVICE UNAVAILABLE"

        class error:
            errors = [{"code": "SOMETHING_NEW", "message": "odd", "errorDetails": STOCKOUT_DETAILS}]
    for op in (proto, Op):
        assert from_operation(op)[1][0]["error_reason"] == "resource_availability"
        assert (classify_operation(op).kind, classify_operation(op).block_scope) == (K.CAPACITY, BlockScope.OFFER)


@pytestmark_sdk
def test_successful_operation_is_no_error():
    op = compute_v1.Operation(name="operation-2", status=compute_v1.Operation.Status.DONE)
    assert from_operation(op) is None
    assert classify_operation(op) is None


@pytestmark_sdk
def test_from_exception_reads_http_errors():
    exc = gexc.from_http_status(403, "Quota 'CPUS' exceeded.", errors=[
        {"message": "Quota 'CPUS' exceeded.", "domain": "usageLimits", "reason": "quotaExceeded"}])
    status, items, _message = from_exception(exc)
    assert status == 403 and items[0]["reason"] == "quotaExceeded"
    err = classify_exception(exc, "gcp instances.insert")
    assert (err.kind, err.block_scope) == (K.QUOTA, BlockScope.REGION)


@pytestmark_sdk
def test_from_exception_reads_error_info_reason():
    from google.rpc import error_details_pb2
    info = error_details_pb2.ErrorInfo(reason="SERVICE_DISABLED", domain="googleapis.com")
    exc = gexc.from_http_status(403, "Compute Engine API has not been used", error_info=info)
    assert {"reason": "SERVICE_DISABLED"} in from_exception(exc)[1]
    assert classify_exception(exc).kind == K.CREDENTIALS


@pytestmark_sdk
@pytest.mark.parametrize("status,kind", [(400, K.INVALID_REQUEST), (401, K.CREDENTIALS), (403, K.CREDENTIALS),
                                         (404, K.UNAVAILABLE), (409, K.FAILED), (429, K.TRANSIENT),
                                         (500, K.TRANSIENT), (503, K.TRANSIENT), (504, K.TRANSIENT)])
def test_sdk_http_exceptions(status, kind):
    assert classify_exception(gexc.from_http_status(status, "x")).kind == kind


@pytestmark_sdk
def test_non_http_exceptions():
    import requests
    from google.auth import exceptions as auth_exc
    assert classify_exception(concurrent.futures.TimeoutError("slow")).kind == K.TRANSIENT
    assert classify_exception(TimeoutError("slow")).kind == K.TRANSIENT
    assert classify_exception(requests.exceptions.ConnectionError("refused")).kind == K.TRANSIENT
    assert classify_exception(requests.exceptions.ReadTimeout("read")).kind == K.TRANSIENT
    assert classify_exception(gexc.RetryError("gave up", None)).kind == K.TRANSIENT
    assert classify_exception(auth_exc.TransportError("dns")).kind == K.TRANSIENT
    assert classify_exception(auth_exc.DefaultCredentialsError("none")).kind == K.CREDENTIALS
    assert classify_exception(auth_exc.RefreshError("expired")).kind == K.CREDENTIALS
    assert classify_exception(RuntimeError("boom")).kind == K.FAILED
    original = ProviderError(K.QUOTA, "x")
    assert classify_exception(original) is original
