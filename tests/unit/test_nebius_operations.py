"""A Nebius create that fails inside its Operation (no hosts for the preset, or the project's quota),
against the gRPC fake: observe reads the instance's operations once (OperationService.List on the
compute endpoint) and reports the classified reason; the instance left behind is still deleted;
the reason's read is best effort. Then the launch machine on the real adapter: a capacity failure
inside the create's operation blocks that offer only, tears the instance down and fails over."""

from __future__ import annotations

import pytest

pytest.importorskip("nebius")

import grpc  # noqa: E402

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (  # noqa: E402
    BlockScope, ErrorKind, InstanceSpec, Location, ProviderError, ResourceRequest, Status,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.nebius import NebiusProvider  # noqa: E402
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.nebius import operations  # noqa: E402
from ansible_collections.gpuprov.cloud.tests.fakes.nebius_grpc import NebiusGrpcFake  # noqa: E402
from ansible_collections.gpuprov.cloud.tests.fakes.scripted_provider import World  # noqa: E402

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGdwdXByb3YtY29uZm9ybWFuY2U unit@nebius"
CIDRS = ["198.51.100.7/32"]


@pytest.fixture
def fake(tmp_path):
    made = NebiusGrpcFake(str(tmp_path))
    yield made
    made.stop()


def adapter(fake, journal_id="j1") -> NebiusProvider:
    return NebiusProvider({"api_endpoint": fake.api_endpoint, "api_insecure": True, "iam_token": fake.token,
                           "project_id": fake.project_id, "ssh_port": fake.ssh_port, "request_timeout_s": 10,
                           "allowed_cidrs": CIDRS, "poll_interval_s": 5, "boot_timeout_s": 600},
                          journal_id=journal_id)


def created(fake, provider, vm="unit"):
    spec = InstanceSpec(vm_name=vm, ssh_public_key=KEY, allowed_cidrs=CIDRS)
    offer = provider.plan(ResourceRequest(vm_name=vm, gpu="H100"))[0]
    return provider.create(offer, provider.prepare(offer, spec), spec)


def calls(fake, key):
    return len([c for c in fake.calls if c[0] == key])


def observed_after_boot(fake, provider, vm="unit"):
    """Observe until the fake's boot reads have passed (the first observe still sees CREATING)."""
    first = provider.observe(Location("nebius", fake.region), vm)
    assert [o.status for o in first] == [Status.PENDING] and first[0].reason is None
    assert calls(fake, "operations.list") == 0   # nothing to explain while it is creating
    return provider.observe(Location("nebius", fake.region), vm)


def test_a_capacity_failure_inside_the_create_is_explained_and_the_instance_is_still_deleted(fake):
    provider = adapter(fake)
    fake.fail_create_operation("capacity")
    instance_id = created(fake, provider)
    found = observed_after_boot(fake, provider)
    assert [(o.instance_id, o.status) for o in found] == [(instance_id, Status.STOPPED)]
    reason = found[0].reason
    assert reason.startswith("Capacity: nebius InstanceService.Create: operation computeoperation-")
    assert "RESOURCE_EXHAUSTED" in reason and "NotEnoughResources" in reason and "block offer" in reason
    assert "nebius state STOPPED" in reason
    # one read of the instance's own operations, one page, per observe
    listed = [c[1] for c in fake.calls if c[0] == "operations.list"]
    assert len(listed) == 1 and listed[0].resource_id == instance_id and 1 <= listed[0].page_size <= 1000
    failure = operations.instance_failure(provider, instance_id)
    assert (failure.kind, failure.block_scope) == (ErrorKind.CAPACITY, BlockScope.OFFER)
    assert failure.code == "RESOURCE_EXHAUSTED"
    # the instance the failed create left behind stays until deleted, and delete removes it
    assert [i["state"] for i in fake.live()] == ["STOPPED"]
    provider.delete(Location("nebius", fake.region), "unit", [instance_id])
    assert [o.status for o in provider.observe(Location("nebius", fake.region), "unit")] == [Status.TERMINATING]
    assert provider.observe(Location("nebius", fake.region), "unit") == []
    assert fake.live() == [] and not {r for r in fake.resources() if r.startswith(("instance:", "disk:"))}


def test_a_quota_failure_inside_the_create_is_quota_for_the_region(fake):
    provider = adapter(fake)
    fake.fail_create_operation("quota", state="ERROR")
    instance_id = created(fake, provider)
    found = observed_after_boot(fake, provider)
    assert [(o.instance_id, o.status) for o in found] == [(instance_id, Status.FAILED)]
    assert found[0].reason.startswith("Quota: ") and "QuotaFailure" in found[0].reason
    assert "block region" in found[0].reason and "nebius state ERROR" in found[0].reason
    failure = operations.instance_failure(provider, instance_id)
    assert (failure.kind, failure.block_scope) == (ErrorKind.QUOTA, BlockScope.REGION)


def test_a_running_instance_reads_no_operations_and_its_create_finished_ok(fake):
    provider = adapter(fake)
    instance_id = created(fake, provider)
    found = observed_after_boot(fake, provider)
    assert [(o.status, o.reason) for o in found] == [(Status.RUNNING, None)]
    assert calls(fake, "operations.list") == 0
    assert operations.instance_failure(provider, instance_id) is None   # its Create finished OK


def test_without_kept_operations_the_reason_is_the_bare_state(fake):
    provider = adapter(fake)
    fake.fail_create_operation("capacity")
    created(fake, provider)
    fake.finish(fake.live()[0]["id"])
    fake.forget_operations()   # the README's retention policy: finished operations may be deleted
    found = provider.observe(Location("nebius", fake.region), "unit")
    assert [(o.status, o.reason) for o in found] == [(Status.STOPPED, "nebius state STOPPED")]


@pytest.mark.parametrize("code", [grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAVAILABLE,
                                  grpc.StatusCode.UNIMPLEMENTED])
def test_an_unreadable_operation_list_never_fails_observe(fake, code):
    """Teardown observes too: an explanation that cannot be read must not hold up a delete."""
    provider = adapter(fake)
    fake.fail_create_operation("capacity")
    created(fake, provider)
    fake.finish(fake.live()[0]["id"])
    fake.fail_next("operations.list", code, "no operations for you")
    found = provider.observe(Location("nebius", fake.region), "unit")
    assert [o.status for o in found] == [Status.STOPPED]
    assert found[0].reason.startswith("nebius state STOPPED (its operations could not be read: ")
    assert code.name in found[0].reason


def test_the_fake_refuses_an_operation_list_nebius_refuses(fake):
    from nebius.api.nebius.common.v1 import ListOperationsRequest
    provider = adapter(fake)
    for request, field in ((ListOperationsRequest(resource_id=""), "resource_id"),
                           (ListOperationsRequest(resource_id="computeinstance-e00x", page_size=5000), "page_size")):
        with pytest.raises(ProviderError) as raised:
            provider._call("OperationService.List", operations._operation_client, "list", request)
        assert raised.value.kind == ErrorKind.INVALID_REQUEST and field in raised.value.msg


# -- the launch machine on the real adapter -------------------------------------------------------------------

def test_launch_fails_over_when_the_create_operation_fails_for_capacity(tmp_path, fake):
    provider = adapter(fake)
    provider.cloud = "nebius"   # World keys its providers by .cloud (the scripted fakes' name for it)
    world = World(tmp_path, [provider])
    provider.journal_id = world.journal.journal_id
    offers = provider.plan(ResourceRequest(vm_name=world.name, gpu="H100"))
    assert len(offers) == 2   # two presets of gpu-h100-sxm in the project's region
    fake.fail_create_operation("capacity")

    out = world.launch()

    assert out.state["kind"] == "Ready", out.state
    search = out.state["search"]
    assert [(h["offer"], h["outcome"], h["error"]["block"]) for h in search["history"]] == [
        (offers[0].offer_id, "Capacity", "offer")]
    assert [b["offer_id"] for b in search["blocked"]] == [offers[0].offer_id]   # the offer only, not the region
    creates = [c[1] for c in fake.calls if c[0] == "instances.create"]
    assert [c.spec.resources.preset for c in creates] == [offers[0].detail["preset"], offers[1].detail["preset"]]
    # the instance the failed create left (STOPPED) was deleted by the compensation, never adopted
    deleted = [c[1].id for c in fake.calls if c[0] == "instances.delete"]
    running = out.state["vm"]["instance_id"]
    assert len(deleted) >= 1 and running not in deleted
    assert [(i["id"], i["state"]) for i in fake.live()] == [(running, "RUNNING")]
    assert sorted(r for r in fake.resources() if r.startswith("instance:")) == ["instance:%s" % world.name]
    assert sum(1 for r in fake.resources() if r.startswith("security-group:")) == 1   # no leftover group


def test_launch_blocks_the_region_when_the_create_operation_fails_for_quota(tmp_path, fake):
    provider = adapter(fake)
    provider.cloud = "nebius"
    world = World(tmp_path, [provider])
    provider.journal_id = world.journal.journal_id
    fake.fail_create_operation("quota")

    out = world.launch()

    first = out.state["search"]["history"][0]["error"]
    assert (first["kind"], first["block"]) == (ErrorKind.QUOTA, BlockScope.REGION)
