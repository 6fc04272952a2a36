"""The hyperstack adapter against the Hyperstack API fake: plan mapping (flavors, stock,
pricebook prices, order, InvalidRequest), the environment made, reused and removed only
when empty, key reuse, the create body (security rules, port randomization, labels,
user data), the SSH endpoint, delete and cleanup's reach, and the fake's refusals."""

from __future__ import annotations

import uuid

import pytest

requests = pytest.importorskip("requests")

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (  # noqa: E402
    BootScript, ErrorKind, InstanceSpec, K3sAccess, Location, ProviderError, ResourceRequest, Status,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.hyperstack import (  # noqa: E402
    HyperstackProvider, catalog,
)
from ansible_collections.gpuprov.cloud.tests.fakes.hyperstack_api import HyperstackApiFake  # noqa: E402

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGdwdXByb3YtaHlwZXJzdGFjay11bml0 unit@hyperstack"
OTHER_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG90aGVyLWtleS1vZi1zb21lb25lLWVsc2U other@elsewhere"
JOURNAL = uuid.uuid4().hex
CANADA = Location("hyperstack", "CANADA-1")


@pytest.fixture
def fake(tmp_path):
    made = HyperstackApiFake(str(tmp_path))
    yield made
    made.stop()


def _provider(fake, journal_id=JOURNAL, **extra):
    options = {"api_url": fake.api_url, "api_key": fake.token, "ssh_user": "tester", "ssh_port": fake.ssh_port,
               "allowed_cidrs": ["198.51.100.7/32"]}
    options.update(extra)
    return HyperstackProvider(options, journal_id=journal_id)


def _spec(name="unit-hs", script=True, key=KEY, cidrs=None, ports=None):
    return InstanceSpec(vm_name=name, ssh_public_key=key, allowed_cidrs=cidrs or [], open_ports=ports or [22],
                        boot_script=BootScript("#!/bin/sh\necho hi", {"A": "1"}) if script else None)


def _launch(provider, request, spec):
    offer = provider.plan(request)[0]
    prepared = provider.prepare(offer, spec)
    return offer, prepared, provider.create(offer, prepared, spec)


# -- plan --------------------------------------------------------------------------------

def test_plan_maps_flavors_stock_and_prices(fake):
    offers = _provider(fake).plan(ResourceRequest(vm_name="x", gpu="A100-80GB", gpu_count=1))
    assert [(o.region, o.instance_type, o.gpu_count, o.price_per_hour, o.available) for o in offers] == [
        ("CANADA-1", "n3-A100x1", 1, 1.35, True),
        ("NORWAY-1", "n3-A100x1", 1, 1.35, False),
        ("CANADA-1", "n3-A100x8", 8, 10.8, False)]    # 8 x 1.35 per GPU-hour, out of stock
    assert offers[2].unavailable_reason == "hyperstack lists no stock of n3-A100x8 in CANADA-1"
    assert offers[0].detail["gpu_model"] == "A100-80G-PCIe" and offers[0].detail["price_per_gpu_hour"] == 1.35
    assert all(o.gpu == "A100-80GB" and not o.spot and o.cloud == "hyperstack" for o in offers)


def test_plan_orders_available_then_cheapest_and_honours_regions(fake):
    provider = _provider(fake)
    offers = provider.plan(ResourceRequest(vm_name="x", gpu="H100", gpu_count=1))
    assert [(o.region, o.instance_type, o.available) for o in offers] == [
        ("CANADA-1", "n3-H100x1", True), ("US-1", "n3-H100-SXM5x8", True), ("US-1", "n3-H100x1", False)]
    only_us = provider.plan(ResourceRequest(vm_name="x", gpu="H100", gpu_count=1, regions=["US-1"]))
    assert [o.instance_type for o in only_us] == ["n3-H100-SXM5x8", "n3-H100x1"]
    assert _provider(fake, regions=["NORWAY-1"]).plan(ResourceRequest(vm_name="x", gpu="H100")) == []


def test_plan_gpu_count_above_every_flavor_or_unknown_gpu_is_invalid(fake):
    with pytest.raises(ProviderError) as info:
        _provider(fake).plan(ResourceRequest(vm_name="x", gpu="L40", gpu_count=2))
    assert info.value.kind == ErrorKind.INVALID_REQUEST and "at most 1" in info.value.msg
    with pytest.raises(ProviderError) as info:
        _provider(fake).plan(ResourceRequest(vm_name="x", gpu="MI300X"))
    assert info.value.kind == ErrorKind.INVALID_REQUEST and "no flavor with MI300X" in info.value.msg
    with pytest.raises(ProviderError) as info:
        _provider(fake).plan(ResourceRequest(vm_name="x", gpu="A100-80GB", spot=True))
    assert info.value.kind == ErrorKind.INVALID_REQUEST


def test_plan_a_cpu_ask_takes_cpu_flavors_and_unpriced_is_none(fake):
    offers = _provider(fake).plan(ResourceRequest(vm_name="x", gpu=None, gpu_count=0))
    assert [(o.instance_type, o.gpu, o.gpu_count, o.price_per_hour) for o in offers] == [
        ("n1-cpu-small", None, 0, None)]


def test_plan_a_sold_out_flavor_is_unavailable(fake):
    fake.sell_out("n3-A100x1", "CANADA-1")
    offers = _provider(fake).plan(ResourceRequest(vm_name="x", gpu="A100-80GB"))
    assert not any(o.available for o in offers)


@pytest.mark.parametrize("model,canonical", [
    ("A100-80G-PCIe", "A100-80GB"), ("A100-80G-PCIe-NVLink", "A100-80GB"), ("H100-80G-PCIe", "H100"),
    ("H100-80G-PCIe-NVLink", "H100"), ("H100-80G-SXM5", "H100"), ("H200-141G-SXM5", "H200"), ("L40", "L40"),
    ("RTX-A6000", "A6000"), ("RTX-A4000", "A4000"), ("RTX-A5000", "A5000"), ("RTX-6000-ADA", "RTX6000ADA"),
    ("A40", "A40"), ("B200", "B200"), ("GH200", "GH200"), ("", None), ("Quantum-42", None)])
def test_gpu_models_map_to_canonical_names(model, canonical):
    assert catalog.gpu_of(model) == canonical


# -- prepare: environment and key --------------------------------------------------------------

def test_prepare_makes_the_environment_and_key_once(fake):
    provider = _provider(fake)
    offer = provider.plan(ResourceRequest(vm_name="x", gpu="A100-80GB"))[0]
    first = provider.prepare(offer, _spec())
    second = provider.prepare(offer, _spec())
    assert first == second
    assert first["environment_name"] == "gpuprov-CANADA-1" and first["key_name"] == catalog.key_name("unit-hs", KEY)
    assert first["source_ranges"] == ["198.51.100.7/32"] and first["ports"] == [22, fake.ssh_port]
    assert fake.resources() == {"environment:gpuprov-CANADA-1",
                                "keypair:gpuprov-CANADA-1/%s" % catalog.key_name("unit-hs", KEY)}
    assert len(fake.calls_of("environments.create")) == 1 and len(fake.calls_of("keypairs.import")) == 1


def test_prepare_reuses_a_key_with_the_same_material_in_the_environment(fake):
    provider = _provider(fake)
    offer = provider.plan(ResourceRequest(vm_name="x", gpu="A100-80GB"))[0]
    provider.prepare(offer, _spec(name="first"))
    again = provider.prepare(offer, _spec(name="second", key=KEY.replace("unit@hyperstack", "another comment")))
    assert again["key_name"] == catalog.key_name("first", KEY)


def test_prepare_whose_environment_goes_meanwhile_is_transient_and_prepares_again(fake):
    """Another VM's cleanup may remove the (then empty) environment between the listing and the
    key import: that prepare is retried (Transient), and the retry makes the environment again."""
    from ansible_collections.gpuprov.cloud.tests.fakes.hyperstack_api import error
    provider = _provider(fake)
    offer = provider.plan(ResourceRequest(vm_name="x", gpu="A100-80GB"))[0]
    fake.fail_next("keypairs.import", error(404, "not_found", "Environment gpuprov-CANADA-1 not found"))
    with pytest.raises(ProviderError) as info:
        provider.prepare(offer, _spec())
    assert info.value.kind == ErrorKind.TRANSIENT and "prepare again" in info.value.msg
    for env_id in list(fake.environments):   # it went
        requests.delete(fake.api_url + "/core/environments/%d" % env_id, headers={"api_key": fake.token})
    prepared = provider.prepare(offer, _spec())
    assert prepared["environment_name"] == "gpuprov-CANADA-1" and len(fake.keypairs) == 1


def test_prepare_refuses_without_cidrs_and_never_opens_the_world(fake):
    provider = _provider(fake, allowed_cidrs=None)
    offer = provider.plan(ResourceRequest(vm_name="x", gpu="A100-80GB"))[0]
    with pytest.raises(ProviderError) as info:
        provider.prepare(offer, _spec())
    assert info.value.kind == ErrorKind.INVALID_REQUEST and "allowed_cidrs" in info.value.msg


def test_prepare_refuses_an_environment_of_that_name_in_another_region(fake):
    requests.post(fake.api_url + "/core/environments", json={"name": "gpuprov-CANADA-1", "region": "US-1"},
                  headers={"api_key": fake.token})
    provider = _provider(fake)
    offer = provider.plan(ResourceRequest(vm_name="x", gpu="A100-80GB"))[0]
    with pytest.raises(ProviderError) as info:
        provider.prepare(offer, _spec())
    assert info.value.kind == ErrorKind.INVALID_REQUEST and "US-1" in info.value.msg


# -- create ---------------------------------------------------------------------------------

def test_create_sends_one_call_with_rules_labels_and_user_data(fake):
    provider = _provider(fake, k3s_direct=True)
    _offer, _prepared, instance_id = _launch(provider, ResourceRequest(vm_name="x", gpu="A100-80GB"),
                                             _spec(cidrs=["203.0.113.0/24", "2001:db8::/32"], ports=[22, 8080]))
    (_key, _method, _path, _query, body), = fake.calls_of("vms.create")
    assert body["name"] == "unit-hs" and body["count"] == 1 and body["flavor_name"] == "n3-A100x1"
    assert body["environment_name"] == "gpuprov-CANADA-1" and body["assign_floating_ip"] is True
    assert body["enable_port_randomization"] is False
    assert body["labels"] == ["gpuprov-journal-id=%s" % JOURNAL, "gpuprov-vm-name=unit-hs"]
    assert body["user_data"].startswith("#!/bin/sh\nexport A='1'\n")
    rules = {(r["remote_ip_prefix"], r["ethertype"], r["port_range_min"]) for r in body["security_rules"]}
    assert {r[0] for r in rules} == {"203.0.113.0/24", "2001:db8::/32"}
    assert {r[2] for r in rules} == {22, 80, 443, 6443, 8080, fake.ssh_port}
    assert ("2001:db8::/32", "IPv6", 22) in rules and all(r["direction"] == "ingress" for r in body["security_rules"])
    assert instance_id == str(fake.live()[0]["id"])


def test_a_long_vm_name_is_shortened_and_found_by_its_label(fake):
    long_name = "a" * 40 + "-" + "b" * 20
    provider = _provider(fake)
    _offer, _prepared, instance_id = _launch(provider, ResourceRequest(vm_name="x", gpu="A100-80GB"),
                                             _spec(name=long_name))
    assert len(fake.live()[0]["name"]) <= 50
    assert [o.instance_id for o in provider.observe(CANADA, long_name)] == [instance_id]


# -- observe: status and endpoint -------------------------------------------------------------

def test_observe_pending_then_running_with_the_floating_ip(fake):
    provider = _provider(fake)
    _offer, _prepared, instance_id = _launch(provider, ResourceRequest(vm_name="x", gpu="A100-80GB"), _spec())
    first, = provider.observe(CANADA, "unit-hs")
    assert first.status == Status.PENDING and first.endpoint is None and first.journal_id == JOURNAL
    fake.finish(instance_id)
    seen, = provider.observe(CANADA, "unit-hs")
    assert seen.status == Status.RUNNING and seen.usable
    assert (seen.endpoint.port, seen.endpoint.user) == (fake.ssh_port, "tester")
    assert seen.endpoint.host == fake.live()[0]["floating_ip"]


def _observed(fake, **fields):
    record = dict({"id": 7, "name": "vm1", "status": "ACTIVE", "vm_state": "active", "floating_ip": "203.0.113.9",
                   "floating_ip_status": "ATTACHED", "port_randomization": False, "labels": []}, **fields)
    return _provider(fake)._observed(record, CANADA)


def test_endpoint_needs_active_attached_ip_and_no_port_randomization(fake):
    assert _observed(fake).endpoint.host == "203.0.113.9"
    assert _observed(fake, floating_ip_status="ATTACHING").endpoint is None
    assert _observed(fake, floating_ip=None).endpoint is None
    assert _observed(fake, vm_state="building").endpoint is None
    randomized = _observed(fake, port_randomization=True)
    assert randomized.endpoint is None and "port randomization" in randomized.reason
    assert _observed(fake, status="ERROR").status == Status.FAILED
    assert _observed(fake, status="SHUTOFF").status == Status.STOPPED
    assert _observed(fake, status="DELETING").status == Status.TERMINATING
    assert _observed(fake, status="SOMETHING_NEW").status == Status.PENDING


def test_port_randomization_on_hides_the_ssh_port(fake):
    """Made with Hyperstack's default (randomization on), the VM's SSH is on a port the API
    does not report: observe gives it no endpoint rather than a wrong one."""
    provider = _provider(fake)
    offer, prepared, _id = _launch(provider, ResourceRequest(vm_name="x", gpu="A100-80GB"), _spec())
    requests.post(fake.api_url + "/core/virtual-machines", headers={"api_key": fake.token}, json={
        "name": "unit-hs", "environment_name": prepared["environment_name"], "image_name": provider.options[
            "image_name"], "flavor_name": offer.instance_type, "key_name": prepared["key_name"], "count": 1,
        "assign_floating_ip": True})
    for record in fake.live():
        fake.finish(record["id"])
    found = sorted(provider.observe(CANADA, "unit-hs"), key=lambda o: o.endpoint is None)
    assert [o.endpoint is not None for o in found] == [True, False]
    assert found[1].journal_id is None and "port randomization" in found[1].reason


@pytest.mark.parametrize("cap", [100, 7])
def test_observe_reads_every_page_of_a_busy_environment(fake, cap):
    """Listings page with ``page``/``pageSize`` (a ``page_size`` query is ignored and the
    server's default page of 20 comes back); a server cap below the asked size still pages."""
    fake.max_page_size, fake.quota = cap, 50
    provider = _provider(fake)
    offer = provider.plan(ResourceRequest(vm_name="x", gpu="A100-80GB"))[0]
    prepared = provider.prepare(offer, _spec())
    for n in range(25):   # someone else's VMs, listed before ours
        requests.post(fake.api_url + "/core/virtual-machines", headers={"api_key": fake.token}, json={
            "name": "other-%d" % n, "environment_name": prepared["environment_name"],
            "image_name": provider.options["image_name"], "flavor_name": "n1-cpu-small",
            "key_name": prepared["key_name"], "count": 1})
    instance_id = provider.create(offer, prepared, _spec())
    assert [o.instance_id for o in provider.observe(CANADA, "unit-hs")] == [instance_id]
    assert {query["pageSize"][0] for _key, _method, _path, query, _body in fake.calls_of("vms.list")} == {"100"}


def test_pages_stop_at_a_short_capped_or_unpaged_page():
    from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.hyperstack import Pages
    pages = Pages(size=4)
    query = pages.start({"environment": "e"})
    assert query == {"environment": "e", "page": 1, "pageSize": 4}
    assert pages.follow({"page_size": 4}, "u", query, [1, 2, 3, 4], 4) == ("u", dict(query, page=2))
    assert pages.follow({"page_size": 4}, "u", query, [1, 2, 3], 3) is None          # short: the last
    assert pages.follow({"page_size": 2}, "u", query, [1, 2], 2) == ("u", dict(query, page=2))   # capped at 2
    assert pages.follow({}, "u", query, [1, 2, 3, 4, 5], 5) is None                  # not paged: everything
    assert pages.follow({}, "u", query, [], 0) is None


# -- delete / cleanup ---------------------------------------------------------------------------

def test_delete_unknown_deleting_and_still_creating(fake):
    provider = _provider(fake)
    provider.delete(CANADA, "unit-hs", ["424242"])   # unknown: done
    _offer, _prepared, instance_id = _launch(provider, ResourceRequest(vm_name="x", gpu="A100-80GB"), _spec())
    fake.refuse_delete_while_creating = True
    with pytest.raises(ProviderError) as info:
        provider.delete(CANADA, "unit-hs", [instance_id])
    assert info.value.kind == ErrorKind.TRANSIENT and "being created" in info.value.msg
    fake.finish(instance_id)
    provider.delete(CANADA, "unit-hs", [instance_id])
    provider.delete(CANADA, "unit-hs", [instance_id])   # already deleting: no second DELETE
    assert len(fake.calls_of("vms.delete")) == 2


def test_cleanup_removes_key_and_the_empty_environment(fake):
    provider = _provider(fake)
    _offer, _prepared, instance_id = _launch(provider, ResourceRequest(vm_name="x", gpu="A100-80GB"), _spec())
    with pytest.raises(ProviderError) as info:
        provider.cleanup(CANADA, "unit-hs")          # its own VM still holds the key
    assert info.value.kind == ErrorKind.TRANSIENT
    provider.delete(CANADA, "unit-hs", [instance_id])
    fake.finish(instance_id)
    provider.cleanup(CANADA, "unit-hs")
    assert fake.resources() == set()
    provider.cleanup(CANADA, "unit-hs")   # nothing left: still success


def test_cleanup_keeps_an_environment_that_holds_anything_else(fake):
    provider = _provider(fake)
    offer = provider.plan(ResourceRequest(vm_name="x", gpu="A100-80GB"))[0]
    provider.prepare(offer, _spec(name="mine"))
    provider.prepare(offer, _spec(name="theirs", key=OTHER_KEY))
    provider.cleanup(CANADA, "mine")
    assert fake.resources() == {"environment:gpuprov-CANADA-1",
                                "keypair:gpuprov-CANADA-1/%s" % catalog.key_name("theirs", OTHER_KEY)}
    provider.cleanup(CANADA, "theirs")
    assert fake.resources() == set()
    provider.prepare(offer, _spec(name="mine"))
    fake.add_volume("gpuprov-CANADA-1")
    provider.cleanup(CANADA, "mine")
    assert fake.resources() == {"environment:gpuprov-CANADA-1", "volume:someone-elses-data"}


def test_cleanup_never_tries_to_delete_an_environment_holding_a_cluster(fake):
    provider = _provider(fake)
    offer = provider.plan(ResourceRequest(vm_name="x", gpu="A100-80GB"))[0]
    provider.prepare(offer, _spec(name="mine"))
    fake.add_cluster("gpuprov-CANADA-1")
    provider.cleanup(CANADA, "mine")
    assert fake.resources() == {"environment:gpuprov-CANADA-1", "cluster:someone-elses-k8s"}
    assert fake.calls_of("environments.delete") == []     # not even tried
    listed = fake.calls_of("clusters.list")
    assert listed and listed[-1][3]["environment"] == ["gpuprov-CANADA-1"]


def test_cleanup_keeps_the_environment_when_a_listing_is_forbidden(fake):
    from ansible_collections.gpuprov.cloud.tests.fakes.hyperstack_api import error
    provider = _provider(fake)
    offer = provider.plan(ResourceRequest(vm_name="x", gpu="A100-80GB"))[0]
    provider.prepare(offer, _spec(name="mine"))
    fake.fail_next("clusters.list", error(403, "forbidden", "You do not have permission to list clusters"))
    provider.cleanup(CANADA, "mine")
    assert fake.resources() == {"environment:gpuprov-CANADA-1"} and fake.calls_of("environments.delete") == []
    provider.cleanup(CANADA, "mine")
    assert fake.resources() == set()


def test_cleanup_leaves_a_key_another_journals_vm_uses(fake):
    other = _provider(fake, journal_id="other-journal")
    _offer, _prepared, instance_id = _launch(other, ResourceRequest(vm_name="x", gpu="A100-80GB"), _spec())
    _provider(fake).cleanup(CANADA, "unit-hs")
    assert "keypair:gpuprov-CANADA-1/%s" % catalog.key_name("unit-hs", KEY) in fake.resources()
    assert [o.instance_id for o in _provider(fake).observe(CANADA, "unit-hs")] == [instance_id]


# -- capabilities and options --------------------------------------------------------------------

def test_capabilities_without_a_key():
    caps = HyperstackProvider({}).capabilities()
    assert caps.kubernetes and caps.boot_script and not caps.spot and caps.k3s_access == K3sAccess.SSH_TUNNEL
    assert HyperstackProvider({"k3s_direct": True}).capabilities().k3s_access == K3sAccess.DIRECT


def test_options_are_typed_and_unknown_ones_refused():
    provider = HyperstackProvider({"api_key": "k"})
    assert provider.options["ssh_user"] == "ubuntu" and provider.options["ssh_port"] == 22
    assert provider.options["api_url"] == "https://infrahub-api.nexgencloud.com/v1"
    assert "api_key" in HyperstackProvider.secret_options
    with pytest.raises(ProviderError) as info:
        HyperstackProvider({"flavor": "x"})
    assert info.value.kind == ErrorKind.INVALID_REQUEST and "flavor" in info.value.msg


def test_the_key_falls_back_to_the_environment(monkeypatch):
    monkeypatch.setenv("HYPERSTACK_API_KEY", "from-env")
    assert HyperstackProvider({}).options["api_key"] == "from-env"
