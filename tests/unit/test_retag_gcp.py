"""GCP retag against the Compute Engine fake: instances.setLabels and disks.setLabels (the boot disk), each
fenced by the labelFingerprint just read, their Operations not awaited; idempotent, identity labels kept."""

from __future__ import annotations

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    JOURNAL_ID_TAG, VM_NAME_TAG, ErrorKind, InstanceSpec, ProviderError, ResourceRequest,
)

pytest.importorskip("pytest_httpserver")
pytest.importorskip("google.cloud.compute_v1")

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.gcp import GcpProvider  # noqa: E402
from ansible_collections.gpuprov.cloud.tests.fakes.gcp_compute import GcpComputeFake  # noqa: E402

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIUnitTestOnlyNotARealKey000000000000000 unit@test"
JOURNAL = "0123456789abcdef"


@pytest.fixture
def gcp():
    fake = GcpComputeFake()
    try:
        provider = GcpProvider({"project": fake.project, "api_endpoint": fake.url, "read_retry_s": 0},
                               journal_id=JOURNAL)
        made = InstanceSpec(vm_name="tagged", ssh_public_key=KEY, allowed_cidrs=["198.51.100.7/32"],
                            tags={"team": "ml", "cost-center": "42"})
        offer = provider.plan(ResourceRequest(vm_name="tagged", gpu="L4"))[0]
        name = provider.create(offer, provider.prepare(offer, made), made)
        yield provider, fake, offer.location, name
    finally:
        fake.stop()


def _labels(fake, location, name):
    return fake.instances[(location.zone, name)]["labels"], fake.disks[(location.zone, name)]["labels"]


def test_retag_sets_and_purges_the_instance_and_boot_disk_labels(gcp):
    provider, fake, location, name = gcp
    assert provider.retag(location, "tagged", name, {"team": "ml", "cost-center": "42"}, purge=True) == {
        "set": {}, "removed": []}
    assert not fake.calls_of("instances.setLabels") and not fake.calls_of("disks.setLabels")
    wanted = {"Team": "AI", "owner": "kim"}
    assert provider.retag(location, "tagged", name, wanted, purge=True, check=True) == {
        "set": {"team": "ai", "owner": "kim"}, "removed": ["cost-center"]}
    assert not fake.calls_of("instances.setLabels")   # check mode changes nothing
    changes = provider.retag(location, "tagged", name, wanted, purge=True)
    assert changes == {"set": {"team": "ai", "owner": "kim"}, "removed": ["cost-center"]}
    fake.finish_operations()   # GCP applies the labels when the (not awaited) Operations end
    for labels in _labels(fake, location, name):
        assert labels == {"team": "ai", "owner": "kim", VM_NAME_TAG: "tagged", JOURNAL_ID_TAG: JOURNAL}, labels
    # Idempotent: the labels are there, a second run calls no setLabels.
    assert provider.retag(location, "tagged", name, wanted, purge=True) == {"set": {}, "removed": []}
    assert len(fake.calls_of("instances.setLabels")) == 1 and len(fake.calls_of("disks.setLabels")) == 1


def test_retag_without_purge_keeps_other_labels_and_never_drops_identity_or_goog_labels(gcp):
    provider, fake, location, name = gcp
    fake.instances[(location.zone, name)]["labels"]["goog-ops-agent-policy"] = "v2"
    assert provider.retag(location, "tagged", name, {"extra": "1"}, purge=False) == {
        "set": {"extra": "1"}, "removed": []}
    fake.finish_operations()
    inst, disk = _labels(fake, location, name)
    assert inst["team"] == "ml" and inst["extra"] == "1" and disk["extra"] == "1"
    assert provider.retag(location, "tagged", name, {}, purge=True) == {"set": {}, "removed": [
        "cost-center", "extra", "team"]}
    fake.finish_operations()
    inst, disk = _labels(fake, location, name)
    assert inst == {VM_NAME_TAG: "tagged", JOURNAL_ID_TAG: JOURNAL, "goog-ops-agent-policy": "v2"}
    assert disk == {VM_NAME_TAG: "tagged", JOURNAL_ID_TAG: JOURNAL}


def test_a_retag_whose_operation_still_runs_is_set_again_by_the_next_run_and_converges(gcp):
    provider, fake, location, name = gcp
    provider.retag(location, "tagged", name, {"team": "ai"}, purge=False)
    assert _labels(fake, location, name)[0]["team"] == "ml"   # the Operation has not ended
    # The next run still reads the old labels (and the same fingerprint): it sets them again, no error.
    assert provider.retag(location, "tagged", name, {"team": "ai"}, purge=False) == {
        "set": {"team": "ai"}, "removed": []}
    fake.finish_operations()
    assert provider.retag(location, "tagged", name, {"team": "ai"}, purge=False) == {"set": {}, "removed": []}


def test_a_stale_fingerprint_is_refused_by_the_fake_and_reported_as_transient(gcp):
    provider, fake, location, name = gcp
    fake.op_mode = "done"
    inst = fake.instances[(location.zone, name)]
    stale = inst["labelFingerprint"]
    provider.retag(location, "tagged", name, {"team": "ai"}, purge=False)
    assert inst["labelFingerprint"] != stale and inst["labels"]["team"] == "ai"
    # Someone changes the labels between our read and our write: GCP answers 412 conditionNotMet.
    fake.fail_next("instances.setLabels", 412, "conditionNotMet",
                   "Labels fingerprint either invalid or resource labels have changed")
    with pytest.raises(ProviderError) as info:
        provider.retag(location, "tagged", name, {"team": "ops"}, purge=False)
    assert info.value.kind == ErrorKind.TRANSIENT and "setLabels" in info.value.msg


def test_the_fake_refuses_a_stale_label_fingerprint_as_gcp_does(gcp):
    import requests
    _provider, fake, location, name = gcp
    url = "%s/compute/v1/projects/%s/zones/%s/instances/%s/setLabels" % (fake.url, fake.project, location.zone, name)
    answer = requests.post(url, json={"labels": {"a": "b"}, "labelFingerprint": "c3RhbGU="}, timeout=10)
    assert answer.status_code == 412
    assert answer.json()["error"]["errors"][0]["reason"] == "conditionNotMet"


def test_retag_refuses_an_instance_of_another_vm_and_a_label_gcp_cannot_hold(gcp):
    provider, fake, location, name = gcp
    with pytest.raises(ProviderError) as info:
        provider.retag(location, "other", name, {}, purge=True)
    assert info.value.msg.startswith("tags: %s is not an instance of VM other" % name)
    with pytest.raises(ProviderError) as info:
        provider.retag(location, "tagged", name, {"2fast": "x"}, purge=True)
    assert info.value.msg.startswith("tags.2fast: '2fast'='x' cannot be a GCP label")
    assert not fake.calls_of("instances.setLabels")
