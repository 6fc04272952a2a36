"""The lambda adapter and fake against rules of Lambda's OpenAPI spec (v1.10.0) that the
first version missed: tag names and values, IPv4-only rule sources, a rule's required
description, the 409 of the ruleset endpoints, a taken SSH key name, the GPU count of
``specs.gpus``, and optional instance fields absent (not null) until known."""

from __future__ import annotations

import pytest

requests = pytest.importorskip("requests")

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (  # noqa: E402
    ErrorKind, InstanceSpec, ProviderError, ResourceRequest,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.lambda_cloud import (  # noqa: E402
    LambdaProvider, catalog,
)
from ansible_collections.gpuprov.cloud.tests.fakes.lambda_api import LambdaApiFake, Reply  # noqa: E402

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIK0d3mPZbYzBq2Vj7xTq3gJc0f3yDqYbq6mJ0Yx1lW2Q me@laptop"
CIDR = "203.0.113.9/32"


@pytest.fixture
def fake(tmp_path):
    made = LambdaApiFake(str(tmp_path))
    yield made
    made.stop()


def make(fake):
    return LambdaProvider({"api_url": fake.api_url, "api_key": fake.token, "ssh_port": fake.ssh_port},
                          journal_id="journal-1")


def spec(**kw):
    return InstanceSpec(**dict(dict(vm_name="vm1", ssh_public_key=KEY, allowed_cidrs=[CIDR]), **kw))


def offer_of(provider):
    return next(o for o in provider.plan(ResourceRequest(vm_name="vm1", gpu="A10")) if o.available)


def _post(fake, path, body):
    return requests.post(fake.api_url + path, json=body, headers={"Authorization": "Bearer fake-token"}, timeout=10)


# -- tags ----------------------------------------------------------------------------------

@pytest.mark.parametrize("tags,words", [
    ({"Team": "ml"}, "tags.Team: a lambda tag name"),
    ({"cost_center": "42"}, "tags.cost_center"),
    ({"x" * 56: "v"}, "2-55 characters"),
    ({"team": "v" * 129}, "at most 128 characters, got 129"),
])
def test_a_tag_lambda_refuses_fails_prepare_before_any_call(fake, tags, words):
    provider = make(fake)
    offer = offer_of(provider)
    before = len(fake.calls)
    with pytest.raises(ProviderError) as info:
        provider.prepare(offer, spec(tags=tags))
    assert info.value.kind == ErrorKind.INVALID_REQUEST and words in info.value.msg
    assert fake.calls[before:] == [] and not fake.ssh_keys and not fake.rulesets


def test_tags_that_fit_ride_on_the_launch(fake):
    provider = make(fake)
    offer = offer_of(provider)
    tagged = spec(tags={"team": "ml", "cost:center": 42})
    instance_id = provider.create(offer, provider.prepare(offer, tagged), tagged)
    assert catalog.tags_of(fake.instances[instance_id]) == {
        "team": "ml", "cost:center": "42", "gpuprov-vm-name": "vm1", "gpuprov-journal-id": "journal-1"}


def test_fake_refuses_a_tag_key_outside_lambdas_pattern_and_a_bad_image(fake):
    base = {"region_name": "us-east-1", "instance_type_name": "gpu_1x_a10", "ssh_key_names": ["k"]}
    answer = _post(fake, "/instance-operations/launch", dict(base, tags=[{"key": "Team", "value": "x"}]))
    assert answer.status_code == 400 and "tags" in answer.json()["field_errors"]
    answer = _post(fake, "/instance-operations/launch", dict(base, image={"id": "a", "family": "b"}))
    assert answer.status_code == 400 and "image" in answer.json()["field_errors"]


# -- firewall rules ------------------------------------------------------------------------

def test_ipv6_sources_are_left_out_of_the_ipv4_only_ruleset(fake):
    provider = make(fake)
    prepared = provider.prepare(offer_of(provider), spec(allowed_cidrs=["2001:db8::/32", CIDR]))
    rules = fake.rulesets[prepared["firewall_ruleset_id"]]["rules"]
    assert {r["source_network"] for r in rules} == {CIDR} and prepared["source_ranges"] == [CIDR]


def test_only_ipv6_sources_is_invalid_and_names_them(fake):
    with pytest.raises(ProviderError) as info:
        make(fake).prepare(offer_of(make(fake)), spec(allowed_cidrs=["2001:db8::/32"]))
    assert info.value.kind == ErrorKind.INVALID_REQUEST and "only IPv6 (2001:db8::/32)" in info.value.msg
    assert not fake.rulesets and not fake.ssh_keys


@pytest.mark.parametrize("rule,field", [
    ({"protocol": "tcp", "port_range": [22, 22], "source_network": "2001:db8::/32", "description": "x"},
     "source_network"),
    ({"protocol": "tcp", "port_range": [22, 22], "source_network": CIDR}, "description"),
    ({"protocol": "tcp", "port_range": [22, 22], "source_network": CIDR, "description": "d" * 129}, "description"),
    ({"protocol": "sctp", "port_range": [22, 22], "source_network": CIDR, "description": "x"}, "protocol"),
])
def test_fake_refuses_a_rule_lambda_refuses(fake, rule, field):
    answer = _post(fake, "/firewall-rulesets", {"name": "r", "region": "us-east-1", "rules": [rule]})
    assert answer.status_code == 400 and field in answer.json()["field_errors"]


def test_fake_ruleset_create_needs_its_rules_and_answers_a_taken_name_with_the_specs_409(fake):
    answer = _post(fake, "/firewall-rulesets", {"name": "r", "region": "us-east-1"})
    assert answer.status_code == 400 and "rules" in answer.json()["field_errors"]
    assert _post(fake, "/firewall-rulesets", {"name": "r", "region": "us-east-1", "rules": []}).status_code == 200
    answer = _post(fake, "/firewall-rulesets", {"name": "r", "region": "us-east-1", "rules": []})
    assert answer.status_code == 409 and answer.json()["error"]["code"] == "global/internal-error"


def test_a_ruleset_409_is_transient(fake):
    fake.fail_next("firewall-rulesets.create", Reply(409, {"error": {
        "code": "global/internal-error", "message": "An internal server error occurred.",
        "suggestion": "Try again later. Contact Support if the problem persists."}}))
    with pytest.raises(ProviderError) as info:
        make(fake).prepare(offer_of(make(fake)), spec())
    assert info.value.kind == ErrorKind.TRANSIENT


# -- ssh keys ------------------------------------------------------------------------------

def test_a_key_registered_meanwhile_under_the_taken_name_is_reused(fake):
    provider = make(fake)
    offer = offer_of(provider)
    name = catalog.key_name("vm1", KEY)
    fake.ssh_keys["k0"] = {"id": "k0", "name": name, "public_key": " ".join(KEY.split()[:2])}
    fake.fail_next("ssh-keys.list", Reply(200, {"data": []}))   # the first listing predates it
    assert provider.prepare(offer, spec())["ssh_key_name"] == name and len(fake.ssh_keys) == 1
    assert fake.calls_of("ssh-keys.add")   # the POST was refused (400, name taken), then the key found


def test_a_taken_name_with_other_material_is_not_taken_for_ours(fake):
    provider = make(fake)
    fake.ssh_keys["k0"] = {"id": "k0", "name": catalog.key_name("vm1", KEY),
                           "public_key": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBBBB other"}
    with pytest.raises(ProviderError) as info:
        provider.prepare(offer_of(provider), spec())
    assert info.value.kind == ErrorKind.INVALID_REQUEST and "already exists" in info.value.msg


def test_fake_answers_an_unknown_key_id_with_global_not_found(fake):
    answer = requests.delete(fake.api_url + "/ssh-keys/nope", headers={"Authorization": "Bearer fake-token"},
                             timeout=10)
    assert answer.status_code == 404 and answer.json()["error"]["code"] == "global/not-found"


# -- catalog and instances ------------------------------------------------------------------

def test_the_gpu_count_is_specs_gpus_where_listed():
    assert catalog.gpu_of("gpu_1x_a10", "A10 (24 GB PCIe)", {"gpus": 2}) == ("A10", 2)
    assert catalog.gpu_of("gpu_8x_h100_sxm5", "H100 (80 GB SXM5)", {"vcpus": 208}) == ("H100", 8)


def test_plan_counts_gpus_from_specs(fake):
    fake.types["gpu_1x_a10"]["specs"]["gpus"] = 2
    offers = make(fake).plan(ResourceRequest(vm_name="vm1", gpu="A10", gpu_count=2))
    assert offers and {(o.instance_type, o.gpu_count) for o in offers} == {("gpu_1x_a10", 2)}


def test_a_booting_instance_lists_no_ip_at_all(fake):
    provider = make(fake)
    offer = offer_of(provider)
    instance_id = provider.create(offer, provider.prepare(offer, spec()), spec())
    listed = requests.get(fake.api_url + "/instances", headers={"Authorization": "Bearer fake-token"},
                          timeout=10).json()["data"]
    [booting] = [i for i in listed if i["id"] == instance_id]
    assert booting["status"] == "booting" and "ip" not in booting and "hostname" not in booting


# -- diagnose ------------------------------------------------------------------------------

def test_diagnose_names_a_global_rule_that_opens_ssh_to_everyone(fake):
    provider = make(fake)
    offer = offer_of(provider)
    instance_id = provider.create(offer, provider.prepare(offer, spec()), spec())
    fake.finish(instance_id)
    assert provider.diagnose(offer.location, "vm1")["findings"] == []   # the fake's global rules: icmp only
    fake.global_rules.append({"protocol": "tcp", "port_range": [fake.ssh_port, fake.ssh_port],
                              "source_network": "0.0.0.0/0", "description": "SSH"})
    [finding] = provider.diagnose(offer.location, "vm1")["findings"]
    assert "global firewall ruleset lets any address (0.0.0.0/0) reach tcp/%d" % fake.ssh_port in finding
    assert "(SSH)" in finding
