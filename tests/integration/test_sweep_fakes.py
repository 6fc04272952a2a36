"""The orphan sweep on the AWS (moto's EC2) and GCP (tests/fakes/gcp_compute.py) fakes, through
the conformance harnesses: orphans made on purpose (a journal row deleted behind an instance),
a journal-owned VM, another journal's instance and one made before journal ids; a dry run
changes nothing; a removal takes exactly the orphans and their side resources, through the
teardown machine with its waits (GCP's deletion lag)."""

from __future__ import annotations

import dataclasses
import uuid

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import ResourceKind
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import projection
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks import sweep
from ansible_collections.gpuprov.cloud.tests.conformance.conftest import _load
from ansible_collections.gpuprov.cloud.tests.conformance.harness import adapter_class

THEIRS = "d" * 32


def _spec(harness, suffix):
    name = harness.spec.vm_name[:63 - len(suffix)].rstrip("-") + suffix
    return dataclasses.replace(harness.spec, vm_name=name)


@pytest.fixture(params=["aws", "gcp"])
def cloud(request, tmp_path_factory, tmp_path):
    harness = _load(request.param).make_harness(tmp_path_factory)
    journal = projection.open_journal(str(tmp_path / "journal.sqlite"))
    try:
        yield Cloud(harness, journal)
    finally:
        journal.close()
        harness.close()


class Cloud:
    def __init__(self, harness, journal):
        self.harness, self.journal = harness, journal
        # The teardown polls the cloud at this pace (GCP's fake keeps a deleted instance STOPPING for 2 reads).
        self.options = dict(harness.provider.options, poll_interval_s=0.1)
        self.offer = harness.provider.plan(harness.request)[0]

    def adapter(self, journal_id):
        return adapter_class(self.harness.provider)(dict(self.options), journal_id=journal_id)

    def plant(self, suffix, journal_id):
        spec = _spec(self.harness, suffix)
        provider = self.adapter(journal_id)
        instance_id = provider.create(self.offer, provider.prepare(self.offer, spec), spec)
        self.harness.settle(self.offer.location, instance_id)
        return spec.vm_name, instance_id

    def ready(self, vm_name, instance_id):
        vm = {"name": vm_name, "location": self.offer.location.to_dict(), "instance_id": instance_id}
        owner = "test:%s" % uuid.uuid4().hex
        self.journal.begin(vm_name, "launch", {"kind": "Ready", "vm": vm}, "Ready", True, owner, 60, None)
        self.journal.release(vm_name, owner)

    def sweep(self, remove):
        mine = self.adapter(self.journal.journal_id)
        return sweep.sweep(self.journal, {}, [self.harness.cloud], [], remove,
                           teardown_timeout=60, providers={self.harness.cloud: mine})


def test_orphans_on_the_fake_are_found_and_exactly_they_are_removed(cloud):
    mine = cloud.journal.journal_id
    lost_name, lost = cloud.plant("-lost", mine)
    kept_name, kept = cloud.plant("-kept", mine)
    cloud.ready(kept_name, kept)
    theirs_name, theirs = cloud.plant("-theirs", THEIRS)
    old_name, old = cloud.plant("-old", None)
    before = cloud.harness.resources()

    dry = cloud.sweep(remove=False)
    instances = {e["id"]: e for e in dry["resources"] if e["kind"] == ResourceKind.INSTANCE}
    assert {i: instances[i]["category"] for i in (lost, kept, theirs, old)} == {
        lost: sweep.ORPHAN, kept: sweep.OWNED, theirs: sweep.FOREIGN, old: sweep.LEGACY}
    assert instances[lost]["vm_name"] == lost_name and instances[lost]["action"] == "would remove"
    assert instances[lost]["price_per_hour"] is not None and instances[lost]["price_per_hour"] > 0
    assert dry["cost_per_hour"][sweep.ORPHAN] == instances[lost]["price_per_hour"]
    # The orphan's side resources (security group, firewall rule) are orphans too.
    side = [e for e in dry["orphans"] if e["kind"] != ResourceKind.INSTANCE]
    assert side and all(e["vm_name"] == lost_name for e in side), dry["orphans"]
    assert dry["errors"] == [] and cloud.harness.resources() == before
    assert cloud.journal.load(sweep.sweep_key(lost_name)) is None

    removed = cloud.sweep(remove=True)
    assert removed["not_removed"] == [], [(e["kind"], e["id"], e["error"]) for e in removed["not_removed"]]
    assert sorted(e["id"] for e in removed["removed"]) == sorted(e["id"] for e in dry["orphans"])
    live = set(cloud.harness.instance_ids())
    assert lost not in live and {kept, theirs, old} <= live
    gone = before - cloud.harness.resources()
    assert any(lost in item for item in gone) and all(e["id"] in " ".join(gone) for e in side), gone
    survivors = (kept, kept_name, theirs, theirs_name, old, old_name)
    assert not [item for item in gone if any(s in item for s in survivors)], gone
    assert cloud.journal.load(sweep.sweep_key(lost_name)).state["kind"] == "Done"
    again = cloud.sweep(remove=False)
    assert again["orphans"] == []
