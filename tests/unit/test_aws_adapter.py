"""The AWS adapter against moto's EC2 in server mode (tests/fakes/moto_ec2.py).

The adapter talks HTTP to 127.0.0.1 through ``endpoint_url``, the same code path
as the real endpoint. Every test runs in its own moto account, so what it sees is
what it made.
"""

from __future__ import annotations

import base64
import json
import socket

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers import aws
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.aws import AwsProvider, client_token
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.aws.catalog import (
    DEFAULT_REGIONS, LADDER,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.aws.userdata import (
    BOOT_SCRIPT_PATH, parse_user_data,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    JOURNAL_ID_TAG, SDK_READ_ATTEMPTS, VM_NAME_TAG, BlockScope, BootScript, ErrorKind, InstanceSpec, K3sAccess, Location, Offer,
    ProviderError, ResourceRequest, Status,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.registry import get_provider
from ansible_collections.gpuprov.cloud.plugins.module_utils.requirements import install_command
from ansible_collections.gpuprov.cloud.tests.fakes import moto_ec2 as fake
from ansible_collections.gpuprov.cloud.tests.fakes.moto_ec2 import ec2_body

moto_ec2 = fake.moto_ec2   # the session fixture: the shared moto server, fake credentials in env

REGION = "us-east-1"
LOC = Location("aws", REGION)
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIUnitTestOnlyNotARealKey000000000000000 unit@test"
CIDR = "203.0.113.7/32"
DLAMI_FILTER = "Deep Learning AMI Ubuntu Linux*"   # the DLAMI moto ships (owner: amazon)


@pytest.fixture
def account(moto_ec2):
    return moto_ec2.new_account()


@pytest.fixture
def ec2(moto_ec2, account):
    """A plain boto3 client on the same fake account, to arrange and inspect."""
    return moto_ec2.client("ec2", REGION, account)


@pytest.fixture
def make(moto_ec2, account):
    def build(**options):
        base = dict(account, endpoint_url=moto_ec2.endpoint_url, allowed_cidrs=[CIDR],
                    ami_name_filter=DLAMI_FILTER, controller_ip_url="")
        base.update(options)
        return AwsProvider(base)
    return build


@pytest.fixture
def provider(make):
    return make()


def spec_for(name, **kw):
    kw.setdefault("ssh_public_key", KEY)
    return InstanceSpec(vm_name=name, **kw)


def offer_for(instance_type="g4dn.xlarge", region=REGION, spot=False, gpu="T4"):
    return Offer(cloud="aws", region=region, instance_type=instance_type, gpu=gpu, gpu_count=1, spot=spot)


def instance(ec2, instance_id):
    return ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]


def tags_of(resource):
    return {t["Key"]: t["Value"] for t in resource.get("Tags") or []}


def groups_of(ec2, name):
    return ec2.describe_security_groups(Filters=[{"Name": "tag:" + VM_NAME_TAG, "Values": [name]}])["SecurityGroups"]


# -- construction, registry, capabilities --------------------------------------------------

def test_registry_builds_the_adapter(moto_ec2):
    provider = get_provider("aws", {"region": REGION})
    assert isinstance(provider, AwsProvider) and provider.name == "aws"


def test_without_boto3_construction_says_how_to_fix(monkeypatch):
    monkeypatch.setattr(aws, "HAS_BOTO3", False)
    with pytest.raises(ProviderError) as info:
        AwsProvider({})
    assert info.value.kind == ErrorKind.INVALID_REQUEST
    assert "boto3" in info.value.msg and install_command("boto3", "aws") in info.value.msg


def test_capabilities_default_and_k3s_direct(make):
    caps = make().capabilities()
    assert (caps.kubernetes, caps.boot_script, caps.spot) == (True, True, True)
    assert caps.k3s_access == K3sAccess.SSH_TUNNEL
    assert (caps.boot_timeout_s, caps.poll_interval_s) == (900.0, 10.0)
    assert make(k3s_direct="true").capabilities().k3s_access == K3sAccess.DIRECT


# -- plan -------------------------------------------------------------------------------

def test_plan_is_static_ladder_times_regions_and_calls_nothing(provider, moto_ec2, account):
    offers = provider.plan(ResourceRequest(vm_name="p1", gpu="T4", gpu_count=1))
    t4_single = [r.instance_type for r in LADDER if r.gpu == "T4" and r.count == 1]
    assert [o.instance_type for o in offers] == [t for t in t4_single for _region in DEFAULT_REGIONS]
    assert [o.region for o in offers[:len(DEFAULT_REGIONS)]] == list(DEFAULT_REGIONS)
    first = offers[0]
    assert (first.cloud, first.instance_type, first.gpu, first.gpu_count, first.price_per_hour) == (
        "aws", "g4dn.xlarge", "T4", 1, 0.526)
    assert first.zone is None and first.detail["vcpus"] == 4
    assert moto_ec2.calls(account=account["aws_access_key_id"]) == []


@pytest.mark.parametrize("gpu,count,expected", [
    ("H100", 8, ["p5.48xlarge"]),
    ("H100", 1, ["p5.4xlarge"]),
    ("h200", 8, ["p5e.48xlarge", "p5en.48xlarge"]),
    ("A100", 8, ["p4d.24xlarge"]),
    ("A100-80GB", 8, ["p4de.24xlarge"]),
    ("B200", 8, ["p6-b200.48xlarge"]),
    ("L40S", 4, ["g6e.12xlarge", "g6e.24xlarge"]),
    ("A10", 8, ["g5.48xlarge"]),     # A10 is sold as A10G
    ("L4", 8, ["g6.48xlarge"]),
    (None, 1, ["t3.medium", "t3.large", "m5.large"]),  # no GPU: small CPU types
    ("none", 5, ["t3.medium", "t3.large", "m5.large"]),
])
def test_plan_ladder(provider, gpu, count, expected):
    offers = provider.plan(ResourceRequest(vm_name="p2", gpu=gpu, gpu_count=count, regions=["us-west-2"]))
    assert [o.instance_type for o in offers] == expected
    assert {o.region for o in offers} == {"us-west-2"}


@pytest.mark.parametrize("count", [1, 4, 8])
def test_plan_leaves_the_v100_out_and_says_why(provider, count):
    # p3 (V100, Volta): in no default region, and the default image's open kernel modules need Turing+
    assert not [r for r in LADDER if r.instance_type.startswith("p3.") or r.gpu == "V100"]
    with pytest.raises(ProviderError) as info:
        provider.plan(ResourceRequest(vm_name="p3", gpu="V100", gpu_count=count))
    assert info.value.kind == ErrorKind.INVALID_REQUEST and info.value.msg.startswith("gpu:")
    assert "V100" in info.value.msg and "P3" in info.value.msg and "H100" in info.value.msg


def test_plan_spot_has_no_on_demand_price(provider):
    offers = provider.plan(ResourceRequest(vm_name="p3", gpu="A10G", regions=["us-east-2"], spot=True))
    assert offers and all(o.spot and o.price_per_hour is None for o in offers)
    assert offers[0].detail["on_demand_price"] == 1.006


def test_plan_regions_option_and_dedup(make):
    offers = make(regions=["eu-west-1"]).plan(ResourceRequest(vm_name="p4", gpu="T4"))
    assert {o.region for o in offers} == {"eu-west-1"}
    offers = make().plan(ResourceRequest(vm_name="p4", gpu="H100", gpu_count=8,
                                         regions=["us-west-2", "us-east-1", "us-west-2"]))
    assert [o.region for o in offers] == ["us-west-2", "us-east-1"]


@pytest.mark.parametrize("request_kw,field", [
    ({"gpu": "H100", "gpu_count": 3}, "gpu_count"),
    ({"gpu": "T4", "gpu_count": 0}, "gpu_count"),
    ({"gpu": "MI300X"}, "gpu:"),
    ({"gpu": "not-a-gpu"}, "gpu:"),
    ({"gpu": "T4", "regions": ["mars-north-1x"]}, "regions"),
    ({"vm_name": "Bad_Name"}, "name"),
])
def test_plan_unplannable_names_the_field(provider, request_kw, field):
    kw = {"vm_name": "p5"}
    kw.update(request_kw)
    with pytest.raises(ProviderError) as info:
        provider.plan(ResourceRequest(**kw))
    assert info.value.kind == ErrorKind.INVALID_REQUEST and info.value.msg.startswith(field)


# -- prepare ----------------------------------------------------------------------------

def test_prepare_makes_a_tagged_group_and_is_idempotent(provider, ec2):
    spec = spec_for("prep1")
    first = provider.prepare(offer_for(), spec)
    assert provider.prepare(offer_for(), spec) == first
    assert json.loads(json.dumps(first)) == first

    offered = sorted(o["Location"] for o in ec2.describe_instance_type_offerings(
        LocationType="availability-zone",
        Filters=[{"Name": "instance-type", "Values": ["g4dn.xlarge"]}])["InstanceTypeOfferings"])
    assert first["zones"] == offered
    assert [s["zone"] for s in first["subnets"]] == offered   # one default subnet per zone, in order
    default_vpc = ec2.describe_vpcs(Filters=[{"Name": "is-default", "Values": ["true"]}])["Vpcs"][0]["VpcId"]
    assert first["vpc_id"] == default_vpc
    assert (first["image_id"], first["image_source"]) == ("ami-dca37ea5", "name:" + DLAMI_FILTER)

    groups = groups_of(ec2, "prep1")
    assert [g["GroupId"] for g in groups] == [first["security_group_id"]]
    group = groups[0]
    assert group["GroupName"] == "gpuprov-prep1" and group["VpcId"] == default_vpc
    assert tags_of(group)[VM_NAME_TAG] == "prep1"
    rules = [(p["FromPort"], r["CidrIp"]) for p in group["IpPermissions"] for r in p["IpRanges"]]
    assert rules == [(22, CIDR)]


def test_prepare_k3s_direct_opens_api_and_ingress_ports(make, ec2):
    prepared = make(k3s_direct=True).prepare(offer_for(), spec_for("prep2"))
    assert prepared["ports"] == [22, 80, 443, 6443]
    group = groups_of(ec2, "prep2")[0]
    assert sorted(p["FromPort"] for p in group["IpPermissions"]) == [22, 80, 443, 6443]


def test_prepare_adds_missing_rules_and_never_opens_the_world(make, ec2):
    make().prepare(offer_for(), spec_for("prep3"))
    spec = spec_for("prep3", allowed_cidrs=["198.51.100.0/24", "2001:db8::/64"])
    make().prepare(offer_for(), spec)
    group = groups_of(ec2, "prep3")
    assert len(group) == 1
    v4 = sorted(r["CidrIp"] for p in group[0]["IpPermissions"] for r in p["IpRanges"])
    v6 = [r["CidrIpv6"] for p in group[0]["IpPermissions"] for r in p.get("Ipv6Ranges", [])]
    assert v4 == ["198.51.100.0/24", CIDR] and v6 == ["2001:db8::/64"]
    assert "0.0.0.0/0" not in v4


def test_prepare_type_not_offered_is_unavailable_and_makes_nothing(provider, ec2):
    # moto's offering data (a snapshot of AWS) has no p5.48xlarge in eu-west-1
    with pytest.raises(ProviderError) as info:
        provider.prepare(offer_for("p5.48xlarge", region="eu-west-1", gpu="H100"), spec_for("prep4"))
    assert info.value.kind == ErrorKind.UNAVAILABLE
    assert info.value.block_scope == BlockScope.INSTANCE_TYPE
    assert "p5.48xlarge" in info.value.msg and "eu-west-1" in info.value.msg
    assert groups_of(ec2, "prep4") == []


def test_prepare_restricts_to_the_offer_zone(provider):
    offer = offer_for()
    offer.zone = "us-east-1c"
    prepared = provider.prepare(offer, spec_for("prep5"))
    assert prepared["zones"] == ["us-east-1c"]
    assert [s["zone"] for s in prepared["subnets"]] == ["us-east-1c"]


def test_prepare_ami_id_option(make, ec2):
    assert make(ami_id="ami-760aaa0f").prepare(offer_for(), spec_for("ami1"))["image_id"] == "ami-760aaa0f"
    per_region = make(ami_id={REGION: "ami-785db401"}).prepare(offer_for(), spec_for("ami1"))
    assert (per_region["image_id"], per_region["image_source"]) == ("ami-785db401", "ami_id")
    with pytest.raises(ProviderError) as info:
        make(ami_id="ami-0000000000000dead").prepare(offer_for(), spec_for("ami2"))
    assert info.value.kind == ErrorKind.INVALID_REQUEST and info.value.msg.startswith("ami_id")
    assert groups_of(ec2, "ami2") == []   # nothing made before the image was known


def test_prepare_reads_the_image_from_ssm(make, moto_ec2, account):
    moto_ec2.client("ssm", REGION, account).put_parameter(
        Name="/gpuprov/test/dlami", Value="ami-9b32e8e2", Type="String", DataType="aws:ec2:image")
    prepared = make(ami_ssm_parameter="/gpuprov/test/dlami").prepare(offer_for(), spec_for("ssm1"))
    assert (prepared["image_id"], prepared["image_source"]) == ("ami-9b32e8e2", "ssm:/gpuprov/test/dlami")


def test_unset_options_from_ansible_mean_defaults(make, moto_ec2, account):
    """Ansible passes unset options as None: None is the default, '' switches off."""
    akid = account["aws_access_key_id"]
    make(ami_ssm_parameter=None).prepare(offer_for(), spec_for("none1"))
    assert len(moto_ec2.calls("GetParameter", akid)) == 1     # the default DLAMI parameter was asked
    make(ami_ssm_parameter="").prepare(offer_for(), spec_for("none1"))
    assert len(moto_ec2.calls("GetParameter", akid)) == 1     # '' skips SSM


def test_prepare_without_any_image_is_unavailable_for_the_region(make):
    with pytest.raises(ProviderError) as info:
        make(ami_name_filter="no such image *").prepare(offer_for(), spec_for("ami3"))
    assert info.value.kind == ErrorKind.UNAVAILABLE and info.value.block_scope == BlockScope.REGION
    assert "ami_id" in info.value.msg


def test_prepare_default_image_for_cpu_types(make):
    # the default SSM parameters are absent in moto; the Ubuntu name filter finds nothing
    # there either (moto has only 14.04/16.04), so the CPU default is visible in the error
    with pytest.raises(ProviderError) as info:
        make(ami_name_filter=None).prepare(offer_for("t3.medium", gpu=None), spec_for("cpu1"))
    assert "ubuntu-jammy-22.04" in info.value.msg and "099720109477" in info.value.msg


@pytest.mark.parametrize("ports", [[0], [70000], ["22"]])
def test_prepare_rejects_bad_ports(provider, ports):
    with pytest.raises(ProviderError) as info:
        provider.prepare(offer_for(), spec_for("port1", open_ports=ports))
    assert info.value.kind == ErrorKind.INVALID_REQUEST and info.value.msg.startswith("open_ports")


def test_prepare_rejects_bad_cidrs(make):
    with pytest.raises(ProviderError) as info:
        make(allowed_cidrs="10.0.0.0/8, not-a-cidr").prepare(offer_for(), spec_for("cidr1"))
    assert info.value.kind == ErrorKind.INVALID_REQUEST and info.value.msg.startswith("allowed_cidrs")


def test_prepare_controller_address_from_the_lookup_url(make, httpserver, ec2):
    httpserver.expect_request("/ip").respond_with_data("198.51.100.23\n")
    prepared = make(allowed_cidrs=None, controller_ip_url=httpserver.url_for("/ip")).prepare(
        offer_for(), spec_for("ctl1"))
    assert prepared["allowed_cidrs"] == ["198.51.100.23/32"]
    rules = [r["CidrIp"] for p in groups_of(ec2, "ctl1")[0]["IpPermissions"] for r in p["IpRanges"]]
    assert rules == ["198.51.100.23/32"]


def test_prepare_controller_lookup_failures(make, httpserver):
    with pytest.raises(ProviderError) as info:
        make(allowed_cidrs=None).prepare(offer_for(), spec_for("ctl2"))   # lookup disabled
    assert info.value.kind == ErrorKind.INVALID_REQUEST and "controller_ip_url" in info.value.msg
    httpserver.expect_request("/ip").respond_with_data("<html>hello</html>")
    with pytest.raises(ProviderError) as info:
        make(allowed_cidrs=None, controller_ip_url=httpserver.url_for("/ip")).prepare(offer_for(), spec_for("ctl2"))
    assert info.value.kind == ErrorKind.INVALID_REQUEST
    with pytest.raises(ProviderError) as info:
        make(allowed_cidrs=None, controller_ip_url="http://127.0.0.1:%d/" % _closed_port()).prepare(
            offer_for(), spec_for("ctl2"))
    # An address that cannot be looked up is one clear error saying what to set, never a Transient to retry.
    assert info.value.kind == ErrorKind.INVALID_REQUEST
    assert "cloud_options.aws.allowed_cidrs" in info.value.msg and "controller_ip_url" in info.value.msg


# -- create / observe / delete / cleanup ----------------------------------------------------

def test_lifecycle(provider, ec2):
    spec = spec_for("life1", boot_script=BootScript("#!/bin/bash\necho k3s", {"K3S_TOKEN": "s3cr3t"}))
    offer = offer_for()
    prepared = provider.prepare(offer, spec)
    instance_id = provider.create(offer, prepared, spec)

    inst = instance(ec2, instance_id)
    assert inst["InstanceType"] == "g4dn.xlarge" and inst["ImageId"] == prepared["image_id"]
    assert inst["SubnetId"] == prepared["subnets"][0]["subnet_id"]
    assert [g["GroupId"] for g in inst["SecurityGroups"]] == [prepared["security_group_id"]]
    assert tags_of(inst) == {VM_NAME_TAG: "life1", "Name": "life1", "gpuprov-ssh-user": "ubuntu"}
    assert "InstanceLifecycle" not in inst   # on-demand
    assert inst["ClientToken"] == client_token("life1", prepared, inst["SubnetId"], "g4dn.xlarge", False)
    volumes = ec2.describe_volumes(Filters=[{"Name": "attachment.instance-id", "Values": [instance_id]}])["Volumes"]
    assert volumes and all(tags_of(v)[VM_NAME_TAG] == "life1" for v in volumes)

    raw = ec2.describe_instance_attribute(InstanceId=instance_id, Attribute="userData")["UserData"]["Value"]
    config = parse_user_data(base64.b64decode(raw))
    assert config["ssh_authorized_keys"] == [KEY]
    assert config["runcmd"] == [[BOOT_SCRIPT_PATH]]
    script = config["write_files"][0]
    assert (script["path"], script["permissions"]) == (BOOT_SCRIPT_PATH, "0700")
    assert script["content"] == "#!/bin/bash\nexport K3S_TOKEN='s3cr3t'\necho k3s"

    found = provider.observe(LOC, "life1")
    assert [o.instance_id for o in found] == [instance_id]
    seen = found[0]
    assert seen.status == Status.RUNNING and seen.usable
    assert (seen.endpoint.host, seen.endpoint.port, seen.endpoint.user) == (inst["PublicIpAddress"], 22, "ubuntu")
    assert seen.location == Location("aws", REGION, prepared["subnets"][0]["zone"])

    with pytest.raises(ProviderError) as info:   # the group is kept while an instance lives
        provider.cleanup(LOC, "life1")
    assert info.value.kind == ErrorKind.TRANSIENT and instance_id in info.value.msg
    assert len(groups_of(ec2, "life1")) == 1

    provider.delete(LOC, "life1", [instance_id])
    assert instance(ec2, instance_id)["State"]["Name"] in ("shutting-down", "terminated")
    assert provider.observe(LOC, "life1") == []
    provider.delete(LOC, "life1", [instance_id, "i-0123456789abcdef0", "not-an-id"])
    provider.cleanup(LOC, "life1")
    assert groups_of(ec2, "life1") == []
    provider.cleanup(LOC, "life1")


@pytest.mark.parametrize("watchdog, sent, behaviour", [(True, "terminate", "terminate"), (False, "", "stop")])
def test_a_vm_with_a_watchdog_terminates_on_a_guest_shutdown(provider, ec2, moto_ec2, account, watchdog, sent, behaviour):
    spec = spec_for("wd%d" % watchdog, terminate_on_guest_shutdown=watchdog)
    offer = offer_for()
    instance_id = provider.create(offer, provider.prepare(offer, spec), spec)
    # the request carried the parameter only when asked (absent: EC2's default, stop) ...
    assert moto_ec2.calls("RunInstances", account["aws_access_key_id"])[-1]["shutdown_behavior"] == sent
    # ... and the instance holds it, as EC2 reads it back
    found = ec2.describe_instance_attribute(InstanceId=instance_id, Attribute="instanceInitiatedShutdownBehavior")
    assert found["InstanceInitiatedShutdownBehavior"]["Value"] == behaviour
    caps = provider.capabilities()
    assert caps.poweroff_billing_of(watchdog) == ("ends" if watchdog else "ends_compute")
    assert caps.poweroff_setting == "InstanceInitiatedShutdownBehavior=terminate"


def test_the_fake_refuses_a_shutdown_behaviour_ec2_does_not_know(moto_ec2, account, ec2):
    from botocore.exceptions import ClientError
    image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    with pytest.raises(ClientError) as refused:
        ec2.run_instances(ImageId=image, InstanceType="t3.micro", MinCount=1, MaxCount=1,
                          InstanceInitiatedShutdownBehavior="halt")
    assert refused.value.response["Error"]["Code"] == "InvalidParameterValue"


def test_create_spot(provider, ec2):
    offer = offer_for(spot=True)
    instance_id = provider.create(offer, provider.prepare(offer, spec_for("spot1")), spec_for("spot1"))
    assert instance(ec2, instance_id)["InstanceLifecycle"] == "spot"


def test_create_other_user_and_adoption_by_a_fresh_provider(provider, make, ec2):
    spec = spec_for("user1", ssh_user="alice")
    offer = offer_for()
    instance_id = provider.create(offer, provider.prepare(offer, spec), spec)
    raw = ec2.describe_instance_attribute(InstanceId=instance_id, Attribute="userData")["UserData"]["Value"]
    config = parse_user_data(base64.b64decode(raw))
    assert "ssh_authorized_keys" not in config and "write_files" not in config
    assert config["users"][0] == "default"
    assert config["users"][1]["name"] == "alice" and config["users"][1]["ssh_authorized_keys"] == [KEY]
    # a controller that crashed right after create: a new adapter instance adopts it,
    # and learns the login user from the instance's tag
    found = make().observe(LOC, "user1")
    assert [o.instance_id for o in found] == [instance_id] and found[0].endpoint.user == "alice"


def test_create_rejects_a_bad_key_before_any_call(provider, moto_ec2, account):
    prepared = provider.prepare(offer_for(), spec_for("key1"))
    before = len(moto_ec2.calls("RunInstances", account["aws_access_key_id"]))
    with pytest.raises(ProviderError) as info:
        provider.create(offer_for(), prepared, spec_for("key1", ssh_public_key="not a key"))
    assert info.value.kind == ErrorKind.INVALID_REQUEST and info.value.msg.startswith("ssh_public_key")
    assert len(moto_ec2.calls("RunInstances", account["aws_access_key_id"])) == before


def test_create_without_prepared_state_is_invalid(provider):
    with pytest.raises(ProviderError) as info:
        provider.create(offer_for(), {}, spec_for("noprep"))
    assert info.value.kind == ErrorKind.INVALID_REQUEST and info.value.msg.startswith("prepared")


def test_create_is_one_attempt_per_zone_without_sdk_retries(provider, moto_ec2, account, ec2):
    """EC2 sends InsufficientInstanceCapacity as HTTP 500, which the SDK would retry;
    the fail-fast client does not: one request in zone a, then one in zone b."""
    akid = account["aws_access_key_id"]
    prepared = provider.prepare(offer_for(), spec_for("ff1"))
    moto_ec2.inject("RunInstances", code="InsufficientInstanceCapacity", status=500, times=1, account=akid)
    instance_id = provider.create(offer_for(), prepared, spec_for("ff1"))
    assert len(moto_ec2.calls("RunInstances", akid)) == 2
    assert instance(ec2, instance_id)["SubnetId"] == prepared["subnets"][1]["subnet_id"]


def test_create_capacity_everywhere(provider, moto_ec2, account):
    akid = account["aws_access_key_id"]
    prepared = provider.prepare(offer_for(), spec_for("cap1"))
    moto_ec2.inject("RunInstances", code="InsufficientInstanceCapacity", status=500, times=None, account=akid)
    try:
        with pytest.raises(ProviderError) as info:
            provider.create(offer_for(), prepared, spec_for("cap1"))
    finally:
        moto_ec2.clear(akid)
    assert info.value.kind == ErrorKind.CAPACITY and info.value.block_scope == BlockScope.OFFER
    assert len(moto_ec2.calls("RunInstances", akid)) == len(prepared["subnets"])
    assert ", ".join(prepared["zones"]) in info.value.msg
    assert provider.observe(LOC, "cap1") == []


@pytest.mark.parametrize("code,status,kind", [
    ("VcpuLimitExceeded", 400, ErrorKind.QUOTA),
    ("InternalError", 500, ErrorKind.TRANSIENT),
    ("AuthFailure", 401, ErrorKind.CREDENTIALS),
])
def test_create_other_errors_stop_at_the_first_zone(provider, moto_ec2, account, code, status, kind):
    akid = account["aws_access_key_id"]
    prepared = provider.prepare(offer_for(), spec_for("err1"))
    moto_ec2.inject("RunInstances", code=code, status=status, times=None, account=akid)
    try:
        with pytest.raises(ProviderError) as info:
            provider.create(offer_for(), prepared, spec_for("err1"))
    finally:
        moto_ec2.clear(akid)
    assert info.value.kind == kind
    assert len(moto_ec2.calls("RunInstances", akid)) == 1


def test_reads_keep_the_sdk_retries(provider, moto_ec2, account):
    akid = account["aws_access_key_id"]
    moto_ec2.inject("DescribeInstances", code="RequestLimitExceeded", status=503, times=1, account=akid)
    assert provider.observe(LOC, "nobody") == []
    assert len(moto_ec2.calls("DescribeInstances", akid)) == 2


def test_reads_retry_within_the_contracts_bound(provider, moto_ec2, account):
    """The contract's "No waiting": botocore's standard mode, SDK_READ_ATTEMPTS attempts in all, then the
    error, classified, goes to the core."""
    akid = account["aws_access_key_id"]
    moto_ec2.inject("DescribeInstances", code="RequestLimitExceeded", status=503, times=None, account=akid)
    try:
        with pytest.raises(ProviderError) as info:
            provider.observe(LOC, "nobody")
    finally:
        moto_ec2.clear(akid)
    assert info.value.kind == ErrorKind.TRANSIENT
    assert len(moto_ec2.calls("DescribeInstances", akid)) == SDK_READ_ATTEMPTS


@pytest.mark.parametrize("primitive,action", [
    ("prepare", "CreateSecurityGroup"), ("prepare", "AuthorizeSecurityGroupIngress"), ("create", "RunInstances"),
    ("delete", "TerminateInstances"), ("cleanup", "DeleteSecurityGroup"),
])
def test_a_request_that_changes_something_is_sent_once(provider, moto_ec2, account, primitive, action):
    """The SDK would retry a throttled request; every one that changes anything goes through the fail-fast
    client, so the core's retry, which observes first, is the only one."""
    akid = account["aws_access_key_id"]
    name, offer = "once-" + primitive, offer_for()
    prepared = provider.prepare(offer, spec_for(name)) if primitive != "prepare" else None
    instance_id = provider.create(offer, prepared, spec_for(name)) if primitive == "delete" else None
    calls = {"prepare": lambda: provider.prepare(offer, spec_for(name)),
             "create": lambda: provider.create(offer, prepared, spec_for(name)),
             "delete": lambda: provider.delete(LOC, name, [instance_id]),
             "cleanup": lambda: provider.cleanup(LOC, name)}
    before = len(moto_ec2.calls(action, akid))
    moto_ec2.inject(action, code="RequestLimitExceeded", status=503, times=None, account=akid)
    try:
        with pytest.raises(ProviderError) as info:
            calls[primitive]()
    finally:
        moto_ec2.clear(akid)
    assert info.value.kind == ErrorKind.TRANSIENT
    assert len(moto_ec2.calls(action, akid)) == before + 1


class ControllerDied(BaseException):
    """The controller dies here (a BaseException, as a kill is: no ``except Exception`` stops it)."""


@pytest.mark.parametrize("dies", ["before the second zone's request", "after the second zone's request"])
def test_a_controller_dying_between_zones_leaves_one_instance_after_the_retry(make, moto_ec2, account, ec2, dies):
    """create's zone list, the contract's one fixed list of alternatives: the first zone refuses (EC2 launched
    nothing), and the controller dies around the second zone's RunInstances. The next run's Creating observes
    first (region-wide, by the identity tag): it adopts what the dead one made, or creates when nothing was,
    and one instance is left either way."""
    akid = account["aws_access_key_id"]
    spec, offer = spec_for("zones1"), offer_for()
    prepared = make().prepare(offer, spec)
    assert len(prepared["subnets"]) >= 2
    dying = make()
    client = dying._client("ec2", REGION, fail_fast=True)
    send = client.run_instances
    subnets = []

    def run_instances(**request):
        subnets.append(request["SubnetId"])
        if len(subnets) == 2 and dies.startswith("before"):
            raise ControllerDied(dies)
        reply = send(**request)
        if len(subnets) == 2:
            raise ControllerDied(dies)
        return reply

    client.run_instances = run_instances
    moto_ec2.inject("RunInstances", code="InsufficientInstanceCapacity", status=500, times=1, account=akid)
    with pytest.raises(ControllerDied):
        dying.create(offer, prepared, spec)
    assert subnets == [s["subnet_id"] for s in prepared["subnets"][:2]]

    retry = make()  # Creating again, in the next run: observe first, as vm/launch.py does
    live = [o.instance_id for o in retry.observe(LOC, "zones1") if o.live]
    adopted = live[0] if live else retry.create(offer, prepared, spec)
    tagged = ec2.describe_instances(Filters=[{"Name": "tag:" + VM_NAME_TAG, "Values": ["zones1"]},
                                             {"Name": "instance-state-name", "Values": ["pending", "running"]}])
    assert [i["InstanceId"] for r in tagged["Reservations"] for i in r["Instances"]] == [adopted]
    assert bool(live) == dies.startswith("after")


def test_observe_is_scoped_by_tag_and_hides_endpoint_without_public_ip(provider, ec2):
    offer = offer_for()
    mine = provider.create(offer, provider.prepare(offer, spec_for("obs1")), spec_for("obs1"))
    theirs = provider.create(offer, provider.prepare(offer, spec_for("obs2")), spec_for("obs2"))
    assert [o.instance_id for o in provider.observe(LOC, "obs1")] == [mine]
    assert [o.instance_id for o in provider.observe(LOC, "obs2")] == [theirs]
    assert provider.observe(Location("aws", "us-west-2"), "obs1") == []

    # public-IP lag: a running instance of the VM without a public address yet
    vpc = ec2.describe_vpcs(Filters=[{"Name": "is-default", "Values": ["true"]}])["Vpcs"][0]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="172.31.250.0/24", AvailabilityZone="us-east-1b")["Subnet"]
    lagging = ec2.run_instances(
        ImageId="ami-dca37ea5", InstanceType="t3.medium", MinCount=1, MaxCount=1, SubnetId=subnet["SubnetId"],
        TagSpecifications=[{"ResourceType": "instance", "Tags": [{"Key": VM_NAME_TAG, "Value": "obs1"}]}],
    )["Instances"][0]["InstanceId"]
    found = {o.instance_id: o for o in provider.observe(LOC, "obs1")}
    assert sorted(found) == sorted([mine, lagging])
    assert found[lagging].status == Status.RUNNING and found[lagging].endpoint is None
    assert found[mine].endpoint is not None

    ec2.stop_instances(InstanceIds=[mine])
    stopped = {o.instance_id: o for o in provider.observe(LOC, "obs1")}[mine]
    assert stopped.status in (Status.STOPPING, Status.STOPPED) and stopped.endpoint is None


@pytest.mark.parametrize("state,reason,status,endpoint", [
    ("pending", None, Status.PENDING, False),
    ("running", None, Status.RUNNING, True),
    ("stopping", "Client.UserInitiatedShutdown", Status.STOPPING, False),
    ("stopped", "Client.UserInitiatedShutdown", Status.STOPPED, False),
    ("shutting-down", "Client.UserInitiatedShutdown", Status.TERMINATING, False),
    ("stopped", "Server.SpotInstanceTermination", Status.FAILED, False),
    ("shutting-down", "Server.InsufficientInstanceCapacity", Status.FAILED, False),
    ("shutting-down", "Client.VolumeLimitExceeded", Status.FAILED, False),
])
def test_status_mapping(provider, state, reason, status, endpoint):
    raw = {"InstanceId": "i-1", "State": {"Name": state}, "PublicIpAddress": "192.0.2.10",
           "Placement": {"AvailabilityZone": "us-east-1a"}, "Tags": [{"Key": "gpuprov-ssh-user", "Value": "ec2-user"}]}
    if reason:
        raw["StateReason"] = {"Code": reason, "Message": "%s: why" % reason}
    seen = provider._observed(raw, REGION)
    assert seen.status == status and (seen.endpoint is not None) == endpoint
    if reason:
        assert reason in seen.reason
    if endpoint:
        assert seen.endpoint.user == "ec2-user"


def test_delete_refuses_another_vms_instance(provider, ec2):
    offer = offer_for()
    theirs = provider.create(offer, provider.prepare(offer, spec_for("del2")), spec_for("del2"))
    with pytest.raises(ProviderError) as info:
        provider.delete(LOC, "del1", [theirs])
    assert info.value.kind == ErrorKind.INVALID_REQUEST and "del2" in info.value.msg
    assert instance(ec2, theirs)["State"]["Name"] == "running"


def test_delete_of_nothing_makes_no_call(provider, moto_ec2, account):
    provider.delete(LOC, "del3", [])
    assert moto_ec2.calls(account=account["aws_access_key_id"]) == []


def test_endpoint_url_from_environment(moto_ec2, account, monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_ec2.endpoint_url)
    provider = AwsProvider(dict(account))
    assert provider.observe(LOC, "env1") == []
    assert len(moto_ec2.calls("DescribeInstances", account["aws_access_key_id"])) == 1


def test_unreachable_endpoint_is_transient(account):
    provider = AwsProvider(dict(account, endpoint_url="http://127.0.0.1:%d" % _closed_port()))
    with pytest.raises(ProviderError) as info:
        provider.observe(LOC, "down1")
    assert info.value.kind == ErrorKind.TRANSIENT


def test_unknown_profile_is_credentials(moto_ec2):
    with pytest.raises(ProviderError) as info:
        AwsProvider({"profile": "gpuprov-no-such-profile", "endpoint_url": moto_ec2.endpoint_url}).observe(LOC, "x")
    assert info.value.kind == ErrorKind.CREDENTIALS


def test_unavailable_offerings_answer_from_the_api(provider, moto_ec2, account, ec2):
    """An empty DescribeInstanceTypeOfferings (the type retired in the region) is Unavailable."""
    akid = account["aws_access_key_id"]
    moto_ec2.inject("DescribeInstanceTypeOfferings", status=200, times=1, account=akid,
                    body=ec2_body("DescribeInstanceTypeOfferings", "<instanceTypeOfferingSet/>"))
    with pytest.raises(ProviderError) as info:
        provider.prepare(offer_for(), spec_for("off1"))
    assert info.value.kind == ErrorKind.UNAVAILABLE
    assert groups_of(ec2, "off1") == []


def _closed_port():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


# -- journal identity ------------------------------------------------------------------------

JOURNAL_A = "0123456789abcdef0123456789abcdef"
JOURNAL_B = "fedcba9876543210fedcba9876543210"


def make_for(make, journal_id):
    """An adapter of the ``make`` fixture's account working for ``journal_id``."""
    built = make()
    return AwsProvider(built.options, journal_id=journal_id)


def test_every_resource_carries_the_journal_id(make, ec2):
    provider = make_for(make, JOURNAL_A)
    offer = offer_for()
    spec = spec_for("jid1")
    prepared = provider.prepare(offer, spec)
    instance_id = provider.create(offer, prepared, spec)

    assert tags_of(instance(ec2, instance_id))[JOURNAL_ID_TAG] == JOURNAL_A
    volumes = ec2.describe_volumes(Filters=[{"Name": "attachment.instance-id", "Values": [instance_id]}])["Volumes"]
    assert volumes and all(tags_of(v)[JOURNAL_ID_TAG] == JOURNAL_A for v in volumes)
    (group,) = groups_of(ec2, "jid1")
    assert tags_of(group)[JOURNAL_ID_TAG] == JOURNAL_A and tags_of(group)[VM_NAME_TAG] == "jid1"
    assert group["GroupName"] == "gpuprov-jid1" + aws.journal_suffix(JOURNAL_A)
    assert group["GroupId"] == prepared["security_group_id"]

    (seen,) = make().observe(LOC, "jid1")   # a legacy adapter sees it too, with whose it is
    assert (seen.instance_id, seen.journal_id) == (instance_id, JOURNAL_A)


def test_observe_reports_no_journal_for_a_legacy_instance(provider, ec2):
    offer = offer_for()
    instance_id = provider.create(offer, provider.prepare(offer, spec_for("old1")), spec_for("old1"))
    assert JOURNAL_ID_TAG not in tags_of(instance(ec2, instance_id))
    (seen,) = provider.observe(LOC, "old1")
    assert seen.journal_id is None and seen.owned_by(JOURNAL_A)


def test_two_journals_keep_apart(make, ec2):
    first, second = make_for(make, JOURNAL_A), make_for(make, JOURNAL_B)
    offer, spec = offer_for(), spec_for("twin1")
    theirs = first.create(offer, first.prepare(offer, spec), spec)
    prepared = second.prepare(offer, spec)   # its own group: group names are unique per VPC
    assert len(groups_of(ec2, "twin1")) == 2
    # the other journal's instance neither blocks its cleanup nor loses its group
    second.cleanup(LOC, "twin1")
    (left,) = groups_of(ec2, "twin1")
    assert tags_of(left)[JOURNAL_ID_TAG] == JOURNAL_A and left["GroupId"] != prepared["security_group_id"]
    assert instance(ec2, theirs)["State"]["Name"] == "running"
    # its own cleanup still waits for its own instance
    with pytest.raises(ProviderError) as info:
        first.cleanup(LOC, "twin1")
    assert info.value.kind == ErrorKind.TRANSIENT and theirs in info.value.msg


def test_cleanup_removes_legacy_groups_with_its_own(make, provider, ec2):
    offer, spec = offer_for(), spec_for("mix1")
    provider.prepare(offer, spec)                      # made before journal ids: gpuprov-mix1
    journalled = make_for(make, JOURNAL_A)
    journalled.prepare(offer, spec)
    make_for(make, JOURNAL_B).prepare(offer, spec)     # another controller's
    assert len(groups_of(ec2, "mix1")) == 3
    journalled.cleanup(LOC, "mix1")
    assert [tags_of(g).get(JOURNAL_ID_TAG) for g in groups_of(ec2, "mix1")] == [JOURNAL_B]


def test_prepare_refuses_a_group_of_another_journal(make, ec2):
    provider = make_for(make, JOURNAL_A)
    vpc = ec2.describe_vpcs(Filters=[{"Name": "is-default", "Values": ["true"]}])["Vpcs"][0]["VpcId"]
    ec2.create_security_group(   # the name this journal would use, taken by another journal
        GroupName="gpuprov-clash1" + aws.journal_suffix(JOURNAL_A), VpcId=vpc, Description="x",
        TagSpecifications=[{"ResourceType": "security-group", "Tags": [
            {"Key": VM_NAME_TAG, "Value": "clash1"}, {"Key": JOURNAL_ID_TAG, "Value": JOURNAL_B}]}])
    with pytest.raises(ProviderError) as info:
        provider.prepare(offer_for(), spec_for("clash1"))
    assert info.value.kind == ErrorKind.INVALID_REQUEST and JOURNAL_B in info.value.msg


def test_prepare_tags_an_untagged_group(make, ec2):
    provider = make_for(make, JOURNAL_A)
    vpc = ec2.describe_vpcs(Filters=[{"Name": "is-default", "Values": ["true"]}])["Vpcs"][0]["VpcId"]
    group_id = ec2.create_security_group(GroupName="gpuprov-bare1" + aws.journal_suffix(JOURNAL_A),
                                         VpcId=vpc, Description="made by hand")["GroupId"]
    assert provider.prepare(offer_for(), spec_for("bare1"))["security_group_id"] == group_id
    (group,) = groups_of(ec2, "bare1")
    assert tags_of(group)[JOURNAL_ID_TAG] == JOURNAL_A


@pytest.mark.parametrize("journal_id", ["x" * 257, "tab\tin-it", "aws:reserved"])
def test_a_journal_id_that_cannot_be_a_tag_fails_before_any_call(make, moto_ec2, account, journal_id):
    provider = make_for(make, journal_id)
    for call in (lambda: provider.prepare(offer_for(), spec_for("badj1")),
                 lambda: provider.create(offer_for(), {"subnets": [{"subnet_id": "s", "zone": "z"}],
                                                       "security_group_id": "sg", "image_id": "ami"},
                                         spec_for("badj1"))):
        with pytest.raises(ProviderError) as info:
            call()
        assert info.value.kind == ErrorKind.INVALID_REQUEST and info.value.msg.startswith(JOURNAL_ID_TAG)
    assert moto_ec2.calls(account=account["aws_access_key_id"]) == []
