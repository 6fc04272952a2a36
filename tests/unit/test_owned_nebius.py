"""NebiusProvider.sweep_locations / list_owned (the orphan sweep's listing) through the nebius SDK
against the gRPC fake: instances and security groups made through the adapter's own
prepare/create for this journal, another one and none, plus an unlabelled instance and group;
every page of both listings."""

from __future__ import annotations

import pytest

pytest.importorskip("nebius")

import grpc  # noqa: E402

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (  # noqa: E402
    ANY_REGION, ErrorKind, InstanceSpec, Location, ProviderError, ResourceKind, ResourceRequest, Status,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.nebius import NebiusProvider  # noqa: E402
from ansible_collections.gpuprov.cloud.tests.fakes.nebius_grpc import NebiusGrpcFake  # noqa: E402

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGdwdXByb3YtY29uZm9ybWFuY2U unit@nebius"
JOURNAL, OTHER = "journal-1", "journal-2"


@pytest.fixture
def fake(tmp_path):
    made = NebiusGrpcFake(str(tmp_path))
    yield made
    made.stop()


def make(fake, journal_id=None):
    return NebiusProvider({"api_endpoint": fake.api_endpoint, "api_insecure": True, "iam_token": fake.token,
                           "project_id": fake.project_id, "ssh_port": fake.ssh_port, "request_timeout_s": 10,
                           "prices": False}, journal_id=journal_id)


def launch(provider, vm):
    offer = provider.plan(ResourceRequest(vm_name=vm, gpu="H100"))[0]
    spec = InstanceSpec(vm_name=vm, ssh_public_key=KEY, allowed_cidrs=["198.51.100.7/32"])
    prepared = provider.prepare(offer, spec)
    return offer, prepared, provider.create(offer, prepared, spec)


def test_sweep_locations_is_the_project_region(fake):
    assert make(fake).sweep_locations() == [Location("nebius", fake.region)]
    assert fake.calls == []


def test_list_owned_lists_every_journal_s_instances_and_groups(fake):
    offer, mine_prep, mine = launch(make(fake, JOURNAL), "own1")
    _offer, other_prep, other = launch(make(fake, OTHER), "own2")
    _offer, legacy_prep, legacy = launch(make(fake), "own3")
    # Without gpuprov's labels: never listed.
    fake.instances["stranger"] = dict(fake.instances[mine], id="stranger", name="stranger", labels={"team": "ml"})
    fake.security_groups["lookalike"] = dict(fake.security_groups[mine_prep["security_group_id"]], id="lookalike",
                                             name="gpuprov-lookalike", labels={})

    found = make(fake, JOURNAL).list_owned(Location("nebius", ANY_REGION))
    by_id = {o.resource_id: o for o in found}
    groups = [p["security_group_id"] for p in (mine_prep, other_prep, legacy_prep)]
    assert sorted(by_id) == sorted([mine, other, legacy] + groups)
    for resource_id, kind, vm_name, journal_id in [
            (mine, ResourceKind.INSTANCE, "own1", JOURNAL), (other, ResourceKind.INSTANCE, "own2", OTHER),
            (legacy, ResourceKind.INSTANCE, "own3", None), (groups[0], ResourceKind.SECURITY_GROUP, "own1", JOURNAL),
            (groups[1], ResourceKind.SECURITY_GROUP, "own2", OTHER),
            (groups[2], ResourceKind.SECURITY_GROUP, "own3", None)]:
        owned = by_id[resource_id]
        assert (owned.kind, owned.vm_name, owned.journal_id, owned.location) == (
            kind, vm_name, journal_id, offer.location)
    assert by_id[mine].status in (Status.PENDING, Status.RUNNING) and by_id[mine].price_per_hour is None
    assert by_id[groups[0]].status is None
    # the project's region is the only one with anything
    assert sorted(o.resource_id for o in make(fake).list_owned(offer.location)) == sorted(by_id)
    assert make(fake).list_owned(Location("nebius", "us-central1")) == []


def test_deleting_instances_are_listed_as_terminating(fake):
    offer, _prepared, mine = launch(make(fake, JOURNAL), "own1")
    make(fake, JOURNAL).delete(offer.location, "own1", [mine])
    (seen,) = [o for o in make(fake).list_owned(offer.location) if o.kind == ResourceKind.INSTANCE]
    assert seen.status == Status.TERMINATING


def test_list_owned_follows_the_pages(fake):
    for vm in ("own1", "own2", "own3"):
        launch(make(fake, JOURNAL), vm)
    fake.page_size = 2
    found = make(fake).list_owned(Location("nebius", ANY_REGION))
    assert sorted(o.vm_name for o in found if o.kind == ResourceKind.INSTANCE) == ["own1", "own2", "own3"]
    assert sorted(o.vm_name for o in found if o.kind == ResourceKind.SECURITY_GROUP) == ["own1", "own2", "own3"]
    for key in ("instances.list", "security_groups.list"):
        assert [request.page_token for k, request in fake.calls if k == key] == ["", "2"]


@pytest.mark.parametrize("key", ["instances.list", "security_groups.list"])
def test_list_owned_classifies_api_errors(fake, key):
    fake.fail_next(key, grpc.StatusCode.UNAUTHENTICATED, "token expired")
    with pytest.raises(ProviderError) as info:
        make(fake).list_owned(Location("nebius", ANY_REGION))
    assert info.value.kind == ErrorKind.CREDENTIALS
