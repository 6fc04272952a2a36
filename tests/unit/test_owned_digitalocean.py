"""DigitalOceanProvider.sweep_locations / list_owned (the orphan sweep's listing) against the
DigitalOcean API fake: GPU and CPU droplets, firewalls, their tags and SSH keys made through the
adapter's own prepare/create for this journal, another one and none, plus resources without
gpuprov's identity; every page of a listing."""

from __future__ import annotations

import pytest

pytest.importorskip("requests")

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (  # noqa: E402
    ANY_REGION, ErrorKind, InstanceSpec, Location, ProviderError, ResourceKind, ResourceRequest, Status,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.digitalocean import (  # noqa: E402
    DigitalOceanProvider,
)
from ansible_collections.gpuprov.cloud.tests.fakes.digitalocean_api import (  # noqa: E402
    DigitalOceanApiFake, public_key,
)

KEYS = [public_key("user%d@test" % n, b"owned %d" % n) for n in range(3)]
JOURNAL, OTHER = "journal-1", "journal-2"
EVERYWHERE = Location("digitalocean", ANY_REGION)


@pytest.fixture
def fake(tmp_path):
    made = DigitalOceanApiFake(str(tmp_path))
    yield made
    made.stop()


def make(fake, journal_id=None):
    return DigitalOceanProvider({"api_url": fake.api_url, "api_key": fake.token, "ssh_port": fake.ssh_port},
                                journal_id=journal_id)


def launch(provider, vm, key, gpu="RTX4000ADA"):
    offer = next(o for o in provider.plan(ResourceRequest(vm_name=vm, gpu=gpu)) if o.available)
    spec = InstanceSpec(vm_name=vm, ssh_public_key=key, allowed_cidrs=["203.0.113.9/32"])
    prepared = provider.prepare(offer, spec)
    return offer, prepared, provider.create(offer, prepared, spec)


def test_sweep_locations_is_one_account_wide_listing(fake):
    assert make(fake).sweep_locations() == [EVERYWHERE]
    assert fake.calls == []


def test_list_owned_lists_droplets_firewalls_tags_and_keys(fake):
    offer, mine_prep, mine = launch(make(fake, JOURNAL), "own1", KEYS[0])
    cpu_offer, other_prep, other = launch(make(fake, OTHER), "own2", KEYS[1], gpu=None)
    _offer, legacy_prep, legacy = launch(make(fake), "own3", KEYS[2])
    # Without gpuprov's identity: an untagged droplet, a firewall, a tag and a key of other names.
    fake.droplets[999999] = dict(fake.droplets[int(mine)], id=999999, tags=["team:ml"])
    fake.firewalls["web"] = dict(fake.firewalls[mine_prep["firewall_id"]], id="web", name="web")
    fake.tags["env:prod"] = {"name": "env:prod"}
    fake.ssh_keys[424242] = dict(fake.ssh_keys[mine_prep["ssh_key_id"]], id=424242, name="laptop")

    found = make(fake, JOURNAL).list_owned(EVERYWHERE)
    by_id = {(o.kind, o.resource_id): o for o in found}
    preps = (mine_prep, other_prep, legacy_prep)
    assert sorted(by_id) == sorted(
        [(ResourceKind.INSTANCE, i) for i in (mine, other, legacy)]
        + [(ResourceKind.FIREWALL, p["firewall_id"]) for p in preps]
        + [(ResourceKind.OTHER, p["firewall_tag"]) for p in preps]
        + [(ResourceKind.SSH_KEY, str(p["ssh_key_id"])) for p in preps])
    for key, vm_name, journal_id in [
            ((ResourceKind.INSTANCE, mine), "own1", JOURNAL), ((ResourceKind.INSTANCE, other), "own2", OTHER),
            ((ResourceKind.INSTANCE, legacy), "own3", None),
            ((ResourceKind.FIREWALL, mine_prep["firewall_id"]), "own1", JOURNAL),
            ((ResourceKind.FIREWALL, legacy_prep["firewall_id"]), "own3", None),
            ((ResourceKind.OTHER, mine_prep["firewall_tag"]), "own1", JOURNAL),
            ((ResourceKind.SSH_KEY, str(mine_prep["ssh_key_id"])), "own1", None)]:
        assert (by_id[key].vm_name, by_id[key].journal_id) == (vm_name, journal_id)
    # another journal's firewall names only the hash of its id: foreign all the same
    assert by_id[(ResourceKind.FIREWALL, other_prep["firewall_id"])].journal_id not in (None, JOURNAL)
    droplet = by_id[(ResourceKind.INSTANCE, mine)]
    assert droplet.location == offer.location and droplet.status in (Status.PENDING, Status.RUNNING)
    assert droplet.price_per_hour == offer.price_per_hour and offer.price_per_hour
    assert by_id[(ResourceKind.INSTANCE, other)].price_per_hour == cpu_offer.price_per_hour
    assert by_id[(ResourceKind.SSH_KEY, str(mine_prep["ssh_key_id"]))].location == Location("digitalocean", "global")
    # a region narrows the droplets and leaves the account-wide resources to global
    in_region = make(fake).list_owned(offer.location)
    assert {o.kind for o in in_region} == {ResourceKind.INSTANCE} and mine in {o.resource_id for o in in_region}
    assert ResourceKind.INSTANCE not in {o.kind for o in make(fake).list_owned(Location("digitalocean", "global"))}


def test_list_owned_follows_the_pages(fake):
    _offer, prepared, _mine = launch(make(fake, JOURNAL), "own1", KEYS[0])
    template = fake.ssh_keys[prepared["ssh_key_id"]]
    for number in range(210):   # more than one page of 200
        fake.ssh_keys[70000 + number] = dict(template, id=70000 + number, name="gpuprov-vm%d-%012x" % (number, number))
    before = len(fake.calls_of("ssh-keys.list"))
    keys = [o for o in make(fake).list_owned(EVERYWHERE) if o.kind == ResourceKind.SSH_KEY]
    assert len(keys) == 211
    assert len(fake.calls_of("ssh-keys.list")) - before == 2


@pytest.mark.parametrize("key", ["droplets.list", "firewalls.list", "tags.list", "ssh-keys.list"])
def test_list_owned_classifies_api_errors(fake, key):
    fake.bad_auth(key)
    with pytest.raises(ProviderError) as info:
        make(fake).list_owned(EVERYWHERE)
    assert info.value.kind == ErrorKind.CREDENTIALS
