"""The logic of gpuprov.cloud.offers / instance / instance_info (module_utils/primitives.py)
against the local cloud (real sshd processes) and the AWS adapter on moto's EC2 server.

The functions are what the modules' main() calls with the validated parameters, so
every result here is the task result the module would return.
"""

from __future__ import annotations

import ast
import inspect
import os
import re
import uuid

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks import primitives
from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.owners import new_owner
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import projection
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers import registry
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    JOURNAL_ID_TAG, VM_NAME_TAG, Capabilities, ErrorKind, Location, Observed, Offer, Provider, Status,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.local import LocalProvider
from ansible_collections.gpuprov.cloud.tests.fakes import moto_ec2 as fake

moto_ec2 = fake.moto_ec2   # the session fixture: the shared moto server, fake credentials in env

REGION = "us-east-1"
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIUnitTestOnlyNotARealKey000000000000000 unit@test"
CIDR = "203.0.113.7/32"
DLAMI_FILTER = "Deep Learning AMI Ubuntu Linux*"   # the DLAMI moto ships (owner: amazon)
HAS_SSHD = os.path.exists("/usr/sbin/sshd") or any(
    os.access(os.path.join(p, "sshd"), os.X_OK) for p in os.environ.get("PATH", "").split(os.pathsep))
needs_sshd = pytest.mark.skipif(not HAS_SSHD, reason="the local cloud needs openssh-server (sshd)")


def _name(prefix="pm"):
    return "%s-%s" % (prefix, uuid.uuid4().hex[:8])


@pytest.fixture(autouse=True)
def private_state(tmp_path, monkeypatch):
    """Every test has its own state directory, so its own journal (instance tasks write one)."""
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    monkeypatch.setenv("GPUPROV_HOME", str(state))
    monkeypatch.delenv("GPUPROV_JOURNAL", raising=False)
    return state


def _journal_id():
    journal = projection.open_journal()
    try:
        return journal.journal_id
    finally:
        journal.close()


# -- the local cloud --------------------------------------------------------------------------------

# Not conftest.py's home: this one also hands the test a list to name the VMs it made, stopped at the end.
@pytest.fixture
def home(tmp_path, monkeypatch):
    """A private state directory: the local cloud's instances and the collection key live there."""
    state = tmp_path / "gpuprov-home"
    state.mkdir(mode=0o700)
    monkeypatch.setenv("GPUPROV_HOME", str(state))
    monkeypatch.delenv("GPUPROV_JOURNAL", raising=False)
    made = []
    yield {"path": state, "names": made}
    # Whatever a failing test left running is stopped.
    local = LocalProvider({"root": str(state / "local")})
    where = Location("local", "local")
    for name in made:
        ids = [o.instance_id for o in local.observe(where, name)]
        if ids:
            local.delete(where, name, ids)


def _local(home, **params):
    name = params.pop("name", None) or _name()
    home["names"].append(name)
    return dict({"name": name, "cloud": "local", "cloud_options": {}, "state": "present", "wait": True,
                 "wait_timeout": 30}, **params)


def _live_local(home, name):
    local = LocalProvider({"root": str(home["path"] / "local")})
    return [o for o in local.observe(Location("local", "local"), name) if o.status not in (Status.FAILED,)]


def test_offers_on_the_local_cloud_is_a_one_row_table():
    result = primitives.offers({"clouds": ["local"], "cloud_options": {}})
    assert result["changed"] is False and "failed" not in result
    assert [(r["rank"], r["offer_id"], r["available"]) for r in result["offers"]] == [(1, "local:local:sshd", True)]
    assert result["available"] == 1 and result["errors"] == []
    assert result["clouds"] == [{"cloud": "local", "offers": 1, "available": 1, "error": None}]
    header, row = result["table"]
    assert header.split()[:7] == ["#", "CLOUD", "REGION", "ZONE", "TYPE", "GPU", "$/H"]
    assert row.split() == ["1", "local", "local", "-", "sshd", "-", "0", "yes"]


def test_offers_report_a_cloud_that_cannot_plan_and_keep_the_others(moto_ec2):
    before = len(moto_ec2.calls())
    result = primitives.offers({"clouds": ["local", "aws", "local"], "gpu": "T4", "regions": [REGION],
                                "cloud_options": {"aws": {"endpoint_url": moto_ec2.endpoint_url}}})
    assert "failed" not in result, result
    # local has no GPU: its plan is an InvalidRequest, named with its cloud; aws plans its T4 ladder.
    assert [(e["cloud"], e["kind"], e["primitive"]) for e in result["errors"]] == [("local", "InvalidRequest", "plan")]
    assert "no GPUs" in result["errors"][0]["msg"] and "could not plan local" in result["msg"]
    aws = [r for r in result["offers"] if r["cloud"] == "aws"]
    assert aws and all(r["gpu"] == "T4" and r["region"] == REGION for r in aws)
    assert [r["rank"] for r in result["offers"]] == list(range(1, len(aws) + 1))
    assert aws[0]["instance_type"] == "g4dn.xlarge" and aws[0]["price_per_hour"] > 0
    assert [s["cloud"] for s in result["clouds"]] == ["local", "aws"]   # duplicates dropped, order kept
    assert any("g4dn.xlarge" in line and "yes" in line for line in result["table"])
    # The aws plan is a static ladder: its one call asks whether the credentials are accepted.
    assert [c["action"] for c in moto_ec2.calls()[before:]] == ["GetCallerIdentity"]


def test_offers_fail_when_no_cloud_can_plan_naming_each_kind():
    result = primitives.offers({"clouds": ["local"], "gpu": "H100"})
    assert result["failed"] is True and result["changed"] is False
    assert result["msg"].startswith("no cloud could plan this request: local: InvalidRequest: gpu:")


def test_offers_mark_unavailable_offers_with_the_reason(monkeypatch):
    def plan(self, request):
        return [Offer("local", "local", "sshd", price_per_hour=0.0),
                Offer("local", "local", "big", available=False, unavailable_reason="sold out")]
    monkeypatch.setattr(LocalProvider, "plan", plan)
    result = primitives.offers({"clouds": ["local"]})
    assert [(r["instance_type"], r["rank"], r["available"], r["unavailable_reason"]) for r in result["offers"]] == [
        ("sshd", 1, True, None), ("big", None, False, "sold out")]
    assert result["available"] == 1
    assert result["table"][2].split()[:2] == ["-", "local"] and result["table"][2].endswith("no: sold out")


@pytest.mark.parametrize("params, field", [
    ({"clouds": ["nimbus"]}, "clouds: unknown cloud 'nimbus'"),
    ({"clouds": ["local"], "cloud_options": {"nimbus": {}}}, "cloud_options: unknown cloud(s) nimbus"),
    ({"clouds": ["local"], "cloud_options": {"local": "root=/tmp"}}, "cloud_options.local: expected a dict"),
    ({"clouds": ["local"], "gpu_count": 0}, "gpu_count: expected an integer >= 1"),
    ({"clouds": ["local"], "gpu": "Z80"}, "gpu: unknown GPU 'Z80'"),
    ({"clouds": ["local"], "name": "Not_A_Label"}, "name: expected a DNS label"),
])
def test_parameter_errors_are_failed_invalid_requests(params, field):
    result = primitives.offers(params)
    assert result["failed"] is True and result["changed"] is False
    assert result["msg"].startswith("InvalidRequest: " + field), result["msg"]
    assert result["error"]["kind"] == ErrorKind.INVALID_REQUEST


@needs_sshd
def test_instance_present_is_idempotent_and_absent_removes_everything(home):
    params = _local(home)
    name = params["name"]

    first = primitives.instance(dict(params))
    assert "failed" not in first, first
    assert first["changed"] is True and first["msg"].startswith("%s: created local-" % name)
    made = first["instance"]["instance_id"]
    assert first["instance"]["cloud"] == "local" and first["instance"]["status"] in (Status.PENDING, Status.RUNNING)
    assert first["prepared"]["sshd"] and first["offer"]["offer_id"] == "local:local:sshd"
    assert first["location"] == {"cloud": "local", "region": "local", "zone": None}
    assert [(o.instance_id, o.journal_id) for o in _live_local(home, name)] == [(made, _journal_id())]
    # the collection's own key was generated and authorised
    public = (home["path"] / "id_ed25519.pub").read_text().strip()
    assert (home["path"] / "local" / name / made / "authorized_keys").read_text().strip() == public

    second = primitives.instance(dict(params))
    assert second["changed"] is False and second["instance"]["instance_id"] == made
    assert second["prepared"] is None   # it exists: nothing was prepared
    assert [o.instance_id for o in _live_local(home, name)] == [made]

    info = primitives.instance_info({"name": name, "cloud": "local"})
    assert info["changed"] is False and info["exists"] is True
    assert [i["instance_id"] for i in info["instances"]] == [made]
    assert info["locations"] == [{"cloud": "local", "region": "local", "zone": None}]

    predicted = primitives.instance(dict(params, state="absent"), check_mode=True)
    assert predicted["changed"] is True and predicted["deleted"] == [made] and predicted["cleaned_up"] is False
    assert [o.instance_id for o in _live_local(home, name)] == [made]   # check mode deleted nothing

    gone = primitives.instance(dict(params, state="absent"))
    assert gone["changed"] is True and gone["deleted"] == [made] and gone["cleaned_up"] is True
    assert gone["instances"] == [] and _live_local(home, name) == []
    assert not (home["path"] / "local" / name).exists()   # cleanup removed the VM's folder

    again = primitives.instance(dict(params, state="absent"))
    assert again["changed"] is False and again["deleted"] == [] and again["cleaned_up"] is True
    assert primitives.instance_info({"name": name, "cloud": "local"})["exists"] is False


@needs_sshd
def test_instance_check_mode_predicts_and_makes_nothing(home):
    params = _local(home)
    predicted = primitives.instance(dict(params), check_mode=True)
    assert predicted["changed"] is True and predicted["instance"] is None and predicted["prepared"] is None
    assert predicted["msg"] == "%s: would prepare and create local:local:sshd" % params["name"]
    # no instance, no prepared folder, not even the collection key
    assert _live_local(home, params["name"]) == []
    assert not (home["path"] / "local").exists() and not (home["path"] / "id_ed25519").exists()

    made = primitives.instance(dict(params))["instance"]["instance_id"]
    kept = primitives.instance(dict(params), check_mode=True)
    assert kept["changed"] is False and kept["instance"]["instance_id"] == made


@needs_sshd
def test_instance_uses_the_given_public_key(home):
    params = _local(home, ssh_public_key=KEY + "\n")
    made = primitives.instance(params)["instance"]["instance_id"]
    authorized = home["path"] / "local" / params["name"] / made / "authorized_keys"
    assert authorized.read_text().strip() == KEY
    assert not (home["path"] / "id_ed25519").exists()


def test_instance_with_a_missing_ssh_key_fails_naming_it(home, tmp_path):
    result = primitives.instance(_local(home, ssh_key=str(tmp_path / "nope")))
    assert result["failed"] is True and result["msg"].startswith("InvalidRequest: ssh_key: ")


def test_instance_offer_that_plan_does_not_return_fails_listing_the_plan(home):
    result = primitives.instance(_local(home, instance_type="m5.large"))
    assert result["failed"] is True
    assert result["msg"].startswith("InvalidRequest: no local offer matches instance_type=m5.large")
    assert "planned: local:local:sshd" in result["msg"] and result["error"]["primitive"] == "plan"


def test_instance_on_an_unavailable_offer_is_unavailable(home, monkeypatch):
    monkeypatch.setattr(LocalProvider, "plan", lambda self, request: [
        Offer("local", "local", "sshd", available=False, unavailable_reason="no sshd slots")])
    result = primitives.instance(_local(home))
    assert result["failed"] is True and result["msg"].startswith("Unavailable: local:local:sshd: no sshd slots")


def test_a_provider_error_becomes_a_failed_task_naming_kind_primitive_and_location(home, tmp_path):
    # an observe that cannot read the VM's folder: Transient from the adapter
    name = _name()
    root = tmp_path / "root"
    root.mkdir()
    (root / name).write_text("not a folder")
    result = primitives.instance_info({"name": name, "cloud": "local", "cloud_options": {"local": {"root": str(root)}}})
    assert result["failed"] is True and result["changed"] is False
    assert result["msg"].startswith("Transient: reading %s" % (root / name))
    assert result["msg"].endswith("(observe at local/local)")
    assert result["error"]["kind"] == "Transient" and result["error"]["primitive"] == "observe"


# -- absent runs the teardown machine: a scripted provider, the executor's clock and waits ----------

class Lingering(Provider):
    """Instances leave only after ``left`` observes once deleted; records every call.
    ``world["instances"]`` is what stands at the location: (id, journal id or None)."""

    name = "lingering"
    world = {}

    def capabilities(self):
        return Capabilities(poll_interval_s=7.0)

    def plan(self, request):
        return [Offer("lingering", "r1", "t1", zone="r1-a")]

    def observe(self, location, vm_name):
        w = self.world
        w["calls"].append("observe")
        found = []
        for instance_id, journal_id in w["instances"]:
            if instance_id not in w["deleted"]:
                found.append(Observed(instance_id, Status.RUNNING, location=location, journal_id=journal_id))
            elif w["left"] > 0:
                found.append(Observed(instance_id, Status.TERMINATING, location=location, journal_id=journal_id))
        if w["deleted"] and w["left"] > 0:
            w["left"] -= 1
        return found

    def prepare(self, offer, spec):
        raise AssertionError("state=absent never prepares")

    def create(self, offer, prepared, spec):
        raise AssertionError("state=absent never creates")

    def delete(self, location, vm_name, instance_ids):
        self.world["calls"].append("delete %s" % ",".join(instance_ids))
        self.world["deleted"].update(instance_ids)

    def cleanup(self, location, vm_name):
        self.world["calls"].append("cleanup")


@pytest.fixture
def lingering(monkeypatch):
    real = registry.get_provider

    def get_provider(cloud, options=None, journal_id=None):
        if cloud == "lingering":
            return Lingering(options, journal_id=journal_id)
        return real(cloud, options, journal_id=journal_id)

    monkeypatch.setitem(registry.ADAPTERS, "lingering", ("lingering", "Lingering"))
    monkeypatch.setattr(registry, "get_provider", get_provider)
    Lingering.world.clear()
    Lingering.world.update(calls=[], instances=[("i-1", None)], deleted=set(), left=2)
    return Lingering.world


class Clock:
    """The teardown executor's clock and wait: waiting moves time on, nothing sleeps."""

    def __init__(self):
        self.now = 0.0
        self.slept = []

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.slept.append(seconds)
        self.now += seconds


ABSENT = {"name": "w1", "cloud": "lingering", "state": "absent"}
TEARDOWN_KEY = "instance:lingering:w1"


def _absent(clock, **params):
    return primitives.instance(dict(ABSENT, **params), sleep=clock.sleep, clock=clock)


def _row(key=TEARDOWN_KEY):
    journal = projection.open_journal()
    try:
        row = journal.load(key)
        return row, [(e["from"], e["to"]) for e in journal.events(key) if e["event"] != "poll"]
    finally:
        journal.close()


def test_absent_waits_at_the_cloud_poll_interval_then_cleans_up(lingering):
    clock = Clock()
    result = _absent(clock, wait_timeout=60)
    assert "failed" not in result, result
    assert result["changed"] is True and result["cleaned_up"] is True and result["deleted"] == ["i-1"]
    assert result["location"] == {"cloud": "lingering", "region": "r1", "zone": "r1-a"}
    assert result["state"] == "Done" and result["instances"] == [] and result["warnings"] == []
    assert clock.slept == [7.0, 7.0]
    # Requesting journals what it found before it deletes; AwaitingGone never deletes a leaving instance again.
    assert lingering["calls"] == ["observe", "observe", "delete i-1", "observe", "observe", "observe", "cleanup"]
    row, moves = _row()
    assert row.kind == "instance-teardown" and row.label == "Done" and row.terminal and row.lease_owner is None
    assert [to for _frm, to in moves] == ["Requesting", "Requesting", "AwaitingGone", "CleaningUp", "Done"]
    assert result["journal"] == projection.open_journal().path


def test_absent_that_times_out_is_leaked_and_the_next_run_finishes_it(lingering):
    lingering["left"] = 100
    clock = Clock()
    result = _absent(clock, wait_timeout=20)
    assert result["failed"] is True and result["changed"] is True and result["cleaned_up"] is False
    assert result["state"] == "Leaked" and result["deleted"] == ["i-1"]
    assert "instances still present after 20 s: lingering/r1/r1-a [i-1]" in result["msg"]
    assert "may still bill" in result["msg"] and "Run the task again" in result["msg"]
    assert result["leaked"] == [{"location": {"cloud": "lingering", "region": "r1", "zone": "r1-a"},
                                 "instance_ids": ["i-1"], "created": True}]
    assert "cleanup" not in lingering["calls"] and clock.slept == [7.0, 7.0, 7.0]
    assert _row()[0].label == "Leaked"

    lingering["left"] = 0   # gone by now
    again = _absent(clock, wait_timeout=20)
    assert "failed" not in again, again
    assert again["state"] == "Done" and again["cleaned_up"] is True and lingering["calls"][-1] == "cleanup"
    assert again["changed"] is False and again["deleted"] == []   # asking again for a gone instance changes nothing


def test_absent_without_wait_requests_deletion_and_a_later_run_cleans_up(lingering):
    clock = Clock()
    first = _absent(clock, wait=False)
    assert "failed" not in first and first["changed"] is True and first["cleaned_up"] is False
    assert first["state"] == "DeletionRequested" and first["deleted"] == ["i-1"]
    assert "deletion requested for i-1 (Terminating)" in first["msg"]
    assert "cleanup runs once they are gone" in first["msg"] and clock.slept == []
    assert "cleanup" not in lingering["calls"]
    lingering["left"] = 0
    second = _absent(clock, wait=False)
    assert second["changed"] is False and second["cleaned_up"] is True and lingering["calls"][-1] == "cleanup"
    assert second["state"] == "Done"


def test_absent_without_wait_cleans_up_at_once_when_nothing_is_left(lingering):
    lingering["instances"] = []
    result = _absent(Clock(), wait=False)
    assert result["changed"] is False and result["cleaned_up"] is True and result["state"] == "Done"
    assert lingering["calls"] == ["observe", "observe", "cleanup"]


def test_a_run_that_waits_resumes_a_requested_deletion(lingering):
    clock = Clock()
    assert _absent(clock, wait=False)["state"] == "DeletionRequested"
    lingering["left"] = 1
    calls = len(lingering["calls"])
    waited = _absent(clock, wait=True)
    assert waited["state"] == "Done" and waited["cleaned_up"] is True and clock.slept == [7.0]
    # resumed as AwaitingGone: observed until gone, never a second delete
    assert lingering["calls"][calls:] == ["observe", "observe", "cleanup"]
    assert waited["changed"] is False


class Killed(BaseException):
    """The module process dying in the middle of a wait (a SIGKILL runs no handler)."""


def test_a_teardown_killed_while_waiting_is_resumed_by_the_next_run(lingering):
    lingering["left"] = 3
    clock = Clock()

    def die(seconds):
        raise Killed()

    with pytest.raises(Killed):
        primitives.instance(dict(ABSENT), sleep=die, clock=clock)
    row, _moves = _row()
    assert row.label == "AwaitingGone" and not row.terminal   # journalled before the wait began
    deletes = [c for c in lingering["calls"] if c.startswith("delete")]
    resumed = _absent(clock)
    assert resumed["state"] == "Done" and resumed["cleaned_up"] is True
    assert [c for c in lingering["calls"] if c.startswith("delete")] == deletes   # not deleted twice
    _row_after, moves = _row()
    assert ("AwaitingGone", "CleaningUp") in moves


def test_absent_never_deletes_another_journals_instance(lingering):
    lingering["instances"] = [("i-1", None), ("i-theirs", "another-journal")]
    predicted = primitives.instance(dict(ABSENT), check_mode=True)
    assert predicted["deleted"] == ["i-1"] and predicted["changed"] is True
    assert [i["instance_id"] for i in predicted["instances"]] == ["i-1", "i-theirs"]
    assert lingering["calls"] == ["observe"]
    lingering["left"] = 0
    result = _absent(Clock())
    assert result["deleted"] == ["i-1"] and "delete i-theirs" not in " ".join(lingering["calls"])
    assert [i["instance_id"] for i in result["instances"]] == ["i-theirs"]
    assert result["warnings"] == ["w1: left i-theirs (Running) at lingering/r1/r1-a alone: it was made by another "
                                  "controller (journal another-journal)"]
    assert result["state"] == "Done"


def test_check_mode_writes_no_journal(lingering, private_state):
    predicted = primitives.instance(dict(ABSENT), check_mode=True)
    assert predicted["changed"] is True and predicted["cleaned_up"] is False
    assert lingering["calls"] == ["observe"] and not (private_state / "journal.sqlite").exists()


def test_absent_while_another_run_holds_the_key_fails_and_touches_nothing(lingering):
    journal = projection.open_journal()
    other = new_owner()
    try:
        journal.begin(TEARDOWN_KEY, "instance-teardown", {"kind": "AwaitingGone", "vm_name": "w1", "targets": []},
                      "AwaitingGone", False, other, 60.0, None)
    finally:
        journal.close()
    result = _absent(Clock())
    assert result["failed"] is True and "being worked on by another run" in result["msg"]
    assert [c for c in lingering["calls"] if not c == "observe"] == []


def test_an_earlier_leak_at_another_location_is_cleared_too(lingering):
    lingering["left"] = 100
    clock = Clock()
    assert _absent(clock, wait_timeout=10, region="r0")["state"] == "Leaked"
    lingering["left"] = 0
    result = _absent(clock, region="r1")
    assert result["state"] == "Done" and result["location"]["region"] == "r1"
    assert "also cleared what an earlier task left: lingering/r0" in result["msg"]
    assert lingering["calls"].count("cleanup") == 2


def test_present_never_adopts_another_journals_instance(lingering):
    lingering["instances"] = [("i-theirs", "another-journal")]
    for check_mode in (True, False):
        result = primitives.instance({"name": "w1", "cloud": "lingering"}, check_mode=check_mode)
        assert result["failed"] is True and result["changed"] is False
        assert result["msg"].startswith("InvalidRequest: w1 exists at lingering/r1/r1-a, made by another controller "
                                        "(journal another-journal): i-theirs (Running)")
    assert lingering["calls"] == ["observe", "observe"]   # nothing prepared, created or deleted


def test_present_waits_its_turn_behind_a_teardown_of_the_name(lingering):
    journal = projection.open_journal()
    try:
        journal.begin(TEARDOWN_KEY, "instance-teardown", {"kind": "AwaitingGone", "vm_name": "w1", "targets": []},
                      "AwaitingGone", False, new_owner(), 60.0, None)
    finally:
        journal.close()
    result = primitives.instance({"name": "w1", "cloud": "lingering"})
    assert result["failed"] is True and "being worked on by another run" in result["msg"]
    assert lingering["calls"] == []


def test_wait_timeout_below_zero_is_refused(lingering):
    result = _absent(Clock(), wait_timeout=-1)
    assert result["failed"] is True and result["msg"].startswith("InvalidRequest: wait_timeout: ")
    assert lingering["calls"] == []


def test_instance_info_without_region_looks_at_every_planned_location(lingering, monkeypatch):
    monkeypatch.setattr(Lingering, "plan", lambda self, request: [
        Offer("lingering", "r1", "t1", zone="r1-a"), Offer("lingering", "r1", "t2", zone="r1-a"),
        Offer("lingering", "r2", "t1", zone="r2-b")])
    result = primitives.instance_info({"name": "w1", "cloud": "lingering"})
    assert result["locations"] == [{"cloud": "lingering", "region": "r1", "zone": "r1-a"},
                                   {"cloud": "lingering", "region": "r2", "zone": "r2-b"}]
    # the same instance id seen at two locations of one region would be listed once; here the regions differ
    assert [(i["instance_id"], i["region"]) for i in result["instances"]] == [("i-1", "r1"), ("i-1", "r2")]
    assert result["exists"] is True and result["running"] is False


# -- AWS on moto ----------------------------------------------------------------------------------------

@pytest.fixture
def aws(moto_ec2):
    creds = moto_ec2.new_account()
    options = dict(creds, endpoint_url=moto_ec2.endpoint_url, allowed_cidrs=[CIDR], ami_name_filter=DLAMI_FILTER,
                   controller_ip_url="")
    ec2 = moto_ec2.client("ec2", REGION, creds)
    name = _name("aws")
    params = {"name": name, "cloud": "aws", "cloud_options": {"aws": options}, "gpu": "T4", "region": REGION,
              "ssh_public_key": KEY, "state": "present", "wait": True, "wait_timeout": 60}

    def live():
        out = []
        for r in ec2.describe_instances()["Reservations"]:
            for i in r["Instances"]:
                if i["State"]["Name"] != "terminated":
                    out.append(i)
        return out

    def groups():
        """The VPC's security groups, the VM's own (named after the VM and this journal) as "mine"."""
        mine = re.compile(r"^gpuprov-%s-j[0-9a-f]{8}$" % re.escape(name))
        return sorted("mine" if mine.match(g["GroupName"]) else g["GroupName"]
                      for g in ec2.describe_security_groups()["SecurityGroups"])

    return {"params": params, "name": name, "account": creds["aws_access_key_id"], "live": live, "groups": groups,
            "fake": moto_ec2}


def test_aws_instance_present_twice_then_absent_twice(aws):
    params, name = aws["params"], aws["name"]
    predicted = primitives.instance(dict(params), check_mode=True)
    assert predicted["changed"] is True and predicted["offer"]["offer_id"] == "aws:us-east-1:g4dn.xlarge"
    assert aws["live"]() == [] and aws["groups"]() == ["default"]   # check mode made nothing

    first = primitives.instance(dict(params))
    assert "failed" not in first, first
    assert first["changed"] is True and first["instance"]["instance_id"].startswith("i-")
    assert first["prepared"]["security_group_id"].startswith("sg-") and first["prepared"]["allowed_cidrs"] == [CIDR]
    [inst] = aws["live"]()
    assert inst["InstanceId"] == first["instance"]["instance_id"] and inst["InstanceType"] == "g4dn.xlarge"
    tags = {t["Key"]: t["Value"] for t in inst["Tags"]}
    assert tags[VM_NAME_TAG] == name and tags[JOURNAL_ID_TAG] == _journal_id()   # made for the task's journal
    assert aws["groups"]() == ["default", "mine"]
    runs = len(aws["fake"].calls("RunInstances", aws["account"]))

    second = primitives.instance(dict(params))
    assert second["changed"] is False and second["instance"]["instance_id"] == inst["InstanceId"]
    assert second["prepared"] is None   # it exists: no prepare call (no security group call either)
    assert len(aws["fake"].calls("RunInstances", aws["account"])) == runs   # no second create
    assert len(aws["live"]()) == 1

    info = primitives.instance_info(dict(params))
    assert [i["instance_id"] for i in info["instances"]] == [inst["InstanceId"]] and info["exists"] is True

    gone = primitives.instance(dict(params, state="absent"), sleep=lambda s: pytest.fail("slept %s" % s))
    assert gone["changed"] is True and gone["deleted"] == [inst["InstanceId"]] and gone["cleaned_up"] is True
    assert aws["live"]() == [] and aws["groups"]() == ["default"]
    again = primitives.instance(dict(params, state="absent"))
    assert again["changed"] is False and again["deleted"] == []


def test_aws_zone_pins_the_regional_offer(aws):
    result = primitives.instance(dict(aws["params"], zone=REGION + "b", instance_type="g4dn.2xlarge"))
    assert "failed" not in result, result
    assert result["offer"]["offer_id"] == "aws:us-east-1:g4dn.2xlarge:us-east-1b"
    assert result["prepared"]["zones"] == [REGION + "b"]
    assert [s["zone"] for s in result["prepared"]["subnets"]] == [REGION + "b"]
    [inst] = aws["live"]()
    assert inst["Placement"]["AvailabilityZone"] == REGION + "b" and inst["InstanceType"] == "g4dn.2xlarge"
    primitives.instance(dict(aws["params"], state="absent"))
    assert aws["live"]() == []


def test_aws_capacity_error_fails_the_task_and_absent_removes_the_prepared_group(aws):
    aws["fake"].inject("RunInstances", code="InsufficientInstanceCapacity", status=500, times=None,
                       account=aws["account"])
    failed = primitives.instance(dict(aws["params"]))
    assert failed["failed"] is True and failed["changed"] is False
    assert failed["msg"].startswith("Capacity: InsufficientInstanceCapacity (RunInstances)")
    assert failed["msg"].endswith("(create at aws/us-east-1)")
    assert failed["error"] == dict(failed["error"], kind="Capacity", block="offer", primitive="create",
                                   location="aws/us-east-1")
    assert aws["live"]() == [] and "mine" in aws["groups"]()
    aws["fake"].clear(account=aws["account"])
    cleaned = primitives.instance(dict(aws["params"], state="absent"))
    assert cleaned["changed"] is False and cleaned["cleaned_up"] is True and aws["groups"]() == ["default"]


def test_aws_credentials_error_on_observe_is_a_failed_task(aws):
    aws["fake"].inject("DescribeInstances", code="AuthFailure", status=401, times=None, account=aws["account"])
    try:
        result = primitives.instance_info(dict(aws["params"]))
    finally:
        aws["fake"].clear(account=aws["account"])
    assert result["failed"] is True
    assert result["msg"].startswith("Credentials: AuthFailure (DescribeInstances)")
    assert result["error"]["kind"] == "Credentials" and result["error"]["primitive"] == "observe"


# -- packaging ----------------------------------------------------------------------------------------

def test_every_registered_adapter_is_named_for_ansiballz():
    """The modules reach adapters through the registry (an import by name); Ansiballz only
    ships module_utils named in import statements, which _bundled_adapters provides."""
    tree = ast.parse(inspect.getsource(primitives._bundled_adapters))
    named = {alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) for alias in node.names}
    shipped = {module for cloud, (module, _cls) in registry.ADAPTERS.items() if "." not in module}
    assert shipped <= named, "add %s to primitives._bundled_adapters" % sorted(shipped - named)
