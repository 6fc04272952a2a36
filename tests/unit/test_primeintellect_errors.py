"""The primeintellect error table, row by row: Prime's FastAPI error bodies (``detail`` a
string or a list of ``{loc, msg, type}``) through the shared vendor-body reader and the
adapter's rules, then the cross-cutting cases through the adapter and its fake (Retry-After,
a malformed body, 404 on delete)."""

from __future__ import annotations

import pytest

pytest.importorskip("requests")

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (  # noqa: E402
    BlockScope, ErrorKind, InstanceSpec, Location, ProviderError, ResourceRequest,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.primeintellect import (  # noqa: E402
    PrimeIntellectProvider,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.primeintellect.errors import (  # noqa: E402
    RULES,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.rest import (  # noqa: E402
    MALFORMED_BODY, classify, vendor_error,
)
from ansible_collections.gpuprov.cloud.tests.fakes.marketplace import Reply  # noqa: E402
from ansible_collections.gpuprov.cloud.tests.fakes.primeintellect_api import PrimeIntellectApiFake  # noqa: E402

K, B = ErrorKind, BlockScope

# (id, status, body, kind, block)
ROWS = [
    # capacity: no status of its own, read from the message (as SkyPilot's adapter does)
    ("no-capacity", 400, {"detail": "No capacity available for this configuration"}, K.CAPACITY, B.OFFER),
    ("out-of-stock", 400, {"detail": "GPU out of stock at CANADA-1"}, K.CAPACITY, B.OFFER),
    ("offer-gone", 400, {"detail": "Offer not available: no H100_80GB x1 with cloudId 'x'"}, K.CAPACITY, B.OFFER),
    ("provider-unavailable", 400, {"detail": "Provider hyperstack is currently unavailable"}, K.CAPACITY, B.OFFER),
    ("insufficient-gpus", 409, {"detail": "Insufficient GPUs on the host"}, K.CAPACITY, B.OFFER),
    ("capacity-in-422-list", 422, {"detail": [{"loc": ["body", "pod"], "msg": "no capacity for this offer",
                                               "type": "value_error"}]}, K.CAPACITY, B.OFFER),
    ("capacity-5xx", 500, {"detail": "Upstream error: insufficient capacity in region"}, K.CAPACITY, B.OFFER),
    ("sold-out-503", 503, {"detail": "Sold out"}, K.CAPACITY, B.OFFER),
    # quota, billing and limits: the account, whatever the offer
    ("payment-required", 402, {"detail": "Payment Required"}, K.QUOTA, B.CLOUD),
    ("balance-400", 400, {"detail": "Insufficient balance to create this pod"}, K.QUOTA, B.CLOUD),
    ("funds-403-is-auth", 403, {"detail": "Insufficient funds"}, K.CREDENTIALS, B.CLOUD),
    ("wallet", 400, {"detail": "Wallet balance too low"}, K.QUOTA, B.CLOUD),
    ("quota-exceeded", 400, {"detail": "GPU quota exceeded for your team"}, K.QUOTA, B.CLOUD),
    ("limit-exceeded", 400, {"detail": "Pod limit exceeded"}, K.QUOTA, B.CLOUD),
    ("too-many-pods", 400, {"detail": "Too many pods running"}, K.QUOTA, B.CLOUD),
    # bad request
    ("validation-422", 422, {"detail": [{"loc": ["body", "pod", "cloudId"], "msg": "Field required",
                                         "type": "missing"}]}, K.INVALID_REQUEST, None),
    ("bad-request", 400, {"detail": "Invalid socket for this offer"}, K.INVALID_REQUEST, None),
    ("not-found", 404, {"detail": "Pod not found"}, K.INVALID_REQUEST, None),
    # auth: never read by message, even when the text says 'not available'
    ("unauthorized", 401, {"detail": "API key unauthorized"}, K.CREDENTIALS, B.CLOUD),
    ("no-header", 403, {"detail": "Not authenticated"}, K.CREDENTIALS, B.CLOUD),
    ("scope-missing", 403, {"detail": "Instances write not available for this key"}, K.CREDENTIALS, B.CLOUD),
    # throttling and outages
    ("rate-limited", 429, {"detail": "Too Many Requests"}, K.TRANSIENT, None),
    ("rate-limited-capacity-words", 429, {"detail": "capacity check unavailable, slow down"}, K.TRANSIENT, None),
    ("server-error", 500, {"detail": "Internal Server Error"}, K.TRANSIENT, None),
    ("service-unavailable", 503, {"detail": "Service Unavailable"}, K.TRANSIENT, None),
    ("gateway", 502, "<html>Bad Gateway</html>", K.TRANSIENT, None),
    # a 2xx whose body is not the documented JSON
    ("malformed", 200, None, K.FAILED, None),
]


@pytest.mark.parametrize("row", ROWS, ids=[r[0] for r in ROWS])
def test_row(row):
    _id, status, body, kind, block = row
    if status == 200:
        code, message = MALFORMED_BODY, "<html>"
    else:
        code, message = vendor_error(body)
    assert classify(RULES, status, code, message) == (kind, block), (status, message)


# -- through the adapter and the fake ------------------------------------------------------

@pytest.fixture
def fake(tmp_path):
    made = PrimeIntellectApiFake(str(tmp_path))
    yield made
    made.stop()


@pytest.fixture
def provider(fake):
    return PrimeIntellectProvider({"api_url": fake.url, "api_key": fake.token}, journal_id="j" * 32)


def test_rate_limit_carries_retry_after(fake, provider):
    fake.rate_limit("availability.gpus", retry_after=42)
    with pytest.raises(ProviderError) as info:
        provider.plan(ResourceRequest(vm_name="e1", gpu="H100"))
    assert info.value.kind == K.TRANSIENT and info.value.retry_after == 42.0
    assert "HTTP 429" in info.value.msg


def test_capacity_on_create_blocks_the_offer(fake, provider):
    spec = InstanceSpec(vm_name="e2", ssh_public_key="ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIA== e2")
    offer = provider.plan(ResourceRequest(vm_name="e2", gpu="H100"))[0]
    prepared = provider.prepare(offer, spec)
    fake.fail_capacity()
    with pytest.raises(ProviderError) as info:
        provider.create(offer, prepared, spec)
    assert (info.value.kind, info.value.block_scope) == (K.CAPACITY, B.OFFER)
    fake.fail_billing()
    with pytest.raises(ProviderError) as info:
        provider.create(offer, prepared, spec)
    assert (info.value.kind, info.value.block_scope) == (K.QUOTA, B.CLOUD)


def test_malformed_body_is_failed(fake, provider):
    fake.malformed("pods.list")
    with pytest.raises(ProviderError) as info:
        provider.observe(Location("primeintellect", "CANADA-1"), "e3")
    assert info.value.kind == K.FAILED and info.value.code == MALFORMED_BODY


def test_a_create_answer_without_id_is_failed(fake, provider):
    spec = InstanceSpec(vm_name="e4", ssh_public_key="ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIA== e4")
    offer = provider.plan(ResourceRequest(vm_name="e4", gpu="H100"))[0]
    fake.fail_next("pods.create", Reply(200, {"status": "PROVISIONING"}))
    with pytest.raises(ProviderError) as info:
        provider.create(offer, {}, spec)
    assert info.value.kind == K.FAILED and "no pod id" in info.value.msg


def test_bad_key_is_credentials_and_never_echoed(fake):
    wrong = PrimeIntellectProvider({"api_url": fake.url, "api_key": "pi-wrong-secret"})
    with pytest.raises(ProviderError) as info:
        wrong.plan(ResourceRequest(vm_name="e5", gpu="H100"))
    assert (info.value.kind, info.value.block_scope) == (K.CREDENTIALS, B.CLOUD)
    assert "API key unauthorized" in info.value.msg and "pi-wrong-secret" not in str(info.value)


def test_delete_of_an_unknown_pod_succeeds(fake, provider):
    provider.delete(Location("primeintellect", "CANADA-1"), "e6", ["0" * 32])
    assert [c[0] for c in fake.calls] == ["pods.delete"]


def test_server_error_on_delete_is_transient(fake, provider):
    fake.server_error("pods.delete")
    with pytest.raises(ProviderError) as info:
        provider.delete(Location("primeintellect", "CANADA-1"), "e7", ["abc"])
    assert info.value.kind == K.TRANSIENT
