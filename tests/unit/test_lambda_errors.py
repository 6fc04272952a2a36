"""The lambda adapter's error table, row by row: each (HTTP status, Lambda error body) the
API documents goes through the real RestClient against a one-route fake and must come out
as its ErrorKind and block scope (and Retry-After for 429)."""

from __future__ import annotations

import pytest

pytest.importorskip("requests")

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (  # noqa: E402
    DEFAULT_BLOCK_SCOPE, BlockScope, ErrorKind, Location, ProviderError, ResourceRequest,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.lambda_cloud import LambdaProvider  # noqa
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.lambda_cloud import errors  # noqa: E402
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.rest import (  # noqa: E402
    MALFORMED_BODY, classify,
)
from ansible_collections.gpuprov.cloud.tests.fakes.lambda_api import LambdaApiFake, Reply, error  # noqa: E402

K, B = ErrorKind, BlockScope

# (status, code, message) -> (kind, block); the table of errors.py, one row each.
ROWS = [
    (400, errors.INSUFFICIENT_CAPACITY, "Not enough capacity to fulfill launch request.", K.CAPACITY, B.OFFER),
    (400, errors.QUOTA_EXCEEDED, "Quota exceeded.", K.QUOTA, B.CLOUD),
    (400, "provider/quota-exceeded", "Upstream quota exceeded.", K.QUOTA, B.CLOUD),
    (403, errors.ACCOUNT_INACTIVE, "Your account is inactive.", K.QUOTA, B.CLOUD),
    (403, errors.INVALID_ADDRESS, "Your billing address is invalid.", K.QUOTA, B.CLOUD),
    (401, errors.INVALID_API_KEY, "API key was invalid, expired, or deleted.", K.CREDENTIALS, B.CLOUD),
    (403, errors.INVALID_API_KEY, "API key was invalid, expired, or deleted.", K.CREDENTIALS, B.CLOUD),
    (400, errors.INVALID_PARAMETERS, "Invalid request data.", K.INVALID_REQUEST, None),
    (404, errors.OBJECT_DOES_NOT_EXIST, "Specified instance does not exist.", K.INVALID_REQUEST, None),
    (400, errors.FILE_SYSTEM_IN_WRONG_REGION, "File system is in the wrong region.", K.INVALID_REQUEST, None),
    (400, errors.FILE_SYSTEMS_NOT_SUPPORTED, "File systems are not supported.", K.INVALID_REQUEST, None),
    (400, errors.KEY_IN_USE, "SSH key is in use.", K.TRANSIENT, None),
    (400, errors.RULESET_IN_USE, "Firewall ruleset is in use by one or more instances.", K.TRANSIENT, None),
    (409, errors.RULESET_IN_USE, "Firewall ruleset is in use by one or more instances.", K.TRANSIENT, None),
    (500, errors.UNKNOWN, "An unknown error occurred.", K.TRANSIENT, None),
    # the spec's 409 of firewall-ruleset create/patch/delete: "Try again later"
    (409, errors.INTERNAL_ERROR, "An internal server error occurred.", K.TRANSIENT, None),
    (500, errors.INTERNAL_ERROR, "An internal server error occurred.", K.TRANSIENT, None),
    (409, errors.CONFLICT, "The request conflicts with the current state of the resource.", K.TRANSIENT, None),
    (403, errors.FORBIDDEN, "Forbidden", K.CREDENTIALS, B.CLOUD),
    (404, errors.NOT_FOUND, "The requested resource was not found.", K.INVALID_REQUEST, None),
    (503, "provider/internal-unavailable", "Upstream unavailable.", K.TRANSIENT, None),
    # rows the defaults answer (no Lambda code, or one the table does not name)
    (401, None, "Unauthorized", K.CREDENTIALS, B.CLOUD),
    (502, None, "Bad gateway", K.TRANSIENT, None),
    (409, errors.DUPLICATE, "A firewall ruleset with this name already exists.", K.FAILED, None),
]


@pytest.fixture
def fake(tmp_path):
    made = LambdaApiFake(str(tmp_path))
    yield made
    made.stop()


def adapter(fake) -> LambdaProvider:
    return LambdaProvider({"api_url": fake.api_url, "api_key": fake.token}, journal_id="j1")


@pytest.mark.parametrize("status,code,message,kind,block", ROWS, ids=str)
def test_each_row_classifies_through_the_client(fake, status, code, message, kind, block):
    fake.fail_next("instances.list", error(status, code, message) if code else Reply(status, {"message": message}))
    with pytest.raises(ProviderError) as info:
        adapter(fake).observe(_location(), "vm1")
    assert (info.value.kind, info.value.block_scope) == (kind, block or _default_block(kind))
    assert message.split(".")[0] in info.value.msg


@pytest.mark.parametrize("status,code,message,kind,block", ROWS, ids=str)
def test_each_row_in_the_table_alone(status, code, message, kind, block):
    assert classify(errors.RULES, status, code, message) == (kind, block)


def test_429_is_transient_with_retry_after(fake):
    fake.rate_limit("instance-types.list", retry_after=7)
    with pytest.raises(ProviderError) as info:
        adapter(fake).plan(_request())
    assert info.value.kind == K.TRANSIENT and info.value.retry_after == 7.0


def test_a_body_that_is_not_json_is_transient(fake):
    fake.malformed("instances.list")
    with pytest.raises(ProviderError) as info:
        adapter(fake).observe(_location(), "vm1")
    assert info.value.kind == K.TRANSIENT and MALFORMED_BODY in info.value.msg


def test_json_without_the_data_envelope_is_transient(fake):
    fake.fail_next("instances.list", Reply(200, {"instances": []}))
    with pytest.raises(ProviderError) as info:
        adapter(fake).observe(_location(), "vm1")
    assert info.value.kind == K.TRANSIENT and MALFORMED_BODY in info.value.msg


def test_a_bad_key_is_credentials_and_never_shown(fake):
    provider = LambdaProvider({"api_url": fake.api_url, "api_key": "secret-not-the-token"})
    with pytest.raises(ProviderError) as info:
        provider.plan(_request())
    assert info.value.kind == K.CREDENTIALS and info.value.block_scope == B.CLOUD
    assert "global/invalid-api-key" in info.value.msg and "secret-not-the-token" not in info.value.msg


def test_no_key_is_credentials():
    with pytest.raises(ProviderError) as info:
        LambdaProvider({"api_url": "http://127.0.0.1:9", "api_key": ""}).plan(_request())
    assert info.value.kind == K.CREDENTIALS


def test_an_unreachable_api_is_transient():
    with pytest.raises(ProviderError) as info:
        LambdaProvider({"api_url": "http://127.0.0.1:9/api/v1", "api_key": "k"}).plan(_request())
    assert info.value.kind == K.TRANSIENT


def _default_block(kind):
    return DEFAULT_BLOCK_SCOPE.get(kind)


def _location():
    return Location("lambda", "us-east-1")


def _request():
    return ResourceRequest(vm_name="vm1", gpu="A10")
