"""The gcp adapter driven through the real google-cloud-compute REST client against
the HTTP fake in tests/fakes/gcp_compute.py."""

from __future__ import annotations

import json
import re

import pytest

pytest.importorskip("google.cloud.compute_v1")
pytest.importorskip("pytest_httpserver")

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers import gcp as gcp_mod  # noqa: E402
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.gcp import catalog as gcp_catalog  # noqa: E402
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (  # noqa: E402
    JOURNAL_ID_TAG, SDK_READ_RETRY_S, VM_NAME_TAG, BlockScope, BootScript, ErrorKind, InstanceSpec, K3sAccess, Location, Offer,
    ProviderError, ResourceRequest, Status,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.gcp import GcpProvider  # noqa: E402
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.registry import get_provider  # noqa: E402
from ansible_collections.gpuprov.cloud.plugins.module_utils.requirements import install_command  # noqa: E402
from ansible_collections.gpuprov.cloud.tests.fakes.gcp_compute import GcpComputeFake  # noqa: E402

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGdwdXByb3Y test@controller"
CIDR = "198.51.100.7/32"


@pytest.fixture
def fake():
    made = GcpComputeFake()
    yield made
    made.stop()


def make(fake, journal_id=None, **options):
    # SDK read retries off: one injected fault = one classified error, no library sleeps.
    opts = {"project": fake.project, "api_endpoint": fake.url, "read_retry_s": 0}
    opts.update(options)
    return GcpProvider(opts, journal_id=journal_id)


@pytest.fixture
def provider(fake):
    return make(fake)


def spec(name="train1", **kw):
    kw.setdefault("allowed_cidrs", [CIDR])
    return InstanceSpec(vm_name=name, ssh_public_key=KEY, **kw)


def offer_for(provider, gpu="L4", count=1, spot=False, zone=None, **kw):
    offers = provider.plan(ResourceRequest(vm_name="train1", gpu=gpu, gpu_count=count, spot=spot, **kw))
    return next(o for o in offers if zone is None or o.zone == zone)


def launched(fake, provider, name="train1", gpu="L4", count=1, spot=False, zone=None, **spec_kw):
    offer = offer_for(provider, gpu, count, spot, zone)
    s = spec(name, **spec_kw)
    prepared = provider.prepare(offer, s)
    iid = provider.create(offer, prepared, s)
    return offer, prepared, s, iid


def insert_body(fake):
    bodies = [c["body"] for c in fake.calls_of("instances.insert")]
    assert bodies, "no instances.insert reached the fake"
    return bodies[-1]


def metadata(body):
    return {i["key"]: i["value"] for i in body["metadata"]["items"]}


# -- construction and capabilities ------------------------------------------------------------


def test_registry_builds_the_adapter(fake):
    adapter = get_provider("gcp", {"project": fake.project, "api_endpoint": fake.url})
    assert isinstance(adapter, GcpProvider) and adapter.name == "gcp"


@pytest.mark.parametrize("options", [{}, {"project": ""}, {"project": "  "}])
def test_project_is_required(options, monkeypatch):
    for name in ("GCP_PROJECT", "GCE_PROJECT"):
        monkeypatch.delenv(name, raising=False)
    adapter = GcpProvider(dict(options, api_endpoint="http://127.0.0.1:9"))   # built: capabilities need none
    assert adapter.capabilities().boot_script
    for refused in (adapter.check_credentials, lambda: adapter.plan(ResourceRequest(vm_name="x", gpu="L4"))):
        with pytest.raises(ProviderError) as info:   # before any call (nothing listens on port 9)
            refused()
        assert info.value.kind == ErrorKind.CREDENTIALS and info.value.block_scope == "cloud"
        assert info.value.msg == "gcp: no project: set cloud_options.gcp.project (or one of GCP_PROJECT, GCE_PROJECT)"


def test_an_option_of_a_wrong_type_names_the_field():
    with pytest.raises(ProviderError) as info:
        GcpProvider({"project": "p", "disk_size_gb": "big"})
    assert info.value.kind == ErrorKind.INVALID_REQUEST
    assert info.value.msg.startswith("cloud_options.gcp.disk_size_gb:")


@pytest.mark.parametrize("variable", ["GCP_PROJECT", "GCE_PROJECT"])
def test_project_from_the_environment_awx_sets(fake, monkeypatch, variable):
    for name in ("GCP_PROJECT", "GCE_PROJECT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(variable, fake.project)
    adapter = GcpProvider({"api_endpoint": fake.url, "read_retry_s": 0})
    assert adapter.project == fake.project
    assert adapter.plan(ResourceRequest(vm_name="t", gpu="L4"))


@pytest.mark.parametrize("variable", ["GCP_SERVICE_ACCOUNT_FILE", "GCE_CREDENTIALS_FILE_PATH"])
def test_credentials_file_from_the_environment_awx_sets(fake, monkeypatch, tmp_path, variable):
    for name in ("GCP_SERVICE_ACCOUNT_FILE", "GCE_CREDENTIALS_FILE_PATH"):
        monkeypatch.delenv(name, raising=False)
    key = tmp_path / "sa.json"
    monkeypatch.setenv(variable, str(key))
    adapter = make(fake)
    assert adapter.options["credentials_file"] == str(key)
    assert adapter.secret_options == ("credentials_file",)
    with pytest.raises(ProviderError) as info:   # the key it names is used (and is missing here)
        adapter.plan(ResourceRequest(vm_name="x", gpu="L4"))
    assert info.value.kind == ErrorKind.CREDENTIALS and "credentials_file" in info.value.msg


def test_missing_sdk_is_a_clear_invalid_request(monkeypatch):
    monkeypatch.setattr(gcp_mod, "HAS_GCP", False)
    with pytest.raises(ProviderError) as info:
        GcpProvider({"project": "p"})
    assert info.value.kind == ErrorKind.INVALID_REQUEST
    assert "google-cloud-compute" in info.value.msg and install_command("google-cloud-compute", "gcp") in info.value.msg


def test_bad_boot_script_via(fake):
    with pytest.raises(ProviderError) as info:
        make(fake, boot_script_via="floppy")
    assert info.value.msg.startswith("cloud_options.gcp.boot_script_via:")
    assert "cloud-init, startup-script" in info.value.msg


def test_unreadable_credentials_file_is_credentials(fake, tmp_path):
    adapter = make(fake, credentials_file=str(tmp_path / "missing.json"))
    with pytest.raises(ProviderError) as info:
        adapter.plan(ResourceRequest(vm_name="x", gpu="L4"))
    assert info.value.kind == ErrorKind.CREDENTIALS and "credentials_file" in info.value.msg
    assert fake.calls == []


def test_missing_application_default_credentials_is_credentials(monkeypatch, tmp_path):
    # ADC reads GOOGLE_APPLICATION_CREDENTIALS first; a missing file fails before any network use.
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "adc.json"))
    adapter = GcpProvider({"project": "p"})
    assert adapter.capabilities().boot_script  # capabilities need no credentials
    with pytest.raises(ProviderError) as info:
        adapter.plan(ResourceRequest(vm_name="x", gpu="L4"))
    assert info.value.kind == ErrorKind.CREDENTIALS
    assert "cloud_options.gcp.credentials_file" in info.value.msg and "GOOGLE_APPLICATION_CREDENTIALS" in info.value.msg


def test_capabilities(fake):
    caps = make(fake).capabilities()
    assert (caps.kubernetes, caps.boot_script, caps.spot) == (True, True, True)
    assert caps.k3s_access == K3sAccess.DIRECT
    assert make(fake, k3s_direct=False).capabilities().k3s_access == K3sAccess.SSH_TUNNEL
    assert make(fake, k3s_direct="false").capabilities().k3s_access == K3sAccess.SSH_TUNNEL


# -- plan --------------------------------------------------------------------------------------


def test_plan_t4_needs_machine_type_and_accelerator_in_the_zone(fake, provider):
    offers = provider.plan(ResourceRequest(vm_name="train1", gpu="T4"))
    # default region order, zones sorted within a region; asia-east1-a lists no T4
    assert [o.zone for o in offers] == ["us-central1-a", "us-central1-b", "us-central1-c", "us-west1-b",
                                        "europe-west4-a"]
    first = offers[0]
    assert (first.cloud, first.region, first.instance_type, first.gpu, first.gpu_count) == (
        "gcp", "us-central1", "n1-standard-4", "T4", 1)
    assert first.price_per_hour == pytest.approx(0.54) and first.spot is False
    assert first.detail["machine_type"] == "n1-standard-4"
    assert first.detail["accelerator"] == "nvidia-tesla-t4" and first.detail["attached"] is True
    assert json.loads(json.dumps([o.to_dict() for o in offers]))[0]["detail"] == first.detail
    assert Offer.from_dict(first.to_dict()) == first


def test_plan_creates_nothing(fake, provider):
    provider.plan(ResourceRequest(vm_name="train1", gpu="A100", gpu_count=3))
    assert fake.instances == {} and fake.firewalls == {}
    assert {c["method"] for c in fake.calls} == {"GET"}
    assert fake.calls_of("machineTypes.aggregatedList")[0]["args"]["filter"] == 'name eq "a2-highgpu-4g"'


def test_plan_rounds_up_to_the_next_size(provider):
    offers = provider.plan(ResourceRequest(vm_name="train1", gpu="A100", gpu_count=3))
    assert {(o.instance_type, o.gpu_count) for o in offers} == {("a2-highgpu-4g", 4)}
    assert [o.zone for o in offers] == ["us-central1-a", "us-central1-c"]
    assert offers[0].detail["attached"] is False


def test_plan_h100_on_demand_and_spot(provider):
    on_demand = provider.plan(ResourceRequest(vm_name="t", gpu="H100", gpu_count=1))
    assert {(o.instance_type, o.zone) for o in on_demand} == {
        ("a3-highgpu-8g", "us-central1-b"), ("a3-highgpu-8g", "us-east4-c"),
        ("a3-megagpu-8g", "us-central1-b"), ("a3-megagpu-8g", "us-east4-c")}
    spot = provider.plan(ResourceRequest(vm_name="t", gpu="h100-sxm", gpu_count=1, spot=True))
    assert [(o.instance_type, o.zone, o.spot, o.price_per_hour) for o in spot] == [
        ("a3-highgpu-1g", "us-central1-b", True, None)]


def test_plan_respects_request_regions_and_zone_option(fake, provider):
    offers = provider.plan(ResourceRequest(vm_name="t", gpu="L4", regions=["europe-west4", "us-west1"]))
    assert [o.zone for o in offers] == ["europe-west4-a", "us-west1-b"]
    pinned = make(fake, zones=["us-west1-b", "us-central1-b"]).plan(ResourceRequest(vm_name="t", gpu="L4"))
    assert [o.zone for o in pinned] == ["us-west1-b", "us-central1-b"]
    assert make(fake, regions="us-west1").plan(ResourceRequest(vm_name="t", gpu="L4"))[0].zone == "us-west1-b"


def test_plan_cpu_only(provider):
    offers = provider.plan(ResourceRequest(vm_name="t", gpu=None))
    assert {o.instance_type for o in offers} == {"e2-standard-2"}
    assert all(o.gpu is None and o.gpu_count == 0 for o in offers)
    # asia-east1 is not a default region
    assert "asia-east1-a" not in {o.zone for o in offers} and "us-central1-a" in {o.zone for o in offers}


@pytest.mark.parametrize("gpu,count,field", [("MI300X", 1, "gpu:"), ("A100", 32, "gpu_count:"),
                                             ("L4", 0, "gpu_count:"), ("warp-drive", 1, "gpu:")])
def test_plan_unplannable_is_invalid_request(fake, provider, gpu, count, field):
    with pytest.raises(ProviderError) as info:
        provider.plan(ResourceRequest(vm_name="t", gpu=gpu, gpu_count=count))
    assert info.value.kind == ErrorKind.INVALID_REQUEST and info.value.msg.startswith(field)
    assert fake.calls == []


def test_plan_follows_pagination(fake):
    fake.page_size = 2
    offers = make(fake).plan(ResourceRequest(vm_name="t", gpu="T4"))
    assert len(offers) == 5
    pages = fake.calls_of("machineTypes.aggregatedList")
    assert len(pages) > 1 and pages[1]["args"]["pageToken"] == "2"


@pytest.mark.parametrize("status,reason,kind", [(503, "backendError", ErrorKind.TRANSIENT),
                                                (403, "forbidden", ErrorKind.CREDENTIALS),
                                                (401, "required", ErrorKind.CREDENTIALS),
                                                (429, "rateLimitExceeded", ErrorKind.TRANSIENT)])
def test_plan_errors(fake, provider, status, reason, kind):
    fake.fail_next("machineTypes.aggregatedList", status, reason)
    with pytest.raises(ProviderError) as info:
        provider.plan(ResourceRequest(vm_name="t", gpu="L4"))
    assert info.value.kind == kind


def test_sdk_retries_a_read_within_its_bound(fake):
    adapter = make(fake, read_retry_s=10)
    fake.fail_next("machineTypes.aggregatedList", 503, "backendError")
    assert adapter.plan(ResourceRequest(vm_name="t", gpu="L4"))
    assert len(fake.calls_of("machineTypes.aggregatedList")) == 2
    # writes are never retried by the SDK
    offer = offer_for(adapter)
    prepared = adapter.prepare(offer, spec())
    fake.fail_next("instances.insert", 503, "backendError")
    with pytest.raises(ProviderError) as info:
        adapter.create(offer, prepared, spec())
    assert info.value.kind == ErrorKind.TRANSIENT and len(fake.calls_of("instances.insert")) == 1


# -- the contract's "No waiting": what a call may hold -------------------------------------------

# The adapter's reads (by the name it gives each call): the only requests the SDK may retry.
READS = ("get", "list", "aggregatedList", "getFromFamily")


def test_every_request_says_whether_the_sdk_may_retry_it(fake, monkeypatch):
    """A read goes with the adapter's bounded read_retry; every other request (a mutation, the one operation
    wait) with none, never with the SDK's default (which retries a read for 600 s)."""
    adapter = make(fake, journal_id="j1", read_retry_s=10)
    sent = []
    real = GcpProvider._call

    def recording(self, where, fn, *args, **kwargs):
        assert "retry" in kwargs, "%s went with the SDK's default retry" % where
        sent.append((where, kwargs["retry"]))
        return real(self, where, fn, *args, **kwargs)

    monkeypatch.setattr(GcpProvider, "_call", recording)
    offer, _prepared, made, iid = launched(fake, adapter, tags={"team": "ml"})
    adapter.prepare(offer, spec(allowed_cidrs=["203.0.113.0/24"]))  # a drifted rule: patched
    adapter.observe(offer.location, "train1")
    adapter.diagnose(offer.location, "train1")
    adapter.retag(offer.location, "train1", iid, {"team": "infra"}, purge=True)
    adapter.list_owned(adapter.sweep_locations()[0])
    adapter.delete(offer.location, "train1", [iid])
    adapter.cleanup(offer.location, "train1")
    assert made.tags and adapter.read_retry is not None
    reads = sorted({where for where, retry in sent if where.rsplit(".", 1)[-1] in READS})
    once = sorted({where for where, retry in sent if where.rsplit(".", 1)[-1] not in READS})
    assert all(retry is adapter.read_retry for where, retry in sent if where in reads), sent
    assert all(retry is None for where, retry in sent if where in once), sent
    assert {"instances.list", "firewalls.get", "images.getFromFamily", "machine_types.aggregatedList"} <= set(reads)
    assert {"instances.insert", "instances.insert wait", "firewalls.insert", "firewalls.insert wait",
            "firewalls.patch", "firewalls.patch wait", "instances.setLabels", "instances.delete",
            "firewalls.delete"} <= set(once)


@pytest.mark.parametrize("primitive,call", [
    ("prepare", "firewalls.insert"), ("create", "instances.insert"), ("delete", "instances.delete"),
    ("cleanup", "firewalls.delete"),
])
def test_a_mutation_refused_with_503_is_sent_once_and_is_transient(fake, primitive, call):
    """The SDK retries a read that got 503 (read_retry_s), never a mutation: one request, a Transient for the
    core, which observes before it tries again."""
    adapter = make(fake, read_retry_s=10)
    offer = offer_for(adapter)
    prepared = adapter.prepare(offer, spec()) if primitive != "prepare" else None
    iid = adapter.create(offer, prepared, spec()) if primitive == "delete" else None
    calls = {"prepare": lambda: adapter.prepare(offer, spec()),
             "create": lambda: adapter.create(offer, prepared, spec()),
             "delete": lambda: adapter.delete(offer.location, "train1", [iid]),
             "cleanup": lambda: adapter.cleanup(offer.location, "train1")}
    before = len(fake.calls_of(call))
    fake.fail_next(call, 503, "backendError")
    with pytest.raises(ProviderError) as info:
        calls[primitive]()
    assert info.value.kind == ErrorKind.TRANSIENT
    assert len(fake.calls_of(call)) == before + 1


def test_read_retry_s_is_bounded_by_the_contract(fake):
    """SDK_READ_RETRY_S: an SDK's retries of a read stay a small part of the core's own budget."""
    assert make(fake, read_retry_s=SDK_READ_RETRY_S).read_retry is not None
    with pytest.raises(ProviderError) as info:
        make(fake, read_retry_s=SDK_READ_RETRY_S + 1)
    assert info.value.kind == ErrorKind.INVALID_REQUEST and "cloud_options.gcp.read_retry_s" in info.value.msg


def test_prepare_waits_at_most_once_on_its_rule_operation(fake, provider):
    """The one server-side wait a primitive may make: after the firewall insert, then after a patch."""
    offer = offer_for(provider)
    provider.prepare(offer, spec())
    assert len(fake.calls_of("globalOperations.wait")) == 1
    provider.prepare(offer, spec())  # nothing to change: no write, no wait
    assert len(fake.calls_of("globalOperations.wait")) == 1
    provider.prepare(offer, spec(allowed_cidrs=["203.0.113.0/24"]))
    assert len(fake.calls_of("globalOperations.wait")) == 2 and len(fake.calls_of("firewalls.patch")) == 1


def test_unknown_project_is_invalid_request(fake):
    with pytest.raises(ProviderError) as info:
        GcpProvider({"project": "someone-else", "api_endpoint": fake.url, "read_retry_s": 0}).plan(
            ResourceRequest(vm_name="t", gpu="L4"))
    assert info.value.kind == ErrorKind.INVALID_REQUEST and info.value.msg.startswith("project:")


# -- prepare -----------------------------------------------------------------------------------


def test_prepare_creates_the_per_vm_firewall_and_resolves_the_image(fake, provider):
    offer = offer_for(provider)
    prepared = provider.prepare(offer, spec())
    rule = fake.firewalls["gpuprov-train1"]
    assert rule["sourceRanges"] == [CIDR] and "0.0.0.0/0" not in rule["sourceRanges"]
    assert rule["targetTags"] == ["gpuprov-train1"] and rule["direction"] == "INGRESS"
    assert rule["allowed"] == [{"IPProtocol": "tcp", "ports": ["22", "80", "443", "6443"]}]
    assert rule["network"].endswith("/global/networks/default")
    assert "%s=train1" % VM_NAME_TAG in rule["description"]
    assert prepared["image"].endswith("/projects/ubuntu-os-accelerator-images/global/images/"
                                      "ubuntu-accelerator-2204-amd64-with-nvidia-580-v20261120")
    assert prepared["network_tag"] == "gpuprov-train1" and prepared["ports"] == [22, 80, 443, 6443]
    assert json.loads(json.dumps(prepared)) == prepared
    assert fake.calls_of("images.getFromFamily")[0]["path"].endswith(
        "/projects/ubuntu-os-accelerator-images/global/images/family/ubuntu-accelerator-2204-amd64-with-nvidia-580")


@pytest.mark.parametrize("gpu,count,spot", [("B200", 8, True), ("H200", 8, True), ("L4", 1, False),
                                            ("V100", 1, False), ("A100-80GB", 4, False)])
def test_prepare_picks_a_driver_that_runs_the_gpu(fake, provider, gpu, count, spot):
    prepared = provider.prepare(offer_for(provider, gpu, count, spot), spec())
    family = prepared["image_family"]
    branch = int(family.rsplit("-", 1)[1])
    oldest, newest = gcp_catalog.DRIVER_BRANCHES[gcp_catalog.GENERATIONS[gpu]]
    assert (oldest or 0) <= branch <= (newest or 10 ** 6)
    assert prepared["image"].endswith("/global/images/%s-v20261120" % family)


def test_b200_gets_a_driver_of_r570_or_later():
    project, family = gcp_catalog.gpu_image("B200")
    assert project == "ubuntu-os-accelerator-images" and family.startswith("ubuntu-accelerator-")
    assert int(family.rsplit("-", 1)[1]) >= 570
    for gpu in gcp_catalog.gcp_gpus():  # every GPU of the ladder has a generation and a family
        assert gcp_catalog.gpu_image(gpu)[1] in gcp_catalog.ACCELERATOR_FAMILIES.values()


@pytest.mark.parametrize("gpu,count,family,need", [
    ("B200", 8, "ubuntu-accelerator-2204-amd64-with-nvidia-550", "R570 or later"),
    ("V100", 1, "ubuntu-accelerator-2404-amd64-with-nvidia-595", "R580 or earlier"),
])
def test_an_image_family_whose_driver_cannot_run_the_gpu_is_refused_before_any_call(fake, gpu, count, family, need):
    adapter = make(fake, image_family=family)
    offer = offer_for(adapter, gpu, count, spot=gcp_catalog.select_rungs(gpu, count, True)[0].spot_only)
    calls = len(fake.calls)
    with pytest.raises(ProviderError) as info:
        adapter.prepare(offer, spec())
    assert info.value.kind == ErrorKind.INVALID_REQUEST and info.value.msg.startswith("image_family:")
    assert need in info.value.msg and gpu in info.value.msg
    assert len(fake.calls) == calls and fake.firewalls == {}


def test_an_image_family_naming_no_driver_is_the_users_choice(fake):
    adapter = make(fake, image_project="ubuntu-os-cloud", image_family="ubuntu-2204-lts")
    assert adapter.prepare(offer_for(adapter, "B200", 8, spot=True), spec())["image_family"] == "ubuntu-2204-lts"


def test_prepare_is_idempotent(fake, provider):
    offer = offer_for(provider)
    first = provider.prepare(offer, spec())
    before = json.dumps(fake.firewalls, sort_keys=True)
    second = provider.prepare(offer, spec())
    assert second == first
    assert json.dumps(fake.firewalls, sort_keys=True) == before
    assert len(fake.calls_of("firewalls.insert")) == 1 and fake.calls_of("firewalls.patch") == []


def test_prepare_updates_a_drifted_rule(fake, provider):
    offer = offer_for(provider)
    provider.prepare(offer, spec())
    provider.prepare(offer, spec(allowed_cidrs=["203.0.113.0/24", CIDR]))
    assert len(fake.calls_of("firewalls.patch")) == 1
    assert fake.firewalls["gpuprov-train1"]["sourceRanges"] == ["198.51.100.7/32", "203.0.113.0/24"]


def test_prepare_ssh_only_without_k3s_direct(fake):
    adapter = make(fake, k3s_direct=False)
    adapter.prepare(offer_for(adapter), spec(open_ports=[22, 8888]))
    assert fake.firewalls["gpuprov-train1"]["allowed"][0]["ports"] == ["22", "8888"]


def test_prepare_cidrs_from_options_and_never_open_by_default(fake):
    adapter = make(fake, allowed_cidrs=["192.0.2.1"])
    adapter.prepare(offer_for(adapter), spec(allowed_cidrs=[]))
    assert fake.firewalls["gpuprov-train1"]["sourceRanges"] == ["192.0.2.1/32"]
    fake.firewalls.clear()
    provider = make(fake)
    with pytest.raises(ProviderError) as info:
        provider.prepare(offer_for(provider), spec(allowed_cidrs=[]))
    assert info.value.kind == ErrorKind.INVALID_REQUEST and info.value.msg.startswith("allowed_cidrs:")
    with pytest.raises(ProviderError) as info:
        provider.prepare(offer_for(provider), spec(allowed_cidrs=["not-a-cidr"]))
    assert info.value.msg.startswith("allowed_cidrs:")
    assert fake.firewalls == {}


def test_prepare_opens_the_world_only_when_asked(fake, provider):
    provider.prepare(offer_for(provider), spec(allowed_cidrs=["0.0.0.0/0"]))
    assert fake.firewalls["gpuprov-train1"]["sourceRanges"] == ["0.0.0.0/0"]


def test_prepare_cpu_offer_uses_the_plain_image(fake, provider):
    prepared = provider.prepare(offer_for(provider, gpu=None), spec())
    assert "/projects/ubuntu-os-cloud/global/images/" in prepared["image"]


def test_prepare_unknown_image_family(fake):
    adapter = make(fake, image_family="no-such-family")
    with pytest.raises(ProviderError) as info:
        adapter.prepare(offer_for(adapter), spec())
    assert info.value.kind == ErrorKind.INVALID_REQUEST and info.value.msg.startswith("image_family:")


def test_prepare_tolerates_a_concurrent_insert(fake, provider):
    fake.fail_next("firewalls.insert", 409, "alreadyExists")
    prepared = provider.prepare(offer_for(provider), spec())
    assert prepared["firewall"] == "gpuprov-train1"


def test_prepare_errors(fake, provider):
    fake.fail_next("firewalls.insert", 403, "forbidden", "Required 'compute.firewalls.create' permission")
    with pytest.raises(ProviderError) as info:
        provider.prepare(offer_for(provider), spec())
    assert info.value.kind == ErrorKind.CREDENTIALS
    fake.fail_next("firewalls.get", 503)
    with pytest.raises(ProviderError) as info:
        provider.prepare(offer_for(provider), spec())
    assert info.value.kind == ErrorKind.TRANSIENT


# -- create ------------------------------------------------------------------------------------


def test_create_sends_labels_tags_metadata_and_scheduling(fake, provider):
    boot = BootScript("#!/bin/bash\necho k3s", {"K3S_SAN": "x"})
    offer, prepared, s, iid = launched(fake, provider, boot_script=boot)
    assert iid == "train1"
    body = insert_body(fake)
    assert body["name"] == "train1"
    assert body["labels"] == {VM_NAME_TAG: "train1"}
    assert body["tags"]["items"] == ["gpuprov-train1"]
    assert body["machineType"] == "zones/%s/machineTypes/g2-standard-4" % offer.zone
    meta = metadata(body)
    assert meta["ssh-keys"] == "gpuprov:" + KEY
    assert meta["user-data"] == boot.to_shell() and meta["user-data"].startswith("#!/bin/bash")
    assert "startup-script" not in meta
    assert body["scheduling"] == {"onHostMaintenance": "TERMINATE", "automaticRestart": True}
    assert "guestAccelerators" not in body  # built into g2
    disk = body["disks"][0]
    assert disk["boot"] and disk["autoDelete"]
    assert disk["initializeParams"]["sourceImage"] == prepared["image"]
    assert disk["initializeParams"]["labels"] == {VM_NAME_TAG: "train1"}
    assert body["networkInterfaces"][0]["accessConfigs"] == [{"name": "External NAT", "type": "ONE_TO_ONE_NAT"}]
    assert ("us-central1-a", "train1") in fake.instances


def test_create_attaches_n1_accelerators(fake, provider):
    offer, _prepared, _spec, _iid = launched(fake, provider, gpu="T4", count=2)
    body = insert_body(fake)
    assert body["machineType"].endswith("/n1-standard-8")
    assert body["guestAccelerators"] == [{
        "acceleratorType": "projects/%s/zones/%s/acceleratorTypes/nvidia-tesla-t4" % (fake.project, offer.zone),
        "acceleratorCount": 2}]
    assert body["scheduling"]["onHostMaintenance"] == "TERMINATE"


def test_create_spot(fake, provider):
    launched(fake, provider, spot=True)
    assert insert_body(fake)["scheduling"] == {"provisioningModel": "SPOT", "instanceTerminationAction": "DELETE",
                                               "onHostMaintenance": "TERMINATE", "automaticRestart": False}


def test_create_cpu_spot_terminates_on_maintenance(fake, provider):
    launched(fake, provider, gpu=None, spot=True)
    assert insert_body(fake)["scheduling"] == {"provisioningModel": "SPOT", "instanceTerminationAction": "DELETE",
                                               "onHostMaintenance": "TERMINATE", "automaticRestart": False}


@pytest.mark.parametrize("field,value", [("request_timeout_s", "soon"), ("operation_timeout_s", -1),
                                         ("read_retry_s", [])])
def test_numeric_options_are_checked(fake, field, value):
    with pytest.raises(ProviderError) as info:
        make(fake, **{field: value})
    assert info.value.kind == ErrorKind.INVALID_REQUEST
    assert info.value.msg.startswith("cloud_options.gcp.%s:" % field)


def test_create_cpu_keeps_live_migration(fake, provider):
    launched(fake, provider, gpu=None)
    body = insert_body(fake)
    assert "onHostMaintenance" not in body.get("scheduling", {})
    assert body["machineType"].endswith("/e2-standard-2")


def test_create_a3_uses_gvnic(fake, provider):
    launched(fake, provider, gpu="H100", count=8, zone="us-east4-c")
    assert insert_body(fake)["networkInterfaces"][0]["nicType"] == "GVNIC"


def test_create_startup_script_and_ssh_user(fake):
    adapter = make(fake, boot_script_via="startup-script")
    boot = BootScript("echo hi", {"A": "1"})
    launched(fake, adapter, ssh_user="ubuntu", boot_script=boot)
    meta = metadata(insert_body(fake))
    assert meta["startup-script"] == boot.to_shell() and "user-data" not in meta
    assert meta["ssh-keys"].startswith("ubuntu:ssh-ed25519 ")


def test_create_names_starting_with_a_digit(fake, provider):
    _offer, _prepared, _spec, iid = launched(fake, provider, name="1train")
    assert iid == "g-1train" and insert_body(fake)["labels"] == {VM_NAME_TAG: "1train"}


def test_create_is_idempotent_for_our_instance(fake, provider):
    offer, prepared, s, iid = launched(fake, provider)
    assert provider.create(offer, prepared, s) == iid
    assert len(fake.instances) == 1
    assert len(fake.calls_of("instances.insert")) == 2 and len(fake.calls_of("instances.get")) == 1


def test_create_refuses_a_stranger_with_the_same_name(fake, provider):
    offer, prepared, s, iid = launched(fake, provider)
    fake.instances[(offer.zone, iid)]["labels"] = {"owner": "someone"}
    with pytest.raises(ProviderError) as info:
        provider.create(offer, prepared, s)
    assert info.value.kind == ErrorKind.FAILED


def _create_fails(fake, provider, **kw):
    offer = offer_for(provider, **kw)
    s = spec()
    prepared = provider.prepare(offer, s)
    with pytest.raises(ProviderError) as info:
        provider.create(offer, prepared, s)
    return info.value


def test_create_zone_exhausted_is_capacity(fake, provider):
    fake.exhaust("us-central1-a", "g2-standard-4")
    err = _create_fails(fake, provider)
    assert (err.kind, err.block_scope) == (ErrorKind.CAPACITY, BlockScope.OFFER)
    assert "ZONE_RESOURCE_POOL_EXHAUSTED" in err.msg
    assert fake.instances == {}
    # the next zone still works
    offer = offer_for(provider, zone="us-central1-b")
    assert provider.create(offer, provider.prepare(offer, spec()), spec()) == "train1"


@pytest.mark.parametrize("code,metric,kind,block", [
    ("ZONE_RESOURCE_POOL_EXHAUSTED", None, ErrorKind.CAPACITY, BlockScope.OFFER),
    ("QUOTA_EXCEEDED", "GPUS_ALL_REGIONS", ErrorKind.QUOTA, BlockScope.CLOUD),
    ("QUOTA_EXCEEDED", "NVIDIA_L4_GPUS", ErrorKind.QUOTA, BlockScope.REGION),
    ("SOMETHING_UNHEARD_OF", None, ErrorKind.FAILED, BlockScope.OFFER),
])
def test_create_operation_errors(fake, provider, code, metric, kind, block):
    fake.fail_next_insert(code, quota_metric=metric, http_status=None if code != "SOMETHING_UNHEARD_OF" else 0)
    err = _create_fails(fake, provider)
    assert (err.kind, err.block_scope) == (kind, block)
    assert fake.instances == {}


@pytest.mark.parametrize("status,reason,kind", [
    (403, "forbidden", ErrorKind.CREDENTIALS), (401, "required", ErrorKind.CREDENTIALS),
    (400, "invalid", ErrorKind.INVALID_REQUEST), (429, "rateLimitExceeded", ErrorKind.TRANSIENT),
    (503, "backendError", ErrorKind.TRANSIENT), (403, "quotaExceeded", ErrorKind.QUOTA),
])
def test_create_http_errors(fake, provider, status, reason, kind):
    fake.fail_next("instances.insert", status, reason)
    assert _create_fails(fake, provider).kind == kind
    assert fake.instances == {}


def test_create_rejected_by_the_api_is_invalid_request(fake, provider):
    offer = offer_for(provider)
    s = spec()
    prepared = provider.prepare(offer, s)
    offer.detail["machine_type"] = "g2-standard-999"
    with pytest.raises(ProviderError) as info:
        provider.create(offer, prepared, s)
    assert info.value.kind == ErrorKind.INVALID_REQUEST and "g2-standard-999" in info.value.msg


def test_create_waits_once_on_a_running_operation(fake, provider):
    fake.op_mode = "pending"
    _offer, _prepared, _spec, iid = launched(fake, provider)
    assert iid == "train1"
    waits = fake.calls_of("zoneOperations.wait")
    assert len(waits) == 1 and "/zones/us-central1-a/operations/operation-" in waits[0]["path"]


def test_create_operation_still_running_after_the_wait_is_transient(fake, provider):
    offer = offer_for(provider)
    prepared = provider.prepare(offer, spec())
    fake.op_mode = "stuck"
    with pytest.raises(ProviderError) as info:
        provider.create(offer, prepared, spec())
    assert info.value.kind == ErrorKind.TRANSIENT and "still RUNNING after the wait" in info.value.msg
    assert len(fake.calls_of("zoneOperations.wait")) == 1


def test_create_without_zone_is_invalid(fake, provider):
    offer = offer_for(provider)
    offer.zone = None
    with pytest.raises(ProviderError) as info:
        provider.create(offer, {"image": "x", "network_tag": "t"}, spec())
    assert info.value.kind == ErrorKind.INVALID_REQUEST


# -- observe / delete / cleanup ------------------------------------------------------------------


def test_observe_by_label(fake, provider):
    offer, _prepared, _spec, iid = launched(fake, provider)
    launched(fake, provider, name="other")
    found = provider.observe(offer.location, "train1")
    assert [o.instance_id for o in found] == [iid]
    assert found[0].status == Status.PENDING and found[0].endpoint is None and not found[0].usable
    assert found[0].location == Location("gcp", "us-central1", "us-central1-a")
    assert fake.calls_of("instances.list")[-1]["args"]["filter"] == 'labels.%s = "train1"' % VM_NAME_TAG
    fake.settle(offer.zone, iid)
    found = provider.observe(offer.location, "train1")
    assert found[0].status == Status.RUNNING and found[0].usable
    assert found[0].endpoint.host.startswith("203.0.113.") and found[0].endpoint.port == 22
    assert found[0].endpoint.user == "gpuprov"
    assert provider.observe(Location("gcp", "us-central1", "us-central1-b"), "train1") == []


@pytest.mark.parametrize("gcp_status,status", [
    ("PROVISIONING", Status.PENDING), ("STAGING", Status.PENDING), ("REPAIRING", Status.PENDING),
    ("RUNNING", Status.RUNNING), ("STOPPING", Status.STOPPING), ("SUSPENDING", Status.STOPPING),
    ("TERMINATED", Status.STOPPED), ("SUSPENDED", Status.STOPPED),
])
def test_observe_status_mapping(fake, provider, gcp_status, status):
    offer, _prepared, _spec, iid = launched(fake, provider)
    fake.set_status(offer.zone, iid, gcp_status)
    (seen,) = provider.observe(offer.location, "train1")
    assert seen.status == status
    assert (seen.endpoint is not None) == (gcp_status == "RUNNING")
    assert (seen.reason is None) == (gcp_status == "RUNNING")


def test_observe_reports_the_ssh_user_create_used(fake, provider):
    offer, _prepared, _spec, iid = launched(fake, provider, ssh_user="ubuntu")
    fake.settle(offer.zone, iid)
    assert provider.observe(offer.location, "train1")[0].endpoint.user == "ubuntu"


def test_observe_pages(fake, provider):
    fake.page_size = 1
    offer, prepared, _spec, _iid = launched(fake, provider)
    for other in ("b1", "b2", "b3"):
        provider.create(offer, prepared, spec(other))
    assert [o.instance_id for o in provider.observe(offer.location, "train1")] == ["train1"]
    # the fake applies the filter server-side, so one page holds the match
    assert all(c["args"].get("filter") for c in fake.calls_of("instances.list"))


def test_observe_errors(fake, provider):
    fake.fail_next("instances.list", 503)
    with pytest.raises(ProviderError) as info:
        provider.observe(Location("gcp", "us-central1", "us-central1-a"), "train1")
    assert info.value.kind == ErrorKind.TRANSIENT
    with pytest.raises(ProviderError) as info:
        provider.observe(Location("gcp", "us-central1"), "train1")
    assert info.value.kind == ErrorKind.INVALID_REQUEST


def test_delete_is_idempotent_and_does_not_wait(fake, provider):
    offer, _prepared, _spec, iid = launched(fake, provider)
    calls_before = len(fake.calls)
    provider.delete(offer.location, "train1", [iid])
    provider.delete(offer.location, "train1", [iid])  # 404 = already gone = success
    provider.delete(offer.location, "train1", ["never-existed"])
    assert fake.instances == {}
    keys = [c["key"] for c in fake.calls[calls_before:]]
    assert keys == ["instances.delete"] * 3
    assert provider.observe(offer.location, "train1") == []


def test_delete_then_observe_stopping_then_gone(fake, provider):
    fake.delete_lag = 1
    offer, _prepared, _spec, iid = launched(fake, provider)
    provider.delete(offer.location, "train1", [iid])
    assert [o.status for o in provider.observe(offer.location, "train1")] == [Status.STOPPING]
    assert provider.observe(offer.location, "train1") == []


def test_delete_errors(fake, provider):
    offer, _prepared, _spec, iid = launched(fake, provider)
    fake.fail_next("instances.delete", 403, "forbidden")
    with pytest.raises(ProviderError) as info:
        provider.delete(offer.location, "train1", [iid])
    assert info.value.kind == ErrorKind.CREDENTIALS
    assert (offer.zone, iid) in fake.instances


def test_cleanup_deletes_the_rule_idempotently(fake, provider):
    offer, _prepared, _spec, iid = launched(fake, provider)
    provider.delete(offer.location, "train1", [iid])
    provider.cleanup(offer.location, "train1")
    assert fake.firewalls == {}
    provider.cleanup(offer.location, "train1")
    assert len(fake.calls_of("firewalls.delete")) == 2
    fake.fail_next("firewalls.delete", 429, "rateLimitExceeded")
    with pytest.raises(ProviderError) as info:
        provider.cleanup(offer.location, "train1")
    assert info.value.kind == ErrorKind.TRANSIENT


def test_full_round_leaves_nothing(fake, provider):
    offer, _prepared, _spec, iid = launched(fake, provider, boot_script=BootScript("echo hi"))
    fake.settle(offer.zone, iid)
    assert provider.observe(offer.location, "train1")[0].usable
    provider.delete(offer.location, "train1", [o.instance_id for o in provider.observe(offer.location, "train1")])
    provider.cleanup(offer.location, "train1")
    assert fake.instances == {} and fake.firewalls == {}


# -- catalogue helpers -----------------------------------------------------------------------------


def test_names_fit_gcp_limits():
    long_a, long_b = "a" * 60 + "xyz", "a" * 60 + "xyw"
    for vm in (long_a, long_b, "9" * 63):
        assert len(gcp_catalog.firewall_name(vm)) <= 63 and len(gcp_catalog.instance_name(vm)) <= 63
        assert gcp_catalog.firewall_name(vm)[0].isalpha() and gcp_catalog.instance_name(vm)[0].isalpha()
    assert gcp_catalog.firewall_name(long_a) != gcp_catalog.firewall_name(long_b)
    assert gcp_catalog.firewall_name("train1") == "gpuprov-train1"
    assert gcp_catalog.instance_name("train1") == "train1"


def test_ladder_shape():
    for rung in gcp_catalog.LADDER:
        assert rung.machine_type.split("-")[0] in ("e2", "n1", "g2", "a2", "a3", "a4")
        assert rung.attached == rung.machine_type.startswith("n1-")
        assert (rung.gpu is None) == (rung.accelerator is None)
    assert gcp_catalog.select_rungs("A100-80GB", 2, False)[0].machine_type == "a2-ultragpu-2g"
    assert gcp_catalog.select_rungs("H200", 1, True)[0].machine_type == "a3-ultragpu-8g"
    for gpu in ("H200", "B200"):   # A3 Ultra and A4: Spot, flex-start or a reservation, never plain on demand
        with pytest.raises(ProviderError) as info:
            gcp_catalog.select_rungs(gpu, 8, False)
        assert info.value.kind == ErrorKind.INVALID_REQUEST and info.value.msg.startswith("spot:")
    assert gcp_catalog.region_of("europe-west4-a") == "europe-west4"


# -- journal identity --------------------------------------------------------------------------------

JOURNAL_A = "0123456789abcdef0123456789abcdef"
JOURNAL_B = "fedcba9876543210fedcba9876543210"


def test_instance_disk_and_rule_carry_the_journal_id(fake):
    provider = make(fake, JOURNAL_A)
    offer, prepared, _spec, iid = launched(fake, provider)
    labels = {VM_NAME_TAG: "train1", JOURNAL_ID_TAG: JOURNAL_A}
    body = insert_body(fake)
    assert body["labels"] == labels
    assert body["disks"][0]["initializeParams"]["labels"] == labels
    rule = gcp_catalog.firewall_name("train1", JOURNAL_A)
    assert prepared["firewall"] == rule == "gpuprov-train1" + gcp_catalog.journal_suffix(JOURNAL_A)
    assert body["tags"]["items"] == [rule]
    description = fake.firewalls[rule]["description"]
    assert description.endswith("(%s=train1, %s=%s)" % (VM_NAME_TAG, JOURNAL_ID_TAG, JOURNAL_A))
    assert gcp_catalog.described_identity(description) == labels
    (seen,) = make(fake).observe(offer.location, "train1")   # anyone sees whose it is
    assert (seen.instance_id, seen.journal_id) == (iid, JOURNAL_A)


def test_a_legacy_instance_reports_no_journal(fake, provider):
    offer, prepared, _spec, _iid = launched(fake, provider)
    assert prepared["firewall"] == "gpuprov-train1"
    assert JOURNAL_ID_TAG not in insert_body(fake)["labels"]
    assert fake.firewalls["gpuprov-train1"]["description"].endswith("(%s=train1)" % VM_NAME_TAG)
    (seen,) = make(fake, JOURNAL_A).observe(offer.location, "train1")
    assert seen.journal_id is None and seen.owned_by(JOURNAL_A)


def test_create_refuses_another_journals_instance_of_the_name(fake):
    first, second = make(fake, JOURNAL_A), make(fake, JOURNAL_B)
    offer, _prepared, s, iid = launched(fake, first)
    with pytest.raises(ProviderError) as info:
        second.create(offer, second.prepare(offer, s), s)
    assert info.value.kind == ErrorKind.INVALID_REQUEST
    assert "made by another controller" in info.value.msg and JOURNAL_A in info.value.msg
    assert fake.instances[(offer.zone, iid)]["labels"][JOURNAL_ID_TAG] == JOURNAL_A


def test_create_takes_back_a_legacy_instance_of_the_name(fake, provider):
    offer, prepared, s, iid = launched(fake, provider)
    journalled = make(fake, JOURNAL_A)
    assert journalled.create(offer, journalled.prepare(offer, s), s) == iid


def test_create_over_an_instance_still_going_is_transient(fake):
    provider = make(fake, JOURNAL_A)
    fake.delete_lag = 5
    offer, prepared, s, iid = launched(fake, provider)
    provider.delete(offer.location, "train1", [iid])      # the core deletes a leftover, creates at once
    with pytest.raises(ProviderError) as info:
        provider.create(offer, prepared, s)
    assert info.value.kind == ErrorKind.TRANSIENT and "STOPPING" in info.value.msg


def test_two_journals_have_their_own_rules_and_cleanups(fake, provider):
    first, second = make(fake, JOURNAL_A), make(fake, JOURNAL_B)
    offer_a, _prepared, s, iid = launched(fake, first)
    offer_b = offer_for(second, zone="us-central1-b")
    second.create(offer_b, second.prepare(offer_b, s), s)    # same name, another zone
    provider.prepare(offer_a, s)                               # and a rule made before journal ids
    assert sorted(fake.firewalls) == sorted(["gpuprov-train1", gcp_catalog.firewall_name("train1", JOURNAL_A),
                                             gcp_catalog.firewall_name("train1", JOURNAL_B)])
    first.delete(offer_a.location, "train1", [iid])
    first.cleanup(offer_a.location, "train1")
    assert sorted(fake.firewalls) == [gcp_catalog.firewall_name("train1", JOURNAL_B)]
    assert [o.journal_id for o in second.observe(offer_b.location, "train1")] == [JOURNAL_B]


def test_cleanup_keeps_a_legacy_named_rule_that_names_another_journal(fake):
    provider = make(fake, JOURNAL_A)
    fake.firewalls["gpuprov-train1"] = {"name": "gpuprov-train1", "description": "gpuprov: SSH for VM train1 "
                                        "(%s=train1, %s=%s)" % (VM_NAME_TAG, JOURNAL_ID_TAG, JOURNAL_B)}
    provider.cleanup(Location("gcp", "us-central1", "us-central1-a"), "train1")
    assert list(fake.firewalls) == ["gpuprov-train1"]


@pytest.mark.parametrize("journal_id", ["UPPER", "x" * 64, "dots.in.it"])
def test_a_journal_id_that_cannot_be_a_label_fails_before_any_call(fake, journal_id):
    provider = make(fake, journal_id)
    offer = offer_for(make(fake))
    calls = len(fake.calls)
    for call in (lambda: provider.prepare(offer, spec()),
                 lambda: provider.create(offer, {"image": "x", "network_tag": "t"}, spec())):
        with pytest.raises(ProviderError) as info:
            call()
        assert info.value.kind == ErrorKind.INVALID_REQUEST and info.value.msg.startswith(JOURNAL_ID_TAG)
    assert len(fake.calls) == calls


def test_journal_rule_names_fit_gcp_limits():
    for vm in ("a" * 63, "9" * 63, "train1"):
        for journal_id in (JOURNAL_A, JOURNAL_B):
            name = gcp_catalog.firewall_name(vm, journal_id)
            assert re.match(r"^[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?$", name), name
            assert name.endswith(gcp_catalog.journal_suffix(journal_id))
        assert gcp_catalog.firewall_name(vm, JOURNAL_A) != gcp_catalog.firewall_name(vm, JOURNAL_B)
        assert gcp_catalog.firewall_name(vm, None) == gcp_catalog.firewall_name(vm)
