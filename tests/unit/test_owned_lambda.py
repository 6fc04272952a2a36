"""LambdaProvider.sweep_locations / list_owned (the orphan sweep's listing) against the Lambda
API fake: instances, rulesets and SSH keys made through the adapter's own prepare/create for
this journal, another one and none, plus resources without gpuprov's identity."""

from __future__ import annotations

import pytest

pytest.importorskip("requests")

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (  # noqa: E402
    ANY_REGION, ErrorKind, InstanceSpec, Location, ProviderError, ResourceKind, ResourceRequest, Status,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.lambda_cloud import (  # noqa: E402
    LambdaProvider,
)
from ansible_collections.gpuprov.cloud.tests.fakes.lambda_api import LambdaApiFake  # noqa: E402

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIK0d3mPZbYzBq2Vj7xTq3gJc0f3yDqYbq6mJ0Yx1lW2Q me@laptop"
JOURNAL, OTHER = "journal-1", "journal-2"
EVERYWHERE = Location("lambda", ANY_REGION)


@pytest.fixture
def fake(tmp_path):
    made = LambdaApiFake(str(tmp_path))
    yield made
    made.stop()


def make(fake, journal_id=None):
    return LambdaProvider({"api_url": fake.api_url, "api_key": fake.token, "ssh_port": fake.ssh_port},
                          journal_id=journal_id)


def launch(provider, vm):
    offer = next(o for o in provider.plan(ResourceRequest(vm_name=vm, gpu="A10")) if o.available)
    spec = InstanceSpec(vm_name=vm, ssh_public_key=KEY, allowed_cidrs=["203.0.113.9/32"])
    prepared = provider.prepare(offer, spec)
    return offer, prepared, provider.create(offer, prepared, spec)


def test_sweep_locations_is_one_account_wide_listing(fake):
    assert make(fake).sweep_locations() == [EVERYWHERE]
    assert fake.calls == []


def test_list_owned_lists_instances_rulesets_and_keys_of_every_journal(fake):
    offer, mine_prep, mine = launch(make(fake, JOURNAL), "own1")
    _offer, other_prep, other = launch(make(fake, OTHER), "own2")
    _offer, legacy_prep, legacy = launch(make(fake), "own3")
    # Without gpuprov's identity: an untagged instance, a ruleset and a key of other names.
    fake.instances["stranger"] = dict(fake.instances[mine], id="stranger", name="own1", tags=[])
    fake.rulesets["allow-web"] = dict(fake.rulesets[mine_prep["firewall_ruleset_id"]], id="allow-web",
                                      name="allow-web", instance_ids=[])
    fake.ssh_keys["laptop"] = {"id": "laptop", "name": "laptop", "public_key": KEY}

    found = make(fake, JOURNAL).list_owned(EVERYWHERE)
    by_id = {o.resource_id: o for o in found}
    rulesets = [p["firewall_ruleset_id"] for p in (mine_prep, other_prep, legacy_prep)]
    (key_id,) = [k["id"] for k in fake.ssh_keys.values() if k["name"] == mine_prep["ssh_key_name"]]
    assert sorted(by_id) == sorted([mine, other, legacy, key_id] + rulesets)
    expected = [(mine, ResourceKind.INSTANCE, "own1", JOURNAL), (other, ResourceKind.INSTANCE, "own2", OTHER),
                (legacy, ResourceKind.INSTANCE, "own3", None),
                (rulesets[0], ResourceKind.FIREWALL, "own1", JOURNAL),
                (rulesets[2], ResourceKind.FIREWALL, "own3", None),
                (key_id, ResourceKind.SSH_KEY, "own1", None)]   # keys are shared by material, no journal
    for resource_id, kind, vm_name, journal_id in expected:
        assert (by_id[resource_id].kind, by_id[resource_id].vm_name, by_id[resource_id].journal_id) == (
            kind, vm_name, journal_id)
    # another journal's ruleset names only the hash of its id: foreign all the same
    other_rule = by_id[rulesets[1]]
    assert other_rule.vm_name == "own2" and other_rule.journal_id not in (None, JOURNAL)
    assert by_id[mine].location == Location("lambda", offer.region)
    assert by_id[rulesets[0]].location == Location("lambda", offer.region)
    assert by_id[key_id].location == Location("lambda", "global")
    assert by_id[mine].status in (Status.PENDING, Status.RUNNING)
    assert by_id[mine].price_per_hour == offer.price_per_hour and offer.price_per_hour
    assert by_id[rulesets[0]].price_per_hour is None and by_id[rulesets[0]].status is None


def test_a_region_narrows_the_result_and_leaves_keys_to_global(fake):
    offer, prepared, mine = launch(make(fake, JOURNAL), "own1")
    in_region = make(fake).list_owned(Location("lambda", offer.region))
    assert sorted(o.resource_id for o in in_region) == sorted([mine, prepared["firewall_ruleset_id"]])
    elsewhere = "us-west-1" if offer.region != "us-west-1" else "us-east-1"
    assert make(fake).list_owned(Location("lambda", elsewhere)) == []
    assert [o.kind for o in make(fake).list_owned(Location("lambda", "global"))] == [ResourceKind.SSH_KEY]


def test_terminating_instances_are_listed_and_gone_ones_omitted(fake):
    offer, _prepared, mine = launch(make(fake, JOURNAL), "own1")
    make(fake, JOURNAL).delete(offer.location, "own1", [mine])
    (seen,) = [o for o in make(fake).list_owned(EVERYWHERE) if o.kind == ResourceKind.INSTANCE]
    assert seen.status == Status.TERMINATING
    fake.finish(mine)
    assert [o for o in make(fake).list_owned(EVERYWHERE) if o.kind == ResourceKind.INSTANCE] == []


@pytest.mark.parametrize("key", ["instances.list", "firewall-rulesets.list", "ssh-keys.list"])
def test_list_owned_classifies_api_errors(fake, key):
    fake.bad_auth(key)
    with pytest.raises(ProviderError) as info:
        make(fake).list_owned(EVERYWHERE)
    assert info.value.kind == ErrorKind.CREDENTIALS
