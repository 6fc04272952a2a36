"""The Hyperstack API fake refuses what the real API refuses: a bad ``api_key`` header,
unknown and missing fields, a name over 50 characters, an unknown environment, key or
flavor, a taken key name, a key in use, an environment that still holds something."""

from __future__ import annotations

import pytest

requests = pytest.importorskip("requests")

from ansible_collections.gpuprov.cloud.tests.fakes.hyperstack_api import HyperstackApiFake  # noqa: E402

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGZha2UtdGVzdA fake@test"


@pytest.fixture
def fake(tmp_path):
    made = HyperstackApiFake(str(tmp_path))
    yield made
    made.stop()


def call(fake, method, path, body=None, key=None):
    headers = {"api_key": fake.token if key is None else key}
    reply = requests.request(method, fake.api_url + path, json=body, headers=headers, timeout=10)
    return reply.status_code, reply.json()


def _vm(**extra):
    return dict({"name": "vm1", "environment_name": "env", "image_name": "Ubuntu Server 22.04 LTS R535 CUDA 12.2",
                 "flavor_name": "n3-A100x1", "key_name": "k", "count": 1, "assign_floating_ip": True}, **extra)


@pytest.fixture
def env(fake):
    assert call(fake, "POST", "/core/environments", {"name": "env", "region": "CANADA-1"})[0] == 200
    assert call(fake, "POST", "/core/keypairs", {"name": "k", "environment_name": "env", "public_key": KEY})[0] == 200
    return "env"


def test_a_bad_or_missing_key_is_401_with_the_vendors_body(fake):
    for key in ("wrong", ""):
        status, body = call(fake, "GET", "/core/flavors", key=key)
        assert status == 401 and body["status"] is False and body["error_reason"] == "unauthorized"
    bearer = requests.get(fake.api_url + "/core/flavors", headers={"Authorization": "Bearer " + fake.token})
    assert bearer.status_code == 401   # Hyperstack takes the key in api_key, not as a bearer token


def test_unknown_and_missing_fields_are_refused(fake, env):
    status, body = call(fake, "POST", "/core/virtual-machines", _vm(tags=["x"]))
    assert status == 400 and "unknown field 'tags'" in body["message"] and body["error_reason"] == "bad_request"
    vm = _vm()
    del vm["key_name"]
    status, body = call(fake, "POST", "/core/virtual-machines", vm)
    assert status == 400 and "missing field 'key_name'" in body["message"]
    status, body = call(fake, "POST", "/core/virtual-machines", _vm(security_rules=[{"protocol": "tcp"}]))
    assert status == 400 and "missing field 'direction'" in body["message"]
    status, body = call(fake, "POST", "/core/environments", {"name": "e2", "region": "MARS-1"})
    assert status == 400


def test_names_environments_keys_and_flavors_are_checked(fake, env):
    assert call(fake, "POST", "/core/virtual-machines", _vm(name="x" * 51))[0] == 400
    assert call(fake, "POST", "/core/virtual-machines", _vm(environment_name="nope"))[0] == 404
    assert call(fake, "POST", "/core/virtual-machines", _vm(key_name="nope"))[0] == 404
    assert call(fake, "POST", "/core/virtual-machines", _vm(flavor_name="n3-RTX-A6000x1"))[0] == 404  # NORWAY only
    status, body = call(fake, "POST", "/core/virtual-machines", _vm(flavor_name="n3-A100x8"))
    assert status == 400 and "out of stock" in body["message"]
    status, body = call(fake, "POST", "/core/keypairs", {"name": "k", "environment_name": "env", "public_key": KEY})
    assert status == 409 and body["error_reason"] == "already_exist"
    assert call(fake, "POST", "/core/environments", {"name": "env", "region": "CANADA-1"})[0] == 409
    assert call(fake, "POST", "/core/environments", {"name": "e" * 51, "region": "CANADA-1"})[0] == 400
    status, body = call(fake, "POST", "/core/keypairs", {"name": "k" * 51, "environment_name": "env",
                                                         "public_key": KEY})
    assert status == 400 and "maximum length of 50" in body["message"]


def test_in_use_keys_and_environments_are_not_deleted(fake, env):
    status, body = call(fake, "POST", "/core/virtual-machines", _vm())
    assert status == 200 and body["instances"][0]["status"] == "CREATING"
    key_id = next(iter(fake.keypairs))
    env_id = next(iter(fake.environments))
    assert call(fake, "DELETE", "/core/keypair/%d" % key_id)[0] == 400
    status, body = call(fake, "DELETE", "/core/environments/%d" % env_id)
    assert status == 400 and "still has resources" in body["message"]
    fake.add_cluster("other-env")
    status, body = call(fake, "GET", "/core/clusters?environment=env")
    assert status == 200 and body["clusters"] == []
    fake.add_cluster("env")
    status, body = call(fake, "GET", "/core/clusters?environment=env")
    assert [c["environment_name"] for c in body["clusters"]] == ["env"]


def test_paging_and_search(fake, env):
    for n in range(3):
        call(fake, "POST", "/core/virtual-machines", _vm(name="vm-%d" % n))
    status, body = call(fake, "GET", "/core/virtual-machines?page=2&pageSize=2")
    assert status == 200 and [i["name"] for i in body["instances"]] == ["vm-2"] and body["count"] == 3
    assert body["page_size"] == 2
    fake.default_page_size = 2   # the OpenAPI's query is pageSize: page_size is ignored
    status, body = call(fake, "GET", "/core/virtual-machines?page_size=100")
    assert [i["name"] for i in body["instances"]] == ["vm-0", "vm-1"] and body["page_size"] == 2
    fake.max_page_size = 1       # a size over the server's cap is capped, and the answer says so
    status, body = call(fake, "GET", "/core/virtual-machines?pageSize=100")
    assert [i["name"] for i in body["instances"]] == ["vm-0"] and body["page_size"] == 1
    status, body = call(fake, "GET", "/core/virtual-machines?search=vm-1&environment=env&exact_environment_match=true")
    assert [i["name"] for i in body["instances"]] == ["vm-1"]
