"""MassedComputeProvider.sweep_locations / list_owned (the orphan sweep's listing) against the
Massed Compute API fake: instances and SSH keys made through the adapter's own prepare/create
for this journal, another one and none, plus resources named otherwise."""

from __future__ import annotations

import base64

import pytest

pytest.importorskip("requests")

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (  # noqa: E402
    ANY_REGION, ErrorKind, InstanceSpec, Location, ProviderError, ResourceKind, ResourceRequest, Status,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.massedcompute import (  # noqa: E402
    MassedComputeProvider,
)
from ansible_collections.gpuprov.cloud.tests.fakes.massedcompute_api import MassedComputeApiFake  # noqa: E402

KEYS = ["ssh-ed25519 %s user%d@test" % (base64.b64encode(b"\0\0\0\x0bssh-ed25519 key %d" % n).decode(), n)
        for n in range(3)]
JOURNAL, OTHER = "journal1", "journal2"
EVERYWHERE = Location("massedcompute", ANY_REGION)


@pytest.fixture
def fake(tmp_path):
    made = MassedComputeApiFake(str(tmp_path))
    yield made
    made.stop()


def make(fake, journal_id=None):
    return MassedComputeProvider({"api_url": fake.api_url, "api_key": fake.token, "ssh_port": fake.ssh_port},
                                 journal_id=journal_id)


def launch(provider, vm, key):
    offer = provider.plan(ResourceRequest(vm_name=vm, gpu="L40"))[0]
    spec = InstanceSpec(vm_name=vm, ssh_public_key=key)
    prepared = provider.prepare(offer, spec)
    return offer, prepared, provider.create(offer, prepared, spec)


def key_id(fake, name):
    (found,) = [k["id"] for k in fake.ssh_keys.values() if k["name"] == name]
    return found


def test_sweep_locations_is_one_account_wide_listing(fake):
    assert make(fake).sweep_locations() == [EVERYWHERE]
    assert fake.calls == []


def test_list_owned_lists_instances_and_keys_by_their_names(fake):
    offer, mine_prep, mine = launch(make(fake, JOURNAL), "own-1", KEYS[0])
    _offer, other_prep, other = launch(make(fake, OTHER), "own-2", KEYS[1])
    _offer, legacy_prep, legacy = launch(make(fake), "own-3", KEYS[2])
    # An instance named only after its VM (no journal id) cannot be told from a stranger's: not listed,
    # and neither is a key of another name.
    fake.ssh_keys["laptop"] = dict(fake.ssh_keys[key_id(fake, mine_prep["ssh_key_name"])], id="laptop",
                                   name="laptop")

    found = make(fake, JOURNAL).list_owned(EVERYWHERE)
    by_id = {o.resource_id: o for o in found}
    keys = [key_id(fake, p["ssh_key_name"]) for p in (mine_prep, other_prep, legacy_prep)]
    assert sorted(by_id) == sorted([mine, other] + keys) and legacy not in by_id
    for resource_id, kind, vm_name, journal_id in [
            (mine, ResourceKind.INSTANCE, "own-1", JOURNAL), (other, ResourceKind.INSTANCE, "own-2", OTHER),
            (keys[0], ResourceKind.SSH_KEY, "own-1", JOURNAL), (keys[2], ResourceKind.SSH_KEY, "own-3", None)]:
        assert (by_id[resource_id].kind, by_id[resource_id].vm_name, by_id[resource_id].journal_id) == (
            kind, vm_name, journal_id)
    # another journal's key names only the hash of its id: foreign all the same
    assert by_id[keys[1]].vm_name == "own-2" and by_id[keys[1]].journal_id not in (None, JOURNAL)
    placed = fake.instances[mine]["region"]["name"]
    assert by_id[mine].location == Location("massedcompute", placed)
    assert by_id[keys[0]].location == Location("massedcompute", "global")
    assert by_id[mine].status in (Status.PENDING, Status.RUNNING)
    assert by_id[mine].price_per_hour == offer.price_per_hour and offer.price_per_hour
    # a region narrows the instances and leaves the keys to global
    assert sorted(o.resource_id for o in make(fake).list_owned(Location("massedcompute", placed))) == sorted(
        o.resource_id for o in found if o.kind == ResourceKind.INSTANCE and o.location.region == placed)
    assert make(fake).list_owned(Location("massedcompute", "nowhere-1")) == []


def test_terminating_instances_are_listed_and_gone_ones_omitted(fake):
    offer, _prepared, mine = launch(make(fake, JOURNAL), "own-1", KEYS[0])
    make(fake, JOURNAL).delete(offer.location, "own-1", [mine])
    (seen,) = [o for o in make(fake).list_owned(EVERYWHERE) if o.kind == ResourceKind.INSTANCE]
    assert seen.status == Status.TERMINATING
    fake.finish(mine)
    assert [o for o in make(fake).list_owned(EVERYWHERE) if o.kind == ResourceKind.INSTANCE] == []


@pytest.mark.parametrize("key", ["instance.list", "ssh-keys.list"])
def test_list_owned_classifies_api_errors(fake, key):
    fake.fail_next(key, fake.auth_error(None))
    with pytest.raises(ProviderError) as info:
        make(fake).list_owned(EVERYWHERE)
    assert info.value.kind == ErrorKind.CREDENTIALS
