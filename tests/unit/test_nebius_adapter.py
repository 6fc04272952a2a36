"""The nebius adapter against the gRPC fake: offers (platform x preset, priced by the
billing calculator, cheapest first, spot filter, InvalidRequest asks), the create request
(labels, managed boot disk, public IP, security group, cloud-init with the key and boot
script), the security group and its rules (idempotent, journal-scoped), endpoints,
statuses, options, and the fake refusing what Nebius refuses."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("nebius")

import grpc  # noqa: E402

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (  # noqa: E402
    JOURNAL_ID_TAG, VM_NAME_TAG, BootScript, ErrorKind, InstanceSpec, Location, ProviderError, ResourceRequest,
    Status,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.nebius import (  # noqa: E402
    NebiusProvider, catalog,
)
from ansible_collections.gpuprov.cloud.tests.fakes.nebius_grpc import NebiusGrpcFake  # noqa: E402
from nebius.api.nebius.common.v1 import ResourceMetadata  # noqa: E402
from nebius.api.nebius.compute.v1 import InstanceRecoveryPolicy, InstanceServiceClient  # noqa: E402
from nebius.api.nebius.vpc.v1 import CreateSecurityRuleRequest  # noqa: E402

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGdwdXByb3YtY29uZm9ybWFuY2U unit@nebius"


@pytest.fixture
def fake(tmp_path):
    made = NebiusGrpcFake(str(tmp_path))
    yield made
    made.stop()


def adapter(fake, journal_id="j1", **extra) -> NebiusProvider:
    options = {"api_endpoint": fake.api_endpoint, "api_insecure": True, "iam_token": fake.token,
               "project_id": fake.project_id, "ssh_port": fake.ssh_port, "request_timeout_s": 10}
    options.update(extra)
    return NebiusProvider(options, journal_id=journal_id)


def spec(vm="unit", allowed_cidrs=("198.51.100.7/32",), **extra) -> InstanceSpec:
    return InstanceSpec(vm_name=vm, ssh_public_key=KEY, allowed_cidrs=list(allowed_cidrs), **extra)


def test_offers_are_platform_presets_priced_cheapest_first(fake):
    offers = adapter(fake).plan(ResourceRequest(vm_name="unit", gpu="H100", gpu_count=1))
    assert [(o.instance_type, o.gpu, o.gpu_count, o.price_per_hour, o.available, o.region) for o in offers] == [
        ("gpu-h100-sxm/1gpu-16vcpu-200gb", "H100", 1, 2.95, True, "eu-north1"),
        ("gpu-h100-sxm/8gpu-128vcpu-1600gb", "H100", 8, 23.6, True, "eu-north1")]
    assert offers[0].detail == {"platform": "gpu-h100-sxm", "preset": "1gpu-16vcpu-200gb", "vcpus": 16,
                                "memory_gib": 200, "capacity": ["HIGH"]}
    json.dumps([o.to_dict() for o in offers])


def test_gpu_count_filters_presets_and_cpu_asks_get_cpu_platforms(fake):
    provider = adapter(fake)
    assert [o.gpu_count for o in provider.plan(ResourceRequest(vm_name="u", gpu="H200", gpu_count=2))] == [8]
    cpu = provider.plan(ResourceRequest(vm_name="u", gpu=None))
    assert {o.detail["platform"] for o in cpu} == {"cpu-d3"} and all(o.gpu is None for o in cpu)


def test_impossible_asks_are_invalid_request(fake):
    provider = adapter(fake)
    with pytest.raises(ProviderError) as raised:
        provider.plan(ResourceRequest(vm_name="u", gpu="A100", gpu_count=1))
    assert raised.value.kind == ErrorKind.INVALID_REQUEST and "A100" in raised.value.msg
    with pytest.raises(ProviderError) as raised:
        provider.plan(ResourceRequest(vm_name="u", gpu="H100", gpu_count=16))
    assert raised.value.kind == ErrorKind.INVALID_REQUEST and "at most 8" in raised.value.msg
    with pytest.raises(ProviderError) as raised:
        provider.plan(ResourceRequest(vm_name="u", gpu="L40S", gpu_count=1, spot=True))
    assert raised.value.kind == ErrorKind.INVALID_REQUEST and "preemptible" in raised.value.msg


def test_spot_offers_are_preemptible_and_priced_as_such(fake):
    offers = adapter(fake).plan(ResourceRequest(vm_name="u", gpu="H100", gpu_count=1, spot=True))
    assert offers[0].spot and offers[0].price_per_hour == 1.475


def test_another_region_is_refused_naming_the_projects_and_prices_can_be_off(fake):
    provider = adapter(fake)
    before = len(fake.calls)
    with pytest.raises(ProviderError) as info:
        provider.plan(ResourceRequest(vm_name="u", gpu="H100", regions=["us-central1"]))
    assert info.value.kind == ErrorKind.INVALID_REQUEST and info.value.msg.startswith("regions:")
    assert "us-central1" in info.value.msg and provider.options["region"] in info.value.msg
    assert len(fake.calls) == before   # refused before any call
    assert provider.plan(ResourceRequest(vm_name="u", gpu="H100", regions=["us-central1", provider.options["region"]]))
    offers = adapter(fake, prices=False).plan(ResourceRequest(vm_name="u", gpu="H100"))
    assert offers and all(o.price_per_hour is None for o in offers)
    assert not [c for c in fake.calls if c[0] == "calculator.estimate_batch"][1:]


def test_create_is_one_call_with_identity_disk_network_and_cloud_init(fake):
    provider = adapter(fake, ssh_user="alice")
    offer = provider.plan(ResourceRequest(vm_name="unit", gpu="H100"))[0]
    prepared = provider.prepare(offer, spec(boot_script=BootScript("#!/bin/sh\necho hi", {"A": "1"})))
    before = len(fake.calls)
    instance_id = provider.create(offer, prepared, spec(boot_script=BootScript("#!/bin/sh\necho hi", {"A": "1"})))
    assert [c[0] for c in fake.calls[before:]] == ["instances.create"]
    request = fake.calls[-1][1]
    assert request.metadata.name == "unit" and request.metadata.parent_id == fake.project_id
    assert dict(request.metadata.labels) == {VM_NAME_TAG: "unit", JOURNAL_ID_TAG: "j1", "gpuprov-ssh-user": "alice"}
    body = request.spec
    assert (body.resources.platform, body.resources.preset) == ("gpu-h100-sxm", "1gpu-16vcpu-200gb")
    disk = body.boot_disk.managed_disk
    assert disk.name == "unit-boot" and disk.spec.size_gibibytes == 200
    assert disk.spec.source_image_family.image_family == "ubuntu22.04-cuda12"
    nic = body.network_interfaces[0]
    assert nic.subnet_id == "vpcsubnet-e00default" and nic.HasField("public_ip_address")
    assert [g.id for g in nic.security_groups] == [prepared["security_group_id"]]
    assert not body.HasField("preemptible")
    assert catalog.authorized_keys(body.cloud_init_user_data) == [("alice", KEY)]
    config = json.loads(body.cloud_init_user_data.split("\n", 1)[1])
    assert config["runcmd"] == [[catalog.BOOT_SCRIPT_PATH]] and config["write_files"][0]["encoding"] == "b64"
    assert instance_id in {i["id"] for i in fake.live()}


def test_observe_lifecycle_endpoint_and_journal(fake):
    provider = adapter(fake)
    offer = provider.plan(ResourceRequest(vm_name="unit", gpu="H100"))[0]
    instance_id = provider.create(offer, provider.prepare(offer, spec()), spec())
    location = offer.location
    first = provider.observe(location, "unit")
    assert [(o.instance_id, o.status, o.endpoint, o.journal_id) for o in first] == [
        (instance_id, Status.PENDING, None, "j1")]
    fake.finish(instance_id)
    running = provider.observe(location, "unit")[0]
    assert running.status == Status.RUNNING and running.endpoint.host.startswith("127.0.0.")
    assert (running.endpoint.port, running.endpoint.user) == (fake.ssh_port, "ubuntu")
    assert provider.observe(location, "other") == []
    provider.delete(location, "unit", [instance_id])
    assert provider.observe(location, "unit")[0].status == Status.TERMINATING
    fake.finish(instance_id)
    assert provider.observe(location, "unit") == []


@pytest.mark.parametrize("asked, policy, after", [(True, "FAIL", Status.STOPPED), (False, "RECOVER", Status.RUNNING)])
def test_a_vm_with_a_watchdog_is_created_to_stop_on_a_guest_poweroff(fake, asked, policy, after):
    # Nebius applies the recovery policy to a power-off from inside: RECOVER (the default) reboots and charges on,
    # FAIL leaves the VM stopped, and stopped time is not charged (docs/limits.md's billing table).
    provider = adapter(fake)
    offer = provider.plan(ResourceRequest(vm_name="unit", gpu="H100"))[0]
    asked_spec = spec(terminate_on_guest_shutdown=asked)
    instance_id = provider.create(offer, provider.prepare(offer, asked_spec), asked_spec)
    sent = [request for key, request in fake.calls if key == "instances.create"][-1]
    assert sent.spec.recovery_policy.name == policy
    assert ("recovery_policy=%s" % policy == provider.capabilities().poweroff_setting) is asked
    fake.finish(instance_id)
    assert fake.guest_poweroff(instance_id) == ("STOPPED" if asked else "RUNNING")
    seen = provider.observe(offer.location, "unit")[0]
    assert seen.status == after and fake.instances[instance_id]["reboots"] == (0 if asked else 1)
    assert provider.capabilities().poweroff_billing_of(asked) == ("ends_compute" if asked else "continues")


def test_error_state_is_failed_with_the_state_as_reason(fake):
    provider = adapter(fake)
    offer = provider.plan(ResourceRequest(vm_name="unit", gpu="H100"))[0]
    instance_id = provider.create(offer, provider.prepare(offer, spec()), spec())
    fake.instances[instance_id]["state"] = "ERROR"
    seen = provider.observe(offer.location, "unit")[0]
    assert (seen.status, seen.reason) == (Status.FAILED, "nebius state ERROR")


def test_security_group_is_idempotent_scoped_and_journal_owned(fake):
    provider = adapter(fake)
    offer = provider.plan(ResourceRequest(vm_name="unit", gpu="H100"))[0]
    first = provider.prepare(offer, spec())
    assert provider.prepare(offer, spec()) == first
    group = catalog.security_group_name("unit", "j1")
    assert fake.resources() == {"security-group:" + group, "security-rule:%s-in" % group,
                                "security-rule:%s-out" % group}
    ingress = next(r for r in fake.rules.values() if r["name"].endswith("-in"))["spec"].ingress
    assert list(ingress.source_cidrs) == ["198.51.100.7/32"]
    assert list(ingress.destination_ports) == sorted({22, fake.ssh_port})
    # wider CIDRs replace the rule, not add one
    provider.prepare(offer, spec(allowed_cidrs=["198.51.100.7/32", "203.0.113.0/24"]))
    assert len(fake.rules) == 2
    other = adapter(fake, journal_id="j2")
    other.cleanup(offer.location, "unit")
    assert "security-group:" + group in fake.resources()
    provider.cleanup(offer.location, "unit")
    provider.cleanup(offer.location, "unit")
    assert fake.resources() == set()


def test_prepare_refuses_open_world_and_too_many_cidrs(fake):
    provider = adapter(fake)
    offer = provider.plan(ResourceRequest(vm_name="unit", gpu="H100"))[0]
    for cidrs in ([], ["10.0.%d.0/24" % i for i in range(9)], ["198.51.100.7/32", "2001:db8::/64"]):
        with pytest.raises(ProviderError) as raised:
            provider.prepare(offer, spec(allowed_cidrs=cidrs))
        assert raised.value.kind == ErrorKind.INVALID_REQUEST and "allowed_cidrs" in raised.value.msg
    assert "IPv4 CIDRs only, got 2001:db8::/64" in raised.value.msg
    assert fake.resources() == set()


def test_the_fake_refuses_a_rule_source_that_is_not_an_ipv4_prefix(fake):
    from nebius.api.nebius.vpc.v1 import SecurityRuleServiceClient
    provider = adapter(fake)
    offer = provider.plan(ResourceRequest(vm_name="unit", gpu="H100"))[0]
    prepared = provider.prepare(offer, spec())
    group = catalog.security_group_name("unit", "j1")
    for bad in ("2001:db8::/64", "198.51.100.7/24"):
        rule = provider._wanted_rules(group, [bad], [22])[group + "-in"]
        with pytest.raises(ProviderError) as raised:
            provider._call("create", SecurityRuleServiceClient, "create", CreateSecurityRuleRequest(
                metadata=ResourceMetadata(parent_id=prepared["security_group_id"], name="x"), spec=rule))
        assert raised.value.kind == ErrorKind.INVALID_REQUEST and "source_cidrs[0]" in raised.value.msg


def test_cleanup_is_transient_while_an_instance_holds_the_group(fake):
    provider = adapter(fake)
    offer = provider.plan(ResourceRequest(vm_name="unit", gpu="H100"))[0]
    instance_id = provider.create(offer, provider.prepare(offer, spec()), spec())
    provider.delete(offer.location, "unit", [instance_id])
    with pytest.raises(ProviderError) as raised:
        provider.cleanup(offer.location, "unit")
    assert raised.value.kind == ErrorKind.TRANSIENT and "in use" in raised.value.msg
    fake.finish(instance_id)
    provider.cleanup(offer.location, "unit")
    assert fake.resources() == set()


def test_options_need_no_credentials_to_build_and_check_the_service_account(fake):
    provider = NebiusProvider({})
    assert provider.capabilities().boot_script and provider.secret_options == ("iam_token",)
    with pytest.raises(ProviderError) as raised:
        NebiusProvider({"project_id": "p", "service_account_id": "sa"}).plan(ResourceRequest(vm_name="u"))
    assert raised.value.kind == ErrorKind.INVALID_REQUEST and "go together" in raised.value.msg
    with pytest.raises(ProviderError) as raised:
        NebiusProvider({"iam_token": "t"}).plan(ResourceRequest(vm_name="u"))
    assert raised.value.kind == ErrorKind.INVALID_REQUEST and "project_id" in raised.value.msg


def test_platform_names_map_to_canonical_gpus():
    assert catalog.gpu_of("gpu-h100-sxm") == "H100" and catalog.gpu_of("gpu-b200-sxm-a") == "B200"
    assert catalog.gpu_of("gpu-h200-sxm-new") == "H200" and catalog.gpu_of("cpu-e2") is None
    assert catalog.public_address("203.0.113.9/32") == "203.0.113.9"


def test_the_fake_refuses_what_nebius_refuses(fake):
    provider = adapter(fake)
    offer = provider.plan(ResourceRequest(vm_name="unit", gpu="H100"))[0]
    prepared = provider.prepare(offer, spec())
    provider.create(offer, prepared, spec())
    with pytest.raises(ProviderError) as raised:  # the name is taken
        provider.create(offer, prepared, spec())
    assert raised.value.kind == ErrorKind.INVALID_REQUEST and "ALREADY_EXISTS" in raised.value.msg
    bad = offer.__class__.from_dict(dict(offer.to_dict(), detail=dict(offer.detail, preset="3gpu-x")))
    with pytest.raises(ProviderError) as raised:
        provider.create(bad, prepared, spec("unit-b"))
    assert raised.value.kind == ErrorKind.INVALID_REQUEST and "preset" in raised.value.msg
    big = provider.plan(ResourceRequest(vm_name="u", gpu="H100", gpu_count=8))[0]
    provider.create(big, prepared, spec("unit-d"))
    with pytest.raises(ProviderError) as raised:  # 1 + 8 + 8 GPUs > the fake's quota of 16
        provider.create(big, prepared, spec("unit-e"))
    assert raised.value.kind == ErrorKind.QUOTA and "QuotaFailure" in raised.value.msg
    with pytest.raises(ProviderError) as raised:  # another project
        adapter(fake, project_id="project-e00other").observe(offer.location, "unit")
    assert raised.value.kind == ErrorKind.CREDENTIALS and "PERMISSION_DENIED" in raised.value.msg
    always = provider._create_request(offer, prepared, spec("unit-g"))
    always.spec.recovery_policy = InstanceRecoveryPolicy.ALWAYS   # only for instances of an NVLink group
    with pytest.raises(ProviderError) as raised:
        provider._call("create", InstanceServiceClient, "create", always)
    assert raised.value.kind == ErrorKind.INVALID_REQUEST and "recovery_policy" in raised.value.msg
    fake.fail_capacity()
    with pytest.raises(ProviderError) as raised:
        provider.create(offer, prepared, spec("unit-f"))
    assert raised.value.kind == ErrorKind.CAPACITY
    assert grpc.StatusCode.RESOURCE_EXHAUSTED.name in raised.value.msg


def test_delete_asks_once_per_id_and_never_waits(fake):
    provider = adapter(fake)
    offer = provider.plan(ResourceRequest(vm_name="unit", gpu="H100"))[0]
    instance_id = provider.create(offer, provider.prepare(offer, spec()), spec())
    provider.delete(Location("nebius", "eu-north1"), "unit", [instance_id, instance_id])
    provider.delete(Location("nebius", "eu-north1"), "unit", [instance_id])
    assert [c[0] for c in fake.calls].count("instances.delete") == 2
    assert fake.instances[instance_id]["state"] == "DELETING"


def test_user_data_over_nebius_limit_is_refused_before_any_call(fake):
    # InstanceSpec.cloud_init_user_data is string {max_len: 32768} (nebius/api compute/v1/instance.proto).
    provider = adapter(fake)
    offer = provider.plan(ResourceRequest(vm_name="unit", gpu="H100"))[0]
    big = spec(boot_script=BootScript("#!/bin/sh\n" + "echo 0123456789abcdef\n" * 1300))
    before = len(fake.calls)
    with pytest.raises(ProviderError) as raised:
        provider.prepare(offer, big)
    assert raised.value.kind == ErrorKind.INVALID_REQUEST and "at most 32768" in raised.value.msg
    assert len(fake.calls) == before
    prepared = provider.prepare(offer, spec())
    with pytest.raises(ProviderError) as raised:
        provider.create(offer, prepared, big)
    assert raised.value.kind == ErrorKind.INVALID_REQUEST and not fake.live()


def test_the_fake_refuses_user_data_over_32768_characters(fake):
    from nebius.api.nebius.compute.v1 import InstanceServiceClient
    provider = adapter(fake)
    offer = provider.plan(ResourceRequest(vm_name="unit", gpu="H100"))[0]
    request = provider._create_request(offer, provider.prepare(offer, spec()), spec())
    request.spec.cloud_init_user_data = "#cloud-config\n" + "#" * 32768
    with pytest.raises(ProviderError) as raised:
        provider._call("create", InstanceServiceClient, "create", request)
    assert raised.value.kind == ErrorKind.INVALID_REQUEST and "cloud_init_user_data" in raised.value.msg


@pytest.mark.parametrize("code", [grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNIMPLEMENTED])
def test_a_calculator_that_refuses_leaves_the_offers_unpriced(fake, code):
    # billing.v1.CalculatorService is another service on another host: compute offers do not depend on it.
    fake.fail_next("calculator.estimate_batch", code, "no calculator for you")
    offers = adapter(fake).plan(ResourceRequest(vm_name="unit", gpu="H100"))
    assert offers and all(o.price_per_hour is None and o.available for o in offers)
    assert code.name in offers[0].detail["price_unknown"]


def test_a_calculator_that_fails_transiently_fails_the_plan_for_the_core_to_retry(fake):
    fake.unavailable("calculator.estimate_batch")
    with pytest.raises(ProviderError) as raised:
        adapter(fake).plan(ResourceRequest(vm_name="unit", gpu="H100"))
    assert raised.value.kind == ErrorKind.TRANSIENT
