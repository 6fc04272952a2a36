"""The hyperstack adapter's error table, row by row: each (HTTP status, Hyperstack error
body) goes through the real RestClient against the fake and must come out as its
ErrorKind and block scope (and Retry-After for 429)."""

from __future__ import annotations

import pytest

pytest.importorskip("requests")

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (  # noqa: E402
    DEFAULT_BLOCK_SCOPE, BlockScope, ErrorKind, InstanceSpec, Location, ProviderError, ResourceRequest,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.hyperstack import (  # noqa: E402
    HyperstackProvider, errors,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.rest import (  # noqa: E402
    DEFAULT_RULES, MALFORMED_BODY, classify,
)
from ansible_collections.gpuprov.cloud.tests.fakes.hyperstack_api import HyperstackApiFake, Reply, error  # noqa

K, B = ErrorKind, BlockScope

# (status, error_reason, message) -> (kind, block); the table of errors.py, one row each.
ROWS = [
    (400, errors.BAD_REQUEST, "The requested flavor n3-A100x1 is out of stock in CANADA-1.", K.CAPACITY, B.OFFER),
    (400, errors.BAD_REQUEST, "Insufficient capacity for flavor n3-H100x8", K.CAPACITY, B.OFFER),
    (409, errors.BAD_REQUEST, "Not enough GPUs available for this flavor", K.CAPACITY, B.OFFER),
    (400, errors.BAD_REQUEST, "Flavor n3-A100x1 is currently unavailable in this region", K.CAPACITY, B.OFFER),
    (400, errors.BAD_REQUEST, "Insufficient balance to create the resource", K.QUOTA, B.CLOUD),
    (402, None, "Payment required: top up your credit", K.QUOTA, B.CLOUD),
    (400, errors.BAD_REQUEST, "VM quota exceeded: the environment has reached its limit", K.QUOTA, B.REGION),
    (403, errors.FORBIDDEN, "GPU limit reached for your organization", K.QUOTA, B.REGION),
    (400, errors.BAD_REQUEST, "VM x is currently being created and cannot be deleted yet. Please wait until the "
                              "creation process is finished before attempting deletion.", K.TRANSIENT, None),
    (400, errors.BAD_REQUEST, "Keypair k is in use by a virtual machine", K.TRANSIENT, None),
    (400, errors.BAD_REQUEST, "Environment e still has resources; delete them first", K.TRANSIENT, None),
    (401, errors.UNAUTHORIZED, "Invalid API key or access token", K.CREDENTIALS, B.CLOUD),
    (403, errors.FORBIDDEN, "You do not have permission to perform this action", K.CREDENTIALS, B.CLOUD),
    (400, errors.BAD_REQUEST, "name: field required", K.INVALID_REQUEST, None),
    (404, errors.NOT_FOUND, "Environment gpuprov-X not found", K.INVALID_REQUEST, None),
    (405, errors.NOT_ALLOWED, "Method Not Allowed", K.INVALID_REQUEST, None),
    (406, None, "Not acceptable: region", K.INVALID_REQUEST, None),
    (409, errors.ALREADY_EXIST, "Virtual machine with name x already exists", K.INVALID_REQUEST, None),
    (422, None, "Unprocessable entity", K.INVALID_REQUEST, None),
    (500, errors.SERVER_ERROR, "Something went wrong", K.TRANSIENT, None),
    (500, None, "Internal Server Error", K.TRANSIENT, None),   # the legacy body, no error_reason
    (503, None, "Service Unavailable", K.TRANSIENT, None),
]


@pytest.fixture
def fake(tmp_path):
    made = HyperstackApiFake(str(tmp_path))
    yield made
    made.stop()


def adapter(fake, **extra) -> HyperstackProvider:
    return HyperstackProvider(dict({"api_url": fake.api_url, "api_key": fake.token}, **extra), journal_id="j1")


@pytest.mark.parametrize("status,reason,message,kind,block", ROWS, ids=str)
def test_each_row_classifies_through_the_client(fake, status, reason, message, kind, block):
    fake.fail_next("vms.list", error(status, reason, message))
    with pytest.raises(ProviderError) as info:
        adapter(fake).observe(_location(), "vm1")
    assert (info.value.kind, info.value.block_scope) == (kind, block or _default_block(kind))
    assert message.split(":")[0].split(".")[0] in info.value.msg


@pytest.mark.parametrize("status,reason,message,kind,block", ROWS, ids=str)
def test_each_row_in_the_table_alone(status, reason, message, kind, block):
    assert classify(errors.RULES + DEFAULT_RULES, status, reason, message) == (kind, block)


def test_capacity_on_create_blocks_the_offer(fake):
    fake.fail_capacity()
    provider = adapter(fake, allowed_cidrs=["198.51.100.7/32"])
    offer = provider.plan(_request())[0]
    spec = InstanceSpec(vm_name="vm1", ssh_public_key="ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIA unit")
    prepared = provider.prepare(offer, spec)
    with pytest.raises(ProviderError) as info:
        provider.create(offer, prepared, spec)
    assert (info.value.kind, info.value.block_scope) == (K.CAPACITY, B.OFFER)


def test_429_is_transient_with_retry_after(fake):
    fake.rate_limit("flavors.list", retry_after=7)
    with pytest.raises(ProviderError) as info:
        adapter(fake).plan(_request())
    assert info.value.kind == K.TRANSIENT and info.value.retry_after == 7.0


def test_429_without_retry_after_is_transient(fake):
    fake.rate_limit("flavors.list")   # Hyperstack documents no Retry-After
    with pytest.raises(ProviderError) as info:
        adapter(fake).plan(_request())
    assert info.value.kind == K.TRANSIENT and info.value.retry_after is None


def test_a_body_that_is_not_json_is_transient(fake):
    fake.malformed("vms.list")
    with pytest.raises(ProviderError) as info:
        adapter(fake).observe(_location(), "vm1")
    assert info.value.kind == K.TRANSIENT and MALFORMED_BODY in info.value.msg


def test_json_without_the_listing_is_transient(fake):
    fake.fail_next("flavors.list", Reply(200, {"status": True, "message": "ok", "flavors": []}))
    with pytest.raises(ProviderError) as info:
        adapter(fake).plan(_request())
    assert info.value.kind == K.TRANSIENT and MALFORMED_BODY in info.value.msg


def test_a_pricebook_that_is_not_an_array_is_transient(fake):
    fake.fail_next("pricebook.get", Reply(200, {"status": True, "pricebook": []}))
    with pytest.raises(ProviderError) as info:
        adapter(fake).plan(_request())
    assert info.value.kind == K.TRANSIENT and MALFORMED_BODY in info.value.msg


def test_a_200_with_status_false_is_the_vendors_refusal(fake):
    fake.fail_next("flavors.list", Reply(200, {"status": False, "message": "Insufficient balance to list"}))
    with pytest.raises(ProviderError) as info:
        adapter(fake).plan(_request())
    assert (info.value.kind, info.value.block_scope) == (K.QUOTA, B.CLOUD)


def test_a_bad_key_is_credentials_and_never_shown(fake):
    provider = HyperstackProvider({"api_url": fake.api_url, "api_key": "secret-not-the-token"})
    with pytest.raises(ProviderError) as info:
        provider.plan(_request())
    assert info.value.kind == K.CREDENTIALS and info.value.block_scope == B.CLOUD
    assert "unauthorized" in info.value.msg and "secret-not-the-token" not in info.value.msg


def test_no_key_is_credentials_naming_the_option():
    provider = HyperstackProvider({"api_url": "http://127.0.0.1:9", "api_key": ""})
    provider.capabilities()  # built and asked without a key: fine
    with pytest.raises(ProviderError) as info:
        provider.plan(_request())
    assert info.value.kind == K.CREDENTIALS and "api_key" in info.value.msg


def test_an_unreachable_api_is_transient():
    with pytest.raises(ProviderError) as info:
        HyperstackProvider({"api_url": "http://127.0.0.1:9/v1", "api_key": "k"}).plan(_request())
    assert info.value.kind == K.TRANSIENT


def _default_block(kind):
    return DEFAULT_BLOCK_SCOPE.get(kind)


def _location():
    return Location("hyperstack", "CANADA-1")


def _request():
    return ResourceRequest(vm_name="vm1", gpu="A100-80GB", gpu_count=1)
