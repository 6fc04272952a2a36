"""The launch machine's rules that mutation testing (make mutation, issue 30) found no test
pinning, on launch.py's first part: what a journalled state owns (owned_targets, which
``down`` and every compensation start from), how a cancel and an exhausted retry budget map
each state, why a resumed attempt counts as one that may have made something (a Credentials
error then still compensates), where a Credentials error may have left an instance (Leaked
or not), the note a user reads in the journal for each offer left, the SSH login's backoff,
the host key alias ``remove_vm`` forgets, and a search journalled with every offer in an
attempt state.

Each test runs the REAL executor and the real launch / teardown machines on a tmp journal
against scripted fake clouds (tests/fakes/scripted_provider.py); waits advance a fake clock.
"""

from __future__ import annotations

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.executor import CancelToken
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    BlockScope, ErrorKind, Location, Offer, ProviderError, Status,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import launch, ssh, teardown
from ansible_collections.gpuprov.cloud.tests.fakes.scripted_provider import (
    ScriptedProvider, World, at, kind_of, offer,
)

A, B = "fakea", "fakeb"
LOC_A1 = Location(A, "r1", "r1-a")
LOC_A1B = Location(A, "r1", "r1-b")


class Crash(BaseException):
    """The controller dies: nothing after the raise point runs (no commit)."""


def crash_leaving(kind):
    """before_commit hook: die right before the first transition out of ``kind`` is committed."""
    left = {"n": 1}

    def hook(old, new):
        if old["kind"] == kind and left["n"] > 0:
            left["n"] -= 1
            raise Crash("killed leaving %s for %s" % (kind, new["kind"]))
    return hook


def crash_waiting_in(w, kind):
    """A wait hook: the controller dies at the first wait the run spends in ``kind``."""
    def on_wait(seconds):
        if kind_of(w.row().label) == kind:
            raise Crash("killed while waiting in %s" % kind)
    return on_wait


def err(kind, msg="scripted", block=None):
    return ProviderError(kind, msg, block)


def two_zone_cloud(**kw):
    return ScriptedProvider(A, [offer(A, "r1", zone="r1-a"), offer(A, "r1", zone="r1-b")], **kw)


def notes_of(w, frm, to):
    """The notes of the committed transitions from kind ``frm`` to kind ``to``."""
    return [e["note"] for e in w.events()
            if e["event"] == "transition" and kind_of(e["from"]) == frm and kind_of(e["to"]) == to]


def events_since_resume(w):
    events = w.events()
    resumed = [i for i, e in enumerate(events) if e["event"] == "resume"]
    assert resumed, "the run did not resume"
    return events[resumed[-1]:]


def failing_tables(w, error):
    """The journal cannot make the search tables (a full disk, a locked database): every first
    step of a run fails with ``error``."""
    def ensure_tables(tables):
        raise error
    w.journal.ensure_tables = ensure_tables


def leak_by_failing_delete(tmp_path):
    p = ScriptedProvider(A, [offer(A, "r1", zone="r1-a")])
    p.boot(pending=1, then=Status.FAILED, reason="GPU fell off the bus", times=1)
    p.fail("delete", err(ErrorKind.TRANSIENT, "api 503"), times=None)
    w = World(tmp_path, [p], teardown_attempts=3)
    out = w.launch()
    assert out.state["kind"] == "Leaked"
    return p, w, out


# --- what a journalled state owns (down and every compensation start from it) -------------

def test_nothing_journalled_owns_nothing_and_a_teardown_without_targets_owns_nothing():
    assert launch.owned_targets(None, None) == []
    assert launch.owned_targets({"kind": "Done", "vm_name": "vm1", "targets": [], "reason": "down requested"},
                                teardown.TeardownMachine.KIND) == []


def test_a_cancel_before_anything_was_made_aborts_owning_nothing(tmp_path):
    p = two_zone_cloud()
    w = World(tmp_path, [p])
    token = CancelToken(w.clock)
    token.request()

    out = w.launch(cancel=token)

    # The result names what may still bill: an empty list, never a missing one.
    assert out.state == {"kind": "Aborted", "reason": "cancelled by the user", "targets": []}
    assert launch.owned_targets(w.row().state, w.row().kind) == []
    assert sum(p.calls.values()) == 0


def test_down_after_a_run_killed_while_reconciling_removes_the_vm_it_was_checking(tmp_path):
    p = two_zone_cloud()
    w = World(tmp_path, [p])
    iid = w.launch().state["vm"]["instance_id"]
    with pytest.raises(Crash):
        w.launch(before_commit=crash_leaving("Reconciling"))
    assert kind_of(w.row().label) == "Reconciling"

    down = w.down()

    # Reconciling owns what the state before it owned: the Ready VM.
    assert down.state["kind"] == "Done"
    assert down.state["targets"] == [{"location": LOC_A1.to_dict(), "instance_ids": [iid], "created": True}]
    assert iid in p.gone
    w.assert_clean()


def test_down_after_a_run_killed_while_rechecking_a_reused_vm_removes_it(tmp_path):
    p = two_zone_cloud()
    w = World(tmp_path, [p])
    iid = w.launch().state["vm"]["instance_id"]
    w.ssh.default = launch.SshNotReady("refused")
    w.clock.on_wait = crash_waiting_in(w, "Connecting")
    with pytest.raises(Crash):
        w.launch()
    w.clock.on_wait = None
    assert w.row().state["reused"] is True and w.row().state["search"] is None

    down = w.down()

    assert down.state["kind"] == "Done"
    assert down.state["targets"] == [{"location": LOC_A1.to_dict(), "instance_ids": [iid], "created": True}]
    assert p.ops("delete") == [(str(LOC_A1), (iid,))]
    w.assert_clean()


def test_down_after_a_launch_that_compensated_and_aborted_calls_no_cloud(tmp_path):
    p = two_zone_cloud()
    w = World(tmp_path, [p])
    w.ssh.default = launch.HostKeyMismatch("offered SHA256:other")
    out = w.launch()
    assert out.state["kind"] == "Aborted" and out.state["search"]["offers"]   # the whole search is kept
    calls = dict(p.calls)

    down = w.down()

    # The attempt was compensated: its offer's location is no longer owned.
    assert launch.owned_targets(out.state, "launch") == []
    assert down.state["kind"] == "Done" and down.state["targets"] == []
    assert dict(p.calls) == calls


# --- a resumed attempt may have made something -----------------------------------------------

def test_credentials_refused_on_a_resumed_prepare_still_remove_what_the_killed_run_made(tmp_path):
    p = two_zone_cloud()
    w = World(tmp_path, [p])
    with pytest.raises(Crash):
        w.launch(before_commit=crash_leaving("Preparing"))    # prepare made the security group
    assert kind_of(w.row().label) == "Preparing" and p.side_resources("vm1")
    p.fail("prepare", err(ErrorKind.CREDENTIALS, "key revoked"))

    out = w.launch()

    assert out.resumed and out.state["kind"] == "Aborted" and out.state["reason"] == "key revoked"
    resumed = [(kind_of(e["from"]), kind_of(e["to"])) for e in events_since_resume(w) if e["event"] == "transition"]
    assert resumed[0] == ("Preparing", "Compensating/Requesting")
    assert p.ops("cleanup") == [(str(LOC_A1),)]
    w.assert_clean()


def test_a_resumed_wait_for_the_next_round_plans_again_without_a_failed_attempt(tmp_path):
    p = ScriptedProvider(A, [])
    w = World(tmp_path, [p], retry_until_up=True)
    w.clock.on_wait = crash_waiting_in(w, "Exhausted")
    with pytest.raises(Crash):
        w.launch()
    w.clock.on_wait = None
    assert w.row().state["kind"] == "Exhausted" and w.row().state["search"]["offers"] == []
    p.offers = [offer(A, "r1")]

    out = w.launch()

    assert out.resumed and out.state["kind"] == "Ready" and out.state["search"]["round"] == 1
    assert not [e for e in events_since_resume(w) if e["event"] == "retry"]


def test_a_resumed_recheck_of_a_reused_vm_logs_in_without_a_failed_attempt(tmp_path):
    p = two_zone_cloud()
    w = World(tmp_path, [p])
    iid = w.launch().state["vm"]["instance_id"]
    w.ssh.default = launch.SshNotReady("refused")
    w.clock.on_wait = crash_waiting_in(w, "Connecting")
    with pytest.raises(Crash):
        w.launch()
    w.clock.on_wait = None
    w.ssh.default = None

    out = w.launch()

    assert out.resumed and out.state["kind"] == "Ready" and out.state["reused"]
    assert out.state["vm"]["instance_id"] == iid and p.calls["create"] == 1
    assert not [e for e in events_since_resume(w) if e["event"] == "retry"]


def test_credentials_refused_on_a_cloud_nothing_was_asked_of_are_not_compensated(tmp_path):
    pa = ScriptedProvider(A, [offer(A, "r1")])
    pa.fail("create", err(ErrorKind.CAPACITY, "none"))
    pb = ScriptedProvider(B, [offer(B, "r1")])
    pb.fail("prepare", err(ErrorKind.CREDENTIALS, "key revoked"))
    w = World(tmp_path, [pa, pb], clouds=[A, B])

    out = w.launch()

    # The first cloud's attempt was compensated; the second's refused prepare made nothing.
    assert out.state["kind"] == "Exhausted"
    assert pb.calls == {"plan": 1, "prepare": 1}
    assert w.path()[-2:] == ["Preparing", "Exhausted"]
    w.assert_clean()


def test_credentials_refused_in_a_later_round_are_not_compensated_for_the_earlier_round(tmp_path):
    p = ScriptedProvider(A, [offer(A, "r1")])
    p.fail("create", err(ErrorKind.CAPACITY, "none"))
    p.fail("prepare", err(ErrorKind.CREDENTIALS, "key revoked"), where=lambda o: p.calls["plan"] >= 2)
    w = World(tmp_path, [p], retry_until_up=True)

    out = w.launch()

    # Round 1 tries the same offer at the same cursor as round 0, under a new plan: a new attempt.
    assert out.state["kind"] == "Aborted" and out.state["reason"] == "key revoked"
    assert p.calls["plan"] == 2 and p.calls["prepare"] == 2
    assert p.ops("cleanup") == [("fakea/r1",)]                       # round 0's compensation only
    assert w.path()[-3:] == ["Planning", "Preparing", "Aborted"]
    w.assert_clean()


# --- where a Credentials error may have left an instance ------------------------------------

def test_credentials_refused_while_booting_and_after_leak_the_instance_by_its_id(tmp_path):
    p = two_zone_cloud()
    p.fail("observe", err(ErrorKind.CREDENTIALS, "token expired"), where=lambda loc: bool(p.created), times=None)
    w = World(tmp_path, [p])

    out = w.launch()

    iid = p.created[0]
    assert out.state["kind"] == "Leaked"
    assert out.state["targets"] == [{"location": LOC_A1.to_dict(), "instance_ids": [iid], "created": True}]
    assert notes_of(w, "Booting", "Compensating/Requesting") == ["Credentials: token expired"]
    assert iid in p.instances and p.calls["delete"] == 0


def test_credentials_refused_before_any_create_call_are_never_leaked(tmp_path):
    p = two_zone_cloud()
    p.fail("observe", err(ErrorKind.CREDENTIALS, "token expired"), times=None)   # Creating's, then every look
    w = World(tmp_path, [p])

    out = w.launch()

    assert out.state["kind"] == "Aborted" and out.state["reason"] == "token expired"
    assert "Leaked" not in w.path() and p.calls["create"] == 0
    assert notes_of(w, "Creating", "Compensating/Requesting") == ["Credentials: token expired"]
    compensated = notes_of(w, "Compensating/Requesting", "NextOffer")
    assert len(compensated) == 1 and "no instance was ever requested at fakea/r1/r1-a" in compensated[0]


def test_credentials_refused_on_a_retried_prepare_are_never_leaked(tmp_path):
    p = two_zone_cloud()
    p.fail("prepare", err(ErrorKind.TRANSIENT, "lost answer"), after=True)   # made its side resource
    p.fail("prepare", err(ErrorKind.CREDENTIALS, "key revoked"))
    p.fail("observe", err(ErrorKind.CREDENTIALS, "key revoked"), times=None)
    w = World(tmp_path, [p])

    out = w.launch()

    # Only prepare was called: at most a security group remains, which cannot bill.
    assert out.state["kind"] == "Aborted" and out.state["reason"] == "key revoked"
    assert "Leaked" not in w.path() and p.calls["create"] == 0
    assert notes_of(w, "Preparing", "Compensating/Requesting") == ["Credentials: key revoked"]
    compensated = notes_of(w, "Compensating/Requesting", "NextOffer")
    assert len(compensated) == 1 and "no instance was ever requested at fakea/r1/r1-a" in compensated[0]


# --- the note a user reads for each offer left -------------------------------------------------

def test_credentials_refused_on_a_first_prepare_say_why_the_cloud_was_left(tmp_path):
    pa, pb = two_zone_cloud(), ScriptedProvider(B, [offer(B, "r1")])
    pa.fail("prepare", err(ErrorKind.CREDENTIALS, "key revoked"))
    w = World(tmp_path, [pa, pb], clouds=[A, B])

    out = w.launch()

    assert out.state["kind"] == "Ready" and out.state["vm"]["location"]["cloud"] == B
    assert notes_of(w, "Preparing", "Preparing") == ["Credentials: key revoked; trying fakeb:r1:gpu.1x"]


def test_an_unavailable_offer_left_at_prepare_says_why(tmp_path):
    p = two_zone_cloud()
    p.fail("prepare", err(ErrorKind.UNAVAILABLE, "type not offered in r1-a"), where=at(zone="r1-a"))
    w = World(tmp_path, [p])

    out = w.launch()

    assert out.state["kind"] == "Ready" and out.state["vm"]["location"] == LOC_A1B.to_dict()
    assert notes_of(w, "Preparing", "Preparing") == [
        "Unavailable: type not offered in r1-a; trying fakea:r1:gpu.1x:r1-b"]


def test_a_refused_request_says_why_it_compensates_before_aborting(tmp_path):
    p = two_zone_cloud()
    p.fail("create", err(ErrorKind.INVALID_REQUEST, "bad image for this type"), after=True)
    w = World(tmp_path, [p])

    out = w.launch()

    assert out.state["kind"] == "Aborted" and out.state["reason"] == "bad image for this type"
    assert notes_of(w, "Creating", "Compensating/Requesting") == ["InvalidRequest: bad image for this type"]
    w.assert_clean()


def test_a_quota_refused_prepare_removes_what_it_made_and_says_why(tmp_path):
    p = two_zone_cloud()
    # The security group was made before the quota refused the attempt.
    p.fail("prepare", err(ErrorKind.QUOTA, "vCPU quota exceeded"), where=at(zone="r1-a"), after=True)
    w = World(tmp_path, [p])

    out = w.launch()

    assert out.state["kind"] == "Exhausted"                     # the region block skips r1-b
    assert notes_of(w, "Preparing", "Compensating/Requesting") == ["Quota: vCPU quota exceeded"]
    assert p.ops("cleanup") == [(str(LOC_A1),)] and p.calls["create"] == 0
    w.assert_clean()


def test_a_run_killed_while_compensating_journals_why_its_teardown_runs(tmp_path):
    p = two_zone_cloud()
    p.fail("create", err(ErrorKind.CAPACITY, "no H100 in r1-a"), where=at(zone="r1-a"))
    w = World(tmp_path, [p])
    with pytest.raises(Crash):
        w.launch(before_commit=crash_leaving("Compensating"))

    journalled = w.row().state
    assert journalled["kind"] == "Compensating" and journalled["then"] == "NextOffer"
    assert journalled["teardown"]["reason"] == journalled["reason"] == "no H100 in r1-a"
    out = w.launch()
    assert out.resumed and out.state["kind"] == "Ready" and out.state["vm"]["location"] == LOC_A1B.to_dict()
    w.assert_clean(keep=out.state["vm"]["instance_id"])


# --- retry budgets -------------------------------------------------------------------------------

def test_a_reused_vm_whose_ssh_check_keeps_raising_is_kept(tmp_path):
    p = two_zone_cloud()
    w = World(tmp_path, [p], step_attempts=3)
    iid = w.launch().state["vm"]["instance_id"]
    w.ssh.default = OSError("ssh: cannot run")     # not an SshNotReady: retried within the budget

    out = w.launch()

    assert out.state == {"kind": "Aborted", "reason": "SSH login kept failing: OSError: ssh: cannot run",
                         "vm": w.row().state["vm"], "targets": []}
    assert out.state["vm"]["instance_id"] == iid
    assert p.calls["delete"] == 0 and p.calls["cleanup"] == 0 and iid in p.instances


def test_a_cloud_whose_create_keeps_failing_is_left_for_the_next_cloud(tmp_path):
    pa, pb = two_zone_cloud(), ScriptedProvider(B, [offer(B, "r1")])
    pa.fail("create", err(ErrorKind.TRANSIENT, "api 503"), times=None)
    w = World(tmp_path, [pa, pb], clouds=[A, B], step_attempts=3)

    out = w.launch()

    assert out.state["kind"] == "Ready" and out.state["vm"]["location"]["cloud"] == B
    # The whole cloud is blocked: its second zone is never prepared.
    assert pa.ops("prepare") == [("fakea:r1:gpu.1x:r1-a",)] and pa.calls["create"] == 3
    assert out.state["search"]["history"] == [{
        "offer": "fakea:r1:gpu.1x:r1-a", "outcome": "Failed",
        "error": {"kind": "Failed", "msg": "fakea did not answer: Transient: api 503", "block": BlockScope.CLOUD}}]
    w.assert_clean(keep=out.state["vm"]["instance_id"])


def test_a_fresh_run_whose_first_step_keeps_failing_aborts_without_a_cloud_call(tmp_path):
    p = two_zone_cloud()
    w = World(tmp_path, [p], step_attempts=3)
    failing_tables(w, OSError("disk full"))

    out = w.launch()

    assert out.state == {"kind": "Aborted", "reason": "cannot reconcile the journalled VM: OSError: disk full",
                         "targets": []}
    assert sum(p.calls.values()) == 0


def test_a_resumed_next_offer_whose_step_keeps_failing_aborts_naming_the_error(tmp_path):
    p = two_zone_cloud()
    p.fail("create", err(ErrorKind.CAPACITY, "none"), where=at(zone="r1-a"))
    w = World(tmp_path, [p], step_attempts=3)
    with pytest.raises(Crash):
        w.launch(before_commit=crash_leaving("NextOffer"))
    assert w.row().state["kind"] == "NextOffer"
    failing_tables(w, OSError("disk full"))

    out = w.launch()

    assert out.resumed and out.state == {"kind": "Aborted", "reason": "OSError: disk full", "targets": []}
    assert p.calls["create"] == 1
    w.assert_clean()


# --- cancellation ------------------------------------------------------------------------------

def test_a_cancel_between_two_offers_aborts_without_trying_the_next(tmp_path):
    p = two_zone_cloud()
    p.fail("create", err(ErrorKind.CAPACITY, "none"), where=at(zone="r1-a"))
    w = World(tmp_path, [p])
    token = CancelToken(w.clock)

    def cancel_on_next_offer(old, new):
        if new["kind"] == "NextOffer":
            token.request()

    out = w.launch(before_commit=cancel_on_next_offer, cancel=token)

    assert out.cancelled and out.state["kind"] == "Aborted" and out.state["reason"] == "cancelled by the user"
    assert p.ops("create") == [("fakea:r1:gpu.1x:r1-a",)]
    assert w.transitions()[-1] == ("NextOffer", "Aborted")
    w.assert_clean()


def test_a_cancel_before_resolving_a_leak_keeps_the_leak_on_record_for_down(tmp_path):
    p, w, leaked = leak_by_failing_delete(tmp_path)
    token = CancelToken(w.clock)
    token.request()

    out = w.launch(cancel=token)

    assert out.state["kind"] == "Aborted" and out.state["reason"] == "cancelled by the user"
    assert out.state["targets"] == leaked.state["targets"]
    p.clear()                                        # the cloud API is back
    down = w.down()
    assert down.state["kind"] == "Done" and p.created[0] in p.gone
    w.assert_clean()


def test_a_cancel_during_a_compensation_that_aborts_anyway_keeps_its_reason(tmp_path):
    p = two_zone_cloud(gone_after=3)
    w = World(tmp_path, [p])
    w.ssh.default = launch.HostKeyMismatch("offered SHA256:other")
    token = CancelToken(w.clock)

    def on_wait(seconds):
        if w.row().label.startswith("Compensating"):
            token.request()
    w.clock.on_wait = on_wait

    out = w.launch(cancel=token)

    assert out.cancelled and out.state["kind"] == "Aborted"
    assert out.state["reason"].startswith("host key mismatch on ")   # why it aborted, not the cancel
    assert "cancelled by interrupt" not in [e["note"] for e in w.events() if e["event"] == "transition"]
    assert p.created[0] in p.gone
    w.assert_clean()


# --- SSH, host keys, an old journal's search --------------------------------------------------

def test_ssh_login_retries_back_off_to_two_seconds(tmp_path):
    p = ScriptedProvider(A, [offer(A, "r1")])
    w = World(tmp_path, [p], ssh_timeout=300.0)
    connecting = []

    def on_wait(seconds):
        if kind_of(w.row().label) == "Connecting":
            connecting.append(seconds)
    w.clock.on_wait = on_wait
    w.ssh.default = lambda ep: launch.SshNotReady("refused") if sum(connecting) < 120.0 else None

    out = w.launch()

    assert out.state["kind"] == "Ready"
    # 0.25 s first (a fresh sshd answers within a moment), at most 2 s apart however long it takes.
    assert connecting[0] == launch.SSH_POLL_FIRST_S and max(connecting) == 2.0
    assert connecting[-3:] == [2.0, 2.0, 2.0]


def test_the_host_key_pinned_for_a_launched_vm_is_forgotten_when_the_vm_is_removed(tmp_path):
    p = ScriptedProvider(A, [offer(A, "r1")])
    w = World(tmp_path, [p])
    vm = w.launch().state["vm"]
    files = ssh.ControllerFiles(str(tmp_path / "state"), str(tmp_path / "id"))
    (tmp_path / "state").mkdir()
    files.pin(vm["host_key_alias"], "ssh-ed25519", "AAAAkey")
    assert files.known_key(vm["host_key_alias"]) == ("ssh-ed25519", "AAAAkey")

    files.remove_vm("vm1")

    assert files.known_key(vm["host_key_alias"]) is None


def test_an_attempt_journalled_with_every_offer_in_its_state_resumes_at_its_offer(tmp_path):
    p = ScriptedProvider(A, [offer(A, "r1"), offer(A, "r2")])
    w = World(tmp_path, [p])
    offers = [o.to_dict() for o in p.offers]
    left = {"offer": Offer.from_dict(offers[0]).offer_id, "outcome": "Capacity",
            "error": {"kind": "Capacity", "msg": "none", "block": "offer"}}
    old_search = {"offers": offers, "cursor": 1, "round": 0, "blocked": [], "history": [left]}
    w.journal.begin("vm1", "launch", {"kind": "Preparing", "search": old_search}, "Preparing", False,
                    "old-run", 60.0, None)
    w.journal.release("vm1", "old-run")

    out = w.launch()

    assert out.resumed and out.state["kind"] == "Ready" and out.state["vm"]["location"]["region"] == "r2"
    assert p.ops("prepare") == [("fakea:r2:gpu.1x",)] and p.calls["create"] == 1
    assert out.state["search"]["history"] == [left]
    w.assert_clean(keep=out.state["vm"]["instance_id"])
