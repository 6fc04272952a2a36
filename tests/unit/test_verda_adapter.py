"""The verda adapter against the Verda API fake: plan mapping (prices, availability,
images, InvalidRequest), identity in hostname and description, the SSH endpoint, the
OAuth2 token's life, delete's per-instance results and cleanup's reach."""

from __future__ import annotations

import base64
import hashlib
import json
import uuid

import pytest

pytest.importorskip("requests")

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (  # noqa: E402
    BootScript, ErrorKind, InstanceSpec, K3sAccess, Location, Offer, ProviderError, ResourceRequest, Status,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.verda import (  # noqa: E402
    VerdaProvider, catalog,
)
from ansible_collections.gpuprov.cloud.tests.fakes.marketplace import Reply  # noqa: E402
from ansible_collections.gpuprov.cloud.tests.fakes.verda_api import (  # noqa: E402
    CLIENT_ID, CLIENT_SECRET, VerdaApiFake,
)

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGdwdXByb3YtdmVyZGEtdW5pdA unit@verda"
JOURNAL = uuid.uuid4().hex


@pytest.fixture
def fake(tmp_path):
    made = VerdaApiFake(str(tmp_path))
    yield made
    made.stop()


def _provider(fake, journal_id=JOURNAL, **extra):
    options = {"api_url": fake.api_url, "client_id": CLIENT_ID, "client_secret": CLIENT_SECRET,
               "ssh_user": "tester", "ssh_port": fake.ssh_port}
    options.update(extra)
    return VerdaProvider(options, journal_id=journal_id)


def _spec(name="unit-verda", script=True):
    return InstanceSpec(vm_name=name, ssh_public_key=KEY,
                        boot_script=BootScript("#!/bin/sh\necho hi", {"A": "1"}) if script else None)


def _launch(provider, request, spec):
    offer = provider.plan(request)[0]
    prepared = provider.prepare(offer, spec)
    return offer, prepared, provider.create(offer, prepared, spec)


# -- plan --------------------------------------------------------------------------------

def test_plan_maps_types_availability_and_prices(fake):
    offers = _provider(fake).plan(ResourceRequest(vm_name="x", gpu="H100", gpu_count=1))
    assert [(o.region, o.instance_type, o.available) for o in offers] == [
        ("FIN-01", "1H100.80S.30V", True), ("FIN-03", "1H100.80S.30V", True), ("ICE-01", "1H100.80S.30V", False)]
    assert all(o.price_per_hour == 2.19 and o.gpu == "H100" and o.gpu_count == 1 and not o.spot for o in offers)
    assert offers[2].unavailable_reason == "Verda lists no 1H100.80S.30V capacity in ICE-01 now"
    assert offers[0].detail["image"] == "ubuntu-24.04-cuda-12.8-open-docker"
    assert all(Offer.from_dict(json.loads(json.dumps(o.to_dict()))) == o for o in offers)
    assert [c[3] for c in fake.calls_of("instance-types.list")] == [{"currency": ["usd"]}]
    # is_spot, as the API reference spells it (isSpot is its deprecated alias).
    assert [c[3] for c in fake.calls_of("instance-availability.list")] == [{"is_spot": ["false"]}]


def test_plan_orders_available_then_cheapest_and_honours_regions(fake):
    fake.stock["ICE-01"] = ["1A100.40S.22V"]
    offers = _provider(fake, regions=["ICE-01", "FIN-01"]).plan(ResourceRequest(vm_name="x", gpu="A100"))
    assert [(o.region, o.instance_type, o.available) for o in offers] == [
        ("ICE-01", "1A100.40S.22V", True), ("FIN-01", "1A100.40S.22V", False)]
    offers = _provider(fake).plan(ResourceRequest(vm_name="x", gpu="A100-80GB", regions=["FIN-03", "FIN-01"]))
    assert [(o.region, o.available, o.price_per_hour) for o in offers] == [
        ("FIN-01", True, 1.29), ("FIN-03", False, 1.29)]


def test_plan_in_a_location_verda_has_without_capacity_is_unavailable_not_refused(fake, monkeypatch):
    from ansible_collections.gpuprov.cloud.tests.fakes import verda_api
    monkeypatch.setattr(verda_api, "LOCATIONS", verda_api.LOCATIONS + [{"code": "NEW-01", "name": "New 1"}])
    provider = _provider(fake)
    offers = provider.plan(ResourceRequest(vm_name="x", gpu="H100", regions=["NEW-01"]))
    assert [(o.region, o.available) for o in offers] == [("NEW-01", False)]   # GET /locations knows it
    assert len(fake.calls_of("locations.list")) == 1
    provider.plan(ResourceRequest(vm_name="x", gpu="H100", regions=["FIN-01"]))
    assert len(fake.calls_of("locations.list")) == 1   # asked only for a location the rest does not know
    with pytest.raises(ProviderError) as info:
        provider.plan(ResourceRequest(vm_name="x", gpu="H100", regions=["FIN-1"]))
    assert info.value.kind == ErrorKind.INVALID_REQUEST
    assert info.value.msg.startswith("regions: verda has no region FIN-1 (did you mean FIN-01")
    assert "NEW-01" in info.value.msg and "ICE-01" in info.value.msg


def test_plan_least_count_that_fits_and_cpu(fake):
    offers = _provider(fake).plan(ResourceRequest(vm_name="x", gpu="H100", gpu_count=2, regions=["FIN-03"]))
    assert [(o.instance_type, o.gpu_count) for o in offers] == [("2H100.80S.60V", 2)]
    offers = _provider(fake).plan(ResourceRequest(vm_name="x", gpu=None, regions=["FIN-01"]))
    assert [(o.instance_type, o.gpu, o.gpu_count, o.detail["image"]) for o in offers] == [
        ("CPU.4V.16G", None, 0, "ubuntu-24.04")]


def test_plan_refuses_what_verda_never_sells(fake):
    with pytest.raises(ProviderError) as info:
        _provider(fake).plan(ResourceRequest(vm_name="x", gpu="T4"))
    assert info.value.kind == ErrorKind.INVALID_REQUEST and "Verda offers no T4" in info.value.msg
    assert "H100" in info.value.msg
    with pytest.raises(ProviderError) as info:
        _provider(fake).plan(ResourceRequest(vm_name="x", gpu="H100", gpu_count=4))
    assert info.value.kind == ErrorKind.INVALID_REQUEST and "at most 2 x H100" in info.value.msg


def test_plan_spot_uses_spot_prices_and_stock(fake):
    fake.spot_stock["FIN-01"] = []
    offers = _provider(fake).plan(ResourceRequest(vm_name="x", gpu="H100", spot=True))
    assert [(o.region, o.available, o.price_per_hour, o.spot) for o in offers] == [
        ("FIN-03", True, 0.88, True), ("FIN-01", False, 0.88, True), ("ICE-01", False, 0.88, True)]
    assert offers[1].unavailable_reason == "Verda lists no spot 1H100.80S.30V capacity in FIN-01 now"
    assert [c[3] for c in fake.calls_of("instance-availability.list")] == [{"is_spot": ["true"]}]


def test_plan_images_follow_supported_os(fake):
    v100 = _provider(fake).plan(ResourceRequest(vm_name="x", gpu="V100", regions=["FIN-01"]))[0]
    assert v100.detail["image"] == "ubuntu-22.04-cuda-12.0-docker" and v100.available
    pinned = _provider(fake, image="ubuntu-24.04-cuda-13.0-open-docker").plan(
        ResourceRequest(vm_name="x", gpu="V100", regions=["FIN-01"]))[0]
    assert not pinned.available and "not among the images 1V100.6V supports" in pinned.unavailable_reason
    by_id = _provider(fake, image="2404f580-1300-1111-82b3-f199fb9b701b").plan(
        ResourceRequest(vm_name="x", gpu="V100", regions=["FIN-01"]))[0]
    assert by_id.available and by_id.detail["image"] == "2404f580-1300-1111-82b3-f199fb9b701b"


def test_plan_reports_no_price_that_is_not_usd(fake):
    # An answer in another currency than asked is not a USD price: no price, still an offer.
    fake.fail_next("instance-types.list", Reply(200, [dict(t, currency="eur") for t in fake.types]))
    offers = _provider(fake).plan(ResourceRequest(vm_name="x", gpu="H100", regions=["FIN-01"]))
    assert [(o.instance_type, o.price_per_hour, o.available) for o in offers] == [("1H100.80S.30V", None, True)]


@pytest.mark.parametrize("model,gpus,memory,expected", [
    ("H100", 1, 80, "H100"), ("H100 NVL", 1, 94, "H100-NVL"), ("A100", 8, 320, "A100"),
    ("A100", 8, 640, "A100-80GB"), ("A100 80GB", 1, 0, "A100-80GB"), ("Tesla V100", 4, 64, "V100"),
    ("V100", 1, 32, "V100-32GB"), ("RTX PRO 6000", 1, 96, "RTXPRO6000"), ("RTX A6000", 1, 48, "A6000"),
    ("RTX 6000 Ada", 1, 48, "RTX6000ADA"), ("L40S", 1, 48, "L40S"), ("B200", 8, 1440, "B200"),
    ("H200", 1, 141, "H200"), ("GB300", 4, 1152, "GB300"), ("Rubin", 8, 2304, None), ("CPU Node", 0, 0, None),
])
def test_catalog_reads_vendor_gpu_names(model, gpus, memory, expected):
    itype = {"model": model, "gpu": {"number_of_gpus": gpus}, "gpu_memory": {"size_in_gigabytes": memory}}
    assert catalog.gpu_of(itype) == expected


# -- identity ------------------------------------------------------------------------------

def test_description_carries_name_and_journal_within_100_characters():
    text = catalog.description("short", JOURNAL)
    assert text == "gpuprov-vm-name=short gpuprov-journal-id=%s" % JOURNAL
    assert catalog.journal_of(text) == JOURNAL and catalog.carries_identity(text, "short")
    long_name = "v" * 63
    text = catalog.description(long_name, JOURNAL)
    assert text == "gpuprov-journal-id=%s" % JOURNAL and len(text) <= 100
    assert catalog.carries_identity(text, long_name)
    assert catalog.description("short", None) == "gpuprov-vm-name=short" and catalog.journal_of("x") is None
    assert not catalog.carries_identity("my own box", "short")
    with pytest.raises(ProviderError):
        catalog.description("short", "j" * 90)


def test_side_names_and_what_cleanup_may_take():
    mine = catalog.side_name("vm", "material", JOURNAL)
    assert mine.startswith("gpuprov-vm-") and catalog.cleanable(mine, "vm", JOURNAL)
    assert not catalog.cleanable(mine, "vm", "another-journal")
    assert catalog.cleanable(catalog.side_name("vm", "material", None), "vm", JOURNAL)  # before journal ids
    assert not catalog.cleanable(catalog.side_name("vm-b", "material", JOURNAL), "vm", JOURNAL)
    assert not catalog.cleanable("my-key", "vm", JOURNAL) and not catalog.cleanable(None, "vm", JOURNAL)


def test_key_name_carries_the_keys_fingerprint_prefix():
    real = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKv7Vz3Qn6sXgq0m1rYb1m7r2k2Jr1hJg5jz1Qm3m5wD me@laptop"
    blob = base64.b64decode(real.split()[1])
    assert catalog.key_name("vm", real, None) == "gpuprov-vm-" + hashlib.sha256(blob).hexdigest()[:12]
    assert catalog.key_name("vm", real, JOURNAL).startswith("gpuprov-vm-%s-j" % hashlib.sha256(blob).hexdigest()[:12])
    assert catalog.cleanable(catalog.key_name("vm", real, JOURNAL), "vm", JOURNAL)
    assert catalog.key_name("vm", real.rsplit(" ", 1)[0] + " other", None) == catalog.key_name("vm", real, None)


def test_create_sends_the_documented_body_and_reads_a_text_id(fake):
    provider = _provider(fake)
    offer, prepared, instance_id = _launch(provider, ResourceRequest(vm_name="unit-verda", gpu="H100"), _spec())
    body = fake.calls_of("instances.create")[-1][4]
    assert body == {
        "instance_type": "1H100.80S.30V", "image": "ubuntu-24.04-cuda-12.8-open-docker", "hostname": "unit-verda",
        "description": "gpuprov-vm-name=unit-verda gpuprov-journal-id=%s" % JOURNAL, "location_code": "FIN-01",
        "tags": [{"key": "gpuprov-vm-name", "value": "unit-verda"}, {"key": "gpuprov-journal-id", "value": JOURNAL}],
        "ssh_key_ids": [prepared["ssh_key_id"]], "startup_script_id": prepared["startup_script_id"],
        "os_volume": {"name": "gpuprov-unit-verda-os", "size": 100}, "is_spot": False}
    assert instance_id in fake.instances
    # the SSH key and the script at their current paths (/sshkeys is the deprecated alias)
    assert {c[2] for c in fake.calls if c[0].startswith("sshkeys.")} == {"/v1/ssh-keys"}
    assert fake.scripts[prepared["startup_script_id"]]["script"] == "#!/bin/sh\nexport A='1'\necho hi"


def test_a_spot_instance_takes_its_os_volume_with_it_when_discontinued(fake):
    provider = _provider(fake)
    _launch(provider, ResourceRequest(vm_name="unit-verda", gpu="H100", spot=True), _spec(script=False))
    body = fake.calls_of("instances.create")[-1][4]
    assert body["is_spot"] is True
    assert body["os_volume"] == {"name": "gpuprov-unit-verda-os", "size": 100, "on_spot_discontinue": "delete_permanently"}


def test_create_accepts_a_json_id_and_refuses_an_empty_answer(fake):
    provider = _provider(fake)
    offer = provider.plan(ResourceRequest(vm_name="unit-verda", gpu="H100"))[0]
    prepared = provider.prepare(offer, _spec(script=False))
    assert prepared["startup_script_id"] is None
    fake.fail_next("instances.create", Reply(201, {"id": "abc-123"}))
    assert provider.create(offer, prepared, _spec(script=False)) == "abc-123"
    fake.fail_next("instances.create", Reply(201, raw="  "))
    with pytest.raises(ProviderError) as info:
        provider.create(offer, prepared, _spec(script=False))
    assert info.value.kind == ErrorKind.FAILED


def test_prepare_registers_the_vms_own_key_and_leaves_others_alone(fake):
    fake.ssh_keys["mine"] = {"id": "mine", "name": "laptop", "key": KEY.rsplit(" ", 1)[0] + " other-comment"}
    provider = _provider(fake)
    offer = provider.plan(ResourceRequest(vm_name="unit-verda", gpu="H100"))[0]
    key_id = provider.prepare(offer, _spec(script=False))["ssh_key_id"]
    assert key_id != "mine" and fake.ssh_keys[key_id]["key"] == KEY
    assert provider.prepare(offer, _spec(script=False))["ssh_key_id"] == key_id  # idempotent
    provider.cleanup(offer.location, "unit-verda")
    assert set(fake.ssh_keys) == {"mine"}


# -- observe -------------------------------------------------------------------------------

def test_observe_endpoint_only_when_running_and_ignores_strangers(fake):
    provider = _provider(fake)
    offer, _prepared, instance_id = _launch(provider, ResourceRequest(vm_name="unit-verda", gpu="H100"), _spec())
    fake.instances["stranger"] = dict(fake.instances[instance_id], id="stranger", description="hand made", tags=[])
    first = provider.observe(offer.location, "unit-verda")
    assert [(o.instance_id, o.status, o.endpoint, o.journal_id) for o in first] == [
        (instance_id, Status.PENDING, None, JOURNAL)]
    fake.instances.pop("stranger")
    fake.settle(instance_id)
    seen = provider.observe(offer.location, "unit-verda")[0]
    assert seen.usable and seen.endpoint.port == fake.ssh_port and seen.endpoint.user == "tester"
    assert seen.endpoint.host.startswith("127.0.0.") and seen.location == Location("verda", "FIN-01")
    assert provider.observe(Location("verda", "FIN-03"), "unit-verda") == []


def test_observe_reports_no_capacity_after_acceptance_as_failed(fake):
    fake.no_capacity_next = 1
    provider = _provider(fake)
    offer, _prepared, instance_id = _launch(provider, ResourceRequest(vm_name="unit-verda", gpu="H100"), _spec())
    seen = provider.observe(offer.location, "unit-verda")[0]
    assert seen.status == Status.FAILED and "no_capacity" in seen.reason and seen.endpoint is None
    report = provider.diagnose(offer.location, "unit-verda")
    assert report["instances"][0]["vendor"]["status"] == "no_capacity"
    assert report["findings"] == ["%s: %s" % (instance_id, seen.reason)]
    provider.delete(offer.location, "unit-verda", [instance_id])
    assert provider.observe(offer.location, "unit-verda")[0].status == Status.TERMINATING


# -- delete / cleanup ----------------------------------------------------------------------

def test_delete_reads_per_instance_results(fake):
    provider = _provider(fake)
    where = Location("verda", "FIN-01")
    fake.fail_next("instances.action", Reply(207, [{"action": "delete", "instanceId": "a", "status": "error",
                                                    "error": "Invalid instance id", "statusCode": 400}]))
    provider.delete(where, "unit-verda", ["a"])
    fake.fail_next("instances.action", Reply(207, [{"action": "delete", "instanceId": "a", "status": "error",
                                                    "error": "Can't discontinue a provisioning instance",
                                                    "statusCode": 400}]))
    with pytest.raises(ProviderError) as info:
        provider.delete(where, "unit-verda", ["a"])
    assert info.value.kind == ErrorKind.TRANSIENT
    fake.fail_next("instances.action", Reply(204))
    provider.delete(where, "unit-verda", ["a"])
    body = fake.calls_of("instances.action")[-1][4]
    assert body == {"id": ["a"], "action": "delete"}


def _deleted_to_the_end(fake, provider, spec):
    """Launch, delete through the adapter, let Verda finish: (the instance's OS volume id, the delete's body)."""
    _offer, _prepared, instance_id = _launch(provider, ResourceRequest(vm_name=spec.vm_name, gpu="H100"), spec)
    volume = fake.instances[instance_id]["os_volume_id"]
    provider.delete(Location("verda", "FIN-01"), spec.vm_name, [instance_id])
    fake.finish_delete(instance_id)
    assert provider.observe(Location("verda", "FIN-01"), spec.vm_name) == []
    provider.cleanup(Location("verda", "FIN-01"), spec.vm_name)
    return volume, fake.calls_of("instances.action")[-1][4]


def test_delete_takes_the_os_volume_with_it_not_to_the_trash(fake):
    """By default nothing of the VM is left on the account: the OS volume is named in the delete, permanently."""
    volume, body = _deleted_to_the_end(fake, _provider(fake), _spec())
    assert body == {"id": [body["id"][0]], "action": "delete", "volume_ids": [volume], "delete_permanently": True}
    assert fake.resources() == set()


def test_delete_leaves_the_os_volume_in_the_trash_when_told(fake):
    volume, body = _deleted_to_the_end(fake, _provider(fake, os_volume_on_delete="move_to_trash"), _spec())
    assert body == {"id": [body["id"][0]], "action": "delete"}
    assert fake.resources() == {"trash:%s" % volume}


def test_delete_of_an_instance_no_longer_listed_or_already_deleting_is_sent_as_it_was(fake):
    """An id Verda no longer lists is asked plainly (its answer says whether it is gone); one already deleting had
    its volume named by the delete that started it."""
    provider = _provider(fake)
    provider.delete(Location("verda", "FIN-01"), "unit-verda", ["gone-id"])
    assert fake.calls_of("instances.action")[-1][4] == {"id": ["gone-id"], "action": "delete"}
    _offer, _prepared, instance_id = _launch(provider, ResourceRequest(vm_name="unit-verda", gpu="H100"), _spec())
    volume = fake.instances[instance_id]["os_volume_id"]
    provider.delete(Location("verda", "FIN-01"), "unit-verda", [instance_id])
    provider.delete(Location("verda", "FIN-01"), "unit-verda", [instance_id])   # a re-run while it is deleting
    assert [c[4] for c in fake.calls_of("instances.action")[-2:]] == [
        {"id": [instance_id], "action": "delete", "volume_ids": [volume], "delete_permanently": True},
        {"id": [instance_id], "action": "delete"}]
    fake.finish_delete(instance_id)
    assert not fake.trash and volume not in fake.volumes


def test_cleanup_takes_only_this_vm_and_journal(fake):
    provider, other = _provider(fake), _provider(fake, journal_id="other-journal")
    offer = provider.plan(ResourceRequest(vm_name="unit-verda", gpu="H100"))[0]
    provider.prepare(offer, _spec())
    other.prepare(offer, dataclasses_replace_key(_spec()))
    _provider(fake).prepare(offer, _spec("unit-verda-b"))
    before = fake.resources()
    other.cleanup(offer.location, "unit-verda")
    gone = before - fake.resources()
    assert len(gone) == 2 and all(g.startswith(("sshkey:", "script:")) for g in gone)  # the other journal's
    provider.cleanup(offer.location, "unit-verda")
    assert {fake.ssh_keys[k]["name"] for k in fake.ssh_keys} == {
        catalog.key_name("unit-verda-b", KEY, JOURNAL)}


def test_scripts_are_found_and_cleaned_past_the_first_page(fake):
    # GET /scripts answers 10 scripts unless asked for more, newest first: this VM's script
    # sits on a later page once a dozen newer ones exist.
    provider = _provider(fake)
    offer = provider.plan(ResourceRequest(vm_name="unit-verda", gpu="H100"))[0]
    script_id = provider.prepare(offer, _spec())["startup_script_id"]
    for number in range(12):
        fake.scripts["s%d" % number] = {"id": "s%d" % number, "name": "user script %d" % number, "script": "true",
                                        "created_at": "2027-01-01T00:00:%02d.000Z" % number}
    assert provider.prepare(offer, _spec())["startup_script_id"] == script_id  # reused, not made twice
    assert len(fake.scripts) == 13
    provider.cleanup(offer.location, "unit-verda")
    assert sorted(fake.scripts) == sorted("s%d" % n for n in range(12))
    assert {c[3].get("pageSize", [None])[0] for c in fake.calls_of("scripts.list")} == {"100"}


def test_observe_reads_the_identity_from_tags_too(fake):
    provider = _provider(fake)
    _offer, _prepared, instance_id = _launch(provider, ResourceRequest(vm_name="unit-verda", gpu="H100"),
                                             _spec(script=False))
    fake.instances[instance_id]["description"] = ""  # edited in the console: the tags still say whose it is
    seen = provider.observe(Location("verda", "FIN-01"), "unit-verda")
    assert [(o.instance_id, o.journal_id) for o in seen] == [(instance_id, JOURNAL)]
    fake.instances[instance_id]["tags"] = [{"id": "tag_1", "key": "gpuprov-vm-name", "value": "someone-else"}]
    assert provider.observe(Location("verda", "FIN-01"), "unit-verda") == []


def test_out_of_capacity_is_verdas_503_service_unavailable(fake):
    provider = _provider(fake)
    offer, prepared, _made = _launch(provider, ResourceRequest(vm_name="unit-verda", gpu="H100"),
                                     _spec(script=False))
    fake.fail_capacity()
    with pytest.raises(ProviderError) as info:
        provider.create(offer, prepared, _spec(script=False))
    assert info.value.kind == ErrorKind.CAPACITY and info.value.status == 503
    fake.fail_next("instances.create", Reply(503, {"code": "service_unavailable", "message": "Try again later"}))
    with pytest.raises(ProviderError) as info:
        provider.create(offer, prepared, _spec(script=False))
    assert info.value.kind == ErrorKind.CAPACITY


def dataclasses_replace_key(spec):
    import dataclasses
    return dataclasses.replace(spec, ssh_public_key="ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG90aGVyLWpvdXJuYWw x")


# -- auth, secrets, pace -------------------------------------------------------------------

def test_token_fetched_once_and_again_after_a_refusal(fake):
    provider = _provider(fake)
    request = ResourceRequest(vm_name="x", gpu="H100")
    provider.plan(request)
    provider.plan(request)
    assert fake.tokens_issued == 1
    fake.expire_token()
    provider.plan(request)
    assert fake.tokens_issued == 2
    body = fake.calls_of("oauth2.token")[0][4]
    assert body == {"grant_type": "client_credentials", "client_id": CLIENT_ID, "client_secret": CLIENT_SECRET}


def test_token_fetched_again_once_its_expires_in_has_passed(fake, monkeypatch):
    from ansible_collections.gpuprov.cloud.plugins.module_utils.providers import rest
    clock = [1000.0]
    monkeypatch.setattr(rest.time, "monotonic", lambda: clock[0])
    provider = _provider(fake)
    request = ResourceRequest(vm_name="x", gpu="H100")
    provider.plan(request)
    clock[0] += 3000  # within the token's expires_in (3600 s)
    provider.plan(request)
    assert fake.tokens_issued == 1
    clock[0] += 600   # past it: a new token before the call, not after a refusal
    provider.plan(request)
    assert fake.tokens_issued == 2


def test_bad_or_missing_credentials_are_credentials_and_never_shown(fake, monkeypatch):
    monkeypatch.delenv("VERDA_CLIENT_ID", raising=False)
    monkeypatch.delenv("VERDA_CLIENT_SECRET", raising=False)
    with pytest.raises(ProviderError) as info:
        _provider(fake, client_secret="s3cr3t-wrong").plan(ResourceRequest(vm_name="x", gpu="H100"))
    assert info.value.kind == ErrorKind.CREDENTIALS and "s3cr3t-wrong" not in str(info.value)
    with pytest.raises(ProviderError) as info:
        VerdaProvider({"api_url": fake.api_url}).plan(ResourceRequest(vm_name="x", gpu="H100"))
    assert info.value.kind == ErrorKind.CREDENTIALS and "client_id" in info.value.msg
    monkeypatch.setenv("VERDA_CLIENT_ID", CLIENT_ID)
    monkeypatch.setenv("VERDA_CLIENT_SECRET", CLIENT_SECRET)
    assert VerdaProvider({"api_url": fake.api_url}).plan(ResourceRequest(vm_name="x", gpu="H100"))
    assert VerdaProvider.secret_options == ("client_id", "client_secret")


def test_rate_limit_carries_retry_after_and_malformed_is_failed(fake):
    provider = _provider(fake)
    fake.rate_limit("instances.list", retry_after=7)
    with pytest.raises(ProviderError) as info:
        provider.observe(Location("verda", "FIN-01"), "unit-verda")
    assert info.value.kind == ErrorKind.TRANSIENT and info.value.retry_after == 7
    fake.malformed("instance-types.list")
    with pytest.raises(ProviderError) as info:
        provider.plan(ResourceRequest(vm_name="x", gpu="H100"))
    assert info.value.kind == ErrorKind.FAILED
    fake.fail_next("instances.list", Reply(200, {"instances": []}))
    with pytest.raises(ProviderError) as info:
        provider.observe(Location("verda", "FIN-01"), "unit-verda")
    assert info.value.kind == ErrorKind.FAILED


def test_capabilities_are_truthful(fake):
    caps = _provider(fake, boot_timeout_s=1200, poll_interval_s=5).capabilities()
    assert (caps.kubernetes, caps.boot_script, caps.spot, caps.k3s_access) == (True, True, True, K3sAccess.SSH_TUNNEL)
    assert (caps.boot_timeout_s, caps.poll_interval_s) == (1200, 5)
