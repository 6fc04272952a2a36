"""HyperstackProvider.sweep_locations / list_owned (the orphan sweep's listing) against the
Hyperstack API fake: VMs, SSH keys and the gpuprov environment made through the adapter's own
prepare/create for this journal, another one and none, plus resources without gpuprov's
identity; every page of a listing."""

from __future__ import annotations

import base64

import pytest

pytest.importorskip("requests")

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (  # noqa: E402
    ANY_REGION, ErrorKind, InstanceSpec, Location, ProviderError, ResourceKind, ResourceRequest, Status,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.hyperstack import (  # noqa: E402
    HyperstackProvider,
)
from ansible_collections.gpuprov.cloud.tests.fakes.hyperstack_api import HyperstackApiFake  # noqa: E402

KEYS = ["ssh-ed25519 %s user%d@test" % (base64.b64encode(b"\0\0\0\x0bssh-ed25519 hs key %d" % n).decode(), n)
        for n in range(3)]
JOURNAL, OTHER = "journal-1", "journal-2"
EVERYWHERE = Location("hyperstack", ANY_REGION)


@pytest.fixture
def fake(tmp_path):
    made = HyperstackApiFake(str(tmp_path))
    yield made
    made.stop()


def make(fake, journal_id=None):
    return HyperstackProvider({"api_url": fake.api_url, "api_key": fake.token, "ssh_port": fake.ssh_port,
                               "allowed_cidrs": ["198.51.100.7/32"]}, journal_id=journal_id)


def launch(provider, vm, key):
    offer = provider.plan(ResourceRequest(vm_name=vm, gpu="A100-80GB"))[0]
    spec = InstanceSpec(vm_name=vm, ssh_public_key=key)
    prepared = provider.prepare(offer, spec)
    return offer, prepared, provider.create(offer, prepared, spec)


def key_id(fake, name):
    (found,) = [str(k["id"]) for k in fake.keypairs.values() if k["name"] == name]
    return found


def test_sweep_locations_is_one_account_wide_listing(fake):
    assert make(fake).sweep_locations() == [EVERYWHERE]
    assert fake.calls == []


def test_list_owned_lists_vms_keys_and_environments(fake):
    offer, mine_prep, mine = launch(make(fake, JOURNAL), "own1", KEYS[0])
    _offer, other_prep, other = launch(make(fake, OTHER), "own2", KEYS[1])
    _offer, legacy_prep, legacy = launch(make(fake), "own3", KEYS[2])
    # Without gpuprov's identity: an unlabelled VM of a VM's name, a key and an environment of other names.
    stranger = max(fake.instances) + 1000
    fake.instances[stranger] = dict(fake.instances[int(mine)], id=stranger, labels=["team=ml"])
    fake.keypairs[stranger] = dict(fake.keypairs[int(key_id(fake, mine_prep["key_name"]))], id=stranger,
                                   name="laptop")
    fake.environments[stranger] = dict(next(iter(fake.environments.values())), id=stranger, name="research")

    found = make(fake, JOURNAL).list_owned(EVERYWHERE)
    by_id = {(o.kind, o.resource_id): o for o in found}
    (env,) = [e for e in fake.environments.values() if e["name"] == "gpuprov-%s" % offer.region]
    keys = [key_id(fake, p["key_name"]) for p in (mine_prep, other_prep, legacy_prep)]
    assert sorted(by_id) == sorted([(ResourceKind.INSTANCE, i) for i in (mine, other, legacy)]
                                   + [(ResourceKind.SSH_KEY, k) for k in keys]
                                   + [(ResourceKind.ENVIRONMENT, str(env["id"]))])
    for resource_id, kind, vm_name, journal_id in [
            (mine, ResourceKind.INSTANCE, "own1", JOURNAL), (other, ResourceKind.INSTANCE, "own2", OTHER),
            (legacy, ResourceKind.INSTANCE, "own3", None), (keys[0], ResourceKind.SSH_KEY, "own1", None),
            (str(env["id"]), ResourceKind.ENVIRONMENT, None, None)]:
        owned = by_id[(kind, resource_id)]
        assert (owned.vm_name, owned.journal_id, owned.location) == (vm_name, journal_id, offer.location)
    assert by_id[(ResourceKind.INSTANCE, mine)].status in (Status.PENDING, Status.RUNNING)
    assert by_id[(ResourceKind.INSTANCE, mine)].price_per_hour == offer.price_per_hour and offer.price_per_hour
    assert by_id[(ResourceKind.SSH_KEY, keys[0])].status is None
    # a region narrows every kind
    assert sorted((o.kind, o.resource_id) for o in make(fake).list_owned(offer.location)) == sorted(by_id)
    assert make(fake).list_owned(Location("hyperstack", "NOWHERE-1")) == []


def test_deleting_vms_are_listed_as_terminating(fake):
    offer, _prepared, mine = launch(make(fake, JOURNAL), "own1", KEYS[0])
    make(fake, JOURNAL).delete(offer.location, "own1", [mine])
    (seen,) = [o for o in make(fake).list_owned(EVERYWHERE) if o.kind == ResourceKind.INSTANCE]
    assert seen.status == Status.TERMINATING


def test_list_owned_follows_the_pages(fake):
    _offer, prepared, _mine = launch(make(fake, JOURNAL), "own1", KEYS[0])
    template = fake.keypairs[int(key_id(fake, prepared["key_name"]))]
    for number in range(120):   # more than one page of 100
        fake.keypairs[50000 + number] = dict(template, id=50000 + number, name="gpuprov-vm%d-%012x" % (number, number))
    keys = [o for o in make(fake).list_owned(EVERYWHERE) if o.kind == ResourceKind.SSH_KEY]
    assert len(keys) == 121
    assert [c[3].get("page") for c in fake.calls_of("keypairs.list")][-2:] == [["1"], ["2"]]


@pytest.mark.parametrize("key", ["environments.list", "vms.list", "keypairs.list", "pricebook.get"])
def test_list_owned_classifies_api_errors(fake, key):
    launch(make(fake, JOURNAL), "own1", KEYS[0])
    fake.fail_next(key, fake.auth_error(None))
    with pytest.raises(ProviderError) as info:
        make(fake).list_owned(EVERYWHERE)
    assert info.value.kind == ErrorKind.CREDENTIALS
