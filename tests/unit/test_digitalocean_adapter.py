"""The digitalocean adapter against the DigitalOcean API fake: plan's offers (prices, order,
availability and the vendor's reason, InvalidRequest), pagination, prepare's key and firewall,
the create body (identity tags within DigitalOcean's tag rules, image, user data), the SSH
endpoint, delete and cleanup boundaries, typed options, and the fake refusing what
DigitalOcean refuses."""

from __future__ import annotations

import pytest

requests = pytest.importorskip("requests")

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers import registry  # noqa: E402
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (  # noqa: E402
    BootScript, ErrorKind, InstanceSpec, K3sAccess, Location, ProviderError, ResourceRequest, Status,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers import digitalocean as adapter_module  # noqa
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.digitalocean import (  # noqa: E402
    DigitalOceanProvider, catalog,
)
from ansible_collections.gpuprov.cloud.tests.fakes.digitalocean_api import (  # noqa: E402
    DigitalOceanApiFake, Reply, public_key,
)

KEY = public_key("me@laptop", b"unit")
CIDR = "203.0.113.9/32"


@pytest.fixture
def fake(tmp_path):
    made = DigitalOceanApiFake(str(tmp_path))
    yield made
    made.stop()


def make(fake, journal_id="journal-1", **options):
    return DigitalOceanProvider(dict({"api_url": fake.api_url, "api_key": fake.token, "ssh_port": fake.ssh_port},
                                     **options), journal_id=journal_id)


def spec(vm="vm1", **kw):
    return InstanceSpec(**dict(dict(vm_name=vm, ssh_public_key=KEY, allowed_cidrs=[CIDR]), **kw))


def offer_of(provider, gpu="RTX4000ADA", region=None, count=1):
    return next(o for o in provider.plan(ResourceRequest(vm_name="vm1", gpu=gpu, gpu_count=count))
                if o.available and (region is None or o.region == region))


def launch(fake, provider, vm="vm1", **kw):
    offer = offer_of(provider, **kw)
    prepared = provider.prepare(offer, spec(vm))
    return offer, prepared, provider.create(offer, prepared, spec(vm))


# -- catalog -------------------------------------------------------------------------------

@pytest.mark.parametrize("size,expected", [
    ({"slug": "gpu-h100x1-80gb"}, ("H100", 1, "nvidia")),
    ({"slug": "gpu-h100x8-640gb", "gpu_info": {"count": 8, "model": "nvidia_h100"}}, ("H100", 8, "nvidia")),
    ({"slug": "gpu-h200x8-1128gb"}, ("H200", 8, "nvidia")),
    ({"slug": "gpu-4000adax1-20gb"}, ("RTX4000ADA", 1, "nvidia")),
    ({"slug": "gpu-6000adax1-48gb"}, ("RTX6000ADA", 1, "nvidia")),
    ({"slug": "gpu-l40sx1-48gb"}, ("L40S", 1, "nvidia")),
    ({"slug": "gpu-mi300x1-192gb"}, ("MI300X", 1, "amd")),
    ({"slug": "gpu-mi325x8-2048gb"}, ("MI325X", 8, "amd")),
    ({"slug": "gpu-newx2-100gb", "gpu_info": {"count": 2, "model": "nvidia_a10"}}, ("A10", 2, "nvidia")),
    ({"slug": "gpu-mi355x1-288gb-spot"}, (None, 0, None)),   # no canonical name yet
    ({"slug": "s-2vcpu-4gb"}, (None, 0, None)),
])
def test_sizes_map_to_canonical_gpus(size, expected):
    assert catalog.gpu_of(size) == expected


@pytest.mark.parametrize("value", ["0f3c9e2a7b", "Journal_One:ünïcode", "x" * 300, "a-b-c"])
def test_tag_values_round_trip_within_digitalocean_tag_rules(value):
    tag = catalog.journal_tag(value)
    assert len(tag) <= 255 and all(ch.isalnum() or ch in "_-:" for ch in tag)
    if len(value) < 200:
        assert catalog.decode_tag_value(tag.split(":", 1)[1]) == value


def test_fingerprint_is_md5_of_the_blob_like_digitalocean(fake):
    provider = make(fake)
    provider.prepare(offer_of(provider), spec())
    [key] = fake.ssh_keys.values()
    assert key["fingerprint"] == catalog.fingerprint(KEY)


# -- plan ----------------------------------------------------------------------------------

def test_offers_are_priced_per_size_and_region_cheapest_first(fake):
    offers = make(fake).plan(ResourceRequest(vm_name="vm1", gpu="H100"))
    assert [(o.instance_type, o.region, o.price_per_hour, o.gpu_count, o.available) for o in offers] == [
        ("gpu-h100x1-80gb", "atl1", 3.39, 1, True), ("gpu-h100x1-80gb", "nyc2", 3.39, 1, True),
        ("gpu-h100x1-80gb", "tor1", 3.39, 1, True), ("gpu-h100x8-640gb", "nyc2", 23.92, 8, True),
        ("gpu-h100x8-640gb", "tor1", 23.92, 8, True)]
    assert offers[0].gpu == "H100" and offers[0].detail["image"] == "gpu-h100x1-base"
    assert offers[-1].detail["image"] == "gpu-h100x8-base"


def test_count_picks_the_sizes_that_hold_it(fake):
    offers = make(fake).plan(ResourceRequest(vm_name="vm1", gpu="MI300X", gpu_count=8))
    assert [(o.instance_type, o.region, o.detail["image"]) for o in offers] == [
        ("gpu-mi300x8-1536gb", "atl1", "gpu-amd-base")]


def test_a_size_listed_in_no_region_is_unavailable_saying_so(fake):
    offers = make(fake).plan(ResourceRequest(vm_name="vm1", gpu="H200", gpu_count=8))
    assert offers and not any(o.available for o in offers)
    assert offers[0].unavailable_reason == "digitalocean lists gpu-h200x8-1128gb as creatable in no region"


def test_an_asked_region_the_size_does_not_list_is_unavailable(fake):
    offers = make(fake, regions=["ams3", "tor1"]).plan(ResourceRequest(vm_name="vm1", gpu="RTX4000ADA"))
    assert [(o.region, o.available) for o in offers] == [("tor1", True), ("ams3", False)]
    assert offers[1].unavailable_reason == ("digitalocean lists gpu-4000adax1-20gb as creatable in tor1, nyc2, "
                                            "atl1, not ams3")


def test_a_size_marked_unavailable_is_unavailable(fake):
    fake.sizes[3]["available"] = False
    offers = make(fake).plan(ResourceRequest(vm_name="vm1", gpu="RTX4000ADA"))
    assert not any(o.available for o in offers)
    assert offers[0].unavailable_reason == "digitalocean lists gpu-4000adax1-20gb as unavailable for new droplets"


def test_spot_sizes_are_left_out_and_spot_asks_are_invalid(fake):
    with pytest.raises(ProviderError) as info:
        make(fake).plan(ResourceRequest(vm_name="vm1", gpu="B300"))
    assert info.value.kind == ErrorKind.INVALID_REQUEST and "no size with B300" in info.value.msg
    with pytest.raises(ProviderError) as info:
        make(fake).plan(ResourceRequest(vm_name="vm1", gpu="H100", spot=True))
    assert info.value.kind == ErrorKind.INVALID_REQUEST


@pytest.mark.parametrize("gpu,count,text", [("A100", 1, "no size with A100"), ("H100", 16, "at most 8 GPUs, 16")])
def test_asks_no_size_can_meet_are_invalid(fake, gpu, count, text):
    with pytest.raises(ProviderError) as info:
        make(fake).plan(ResourceRequest(vm_name="vm1", gpu=gpu, gpu_count=count))
    assert info.value.kind == ErrorKind.INVALID_REQUEST and text in info.value.msg


def test_no_gpu_offers_the_cpu_sizes_only(fake):
    offers = make(fake, cpu_sizes=["s-2vcpu-4gb"], regions=["fra1"]).plan(ResourceRequest(vm_name="vm1", gpu=None))
    assert [(o.instance_type, o.region, o.gpu, o.detail["image"]) for o in offers] == [
        ("s-2vcpu-4gb", "fra1", None, "ubuntu-24-04-x64")]


def test_listings_follow_links_pages_next(fake, monkeypatch):
    monkeypatch.setattr(adapter_module, "PER_PAGE", 2)
    offers = make(fake).plan(ResourceRequest(vm_name="vm1", gpu="MI300X"))
    assert {o.instance_type for o in offers} == {"gpu-mi300x1-192gb", "gpu-mi300x8-1536gb"}
    pages = fake.calls_of("sizes.list")
    assert len(pages) == 7 and [c[3].get("page", ["1"])[0] for c in pages] == ["1", "2", "3", "4", "5", "6", "7"]


# -- prepare -------------------------------------------------------------------------------

def test_prepare_registers_the_key_and_a_tag_attached_firewall(fake):
    provider = make(fake, k3s_direct=True)
    prepared = provider.prepare(offer_of(provider), spec())
    [key] = fake.ssh_keys.values()
    assert key["name"] == catalog.key_name("vm1", KEY) and prepared["ssh_key_id"] == key["id"]
    [firewall] = fake.firewalls.values()
    assert firewall["name"] == catalog.firewall_name("vm1", "journal-1") == prepared["firewall_name"]
    assert firewall["tags"] == [prepared["firewall_tag"]] == ["gpuprov-firewall:" + firewall["name"]]
    assert sorted(int(r["ports"]) for r in firewall["inbound_rules"]) == sorted({22, fake.ssh_port, 6443, 80, 443})
    assert all(r["sources"] == {"addresses": [CIDR]} for r in firewall["inbound_rules"])
    assert {(r["protocol"], r["ports"]) for r in firewall["outbound_rules"]} == {("tcp", "1-65535"), ("udp", "1-65535")}
    assert provider.prepare(offer_of(provider), spec()) == prepared


@pytest.mark.parametrize("read_back", ["0", "all"])
def test_all_ports_read_back_in_another_spelling_is_the_same_firewall(fake, read_back):
    # The firewall schema spells "all ports" "0"; a rule read back so is not a change to PUT.
    provider = make(fake)
    prepared = provider.prepare(offer_of(provider), spec())
    [firewall] = fake.firewalls.values()
    for rule in firewall["outbound_rules"]:
        rule["ports"] = read_back
    assert provider.prepare(offer_of(provider), spec()) == prepared
    assert fake.calls_of("firewalls.update") == []


def test_an_existing_key_is_reused_whatever_its_name(fake):
    fake.ssh_keys[7] = {"id": 7, "name": "laptop", "public_key": KEY, "fingerprint": catalog.fingerprint(KEY)}
    provider = make(fake)
    assert provider.prepare(offer_of(provider), spec())["ssh_key_id"] == 7
    assert len(fake.ssh_keys) == 1 and not fake.calls_of("ssh-keys.create")


def test_a_key_registered_concurrently_is_found_again(fake):
    """The first listing predates a concurrent registration: the POST is refused as a duplicate
    and a second listing finds the key."""
    fake.ssh_keys[9] = {"id": 9, "name": "other", "public_key": KEY, "fingerprint": catalog.fingerprint(KEY)}
    fake.fail_next("ssh-keys.list", Reply(200, {"ssh_keys": [], "links": {}, "meta": {"total": 0}}))
    provider = make(fake)
    assert provider.prepare(offer_of(provider), spec())["ssh_key_id"] == 9
    assert len(fake.calls_of("ssh-keys.create")) == 1 and len(fake.ssh_keys) == 1


def test_changed_cidrs_update_the_firewall_keeping_its_droplets(fake):
    provider = make(fake)
    _offer, prepared, droplet = launch(fake, provider)
    [firewall] = fake.firewalls.values()
    firewall["droplet_ids"].append(int(droplet))
    provider.prepare(offer_of(provider), spec(allowed_cidrs=["198.51.100.0/24"]))
    [firewall] = fake.firewalls.values()
    assert firewall["inbound_rules"][0]["sources"] == {"addresses": ["198.51.100.0/24"]}
    assert firewall["droplet_ids"] == [int(droplet)] and len(fake.calls_of("firewalls.update")) == 1


def test_no_allowed_cidrs_is_invalid(fake):
    provider = make(fake)
    with pytest.raises(ProviderError) as info:
        provider.prepare(offer_of(provider), spec(allowed_cidrs=[]))
    assert info.value.kind == ErrorKind.INVALID_REQUEST and "0.0.0.0/0 is never assumed" in info.value.msg


# -- create / observe ----------------------------------------------------------------------

def test_one_create_carries_the_identity_the_image_and_the_boot_script(fake):
    provider = make(fake, journal_id="Journal_1")
    offer = offer_of(provider)
    prepared = provider.prepare(offer, spec())
    droplet = provider.create(offer, prepared, spec(boot_script=BootScript("#!/bin/bash\necho hi", {"A": "b"})))
    [call] = fake.calls_of("droplets.create")
    body = call[4]
    assert body["name"] == "vm1" and body["size"] == "gpu-4000adax1-20gb" and body["region"] == offer.region
    assert body["image"] == "gpu-h100x1-base" and body["ssh_keys"] == [prepared["ssh_key_id"]]
    assert body["tags"] == ["gpuprov-vm-name:vm1", "gpuprov-journal-id:_4aournal_5f1", prepared["firewall_tag"]]
    assert body["user_data"].startswith("#!/bin/bash\nexport A='b'\n")
    assert fake.firewall_of(droplet)[0]["name"] == prepared["firewall_name"]
    [seen] = make(fake, journal_id="Journal_1").observe(offer.location, "vm1")
    assert seen.journal_id == "Journal_1" and seen.status == Status.PENDING and seen.endpoint is None


def test_a_long_journal_id_is_kept_as_its_hash_and_still_recognised(fake):
    journal = "j" * 300
    provider = make(fake, journal_id=journal)
    offer, _prepared, droplet = launch(fake, provider)
    [seen] = make(fake, journal_id=journal).observe(offer.location, "vm1")
    assert seen.instance_id == droplet and seen.journal_id == journal
    assert make(fake, journal_id="other").observe(offer.location, "vm1")[0].journal_id != journal


def test_an_image_option_wins_and_numeric_ids_are_sent_as_numbers(fake):
    provider = make(fake, image="ubuntu-22-04-x64")
    launch(fake, provider)
    assert fake.calls_of("droplets.create")[-1][4]["image"] == "ubuntu-22-04-x64"
    offer = offer_of(provider)
    assert make(fake, image="12345")._image(offer) == 12345


def test_user_data_over_64_kib_is_refused_before_any_call(fake):
    provider = make(fake)
    offer = offer_of(provider)
    prepared = provider.prepare(offer, spec())
    with pytest.raises(ProviderError) as info:
        provider.create(offer, prepared, spec(boot_script=BootScript("x" * (64 * 1024 + 1))))
    assert info.value.kind == ErrorKind.INVALID_REQUEST and not fake.calls_of("droplets.create")


def test_the_endpoint_is_the_public_ipv4_once_active(fake):
    provider = make(fake, ssh_user="ubuntu")
    offer, _prepared, droplet = launch(fake, provider)
    [booting] = provider.observe(offer.location, "vm1")
    assert booting.status == Status.PENDING and booting.endpoint is None and "status new" in booting.reason
    fake.finish(droplet)
    [running] = provider.observe(offer.location, "vm1")
    assert running.usable and running.endpoint.host.startswith("127.0.0.")
    assert (running.endpoint.port, running.endpoint.user) == (fake.ssh_port, "ubuntu")
    assert provider.observe(Location("digitalocean", "ams3"), "vm1") == []


def test_active_without_a_public_address_has_no_endpoint(fake):
    provider = make(fake)
    offer, _prepared, droplet = launch(fake, provider)
    fake.finish(droplet)
    fake.droplets[int(droplet)]["networks"]["v4"] = [n for n in fake.droplets[int(droplet)]["networks"]["v4"]
                                                     if n["type"] == "private"]
    [seen] = provider.observe(offer.location, "vm1")
    assert seen.status == Status.RUNNING and seen.endpoint is None and "no public IPv4" in seen.reason


@pytest.mark.parametrize("raw,status", [("new", Status.PENDING), ("active", Status.RUNNING), ("off", Status.STOPPED),
                                        ("archive", Status.TERMINATING)])
def test_statuses(raw, status):
    assert catalog.STATUSES[raw] == status


@pytest.mark.parametrize("tag_lists_gpus", [False, True])
def test_observe_sees_gpu_droplets_whether_or_not_the_tag_filter_lists_them(fake, tag_lists_gpus):
    # DigitalOcean lists "only non-GPU Droplets by default" and a tag filter takes no type=gpus.
    fake.tag_name_lists_gpus = tag_lists_gpus
    provider = make(fake)
    offer, _prepared, droplet = launch(fake, provider)
    assert [o.instance_id for o in provider.observe(offer.location, "vm1")] == [droplet]
    queries = [c[3] for c in fake.calls_of("droplets.list")[-2:]]
    assert {"tag_name": ["gpuprov-vm-name:vm1"], "per_page": ["200"]} in queries
    assert {"name": ["vm1"], "type": ["gpus"], "per_page": ["200"]} in queries


def test_observe_sees_a_cpu_droplet_by_its_tag_and_keeps_only_the_vms_droplets(fake):
    provider = make(fake)
    offer = next(o for o in provider.plan(ResourceRequest(vm_name="vm1", gpu=None)) if o.available)
    droplet = provider.create(offer, provider.prepare(offer, spec()), spec())
    # a GPU droplet with the VM's name but not its tag is someone else's
    other = _call(fake, "POST", "/droplets", json={"name": "vm1", "size": "gpu-h100x1-80gb", "image": "gpu-h100x1-base",
                                                   "region": "nyc2", "tags": ["mine"]})
    assert other.status_code == 202
    assert [o.instance_id for o in provider.observe(offer.location, "vm1")] == [droplet]


# -- delete / cleanup ----------------------------------------------------------------------

def test_delete_unknown_gone_and_malformed_ids_is_success(fake):
    provider = make(fake)
    offer, _prepared, droplet = launch(fake, provider)
    provider.delete(offer.location, "vm1", ["999999", "not-a-number", droplet])
    provider.delete(offer.location, "vm1", [droplet])
    assert fake.droplets == {} and len(fake.calls_of("droplets.delete")) == 3


def test_cleanup_removes_this_journals_firewall_tag_and_key(fake):
    provider = make(fake)
    offer, _prepared, droplet = launch(fake, provider)
    provider.delete(offer.location, "vm1", [droplet])
    provider.cleanup(offer.location, "vm1")
    assert fake.resources() == set()
    assert "gpuprov-vm-name:vm1" in fake.tags   # identity tags stay: deleting one untags its resources


def test_another_journals_cleanup_leaves_the_first_ones_key_and_firewall(fake):
    first, other = make(fake, journal_id="first"), make(fake, journal_id="second")
    offer, _prepared, _droplet = launch(fake, first)
    made = fake.resources()
    other.prepare(offer, spec())
    other.cleanup(offer.location, "vm1")
    assert fake.resources() == made


def test_keys_of_other_vms_or_users_are_never_removed(fake):
    fake.ssh_keys[5] = {"id": 5, "name": "gpuprov-vm10-abcdefabcdef", "public_key": public_key("x", b"x"),
                        "fingerprint": catalog.fingerprint(public_key("x", b"x"))}
    fake.ssh_keys[6] = {"id": 6, "name": "laptop", "public_key": public_key("y", b"y"),
                        "fingerprint": catalog.fingerprint(public_key("y", b"y"))}
    make(fake).cleanup(Location("digitalocean", "tor1"), "vm1")
    assert set(fake.ssh_keys) == {5, 6}


# -- options and capabilities --------------------------------------------------------------

def test_capabilities_and_typed_options(monkeypatch):
    for name in ("DIGITALOCEAN_TOKEN", "DIGITALOCEAN_ACCESS_TOKEN", "DO_API_KEY", "DO_OAUTH_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DO_API_TOKEN", "from-env")
    provider = registry.get_provider("digitalocean", {"ssh_port": "2222", "k3s_direct": "yes"}, journal_id="j")
    assert provider.options["api_key"] == "from-env" and provider.options["ssh_port"] == 2222
    caps = provider.capabilities()
    assert caps.boot_script and caps.kubernetes and not caps.spot and caps.k3s_access == K3sAccess.DIRECT
    assert provider.secret_options == ("api_key",)
    assert DigitalOceanProvider({"api_token": "t"}).options["api_key"] == "t"
    with pytest.raises(ProviderError) as info:
        DigitalOceanProvider({"token": "t"})
    assert info.value.kind == ErrorKind.INVALID_REQUEST and "api_key (alias api_token)" in info.value.msg


# -- the fake refuses what DigitalOcean refuses ----------------------------------------------

def _call(fake, method, path, token=None, **kw):
    return requests.request(method, fake.api_url + path, headers={"Authorization": "Bearer %s" % (
        token or fake.token)}, timeout=10, **kw)


def test_the_fake_refuses_a_bad_token_with_digitaloceans_body(fake):
    answer = _call(fake, "GET", "/droplets", token="wrong")
    assert answer.status_code == 401 and answer.json()["id"] == "unauthorized"
    assert answer.json()["message"] == "Unable to authenticate you."


def test_the_fake_refuses_unknown_fields_and_bad_tags(fake):
    answer = _call(fake, "POST", "/droplets", json={"name": "a", "size": "s-2vcpu-4gb", "image": "ubuntu-24-04-x64",
                                                    "colour": "red"})
    assert answer.status_code == 422 and "unknown field 'colour'" in answer.json()["message"]
    answer = _call(fake, "POST", "/droplets", json={"name": "a", "size": "s-2vcpu-4gb", "image": "ubuntu-24-04-x64",
                                                    "tags": ["gpuprov-vm-name=a"]})
    assert answer.status_code == 422 and "tag names" in answer.json()["message"]
    answer = _call(fake, "POST", "/tags", json={"name": "bad tag"})
    assert answer.status_code == 400 and "invalid characters" in answer.json()["error"]


def test_the_fake_lists_gpu_droplets_only_by_tag_or_type(fake):
    provider = make(fake)
    _offer, _prepared, droplet = launch(fake, provider)
    assert _call(fake, "GET", "/droplets").json()["droplets"] == []
    assert [d["id"] for d in _call(fake, "GET", "/droplets?type=gpus").json()["droplets"]] == [int(droplet)]
    assert _call(fake, "GET", "/droplets?tag_name=gpuprov-vm-name:vm1").json()["droplets"] == []
    fake.tag_name_lists_gpus = True
    assert [d["id"] for d in _call(fake, "GET", "/droplets?tag_name=gpuprov-vm-name:vm1").json()["droplets"]] == [
        int(droplet)]
    assert _call(fake, "GET", "/droplets?tag_name=x&name=vm1").status_code == 422


def test_the_fake_refuses_a_firewall_naming_a_missing_tag(fake):
    answer = _call(fake, "POST", "/firewalls", json={"name": "fw", "tags": ["nope"], "inbound_rules": [
        {"protocol": "tcp", "ports": "22", "sources": {"addresses": [CIDR]}}]})
    assert answer.status_code == 422 and "not found" in answer.json()["message"]


def test_the_fake_refuses_a_key_twice_and_unknown_key_ids(fake):
    assert _call(fake, "POST", "/account/keys", json={"name": "a", "public_key": KEY}).status_code == 201
    answer = _call(fake, "POST", "/account/keys", json={"name": "b", "public_key": KEY})
    assert answer.status_code == 422 and answer.json()["message"] == "SSH Key is already in use on your account"
    answer = _call(fake, "POST", "/droplets", json={"name": "a", "size": "s-2vcpu-4gb", "image": "ubuntu-24-04-x64",
                                                    "region": "fra1", "ssh_keys": [123]})
    assert answer.status_code == 422 and "invalid key identifiers" in answer.json()["message"]


def test_the_fake_refuses_over_the_droplet_limit(fake):
    fake.droplet_limit = 0
    provider = make(fake)
    with pytest.raises(ProviderError) as info:
        launch(fake, provider)
    assert info.value.kind == ErrorKind.QUOTA and "droplet limit" in info.value.msg
