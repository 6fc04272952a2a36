"""User tags and labels (the ``tags`` option): validated once (request_params.user_tags), merged
under the identity tags, which a user can never override (Provider.resource_tags), and put on
every resource each adapter makes where its cloud takes tags or labels."""

from __future__ import annotations

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    JOURNAL_ID_TAG, VM_NAME_TAG, InstanceSpec, Offer, ProviderError,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.request_params import instance_spec, user_tags

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIUnitTestOnlyNotARealKey000000000000000 unit@test"
USER = {"team": "ml", "cost-center": "42"}
JOURNAL = "0123456789abcdef"


def spec(name="tagged", tags=None):
    return InstanceSpec(vm_name=name, ssh_public_key=KEY, tags=dict(USER if tags is None else tags))


# -- the option --------------------------------------------------------------------------------

def test_tags_become_strings_and_reach_the_spec():
    made = instance_spec({"tags": {"team": "ml", "cost-center": 42, "gpu-budget": True, "empty": None}}, "v", KEY)
    assert made.tags == {"team": "ml", "cost-center": "42", "gpu-budget": "true", "empty": ""}
    assert instance_spec({}, "v", KEY).tags == {}


@pytest.mark.parametrize("tags, message", [
    ({VM_NAME_TAG: "other"}, "tags: 'gpuprov-vm-name' is reserved"),
    ({JOURNAL_ID_TAG: "x"}, "tags: 'gpuprov-journal-id' is reserved"),
    ({"GPUPROV-Anything": "x"}, "tags: 'GPUPROV-Anything' is reserved"),
    ({"": "x"}, "tags: expected non-empty tag names"),
    ({"team": ["a"]}, "tags.team: expected a string or number, got list"),
    (["team"], "tags: expected a dict of tag names to values, got list"),
])
def test_a_bad_or_reserved_tag_is_refused_naming_the_field(tags, message):
    with pytest.raises(ProviderError) as info:
        user_tags({"tags": tags})
    assert info.value.msg.startswith(message), info.value.msg


def test_identity_tags_win_over_user_tags():
    from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.local import LocalProvider
    provider = LocalProvider({"root": "/nonexistent"}, journal_id=JOURNAL)
    # Even a spec built around request_params (say, by another caller) cannot override the identity.
    forged = spec(tags={VM_NAME_TAG: "other", JOURNAL_ID_TAG: "x", "team": "ml"})
    assert provider.resource_tags(forged) == {VM_NAME_TAG: "tagged", JOURNAL_ID_TAG: JOURNAL, "team": "ml"}


# -- AWS (moto): the instance, its volumes and its security group ---------------------------------

@pytest.fixture
def aws():
    pytest.importorskip("boto3")
    pytest.importorskip("moto")
    from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.aws import AwsProvider
    from ansible_collections.gpuprov.cloud.tests.fakes import moto_ec2 as aws_fake
    fake = aws_fake.shared_server()
    creds = fake.new_account()
    provider = AwsProvider(dict(creds, endpoint_url=fake.endpoint_url, allowed_cidrs=["203.0.113.7/32"],
                                ami_name_filter="Deep Learning AMI Ubuntu Linux*", controller_ip_url=""),
                           journal_id=JOURNAL)
    yield provider, fake.client("ec2", "us-east-1", creds)
    fake.clear(account=creds["aws_access_key_id"])


def _tags(resource):
    return {t["Key"]: t["Value"] for t in resource.get("Tags") or []}


def test_aws_tags_the_instance_its_volumes_and_its_security_group(aws):
    provider, ec2 = aws
    offer = Offer(cloud="aws", region="us-east-1", instance_type="g4dn.xlarge", gpu="T4", gpu_count=1)
    prepared = provider.prepare(offer, spec())
    instance_id = provider.create(offer, prepared, spec())
    inst = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]
    group = ec2.describe_security_groups(GroupIds=[prepared["security_group_id"]])["SecurityGroups"][0]
    volumes = ec2.describe_volumes(Filters=[{"Name": "attachment.instance-id", "Values": [instance_id]}])["Volumes"]
    for resource in [inst, group] + volumes:
        tags = _tags(resource)
        assert {k: tags.get(k) for k in USER} == USER, tags
        assert tags[VM_NAME_TAG] == "tagged" and tags[JOURNAL_ID_TAG] == JOURNAL
    assert volumes
    provider.delete(offer.location, "tagged", [instance_id])


def test_aws_refuses_a_tag_it_could_not_hold_before_any_call(aws):
    provider, _ec2 = aws
    offer = Offer(cloud="aws", region="us-east-1", instance_type="g4dn.xlarge", gpu="T4", gpu_count=1)
    with pytest.raises(ProviderError) as info:
        provider.prepare(offer, spec(tags={"aws:owner": "me"}))
    assert info.value.msg.startswith("tags: 'aws:owner' cannot be an AWS tag name")
    with pytest.raises(ProviderError) as info:
        provider.prepare(offer, spec(tags={"team": "ml#1"}))
    assert info.value.msg.startswith("tags.team: 'ml#1' cannot be an AWS tag value")
