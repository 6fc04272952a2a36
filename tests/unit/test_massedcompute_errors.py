"""The massedcompute adapter's error table, row by row: each (HTTP status, message) goes
through the real RestClient against the Massed Compute fake and must come out as its
ErrorKind and block scope (and Retry-After for 429). Massed Compute publishes no error
codes, so the rows are statuses and the words of the message."""

from __future__ import annotations

import pytest

pytest.importorskip("requests")

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (  # noqa: E402
    DEFAULT_BLOCK_SCOPE, BlockScope, ErrorKind, InstanceSpec, Location, ProviderError, ResourceRequest,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.massedcompute import (  # noqa: E402
    MassedComputeProvider, errors,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.rest import (  # noqa: E402
    MALFORMED_BODY, classify,
)
from ansible_collections.gpuprov.cloud.tests.fakes.massedcompute_api import (  # noqa: E402
    MassedComputeApiFake, Reply, error,
)

K, B = ErrorKind, BlockScope

# (status, message) -> (kind, block); the rows of errors.py, then those the defaults answer
ROWS = [
    (429, "Too Many Requests", K.TRANSIENT, None),
    (429, "Rate limit exceeded", K.TRANSIENT, None),
    (400, "Out of stock: no capacity available for gpu_1x_l40 in us-central-1.", K.CAPACITY, B.OFFER),
    (409, "no capacity available", K.CAPACITY, B.OFFER),
    (400, "Product gpu_8x_h100 is sold out", K.CAPACITY, B.OFFER),
    (400, "Insufficient inventory for gpu_1x_l40", K.CAPACITY, B.OFFER),
    (403, "Instance limit exceeded for this account.", K.QUOTA, B.CLOUD),
    (400, "GPU quota reached", K.QUOTA, B.CLOUD),
    (400, "Maximum number of instances reached", K.QUOTA, B.CLOUD),
    (400, "Insufficient funds: your balance is too low", K.QUOTA, B.CLOUD),
    (402, "Billing is not configured: set a recharge amount and threshold.", K.QUOTA, B.CLOUD),
    (402, "Payment Required", K.QUOTA, B.CLOUD),
    (400, "Product does not support the VM Image", K.UNAVAILABLE, B.INSTANCE_TYPE),
    # the defaults
    (401, "Authentication not correct.", K.CREDENTIALS, B.CLOUD),
    (401, "Unauthenticated: invalid or missing API token.", K.CREDENTIALS, B.CLOUD),
    (403, "This action is unauthorized (read-only API key).", K.CREDENTIALS, B.CLOUD),
    (400, "The given data was invalid.", K.INVALID_REQUEST, None),
    (404, "Instance not found.", K.INVALID_REQUEST, None),
    (400, "No valid VMs found", K.INVALID_REQUEST, None),    # delete reads it as gone, elsewhere it is wrong
    (422, "The given data was invalid.", K.INVALID_REQUEST, None),
    (500, "Server Error", K.TRANSIENT, None),
    (503, "Service Unavailable: capacity planning in progress", K.TRANSIENT, None),
]


@pytest.fixture
def fake(tmp_path):
    made = MassedComputeApiFake(str(tmp_path))
    yield made
    made.stop()


def adapter(fake, **options) -> MassedComputeProvider:
    return MassedComputeProvider(dict({"api_url": fake.api_url, "api_key": fake.token}, **options), journal_id="j1")


@pytest.mark.parametrize("status,message,kind,block", ROWS, ids=str)
def test_each_row_classifies_through_the_client(fake, status, message, kind, block):
    fake.fail_next("instance.list", error(status, message))
    with pytest.raises(ProviderError) as info:
        adapter(fake).observe(_location(), "vm1")
    assert (info.value.kind, info.value.block_scope) == (kind, block or DEFAULT_BLOCK_SCOPE.get(kind))
    assert message.split(":")[0].split(".")[0] in info.value.msg


@pytest.mark.parametrize("status,message,kind,block", ROWS, ids=str)
def test_each_row_in_the_table_alone(status, message, kind, block):
    assert classify(errors.RULES, status, None, message) == (kind, block)


def test_429_is_transient_with_retry_after(fake):
    fake.rate_limit("gpu-inventory", retry_after=7)
    with pytest.raises(ProviderError) as info:
        adapter(fake).plan(_request())
    assert info.value.kind == K.TRANSIENT and info.value.retry_after == 7.0


def test_capacity_and_quota_levers_on_launch(fake):
    provider = adapter(fake)
    offer = provider.plan(_request())[0]
    spec = _spec()
    prepared = provider.prepare(offer, spec)
    for lever, kind, block in ((fake.fail_capacity, K.CAPACITY, B.OFFER), (fake.fail_quota, K.QUOTA, B.CLOUD),
                               (fake.fail_billing, K.QUOTA, B.CLOUD),
                               (fake.fail_image_unsupported, K.UNAVAILABLE, B.INSTANCE_TYPE)):
        lever()
        with pytest.raises(ProviderError) as info:
            provider.create(offer, prepared, spec)
        assert (info.value.kind, info.value.block_scope) == (kind, block)
    assert fake.instances == {}


def test_a_body_that_is_not_json_is_transient(fake):
    fake.malformed("instance.list")
    with pytest.raises(ProviderError) as info:
        adapter(fake).observe(_location(), "vm1")
    assert info.value.kind == K.TRANSIENT and MALFORMED_BODY in info.value.msg


@pytest.mark.parametrize("body", [{"instances": []}, {"runningInstances": {"uuid": "x"}}, []])
def test_json_of_another_shape_is_transient(fake, body):
    fake.fail_next("instance.list", Reply(200, body))
    with pytest.raises(ProviderError) as info:
        adapter(fake).observe(_location(), "vm1")
    assert info.value.kind == K.TRANSIENT and MALFORMED_BODY in info.value.msg


def test_a_malformed_listing_never_quotes_an_instance_password(fake):
    fake.fail_next("instance.list", Reply(200, {"runningInstances": {"uuid": "x", "password": "hunter2-vm-pw"}}))
    with pytest.raises(ProviderError) as info:
        adapter(fake).observe(_location(), "vm1")
    assert info.value.kind == K.TRANSIENT and "hunter2-vm-pw" not in info.value.msg and "***" in info.value.msg


def test_a_launch_without_an_id_is_transient(fake):
    provider = adapter(fake)
    fake.fail_next("instance.launch", Reply(202, {"response": ""}))
    offer = provider.plan(_request())[0]
    with pytest.raises(ProviderError) as info:
        provider.create(offer, {"ssh_key_name": "k", "image_id": 42}, _spec())
    assert info.value.kind == K.TRANSIENT


def test_a_bad_key_is_credentials_and_never_shown(fake):
    provider = MassedComputeProvider({"api_url": fake.api_url, "api_key": "secret-not-the-token"})
    with pytest.raises(ProviderError) as info:
        provider.plan(_request())
    assert info.value.kind == K.CREDENTIALS and info.value.block_scope == B.CLOUD
    assert "Authentication not correct" in info.value.msg and "secret-not-the-token" not in info.value.msg


def test_no_key_is_credentials_on_first_call_only(monkeypatch):
    monkeypatch.delenv("MASSED_COMPUTE_API_KEY", raising=False)
    provider = MassedComputeProvider({"api_url": "http://127.0.0.1:9"})  # builds without a key
    assert provider.capabilities().boot_script is True
    with pytest.raises(ProviderError) as info:
        provider.plan(_request())
    assert info.value.kind == K.CREDENTIALS and "api_key" in info.value.msg


def test_an_unreachable_api_is_transient():
    with pytest.raises(ProviderError) as info:
        MassedComputeProvider({"api_url": "http://127.0.0.1:9/api/v1", "api_key": "k"}).plan(_request())
    assert info.value.kind == K.TRANSIENT


def _location():
    return Location("massedcompute", "us-central-1")


def _request():
    return ResourceRequest(vm_name="vm1", gpu="L40")


def _spec():
    return InstanceSpec(vm_name="vm1", ssh_public_key="ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIA== me@here")
