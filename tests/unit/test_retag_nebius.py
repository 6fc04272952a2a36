"""Nebius retag against the gRPC fake: one labels-only InstanceService.Update (metadata id, parent_id,
resource_version and labels, no spec, ``X-ResetMask: metadata.labels``), fenced by resource_version;
idempotent, gpuprov's labels kept, nothing else touched (the boot disk keeps its create-time labels)."""

from __future__ import annotations

import grpc
import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    JOURNAL_ID_TAG, VM_NAME_TAG, ErrorKind, InstanceSpec, ProviderError, ResourceRequest,
)

pytest.importorskip("nebius")

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.nebius import NebiusProvider  # noqa: E402
from ansible_collections.gpuprov.cloud.tests.fakes.nebius_grpc import NebiusGrpcFake  # noqa: E402

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIUnitTestOnlyNotARealKey000000000000000 unit@test"
JOURNAL = "0123456789abcdef"


@pytest.fixture
def nebius(tmp_path):
    fake = NebiusGrpcFake(str(tmp_path))
    try:
        provider = NebiusProvider({"api_endpoint": fake.api_endpoint, "api_insecure": True, "iam_token": fake.token,
                                   "project_id": fake.project_id, "ssh_port": fake.ssh_port,
                                   "request_timeout_s": 10}, journal_id=JOURNAL)
        made = InstanceSpec(vm_name="tagged", ssh_public_key=KEY, allowed_cidrs=["198.51.100.7/32"],
                            tags={"team": "ml", "cost-center": "42"})
        offer = provider.plan(ResourceRequest(vm_name="tagged", gpu="H100"))[0]
        instance_id = provider.create(offer, provider.prepare(offer, made), made)
        yield provider, fake, offer.location, instance_id
    finally:
        fake.stop()


def _labels(fake, instance_id):
    record = fake.instances[instance_id]
    return dict(record["labels"]), dict(record["spec"].boot_disk.managed_disk.labels)


def _updates(fake):
    return [c for c in fake.calls if c[0] == "instances.update"]


def test_retag_updates_the_instance_labels_once_and_is_idempotent(nebius):
    provider, fake, location, instance_id = nebius
    assert provider.retag(location, "tagged", instance_id, {"team": "ml", "cost-center": "42"}, True) == {
        "set": {}, "removed": []}
    wanted = {"team": "ai", "owner": "kim"}
    assert provider.retag(location, "tagged", instance_id, wanted, True, check=True) == {
        "set": {"team": "ai", "owner": "kim"}, "removed": ["cost-center"]}
    assert not _updates(fake)   # neither the no-op nor check mode updates
    assert provider.retag(location, "tagged", instance_id, wanted, True) == {
        "set": {"team": "ai", "owner": "kim"}, "removed": ["cost-center"]}
    spec_before = fake.instances[instance_id]["spec"].SerializeToString(deterministic=True)
    instance, disk = _labels(fake, instance_id)
    assert instance == {"team": "ai", "owner": "kim", VM_NAME_TAG: "tagged", JOURNAL_ID_TAG: JOURNAL,
                        "gpuprov-ssh-user": "ubuntu"}   # gpuprov's own labels kept
    assert disk == {"team": "ml", "cost-center": "42", VM_NAME_TAG: "tagged", JOURNAL_ID_TAG: JOURNAL}
    assert len(_updates(fake)) == 1
    assert provider.retag(location, "tagged", instance_id, wanted, True) == {"set": {}, "removed": []}
    assert len(_updates(fake)) == 1
    assert fake.instances[instance_id]["spec"].SerializeToString(deterministic=True) == spec_before


def test_the_update_is_labels_only_with_its_own_reset_mask(nebius):
    # The SDK's derived mask for a metadata-only request would reset the name and more; a whole spec
    # sent back could reset what a read leaves out. The request carries the labels and nothing else.
    provider, fake, location, instance_id = nebius
    provider.retag(location, "tagged", instance_id, {"team": "ai"}, False)
    [(_key, request)] = _updates(fake)
    assert not request.HasField("spec")
    meta = request.metadata
    assert (meta.id, meta.parent_id, meta.name) == (instance_id, fake.project_id, "")
    assert meta.resource_version == 1 and dict(meta.labels)["team"] == "ai"
    [headers] = [h for k, h in fake.headers if k == "instances.update"]
    assert headers["x-resetmask"] == "metadata.labels"


def test_the_fake_resets_what_a_mask_names_and_the_request_leaves_out(nebius):
    from nebius.api.nebius.common.v1 import ResourceMetadata
    from nebius.api.nebius.compute.v1 import InstanceServiceClient, UpdateInstanceRequest
    provider, fake, _location, instance_id = nebius
    bare = UpdateInstanceRequest(metadata=ResourceMetadata(id=instance_id, parent_id=fake.project_id,
                                                           labels={"a": "b"}))
    with pytest.raises(ProviderError) as info:   # the SDK's own mask names metadata.name: it would be reset
        provider._call("update", InstanceServiceClient, "update", bare)
    assert info.value.kind == ErrorKind.INVALID_REQUEST and "metadata.name" in info.value.msg
    no_parent = UpdateInstanceRequest(metadata=ResourceMetadata(id=instance_id, labels={"a": "b"}))
    with pytest.raises(ProviderError) as info:
        provider._call("update", InstanceServiceClient, "update", no_parent)
    assert "metadata.parent_id" in info.value.msg
    assert fake.instances[instance_id]["version"] == 1


def test_retag_without_purge_only_adds_and_purge_to_nothing_keeps_gpuprov_labels(nebius):
    provider, fake, location, instance_id = nebius
    assert provider.retag(location, "tagged", instance_id, {"extra": "1"}, False) == {
        "set": {"extra": "1"}, "removed": []}
    assert _labels(fake, instance_id)[0]["team"] == "ml"
    assert provider.retag(location, "tagged", instance_id, {}, True)["removed"] == ["cost-center", "extra", "team"]
    assert set(_labels(fake, instance_id)[0]) == {VM_NAME_TAG, JOURNAL_ID_TAG, "gpuprov-ssh-user"}


def test_a_concurrent_change_is_refused_by_resource_version_and_is_transient(nebius):
    provider, fake, location, instance_id = nebius
    fake.fail_next("instances.update", grpc.StatusCode.ABORTED, "resource version mismatch")
    with pytest.raises(ProviderError) as info:
        provider.retag(location, "tagged", instance_id, {"team": "ai"}, False)
    assert info.value.kind == ErrorKind.TRANSIENT
    assert _labels(fake, instance_id)[0]["team"] == "ml"


def test_the_fake_refuses_a_stale_resource_version(nebius):
    from nebius.api.nebius.compute.v1 import GetInstanceRequest, InstanceServiceClient, UpdateInstanceRequest
    provider, fake, _location, instance_id = nebius
    instance = provider._call("get", InstanceServiceClient, "get", GetInstanceRequest(id=instance_id))
    fake.instances[instance_id]["version"] += 1   # someone else updated it since
    with pytest.raises(ProviderError) as info:
        provider._call("update", InstanceServiceClient, "update",
                       UpdateInstanceRequest(metadata=instance.metadata, spec=instance.spec))
    assert "resource version mismatch" in info.value.msg


def test_retag_refuses_an_instance_of_another_vm(nebius):
    provider, fake, location, instance_id = nebius
    with pytest.raises(ProviderError) as info:
        provider.retag(location, "other", instance_id, {}, True)
    assert info.value.msg == "tags: %s is not an instance of VM other" % instance_id
    assert not _updates(fake)
