"""VerdaProvider.sweep_locations / list_owned (the orphan sweep's listing) against the Verda API
fake: instances, SSH keys and startup scripts made through the adapter's own prepare/create
for this journal, another one and none, plus resources without gpuprov's identity."""

from __future__ import annotations

import pytest

pytest.importorskip("requests")

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (  # noqa: E402
    ANY_REGION, BootScript, ErrorKind, InstanceSpec, Location, ProviderError, ResourceKind, ResourceRequest, Status,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.verda import VerdaProvider  # noqa: E402
from ansible_collections.gpuprov.cloud.tests.fakes.verda_api import (  # noqa: E402
    CLIENT_ID, CLIENT_SECRET, VerdaApiFake,
)

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGdwdXByb3YtdmVyZGEtdW5pdA unit@verda"
JOURNAL, OTHER = "journal-1", "journal-2"
EVERYWHERE = Location("verda", ANY_REGION)


@pytest.fixture
def fake(tmp_path):
    made = VerdaApiFake(str(tmp_path))
    yield made
    made.stop()


def make(fake, journal_id=None):
    return VerdaProvider({"api_url": fake.api_url, "client_id": CLIENT_ID, "client_secret": CLIENT_SECRET,
                          "ssh_port": fake.ssh_port}, journal_id=journal_id)


def launch(provider, vm):
    offer = provider.plan(ResourceRequest(vm_name=vm, gpu="H100"))[0]
    spec = InstanceSpec(vm_name=vm, ssh_public_key=KEY, boot_script=BootScript("#!/bin/sh\necho hi"))
    prepared = provider.prepare(offer, spec)
    return offer, prepared, provider.create(offer, prepared, spec)


def test_sweep_locations_is_one_account_wide_listing(fake):
    assert make(fake).sweep_locations() == [EVERYWHERE]
    assert fake.calls == []


def test_list_owned_lists_instances_keys_and_scripts_of_every_journal(fake):
    offer, mine_prep, mine = launch(make(fake, JOURNAL), "own1")
    _offer, other_prep, other = launch(make(fake, OTHER), "own2")
    _offer, legacy_prep, legacy = launch(make(fake), "own3")
    # Without gpuprov's identity: an instance of a VM's hostname without the description, a key named otherwise.
    fake.instances["stranger"] = dict(fake.instances[mine], id="stranger", description="my own box", tags=[])
    fake.ssh_keys["laptop"] = dict(fake.ssh_keys[mine_prep["ssh_key_id"]], id="laptop", name="laptop")

    found = make(fake, JOURNAL).list_owned(EVERYWHERE)
    by_id = {o.resource_id: o for o in found}
    keys = [p["ssh_key_id"] for p in (mine_prep, other_prep, legacy_prep)]
    scripts = [p["startup_script_id"] for p in (mine_prep, other_prep, legacy_prep)]
    assert sorted(by_id) == sorted([mine, other, legacy] + keys + scripts)
    for resource_id, kind, vm_name, journal_id in [
            (mine, ResourceKind.INSTANCE, "own1", JOURNAL), (other, ResourceKind.INSTANCE, "own2", OTHER),
            (legacy, ResourceKind.INSTANCE, "own3", None), (keys[0], ResourceKind.SSH_KEY, "own1", JOURNAL),
            (keys[2], ResourceKind.SSH_KEY, "own3", None), (scripts[0], ResourceKind.OTHER, "own1", JOURNAL),
            (scripts[2], ResourceKind.OTHER, "own3", None)]:
        assert (by_id[resource_id].kind, by_id[resource_id].vm_name, by_id[resource_id].journal_id) == (
            kind, vm_name, journal_id)
    # another journal's key and script name only the hash of its id: foreign all the same
    assert {by_id[i].journal_id for i in (keys[1], scripts[1])} - {None, JOURNAL}
    assert by_id[mine].location == Location("verda", offer.region)
    assert by_id[keys[0]].location == Location("verda", "global")
    assert by_id[mine].status in (Status.PENDING, Status.RUNNING)
    assert by_id[mine].price_per_hour == offer.price_per_hour and offer.price_per_hour
    # a region narrows the instances and leaves the account-wide keys and scripts to global
    assert sorted(o.resource_id for o in make(fake).list_owned(offer.location)) == sorted([mine, other, legacy])
    assert make(fake).list_owned(Location("verda", "NOWHERE-1")) == []


def test_deleting_instances_are_listed_and_gone_ones_omitted(fake):
    offer, _prepared, mine = launch(make(fake, JOURNAL), "own1")
    make(fake, JOURNAL).delete(offer.location, "own1", [mine])
    (seen,) = [o for o in make(fake).list_owned(EVERYWHERE) if o.kind == ResourceKind.INSTANCE]
    assert seen.status == Status.TERMINATING
    fake.finish_delete(mine)
    assert [o for o in make(fake).list_owned(EVERYWHERE) if o.kind == ResourceKind.INSTANCE] == []


@pytest.mark.parametrize("key", ["instances.list", "sshkeys.list", "scripts.list"])
def test_list_owned_classifies_api_errors(fake, key):
    fake.fail_next(key, fake.auth_error(None), times=3)   # the client fetches a new token and asks once more
    with pytest.raises(ProviderError) as info:
        make(fake).list_owned(EVERYWHERE)
    assert info.value.kind == ErrorKind.CREDENTIALS
