"""Conformance harness for the AWS adapter: moto's EC2 server (tests/fakes/moto_ec2.py).

Each harness gets a fresh moto account on the shared server (a 12-digit fake
access key), so ``resources()`` sees only what this harness's adapter made. Errors
are injected at the HTTP layer: the fake answers the primitive's first EC2 request
with the error document EC2 sends for that code, and botocore parses it as it would
parse the real one (SDK retries included, so read-path Transient errors are the
ones left after the SDK's own retries).

=================  ====================================  ==========================
kind               injected answer                       primitives
=================  ====================================  ==========================
Transient          InternalError 500 (RunInstances);     create; prepare, observe,
                   RequestLimitExceeded 503 (reads)      delete, cleanup
Capacity           InsufficientInstanceCapacity 500,     create
                   in every zone
Quota              VcpuLimitExceeded                     create
Unavailable        an empty DescribeInstanceTypeOfferings prepare
Failed             InvalidParameterCombination           create
InvalidRequest     InvalidParameterValue                 create, prepare
Credentials        AuthFailure 401                       prepare, create, observe,
                                                         delete, cleanup
=================  ====================================  ==========================

``plan`` makes no API call, so nothing can be injected there.
"""

from __future__ import annotations

import uuid
from typing import Iterable, List, Optional, Set, Tuple

import pytest

try:
    import boto3
    import botocore.loaders
    import botocore.session
except ImportError:  # make_harness skips without boto3
    boto3 = botocore = None

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.aws import AwsProvider
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    VM_NAME_TAG, BootScript, ErrorKind, InstanceSpec, Provider, ResourceRequest,
)
from ansible_collections.gpuprov.cloud.tests.conformance.harness import Harness
from ansible_collections.gpuprov.cloud.tests.fakes.moto_ec2 import ec2_body, shared_server

REGION = "us-east-1"
# moto ships an old "Deep Learning AMI Ubuntu Linux" owned by amazon; the real default
# filter names the current DLAMI, which moto does not have.
AMI_NAME_FILTER = "Deep Learning AMI Ubuntu Linux*"
TEST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIConformanceOnlyNotARealKey0000000000000 conformance"

_READS = ("DescribeInstances", "RequestLimitExceeded", 503, None)
_AUTH = ("DescribeInstances", "AuthFailure", 401, None)
_EMPTY_OFFERINGS = ec2_body("DescribeInstanceTypeOfferings", "<instanceTypeOfferingSet/>")

# kind -> primitive -> (EC2 action, error code, HTTP status, canned body)
INJECTIONS = {
    ErrorKind.TRANSIENT: {
        "create": ("RunInstances", "InternalError", 500, None),
        "prepare": ("DescribeInstanceTypeOfferings", "RequestLimitExceeded", 503, None),
        "observe": _READS, "delete": _READS, "cleanup": _READS,
    },
    ErrorKind.CAPACITY: {"create": ("RunInstances", "InsufficientInstanceCapacity", 500, None)},
    ErrorKind.QUOTA: {"create": ("RunInstances", "VcpuLimitExceeded", 400, None)},
    ErrorKind.UNAVAILABLE: {"prepare": ("DescribeInstanceTypeOfferings", "", 200, _EMPTY_OFFERINGS)},
    ErrorKind.FAILED: {"create": ("RunInstances", "InvalidParameterCombination", 400, None)},
    ErrorKind.INVALID_REQUEST: {
        "create": ("RunInstances", "InvalidParameterValue", 400, None),
        "prepare": ("DescribeInstanceTypeOfferings", "InvalidParameterValue", 400, None),
    },
    ErrorKind.CREDENTIALS: {
        "prepare": ("DescribeInstanceTypeOfferings", "AuthFailure", 401, None),
        "create": ("RunInstances", "AuthFailure", 401, None),
        "observe": _AUTH, "delete": _AUTH, "cleanup": _AUTH,
    },
}


class AwsHarness(Harness):
    cloud = "aws"

    def __init__(self, fake):
        self.fake = fake
        creds = fake.new_account()
        self.account = creds["aws_access_key_id"]
        self.provider = AwsProvider(dict(
            creds, endpoint_url=fake.endpoint_url, allowed_cidrs=["203.0.113.10/32"],
            ami_name_filter=AMI_NAME_FILTER, controller_ip_url=""), journal_id=uuid.uuid4().hex)
        name = "conf-%s" % uuid.uuid4().hex[:8]
        self.request = ResourceRequest(vm_name=name, gpu="T4", gpu_count=1, regions=[REGION])
        self.spec = InstanceSpec(vm_name=name, ssh_public_key=TEST_KEY,
                                 boot_script=BootScript("echo conformance", {"GPUPROV_CONFORMANCE": "1"}))
        self.ec2 = fake.client("ec2", REGION, creds)

    # -- levers -----------------------------------------------------------------------
    def error_kinds(self) -> Iterable[str]:
        return tuple(INJECTIONS)

    def inject_error(self, primitive: str, kind: str) -> None:
        self.clear_errors()
        rule = INJECTIONS.get(kind, {}).get(primitive)
        if rule is None:
            pytest.skip("the aws harness has no honest way to make %s raise %s" % (primitive, kind))
        action, code, status, body = rule
        self.fake.inject(action, code=code, status=status, body=body, times=None, account=self.account)

    def clear_errors(self) -> None:
        self.fake.clear(account=self.account)

    def new_provider(self) -> Provider:
        """A fresh adapter (a new SDK session, no client made yet), as after a controller
        crash. Its session reads the service models this process has already parsed:
        parsing them again costs about 0.4 s a client, most of a crash matrix's time."""
        fresh = super().new_provider()
        loader = _shared_loader()
        core = botocore.session.Session()
        core.register_component("data_loader", loader)
        fresh._session = boto3.session.Session(
            botocore_session=core, aws_access_key_id=fresh.options["aws_access_key_id"],
            aws_secret_access_key=fresh.options["aws_secret_access_key"])
        loader.search_paths[:] = list(dict.fromkeys(loader.search_paths))  # boto3 adds its path each session
        return fresh

    def unknown_instance_id(self) -> str:
        return "i-0123456789abcdef0"

    def ignore_paging(self) -> None:
        self.fake.ignore_paging(self.account)

    def page_requests(self) -> List[Tuple[str, bool]]:
        return [(c["action"], not c["next_token"]) for c in self.fake.calls(account=self.account)
                if c["action"].startswith("Describe")]

    def mutating_requests(self) -> List[str]:
        return [c["action"] for c in self.fake.calls(account=self.account)
                if not c["action"].startswith(("Describe", "Get"))]

    def create_shutdown_setting(self) -> Optional[str]:
        runs = self.fake.calls("RunInstances", self.account)
        sent = runs[-1]["shutdown_behavior"] if runs else ""
        return "InstanceInitiatedShutdownBehavior=%s" % sent if sent else None

    def create_unreachable(self, spec: InstanceSpec) -> Optional[str]:
        """A running instance of the VM without a public IP yet: a subnet of the
        default VPC that does not map public addresses on launch."""
        vpc = self.ec2.describe_vpcs(Filters=[{"Name": "is-default", "Values": ["true"]}])["Vpcs"][0]
        subnet = self.ec2.create_subnet(VpcId=vpc["VpcId"], CidrBlock="172.31.240.0/24",
                                        AvailabilityZone=REGION + "a")["Subnet"]
        image = self.ec2.describe_images(Owners=["amazon"], Filters=[
            {"Name": "name", "Values": [AMI_NAME_FILTER]}])["Images"][0]["ImageId"]
        reply = self.ec2.run_instances(
            ImageId=image, InstanceType="t3.medium", MinCount=1, MaxCount=1, SubnetId=subnet["SubnetId"],
            TagSpecifications=[{"ResourceType": "instance", "Tags": [{"Key": VM_NAME_TAG, "Value": spec.vm_name}]}])
        return reply["Instances"][0]["InstanceId"]

    # -- views ------------------------------------------------------------------------
    def _live(self):
        # One page: moto sends every instance to a request without MaxResults (and the
        # fake, when it ignores paging, a next token no paginator must follow here).
        for reservation in self.ec2.describe_instances()["Reservations"]:
            for inst in reservation["Instances"]:
                if inst["State"]["Name"] != "terminated":
                    yield inst

    def resources(self) -> Set[str]:
        found = set()
        for inst in self._live():
            tags = {t["Key"]: t["Value"] for t in inst.get("Tags") or []}
            found.add("instance:%s:%s" % (inst["InstanceId"], tags.get(VM_NAME_TAG, "")))
        for volume in self.ec2.describe_volumes()["Volumes"]:
            found.add("volume:%s" % volume["VolumeId"])
        for group in self.ec2.describe_security_groups()["SecurityGroups"]:
            if group["GroupName"] != "default":
                found.add("security-group:%s:%s" % (group["GroupId"], group["GroupName"]))
        return found

    def instance_ids(self) -> List[str]:
        return sorted(inst["InstanceId"] for inst in self._live())

    def close(self) -> None:
        self.clear_errors()
        ids = self.instance_ids()
        if ids:
            self.ec2.terminate_instances(InstanceIds=ids)


_LOADERS: List = []


def _shared_loader():
    """One botocore data loader (parsed service models, immutable) for every fresh adapter."""
    if not _LOADERS:
        _LOADERS.append(botocore.loaders.create_loader())
    return _LOADERS[0]


def make_harness(tmp_path_factory) -> AwsHarness:
    pytest.importorskip("boto3")
    pytest.importorskip("moto")
    return AwsHarness(shared_server())
