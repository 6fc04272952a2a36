"""AwsProvider.sweep_locations / list_owned (the orphan sweep's listing) against moto's EC2.

Resources are made through the adapter's own prepare/create for three journals (this
one, another, none), plus an instance and a group without gpuprov's tags that must
never be listed.
"""

from __future__ import annotations

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.aws import AwsProvider
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.aws.catalog import DEFAULT_REGIONS
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    ANY_REGION, ErrorKind, InstanceSpec, Location, Offer, Owned, ProviderError, ResourceKind, Status,
)
from ansible_collections.gpuprov.cloud.tests.fakes import moto_ec2 as fake
from ansible_collections.gpuprov.cloud.tests.fakes.moto_ec2 import ec2_body

moto_ec2 = fake.moto_ec2   # the session fixture: the shared moto server, fake credentials in env

REGION = "us-east-1"
LOC = Location("aws", REGION)
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIUnitTestOnlyNotARealKey000000000000000 unit@test"
JOURNAL = "0123456789abcdef0123456789abcdef"
OTHER = "fedcba9876543210fedcba9876543210"


@pytest.fixture
def account(moto_ec2):
    return moto_ec2.new_account()


@pytest.fixture
def ec2(moto_ec2, account):
    return moto_ec2.client("ec2", REGION, account)


@pytest.fixture
def make(moto_ec2, account):
    def build(journal_id=None, **options):
        base = dict(account, endpoint_url=moto_ec2.endpoint_url, allowed_cidrs=["203.0.113.7/32"],
                    ami_name_filter="Deep Learning AMI Ubuntu Linux*", controller_ip_url="")
        base.update(options)
        return AwsProvider(base, journal_id=journal_id)
    return build


def launch(provider, vm_name, instance_type="g4dn.xlarge", spot=False):
    offer = Offer(cloud="aws", region=REGION, instance_type=instance_type, gpu="T4", gpu_count=1, spot=spot)
    spec = InstanceSpec(vm_name=vm_name, ssh_public_key=KEY)
    prepared = provider.prepare(offer, spec)
    return prepared["security_group_id"], provider.create(offer, prepared, spec)


def test_sweep_locations_are_the_catalog_regions_without_a_call(make, moto_ec2, account):
    assert make().sweep_locations() == [Location("aws", r) for r in DEFAULT_REGIONS]
    located = make(regions=["ap-south-1", "us-east-1"]).sweep_locations()
    assert [loc.region for loc in located] == ["ap-south-1", "us-east-1"] + [
        r for r in DEFAULT_REGIONS if r != "us-east-1"]
    assert moto_ec2.calls(account=account["aws_access_key_id"]) == []


def test_list_owned_lists_every_journal_s_instances_and_groups(make, ec2):
    mine_group, mine = launch(make(JOURNAL), "own1")
    other_group, other = launch(make(OTHER), "own2", instance_type="t3.medium")
    legacy_group, legacy = launch(make(), "own3", spot=True)
    # Without gpuprov's identity: never listed.
    ec2.run_instances(ImageId="ami-dca37ea5", InstanceType="t3.medium", MinCount=1, MaxCount=1,
                      TagSpecifications=[{"ResourceType": "instance", "Tags": [{"Key": "Name", "Value": "own1"}]}])
    vpc = ec2.describe_vpcs(Filters=[{"Name": "is-default", "Values": ["true"]}])["Vpcs"][0]["VpcId"]
    ec2.create_security_group(GroupName="gpuprov-lookalike", Description="not ours", VpcId=vpc)

    found = make(JOURNAL).list_owned(LOC)
    assert all(isinstance(o, Owned) for o in found)
    by_id = {o.resource_id: o for o in found}
    assert sorted(by_id) == sorted([mine, other, legacy, mine_group, other_group, legacy_group])
    for resource_id, kind, vm_name, journal_id in [
            (mine, ResourceKind.INSTANCE, "own1", JOURNAL), (other, ResourceKind.INSTANCE, "own2", OTHER),
            (legacy, ResourceKind.INSTANCE, "own3", None),
            (mine_group, ResourceKind.SECURITY_GROUP, "own1", JOURNAL),
            (other_group, ResourceKind.SECURITY_GROUP, "own2", OTHER),
            (legacy_group, ResourceKind.SECURITY_GROUP, "own3", None)]:
        owned = by_id[resource_id]
        assert (owned.kind, owned.vm_name, owned.journal_id) == (kind, vm_name, journal_id)
        assert owned.location.cloud == "aws" and owned.location.region == REGION
    assert by_id[mine].location.zone.startswith(REGION)
    assert {by_id[i].status for i in (mine, other, legacy)} == {Status.RUNNING}
    # the catalog's on-demand price; spot has no fixed price
    assert (by_id[mine].price_per_hour, by_id[other].price_per_hour, by_id[legacy].price_per_hour) == (
        0.526, 0.0416, None)
    assert by_id[mine_group].status is None and by_id[mine_group].price_per_hour is None
    assert by_id[mine_group].name.startswith("gpuprov-own1-j")
    # other regions are other listings
    assert make(JOURNAL).list_owned(Location("aws", "us-west-2")) == []


def test_list_owned_shows_leaving_instances_and_omits_gone_ones(make, ec2):
    _group, leaving = launch(make(JOURNAL), "own4")
    ec2.stop_instances(InstanceIds=[leaving])
    (seen,) = [o for o in make().list_owned(LOC) if o.kind == ResourceKind.INSTANCE]
    assert seen.resource_id == leaving and seen.status in (Status.STOPPING, Status.STOPPED)
    ec2.terminate_instances(InstanceIds=[leaving])
    assert [o.kind for o in make().list_owned(LOC)] == [ResourceKind.SECURITY_GROUP]


def _reservation(instance_id):
    return ("<item><reservationId>r-%s</reservationId><ownerId>123456789012</ownerId><instancesSet><item>"
            "<instanceId>%s</instanceId><instanceType>g4dn.xlarge</instanceType>"
            "<instanceState><code>16</code><name>running</name></instanceState>"
            "<placement><availabilityZone>us-east-1a</availabilityZone></placement>"
            "<tagSet><item><key>gpuprov-vm-name</key><value>pg</value></item></tagSet>"
            "</item></instancesSet></item>" % (instance_id, instance_id))


def test_list_owned_follows_describe_instances_pages(make, moto_ec2, account):
    akid = account["aws_access_key_id"]
    pages = [("<reservationSet>%s</reservationSet><nextToken>page-2</nextToken>" % _reservation("i-0000000000000001")),
             "<reservationSet>%s</reservationSet>" % _reservation("i-0000000000000002")]
    for page in pages:   # answered in this order
        moto_ec2.inject("DescribeInstances", status=200, account=akid, body=ec2_body("DescribeInstances", page))
    found = make().list_owned(LOC)
    assert [o.resource_id for o in found if o.kind == ResourceKind.INSTANCE] == [
        "i-0000000000000001", "i-0000000000000002"]
    assert len(moto_ec2.calls("DescribeInstances", akid)) == 2


def test_list_owned_classifies_an_api_error(make, moto_ec2, account):
    akid = account["aws_access_key_id"]
    moto_ec2.inject("DescribeSecurityGroups", code="UnauthorizedOperation", status=403, account=akid)
    try:
        with pytest.raises(ProviderError) as info:
            make().list_owned(LOC)
    finally:
        moto_ec2.clear(akid)
    assert info.value.kind == ErrorKind.CREDENTIALS


def test_list_owned_wants_one_region(make):
    with pytest.raises(ProviderError) as info:
        make().list_owned(Location("aws", ANY_REGION))
    assert info.value.kind == ErrorKind.INVALID_REQUEST and info.value.msg.startswith("location")
