"""The massedcompute adapter against the Massed Compute fake: offers from the GPU inventory
(prices, stock, unavailable reasons, spot and CPU products, InvalidRequest asks), product
descriptions -> canonical GPUs, statuses and the SSH endpoint, identity in the instance and
key names, key reuse and journal-scoped cleanup, the launch body, capabilities, typed
options, and the fake refusing what the API refuses."""

from __future__ import annotations

import base64
import json
import re
import urllib.error
import urllib.request

import pytest

pytest.importorskip("requests")

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (  # noqa: E402
    BootScript, ErrorKind, InstanceSpec, K3sAccess, Location, ProviderError, ResourceRequest, Status,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.massedcompute import (  # noqa: E402
    MassedComputeProvider, catalog,
)
from ansible_collections.gpuprov.cloud.tests.fakes.massedcompute_api import MassedComputeApiFake, error  # noqa: E402

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGdwdXByb3YtdW5pdC10ZXN0LWtleS1tYXNzZWQ= me@laptop"
HERE = Location("massedcompute", "us-central-1")


@pytest.fixture
def fake(tmp_path):
    made = MassedComputeApiFake(str(tmp_path))
    yield made
    made.stop()


def adapter(fake, journal_id="journal1", **options) -> MassedComputeProvider:
    return MassedComputeProvider(dict({"api_url": fake.api_url, "api_key": fake.token,
                                       "ssh_port": fake.ssh_port}, **options), journal_id=journal_id)


def spec(vm="vm1", **kw) -> InstanceSpec:
    return InstanceSpec(vm_name=vm, ssh_public_key=KEY, **kw)


def launch(provider, vm="vm1", **kw):
    offer = provider.plan(ResourceRequest(vm_name=vm, gpu="L40"))[0]
    prepared = provider.prepare(offer, spec(vm, **kw))
    return offer, prepared, provider.create(offer, prepared, spec(vm, **kw))


# -- catalog ------------------------------------------------------------------------------

@pytest.mark.parametrize("name,description,expected", [
    ("gpu_1x_l40", "1x L40 (48GB)", ("L40", 1)),
    ("gpu_4x_h100_nvl_nvlink", "4x H100 NVL", ("H100-NVL", 4)),
    ("gpu_4x_h100_nvl", "4x H100 NVL (80GB)", ("H100-NVL", 4)),
    ("gpu_8x_DGX_A100", "8x DGX A100 (80GB)", ("A100-80GB", 8)),
    ("gpu_1x_A100_SXM4", "1x A100 SXM4 (80GB)", ("A100-80GB", 1)),
    ("gpu_1x_a100", "1x A100 (40GB)", ("A100", 1)),
    ("gpu_2x_a6000_nvlink", "2x RTX A6000 (48GB) NVLink", ("A6000", 2)),
    ("gpu_1x_a6000_high_ram", "1x RTX A6000 (48GB) [Premium]", ("A6000", 1)),
    ("gpu_1x_a5000", "1x RTX A5000 (24GB)", ("A5000", 1)),
    ("gpu_8x_b200", "8x B200 SXM6", ("B200", 8)),
    ("gpu_8x_h100_sxm5", "8x H100 SXM5 (80GB)", ("H100", 8)),
    ("gpu_2x_h200_nvl", "2x H200 NVL (141GB) NVLink", ("H200-NVL", 2)),
    ("gpu_1x_rtx6000ada", "1x RTX 6000 Ada (48GB)", ("RTX6000ADA", 1)),
    ("cpu_small_amd_epyc", "CPU-only instance", (None, 0)),
    ("gpu_1x_mystery", "1x Mystery 9000 (7GB)", (None, 0)),
])
def test_product_descriptions_map_to_canonical_gpus(name, description, expected):
    assert catalog.gpu_of(name, description) == expected


def test_spot_products_are_recognised():
    assert catalog.is_spot("gpu_4x_h200_nvl_nvlink_discount", "4x H200 NVL (141GB) NVLink [Spot]")
    assert catalog.is_spot("gpu_1x_l40_spot", "1x L40")
    assert not catalog.is_spot("gpu_1x_l40", "1x L40 (48GB)")


# -- plan ---------------------------------------------------------------------------------

def test_offers_per_region_with_capacity_cheapest_first(fake):
    offers = adapter(fake).plan(ResourceRequest(vm_name="vm1", gpu="L40"))
    assert [(o.region, o.instance_type, o.gpu, o.gpu_count, o.price_per_hour, o.available) for o in offers] == [
        ("us-central-1", "gpu_1x_l40", "L40", 1, 0.86, True), ("us-central-3", "gpu_1x_l40", "L40", 1, 0.86, True),
        ("us-central-1", "gpu_2x_l40", "L40", 2, 1.72, True)]
    assert offers[0].detail["capacity_available"] == 19 and offers[0].detail["specs"]["vcpu_count"] == 14


def test_gpu_count_picks_bigger_products(fake):
    offers = adapter(fake).plan(ResourceRequest(vm_name="vm1", gpu="L40", gpu_count=2))
    assert [(o.instance_type, o.gpu_count) for o in offers] == [("gpu_2x_l40", 2)]


def test_a_product_without_capacity_is_unavailable_with_the_reason(fake):
    [offer] = adapter(fake).plan(ResourceRequest(vm_name="vm1", gpu="H100-NVL", gpu_count=4))
    assert offer.region == "any" and not offer.available and offer.price_per_hour == 10.96
    assert offer.unavailable_reason == "massedcompute lists no capacity for gpu_4x_h100_nvl_nvlink in any region"


def test_capacity_zero_wins_over_a_region_list(fake):
    fake.stock["gpu_1x_a6000"] = 0
    [offer] = adapter(fake).plan(ResourceRequest(vm_name="vm1", gpu="A6000"))
    assert not offer.available and "in any region" in offer.unavailable_reason


def test_asked_regions_are_offered_in_order_unavailable_where_no_capacity(fake):
    offers = adapter(fake).plan(ResourceRequest(vm_name="vm1", gpu="L40", regions=["us-central-2", "any"]))
    assert [(o.region, o.instance_type, o.available) for o in offers] == [
        ("any", "gpu_1x_l40", True), ("any", "gpu_2x_l40", True),
        ("us-central-2", "gpu_1x_l40", False), ("us-central-2", "gpu_2x_l40", False)]
    assert offers[2].unavailable_reason == ("massedcompute lists no capacity for gpu_1x_l40 in us-central-2 (it has "
                                            "capacity in us-central-1, us-central-3)")


def test_regions_option_applies_when_the_request_names_none(fake):
    offers = adapter(fake, regions=["us-central-3"]).plan(ResourceRequest(vm_name="vm1", gpu="L40"))
    assert [(o.region, o.available) for o in offers] == [("us-central-3", True), ("us-central-3", False)]


def test_no_gpu_offers_only_cpu_products_never_a_dearer_gpu_one(fake):
    offers = adapter(fake).plan(ResourceRequest(vm_name="vm1", gpu=None))
    assert offers and all(o.gpu is None and o.gpu_count == 0 for o in offers)
    assert [o.instance_type for o in offers][0] == "cpu_small_amd_epyc"


@pytest.mark.parametrize("request_,words", [
    (ResourceRequest(vm_name="vm1", gpu="H200-NVL"), "lists no product with H200-NVL"),   # only a spot one
    (ResourceRequest(vm_name="vm1", gpu="T4"), "lists no product with T4"),
    (ResourceRequest(vm_name="vm1", gpu="L40", gpu_count=8), "hold at most 2 GPUs, 8 asked"),
    (ResourceRequest(vm_name="vm1", gpu="L40", spot=True), "on-demand instances only"),
    (ResourceRequest(vm_name="Bad_Name", gpu="L40"), "DNS label"),
])
def test_asks_no_offer_can_meet_are_invalid(fake, request_, words):
    with pytest.raises(ProviderError) as info:
        adapter(fake).plan(request_)
    assert info.value.kind == ErrorKind.INVALID_REQUEST and words in info.value.msg


# -- prepare / create ---------------------------------------------------------------------

def test_prepare_registers_a_key_named_without_punctuation_and_resolves_the_image(fake):
    provider = adapter(fake)
    offer = provider.plan(ResourceRequest(vm_name="my-vm-1", gpu="L40"))[0]
    prepared = provider.prepare(offer, spec("my-vm-1"))
    name = prepared["ssh_key_name"]
    assert name == catalog.key_name("my-vm-1", KEY, "journal1")
    assert name.startswith("gpuprov my vm 1 ") and re.fullmatch(r"[A-Za-z0-9 ]+", name)
    assert prepared["image_id"] == 42 and prepared["firewall"] is None
    assert provider.prepare(offer, spec("my-vm-1")) == prepared and len(fake.ssh_keys) == 1
    [add] = fake.calls_of("ssh-keys.add")
    assert add[4] == {"name": name, "publicKey": " ".join(KEY.split()[:2])}


def test_long_vm_names_keep_key_names_within_63_characters():
    vm = "a" * 30 + "-" + "b" * 32
    name = catalog.key_name(vm, KEY, "journal1")
    assert len(name) <= 63 and catalog.key_owner(name, vm) == (True, catalog.journal_mark("journal1"))
    assert catalog.key_owner(name, "a" * 30) == (False, None)


def test_an_existing_key_with_the_same_material_is_reused_whatever_its_name(fake):
    fake.ssh_keys["mine"] = {"id": "mine", "name": "laptop", "public_key": " ".join(KEY.split()[:2]) + " other"}
    provider = adapter(fake)
    offer = provider.plan(ResourceRequest(vm_name="vm1", gpu="L40"))[0]
    assert provider.prepare(offer, spec())["ssh_key_name"] == "laptop"
    provider.cleanup(HERE, "vm1")
    assert fake.resources() == {"ssh-key:laptop"}


def test_image_options(fake):
    provider = adapter(fake, image_id=7)
    offer = provider.plan(ResourceRequest(vm_name="vm1", gpu="L40"))[0]
    assert provider.prepare(offer, spec())["image_id"] == 7 and not fake.calls_of("images")
    with pytest.raises(ProviderError) as info:
        adapter(fake, image_name="Windows 95").prepare(offer, spec())
    assert info.value.kind == ErrorKind.INVALID_REQUEST and "'Art'" in info.value.msg


def test_the_launch_body_carries_identity_key_image_and_boot_command(fake):
    provider = adapter(fake)
    boot = BootScript("#!/bin/bash\necho hi > /tmp/x", {"A": "it's"})
    offer, _prepared, instance_id = launch(provider, boot_script=boot)
    [call] = fake.calls_of("instance.launch")
    body = call[4]
    assert set(body) == {"imageId", "productName", "regionName", "instanceName", "sshKeys", "command"}
    assert (body["imageId"], body["productName"], body["regionName"], body["instanceName"]) == (
        42, "gpu_1x_l40", offer.region, "vm1_journal1")
    assert body["sshKeys"] == [catalog.key_name("vm1", KEY, "journal1")]
    assert "sudo -n" in body["command"] and "base64 --decode" in body["command"]
    encoded = body["command"].split("'")[1]
    assert base64.b64decode(encoded).decode() == boot.to_shell()
    assert fake.instances[instance_id]["command_startup"] == body["command"]


def test_no_boot_script_sends_no_command(fake):
    launch(adapter(fake))
    assert "command" not in fake.calls_of("instance.launch")[0][4]


# -- observe ------------------------------------------------------------------------------

def test_statuses_and_the_endpoint(fake):
    provider = adapter(fake)
    _offer, _prepared, instance_id = launch(provider)
    [booting] = provider.observe(HERE, "vm1")
    assert (booting.status, booting.endpoint, booting.journal_id) == (Status.PENDING, None, "journal1")
    fake.finish(instance_id)
    [running] = provider.observe(HERE, "vm1")
    record = fake.instances[instance_id]
    assert running.status == Status.RUNNING and running.endpoint.host == record["ip"]
    assert (running.endpoint.port, running.endpoint.user) == (fake.ssh_port, record["username"].lower())
    assert running.location == Location("massedcompute", "us-central-1")
    assert adapter(fake, ssh_user="ubuntu").observe(HERE, "vm1")[0].endpoint.user == "ubuntu"


@pytest.mark.parametrize("fields,status", [
    ({"status": "rented", "os_booted": 1, "ip": "192.0.2.1"}, Status.RUNNING),
    ({"status": "rented", "os_booted": 0, "ip": "192.0.2.1"}, Status.PENDING),
    ({"status": "rented", "os_booted": 1, "ip": ""}, Status.PENDING),
    ({"status": "booting", "os_booted": 0, "ip": ""}, Status.PENDING),
    ({"status": "Active", "ip": "192.0.2.1"}, Status.RUNNING),
    ({"status": "stopping"}, Status.STOPPING),
    ({"status": "stopped"}, Status.STOPPED),
    ({"status": "terminating"}, Status.TERMINATING),
    ({"status": "deleting"}, Status.TERMINATING),
    ({"status": "error"}, Status.FAILED),
    ({"status": "something-new"}, Status.PENDING),
    ({"status": "pending", "ip": ""}, Status.PENDING),                 # the vendor's launch skill: pending ->
    ({"status": "running", "os_booted": 1, "ip": "192.0.2.1"}, Status.RUNNING),   # running

    ({"status": "terminated"}, None),
])
def test_status_mapping(fields, status):
    assert catalog.status_of(fields)[0] == status


def test_observe_finds_by_name_only_this_vm_and_reports_the_journal(fake):
    fake.instances["legacy"] = dict(_record("legacy", "vm1"))
    fake.instances["other"] = dict(_record("other", "vm10_journal1"))
    fake.instances["elsewhere"] = dict(_record("elsewhere", "vm1_j9", region="us-central-3"))
    found = adapter(fake).observe(HERE, "vm1")
    assert sorted((o.instance_id, o.journal_id) for o in found) == [("legacy", None)]
    anywhere = adapter(fake).observe(Location("massedcompute", "any"), "vm1")
    assert sorted((o.instance_id, o.journal_id) for o in anywhere) == [("elsewhere", "j9"), ("legacy", None)]


def test_the_documented_instance_shape_without_a_region(fake):
    """The OpenAPI's example instance (no ``region``: brevdev reads one the spec does not list)."""
    from ansible_collections.gpuprov.cloud.tests.fakes.massedcompute_api import Reply
    documented = {"uuid": "8b52a46b-a892-4fde-925c-6d13226908f7", "name": "vm1_journal1", "ip": "1.1.1.1",
                  "username": "Ubuntu", "password": "123456", "status": "rented", "os_booted": 1,
                  "command_startup": "", "created": "2024-08-07T16:41:43.000Z", "active": 1,
                  "image": {"id": 7, "name": "Art", "description": "AI tools"},
                  "product": {"gpu_count": 1, "vcpu": 26, "name": "gpu_1x_l40", "description": "1x L40",
                              "price_hr": "0.99", "final_price_hr": "0", "storage": 625, "ram": 128}}
    fake.fail_next("instance.list", Reply(200, {"runningInstances": [documented]}), times=2)
    [seen] = adapter(fake, ssh_port=22).observe(HERE, "vm1")
    assert (seen.instance_id, seen.status, seen.journal_id) == (documented["uuid"], Status.RUNNING, "journal1")
    assert (seen.endpoint.host, seen.endpoint.port, seen.endpoint.user) == ("1.1.1.1", 22, "ubuntu")
    assert seen.location == HERE
    provider = adapter(fake)
    [owned] = [o for o in provider.list_owned(provider.sweep_locations()[0]) if o.kind == "instance"]
    assert (owned.resource_id, owned.vm_name, owned.journal_id, owned.price_per_hour) == (
        documented["uuid"], "vm1", "journal1", 0.0)


def _record(uuid, name, region="us-central-1"):
    return {"uuid": uuid, "name": name, "ip": "192.0.2.9", "username": "Ubuntu", "status": "rented",
            "os_booted": 1, "region": {"name": region}, "product": {"name": "gpu_1x_l40"}, "_keys": []}


# -- delete / cleanup ---------------------------------------------------------------------

def test_delete_terminates_only_live_listed_ids_and_unknown_is_done(fake):
    provider = adapter(fake)
    _offer, _prepared, instance_id = launch(provider)
    provider.delete(HERE, "vm1", ["no-such-id"])
    assert not fake.calls_of("instance.terminate")
    provider.delete(HERE, "vm1", [instance_id, "no-such-id"])
    [call] = fake.calls_of("instance.terminate")
    assert call[4] == {"instanceUuids": [instance_id]}
    provider.delete(HERE, "vm1", [instance_id])   # already terminating: nothing sent
    assert len(fake.calls_of("instance.terminate")) == 1
    fake.finish(instance_id)
    assert provider.observe(HERE, "vm1") == []


def test_delete_of_an_instance_gone_after_the_listing_is_done(fake):
    """The vendor answers a terminate that names no live instance with "No valid VMs found"."""
    provider = adapter(fake)
    _offer, _prepared, instance_id = launch(provider)
    fake.fail_next("instance.terminate", error(400, "No valid VMs found"))
    provider.delete(HERE, "vm1", [instance_id])
    fake.fail_next("instance.terminate", error(400, "The given data was invalid."))
    with pytest.raises(ProviderError) as info:
        provider.delete(HERE, "vm1", [instance_id])
    assert info.value.kind == ErrorKind.INVALID_REQUEST


def test_the_fake_answers_unknown_ids_as_the_vendor_does(fake):
    status, answer = _post(fake, "/instance/terminate", {"instanceUuids": ["no-such-id"]})
    assert (status, answer) == (400, {"message": "No valid VMs found"})
    req = urllib.request.Request(fake.api_url + "/instance/no-such-id", headers={
        "Authorization": "Bearer %s" % fake.token})
    with urllib.request.urlopen(req) as got:
        assert (got.status, json.loads(got.read())) == (200, {"runningInstances": []})
    req = urllib.request.Request(fake.api_url + "/ssh-keys/no-such-id", method="DELETE", headers={
        "Authorization": "Bearer %s" % fake.token})
    with urllib.request.urlopen(req) as got:
        assert got.status == 200


def test_cleanup_removes_only_this_journals_keys_of_this_vm(fake):
    other_key = KEY.replace("LW1hc3NlZD0=", "LW90aGVyMD0=")
    mine = adapter(fake, journal_id="journal1")
    theirs = adapter(fake, journal_id="journal2")
    offer = mine.plan(ResourceRequest(vm_name="vm1", gpu="L40"))[0]
    mine.prepare(offer, spec())
    theirs.prepare(offer, InstanceSpec(vm_name="vm1", ssh_public_key=other_key))
    mine.prepare(offer, InstanceSpec(vm_name="vm2", ssh_public_key=other_key.replace("AAAAC3", "AAAAC4")))
    fake.ssh_keys["legacy"] = {"id": "legacy", "name": catalog.key_prefix("vm1") + "0" * 12, "public_key": "a b"}
    before = fake.resources()
    mine.cleanup(HERE, "vm1")
    assert before - fake.resources() == {"ssh-key:" + catalog.key_name("vm1", KEY, "journal1"),
                                         "ssh-key:" + catalog.key_prefix("vm1") + "0" * 12}
    mine.cleanup(HERE, "vm1")   # idempotent


# -- capabilities and options -------------------------------------------------------------

def test_capabilities_are_truthful():
    caps = MassedComputeProvider({}).capabilities()
    assert (caps.kubernetes, caps.boot_script, caps.spot) == (True, True, False)
    assert caps.k3s_access == K3sAccess.SSH_TUNNEL
    assert MassedComputeProvider({"python_interpreter": "/usr/bin/python3"}).capabilities().python_interpreter == (
        "/usr/bin/python3")


def test_options_are_typed_and_the_key_falls_back_to_the_environment(monkeypatch):
    monkeypatch.setenv("MASSED_COMPUTE_API_KEY", "from-env")
    provider = MassedComputeProvider({"ssh_port": "2222", "image_id": "7"})
    assert provider.options["api_key"] == "from-env" and provider.options["ssh_port"] == 2222
    assert provider.options["api_url"] == "https://vm.massedcompute.com/api/v1" and provider.secret_options == (
        "api_key",)
    with pytest.raises(ProviderError) as info:
        MassedComputeProvider({"firewall": True})
    assert info.value.kind == ErrorKind.INVALID_REQUEST and "cloud_options.massedcompute" in info.value.msg


# -- the fake refuses what the API refuses ------------------------------------------------

def _post(fake, path, body, token=None):
    req = urllib.request.Request(fake.api_url + path, data=json.dumps(body).encode(), method="POST", headers={
        "Authorization": "Bearer %s" % (token or fake.token), "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


@pytest.mark.parametrize("body,words", [
    ({"productName": "gpu_1x_l40", "regionName": "any"}, "missing field 'imageId'"),
    ({"imageId": 42, "productName": "gpu_1x_l40", "regionName": "any", "userData": "x"}, "unknown field 'userData'"),
    ({"imageId": "42", "productName": "gpu_1x_l40", "regionName": "any"}, "must be an integer"),
    ({"imageId": 42, "productName": "gpu_1x_l40", "regionName": "any", "sshKeys": ["nope"]}, "SSH key nope"),
    ({"imageId": 42, "productName": "gpu_9x_none", "regionName": "any"}, "does not exist"),
    ({"imageId": 42, "productName": "gpu_1x_l40", "regionName": "us-central-2"}, "no capacity"),
])
def test_the_fake_refuses_bad_launches(fake, body, words):
    status, answer = _post(fake, "/instance/launch", body)
    assert status == 400 and words in json.dumps(answer)


def test_the_fake_refuses_punctuation_in_key_names_and_a_bad_token(fake):
    status, answer = _post(fake, "/ssh-keys", {"name": "gpuprov-vm1", "publicKey": KEY})
    assert status == 400 and "punctuation" in json.dumps(answer)
    status, answer = _post(fake, "/account/token/validation", {}, token="wrong")
    assert status == 401 and answer["message"] == "Authentication not correct."
    assert _post(fake, "/account/token/validation", {}) == (200, {"message": "Valid Token"})
