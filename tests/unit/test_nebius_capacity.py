"""The nebius offers' stock from the capacity advisor (capacity.v1.ResourceAdviceService.List of the
tenant) against the gRPC fake: a preset at AVAILABILITY_LEVEL_LIMIT_REACHED is unavailable with the
advisor's reason, every other level keeps it available, an advisor that cannot be consulted leaves every
offer available with a note, and the tenant comes from the option or from the project's parent."""

from __future__ import annotations

import pytest

pytest.importorskip("nebius")

import grpc  # noqa: E402

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import ResourceRequest  # noqa: E402
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.nebius import NebiusProvider, capacity  # noqa: E402
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.nebius.errors import NebiusError  # noqa: E402
from ansible_collections.gpuprov.cloud.tests.fakes.nebius_grpc import NebiusGrpcFake, service_error  # noqa: E402

BIG = ("gpu-h100-sxm", "8gpu-128vcpu-1600gb")
SMALL = ("gpu-h100-sxm", "1gpu-16vcpu-200gb")
H100 = ResourceRequest(vm_name="unit", gpu="H100", gpu_count=1)


@pytest.fixture
def fake(tmp_path):
    made = NebiusGrpcFake(str(tmp_path))
    yield made
    made.stop()


def adapter(fake, **extra) -> NebiusProvider:
    options = {"api_endpoint": fake.api_endpoint, "api_insecure": True, "iam_token": fake.token,
               "project_id": fake.project_id, "request_timeout_s": 10}
    options.update(extra)
    return NebiusProvider(options, journal_id="j1")


def by_preset(offers):
    return {(o.detail["platform"], o.detail["preset"]): o for o in offers}


def test_a_preset_at_limit_reached_is_unavailable_with_the_advisors_reason(fake):
    fake.capacity[BIG] = "LIMIT_REACHED"
    offers = by_preset(adapter(fake).plan(H100))
    big = offers[BIG]
    assert big.available is False
    assert "AVAILABILITY_LEVEL_LIMIT_REACHED" in big.unavailable_reason
    assert "on-demand" in big.unavailable_reason and "0 available of limit 16" in big.unavailable_reason
    assert big.detail["capacity"] == ["LIMIT_REACHED"]
    assert offers[SMALL].available is True and offers[SMALL].unavailable_reason is None
    assert offers[SMALL].detail["capacity"] == ["HIGH"]
    assert [c[0] for c in fake.calls].count("capacity_advice.list") == 1


@pytest.mark.parametrize("level", ["HIGH", "MEDIUM", "LOW", "UNKNOWN"])
def test_every_other_level_keeps_the_offer_available(fake, level):
    fake.capacity[BIG] = level
    big = by_preset(adapter(fake).plan(H100))[BIG]
    assert big.available is True and big.unavailable_reason is None
    assert big.detail["capacity"] == [level] and "capacity_unknown" not in big.detail


def test_spot_offers_read_the_preemptible_availability(fake):
    fake.capacity[BIG] = "LIMIT_REACHED"
    offers = by_preset(adapter(fake).plan(ResourceRequest(vm_name="unit", gpu="H100", gpu_count=1, spot=True)))
    assert offers[BIG].available is False and "preemptible" in offers[BIG].unavailable_reason


@pytest.mark.parametrize("code", [grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.NOT_FOUND,
                                  grpc.StatusCode.UNIMPLEMENTED, grpc.StatusCode.UNAVAILABLE])
def test_an_advisor_that_refuses_leaves_the_offers_available_with_a_note(fake, code):
    fake.capacity[BIG] = "LIMIT_REACHED"
    fake.fail_next("capacity_advice.list", code, "advisor says no", service_error("PermissionDenied"))
    offers = adapter(fake).plan(H100)
    assert offers and all(o.available for o in offers)
    for offer in offers:
        assert code.name in offer.detail["capacity_unknown"] and "capacity" not in offer.detail


def test_a_project_lookup_refused_leaves_the_offers_available_with_a_note(fake):
    fake.fail_next("projects.get", grpc.StatusCode.PERMISSION_DENIED, "no iam.projects.get")
    offers = adapter(fake).plan(H100)
    assert all(o.available for o in offers)
    assert all("ProjectService.Get" in o.detail["capacity_unknown"] for o in offers)
    assert "capacity_advice.list" not in [c[0] for c in fake.calls]


def test_the_tenant_is_the_projects_parent_when_no_option_names_it(fake):
    fake.tenant_id = "tenant-e00parent"
    adapter(fake).plan(H100)
    gets = [c[1] for c in fake.calls if c[0] == "projects.get"]
    assert [g.id for g in gets] == [fake.project_id]
    assert [c[1].parent_id for c in fake.calls if c[0] == "capacity_advice.list"] == ["tenant-e00parent"]


def test_the_tenant_option_is_used_without_reading_the_project(fake):
    fake.tenant_id = "tenant-e00option"
    fake.capacity[BIG] = "LIMIT_REACHED"
    offers = by_preset(adapter(fake, tenant_id="tenant-e00option").plan(H100))
    assert offers[BIG].available is False
    assert "projects.get" not in [c[0] for c in fake.calls]
    assert [c[1].parent_id for c in fake.calls if c[0] == "capacity_advice.list"] == ["tenant-e00option"]


def test_the_fake_refuses_a_missing_or_foreign_tenant_as_nebius_does(fake):
    provider = adapter(fake)
    with pytest.raises(NebiusError) as missing:
        capacity.advice(provider, "")
    assert missing.value.code == "INVALID_ARGUMENT" and "parent_id" in missing.value.msg
    with pytest.raises(NebiusError) as foreign:
        capacity.advice(provider, "tenant-e00someoneelse")
    assert foreign.value.code == "PERMISSION_DENIED"
    notes = adapter(fake, tenant_id="tenant-e00someoneelse").plan(H100)
    assert all(o.available and "PERMISSION_DENIED" in o.detail["capacity_unknown"] for o in notes)


def test_the_advisors_pages_are_all_read(fake, monkeypatch):
    monkeypatch.setattr(capacity, "PAGE_SIZE", 1)
    fake.capacity[BIG] = "LIMIT_REACHED"
    assert by_preset(adapter(fake).plan(H100))[BIG].available is False
    assert [c[0] for c in fake.calls].count("capacity_advice.list") > 1
