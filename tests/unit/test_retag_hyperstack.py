"""Hyperstack retag against its API fake: the VM's user labels (``name=value``) set with one
PUT /core/virtual-machines/{id}/label of the whole list; idempotent, gpuprov's and plain labels kept."""

from __future__ import annotations

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    JOURNAL_ID_TAG, VM_NAME_TAG, InstanceSpec, ProviderError, ResourceRequest,
)

pytest.importorskip("requests")

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.hyperstack import (  # noqa: E402
    HyperstackProvider,
)
from ansible_collections.gpuprov.cloud.tests.fakes.hyperstack_api import HyperstackApiFake  # noqa: E402

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIUnitTestOnlyNotARealKey000000000000000 unit@test"
JOURNAL = "0123456789abcdef"
OWN = {"%s=tagged-hs" % VM_NAME_TAG, "%s=%s" % (JOURNAL_ID_TAG, JOURNAL)}


@pytest.fixture
def hyperstack(tmp_path):
    fake = HyperstackApiFake(str(tmp_path))
    try:
        provider = HyperstackProvider({"api_url": fake.api_url, "api_key": fake.token, "ssh_user": "tester",
                                       "ssh_port": fake.ssh_port, "allowed_cidrs": ["198.51.100.7/32"]},
                                      journal_id=JOURNAL)
        made = InstanceSpec(vm_name="tagged-hs", ssh_public_key=KEY, tags={"team": "ml", "cost-center": "42"})
        offer = provider.plan(ResourceRequest(vm_name="tagged-hs", gpu="A100-80GB"))[0]
        instance_id = provider.create(offer, provider.prepare(offer, made), made)
        yield provider, fake, offer.location, instance_id
    finally:
        fake.stop()


def _labels(fake, instance_id):
    return set(fake.instances[int(instance_id)]["labels"])


def test_retag_sets_the_whole_label_list_once_and_is_idempotent(hyperstack):
    provider, fake, location, instance_id = hyperstack
    assert provider.retag(location, "tagged-hs", instance_id, {"team": "ml", "cost-center": "42"}, True) == {
        "set": {}, "removed": []}
    wanted = {"team": "ai", "owner": "kim"}
    assert provider.retag(location, "tagged-hs", instance_id, wanted, True, check=True) == {
        "set": {"team": "ai", "owner": "kim"}, "removed": ["cost-center"]}
    assert not fake.calls_of("vms.label")   # neither the no-op nor check mode writes
    assert provider.retag(location, "tagged-hs", instance_id, wanted, True) == {
        "set": {"team": "ai", "owner": "kim"}, "removed": ["cost-center"]}
    assert _labels(fake, instance_id) == OWN | {"team=ai", "owner=kim"}
    assert provider.retag(location, "tagged-hs", instance_id, wanted, True) == {"set": {}, "removed": []}
    assert len(fake.calls_of("vms.label")) == 1


def test_retag_without_purge_adds_and_purge_keeps_gpuprov_and_plain_labels(hyperstack):
    provider, fake, location, instance_id = hyperstack
    fake.instances[int(instance_id)]["labels"].append("prod")   # a label made in the console
    assert provider.retag(location, "tagged-hs", instance_id, {"extra": "1"}, False) == {
        "set": {"extra": "1"}, "removed": []}
    assert {"team=ml", "cost-center=42", "extra=1", "prod"} <= _labels(fake, instance_id)
    assert provider.retag(location, "tagged-hs", instance_id, {}, True)["removed"] == ["cost-center", "extra", "team"]
    assert _labels(fake, instance_id) == OWN | {"prod"}


def test_retag_refuses_another_vms_instance_and_a_label_hyperstack_would_split(hyperstack):
    provider, fake, location, instance_id = hyperstack
    with pytest.raises(ProviderError) as info:
        provider.retag(location, "other", instance_id, {}, True)
    assert info.value.msg == "tags: %s is not a VM of other" % instance_id
    with pytest.raises(ProviderError) as info:
        provider.retag(location, "tagged-hs", instance_id, {"team": "m l"}, True)
    assert info.value.msg.startswith("tags.team: 'team=m l' cannot be a Hyperstack label")
    assert not fake.calls_of("vms.label")


def test_the_fake_splits_a_label_at_spaces_as_hyperstack_documents(hyperstack):
    provider, fake, _location, instance_id = hyperstack
    provider.api.put("/core/virtual-machines/%s/label" % instance_id, json={"labels": ["a=1 b=2"]})
    assert _labels(fake, instance_id) == {"a=1", "b=2"}
    provider.api.put("/core/virtual-machines/%s/label" % instance_id, json={"labels": [""]})
    assert _labels(fake, instance_id) == set()
