"""PrimeIntellectProvider.sweep_locations / list_owned (the orphan sweep's listing) against the
Prime Intellect API fake: pods and SSH keys made through the adapter's own prepare/create for
this journal and another one, a key made before journal ids, and resources named otherwise."""

from __future__ import annotations

import pytest

pytest.importorskip("requests")

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (  # noqa: E402
    ANY_REGION, ErrorKind, InstanceSpec, Location, ProviderError, ResourceKind, ResourceRequest, Status,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.primeintellect import (  # noqa: E402
    PrimeIntellectProvider,
)
from ansible_collections.gpuprov.cloud.tests.fakes.marketplace import Reply  # noqa: E402
from ansible_collections.gpuprov.cloud.tests.fakes.primeintellect_api import PrimeIntellectApiFake  # noqa: E402

KEYS = ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHByaW1laW50ZWxsZWN0LXVuaXQtdGVzdC1rZXk unit@test",
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG90aGVyLWtleS1vZi10aGUtdXNlci1pdHNlbGYhIQ me@laptop",
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGxlZ2FjeS1rZXktb2YtYS1qb3VybmFsLWxlc3MtcnVuIQ me@old"]
JOURNAL, OTHER = "a" * 32, "b" * 32
EVERYWHERE = Location("primeintellect", ANY_REGION)


@pytest.fixture
def fake(tmp_path):
    made = PrimeIntellectApiFake(str(tmp_path))
    yield made
    made.stop()


def make(fake, journal_id=None):
    return PrimeIntellectProvider({"api_url": fake.url, "api_key": fake.token}, journal_id=journal_id)


def launch(provider, vm, key):
    offer = next(o for o in provider.plan(ResourceRequest(vm_name=vm, gpu="H100")) if o.available)
    spec = InstanceSpec(vm_name=vm, ssh_public_key=key)
    prepared = provider.prepare(offer, spec)
    return offer, prepared, provider.create(offer, prepared, spec)


def test_sweep_locations_is_one_account_wide_listing(fake):
    assert make(fake).sweep_locations() == [EVERYWHERE]
    assert fake.calls == []


def test_list_owned_lists_pods_and_keys_by_their_names(fake):
    offer, mine_prep, mine = launch(make(fake, JOURNAL), "own1", KEYS[0])
    _offer, other_prep, other = launch(make(fake, OTHER), "own2", KEYS[1])
    legacy_prep = make(fake).prepare(offer, InstanceSpec(vm_name="own3", ssh_public_key=KEYS[2]))
    # A pod named like a VM but without a journal id, and a key of another name: not listed.
    fake.pods["plain"] = dict(fake.pods[mine], id="plain", name="own1")
    fake.keys["laptop"] = dict(fake.keys[mine_prep["ssh_key_id"]], id="laptop", name="laptop")

    found = make(fake, JOURNAL).list_owned(EVERYWHERE)
    by_id = {o.resource_id: o for o in found}
    keys = [p["ssh_key_id"] for p in (mine_prep, other_prep, legacy_prep)]
    assert sorted(by_id) == sorted([mine, other] + keys)
    for resource_id, kind, vm_name, journal_id in [
            (mine, ResourceKind.INSTANCE, "own1", JOURNAL), (other, ResourceKind.INSTANCE, "own2", OTHER),
            (keys[0], ResourceKind.SSH_KEY, "own1", JOURNAL), (keys[1], ResourceKind.SSH_KEY, "own2", OTHER),
            (keys[2], ResourceKind.SSH_KEY, "own3", None)]:
        assert (by_id[resource_id].kind, by_id[resource_id].vm_name, by_id[resource_id].journal_id) == (
            kind, vm_name, journal_id)
    assert by_id[mine].status in (Status.PENDING, Status.RUNNING)
    assert by_id[mine].price_per_hour == offer.price_per_hour and offer.price_per_hour
    assert by_id[mine].location == Location("primeintellect", "unplaced")
    assert by_id[keys[0]].location == Location("primeintellect", "global") and by_id[keys[0]].status is None
    # a named region lists the pods the listing places nowhere only at ANY_REGION
    assert make(fake).list_owned(Location("primeintellect", "CANADA-1")) == []


def test_pods_and_keys_under_the_names_made_before_are_adopted_torn_down_and_swept(fake):
    """``<vm>.<journal id>``, as gpuprov named pods and keys before ``<vm>-j<journal id>``: observe adopts such
    a pod with its journal id, delete takes it, cleanup removes such a key, and list_owned lists both."""
    from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.primeintellect import catalog
    mine = make(fake, JOURNAL)
    old_pod = fake.make_named_pod("old1." + JOURNAL)
    others_pod = fake.make_named_pod("old1." + OTHER)
    old_key = "gpuprov-old1-%s.%s" % (catalog.key_fingerprint(KEYS[0]), JOURNAL)
    others_key = "gpuprov-old1-%s.%s" % (catalog.key_fingerprint(KEYS[1]), OTHER)
    for key_id, name, material in (("k-old", old_key, KEYS[0]), ("k-other", others_key, KEYS[1])):
        fake.keys[key_id] = {"id": key_id, "userId": fake.user_id, "name": name, "publicKey": material,
                             "isPrimary": False, "isUserKey": True}

    by_id = {o.resource_id: o for o in mine.list_owned(EVERYWHERE)}
    assert {i: (by_id[i].kind, by_id[i].vm_name, by_id[i].journal_id) for i in by_id} == {
        old_pod: (ResourceKind.INSTANCE, "old1", JOURNAL), others_pod: (ResourceKind.INSTANCE, "old1", OTHER),
        "k-old": (ResourceKind.SSH_KEY, "old1", JOURNAL), "k-other": (ResourceKind.SSH_KEY, "old1", OTHER)}

    where = Location("primeintellect", "CANADA-1")
    seen = {o.instance_id: o for o in mine.observe(where, "old1")}
    assert sorted(seen) == sorted([old_pod, others_pod])
    assert seen[old_pod].journal_id == JOURNAL and seen[old_pod].owned_by(JOURNAL)
    assert not seen[others_pod].owned_by(JOURNAL)
    fake.settle(old_pod)
    [running] = [o for o in mine.observe(where, "old1") if o.instance_id == old_pod]
    assert running.usable

    mine.delete(where, "old1", [old_pod])
    assert [o.status for o in mine.observe(where, "old1") if o.instance_id == old_pod] == [Status.TERMINATING]
    fake.settle_deleted(old_pod)
    assert [o.instance_id for o in mine.observe(where, "old1")] == [others_pod]
    mine.cleanup(where, "old1")
    assert sorted(fake.keys) == ["k-other"]   # this journal's old key gone, another journal's kept
    assert sorted(o.resource_id for o in mine.list_owned(EVERYWHERE)) == sorted([others_pod, "k-other"])


def test_new_names_carry_the_journal_id_inside_the_cli_rule(fake):
    _offer, prepared, mine = launch(make(fake, JOURNAL), "own1", KEYS[0])
    _offer, other_prepared, theirs = launch(make(fake, "j2"), "own2", KEYS[1])   # an id that is not hex
    assert fake.pods[mine]["name"] == "own1-j" + JOURNAL
    assert fake.keys[prepared["ssh_key_id"]]["name"].endswith("-j" + JOURNAL)
    assert fake.pods[theirs]["name"] == "own2-x" + b"j2".hex()
    seen = {o.resource_id: (o.vm_name, o.journal_id) for o in make(fake, OTHER).list_owned(EVERYWHERE)}
    assert seen == {mine: ("own1", JOURNAL), prepared["ssh_key_id"]: ("own1", JOURNAL),
                    theirs: ("own2", "j2"), other_prepared["ssh_key_id"]: ("own2", "j2")}


def test_deleting_pods_are_listed_as_terminating(fake):
    offer, _prepared, mine = launch(make(fake, JOURNAL), "own1", KEYS[0])
    make(fake, JOURNAL).delete(offer.location, "own1", [mine])
    (seen,) = [o for o in make(fake).list_owned(EVERYWHERE) if o.kind == ResourceKind.INSTANCE]
    assert seen.status == Status.TERMINATING


def test_list_owned_follows_the_pages(fake):
    offer, _prepared, mine = launch(make(fake, JOURNAL), "own1", KEYS[0])
    for number in range(120):   # more than one page of 100
        fake.pods["p%03d" % number] = dict(fake.pods[mine], id="p%03d" % number, name="vm%d.%s" % (number, OTHER),
                                           status="STOPPED")
    found = [o for o in make(fake).list_owned(EVERYWHERE) if o.kind == ResourceKind.INSTANCE]
    assert len(found) == 121
    offsets = [call[3].get("offset") for call in fake.calls_of("pods.list")]
    assert offsets[-2:] == [["0"], ["100"]]


@pytest.mark.parametrize("key", ["pods.list", "ssh_keys.list"])
def test_list_owned_classifies_api_errors(fake, key):
    fake.fail_next(key, Reply(401, {"detail": "Invalid API key"}))
    with pytest.raises(ProviderError) as info:
        make(fake).list_owned(EVERYWHERE)
    assert info.value.kind == ErrorKind.CREDENTIALS
