"""The primeintellect adapter against its fake and on its own: availability items read into
offers (prices per pod, out-of-stock reasons, order, filters, pagination), the
sshConnection parsing, pod statuses, the identity in pod and key names, prepare/cleanup of
the SSH key, the create body, capabilities, and the fake refusing what Prime refuses."""

from __future__ import annotations

import pytest

requests = pytest.importorskip("requests")

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (  # noqa: E402
    ErrorKind, InstanceSpec, Location, ProviderError, ResourceRequest, SshEndpoint, Status,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.primeintellect import (  # noqa: E402
    PrimeIntellectProvider, catalog,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.registry import get_provider  # noqa: E402
from ansible_collections.gpuprov.cloud.tests.fakes.marketplace import Reply  # noqa: E402
from ansible_collections.gpuprov.cloud.tests.fakes.primeintellect_api import (  # noqa: E402
    PrimeIntellectApiFake, offer,
)

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHByaW1laW50ZWxsZWN0LXVuaXQtdGVzdC1rZXk unit@test"
OTHER_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG90aGVyLWtleS1vZi10aGUtdXNlci1pdHNlbGYhIQ me@laptop"
WHERE = Location("primeintellect", "CANADA-1")


@pytest.fixture
def fake(tmp_path):
    made = PrimeIntellectApiFake(str(tmp_path))
    yield made
    made.stop()


def adapter(fake, journal_id="a" * 32, **options):
    return PrimeIntellectProvider(dict({"api_url": fake.url, "api_key": fake.token}, **options),
                                  journal_id=journal_id)


def spec(name="u1", key=KEY):
    return InstanceSpec(vm_name=name, ssh_public_key=key)


# -- plan ------------------------------------------------------------------------------------

def test_plan_prices_per_pod_cheapest_available_first(fake):
    offers = adapter(fake).plan(ResourceRequest(vm_name="u1", gpu="H100", gpu_count=1))
    assert [(o.region, o.price_per_hour, o.available, o.spot) for o in offers] == [
        ("CANADA-1", 1.9, True, False), ("US-KS-2", 2.69, True, False)]
    first = offers[0]
    assert (first.cloud, first.gpu, first.gpu_count, first.instance_type) == (
        "primeintellect", "H100", 1, "hyperstack/1xH100_80GB/n3-H100x1")
    assert first.detail["cloud_id"] == "n3-H100x1" and first.detail["provider"] == "hyperstack"
    assert first.detail["image"] == "ubuntu_22_cuda_12" and first.detail["socket"] == "PCIe"
    # the server filtered on the one vendor type and the count; one page was enough
    [call] = fake.calls_of("availability.gpus")
    assert call[3]["gpu_type"] == ["H100_80GB"] and call[3]["gpu_count"] == ["1"]
    assert call[3]["page"] == ["1"] and call[3]["page_size"] == ["100"]


def test_eight_gpus_is_the_whole_pods_price(fake):
    [eight] = adapter(fake).plan(ResourceRequest(vm_name="u1", gpu="H100", gpu_count=8))
    assert (eight.gpu_count, eight.price_per_hour, eight.detail["socket"]) == (8, 18.0, "SXM5")


def test_out_of_stock_offer_is_unavailable_with_the_reason(fake):
    [a100] = adapter(fake).plan(ResourceRequest(vm_name="u1", gpu="A100-80GB"))
    assert a100.available is False
    assert a100.unavailable_reason == "stockStatus Unavailable at FIN-01 (datacrunch)"


def test_available_before_unavailable_whatever_the_price(tmp_path):
    fake = PrimeIntellectApiFake(str(tmp_path), offers=[
        offer("cheap-gone", "L40S_48GB", "runpod", "EU-1", "RO", 0.5, stock="Unavailable"),
        offer("dear", "L40S_48GB", "hyperstack", "US-1", "US", 1.5, stock="Low"),
        offer("mid", "L40S_48GB", "hyperstack", "US-2", "US", 1.0, stock="High"),
        offer("unpriced", "L40S_48GB", "hyperstack", "US-3", "US", None),
        offer("no-image", "L40S_48GB", "oblivus", "US-4", "US", 0.2, images=["flux"]),
    ])
    try:
        offers = adapter(fake).plan(ResourceRequest(vm_name="u1", gpu="L40S"))
    finally:
        fake.stop()
    assert [(o.detail["cloud_id"], o.available) for o in offers] == [
        ("mid", True), ("dear", True), ("no-image", False), ("cheap-gone", False), ("unpriced", False)]
    reasons = {o.detail["cloud_id"]: o.unavailable_reason for o in offers}
    assert reasons["no-image"].startswith("image ubuntu_22_cuda_12 is not offered here")
    assert reasons["unpriced"] == "no on-demand price listed"


def test_spot_regions_providers_and_security_filters(fake):
    [spot] = adapter(fake).plan(ResourceRequest(vm_name="u1", gpu="H100", spot=True))
    assert spot.spot and spot.instance_type.endswith("/spot") and spot.price_per_hour == 1.1
    by_country = adapter(fake, regions=["us"]).plan(ResourceRequest(vm_name="u1", gpu="H100"))
    assert [o.region for o in by_country] == ["US-KS-2"]
    asked = adapter(fake, regions=["us"]).plan(ResourceRequest(vm_name="u1", gpu="H100", regions=["canada-1"]))
    assert [o.region for o in asked] == ["CANADA-1"]   # the request's regions win over the option
    # Prime's own region names (an item's "region"; the availability filter "regions" takes them)
    assert [o.region for o in adapter(fake, regions=["united_states"]).plan(
        ResourceRequest(vm_name="u1", gpu="H100"))] == ["US-KS-2"]
    assert [o.region for o in adapter(fake).plan(
        ResourceRequest(vm_name="u1", gpu="H100", regions=["canada"]))] == ["CANADA-1"]
    assert [o.region for o in adapter(fake, providers=["RunPod"]).plan(
        ResourceRequest(vm_name="u1", gpu="H100"))] == ["US-KS-2"]
    assert adapter(fake, security="secure_cloud").plan(ResourceRequest(vm_name="u1", gpu="RTX4090")) == []
    assert fake.calls_of("availability.gpus")[-1][3]["security"] == ["secure_cloud"]
    [community] = adapter(fake).plan(ResourceRequest(vm_name="u1", gpu="RTX4090"))
    assert community.instance_type.endswith("/community")


def test_an_offer_answers_every_region_name_its_plan_matched_it_by(fake):
    """A VM's journalled places (the reuse check) are what plan matched: data center, country, Prime's region."""
    from ansible_collections.gpuprov.cloud.plugins.module_utils.vm.request_match import in_regions
    provider = adapter(fake)
    for asked in (["us"], ["US-KS-2"], ["united_states"]):
        [found] = provider.plan(ResourceRequest(vm_name="u1", gpu="H100", regions=asked))
        vm = {"location": found.location.to_dict(), "places": provider.offer_places(found),
              "regions_fold": provider.regions_fold}
        assert in_regions(vm, asked), (asked, vm)
        assert not in_regions(vm, ["canada"])


def test_community_offers_are_priced_at_the_community_price(tmp_path):
    community = offer("c1", "RTX4090_24GB", "runpod", "EU-RO-1", "RO", 0.69, security="community_cloud")
    community["prices"]["communityPrice"] = 0.44
    secure = offer("s1", "RTX4090_24GB", "runpod", "US-KS-2", "US", 0.79)
    secure["prices"]["communityPrice"] = 0.50
    only_community = offer("c2", "RTX4090_24GB", "runpod", "EU-RO-1", "RO", None, security="community_cloud")
    only_community["prices"]["communityPrice"] = 0.39
    made = PrimeIntellectApiFake(str(tmp_path), offers=[community, secure, only_community])
    try:
        prices = {o.detail["cloud_id"]: o.price_per_hour for o in adapter(made).plan(
            ResourceRequest(vm_name="u1", gpu="RTX4090"))}
    finally:
        made.stop()
    assert prices == {"c1": 0.44, "s1": 0.79, "c2": 0.39}


def test_no_gpu_plans_cpu_nodes(fake):
    [cpu] = adapter(fake).plan(ResourceRequest(vm_name="u1", gpu=None))
    assert (cpu.gpu, cpu.gpu_count, cpu.detail["gpu_type"]) == (None, 0, "CPU_NODE")


def test_paginates_the_availability_listing(tmp_path):
    many = [offer("g%03d" % i, "GH200_96GB" if i % 2 else "GH200_480GB", "lambdalabs", "DC-%03d" % i, "US",
                  1.0 + i / 1000.0) for i in range(230)]
    fake = PrimeIntellectApiFake(str(tmp_path), offers=many)
    try:
        offers = adapter(fake).plan(ResourceRequest(vm_name="u1", gpu="GH200"))
        pages = [c[3]["page"] for c in fake.calls_of("availability.gpus")]
    finally:
        fake.stop()
    assert len(offers) == 230 and offers[0].detail["cloud_id"] == "g000"
    assert pages == [["1"], ["2"], ["3"]]
    # three vendor types map to GH200: no server-side type filter, the adapter filters
    assert "gpu_type" not in fake.calls[0][3]


@pytest.mark.parametrize("request_, text", [
    (ResourceRequest(vm_name="u1", gpu="MI325X"), "gpu: primeintellect offers no MI325X"),
    (ResourceRequest(vm_name="u1", gpu="H100", gpu_count=32), "gpu_count: a primeintellect pod has 1 to 16 GPUs"),
    (ResourceRequest(vm_name="u1", gpu="H100", gpu_count=0), "gpu_count: a primeintellect pod has 1 to 16 GPUs"),
    (ResourceRequest(vm_name="u1", gpu="NoSuchGPU"), "gpu: unknown GPU 'NoSuchGPU'"),
])
def test_an_ask_no_offer_can_meet_is_invalid(fake, request_, text):
    with pytest.raises(ProviderError) as info:
        adapter(fake).plan(request_)
    assert info.value.kind == ErrorKind.INVALID_REQUEST and info.value.msg.startswith(text)
    assert fake.calls == []


def test_every_mapped_gpu_is_canonical():
    from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.gpus import GPUS
    assert set(catalog.GPU_TYPES.values()) <= set(GPUS)


# -- sshConnection, statuses, names -----------------------------------------------------------

@pytest.mark.parametrize("pod, endpoint", [
    ({"sshConnection": "root@1.2.3.4 -p 2222", "ip": "1.2.3.4"}, SshEndpoint("1.2.3.4", 2222, "root")),
    ({"sshConnection": "ubuntu@5.6.7.8", "ip": "5.6.7.8"}, SshEndpoint("5.6.7.8", 22, "ubuntu")),
    ({"sshConnection": ["root@9.9.9.9 -p 40022"], "ip": ["9.9.9.9"]}, SshEndpoint("9.9.9.9", 40022, "root")),
    ({"sshConnection": "ssh root@1.2.3.4 -p 22", "ip": None}, SshEndpoint("1.2.3.4", 22, "root")),
    # the connection string's host, as `prime pods ssh` uses it, even when ip says otherwise
    ({"sshConnection": "root@198.51.100.7 -p 30022", "ip": "10.0.0.5"}, SshEndpoint("198.51.100.7", 30022, "root")),
    ({"sshConnection": [None], "ip": [None]}, None),
    ({"sshConnection": None, "ip": "1.2.3.4"}, None),
    ({"sshConnection": "", "ip": "1.2.3.4"}, None),
    ({"sshConnection": "1.2.3.4 -p 22", "ip": "1.2.3.4"}, None),        # no user: no endpoint
    ({"sshConnection": "root@1.2.3.4 -p 70000", "ip": "1.2.3.4"}, None),
])
def test_ssh_endpoint(pod, endpoint):
    assert catalog.ssh_endpoint(pod) == endpoint


@pytest.mark.parametrize("pod, status", [
    ({"status": "PROVISIONING"}, Status.PENDING),
    ({"status": "PENDING"}, Status.PENDING),
    ({"status": "ACTIVE", "installationStatus": "PENDING", "installationProgress": 40}, Status.PENDING),
    ({"status": "ACTIVE", "installationStatus": "FINISHED"}, Status.RUNNING),
    ({"status": "ACTIVE"}, Status.RUNNING),
    ({"status": "INSTALLING"}, Status.PENDING),
    ({"status": "STOPPED"}, Status.STOPPED),
    ({"status": "ERROR", "installationFailure": "disk full"}, Status.FAILED),
    ({"status": "ACTIVE", "installationStatus": "FAILED"}, Status.FAILED),
    ({"status": "DELETING"}, Status.TERMINATING),
    ({"status": "TERMINATED"}, None),
    ({"status": "SOMETHING_NEW"}, Status.PENDING),
])
def test_pod_status(pod, status):
    assert catalog.pod_status(pod)[0] == status


def test_failed_pod_says_why():
    assert catalog.pod_status({"status": "ERROR", "installationFailure": "disk full"})[1] == (
        "Prime pod status ERROR: disk full")


def test_names_carry_the_identity():
    jid = "0123456789abcdef"
    assert catalog.pod_name("train", jid) == "train-j" + jid and catalog.pod_name("train", None) == "train"
    assert catalog.pod_identity("train-j" + jid, "train") == (True, jid)
    assert catalog.pod_identity("train", "train") == (True, None)
    assert catalog.pod_identity("train-2-j" + jid, "train") == (False, None)
    assert catalog.pod_identity("trainer", "train") == (False, None)
    assert catalog.pod_identity(None, "train") == (False, None)
    # an id that is not (8+) lowercase hex travels as its UTF-8 bytes in hex
    assert catalog.pod_name("train", "j1") == "train-x" + b"j1".hex()
    assert catalog.pod_identity("train-x" + b"j1".hex(), "train") == (True, "j1")
    assert catalog.pod_identity("train-x" + "Other-ID_7".encode().hex(), "train") == (True, "Other-ID_7")
    # a user's pod whose name only looks a bit like one is nobody's journal
    for name in ("train-jupyter", "train-j1234", "train-x64", "train-xzz", "train-x" + b"\x01\x02".hex(), "train-"):
        assert catalog.pod_identity(name, "train") == (False, None), name
        assert catalog.parse_pod_name(name) is None, name
    name = catalog.key_name("train", KEY, jid)
    assert name.startswith("gpuprov-train-") and name.endswith("-j" + jid)
    assert catalog.key_owner(name, "train") == (True, jid)
    assert catalog.key_owner(catalog.key_name("train", KEY, "j1"), "train") == (True, "j1")
    assert catalog.key_owner(catalog.key_name("train", KEY, None), "train") == (True, None)
    assert catalog.key_owner(catalog.key_name("train-b", KEY, jid), "train") == (False, None)
    assert catalog.key_owner("my laptop", "train") == (False, None)


def test_names_made_before_are_still_read():
    """``<vm>.<journal id>``, as gpuprov named pods and keys before: the journal id is in the name."""
    assert catalog.pod_identity("train.abc", "train") == (True, "abc")
    assert catalog.pod_identity("train-2.abc", "train") == (False, None)
    assert catalog.parse_pod_name("train.abc") == ("train", "abc")
    legacy_key = "gpuprov-train-%s.abc" % catalog.key_fingerprint(KEY)
    assert catalog.key_owner(legacy_key, "train") == (True, "abc")
    assert catalog.parse_key_name(legacy_key) == ("train", "abc")


@pytest.mark.parametrize("vm, journal_id", [("u1", "a" * 32), ("train-42", "0123456789abcdef"), ("123", "j1"),
                                            ("a" * 63, "journal.with.dots"), ("u", "Über-Journal"), ("u", None)])
def test_every_name_gpuprov_gives_a_pod_is_inside_the_cli_rule(vm, journal_id):
    from ansible_collections.gpuprov.cloud.tests.fakes.primeintellect_api import pod_name_allowed
    name = catalog.pod_name(vm, journal_id)
    assert pod_name_allowed(name) and catalog.name_allowed(name), name
    assert catalog.pod_identity(name, vm) == (True, journal_id)
    assert catalog.key_owner(catalog.key_name(vm, KEY, journal_id), vm) == (True, journal_id)
    assert pod_name_allowed(catalog.key_name(vm, KEY, journal_id))


def test_a_name_outside_the_cli_rule_is_refused_before_any_call(fake):
    prime = adapter(fake, journal_id=None)
    offer_ = prime.plan(ResourceRequest(vm_name="u1", gpu="H100"))[0]
    prepared = prime.prepare(offer_, spec("42"))
    before = len(fake.calls)
    with pytest.raises(ProviderError) as info:
        prime.create(offer_, prepared, spec("42"))
    assert info.value.kind == ErrorKind.INVALID_REQUEST
    assert info.value.msg.startswith("name: '42' cannot be a primeintellect pod name (letters, digits and dashes")
    assert len(fake.calls) == before


@pytest.mark.parametrize("name", ["u1.%s" % ("a" * 32), "u1_x", "42", "", "u 1"])
def test_the_fake_refuses_a_pod_name_outside_the_cli_rule(fake, name):
    prime = adapter(fake)
    offer_ = prime.plan(ResourceRequest(vm_name="u1", gpu="H100"))[0]
    answer = _post(fake, "/api/v1/pods/", {"pod": {"name": name, "cloudId": offer_.detail["cloud_id"],
                                                   "gpuType": "H100_80GB", "socket": "PCIe", "gpuCount": 1},
                                           "provider": {"type": offer_.detail["provider"]}})
    assert answer.status_code == 422, answer.text
    assert answer.json()["detail"][0]["loc"] == ["body", "pod", "name"]
    assert fake.pods == {}


@pytest.mark.parametrize("suffix", ["", "/", "/api/v1", "/api/v1/"])
def test_api_url_is_taken_with_or_without_api_v1(fake, suffix):
    prime = adapter(fake, api_url=fake.url + suffix)
    assert prime.plan(ResourceRequest(vm_name="u1", gpu="H100"))
    assert [c[2] for c in fake.calls] == ["/api/v1/availability/gpus"]


# -- prepare, create, observe, cleanup ---------------------------------------------------------

def test_prepare_registers_once_and_reuses_the_same_material(fake):
    prime = adapter(fake)
    offer_ = prime.plan(ResourceRequest(vm_name="u1", gpu="H100"))[0]
    first = prime.prepare(offer_, spec())
    assert prime.prepare(offer_, spec()) == first
    [key] = fake.keys.values()
    assert key["name"] == catalog.key_name("u1", KEY, "a" * 32) and first["ssh_key_id"] == key["id"]
    # the user's own key of the same material (another comment), under another name: reused as it is
    fake.keys.clear()
    fake.keys["mine"] = {"id": "mine", "userId": "u", "name": "laptop", "publicKey": KEY.rsplit(" ", 1)[0] + " me",
                         "isPrimary": True, "isUserKey": True}
    assert prime.prepare(offer_, spec())["ssh_key_id"] == "mine"
    prime.cleanup(WHERE, "u1")
    assert list(fake.keys) == ["mine"]   # cleanup never removes a key it did not name


def test_cleanup_removes_only_this_vms_keys_of_this_journal(fake):
    mine, other = adapter(fake, journal_id="j1"), adapter(fake, journal_id="j2")
    offer_ = mine.plan(ResourceRequest(vm_name="u1", gpu="H100"))[0]
    mine.prepare(offer_, spec("u1"))
    other.prepare(offer_, spec("u1", OTHER_KEY))
    mine.prepare(offer_, spec("u1-b", "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAAAgQC7 b"))
    mine.cleanup(WHERE, "u1")
    assert sorted(k["name"] for k in fake.keys.values()) == sorted([
        catalog.key_name("u1", OTHER_KEY, "j2"), catalog.key_name("u1-b", "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAAAgQC7 b",
                                                                  "j1")])


def test_create_sends_the_documented_body_in_one_call(fake):
    prime = adapter(fake, team_id="team-7", disk_size_gb=200)
    offer_ = prime.plan(ResourceRequest(vm_name="u1", gpu="H100"))[0]
    prepared = prime.prepare(offer_, spec())
    before = len(fake.calls)
    pod_id = prime.create(offer_, prepared, spec())
    [call] = fake.calls[before:]
    assert call[:3] == ("pods.create", "POST", "/api/v1/pods/")
    assert call[4] == {
        "pod": {"name": "u1-j" + "a" * 32, "cloudId": "n3-H100x1", "gpuType": "H100_80GB", "socket": "PCIe",
                "gpuCount": 1, "image": "ubuntu_22_cuda_12", "dataCenterId": "CANADA-1", "country": "CA",
                "security": "secure_cloud", "diskSize": 200},
        "provider": {"type": "hyperstack"}, "team": {"teamId": "team-7"}}
    assert fake.pods[pod_id]["name"] == "u1-j" + "a" * 32


def test_observe_boots_then_reports_the_endpoint_and_journal(fake):
    prime = adapter(fake)
    offer_ = prime.plan(ResourceRequest(vm_name="u1", gpu="H100"))[0]
    pod_id = prime.create(offer_, prime.prepare(offer_, spec()), spec())
    [booting] = prime.observe(WHERE, "u1")
    assert (booting.instance_id, booting.status, booting.endpoint) == (pod_id, Status.PENDING, None)
    assert booting.journal_id == "a" * 32
    [running] = prime.observe(WHERE, "u1")
    assert running.usable and running.endpoint.host == "127.0.0.1" and running.endpoint.port > 0
    assert adapter(fake).observe(WHERE, "u2") == []
    prime.delete(WHERE, "u1", [pod_id])
    assert [o.status for o in prime.observe(WHERE, "u1")] == [Status.TERMINATING]
    assert prime.observe(WHERE, "u1") == []         # TERMINATED: gone for gpuprov
    assert prime.observe(WHERE, "u1") == [] and fake.pods == {}


@pytest.mark.parametrize("reply", [
    Reply(404, {"detail": "Pod not found"}), Reply(400, {"detail": "Pod abc123 not found"}),
    Reply(400, {"detail": "Pod already terminated"}), Reply(410, {"detail": "Gone"}),
])
def test_delete_of_a_pod_prime_no_longer_knows_is_success(fake, reply):
    fake.fail_next("pods.delete", reply)
    adapter(fake).delete(WHERE, "u1", ["abc123"])


def test_delete_refused_for_another_reason_is_an_error(fake):
    fake.fail_next("pods.delete", Reply(400, {"detail": "Pod is locked by a running job"}))
    with pytest.raises(ProviderError) as info:
        adapter(fake).delete(WHERE, "u1", ["abc123"])
    assert info.value.kind == ErrorKind.INVALID_REQUEST
    adapter(fake).delete(WHERE, "u1", ["never-made"])  # the fake's own 404


def test_a_pod_named_exactly_the_vm_is_legacy(fake):
    fake.make_unreachable_pod("u3")
    [legacy] = adapter(fake).observe(WHERE, "u3")
    assert legacy.journal_id is None and legacy.owned_by("anything") and legacy.endpoint is None


def test_pods_listing_is_paginated(fake):
    for i in range(150):
        fake.make_unreachable_pod("p%d" % i)
    fake.make_unreachable_pod("last.xyz")
    [found] = adapter(fake).observe(WHERE, "last")
    assert found.journal_id == "xyz"
    assert [c[3]["offset"] for c in fake.calls_of("pods.list")] == [["0"], ["100"]]


def test_capabilities_say_the_truth(fake):
    caps = adapter(fake, boot_timeout_s=1200, poll_interval_s=3).capabilities()
    assert (caps.kubernetes, caps.boot_script, caps.spot, caps.k3s_access) == (False, False, True, None)
    assert (caps.boot_timeout_s, caps.poll_interval_s) == (1200, 3)


def test_options_are_typed_and_the_key_comes_from_the_environment(fake, monkeypatch):
    monkeypatch.setenv("PRIME_API_KEY", fake.token)
    prime = get_provider("primeintellect", {"api_url": fake.url})
    assert prime.plan(ResourceRequest(vm_name="u1", gpu="H100")) and prime.secret_options == ("api_key",)
    with pytest.raises(ProviderError) as info:
        get_provider("primeintellect", {"api_url": fake.url, "security": "cheap"})
    assert info.value.msg.startswith("cloud_options.primeintellect.security:")
    monkeypatch.delenv("PRIME_API_KEY")
    keyless = get_provider("primeintellect", {"api_url": fake.url})
    assert keyless.capabilities().kubernetes is False     # building needs no key; calling does
    with pytest.raises(ProviderError) as info:
        keyless.plan(ResourceRequest(vm_name="u1", gpu="H100"))
    assert info.value.kind == ErrorKind.CREDENTIALS
    assert info.value.msg == "primeintellect: no credentials: set cloud_options.primeintellect.api_key (or PRIME_API_KEY)"


# -- the fake refuses what Prime refuses -------------------------------------------------------

def _post(fake, path, body, token=None):
    headers = {"Authorization": "Bearer %s" % (token or fake.token)}
    return requests.post(fake.url + path, json=body, headers=headers, timeout=10)


def test_fake_refuses_unknown_and_missing_fields_with_fastapi_bodies(fake):
    answer = _post(fake, "/api/v1/pods/", {"pod": {"cloudId": "n3-H100x1", "gpuType": "H100_80GB", "socket": "PCIe",
                                                   "gpuCount": 1, "userData": "#!/bin/sh"},
                                           "provider": {"type": "hyperstack"}})
    assert answer.status_code == 422
    assert answer.json()["detail"][0]["loc"] == ["body", "pod", "userData"]
    answer = _post(fake, "/api/v1/pods/", {"pod": {"gpuType": "H100_80GB", "socket": "PCIe", "gpuCount": 1},
                                           "provider": {"type": "hyperstack"}})
    assert answer.status_code == 422 and answer.json()["detail"][0]["msg"] == "missing field 'cloudId'"
    answer = _post(fake, "/api/v1/ssh_keys/", {"name": "k"})
    assert answer.status_code == 422 and answer.json()["detail"][0]["loc"] == ["body", "publicKey"]
    assert fake.pods == {} and fake.keys == {}


def test_fake_refuses_a_bad_key_and_no_key(fake):
    answer = _post(fake, "/api/v1/ssh_keys/", {"name": "k", "publicKey": KEY}, token="wrong")
    assert (answer.status_code, answer.json()) == (401, {"detail": "API key unauthorized"})
    answer = requests.get(fake.url + "/api/v1/pods/", timeout=10)
    assert (answer.status_code, answer.json()) == (403, {"detail": "Not authenticated"})


def test_fake_refuses_an_offer_out_of_stock(fake):
    answer = _post(fake, "/api/v1/pods/", {"pod": {"cloudId": "1A100.22V", "gpuType": "A100_80GB", "socket": "PCIe",
                                                   "gpuCount": 1}, "provider": {"type": "datacrunch"}})
    assert answer.status_code == 400 and answer.json()["detail"].startswith("No capacity available")
