"""Every tag or label list an adapter sends names each key once, whatever the user's tags: a user tag named
like one gpuprov writes (the identity, ``Name`` on AWS, ``gpuprov-ssh-user`` on Nebius, ``gpuprov-managed-by``
on Docker, the firewall tag on DigitalOcean) does not travel beside it, and a tag the cloud would read back under
another name (``a:b`` on DigitalOcean, ``a=b`` on Hyperstack, ``Team`` beside ``team`` on GCP) is refused before
any call, naming it. The fakes of clouds whose tags are key/value pairs (EC2, Lambda) refuse a key twice, as
those APIs do.

Specs here are built around request_params (which refuses ``gpuprov-*`` names), as another caller could."""

from __future__ import annotations

import collections
import tempfile

import pytest

from ansible_collections.gpuprov.cloud.tests.unit.conftest import AWS_JOURNAL_ID
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    JOURNAL_ID_TAG, VM_NAME_TAG, InstanceSpec, Offer, ProviderError, ResourceRequest,
)

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIUnitTestOnlyNotARealKey000000000000000 unit@test"
JOURNAL = AWS_JOURNAL_ID   # the aws fixture's (conftest.py); the other adapters here are given it too
FORGED = {VM_NAME_TAG: "other-vm", JOURNAL_ID_TAG: "other-journal"}


def repeated(keys):
    return sorted(k for k, n in collections.Counter(keys).items() if n > 1)


# -- AWS (moto): Name, given by the user, names the instance, its volumes and its security group ------------

def _aws_tags(resource):
    keys = [t["Key"] for t in resource.get("Tags") or []]
    return keys, {t["Key"]: t["Value"] for t in resource.get("Tags") or []}


def test_the_ec2_fake_refuses_a_tag_key_twice(aws):
    from botocore.exceptions import ClientError
    _provider, ec2 = aws
    vpc = ec2.describe_vpcs()["Vpcs"][0]["VpcId"]
    with pytest.raises(ClientError) as info:
        ec2.create_security_group(GroupName="twice", Description="d", VpcId=vpc, TagSpecifications=[
            {"ResourceType": "security-group", "Tags": [{"Key": "Name", "Value": "a"}, {"Key": "Name", "Value": "b"}]}])
    assert info.value.response["Error"]["Code"] == "InvalidParameterValue"
    assert "Name" in info.value.response["Error"]["Message"]
    assert not ec2.describe_security_groups(Filters=[{"Name": "group-name", "Values": ["twice"]}])["SecurityGroups"]
    group = ec2.create_security_group(GroupName="once", Description="d", VpcId=vpc)["GroupId"]
    with pytest.raises(ClientError):
        ec2.create_tags(Resources=[group], Tags=[{"Key": "team", "Value": "a"}, {"Key": "team", "Value": "b"}])


@pytest.mark.parametrize("user", [{"Name": "train"}, dict(FORGED, Name="train", team="ml"),
                                  {"gpuprov-ssh-user": "mallory", "Name": "train"}])
def test_aws_a_user_name_tag_names_the_resources_and_every_key_is_sent_once(aws, user):
    provider, ec2 = aws
    offer = Offer(cloud="aws", region="us-east-1", instance_type="g4dn.xlarge", gpu="T4", gpu_count=1)
    spec = InstanceSpec(vm_name="tagged", ssh_public_key=KEY, tags=dict(user))
    prepared = provider.prepare(offer, spec)        # the fake refuses a key twice: it would fail here
    instance_id = provider.create(offer, prepared, spec)
    inst = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]
    group = ec2.describe_security_groups(GroupIds=[prepared["security_group_id"]])["SecurityGroups"][0]
    volumes = ec2.describe_volumes(Filters=[{"Name": "attachment.instance-id", "Values": [instance_id]}])["Volumes"]
    assert volumes
    for resource in [inst, group] + volumes:
        keys, tags = _aws_tags(resource)
        assert repeated(keys) == [], keys
        assert tags["Name"] == "train"   # the user's Name, not gpuprov's default
        assert (tags[VM_NAME_TAG], tags[JOURNAL_ID_TAG]) == ("tagged", JOURNAL)   # the identity wins
    assert _aws_tags(inst)[1]["gpuprov-ssh-user"] == "ubuntu"
    assert provider.observe(offer.location, "tagged")[0].instance_id == instance_id
    provider.delete(offer.location, "tagged", [instance_id])


def test_aws_without_a_user_name_gpuprov_names_the_instance_and_the_group(aws):
    provider, ec2 = aws
    offer = Offer(cloud="aws", region="us-east-1", instance_type="g4dn.xlarge", gpu="T4", gpu_count=1)
    spec = InstanceSpec(vm_name="untagged", ssh_public_key=KEY, tags={"team": "ml"})
    prepared = provider.prepare(offer, spec)
    instance_id = provider.create(offer, prepared, spec)
    inst = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]
    group = ec2.describe_security_groups(GroupIds=[prepared["security_group_id"]])["SecurityGroups"][0]
    assert _aws_tags(inst)[1]["Name"] == "untagged"
    assert _aws_tags(group)[1]["Name"] == group["GroupName"]
    provider.delete(offer.location, "untagged", [instance_id])


# -- GCP (Compute REST fake): labels are lower-cased, so two tags could be one label --------------------------

def test_gcp_two_tags_that_are_one_label_are_refused_and_the_identity_wins():
    pytest.importorskip("google.cloud.compute_v1")
    pytest.importorskip("pytest_httpserver")
    from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.gcp import GcpProvider
    from ansible_collections.gpuprov.cloud.tests.fakes.gcp_compute import GcpComputeFake
    fake = GcpComputeFake()
    try:
        provider = GcpProvider({"project": fake.project, "api_endpoint": fake.url, "read_retry_s": 0},
                               journal_id=JOURNAL)
        offer = provider.plan(ResourceRequest(vm_name="tagged", gpu="L4"))[0]
        twice = InstanceSpec(vm_name="tagged", ssh_public_key=KEY, allowed_cidrs=["198.51.100.7/32"],
                             tags={"Team": "ml", "team": "ai"})
        calls = len(fake.calls)
        with pytest.raises(ProviderError) as info:
            provider.prepare(offer, twice)
        assert len(fake.calls) == calls   # refused before any call
        forged = InstanceSpec(vm_name="tagged", ssh_public_key=KEY, allowed_cidrs=["198.51.100.7/32"],
                              tags={"GPUPROV-VM-NAME": "other-vm", "team": "ml"})
        provider.create(offer, provider.prepare(offer, forged), forged)
        inst = next(iter(fake.instances.values()))
    finally:
        fake.stop()
    assert info.value.msg.startswith("tags.team: 'Team' and 'team' are the same GCP label 'team'"), info.value.msg
    assert inst["labels"] == {VM_NAME_TAG: "tagged", JOURNAL_ID_TAG: JOURNAL, "team": "ml"}
    assert inst["disks"][0]["initializeParams"]["labels"] == inst["labels"]


# -- DigitalOcean (REST fake): tag names are name:value ----------------------------------------------------------

def test_digitalocean_sends_each_tag_name_once_and_refuses_a_name_with_a_colon():
    pytest.importorskip("requests")
    from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.digitalocean import (
        DigitalOceanProvider, catalog,
    )
    from ansible_collections.gpuprov.cloud.tests.fakes.digitalocean_api import DigitalOceanApiFake, public_key
    with tempfile.TemporaryDirectory() as folder:
        fake = DigitalOceanApiFake(folder)
        try:
            provider = DigitalOceanProvider({"api_url": fake.api_url, "api_key": fake.token,
                                             "ssh_port": fake.ssh_port}, journal_id=JOURNAL)
            key = public_key("me@laptop", b"unit")
            made = InstanceSpec(vm_name="tagged-do", ssh_public_key=key, allowed_cidrs=["203.0.113.9/32"],
                                tags=dict(FORGED, **{"gpuprov-firewall": "someone-elses", "team": "ml"}))
            offer = next(o for o in provider.plan(ResourceRequest(vm_name="tagged-do", gpu="RTX4000ADA"))
                         if o.available)
            prepared = provider.prepare(offer, made)
            droplet = provider.create(offer, prepared, made)
            tags = fake.droplets[int(droplet)]["tags"]
            calls = len(fake.calls)
            with pytest.raises(ProviderError) as info:
                provider.prepare(offer, InstanceSpec(vm_name="tagged-do", ssh_public_key=key,
                                                     tags={"team:x": "ml", "team": "x:ml"}))
            assert len(fake.calls) == calls   # refused before any call
        finally:
            fake.stop()
    assert repeated(t.split(":", 1)[0] for t in tags) == [], tags
    assert set(tags) == {"team:ml", catalog.vm_tag("tagged-do"), catalog.journal_tag(JOURNAL),
                         prepared["firewall_tag"]}, tags
    assert info.value.msg.startswith("tags: 'team:x' cannot be a DigitalOcean tag name (a tag is <name>:<value>")


# -- Hyperstack (REST fake): labels are name=value ---------------------------------------------------------------

def test_hyperstack_sends_each_label_name_once_and_refuses_a_name_with_an_equals_sign():
    pytest.importorskip("requests")
    from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.hyperstack import HyperstackProvider
    from ansible_collections.gpuprov.cloud.tests.fakes.hyperstack_api import HyperstackApiFake
    with tempfile.TemporaryDirectory() as folder:
        fake = HyperstackApiFake(folder)
        try:
            provider = HyperstackProvider({"api_url": fake.api_url, "api_key": fake.token, "ssh_user": "tester",
                                           "ssh_port": fake.ssh_port, "allowed_cidrs": ["198.51.100.7/32"]},
                                          journal_id=JOURNAL)
            made = InstanceSpec(vm_name="tagged-hs", ssh_public_key=KEY, tags=dict(FORGED, team="ml"))
            offer = provider.plan(ResourceRequest(vm_name="tagged-hs", gpu="A100-80GB"))[0]
            provider.create(offer, provider.prepare(offer, made), made)
            (_key, _method, _path, _query, body), = fake.calls_of("vms.create")
            calls = len(fake.calls)
            with pytest.raises(ProviderError) as info:
                provider.prepare(offer, InstanceSpec(vm_name="tagged-hs", ssh_public_key=KEY,
                                                     tags={"team=ml": "x", "team": "ml=x"}))
            assert len(fake.calls) == calls
        finally:
            fake.stop()
    assert repeated(label.split("=", 1)[0] for label in body["labels"]) == [], body["labels"]
    assert sorted(body["labels"]) == sorted(["team=ml", "gpuprov-vm-name=tagged-hs", "gpuprov-journal-id=" + JOURNAL])
    assert info.value.msg.startswith("tags: 'team=ml' cannot be a Hyperstack label name (a label is <name>=<value>")


# -- Lambda (REST fake): tags are {key, value} -----------------------------------------------------------------

def test_lambda_sends_each_tag_key_once_and_its_fake_refuses_a_key_twice():
    requests = pytest.importorskip("requests")
    from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.lambda_cloud import LambdaProvider
    from ansible_collections.gpuprov.cloud.tests.fakes.lambda_api import LambdaApiFake
    with tempfile.TemporaryDirectory() as folder:
        fake = LambdaApiFake(folder)
        try:
            provider = LambdaProvider({"api_url": fake.api_url, "api_key": fake.token, "ssh_port": fake.ssh_port},
                                      journal_id=JOURNAL)
            made = InstanceSpec(vm_name="tagged-la", ssh_public_key=KEY, allowed_cidrs=["203.0.113.9/32"],
                                tags=dict(FORGED, team="ml"))
            offer = next(o for o in provider.plan(ResourceRequest(vm_name="tagged-la", gpu="A10")) if o.available)
            prepared = provider.prepare(offer, made)
            instance_id = provider.create(offer, prepared, made)
            sent = fake.calls_of("instances.launch")[-1][4]["tags"]
            launch = dict(fake.calls_of("instances.launch")[-1][4])
            launch["tags"] = [{"key": "team", "value": "a"}, {"key": "team", "value": "b"}]
            twice = requests.post(fake.api_url + "/instance-operations/launch", json=launch, timeout=10,
                                  headers={"Authorization": "Bearer %s" % fake.token})
        finally:
            fake.stop()
    assert repeated(t["key"] for t in sent) == [], sent
    assert {t["key"]: t["value"] for t in sent} == {"team": "ml", VM_NAME_TAG: "tagged-la", JOURNAL_ID_TAG: JOURNAL}
    assert instance_id
    assert twice.status_code == 400 and "duplicate key 'team'" in twice.text, twice.text


# -- Nebius (gRPC fake): labels are a map; gpuprov's own win -----------------------------------------------------

def test_nebius_labels_keep_gpuprovs_own_over_a_user_tag_of_the_same_name():
    pytest.importorskip("nebius")
    from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.nebius import NebiusProvider
    from ansible_collections.gpuprov.cloud.tests.fakes.nebius_grpc import NebiusGrpcFake
    with tempfile.TemporaryDirectory() as folder:
        fake = NebiusGrpcFake(folder)
        try:
            provider = NebiusProvider({"api_endpoint": fake.api_endpoint, "api_insecure": True, "iam_token": fake.token,
                                       "project_id": fake.project_id, "ssh_port": fake.ssh_port,
                                       "request_timeout_s": 10}, journal_id=JOURNAL)
            made = InstanceSpec(vm_name="tagged", ssh_public_key=KEY, allowed_cidrs=["198.51.100.7/32"],
                                tags=dict(FORGED, **{"gpuprov-ssh-user": "mallory", "team": "ml"}))
            offer = provider.plan(ResourceRequest(vm_name="tagged", gpu="H100"))[0]
            provider.create(offer, provider.prepare(offer, made), made)
            request = [c for c in fake.calls if c[0] == "instances.create"][-1][1]
        finally:
            fake.stop()
    assert dict(request.metadata.labels) == {VM_NAME_TAG: "tagged", JOURNAL_ID_TAG: JOURNAL, "team": "ml",
                                             "gpuprov-ssh-user": "ubuntu"}
    assert dict(request.spec.boot_disk.managed_disk.labels) == {VM_NAME_TAG: "tagged", JOURNAL_ID_TAG: JOURNAL,
                                                                "team": "ml"}


# -- Verda (REST fake): the identity tags only, each once ---------------------------------------------------------

def test_verda_sends_the_identity_tags_once_whatever_the_user_tags():
    pytest.importorskip("requests")
    from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.verda import VerdaProvider
    from ansible_collections.gpuprov.cloud.tests.fakes.verda_api import VerdaApiFake
    from ansible_collections.gpuprov.cloud.tests.unit.test_verda_adapter import CLIENT_ID, CLIENT_SECRET
    with tempfile.TemporaryDirectory() as folder:
        fake = VerdaApiFake(folder)
        try:
            provider = VerdaProvider({"api_url": fake.api_url, "client_id": CLIENT_ID, "client_secret": CLIENT_SECRET,
                                      "ssh_user": "tester", "ssh_port": fake.ssh_port}, journal_id=JOURNAL)
            made = InstanceSpec(vm_name="tagged-ve", ssh_public_key=KEY, tags=dict(FORGED, team="ml"))
            offer = provider.plan(ResourceRequest(vm_name="tagged-ve", gpu="H100"))[0]
            provider.create(offer, provider.prepare(offer, made), made)
            sent = fake.calls_of("instances.create")[-1][4]["tags"]
        finally:
            fake.stop()
    assert repeated(t["key"].lower() for t in sent) == [], sent
    assert {t["key"]: t["value"] for t in sent} == {VM_NAME_TAG: "tagged-ve", JOURNAL_ID_TAG: JOURNAL}


# -- Docker and local: labels and the record are maps; the identity wins ---------------------------------------

def test_docker_and_local_keep_the_identity_over_a_user_tag_of_the_same_name():
    from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.local import LocalProvider
    made = InstanceSpec(vm_name="tagged", ssh_public_key=KEY, tags=dict(FORGED, team="ml"))
    expected = {VM_NAME_TAG: "tagged", JOURNAL_ID_TAG: JOURNAL, "team": "ml"}
    made = InstanceSpec(vm_name="tagged", ssh_public_key=KEY,
                        tags=dict(FORGED, team="ml", **{"gpuprov-managed-by": "me", "GPUPROV-Other": "x"}))
    assert LocalProvider({"root": "/nonexistent"}, journal_id=JOURNAL).resource_tags(made) == expected
    docker = pytest.importorskip("ansible_collections.gpuprov.cloud.plugins.module_utils.providers.docker")
    if not docker.HAS_DOCKER:
        pytest.skip("the docker SDK is not installed")
    assert docker.DockerProvider(journal_id=JOURNAL).resource_tags(made) == expected
