"""DigitalOcean retag against its API fake: the droplet's user tags (``name:value``) changed with
POST/DELETE /v2/tags/{tag}/resources, each tag made first (POST /v2/tags); idempotent, gpuprov's tags kept."""

from __future__ import annotations

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    JOURNAL_ID_TAG, VM_NAME_TAG, InstanceSpec, ProviderError, ResourceRequest,
)

pytest.importorskip("requests")

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.digitalocean import (  # noqa: E402
    DigitalOceanProvider,
)
from ansible_collections.gpuprov.cloud.tests.fakes.digitalocean_api import (  # noqa: E402
    DigitalOceanApiFake, public_key,
)

JOURNAL = "0123456789abcdef"


@pytest.fixture
def droplet(tmp_path):
    fake = DigitalOceanApiFake(str(tmp_path))
    try:
        provider = DigitalOceanProvider({"api_url": fake.api_url, "api_key": fake.token, "ssh_port": fake.ssh_port},
                                        journal_id=JOURNAL)
        made = InstanceSpec(vm_name="tagged-do", ssh_public_key=public_key("me@laptop", b"unit"),
                            allowed_cidrs=["203.0.113.9/32"], tags={"team": "ml", "cost-center": "42"})
        offer = [o for o in provider.plan(ResourceRequest(vm_name="tagged-do", gpu="RTX4000ADA")) if o.available][0]
        instance_id = provider.create(offer, provider.prepare(offer, made), made)
        yield provider, fake, offer.location, instance_id
    finally:
        fake.stop()


def _tags(fake, instance_id):
    return set(fake.droplets[int(instance_id)]["tags"])


def _writes(fake):
    return [c for c in fake.calls if c[0] in ("tags.create", "tags.tag-resources", "tags.untag-resources")]


def test_retag_changes_a_value_adds_and_purges_and_keeps_gpuprov_tags(droplet):
    provider, fake, location, instance_id = droplet
    before, made = _tags(fake, instance_id), len(_writes(fake))
    own = {t for t in before if t.startswith("gpuprov-")}
    assert any(t.startswith(VM_NAME_TAG + ":") for t in own) and any(t.startswith(JOURNAL_ID_TAG) for t in own)
    assert provider.retag(location, "tagged-do", instance_id, {"team": "ml", "cost-center": "42"}, True) == {
        "set": {}, "removed": []}
    wanted = {"team": "ai", "owner": "kim"}
    assert provider.retag(location, "tagged-do", instance_id, wanted, True, check=True) == {
        "set": {"team": "ai", "owner": "kim"}, "removed": ["cost-center"]}
    assert _tags(fake, instance_id) == before and len(_writes(fake)) == made   # check mode changes nothing
    assert provider.retag(location, "tagged-do", instance_id, wanted, True) == {
        "set": {"team": "ai", "owner": "kim"}, "removed": ["cost-center"]}
    assert _tags(fake, instance_id) == own | {"team:ai", "owner:kim"}
    assert "owner:kim" in fake.tags   # made before it was attached
    writes = len(_writes(fake))
    assert provider.retag(location, "tagged-do", instance_id, wanted, True) == {"set": {}, "removed": []}
    assert len(_writes(fake)) == writes   # idempotent: a second run calls nothing that writes


def test_retag_without_purge_only_adds_and_updates(droplet):
    provider, fake, location, instance_id = droplet
    fake.tags["hand-made"] = {"name": "hand-made"}   # a tag someone added in the console
    fake.droplets[int(instance_id)]["tags"].append("hand-made")
    assert provider.retag(location, "tagged-do", instance_id, {"cost-center": "43"}, False) == {
        "set": {"cost-center": "43"}, "removed": []}
    tags = _tags(fake, instance_id)
    assert {"team:ml", "cost-center:43", "hand-made"} <= tags and "cost-center:42" not in tags
    purged = provider.retag(location, "tagged-do", instance_id, {}, True)
    assert purged == {"set": {}, "removed": ["cost-center", "hand-made", "team"]}
    assert all(t.startswith("gpuprov-") for t in _tags(fake, instance_id))


def test_retag_refuses_another_vms_droplet_and_a_tag_digitalocean_cannot_hold(droplet):
    provider, fake, location, instance_id = droplet
    with pytest.raises(ProviderError) as info:
        provider.retag(location, "other", instance_id, {}, True)
    assert info.value.msg == "tags: %s is not a droplet of VM other" % instance_id
    calls = len(fake.calls)
    with pytest.raises(ProviderError) as info:
        provider.retag(location, "tagged-do", instance_id, {"team": "m l"}, True)
    assert info.value.msg.startswith("tags.team: 'team:m l' cannot be a DigitalOcean tag")
    assert len(fake.calls) == calls


def test_the_fake_refuses_to_tag_with_a_tag_that_does_not_exist(droplet):
    import requests
    _provider, fake, _location, instance_id = droplet
    answer = requests.post("%s/tags/never-made/resources" % fake.api_url, timeout=10,
                           headers={"Authorization": "Bearer " + fake.token},
                           json={"resources": [{"resource_id": str(instance_id), "resource_type": "droplet"}]})
    assert answer.status_code == 404 and answer.json()["id"] == "not_found"
