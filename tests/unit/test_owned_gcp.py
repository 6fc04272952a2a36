"""GcpProvider.sweep_locations / list_owned (the orphan sweep's listing) through the real
google-cloud-compute REST client against the HTTP fake (tests/fakes/gcp_compute.py).

Instances and firewall rules are made through the adapter's own prepare/create for three
journals (this one, another, none), plus an instance and a rule without gpuprov's identity.
"""

from __future__ import annotations

import pytest

pytest.importorskip("google.cloud.compute_v1")
pytest.importorskip("pytest_httpserver")

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (  # noqa: E402
    ANY_REGION, ErrorKind, InstanceSpec, Location, ProviderError, ResourceKind, ResourceRequest, Status,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.gcp import GcpProvider  # noqa: E402
from ansible_collections.gpuprov.cloud.tests.fakes.gcp_compute import GcpComputeFake  # noqa: E402

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGdwdXByb3Y test@controller"
JOURNAL = "journal-a"
OTHER = "journal-b"


@pytest.fixture
def fake():
    made = GcpComputeFake()
    yield made
    made.stop()


def make(fake, journal_id=None):
    return GcpProvider({"project": fake.project, "api_endpoint": fake.url, "read_retry_s": 0}, journal_id=journal_id)


def launch(provider, name, gpu="L4", spot=False, regions=None):
    offer = provider.plan(ResourceRequest(vm_name=name, gpu=gpu, spot=spot, regions=regions or []))[0]
    spec = InstanceSpec(vm_name=name, ssh_public_key=KEY, allowed_cidrs=["198.51.100.7/32"])
    prepared = provider.prepare(offer, spec)
    return offer, prepared["firewall"], provider.create(offer, prepared, spec)


def test_sweep_locations_is_one_global_listing(fake):
    assert make(fake).sweep_locations() == [Location("gcp", ANY_REGION)]
    assert fake.calls == []


def test_list_owned_lists_every_journal_s_instances_and_rules(fake):
    mine_offer, mine_rule, mine = launch(make(fake, JOURNAL), "own1")
    other_offer, other_rule, other = launch(make(fake, OTHER), "own2", gpu="T4", regions=["us-west1"])
    _offer, legacy_rule, legacy = launch(make(fake), "own3", spot=True)
    # Without gpuprov's identity: an unlabelled instance, a rule of the prefix without the described identity.
    _offer, _rule, stranger = launch(make(fake), "strng")
    fake.instances[(mine_offer.zone, stranger)]["labels"] = {"team": "ml"}
    fake.firewalls["gpuprov-lookalike"] = dict(fake.firewalls[mine_rule], name="gpuprov-lookalike",
                                               description="someone else's")
    fake.firewalls["allow-ssh"] = dict(fake.firewalls[mine_rule], name="allow-ssh")

    found = make(fake, JOURNAL).list_owned(Location("gcp", ANY_REGION))
    by_id = {o.resource_id: o for o in found}
    assert sorted(by_id) == sorted([mine, other, legacy, mine_rule, other_rule, legacy_rule, "gpuprov-strng"])
    for resource_id, kind, vm_name, journal_id in [
            (mine, ResourceKind.INSTANCE, "own1", JOURNAL), (other, ResourceKind.INSTANCE, "own2", OTHER),
            (legacy, ResourceKind.INSTANCE, "own3", None), (mine_rule, ResourceKind.FIREWALL, "own1", JOURNAL),
            (other_rule, ResourceKind.FIREWALL, "own2", OTHER), (legacy_rule, ResourceKind.FIREWALL, "own3", None)]:
        assert (by_id[resource_id].kind, by_id[resource_id].vm_name, by_id[resource_id].journal_id) == (
            kind, vm_name, journal_id)
    assert by_id[mine].location == mine_offer.location == Location("gcp", "us-central1", "us-central1-a")
    assert by_id[other].location == other_offer.location and other_offer.region == "us-west1"
    assert by_id[mine_rule].location == Location("gcp", "global") and by_id[mine_rule].status is None
    assert {by_id[i].status for i in (mine, other, legacy)} == {Status.PENDING}
    # the catalog's on-demand price of the shape (g2-standard-4; n1-standard-4 + 1 x T4); Spot: none
    assert (by_id[mine].price_per_hour, by_id[other].price_per_hour, by_id[legacy].price_per_hour) == (
        0.71, 0.54, None)
    # the stranger's instance is not listed, its rule (made by prepare, with the identity) is
    assert by_id["gpuprov-strng"].vm_name == "strng"


def test_a_region_or_zone_narrows_instances_and_leaves_rules_to_global(fake):
    mine_offer, rule, mine = launch(make(fake, JOURNAL), "own1")
    _offer, west_rule, west = launch(make(fake, JOURNAL), "own2", gpu="T4", regions=["us-west1"])
    fake.settle(mine_offer.zone, mine)
    (seen,) = make(fake).list_owned(Location("gcp", "us-central1"))
    assert (seen.resource_id, seen.status) == (mine, Status.RUNNING)
    assert make(fake).list_owned(Location("gcp", "us-central1", "us-central1-b")) == []
    assert [o.resource_id for o in make(fake).list_owned(Location("gcp", "us-west1"))] == [west]
    assert sorted(o.resource_id for o in make(fake).list_owned(Location("gcp", "global"))) == sorted([rule, west_rule])


def test_list_owned_shows_stopping_instances(fake):
    offer, _rule, mine = launch(make(fake, JOURNAL), "own1")
    fake.set_status(offer.zone, mine, "STOPPING")
    (seen,) = [o for o in make(fake).list_owned(Location("gcp", ANY_REGION)) if o.kind == ResourceKind.INSTANCE]
    assert seen.status == Status.STOPPING


def test_list_owned_follows_pages_of_both_listings(fake):
    names = ["own%d" % i for i in range(3)]
    for name in names:
        launch(make(fake, JOURNAL), name)
    fake.page_size = 2
    found = make(fake).list_owned(Location("gcp", ANY_REGION))
    assert sorted(o.vm_name for o in found if o.kind == ResourceKind.INSTANCE) == names
    assert sorted(o.vm_name for o in found if o.kind == ResourceKind.FIREWALL) == names
    for key in ("instances.aggregatedList", "firewalls.list"):
        pages = fake.calls_of(key)
        assert len(pages) == 2 and pages[1]["args"]["pageToken"] == "2"
    assert fake.calls_of("instances.aggregatedList")[0]["args"]["filter"] == "labels.gpuprov-vm-name:*"


@pytest.mark.parametrize("call", ["instances.aggregatedList", "firewalls.list"])
@pytest.mark.parametrize("status,reason,kind", [(403, "forbidden", ErrorKind.CREDENTIALS),
                                                (503, "backendError", ErrorKind.TRANSIENT)])
def test_list_owned_classifies_api_errors(fake, call, status, reason, kind):
    fake.fail_next(call, status, reason)
    with pytest.raises(ProviderError) as info:
        make(fake).list_owned(Location("gcp", ANY_REGION))
    assert info.value.kind == kind
