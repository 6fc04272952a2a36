"""The runpod adapter against its fake: plan (prices, stock, unavailable reasons,
InvalidRequest), the create body, observe's identity and SSH endpoint, the capabilities,
the options, and the fake refusing what RunPod refuses."""

from __future__ import annotations

import pytest

requests = pytest.importorskip("requests")

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers import registry  # noqa: E402
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (  # noqa: E402
    ErrorKind, InstanceSpec, Location, ProviderError, ResourceRequest, SshEndpoint, Status,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.runpod import (  # noqa: E402
    RunpodProvider, catalog,
)
from ansible_collections.gpuprov.cloud.tests.fakes.runpod_api import Reply, RunpodApiFake  # noqa: E402

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAABAgMEBQYHCAkKCwwNDg8QERITFBUWFxgZGhscHR4f me@laptop"


@pytest.fixture
def fake(tmp_path):
    made = RunpodApiFake(str(tmp_path))
    yield made
    made.stop()


def adapter(fake, **options):
    return RunpodProvider(dict({"api_url": fake.api_url, "api_key": fake.token}, **options), journal_id="j-1")


def spec(name="pod-a", **kwargs):
    return InstanceSpec(vm_name=name, ssh_public_key=KEY, **kwargs)


# -- options and capabilities --------------------------------------------------------------

def test_registry_builds_it_with_the_v2_default_url(monkeypatch):
    monkeypatch.setenv("RUNPOD_API_KEY", "k")
    provider = registry.get_provider("runpod", {})
    assert isinstance(provider, RunpodProvider)
    assert provider.options["api_url"] == "https://api.runpod.io/v2"
    assert provider.secret_options == ("api_key",)


def test_capabilities_are_a_containers(fake):
    caps = adapter(fake, boot_timeout_s=300, poll_interval_s=5).capabilities()
    assert (caps.kubernetes, caps.boot_script, caps.spot, caps.k3s_access) == (False, False, False, None)
    assert (caps.boot_timeout_s, caps.poll_interval_s) == (300, 5)


def test_unknown_option_names_itself(fake):
    with pytest.raises(ProviderError) as info:
        adapter(fake, cloud_typo="SECURE")
    assert info.value.kind == ErrorKind.INVALID_REQUEST and "cloud_typo" in info.value.msg


# -- plan ----------------------------------------------------------------------------------

def test_plan_prices_per_instance_and_orders_available_cheapest_first(fake):
    offers = adapter(fake).plan(ResourceRequest(vm_name="p", gpu="H100", gpu_count=2))
    got = [(o.region, o.instance_type, o.price_per_hour, o.available) for o in offers]
    # H100 PCIe (2.39/GPU) in US-KS-2, H100 SXM (2.69/GPU) in EU-RO-1, then SXM in US-TX-3 (NONE).
    assert got == [("US-KS-2", "NVIDIA H100 PCIe x2", 4.78, True),
                   ("EU-RO-1", "NVIDIA H100 80GB HBM3 x2", 5.38, True),
                   ("US-TX-3", "NVIDIA H100 80GB HBM3 x2", 5.38, False)]
    assert all(o.gpu == "H100" and o.gpu_count == 2 and o.cloud == "runpod" for o in offers)
    assert "no stock" in offers[-1].unavailable_reason and "US-TX-3" in offers[-1].unavailable_reason
    assert offers[0].detail == {"gpu_type_id": "NVIDIA H100 PCIe", "gpu_count": 2, "cloud_type": "SECURE",
                                "availability": "LOW"}
    query = fake.calls_of("catalog.gpus")[-1][3]
    assert query == {"include": ["AVAILABILITY"], "product": ["POD"], "count": ["2"], "cloud": ["SECURE"]}


def test_plan_community_prices(fake):
    offers = adapter(fake, cloud_type="COMMUNITY").plan(ResourceRequest(vm_name="p", gpu="RTX4090"))
    assert {o.price_per_hour for o in offers} == {0.34}
    assert fake.calls_of("catalog.gpus")[-1][3]["cloud"] == ["COMMUNITY"]


def test_plan_regions_filter_and_order(fake):
    offers = adapter(fake, regions=["EU-RO-1", "US-KS-2"]).plan(ResourceRequest(vm_name="p", gpu="RTX4090"))
    assert [(o.region, o.available) for o in offers] == [("EU-RO-1", True), ("US-KS-2", False)]
    # the request's regions win over the option's
    request = ResourceRequest(vm_name="p", gpu="RTX4090", regions=["US-TX-3"])
    offers = adapter(fake, regions=["EU-RO-1"]).plan(request)
    assert [o.region for o in offers] == ["US-TX-3"]


def test_plan_out_of_stock_everywhere_is_one_unavailable_offer(fake):
    fake.set_stock("NVIDIA L4", "US-TX-3", "NONE")
    offers = adapter(fake).plan(ResourceRequest(vm_name="p", gpu="L4"))
    assert [(o.region, o.available) for o in offers] == [("any", False)]
    assert "availability NONE" in offers[0].unavailable_reason


def test_plan_unknown_gpu_count_and_cpu_are_invalid(fake):
    provider = adapter(fake)
    for request, words in ((ResourceRequest(vm_name="p", gpu="B200"), "no B200"),
                           (ResourceRequest(vm_name="p", gpu="H100", gpu_count=16), "at most 8 x"),
                           (ResourceRequest(vm_name="p", gpu=None), "name a gpu"),
                           (ResourceRequest(vm_name="p", gpu="L4", spot=True), "interruptible")):
        with pytest.raises(ProviderError) as info:
            provider.plan(request)
        assert info.value.kind == ErrorKind.INVALID_REQUEST and words in info.value.msg, info.value.msg


def test_gpu_ids_map_to_canonical_names():
    from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.gpus import GPUS
    assert set(catalog.GPU_IDS.values()) <= set(GPUS)
    assert catalog.canonical("NVIDIA H100 NVL") == "H100-NVL" and catalog.canonical("NVIDIA RTX A2000") is None
    # from RunPod's references/gpu-types table; a MIG slice is not a whole GPU and is never offered
    assert catalog.canonical("NVIDIA RTX PRO 4500 Blackwell") == "RTXPRO4500"
    assert catalog.canonical("NVIDIA RTX 4000 SFF Ada Generation") == "RTX4000ADA"
    assert catalog.canonical("NVIDIA RTX PRO 6000 Blackwell Server Edition MIG 1g.24gb") is None


# -- prepare / create ------------------------------------------------------------------------

USERS_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBBBB user@desk"


def test_prepare_registers_the_key_beside_the_accounts_own_and_names_it(fake):
    fake.account_keys = [USERS_KEY]
    provider = adapter(fake)
    offer = provider.plan(ResourceRequest(vm_name="pod-a", gpu="RTX4090"))[0]
    prepared = provider.prepare(offer, spec(open_ports=[22, 8888]))
    name = prepared["ssh_key_name"]
    assert name.startswith("gpuprov-pod-a-") and len(name) == len("gpuprov-pod-a-") + 12
    assert prepared["public_key"] == " ".join(KEY.split()[:2] + [name])
    assert prepared["ports"] == ["22/tcp", "8888/tcp"]
    assert fake.account_keys == [USERS_KEY, prepared["public_key"]]
    # again (a retried prepare, or another VM with the same key): reused, not written twice
    assert provider.prepare(offer, spec()) == dict(prepared, ports=["22/tcp"])
    provider.prepare(offer, spec("pod-b"))
    assert fake.account_keys == [USERS_KEY, prepared["public_key"]] and len(fake.calls_of("ssh_keys.put")) == 1


def test_a_key_registered_under_another_comment_is_reused(fake):
    fake.account_keys = [" ".join(KEY.split()[:2]) + " my laptop"]
    provider = adapter(fake)
    provider.prepare(provider.plan(ResourceRequest(vm_name="pod-a", gpu="RTX4090"))[0], spec())
    assert fake.calls_of("ssh_keys.put") == [] and fake.account_keys == [" ".join(KEY.split()[:2]) + " my laptop"]
    provider.cleanup(Location("runpod", "US-TX-3"), "pod-a")
    assert fake.account_keys == [" ".join(KEY.split()[:2]) + " my laptop"]   # not ours to remove


def test_cleanup_removes_only_this_vms_key_lines(fake):
    provider = adapter(fake)
    offer = provider.plan(ResourceRequest(vm_name="pod-a", gpu="RTX4090"))[0]
    mine = provider.prepare(offer, spec())["public_key"]
    other_vm = catalog.key_line("pod-ab", USERS_KEY)["line"]
    fake.account_keys = [USERS_KEY, mine, other_vm]
    provider.cleanup(offer.location, "pod-a")
    assert fake.account_keys == [USERS_KEY, other_vm]
    before = len(fake.calls_of("ssh_keys.put"))
    provider.cleanup(offer.location, "pod-a")   # nothing left of it: no write
    assert len(fake.calls_of("ssh_keys.put")) == before


def test_cleanup_leaves_the_key_line_while_another_journals_pod_of_the_name_lives(fake):
    first, second = adapter(fake), RunpodProvider({"api_url": fake.api_url, "api_key": fake.token},
                                                  journal_id="j-2")
    offer = first.plan(ResourceRequest(vm_name="pod-a", gpu="RTX4090"))[0]
    pod_id = first.create(offer, first.prepare(offer, spec()), spec())
    registered = list(fake.account_keys)
    second.cleanup(offer.location, "pod-a")
    assert fake.account_keys == registered and registered
    first.delete(offer.location, "pod-a", [pod_id])
    second.cleanup(offer.location, "pod-a")   # its pod gone: the line is nobody's now
    assert fake.account_keys == []


def test_a_malformed_key_list_is_classified(fake):
    fake.fail_next("ssh_keys.get", Reply(200, {"keys": "ssh-ed25519 AAAA"}))
    provider = adapter(fake)
    with pytest.raises(ProviderError) as info:
        provider.prepare(provider.plan(ResourceRequest(vm_name="pod-a", gpu="RTX4090"))[0], spec())
    assert info.value.kind == ErrorKind.FAILED and "account/ssh-keys" in info.value.msg
    assert fake.calls_of("ssh_keys.put") == []


@pytest.mark.parametrize("version", ["12", "12.4.1", "v12.4"])
def test_a_min_cuda_version_the_create_body_refuses_is_refused_up_front(fake, version):
    with pytest.raises(ProviderError) as info:
        adapter(fake, min_cuda_version=version)
    assert info.value.kind == ErrorKind.INVALID_REQUEST and "min_cuda_version: expected major.minor" in info.value.msg


def test_create_is_one_call_with_identity_in_name_and_env(fake):
    provider = adapter(fake, volume_gb=20, min_cuda_version="12.4")
    offer = provider.plan(ResourceRequest(vm_name="pod-a", gpu="RTX4090"))[0]
    pod_id = provider.create(offer, provider.prepare(offer, spec()), spec())
    creates = fake.calls_of("pods.create")
    assert len(creates) == 1 and [c[0] for c in fake.calls].count("pods.create") == 1
    sent = creates[0][4]
    assert sent["name"] == "pod-a" and sent["dataCenterIds"] == ["US-TX-3"]
    assert sent["gpu"] == {"id": "NVIDIA GeForce RTX 4090", "count": 1, "minCudaVersion": "12.4"}
    assert sent["env"][catalog.VM_NAME_ENV] == "pod-a" and sent["env"][catalog.JOURNAL_ID_ENV] == "j-1"
    assert sent["env"]["PUBLIC_KEY"].startswith(" ".join(KEY.split()[:2]))
    assert sent["ports"] == ["22/tcp"] and sent["startSsh"] is True and sent["cloud"] == "SECURE"
    assert sent["mounts"] == {"persistent": {"size": 20, "path": "/workspace"}}
    assert fake.pods[pod_id]["dataCenterId"] == "US-TX-3"


def test_create_capacity_when_the_stock_went(fake):
    provider = adapter(fake)
    offer = provider.plan(ResourceRequest(vm_name="pod-a", gpu="RTX4090"))[0]
    fake.set_stock("NVIDIA GeForce RTX 4090", offer.region, "NONE")
    with pytest.raises(ProviderError) as info:
        provider.create(offer, provider.prepare(offer, spec()), spec())
    assert info.value.kind == ErrorKind.CAPACITY and "no longer any instances" in info.value.msg
    assert fake.pods == {}


# -- observe ---------------------------------------------------------------------------------

def test_observe_boots_then_reports_the_direct_endpoint(fake):
    provider = adapter(fake)
    offer = provider.plan(ResourceRequest(vm_name="pod-a", gpu="RTX4090"))[0]
    pod_id = provider.create(offer, provider.prepare(offer, spec()), spec())
    first = provider.observe(offer.location, "pod-a")
    assert [(o.instance_id, o.status, o.endpoint) for o in first] == [(pod_id, Status.PENDING, None)]
    assert first[0].journal_id == "j-1" and "STARTING" in first[0].reason
    second = provider.observe(offer.location, "pod-a")[0]
    assert second.usable and second.endpoint.host == "127.0.0.1"
    direct = fake.pods[pod_id]["ssh"]["direct"]
    assert second.endpoint == SshEndpoint(direct["host"], direct["port"], direct["username"])


def test_observe_ignores_strangers_and_other_names(fake):
    provider = adapter(fake)
    offer = provider.plan(ResourceRequest(vm_name="pod-a", gpu="RTX4090"))[0]
    mine = provider.create(offer, provider.prepare(offer, spec()), spec())
    provider.create(offer, provider.prepare(offer, spec("pod-b")), spec("pod-b"))
    # a pod named like the VM, made by hand (no gpuprov env): not ours
    fake.pods["byhand"] = dict(fake.pods[mine], id="byhand", env={})
    assert [o.instance_id for o in provider.observe(offer.location, "pod-a")] == [mine]
    # another data center's location does not see it
    assert provider.observe(Location("runpod", "EU-RO-1"), "pod-a") == []


@pytest.mark.parametrize("pod,expected", [
    ({"ssh": {"direct": {"host": "195.26.233.3", "port": 34446, "username": "root"}}},
     SshEndpoint("195.26.233.3", 34446, "root")),
    ({"ssh": {"direct": None}, "runtime": {"ports": [
        {"private": 8888, "public": 40000, "type": "http", "ip": "1.2.3.4"},
        {"private": 22, "public": 40022, "type": "tcp", "ip": "1.2.3.4"}]}},
     SshEndpoint("1.2.3.4", 40022, "root")),
    ({"ssh": {"direct": None}, "runtime": {"ports": [{"private": 22, "public": None, "type": "tcp",
                                                     "ip": "1.2.3.4"}]}}, None),
    ({"ssh": {"direct": {"host": "", "port": 34446, "username": "root"}}, "runtime": None}, None),
    ({"ssh": {"proxy": {"host": "ssh.runpod.io", "port": 22, "username": "x-1"}, "direct": None}}, None),
    ({}, None),
])
def test_ssh_endpoint_needs_host_and_port(pod, expected):
    assert catalog.ssh_endpoint(pod) == expected


@pytest.mark.parametrize("vendor,status", [("PROVISIONING", Status.PENDING), ("STARTING", Status.PENDING),
                                           ("EXITED", Status.STOPPED), ("ERROR", Status.FAILED)])
def test_status_mapping(fake, vendor, status):
    provider = adapter(fake)
    offer = provider.plan(ResourceRequest(vm_name="pod-a", gpu="RTX4090"))[0]
    pod_id = provider.create(offer, provider.prepare(offer, spec()), spec())
    fake.pods[pod_id].update(status=vendor, _reads=-100)
    seen = provider.observe(offer.location, "pod-a")[0]
    # the fake's read moves a PROVISIONING pod on to STARTING, as RunPod's lifecycle does
    shown = "STARTING" if vendor == "PROVISIONING" else vendor
    assert (seen.status, seen.endpoint) == (status, None) and shown in seen.reason
    fake.pods[pod_id]["status"] = "TERMINATED"
    assert provider.observe(offer.location, "pod-a") == []


def test_diagnose_adds_vendor_fields(fake):
    provider = adapter(fake)
    offer = provider.plan(ResourceRequest(vm_name="pod-a", gpu="RTX4090"))[0]
    provider.create(offer, provider.prepare(offer, spec()), spec())
    found = provider.diagnose(offer.location, "pod-a")
    assert found["instances"][0]["vendor"]["dataCenterId"] == "US-TX-3"
    assert any("no firewall" in f for f in found["findings"])


# -- the fake refuses what RunPod refuses ----------------------------------------------------

def _post(fake, body, token=None):
    return requests.post(fake.api_url + "/pods", json=body,
                         headers={"Authorization": "Bearer %s" % (token or fake.token)}, timeout=10)


def test_fake_refuses_unknown_and_missing_fields(fake):
    reply = _post(fake, {"name": "x", "image": "i", "gpu": {"id": "NVIDIA L4", "size": 1}, "bogus": 1})
    assert reply.status_code == 422 and reply.headers["Content-Type"] == "application/problem+json"
    errors = reply.json()["errors"]
    assert "$: unknown field 'bogus'" in errors and "gpu: unknown field 'size'" in errors
    reply = _post(fake, {"image": "i", "gpu": {"id": "NVIDIA L4"}})
    assert reply.status_code == 422 and "$: missing field 'name'" in reply.json()["errors"]


@pytest.mark.parametrize("extra,violation", [
    ({"mounts": {"persistent": {"size": 5, "path": "/w"}}}, "mounts.persistent.size: must be an integer >= 10"),
    ({"mounts": {"persistent": {"size": 20}}}, "mounts.persistent: missing field 'path'"),
    ({"mounts": {"local": {}}}, "mounts: unknown field 'local'"),
    ({"startSsh": "yes"}, "startSsh: must be a boolean"),
    ({"dataCenterIds": "US-TX-3"}, "dataCenterIds: must be an array of strings"),
    ({"name": ""}, "name: must be at least 1 character"),
])
def test_fake_refuses_what_the_create_schema_refuses(fake, extra, violation):
    reply = _post(fake, dict({"name": "x", "image": "i", "gpu": {"id": "NVIDIA L4"}}, **extra))
    assert reply.status_code == 422 and violation in reply.json()["errors"]


def test_fake_refuses_a_bad_key_with_problem_json(fake):
    reply = _post(fake, {"name": "x"}, token="nope")
    assert reply.status_code == 401
    assert reply.json() == {"title": "Unauthorized", "status": 401, "detail": "invalid bearer token"}
    reply = requests.get(fake.api_url + "/pods", timeout=10)
    assert reply.status_code == 401 and reply.json()["detail"] == "missing bearer token"


def test_fake_catalog_needs_product_with_include(fake):
    reply = requests.get(fake.api_url + "/catalog/gpus", params={"include": "AVAILABILITY"},
                         headers={"Authorization": "Bearer " + fake.token}, timeout=10)
    assert reply.status_code == 400


def test_fake_account_keys_are_a_full_replacement(fake):
    auth = {"Authorization": "Bearer " + fake.token}
    assert requests.put(fake.api_url + "/account/ssh-keys", json={"keys": ["not a key"]}, headers=auth,
                        timeout=10).status_code == 422
    assert requests.put(fake.api_url + "/account/ssh-keys", json={"keys": [KEY]}, headers=auth,
                        timeout=10).json() == {"keys": [KEY]}
    assert requests.put(fake.api_url + "/account/ssh-keys", json={"keys": []}, headers=auth,
                        timeout=10).json() == {"keys": []}
