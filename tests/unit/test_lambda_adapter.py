"""The lambda adapter against the Lambda API fake: plan's offers (prices, availability and
the vendor's reason, InvalidRequest), prepare's key and ruleset, the launch body, the SSH
endpoint, delete and cleanup boundaries, and the fake refusing what Lambda refuses."""

from __future__ import annotations

import base64
import json

import pytest

requests = pytest.importorskip("requests")

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers import registry  # noqa: E402
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (  # noqa: E402
    BootScript, ErrorKind, InstanceSpec, K3sAccess, Location, Offer, ProviderError, ResourceRequest, Status,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.lambda_cloud import (  # noqa: E402
    LambdaProvider, catalog,
)
from ansible_collections.gpuprov.cloud.tests.fakes.lambda_api import LambdaApiFake  # noqa: E402

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIK0d3mPZbYzBq2Vj7xTq3gJc0f3yDqYbq6mJ0Yx1lW2Q me@laptop"
CIDR = "203.0.113.9/32"


@pytest.fixture
def fake(tmp_path):
    made = LambdaApiFake(str(tmp_path))
    yield made
    made.stop()


def make(fake, journal_id="journal-1", **options):
    return LambdaProvider(dict({"api_url": fake.api_url, "api_key": fake.token, "ssh_port": fake.ssh_port},
                               **options), journal_id=journal_id)


def spec(vm="vm1", **kw):
    return InstanceSpec(**dict(dict(vm_name=vm, ssh_public_key=KEY, allowed_cidrs=[CIDR]), **kw))


def offer_of(provider, gpu="A10", region=None):
    return next(o for o in provider.plan(ResourceRequest(vm_name="vm1", gpu=gpu)) if o.available
                and (region is None or o.region == region))


# -- catalog -------------------------------------------------------------------------------

@pytest.mark.parametrize("name,description,expected", [
    ("gpu_1x_a10", "A10 (24 GB PCIe)", ("A10", 1)),
    ("gpu_1x_a100", "A100 (40 GB PCIe)", ("A100", 1)),
    ("gpu_1x_a100_sxm4", "A100 (40 GB SXM4)", ("A100", 1)),
    ("gpu_8x_a100_80gb_sxm4", "A100 (80 GB SXM4)", ("A100-80GB", 8)),
    ("gpu_8x_h100_sxm5", "H100 (80 GB SXM5)", ("H100", 8)),
    ("gpu_1x_h100_pcie", "H100 (80 GB PCIe)", ("H100", 1)),
    ("gpu_1x_gh200", "GH200 (96 GB)", ("GH200", 1)),
    ("gpu_8x_v100", "Tesla V100 (16 GB)", ("V100", 8)),
    ("gpu_8x_b200_sxm6", "B200 (180 GB SXM6)", ("B200", 8)),
    ("gpu_1x_rtx6000", "RTX 6000 (24 GB)", ("RTX6000", 1)),
    ("gpu_4x_l40s_new", "L40S (48 GB)", ("L40S", 4)),       # unknown token: the description decides
    ("gpu_2x_mystery", "Mystery (1 GB)", (None, 0)),
    ("cpu_4x_general", "", (None, 0)),
])
def test_instance_type_names_map_to_canonical_gpus(name, description, expected):
    assert catalog.gpu_of(name, description) == expected


def test_key_and_ruleset_names_fit_lambdas_64_characters():
    long_vm = "v" * 63
    assert catalog.key_name("vm1", KEY).startswith("gpuprov-vm1-") and len(catalog.key_name("vm1", KEY)) == 24
    assert len(catalog.key_name(long_vm, KEY)) == 64
    assert catalog.key_name(long_vm, KEY).startswith(catalog.key_prefix(long_vm))
    assert len(catalog.ruleset_name(long_vm, "j")) == 64
    assert catalog.ruleset_name("vm1", "a") != catalog.ruleset_name("vm1", "b")


# -- plan ----------------------------------------------------------------------------------

def test_plan_offers_priced_instance_types_per_region_with_capacity(fake):
    offers = make(fake).plan(ResourceRequest(vm_name="vm1", gpu="A10"))
    assert [(o.region, o.available, o.price_per_hour, o.gpu, o.gpu_count) for o in offers] == [
        ("us-east-1", True, 0.75, "A10", 1), ("us-west-1", True, 0.75, "A10", 1)]
    assert json.loads(json.dumps([o.to_dict() for o in offers]))  # journalled: plain data


def test_plan_orders_available_cheapest_first_then_unavailable_with_the_reason(fake):
    offers = make(fake).plan(ResourceRequest(vm_name="vm1", gpu="A100-80GB"))
    assert offers and not any(o.available for o in offers)
    assert {o.region for o in offers} == {"us-east-1", "us-west-1", "us-south-1"}  # the regions Lambda lists
    assert offers[0].unavailable_reason == "lambda lists no capacity for gpu_8x_a100_80gb_sxm4 in any region"
    offers = make(fake).plan(ResourceRequest(vm_name="vm1", gpu="H100"))
    assert [o.instance_type for o in offers if o.available] == ["gpu_1x_h100_pcie"]
    assert offers[0].available and not offers[-1].available
    prices = [o.price_per_hour for o in offers if o.available]
    assert prices == sorted(prices)


def test_plan_reports_a_region_asked_without_capacity_as_unavailable(fake):
    offers = make(fake, regions=["us-west-1", "us-east-1"]).plan(ResourceRequest(vm_name="vm1", gpu="H100",
                                                                                 gpu_count=1))
    east = [o for o in offers if o.instance_type == "gpu_1x_h100_pcie"]
    assert [(o.region, o.available) for o in east] == [("us-east-1", True), ("us-west-1", False)]
    assert "in us-west-1 (it has capacity in us-east-1)" in east[1].unavailable_reason
    assert {o.region for o in offers} <= {"us-west-1", "us-east-1"}


def test_plan_without_a_gpu_offers_every_type_cheapest_first(fake):
    offers = make(fake).plan(ResourceRequest(vm_name="vm1", gpu=None))
    assert offers[0].instance_type == "gpu_1x_a10" and offers[0].available


def test_plan_takes_the_smallest_instance_holding_the_count(fake):
    offers = make(fake).plan(ResourceRequest(vm_name="vm1", gpu="H100", gpu_count=2))
    assert {o.instance_type for o in offers} == {"gpu_8x_h100_sxm5"}


@pytest.mark.parametrize("request_kw,words", [
    (dict(gpu="MI300X"), "lists no instance type with MI300X"),
    (dict(gpu="A10", gpu_count=2), "hold at most 1 GPUs, 2 asked"),
    (dict(gpu="A10", spot=True), "no spot"),
    (dict(gpu="NOPE"), "unknown GPU"),
])
def test_an_ask_no_offer_can_meet_is_invalid(fake, request_kw, words):
    with pytest.raises(ProviderError) as info:
        make(fake).plan(ResourceRequest(vm_name="vm1", **request_kw))
    assert info.value.kind == ErrorKind.INVALID_REQUEST and words in info.value.msg


def test_the_registry_builds_it_without_a_key_and_capabilities_tell_the_truth():
    provider = registry.get_provider("lambda", {})
    caps = provider.capabilities()
    assert isinstance(provider, LambdaProvider) and provider.secret_options == ("api_key",)
    assert (caps.kubernetes, caps.boot_script, caps.spot, caps.k3s_access) == (True, True, False,
                                                                               K3sAccess.SSH_TUNNEL)
    assert registry.get_provider("lambda", {"k3s_direct": True, "boot_timeout_s": 1200}).capabilities(
    ).k3s_access == K3sAccess.DIRECT
    with pytest.raises(ProviderError):
        registry.get_provider("lambda", {"image_family": "a", "image_id": "b"})


# -- prepare -------------------------------------------------------------------------------

def test_prepare_registers_the_key_and_a_ruleset_scoped_to_the_cidrs(fake):
    provider = make(fake, k3s_direct=True)
    offer = offer_of(provider)
    prepared = provider.prepare(offer, spec())
    assert prepared["ssh_key_name"] == catalog.key_name("vm1", KEY)
    ruleset = fake.rulesets[prepared["firewall_ruleset_id"]]
    assert ruleset["name"] == catalog.ruleset_name("vm1", "journal-1") and ruleset["region"]["name"] == offer.region
    assert {r["source_network"] for r in ruleset["rules"]} == {CIDR}
    assert sorted({r["port_range"][0] for r in ruleset["rules"]}) == sorted({22, 80, 443, 6443, fake.ssh_port})
    assert provider.prepare(offer, spec()) == prepared and len(fake.rulesets) == 1 and len(fake.ssh_keys) == 1


def test_prepare_reuses_a_key_with_the_same_material_whatever_its_name(fake):
    fake.ssh_keys["k0"] = {"id": "k0", "name": "my laptop", "public_key": KEY.rsplit(" ", 1)[0] + " other-comment"}
    prepared = make(fake).prepare(offer_of(make(fake)), spec())
    assert prepared["ssh_key_name"] == "my laptop" and len(fake.ssh_keys) == 1


def test_prepare_patches_a_ruleset_whose_rules_changed(fake):
    provider = make(fake)
    offer = offer_of(provider)
    first = provider.prepare(offer, spec())
    provider.prepare(offer, spec(allowed_cidrs=["198.51.100.0/24"]))
    assert {r["source_network"] for r in fake.rulesets[first["firewall_ruleset_id"]]["rules"]} == {"198.51.100.0/24"}
    assert fake.calls_of("firewall-rulesets.update")


def test_prepare_never_opens_the_world_by_default(fake):
    with pytest.raises(ProviderError) as info:
        make(fake).prepare(offer_of(make(fake)), spec(allowed_cidrs=[]))
    assert info.value.kind == ErrorKind.INVALID_REQUEST and "0.0.0.0/0 is never assumed" in info.value.msg
    assert not fake.rulesets and not fake.ssh_keys


def test_no_ruleset_where_lambda_applies_no_firewall(fake):
    provider = make(fake)
    offer = next(o for o in provider.plan(ResourceRequest(vm_name="vm1", gpu="V100", gpu_count=8)) if o.available)
    assert offer.region == "us-south-1"
    assert provider.prepare(offer, spec())["firewall_ruleset_id"] is None and not fake.rulesets


# -- create and observe --------------------------------------------------------------------

def test_create_is_one_launch_carrying_name_tags_ruleset_and_user_data(fake):
    provider = make(fake, image_family="lambda-stack-22-04")
    offer = offer_of(provider)
    prepared = provider.prepare(offer, spec())
    before = len(fake.calls)
    instance_id = provider.create(offer, prepared, spec(boot_script=BootScript("#!/bin/bash\necho hi", {"A": "b"})))
    launches = list(fake.calls[before:])
    assert [c[0] for c in launches] == ["instances.launch"]
    body = launches[0][4]
    assert body["name"] == "vm1" and body["ssh_key_names"] == [prepared["ssh_key_name"]]
    assert body["tags"] == [{"key": "gpuprov-journal-id", "value": "journal-1"},
                            {"key": "gpuprov-vm-name", "value": "vm1"}]
    assert body["firewall_rulesets"] == [{"id": prepared["firewall_ruleset_id"]}]
    assert body["user_data"].startswith("#!/bin/bash\nexport A='b'\n") and body["image"] == {
        "family": "lambda-stack-22-04"}
    assert fake.instances[instance_id]["region"]["name"] == offer.region


def test_endpoint_only_once_active_with_an_ip(fake):
    provider = make(fake, ssh_user="ubuntu")
    offer = offer_of(provider)
    instance_id = provider.create(offer, provider.prepare(offer, spec()), spec())
    first = provider.observe(offer.location, "vm1")
    assert [(o.instance_id, o.status, o.endpoint) for o in first] == [(instance_id, Status.PENDING, None)]
    second = provider.observe(offer.location, "vm1")[0]
    assert second.status == Status.RUNNING and second.usable and second.journal_id == "journal-1"
    assert (second.endpoint.host, second.endpoint.port, second.endpoint.user) == (
        fake.instances[instance_id]["ip"], fake.ssh_port, "ubuntu")
    assert provider.observe(Location("lambda", "us-west-1" if offer.region != "us-west-1" else "us-east-1"),
                            "vm1") == []


def test_unhealthy_is_failed_and_terminated_is_gone(fake):
    provider = make(fake)
    offer = offer_of(provider)
    instance_id = provider.create(offer, provider.prepare(offer, spec()), spec())
    fake.finish(instance_id)
    fake.instances[instance_id]["status"] = "unhealthy"
    seen = provider.observe(offer.location, "vm1")[0]
    assert seen.status == Status.FAILED and "unhealthy" in seen.reason and seen.endpoint is None
    fake.instances[instance_id]["status"] = "terminated"
    assert provider.observe(offer.location, "vm1") == []


# -- delete and cleanup --------------------------------------------------------------------

def test_delete_of_unknown_ids_sends_no_terminate(fake):
    make(fake).delete(Location("lambda", "us-east-1"), "vm1", ["0123456789abcdef"])
    assert not fake.calls_of("instances.terminate")


def test_cleanup_waits_for_the_vms_own_instance_and_leaves_shared_keys(fake):
    provider = make(fake)
    offer = offer_of(provider)
    instance_id = provider.create(offer, provider.prepare(offer, spec()), spec())
    # another VM reuses the key (same material): vm1's cleanup must not remove it
    other = provider.create(offer, provider.prepare(offer, spec("vm2")), spec("vm2"))
    provider.delete(offer.location, "vm1", [instance_id])
    with pytest.raises(ProviderError) as info:
        provider.cleanup(offer.location, "vm1")  # the terminating instance still holds the ruleset
    assert info.value.kind == ErrorKind.TRANSIENT
    fake.finish(instance_id)
    provider.cleanup(offer.location, "vm1")
    assert [k["name"] for k in fake.ssh_keys.values()] == [catalog.key_name("vm1", KEY)]
    assert [r["name"] for r in fake.rulesets.values()] == [catalog.ruleset_name("vm2", "journal-1")]
    provider.delete(offer.location, "vm2", [other])
    fake.finish(other)
    provider.cleanup(offer.location, "vm2")
    provider.cleanup(offer.location, "vm1")
    assert not fake.ssh_keys and not fake.rulesets and not fake.instances


# -- the fake refuses what Lambda refuses ----------------------------------------------------

def _post(fake, path, body, auth="Bearer fake-token"):
    return requests.post(fake.api_url + path, json=body, headers={"Authorization": auth}, timeout=10)


def test_fake_refuses_unknown_and_missing_launch_fields(fake):
    answer = _post(fake, "/instance-operations/launch", {"region_name": "us-east-1", "instance_type_name":
                                                         "gpu_1x_a10", "ssh_key_names": ["k"], "quantity": 1})
    assert answer.status_code == 400 and answer.json()["error"]["code"] == "global/invalid-parameters"
    assert "quantity" in answer.json()["field_errors"]
    answer = _post(fake, "/instance-operations/launch", {"region_name": "us-east-1"})
    assert answer.status_code == 400 and "instance_type_name" in answer.json()["field_errors"]


def test_fake_refuses_a_bad_key_with_lambdas_body_and_takes_basic_auth(fake):
    answer = requests.get(fake.api_url + "/instances", headers={"Authorization": "Bearer wrong"}, timeout=10)
    assert answer.status_code == 401 and answer.json()["error"]["code"] == "global/invalid-api-key"
    basic = "Basic " + base64.b64encode(b"fake-token:").decode()
    assert requests.get(fake.api_url + "/instances", headers={"Authorization": basic}, timeout=10).json() == {
        "data": []}


def test_fake_refuses_a_ruleset_of_another_region_and_a_sold_out_type(fake):
    provider = make(fake)
    east = Offer(cloud="lambda", region="us-east-1", instance_type="gpu_1x_a10", gpu="A10", gpu_count=1)
    prepared = provider.prepare(east, spec())
    west = Offer(cloud="lambda", region="us-west-1", instance_type="gpu_1x_a10", gpu="A10", gpu_count=1)
    with pytest.raises(ProviderError) as info:
        provider.create(west, prepared, spec())
    assert info.value.kind == ErrorKind.INVALID_REQUEST and "not in us-west-1" in info.value.msg
    fake.sell_out("gpu_1x_a10")
    with pytest.raises(ProviderError) as info:
        provider.create(east, prepared, spec())
    assert info.value.kind == ErrorKind.CAPACITY


def test_diagnose_adds_lambdas_fields_and_findings(fake):
    provider = make(fake)
    offer = offer_of(provider)
    instance_id = provider.create(offer, provider.prepare(offer, spec()), spec())
    report = provider.diagnose(offer.location, "vm1")
    [entry] = report["instances"]
    assert entry["instance_id"] == instance_id and entry["vendor"]["instance_type"] == "gpu_1x_a10"
    assert entry["vendor"]["firewall_rulesets"] and report["findings"] == ["%s: Lambda status booting" % instance_id]
    fake.finish(instance_id)
    fake.instances[instance_id]["actions"]["terminate"] = {"available": False, "reason_code": "busy",
                                                           "reason_description": "The instance is migrating."}
    assert provider.diagnose(offer.location, "vm1")["findings"] == [
        "%s: Lambda cannot terminate it now: The instance is migrating." % instance_id]
