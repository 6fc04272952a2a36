"""The launch machine's attempt states, pinned where mutation testing (make mutation, issue 30)
found them unpinned: what Planning does with an outage, a refusal and an empty catalog; the
fences of Preparing and Creating; the instance Creating must still remove when the cloud
refuses the credentials; how Booting waits for, and judges, an instance (its grace, its first
wait, a classified failure, a preemption, the note each failure leaves); and what Connecting
records, in the Ready state, in the controller's files and in the projection status and
inventory read (zone, SSH login, host key, the login key's fingerprint, the Python interpreter),
for a new VM and for a reused one whose address changed. Real executor, tmp journal, fake clock.
"""

from __future__ import annotations

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.executor import LeaseLost
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    JOURNAL_ID_TAG, VM_NAME_TAG, BlockScope, Capabilities, ErrorKind, Location, Observed, ProviderError,
    SshEndpoint, Status,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import launch, projection
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm.ssh import public_key_fingerprint
from ansible_collections.gpuprov.cloud.tests.fakes.scripted_provider import (
    ScriptedProvider, World, kind_of, offer,
)

A, B = "fakea", "fakeb"
LOC_A1 = Location(A, "r1")


def err(kind, msg="scripted", block=None, retry_after=None):
    exc = ProviderError(kind, msg, block)
    exc.retry_after = retry_after
    return exc


class InterpreterCloud(ScriptedProvider):
    """A fake cloud whose adapter names the Python interpreter its images carry."""

    def __init__(self, *args, python_interpreter="/usr/bin/python3.10", **kwargs):
        super().__init__(*args, **kwargs)
        self.python_interpreter = python_interpreter

    def capabilities(self) -> Capabilities:
        base = super().capabilities()
        return Capabilities(poll_interval_s=base.poll_interval_s, boot_timeout_s=base.boot_timeout_s,
                            python_interpreter=self.python_interpreter)


class FakeFiles:
    """The controller's SSH files (known_hosts, ssh config): the key pinned per alias, the VMs written."""

    def __init__(self, pinned=None):
        self.pinned = dict(pinned or {})
        self.written = []

    def known_key(self, alias):
        return self.pinned.get(alias)

    def write_vm(self, vm):
        self.written.append(dict(vm))


def in_state(w, kind):
    """A ``where`` that matches while the run is in ``kind``."""
    return lambda subject: kind_of(w.row().label) == kind


def note_leaving(w, kind):
    """The note of the (first) transition out of ``kind``."""
    return next(e["note"] for e in w.events() if e["event"] == "transition" and kind_of(e["from"]) == kind)


def steal_lease(w):
    """Another run takes the key over (this one's lease expired while it waited)."""
    w.journal.release(w.name, w.journal.load(w.name).lease_owner)
    w.journal.acquire(w.name, "other:1:1:x", 120.0)


def projected(w):
    row = dict(projection.vm(w.journal, w.name))
    row.pop("updated_at")
    return row


# --- planning ------------------------------------------------------------------------------

def test_a_planning_outage_without_retry_after_is_retried_after_the_first_backoff(tmp_path):
    p = ScriptedProvider(A, [offer(A, "r1")])
    p.fail("plan", err(ErrorKind.TRANSIENT, "catalog 502"))
    w = World(tmp_path, [p])

    out = w.launch()

    assert out.state["kind"] == "Ready" and p.calls["plan"] == 2
    # The first backoff is 0.5 to 1 s (jittered): no delay of a Retry-After nobody asked for.
    assert 0.5 <= w.clock.waits[0] < 1.0


def test_a_planning_outage_of_every_cloud_waits_the_slowest_retry_after_any_asked(tmp_path):
    pa, pb = ScriptedProvider(A, [offer(A, "r1")]), ScriptedProvider(B, [offer(B, "r1")])
    pa.fail("plan", err(ErrorKind.TRANSIENT, "429", retry_after=7.0))
    pb.fail("plan", err(ErrorKind.TRANSIENT, "502"))      # this one asked for no delay
    w = World(tmp_path, [pa, pb])

    out = w.launch()

    assert out.state["kind"] == "Ready" and pa.calls["plan"] == 2 and pb.calls["plan"] == 2
    assert w.clock.waits[0] == 7.0


def test_a_cloud_that_plans_with_a_refusal_for_now_is_exhausted_not_aborted(tmp_path):
    p = ScriptedProvider(A, [offer(A, "r1")])
    p.fail("plan", err(ErrorKind.QUOTA, "GPU quota 0 in every region"), times=None)
    w = World(tmp_path, [p])

    out = w.launch()

    # A quota may be raised: retry_until_up may wait for it, so the search is Exhausted, not Aborted.
    assert out.state["kind"] == "Exhausted"
    assert out.state["reason"] == "no offer available: GPU quota 0 in every region"
    assert p.calls["prepare"] == 0


def test_a_catalog_with_no_offer_at_all_says_so(tmp_path):
    p = ScriptedProvider(A, [])
    w = World(tmp_path, [p])

    out = w.launch()

    assert out.state["kind"] == "Exhausted" and out.state["reason"] == "no offer available: no offers"


# --- fences: a run that lost its key makes nothing ------------------------------------------

def test_a_run_that_lost_its_lease_while_preparing_retries_does_not_prepare_again(tmp_path):
    p = ScriptedProvider(A, [offer(A, "r1")])
    p.fail("prepare", err(ErrorKind.TRANSIENT, "api 503"))
    w = World(tmp_path, [p])

    def on_wait(seconds):
        if kind_of(w.row().label) == "Preparing" and w.row().lease_owner != "other:1:1:x":
            steal_lease(w)
    w.clock.on_wait = on_wait

    with pytest.raises(LeaseLost):
        w.launch()

    assert p.calls["prepare"] == 1 and p.calls["create"] == 0


def test_a_run_that_lost_its_lease_in_creating_does_not_create(tmp_path):
    p = ScriptedProvider(A, [offer(A, "r1")])
    w = World(tmp_path, [p])

    def lose_the_lease_while_observing(location, name):
        steal_lease(w)
        return []
    p.script("observe", lose_the_lease_while_observing, where=in_state(w, "Creating"))

    with pytest.raises(LeaseLost):
        w.launch()

    assert p.calls["create"] == 0 and p.created == []


# --- creating: refused credentials never leave an instance ----------------------------------

def test_a_half_made_instance_whose_removal_is_refused_is_removed_by_the_compensation(tmp_path):
    p = ScriptedProvider(A, [offer(A, "r1")])
    w = World(tmp_path, [p])
    broken = p.spawn("vm1", LOC_A1, status=Status.FAILED,
                     tags={VM_NAME_TAG: "vm1", JOURNAL_ID_TAG: w.journal.journal_id})
    p.fail("delete", err(ErrorKind.CREDENTIALS, "token expired"))   # Creating's delete of it only

    out = w.launch()

    assert out.state["kind"] == "Aborted" and out.state["reason"] == "token expired"
    assert p.calls["create"] == 0
    assert p.ops("delete") == [(str(LOC_A1), (broken,)), (str(LOC_A1), (broken,))]
    assert broken in p.gone
    w.assert_clean()


def test_a_half_made_instance_the_cloud_will_not_let_us_remove_is_reported_leaked(tmp_path):
    p = ScriptedProvider(A, [offer(A, "r1")])
    w = World(tmp_path, [p])
    broken = p.spawn("vm1", LOC_A1, status=Status.FAILED,
                     tags={VM_NAME_TAG: "vm1", JOURNAL_ID_TAG: w.journal.journal_id})
    p.fail("delete", err(ErrorKind.CREDENTIALS, "token expired"))
    p.fail("observe", err(ErrorKind.CREDENTIALS, "token expired"), times=None,
           where=lambda loc: kind_of(w.row().label).startswith("Compensating"))

    out = w.launch()

    # Creating saw an instance of ours there: it may bill, so the run says where, never a silent Aborted.
    assert out.state["kind"] == "Leaked"
    assert out.state["targets"] == [{"location": LOC_A1.to_dict(), "instance_ids": [], "created": True}]
    assert broken in p.instances and p.calls["create"] == 0


def test_a_create_refused_after_it_made_the_instance_removes_it(tmp_path):
    p = ScriptedProvider(A, [offer(A, "r1")])
    p.fail("create", err(ErrorKind.CREDENTIALS, "token expired"), after=True)
    w = World(tmp_path, [p])

    out = w.launch()

    assert out.state["kind"] == "Aborted" and out.state["reason"] == "token expired"
    assert p.calls["create"] == 1 and p.created[0] in p.gone
    w.assert_clean()


def test_credentials_refused_by_creatings_first_look_are_never_reported_leaked(tmp_path):
    p = ScriptedProvider(A, [offer(A, "r1")])
    # The cloud refuses every look from now on: nothing was created, so nothing may be reported Leaked.
    p.fail("observe", err(ErrorKind.CREDENTIALS, "token expired"), times=None)
    w = World(tmp_path, [p])

    out = w.launch()

    assert out.state["kind"] == "Aborted" and out.state["reason"] == "token expired"
    assert "Leaked" not in w.path()
    assert p.calls["create"] == 0


def test_the_journal_tells_an_adopted_instance_from_a_created_one(tmp_path):
    p = ScriptedProvider(A, [offer(A, "r1")])
    w = World(tmp_path, [p])
    booting = []

    def record(old, new):
        if new["kind"] == "Booting":
            booting.append(new["adopted"])
    w.launch(before_commit=record)
    (tmp_path / "second").mkdir()
    adopter = World(tmp_path / "second", [ScriptedProvider(A, [offer(A, "r1")])])
    q = adopter.providers[A]
    q.spawn("vm1", LOC_A1, tags={VM_NAME_TAG: "vm1", JOURNAL_ID_TAG: adopter.journal.journal_id})
    adopter.launch(before_commit=record)

    assert booting == [False, True]
    assert q.calls["create"] == 0


# --- booting -------------------------------------------------------------------------------

def test_an_unavailable_answer_while_booting_still_removes_the_instance(tmp_path):
    p = ScriptedProvider(A, [offer(A, "r1"), offer(A, "r2")])
    w = World(tmp_path, [p])
    p.fail("observe", err(ErrorKind.UNAVAILABLE, "region draining"), where=in_state(w, "Booting"))

    out = w.launch()

    assert out.state["kind"] == "Ready" and out.state["vm"]["location"]["region"] == "r2"
    assert p.created[0] in p.gone and p.ops("delete")[0] == (str(LOC_A1), (p.created[0],))
    w.assert_clean(keep=out.state["vm"]["instance_id"])


@pytest.mark.parametrize("boot_timeout, grace", [(40.0, 10.0), (400.0, 60.0)])
def test_an_unlisted_instance_is_declared_vanished_exactly_when_its_grace_ends(tmp_path, boot_timeout, grace):
    p = ScriptedProvider(A, [offer(A, "r1"), offer(A, "r2")], boot_timeout_s=boot_timeout, poll_interval_s=0.5)
    w = World(tmp_path, [p])
    looked = []

    def not_listed(location, name):
        looked.append(w.clock.now)
        return []
    p.script("observe", not_listed, times=None,
             where=lambda loc: loc.region == "r1" and len(p.created) == 1 and kind_of(w.row().label) == "Booting")

    out = w.launch()

    assert out.state["kind"] == "Ready" and out.state["vm"]["location"]["region"] == "r2"
    # The grace is min(60 s, a quarter of the boot timeout): looked at every 0.5 s until it ends, then left.
    assert looked[-1] - looked[0] == grace and looked[-2] - looked[0] == grace - 0.5
    assert out.state["search"]["history"][0]["error"]["msg"] == "instance vanished while booting"


def test_an_unlisted_instance_is_looked_at_again_after_the_clouds_own_first_wait(tmp_path):
    p = ScriptedProvider(A, [offer(A, "r1")], poll_interval_s=5.0, readiness_poll_first_s=0.2)
    w = World(tmp_path, [p])
    p.script("observe", lambda location, name: [], where=in_state(w, "Booting"))

    out = w.launch()

    assert out.state["kind"] == "Ready"
    assert w.clock.waits[0] == 0.2


def test_a_classified_error_on_an_instance_still_booting_is_not_a_failure(tmp_path):
    p = ScriptedProvider(A, [offer(A, "r1"), offer(A, "r2")])
    w = World(tmp_path, [p])

    def warned(location, name):
        return [Observed(p.created[0], Status.PENDING, "capacity is low", None, location,
                         journal_id=w.journal.journal_id, error_kind=ErrorKind.CAPACITY)]
    p.script("observe", warned, where=in_state(w, "Booting"))

    out = w.launch()

    # Only a Failed or Stopped instance ends the attempt as the cloud classified it.
    assert out.state["kind"] == "Ready" and out.state["vm"]["instance_id"] == p.created[0]
    assert p.calls["create"] == 1 and p.calls["delete"] == 0


def test_a_classified_boot_failure_blocks_the_scope_the_cloud_named_and_says_so(tmp_path):
    p = ScriptedProvider(A, [offer(A, "r1", "t1"), offer(A, "r1", "t2"), offer(A, "r2", "t1")])
    w = World(tmp_path, [p])

    def failed(location, name):
        return [Observed(p.created[0], Status.FAILED, None, None, location, journal_id=w.journal.journal_id,
                         error_kind=ErrorKind.CAPACITY, error_block=BlockScope.REGION)]
    p.script("observe", failed, where=lambda loc: loc.region == "r1" and kind_of(w.row().label) == "Booting")

    out = w.launch()

    msg = "instance failed while booting: no reason given"
    assert out.state["kind"] == "Ready" and out.state["vm"]["location"]["region"] == "r2"
    assert out.state["search"]["history"][0] == {"offer": "fakea:r1:t1", "outcome": "Capacity",
                                                 "error": {"kind": "Capacity", "msg": msg, "block": "region"}}
    # A capacity error blocks its offer by default; the cloud said the whole region.
    assert p.ops("create") == [("fakea:r1:t1",), ("fakea:r2:t1",)]
    assert note_leaving(w, "Booting") == msg
    w.assert_clean(keep=out.state["vm"]["instance_id"])


def test_a_failed_boot_without_a_reason_says_none_was_given(tmp_path):
    p = ScriptedProvider(A, [offer(A, "r1"), offer(A, "r2")])
    p.boot(pending=1, then=Status.FAILED, times=1)
    w = World(tmp_path, [p])

    out = w.launch()

    msg = "instance failed while booting: no reason given"
    assert out.state["kind"] == "Ready" and out.state["search"]["history"][0]["error"]["msg"] == msg
    assert note_leaving(w, "Booting") == msg
    w.assert_clean(keep=out.state["vm"]["instance_id"])


@pytest.mark.parametrize("status", [Status.STOPPED, Status.STOPPING, Status.TERMINATING])
def test_an_instance_going_away_while_booting_is_a_preemption_and_moves_on_at_once(tmp_path, status):
    p = ScriptedProvider(A, [offer(A, "r1"), offer(A, "r2")])
    p.boot(pending=1, then=status, times=1)
    w = World(tmp_path, [p])

    out = w.launch()

    msg = "instance %s while booting (preempted?)" % status.lower()
    assert out.state["kind"] == "Ready" and out.state["vm"]["location"]["region"] == "r2"
    assert out.state["search"]["history"][0] == {"offer": "fakea:r1:gpu.1x", "outcome": "Capacity",
                                                 "error": {"kind": "Capacity", "msg": msg, "block": "offer"}}
    assert note_leaving(w, "Booting") == msg
    # Not waited out to the boot timeout: the second offer starts within a few polls.
    assert w.clock.now - 1000.0 < 60.0
    w.assert_clean(keep=out.state["vm"]["instance_id"])


def test_a_boot_timeout_says_how_long_was_waited(tmp_path):
    p = ScriptedProvider(A, [offer(A, "r1"), offer(A, "r2")], boot_timeout_s=30.0)
    p.boot(pending=None, times=1)
    w = World(tmp_path, [p])

    out = w.launch()

    assert out.state["kind"] == "Ready" and out.state["vm"]["location"]["region"] == "r2"
    assert note_leaving(w, "Booting") == "boot timeout: not Running with an SSH endpoint after 30 s"


# --- connecting: what a Ready VM is recorded with -------------------------------------------

def test_a_new_vm_is_recorded_in_the_files_the_state_and_the_projection(tmp_path):
    p = InterpreterCloud(A, [offer(A, "r1", zone="r1-a")])
    w = World(tmp_path, [p])
    files = FakeFiles()
    w.ctx.files = files

    def pin_on_login(endpoint, alias_):
        files.pinned[alias_] = ("ssh-ed25519", "AAAAhostkey")   # the check pins the key it saw first
        return "SHA256:fp-%s" % endpoint.host
    w.ctx.ssh_check = pin_on_login

    out = w.launch()

    vm = out.state["vm"]
    iid = p.created[0]
    alias = launch.host_key_alias("vm1", Location(A, "r1", "r1-a").to_dict(), iid)
    host = "%s.%s.test" % (iid, A)
    key_fp = public_key_fingerprint(w.settings.spec.ssh_public_key)
    assert vm["host_key"] == {"type": "ssh-ed25519", "key": "AAAAhostkey"}
    assert vm["python_interpreter"] == "/usr/bin/python3.10" and vm["ssh_key_fingerprint"] == key_fp
    assert vm["ssh"] == {"host": host, "port": 22, "user": "ubuntu"} and vm["host_key_alias"] == alias
    # The controller's files get the VM with its pinned key (before the login key's fingerprint is added).
    assert files.written == [{k: v for k, v in vm.items() if k != "ssh_key_fingerprint"}]
    assert projected(w) == {
        "name": "vm1", "cloud": A, "region": "r1", "zone": "r1-a", "instance_id": iid,
        "instance_type": "gpu.1x", "gpu": "H100", "gpu_count": 1, "ssh_host": host, "ssh_port": 22,
        "ssh_user": "ubuntu", "host_key_alias": alias, "status": "running", "stage": "Ready",
        "detail": {"python_interpreter": "/usr/bin/python3.10", "ssh_key_fingerprint": key_fp,
                   "host_key": {"type": "ssh-ed25519", "key": "AAAAhostkey"}}}


def test_a_vm_without_a_pinned_key_is_written_without_one(tmp_path):
    p = ScriptedProvider(A, [offer(A, "r1")])
    w = World(tmp_path, [p])
    files = FakeFiles()
    w.ctx.files = files

    out = w.launch()

    assert "host_key" not in out.state["vm"] and len(files.written) == 1
    assert projected(w)["detail"]["host_key"] is None


def _placed(w, p, zone=None, user="ubuntu"):
    """Booting's look reports the instance where (and with the login) the cloud chose."""
    def observe(location, name):
        inst = p.instances[p.created[0]]
        return [Observed(inst.instance_id, Status.RUNNING, None, SshEndpoint(inst.host, 22, user),
                         Location(location.cloud, location.region, zone), journal_id=w.journal.journal_id)]
    p.script("observe", observe, where=in_state(w, "Booting"))


def test_the_zone_the_cloud_placed_an_instance_in_is_recorded_where_the_offer_named_none(tmp_path):
    p = ScriptedProvider(A, [offer(A, "r1")])
    w = World(tmp_path, [p])
    _placed(w, p, zone="r1-c")

    out = w.launch()

    assert out.state["kind"] == "Ready"
    assert out.state["vm"]["zone"] == "r1-c" and out.state["vm"]["location"] == LOC_A1.to_dict()
    assert projected(w)["zone"] == "r1-c"


def test_an_endpoint_without_a_user_logs_in_as_the_spec_user(tmp_path):
    p = ScriptedProvider(A, [offer(A, "r1")])
    w = World(tmp_path, [p])
    _placed(w, p, user=None)

    out = w.launch()

    vm = out.state["vm"]
    assert out.state["kind"] == "Ready" and vm["ssh"]["user"] == "ubuntu"
    assert w.ssh.calls == [(vm["ssh"]["host"], 22, "ubuntu", vm["host_key_alias"])]
    assert projected(w)["ssh_user"] == "ubuntu"


def test_a_reused_vm_is_recorded_at_the_address_and_login_the_cloud_reports_now(tmp_path):
    p = ScriptedProvider(A, [offer(A, "r1")])
    w = World(tmp_path, [p])
    iid = w.launch().state["vm"]["instance_id"]
    # Stopped and started behind our back: a new address, and an image that logs in as another user.
    p.script("observe", lambda location, name: [Observed(iid, Status.RUNNING, None, SshEndpoint("moved.test", 2222, "admin"),
                                                         location, journal_id=w.journal.journal_id)])

    out = w.launch()

    vm = out.state["vm"]
    assert out.state["kind"] == "Ready" and out.state["reused"] and vm["instance_id"] == iid
    assert vm["ssh"] == {"host": "moved.test", "port": 2222, "user": "admin"}
    assert w.ssh.calls[-1] == ("moved.test", 2222, "admin", vm["host_key_alias"])
    row = projected(w)
    assert (row["ssh_host"], row["ssh_port"], row["ssh_user"]) == ("moved.test", 2222, "admin")


def test_a_reused_vm_gets_the_interpreter_its_cloud_names_now(tmp_path):
    p = InterpreterCloud(A, [offer(A, "r1")], python_interpreter="/usr/bin/python3.8")
    w = World(tmp_path, [p])
    assert w.launch().state["vm"]["python_interpreter"] == "/usr/bin/python3.8"
    p.python_interpreter = "/usr/bin/python3.12"     # a newer collection names another one

    out = w.launch()

    assert out.state["reused"] and out.state["vm"]["python_interpreter"] == "/usr/bin/python3.12"
    assert projected(w)["detail"]["python_interpreter"] == "/usr/bin/python3.12"


@pytest.mark.parametrize("reused", [False, True])
@pytest.mark.parametrize("failure, reason", [
    (launch.HostKeyMismatch("offered SHA256:evil"), "host key mismatch on {host}:22: offered SHA256:evil"),
    (launch.SshNotReady("connection refused"), "SSH login failed for 20 s: connection refused"),
])
def test_a_failed_login_leaves_connecting_with_its_reason_as_the_note(tmp_path, reused, failure, reason):
    p = ScriptedProvider(A, [offer(A, "r1")])
    w = World(tmp_path, [p], ssh_timeout=20.0)
    if reused:
        w.launch()
    w.ssh.default = failure

    out = w.launch()

    host = "%s.%s.test" % (p.created[0], A)
    expected = reason.format(host=host)
    # A reused VM is kept (Aborted); a new one is compensated: Aborted for a wrong key, the next offer else.
    new_timeout = not reused and isinstance(failure, launch.SshNotReady)
    assert out.state["kind"] == ("Exhausted" if new_timeout else "Aborted")
    notes = [e["note"] for e in w.events() if e["event"] == "transition" and kind_of(e["from"]) == "Connecting"]
    assert notes[-1] == expected
    if reused:
        assert out.state["reason"] == expected and out.state["vm"]["instance_id"] == p.created[0]
    assert p.calls["create"] == 1


def test_the_zone_an_offer_named_is_kept_where_the_cloud_reports_none(tmp_path):
    p = ScriptedProvider(A, [offer(A, "r1", zone="r1-a")])
    w = World(tmp_path, [p])
    _placed(w, p, zone=None)

    out = w.launch()

    assert out.state["vm"]["zone"] == "r1-a" and projected(w)["zone"] == "r1-a"


# --- leaving an offer: what blocks the rest of the search -----------------------------------

def test_a_boot_failure_classified_without_a_scope_blocks_nothing_more(tmp_path):
    p = ScriptedProvider(A, [offer(A, "r1", "t1"), offer(A, "r1", "t2")])
    w = World(tmp_path, [p])

    def refused(location, name):
        return [Observed(p.created[0], Status.FAILED, "image not allowed", None, location,
                         journal_id=w.journal.journal_id, error_kind=ErrorKind.INVALID_REQUEST)]
    p.script("observe", refused, where=lambda loc: len(p.created) == 1 and kind_of(w.row().label) == "Booting")

    out = w.launch()

    # InvalidRequest has no default scope: the next offer, even of the same region, is still tried.
    assert out.state["kind"] == "Ready" and out.state["vm"]["instance_type"] == "t2"
    assert out.state["search"]["history"][0]["outcome"] == "InvalidRequest"
    assert out.state["search"]["blocked"] == []
    w.assert_clean(keep=out.state["vm"]["instance_id"])


def test_a_region_block_still_skips_its_offers_after_a_later_offer_is_left(tmp_path):
    offers = [offer(A, "r1", "t1"), offer(A, "r2", "t1"), offer(A, "r1", "t2"), offer(A, "r3", "t1")]
    p = ScriptedProvider(A, offers)
    p.fail("create", err(ErrorKind.QUOTA, "no quota in r1"), where=lambda o: o.region == "r1", times=None)
    p.fail("create", err(ErrorKind.CAPACITY, "no capacity in r2"), where=lambda o: o.region == "r2", times=None)
    w = World(tmp_path, [p])

    out = w.launch()

    assert out.state["kind"] == "Ready" and out.state["vm"]["location"]["region"] == "r3"
    assert p.ops("create") == [("fakea:r1:t1",), ("fakea:r2:t1",), ("fakea:r3:t1",)]
    w.assert_clean(keep=out.state["vm"]["instance_id"])


def test_offers_left_one_by_one_keep_the_journalled_search_small(tmp_path):
    p = ScriptedProvider(A, [offer(A, "r1", "t%d" % i) for i in range(4)])
    p.fail("create", err(ErrorKind.CAPACITY, "no capacity"), where=lambda o: o.instance_type != "t3", times=None)
    w = World(tmp_path, [p])
    blocked = []

    def record(old, new):
        if new["kind"] == "Preparing":
            blocked.append(new["search"]["blocked"])
    out = w.launch(before_commit=record)

    # An offer-scoped block skips only the offer already left: none is carried in the state.
    assert out.state["kind"] == "Ready" and out.state["vm"]["instance_type"] == "t3"
    assert blocked == [[], [], [], []]
