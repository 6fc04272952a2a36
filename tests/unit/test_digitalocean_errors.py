"""The digitalocean adapter's error table, row by row: each (HTTP status, DigitalOcean error
body) goes through the real RestClient against the DigitalOcean fake and must come out as its
ErrorKind and block scope (and retry-after for 429)."""

from __future__ import annotations

import pytest

pytest.importorskip("requests")

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (  # noqa: E402
    DEFAULT_BLOCK_SCOPE, BlockScope, ErrorKind, InstanceSpec, Location, ProviderError, ResourceRequest,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.cloud_options.digitalocean import (  # noqa
    TOKEN_ENVIRONMENT,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.digitalocean import (  # noqa: E402
    DigitalOceanProvider, errors,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.rest import (  # noqa: E402
    MALFORMED_BODY, classify,
)
from ansible_collections.gpuprov.cloud.tests.fakes.digitalocean_api import (  # noqa: E402
    DigitalOceanApiFake, Reply, error, public_key,
)

K, B = ErrorKind, BlockScope
U = errors.UNPROCESSABLE

# (status, id, message) -> (kind, block); the table of errors.py, one row each, with the
# messages DigitalOcean sends (as its clients print them).
ROWS = [
    (422, U, "Size is not available in this region.", K.CAPACITY, B.OFFER),
    (422, U, "This size is unavailable", K.CAPACITY, B.OFFER),
    (422, U, "Region is not available", K.CAPACITY, B.REGION),
    (422, U, "creating this/these droplet(s) will exceed your droplet limit", K.QUOTA, B.CLOUD),
    (422, U, "This size is currently restricted please send an additional payment to unlock.", K.QUOTA, B.CLOUD),
    (422, U, "123, 456 are invalid key identifiers for Droplet creation.", K.FAILED, B.OFFER),
    (422, U, "Droplet already has a pending event.", K.TRANSIENT, None),
    (422, U, "a destroy is already in progress", K.TRANSIENT, None),
    # rows the defaults answer (DigitalOcean's id only mirrors the status)
    (422, U, "You specified an invalid size for Droplet creation.", K.INVALID_REQUEST, None),
    (422, U, "You specified an invalid image for Droplet creation.", K.INVALID_REQUEST, None),
    (400, "bad_request", "error parsing request body", K.INVALID_REQUEST, None),
    (404, errors.NOT_FOUND, "The resource you were accessing could not be found.", K.INVALID_REQUEST, None),
    (401, "unauthorized", "Unable to authenticate you.", K.CREDENTIALS, B.CLOUD),
    (403, "forbidden", "You do not have access for the attempted action.", K.CREDENTIALS, B.CLOUD),
    (429, "too_many_requests", "API Rate limit exceeded.", K.TRANSIENT, None),
    (500, "server_error", "Unexpected server-side error", K.TRANSIENT, None),
    (503, "service_unavailable", "Service unavailable", K.TRANSIENT, None),
]


@pytest.fixture
def fake(tmp_path):
    made = DigitalOceanApiFake(str(tmp_path))
    yield made
    made.stop()


def adapter(fake) -> DigitalOceanProvider:
    return DigitalOceanProvider({"api_url": fake.api_url, "api_key": fake.token}, journal_id="j1")


@pytest.mark.parametrize("status,ident,message,kind,block", ROWS, ids=str)
def test_each_row_classifies_through_the_client(fake, status, ident, message, kind, block):
    fake.fail_next("droplets.list", error(status, ident, message))
    with pytest.raises(ProviderError) as info:
        adapter(fake).observe(_location(), "vm1")
    assert (info.value.kind, info.value.block_scope) == (kind, block or DEFAULT_BLOCK_SCOPE.get(kind))
    assert message.split(".")[0] in info.value.msg and ident in info.value.msg


@pytest.mark.parametrize("status,ident,message,kind,block", ROWS, ids=str)
def test_each_row_in_the_table_alone(status, ident, message, kind, block):
    assert classify(errors.RULES, status, ident, message) == (kind, block)


def test_429_is_transient_with_retry_after(fake):
    fake.rate_limit("sizes.list", retry_after=29)
    with pytest.raises(ProviderError) as info:
        adapter(fake).plan(_request())
    assert info.value.kind == K.TRANSIENT and info.value.retry_after == 29.0


def test_the_hourly_limits_429_waits_until_ratelimit_reset(fake):
    # The hourly limit's 429 has no retry-after; ratelimit-reset is when the oldest request expires.
    fake.rate_limit("sizes.list", retry_after=None, reset_in=120)
    with pytest.raises(ProviderError) as info:
        adapter(fake).plan(_request())
    assert info.value.kind == K.TRANSIENT and 110 <= info.value.retry_after <= 120


@pytest.mark.parametrize("value,expected", [
    ("1000120", 120.0), ("999000", 1.0), ("1000000", 1.0), ("9999999", errors.RATE_LIMIT_WINDOW_S),
    ("soon", None), ("", None), (None, None), ("nan", None), ("inf", None),
])
def test_ratelimit_reset_as_seconds_to_wait(value, expected):
    assert errors.retry_after_from_reset(value, now=1000000.0) == expected


def test_a_body_that_is_not_json_is_transient(fake):
    fake.malformed("droplets.list")
    with pytest.raises(ProviderError) as info:
        adapter(fake).observe(_location(), "vm1")
    assert info.value.kind == K.TRANSIENT and MALFORMED_BODY in info.value.msg


def test_a_create_answer_without_the_droplet_is_transient(fake):
    """202 is only "accepted": without the droplet object the outcome is unknown; the core observes."""
    provider = adapter(fake)
    offer = next(o for o in provider.plan(_request()) if o.available)
    spec = InstanceSpec(vm_name="vm1", ssh_public_key=public_key("me@laptop"), allowed_cidrs=["203.0.113.9/32"])
    prepared = provider.prepare(offer, spec)
    fake.fail_next("droplets.create", Reply(202, {"links": {"actions": []}}))
    with pytest.raises(ProviderError) as info:
        provider.create(offer, prepared, spec)
    assert info.value.kind == K.TRANSIENT and MALFORMED_BODY in info.value.msg


def test_a_listing_without_its_collection_is_failed(fake):
    fake.fail_next("droplets.list", Reply(200, {"links": {}}))
    with pytest.raises(ProviderError) as info:
        adapter(fake).observe(_location(), "vm1")
    assert MALFORMED_BODY in info.value.msg


def test_a_bad_token_is_credentials_and_never_shown(fake):
    provider = DigitalOceanProvider({"api_url": fake.api_url, "api_key": "secret-not-the-token"})
    with pytest.raises(ProviderError) as info:
        provider.plan(_request())
    assert info.value.kind == K.CREDENTIALS and info.value.block_scope == B.CLOUD
    assert "Unable to authenticate you" in info.value.msg and "secret-not-the-token" not in info.value.msg


def test_no_token_is_credentials_naming_the_option(monkeypatch):
    for name in TOKEN_ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)
    provider = DigitalOceanProvider({"api_url": "http://127.0.0.1:9/v2"})
    assert provider.capabilities().boot_script   # built without a token
    with pytest.raises(ProviderError) as info:
        provider.plan(_request())
    assert info.value.kind == K.CREDENTIALS and "api_key" in info.value.msg


def test_an_unreachable_api_is_transient():
    with pytest.raises(ProviderError) as info:
        DigitalOceanProvider({"api_url": "http://127.0.0.1:9/v2", "api_key": "k"}).plan(_request())
    assert info.value.kind == K.TRANSIENT


def _location():
    return Location("digitalocean", "tor1")


def _request():
    return ResourceRequest(vm_name="vm1", gpu="H100")
