"""The runpod error table, row by row: RunPod v2 problem bodies through the shared
vendor-body reader and the adapter's rules, then a few through the adapter and its fake
(Retry-After, malformed bodies, 404 on delete)."""

from __future__ import annotations

import pytest

pytest.importorskip("requests")

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (  # noqa: E402
    BlockScope, ErrorKind, InstanceSpec, Location, ProviderError, ResourceRequest,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.rest import (  # noqa: E402
    classify, vendor_error,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.runpod import RunpodProvider  # noqa: E402
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.runpod.errors import (  # noqa: E402
    CREATE_RULES, RULES,
)
from ansible_collections.gpuprov.cloud.tests.fakes.runpod_api import (  # noqa: E402
    CAPACITY_DETAIL, RunpodApiFake,
)

K, B = ErrorKind, BlockScope
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAABAgMEBQYHCAkKCwwNDg8QERITFBUWFxgZGhscHR4f me@laptop"


def body(status, detail, errors=None):
    titles = {400: "Bad Request", 401: "Unauthorized", 402: "Payment Required", 403: "Forbidden",
              404: "Not Found", 409: "Conflict", 422: "Unprocessable Entity", 429: "Too Many Requests"}
    out = {"title": titles.get(status, "Error"), "status": status, "detail": detail}
    if errors:
        out["errors"] = errors
    return out


# (table, status, detail, kind, block)
ROWS = [
    ("create", 400, CAPACITY_DETAIL, K.CAPACITY, B.OFFER),
    ("create", 400, "There are not enough free GPUs on the host machine to start this pod.", K.CAPACITY, B.OFFER),
    ("create", 400, "This machine does not have the resources to deploy your pod.", K.CAPACITY, B.OFFER),
    ("create", 400, "this GPU and data center combination could not be placed", K.CAPACITY, B.OFFER),
    ("create", 400, "allowedCudaVersions and minCudaVersion are mutually exclusive", K.FAILED, B.OFFER),
    ("create", 403, "access denied", K.UNAVAILABLE, B.OFFER),   # createPod's 403: skip the candidate
    ("create", 403, "Your account cannot access the requested GPU pool.", K.UNAVAILABLE, B.OFFER),
    ("create", 402, "Insufficient balance to deploy this pod.", K.QUOTA, B.CLOUD),
    ("create", 422, "Request validation failed.", K.INVALID_REQUEST, None),
    ("create", 404, "template not found", K.INVALID_REQUEST, None),
    ("create", 401, "missing bearer token", K.CREDENTIALS, B.CLOUD),
    ("create", 429, "rate limit exceeded for the minute window", K.TRANSIENT, None),
    ("create", 500, "internal error", K.TRANSIENT, None),
    ("create", 503, "upstream unavailable", K.TRANSIENT, None),
    ("any", 400, "product is required with include=AVAILABILITY", K.INVALID_REQUEST, None),
    ("any", 400, CAPACITY_DETAIL, K.INVALID_REQUEST, None),  # only create places pods
    ("any", 401, "invalid bearer token", K.CREDENTIALS, B.CLOUD),
    ("any", 403, "access denied", K.CREDENTIALS, B.CLOUD),
    ("any", 402, "Insufficient balance", K.QUOTA, B.CLOUD),
    ("any", 404, "The requested Pod does not exist.", K.INVALID_REQUEST, None),
    ("any", 409, "Pod belongs to a cluster and cannot be terminated via the pod endpoints.",
     K.INVALID_REQUEST, None),
    ("any", 409, "conflict", K.FAILED, B.OFFER),
    ("any", 422, "Request validation failed.", K.INVALID_REQUEST, None),
    ("any", 429, "rate limit exceeded", K.TRANSIENT, None),
    ("any", 502, "bad gateway", K.TRANSIENT, None),
    ("any", 418, "teapot", K.FAILED, B.OFFER),
]


@pytest.mark.parametrize("table,status,detail,kind,block", ROWS,
                         ids=["%s-%d-%s" % (r[0], r[1], r[3]) for r in ROWS])
def test_error_row(table, status, detail, kind, block):
    code, message = vendor_error(body(status, detail))
    got_kind, got_block = classify(CREATE_RULES if table == "create" else RULES, status, code, message)
    err = ProviderError(got_kind, message, got_block)
    assert (err.kind, err.block_scope) == (kind, block)


@pytest.fixture
def fake(tmp_path):
    made = RunpodApiFake(str(tmp_path))
    yield made
    made.stop()


@pytest.fixture
def provider(fake):
    return RunpodProvider({"api_url": fake.api_url, "api_key": fake.token}, journal_id="j1")


REQUEST = ResourceRequest(vm_name="err", gpu="RTX4090")


def test_rate_limit_carries_retry_after(fake, provider):
    fake.rate_limit("catalog.gpus", retry_after=12)
    with pytest.raises(ProviderError) as info:
        provider.plan(REQUEST)
    assert info.value.kind == K.TRANSIENT and info.value.retry_after == 12
    assert "retry after 12s" in info.value.msg


def test_malformed_body_is_failed(fake, provider):
    fake.malformed("pods.list")
    with pytest.raises(ProviderError) as info:
        provider.observe(Location("runpod", "US-TX-3"), "err")
    assert info.value.kind == K.FAILED


def test_wrong_shape_is_failed(fake, provider):
    from ansible_collections.gpuprov.cloud.tests.fakes.marketplace import Reply
    fake.fail_next("catalog.gpus", Reply(200, {"items": []}))
    with pytest.raises(ProviderError) as info:
        provider.plan(REQUEST)
    assert info.value.kind == K.FAILED and "gpus" in info.value.msg


def test_bad_key_is_credentials_and_never_shown(fake):
    provider = RunpodProvider({"api_url": fake.api_url, "api_key": "wrong-secret-key"})
    with pytest.raises(ProviderError) as info:
        provider.plan(REQUEST)
    assert (info.value.kind, info.value.block_scope) == (K.CREDENTIALS, B.CLOUD)
    assert "invalid bearer token" in info.value.msg and "wrong-secret-key" not in info.value.msg


def test_empty_key_is_credentials(fake, monkeypatch):
    monkeypatch.delenv("RUNPOD_API_KEY", raising=False)
    provider = RunpodProvider({"api_url": fake.api_url})   # building needs no key (journalled options hold none)
    assert provider.capabilities().kubernetes is False
    with pytest.raises(ProviderError) as info:
        provider.plan(REQUEST)
    assert info.value.kind == K.CREDENTIALS and fake.calls == []


def test_key_from_environment(fake, monkeypatch):
    monkeypatch.setenv("RUNPOD_API_KEY", fake.token)
    assert RunpodProvider({"api_url": fake.api_url}).plan(REQUEST)


def test_delete_of_unknown_pod_is_success(fake, provider):
    provider.delete(Location("runpod", "US-TX-3"), "err", ["nosuchpod"])
    assert [c[0] for c in fake.calls] == ["pods.delete"]


def test_cluster_pod_delete_is_invalid(fake, provider):
    fake.pods["clusterpod"] = {"id": "clusterpod", "_cluster": True}
    with pytest.raises(ProviderError) as info:
        provider.delete(Location("runpod", "US-TX-3"), "err", ["clusterpod"])
    assert info.value.kind == K.INVALID_REQUEST and "cluster" in info.value.msg


def test_create_403_with_the_specs_forbidden_body_skips_the_candidate(fake, provider):
    # createPod's 403 answers ForbiddenError ({"detail": "access denied"}); its table says skip it, keep going
    offer = provider.plan(REQUEST)[0]
    prepared = provider.prepare(offer, InstanceSpec(vm_name="err", ssh_public_key=KEY))
    fake.fail_problem("pods.create", 403, "access denied")
    with pytest.raises(ProviderError) as info:
        provider.create(offer, prepared, InstanceSpec(vm_name="err", ssh_public_key=KEY))
    assert (info.value.kind, info.value.block_scope) == (K.UNAVAILABLE, B.OFFER) and not info.value.fatal
