"""RunpodProvider.sweep_locations / list_owned (the orphan sweep's listing) against the RunPod
API fake: pods made through the adapter's own prepare/create for this journal, another one
and none, plus a pod without gpuprov's identity, and the key line prepare registered."""

from __future__ import annotations

import pytest

pytest.importorskip("requests")

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (  # noqa: E402
    ANY_REGION, ErrorKind, InstanceSpec, Location, ProviderError, ResourceKind, ResourceRequest, Status,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.runpod import RunpodProvider  # noqa: E402
from ansible_collections.gpuprov.cloud.tests.fakes.runpod_api import RunpodApiFake  # noqa: E402

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAABAgMEBQYHCAkKCwwNDg8QERITFBUWFxgZGhscHR4f me@laptop"
JOURNAL, OTHER = "journal-1", "journal-2"
EVERYWHERE = Location("runpod", ANY_REGION)


@pytest.fixture
def fake(tmp_path):
    made = RunpodApiFake(str(tmp_path))
    yield made
    made.stop()


def make(fake, journal_id=None):
    return RunpodProvider({"api_url": fake.api_url, "api_key": fake.token}, journal_id=journal_id)


def launch(provider, vm):
    offer = next(o for o in provider.plan(ResourceRequest(vm_name=vm, gpu="H100")) if o.available)
    spec = InstanceSpec(vm_name=vm, ssh_public_key=KEY)
    return offer, provider.create(offer, provider.prepare(offer, spec), spec)


def test_sweep_locations_is_one_account_wide_listing(fake):
    assert make(fake).sweep_locations() == [EVERYWHERE]
    assert fake.calls == []


def test_list_owned_lists_every_journal_s_pods(fake):
    offer, mine = launch(make(fake, JOURNAL), "own1")
    _offer, other = launch(make(fake, OTHER), "own2")
    _offer, legacy = launch(make(fake), "own3")
    # a pod of the same name without gpuprov's env: not listed
    fake.pods["stranger"] = dict(fake.pods[mine], id="stranger", env={"JUPYTER_PASSWORD": "x"})

    found = make(fake, JOURNAL).list_owned(EVERYWHERE)
    # one key line: the first prepare registered it, the two others found its material registered
    [key] = [o for o in found if o.kind == ResourceKind.SSH_KEY]
    assert (key.vm_name, key.location, key.journal_id) == ("own1", Location("runpod", "global"), None)
    assert key.resource_id.startswith("gpuprov-own1-") and fake.account_keys[0].endswith(key.resource_id)
    found = [o for o in found if o.kind == ResourceKind.INSTANCE]
    assert sorted(o.resource_id for o in found) == sorted([mine, other, legacy])
    by_id = {o.resource_id: o for o in found}
    for pod_id, vm_name, journal_id in [(mine, "own1", JOURNAL), (other, "own2", OTHER), (legacy, "own3", None)]:
        owned = by_id[pod_id]
        assert (owned.kind, owned.vm_name, owned.journal_id) == (ResourceKind.INSTANCE, vm_name, journal_id)
        assert owned.status in (Status.PENDING, Status.RUNNING)
        assert owned.price_per_hour == offer.price_per_hour and owned.price_per_hour
    assert by_id[mine].location == Location("runpod", fake.pods[mine]["dataCenterId"])


def test_a_data_center_narrows_the_result_and_exited_pods_are_listed(fake):
    _offer, mine = launch(make(fake, JOURNAL), "own1")
    placed = fake.pods[mine]["dataCenterId"]
    fake.pods[mine]["status"] = "EXITED"
    (seen,) = make(fake).list_owned(Location("runpod", placed))   # a data center lists no account key
    assert (seen.resource_id, seen.status) == (mine, Status.STOPPED)
    assert make(fake).list_owned(Location("runpod", "XX-NOWHERE-1")) == []


@pytest.mark.parametrize("status,kind", [(401, ErrorKind.CREDENTIALS), (503, ErrorKind.TRANSIENT)])
def test_list_owned_classifies_api_errors(fake, status, kind):
    fake.fail_problem("pods.list", status, "refused by the fake")
    with pytest.raises(ProviderError) as info:
        make(fake).list_owned(EVERYWHERE)
    assert info.value.kind == kind
