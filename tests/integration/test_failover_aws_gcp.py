"""Issue 3, "Done when": a launch across ``clouds: [aws, gcp]`` fails over from a capacity
error on AWS to GCP, reaches Booting with an endpoint, connects, and its teardown leaves
no instance, security group or firewall rule behind in either cloud.

The REAL launch and teardown machines run on the REAL executor and a SQLite journal in
tmp, with the REAL adapters built by the registry from ``cloud_options`` (as the vm
action builds them): AWS talks HTTP to moto's EC2 server (``endpoint_url``), GCP talks
to the Compute REST fake (``api_endpoint``) through google-cloud-compute's own REST
transport. Only two things are not real: time (a fake clock; a poll advances it, so
nothing sleeps) and the SSH login, which cannot succeed against a documentation
address of a fake cloud; a stand-in pins a host key for the endpoint and answers like
the real check. Every assertion reads the fakes' own state or the journal.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import random

import pytest

pytest.importorskip("boto3")
pytest.importorskip("moto")
pytest.importorskip("google.cloud.compute_v1")
pytest.importorskip("pytest_httpserver")

from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.executor import (  # noqa: E402
    CancelToken, Executor,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journal import Journal  # noqa: E402
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (  # noqa: E402
    VM_NAME_TAG, InstanceSpec, ResourceRequest,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import launch, teardown  # noqa: E402
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm.context import VmContext, VmSettings  # noqa: E402
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.gcp import catalog as gcp_catalog  # noqa: E402
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.aws import (  # noqa: E402
    journal_suffix as aws_journal_suffix,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm.ssh import ControllerFiles  # noqa: E402
from ansible_collections.gpuprov.cloud.tests.fakes import moto_ec2 as aws_fake  # noqa: E402
from ansible_collections.gpuprov.cloud.tests.fakes.gcp_compute import GcpComputeFake  # noqa: E402
from ansible_collections.gpuprov.cloud.tests.fakes.scripted_provider import FakeClock, kind_of  # noqa: E402

moto_ec2 = aws_fake.moto_ec2   # the session fixture: the shared moto server, fake credentials in env

NAME = "fo1"
AWS_REGION = "us-east-1"
GCP_ZONE = "us-central1-a"
CIDR = "198.51.100.7/32"
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGdwdXByb3YtZmFpbG92ZXItdGVzdA failover@test"
DLAMI_FILTER = "Deep Learning AMI Ubuntu Linux*"   # the DLAMI moto ships (owner: amazon)


class PinningSsh:
    """Stands in for vm.ssh.SshChecker: pins a host key for the instance's alias on first
    contact (as the real check does) and returns its fingerprint."""

    def __init__(self, files: ControllerFiles):
        self.files = files
        self.calls = []

    def __call__(self, endpoint, alias):
        self.calls.append((endpoint.host, endpoint.port, endpoint.user, alias))
        key = base64.b64encode(hashlib.sha256(alias.encode()).digest()).decode()
        self.files.pin(alias, "ssh-ed25519", key)
        return "SHA256:" + hashlib.sha256(base64.b64decode(key)).hexdigest()[:16]


@pytest.fixture
def gcp():
    fake = GcpComputeFake()
    fake.delete_lag = 2   # a deleted instance reads STOPPING twice before it is gone, as GCP's do
    yield fake
    fake.stop()


@pytest.fixture
def world(tmp_path, moto_ec2, gcp):
    creds = moto_ec2.new_account()
    account = creds["aws_access_key_id"]
    ec2 = moto_ec2.client("ec2", AWS_REGION, creds)
    cloud_options = {
        "aws": dict(creds, endpoint_url=moto_ec2.endpoint_url, regions=[AWS_REGION], allowed_cidrs=[CIDR],
                    ami_name_filter=DLAMI_FILTER, controller_ip_url=""),
        "gcp": {"project": gcp.project, "api_endpoint": gcp.url, "zones": [GCP_ZONE], "allowed_cidrs": [CIDR],
                "read_retry_s": 0},
    }
    settings = VmSettings(
        vm_name=NAME, clouds=["aws", "gcp"], request=ResourceRequest(vm_name=NAME, gpu="T4", gpu_count=1),
        spec=InstanceSpec(vm_name=NAME, ssh_public_key=KEY), cloud_options=cloud_options,
        ssh_timeout=60.0, teardown_timeout=120.0, step_attempts=3, teardown_attempts=3)
    files = ControllerFiles(str(tmp_path), str(tmp_path / "id_ed25519"))
    ssh = PinningSsh(files)
    clock = FakeClock()
    journal = Journal(str(tmp_path / "journal.sqlite"), clock=clock)

    def aws_live():
        return [i for r in ec2.describe_instances()["Reservations"] for i in r["Instances"]
                if i["State"]["Name"] != "terminated"]

    def aws_groups():
        return sorted(g["GroupName"] for g in ec2.describe_security_groups()["SecurityGroups"])

    def run(machine, initial):
        ex = Executor(journal, machine, clock=clock, cancel=CancelToken(clock), rng=random.Random(3),
                      heartbeat=False)
        return ex.run(NAME, initial, wait_poll=clock.wait)

    made = {"ctx": VmContext(settings, files=files, ssh_check=ssh, journal_id=journal.journal_id),
            "settings": settings, "files": files, "ssh": ssh, "clock": clock, "journal": journal, "ec2": ec2,
            "account": account, "run": run, "aws_live": aws_live, "aws_groups": aws_groups, "aws": moto_ec2, "gcp": gcp}
    try:
        yield made
    finally:
        moto_ec2.clear(account=account)
        ids = [i["InstanceId"] for i in aws_live()]
        if ids:
            ec2.terminate_instances(InstanceIds=ids)
        journal.close()


def _kind(label):
    """"Booting (offer 6 of 8: ...)" -> Booting; "Compensating/Requesting" -> Compensating."""
    return kind_of(label).split("/", 1)[0]


def _transitions(journal):
    """(from kind, to kind, from label, to label) of every committed transition."""
    return [(_kind(e["from"]), _kind(e["to"]), e["from"], e["to"]) for e in journal.events(NAME)
            if e["event"] == "transition"]


def _kinds(journal):
    return [(t[0], t[1]) for t in _transitions(journal)]


def test_capacity_on_aws_fails_over_to_gcp_and_teardown_leaves_nothing(world):
    aws, gcp, clock = world["aws"], world["gcp"], world["clock"]
    # Every RunInstances of this account answers InsufficientInstanceCapacity (in every zone).
    aws.inject("RunInstances", code="InsufficientInstanceCapacity", status=500, times=None,
               account=world["account"])
    aws_offers = list(world["ctx"].provider("aws").plan(world["settings"].request))
    assert [o.instance_type for o in aws_offers][:2] == ["g4dn.xlarge", "g4dn.2xlarge"]

    # What the clouds hold when the machine first waits (the GCP instance booting), and the
    # GCP instance coming up (RUNNING with a natIP) while the machine polls it.
    seen = {}

    def on_wait(seconds):
        if "first_wait" not in seen:
            seen["first_wait"] = {"aws_live": world["aws_live"](), "aws_groups": world["aws_groups"](),
                                  "gcp": {k: dict(v) for k, v in gcp.instances.items()},
                                  "gcp_firewalls": sorted(gcp.firewalls)}
        for (zone, name), inst in list(gcp.instances.items()):
            if inst["status"] == "PROVISIONING":
                gcp.settle(zone, name)
    clock.on_wait = on_wait

    out = world["run"](launch.LaunchMachine(world["ctx"]), launch.initial)

    # -- it failed over and came up on GCP --------------------------------------------------------
    assert out.state["kind"] == "Ready", out.state
    vm = out.state["vm"]
    assert vm["location"] == {"cloud": "gcp", "region": "us-central1", "zone": GCP_ZONE}
    assert vm["instance_type"] == "n1-standard-4" and vm["gpu"] == "T4" and vm["gpu_count"] == 1
    history = out.state["search"]["history"]
    assert [(h["offer"], h["outcome"]) for h in history] == [
        (o.offer_id, "Capacity") for o in aws_offers]
    assert all(h["error"]["msg"].startswith("InsufficientInstanceCapacity (RunInstances)") for h in history)
    assert {b["scope"] for b in out.state["search"]["blocked"]} == {"offer"}
    # each AWS offer was really attempted, in every zone that offers it, inside its one create
    runs = aws.calls("RunInstances", world["account"])
    assert len(runs) >= len(aws_offers)

    # the journal: every AWS attempt compensated, then GCP Booting -> Connecting -> Ready
    trans = _transitions(world["journal"])
    kinds = _kinds(world["journal"])
    assert kinds.count(("Creating", "Compensating")) == len(aws_offers)
    assert kinds.count(("Compensating", "NextOffer")) == len(aws_offers)
    booting = [t for t in trans if t[0] == "Booting"]
    assert [(t[0], t[1]) for t in booting] == [("Booting", "Connecting")]
    assert "gcp:us-central1:n1-standard-4:%s" % GCP_ZONE in booting[0][2]
    assert kinds[-2:] == [("Booting", "Connecting"), ("Connecting", "Ready")]
    notes = [e["note"] for e in world["journal"].events(NAME) if e["to"] and e["to"].startswith("Booting")
             and e["event"] == "poll"]
    assert any("no endpoint yet" in (n or "") for n in notes), notes   # it waited for the address

    # when the machine first waited (GCP booting), AWS was already clean: compensation removed
    # the security group of every failed attempt, and no AWS instance ever existed
    first = seen["first_wait"]
    assert first["aws_live"] == [] and first["aws_groups"] == ["default"]
    assert [(name, inst["status"]) for (_z, name), inst in first["gcp"].items()] == [(NAME, "PROVISIONING")]
    rule = gcp_catalog.firewall_name(NAME, world["journal"].journal_id)   # this journal's rule
    assert first["gcp_firewalls"] == [rule]

    # the endpoint is the GCP instance's natIP, and SSH was checked there with the pinned alias
    [inst] = gcp.instances.values()
    nat = inst["networkInterfaces"][0]["accessConfigs"][0]["natIP"]
    assert inst["labels"][VM_NAME_TAG] == NAME and inst["status"] == "RUNNING"
    assert vm["ssh"] == {"host": nat, "port": 22, "user": "gpuprov"}
    assert world["ssh"].calls == [(nat, 22, "gpuprov", vm["host_key_alias"])]
    assert vm["host_key_alias"] in open(world["files"].known_hosts).read()
    assert "HostName %s\n" % nat in open(world["files"].ssh_config).read()
    fw = gcp.firewalls[rule]
    assert fw["sourceRanges"] == [CIDR] and fw["targetTags"] == [rule]
    assert world["aws_live"]() == [] and world["aws_groups"]() == ["default"]
    row = world["journal"].load(NAME)
    assert (row.kind, row.state["kind"]) == ("launch", "Ready")

    # -- teardown: down, as the vm action runs it ---------------------------------------------------
    down = world["run"](teardown.TeardownMachine(world["ctx"]), lambda prev, kind: teardown.initial(
        NAME, launch.owned_targets(prev, kind), "down requested"))
    assert down.state["kind"] == "Done", down.state
    assert down.state["targets"] == [{"location": vm["location"], "instance_ids": [vm["instance_id"]], "created": True}]
    world["files"].remove_vm(NAME)

    # nothing is left in either cloud: no instance, no volume, no security group, no firewall rule
    assert gcp.instances == {} and gcp.firewalls == {}
    assert world["aws_live"]() == [] and world["aws_groups"]() == ["default"]
    assert world["ec2"].describe_volumes()["Volumes"] == []
    assert [c["path"].rsplit("/", 1)[-1] for c in gcp.calls_of("instances.delete")] == [NAME]
    assert gcp.calls_of("firewalls.delete") and "Host %s" % NAME not in open(world["files"].ssh_config).read()
    path = [t[1] for t in _kinds(world["journal"])][-3:]
    assert path == ["AwaitingGone", "CleaningUp", "Done"]
    # no real time passed: every wait advanced the fake clock
    assert clock.waits and all(w >= 0 for w in clock.waits)


def test_without_the_capacity_error_aws_wins_and_down_removes_it(world):
    """The control: the same setup with no injected error launches on AWS (the first offer)."""
    gcp = world["gcp"]
    out = world["run"](launch.LaunchMachine(world["ctx"]), launch.initial)
    assert out.state["kind"] == "Ready", out.state
    vm = out.state["vm"]
    assert vm["location"]["cloud"] == "aws" and vm["instance_type"] == "g4dn.xlarge"
    [inst] = world["aws_live"]()
    assert inst["InstanceId"] == vm["instance_id"] and vm["ssh"]["host"] == inst["PublicIpAddress"]
    group = "gpuprov-" + NAME + aws_journal_suffix(world["journal"].journal_id)   # this journal's group
    assert world["aws_groups"]() == ["default", group] and gcp.instances == {}
    assert _kinds(world["journal"])[-2:] == [
        ("Booting", "Connecting"), ("Connecting", "Ready")]

    down = world["run"](teardown.TeardownMachine(world["ctx"]), lambda prev, kind: teardown.initial(
        NAME, launch.owned_targets(prev, kind), "down requested"))
    assert down.state["kind"] == "Done", down.state
    assert world["aws_live"]() == [] and world["aws_groups"]() == ["default"]
    assert gcp.instances == {} and gcp.firewalls == {}


def test_insufficient_volume_capacity_moves_to_the_next_zone_not_a_retry_in_place(world):
    """InsufficientVolumeCapacity (HTTP 500) is the zone's: create tries the offer's next subnet."""
    aws = world["aws"]
    aws.inject("RunInstances", code="InsufficientVolumeCapacity", status=500, times=1, account=world["account"])
    prepared_zones = world["ctx"].provider("aws").prepare(
        world["ctx"].provider("aws").plan(world["settings"].request)[0], world["settings"].spec)["zones"]
    out = world["run"](launch.LaunchMachine(world["ctx"]), launch.initial)
    assert out.state["kind"] == "Ready", out.state
    vm = out.state["vm"]
    assert vm["location"]["cloud"] == "aws" and out.state["search"]["history"] == []
    [inst] = world["aws_live"]()
    # the first zone refused the volume; the instance is in the next one, made by the same create
    assert len(prepared_zones) > 1 and inst["Placement"]["AvailabilityZone"] == prepared_zones[1]
    assert len(aws.calls("RunInstances", world["account"])) == 2
    assert ("Creating", "Compensating") not in _kinds(world["journal"])


@pytest.mark.parametrize("metric,gcp_inserts,cloud", [("CPUS_ALL_REGIONS", 1, "aws"), ("CPUS", 2, "gcp")])
def test_a_project_wide_gcp_quota_blocks_all_of_gcp(world, metric, gcp_inserts, cloud):
    """CPUS_ALL_REGIONS counts the whole project: no other GCP region is tried, the search moves
    on to AWS. A regional CPUS quota blocks only its region: the next GCP region is tried."""
    gcp = world["gcp"]
    options = dict(world["settings"].cloud_options)
    options["gcp"] = dict(options["gcp"], zones=None, regions=["us-central1", "us-west1"])
    settings = dataclasses.replace(world["settings"], clouds=["gcp", "aws"], cloud_options=options)
    ctx = VmContext(settings, files=world["files"], ssh_check=world["ssh"], journal_id=world["journal"].journal_id)
    gcp.fail_next_insert("QUOTA_EXCEEDED", quota_metric=metric)

    def on_wait(seconds):
        for (zone, name), inst in list(gcp.instances.items()):
            if inst["status"] == "PROVISIONING":
                gcp.settle(zone, name)
    world["clock"].on_wait = on_wait

    out = world["run"](launch.LaunchMachine(ctx), launch.initial)
    assert out.state["kind"] == "Ready", out.state
    assert out.state["vm"]["location"]["cloud"] == cloud
    [first] = out.state["search"]["history"]
    assert first["outcome"] == "Quota" and metric in first["error"]["msg"]
    blocked = {(b["scope"], b.get("cloud")) for b in out.state["search"]["blocked"]}
    assert ("cloud", "gcp") in blocked if cloud == "aws" else ("cloud", "gcp") not in blocked, blocked
    assert len(gcp.calls_of("instances.insert")) == gcp_inserts

    down = world["run"](teardown.TeardownMachine(ctx), lambda prev, kind: teardown.initial(
        NAME, launch.owned_targets(prev, kind), "down requested"))
    assert down.state["kind"] == "Done", down.state
    assert gcp.instances == {} and gcp.firewalls == {}
    assert world["aws_live"]() == [] and world["aws_groups"]() == ["default"]
