"""diagnose on AWS against moto's EC2 (tests/fakes/moto_ec2.py): state reasons, status
checks, spot request states, terminated instances, and classified errors."""

from __future__ import annotations

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.aws import AwsProvider
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    JOURNAL_ID_TAG, VM_NAME_TAG, ErrorKind, InstanceSpec, Location, Observed, Offer, ProviderError, Status,
)
from ansible_collections.gpuprov.cloud.tests.fakes import moto_ec2 as fake

moto_ec2 = fake.moto_ec2

REGION = "us-east-1"
LOC = Location("aws", REGION)
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIUnitTestOnlyNotARealKey000000000000000 unit@test"


@pytest.fixture
def account(moto_ec2):
    return moto_ec2.new_account()


@pytest.fixture
def ec2(moto_ec2, account):
    return moto_ec2.client("ec2", REGION, account)


@pytest.fixture
def provider(moto_ec2, account):
    return AwsProvider(dict(account, endpoint_url=moto_ec2.endpoint_url, allowed_cidrs=["203.0.113.7/32"],
                            ami_name_filter="Deep Learning AMI Ubuntu Linux*", controller_ip_url=""),
                       journal_id="journal-a")


def _launch(provider, name, spot=False):
    offer = Offer(cloud="aws", region=REGION, instance_type="g4dn.xlarge", gpu="T4", gpu_count=1, spot=spot)
    spec = InstanceSpec(vm_name=name, ssh_public_key=KEY)
    return provider.create(offer, provider.prepare(offer, spec), spec)


def test_a_running_instance_has_its_vendor_view_and_no_findings(provider):
    instance_id = _launch(provider, "diag1")
    report = provider.diagnose(LOC, "diag1")
    [entry] = report["instances"]
    assert Observed.from_dict(entry).instance_id == instance_id and entry["journal_id"] == "journal-a"
    vendor = entry["vendor"]
    assert vendor["lifecycle"] == "on-demand" and vendor["spot_request"] is None
    assert vendor["instance_type"] == "g4dn.xlarge" and vendor["launch_time"]
    assert vendor["status_checks"]["instance"] in ("ok", "initializing")
    assert [f for f in report["findings"] if "status checks" not in f and "pending" not in f] == []


def test_stopped_and_terminated_instances_say_why(provider, ec2):
    stopped = _launch(provider, "diag2")
    ec2.stop_instances(InstanceIds=[stopped])
    report = provider.diagnose(LOC, "diag2")
    [entry] = report["instances"]
    assert entry["status"] == Status.STOPPED
    assert entry["vendor"]["state_reason_code"] == "Client.UserInitiatedShutdown"
    assert entry["vendor"]["status_checks"]["instance"] == "not-applicable"
    assert report["findings"] == ["%s: stopped: Client.UserInitiatedShutdown: User initiated shutdown" % stopped]

    ec2.terminate_instances(InstanceIds=[stopped])
    report = provider.diagnose(LOC, "diag2")
    assert report["instances"] == []                     # gone for observe, still told about
    assert report["findings"] == ["%s: terminated: Client.UserInitiatedShutdown: User initiated shutdown" % stopped]


def test_impaired_checks_and_scheduled_events_are_findings(provider, moto_ec2, account):
    instance_id = _launch(provider, "diag3")
    body = fake.ec2_body("DescribeInstanceStatus", (
        "<instanceStatusSet><item><instanceId>%s</instanceId><availabilityZone>us-east-1a</availabilityZone>"
        "<instanceState><code>16</code><name>running</name></instanceState>"
        "<systemStatus><status>impaired</status></systemStatus><instanceStatus><status>ok</status></instanceStatus>"
        "<eventsSet><item><code>instance-retirement</code><description>The instance is running on degraded "
        "hardware</description><notBefore>2030-01-01T00:00:00.000Z</notBefore></item>"
        "<item><code>system-reboot</code><description>[Completed] done</description></item></eventsSet>"
        "</item></instanceStatusSet>") % instance_id)
    moto_ec2.inject("DescribeInstanceStatus", status=200, body=body, account=account["aws_access_key_id"])
    report = provider.diagnose(LOC, "diag3")
    checks = report["instances"][0]["vendor"]["status_checks"]
    assert checks["system"] == "impaired" and checks["instance"] == "ok" and len(checks["events"]) == 2
    assert "%s: status checks system impaired" % instance_id in report["findings"]
    retirement = [f for f in report["findings"] if "scheduled event" in f]
    assert retirement == ["%s: scheduled event instance-retirement: The instance is running on degraded hardware "
                          "(not before 2030-01-01T00:00:00+00:00)" % instance_id]


def test_a_spot_instance_reports_its_request_state(provider, ec2, moto_ec2, account):
    image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    request = ec2.request_spot_instances(SpotPrice="0.5", InstanceCount=1,
                                         LaunchSpecification={"ImageId": image, "InstanceType": "g4dn.xlarge"})
    request_id = request["SpotInstanceRequests"][0]["SpotInstanceRequestId"]
    instance_id = ec2.describe_spot_instance_requests(
        SpotInstanceRequestIds=[request_id])["SpotInstanceRequests"][0]["InstanceId"]
    ec2.create_tags(Resources=[instance_id],
                    Tags=[{"Key": VM_NAME_TAG, "Value": "diag4"}, {"Key": JOURNAL_ID_TAG, "Value": "journal-a"}])
    report = provider.diagnose(LOC, "diag4")
    [entry] = report["instances"]
    assert entry["vendor"]["lifecycle"] == "spot"
    assert entry["vendor"]["spot_request"] == {"id": request_id, "state": "active", "status_code": "fulfilled",
                                               "status_message": None}
    assert not [f for f in report["findings"] if "spot request" in f]

    # EC2 is about to take it back: the request says so before the instance goes.
    moto_ec2.inject("DescribeSpotInstanceRequests", status=200, account=account["aws_access_key_id"],
                    body=fake.ec2_body("DescribeSpotInstanceRequests", (
                        "<spotInstanceRequestSet><item><spotInstanceRequestId>%s</spotInstanceRequestId>"
                        "<instanceId>%s</instanceId><state>active</state><status><code>marked-for-termination"
                        "</code><message>Spot Instance marked for termination because of EC2 capacity</message>"
                        "</status></item></spotInstanceRequestSet>") % (request_id, instance_id)))
    report = provider.diagnose(LOC, "diag4")
    assert report["instances"][0]["vendor"]["spot_request"]["status_code"] == "marked-for-termination"
    assert [f for f in report["findings"] if "spot request" in f] == [
        "%s: spot request %s active (marked-for-termination: Spot Instance marked for termination because of "
        "EC2 capacity)" % (instance_id, request_id)]


def test_nothing_there_is_one_listing(provider, moto_ec2, account):
    before = len(moto_ec2.calls(account=account["aws_access_key_id"]))
    assert provider.diagnose(LOC, "never-made") == {"instances": [], "findings": []}
    assert [c["action"] for c in moto_ec2.calls(account=account["aws_access_key_id"])[before:]] == [
        "DescribeInstances"]


def test_errors_are_classified(provider, moto_ec2, account):
    moto_ec2.inject("DescribeInstances", code="AuthFailure", status=401, account=account["aws_access_key_id"])
    with pytest.raises(ProviderError) as err:
        provider.diagnose(LOC, "diag5")
    assert err.value.kind == ErrorKind.CREDENTIALS
