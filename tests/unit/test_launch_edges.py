"""The launch machine's edges that mutation testing (make mutation, issue 30) found no test
pinning: a cancel during Planning and during a new VM's SSH wait, a listing that lags a
create, a boot failure the cloud classified, an SSH check that keeps raising on a new VM,
the fence before removing a half-made instance, an outage of planning, and the boot grace.
Each test is the scenario in which the changed code breaks the promise (a VM left running,
a crash instead of compensation, a stuck run), run on the real executor and a fake clock.
"""

from __future__ import annotations

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.executor import CancelToken, LeaseLost
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    JOURNAL_ID_TAG, VM_NAME_TAG, BlockScope, ErrorKind, Observed, ProviderError, SshEndpoint, Status,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import launch
from ansible_collections.gpuprov.cloud.tests.fakes.scripted_provider import (
    ScriptedProvider, World, kind_of, offer,
)

A, B = "fakea", "fakeb"


def err(kind, msg="scripted", block=None):
    return ProviderError(kind, msg, block)


def cancel_when(w, token, kind):
    """Ask for a cancel at the first wait the run spends in ``kind`` (a Ctrl-C or a ``down``)."""
    def on_wait(seconds):
        if kind_of(w.row().label) == kind:
            token.request()
    w.clock.on_wait = on_wait


# --- cancellation --------------------------------------------------------------------------

def test_a_cancel_while_planning_retries_aborts_without_creating_anything(tmp_path):
    p = ScriptedProvider(A, [offer(A, "r1")])
    p.fail("plan", err(ErrorKind.TRANSIENT, "catalog 502"), times=2)
    w = World(tmp_path, [p])
    token = CancelToken(w.clock)
    cancel_when(w, token, "Planning")

    out = w.launch(cancel=token)

    assert out.cancelled and out.state["kind"] == "Aborted"
    assert out.state["reason"] == "cancelled by the user"
    assert p.calls["plan"] == 1 and p.calls["prepare"] == 0 and p.calls["create"] == 0
    assert w.transitions()[-1] == ("Planning", "Aborted")
    assert w.row().terminal
    w.assert_clean()


def test_a_cancel_while_a_new_vm_waits_for_ssh_deletes_it_and_aborts(tmp_path):
    p = ScriptedProvider(A, [offer(A, "r1"), offer(A, "r2")])
    w = World(tmp_path, [p])
    w.ssh.default = launch.SshNotReady("connection refused")
    token = CancelToken(w.clock)
    cancel_when(w, token, "Connecting")

    out = w.launch(cancel=token)

    assert out.state["kind"] == "Aborted" and out.state["reason"] == "cancelled by the user"
    iid = p.created[0]
    assert p.calls["create"] == 1 and iid in p.gone        # the new VM is not kept for a cancel
    assert ("Connecting", "Compensating/Requesting") in w.transitions()
    assert w.row().terminal and w.row().state["kind"] == "Aborted"
    w.assert_clean()


# --- booting -------------------------------------------------------------------------------

def test_an_instance_the_cloud_lists_late_is_waited_for_not_declared_vanished(tmp_path):
    p = ScriptedProvider(A, [offer(A, "r1"), offer(A, "r2")])
    # The first two listings after the create do not show it yet (a listing that lags creation).
    p.script("observe", lambda location, name: [], times=2, where=lambda loc: bool(p.created))
    w = World(tmp_path, [p])

    out = w.launch()

    assert out.state["kind"] == "Ready" and out.state["vm"]["instance_id"] == p.created[0]
    assert p.calls["create"] == 1 and p.calls["delete"] == 0
    assert [e for e in w.events() if e["event"] == "poll" and "not listed yet" in e["note"]]
    w.assert_clean(keep=p.created[0])


def test_an_instance_missing_past_the_grace_is_compensated_within_a_quarter_of_the_boot_timeout(tmp_path):
    p = ScriptedProvider(A, [offer(A, "r1"), offer(A, "r2")], boot_timeout_s=40.0, poll_interval_s=2.0)
    w = World(tmp_path, [p])
    # The first instance is never listed while the run boots it (its compensation sees it again).
    p.script("observe", lambda location, name: [], times=None,
             where=lambda loc: loc.region == "r1" and len(p.created) == 1 and kind_of(w.row().label) == "Booting")
    waited = {"booting": 0.0}

    def on_wait(seconds):
        if kind_of(w.row().label) == "Booting" and len(p.created) == 1:
            waited["booting"] += seconds
    w.clock.on_wait = on_wait

    out = w.launch()

    assert out.state["kind"] == "Ready" and out.state["vm"]["location"]["region"] == "r2"
    assert ("fakea:r1:gpu.1x", "Failed") in [(h["offer"], h["outcome"]) for h in out.state["search"]["history"]]
    reasons = [h["error"]["msg"] for h in out.state["search"]["history"]]
    assert "instance vanished while booting" in reasons
    # The grace is min(60 s, boot timeout / 4) = 10 s here: one poll interval past it at most.
    assert 0 < waited["booting"] <= 10.0 + 2.0


def _classified_failure(provider, status, kind, block):
    """An observe that reports the created instance as the cloud classified its failure."""
    def observe(location, name):
        return [Observed(provider.created[0], status, "no hosts left", None, location, error_kind=kind,
                         error_block=block)]
    return observe


@pytest.mark.parametrize("status", [Status.FAILED, Status.STOPPED])
def test_a_boot_failure_the_cloud_classified_blocks_as_it_said_and_moves_on(tmp_path, status):
    pa = ScriptedProvider(A, [offer(A, "r1", "t1"), offer(A, "r1", "t2"), offer(A, "r2", "t1")])
    pa.script("observe", _classified_failure(pa, status, ErrorKind.QUOTA, BlockScope.REGION), times=1,
              where=lambda loc: loc.region == "r1" and bool(pa.created))
    w = World(tmp_path, [pa])

    out = w.launch()

    assert out.state["kind"] == "Ready" and out.state["vm"]["location"]["region"] == "r2"
    search = out.state["search"]
    assert search["history"][0]["outcome"] == "Quota"
    assert search["history"][0]["error"]["msg"] == "instance %s while booting: no hosts left" % status.lower()
    # Blocked by region as the cloud classified it: r1's second type is never tried.
    assert pa.ops("create") == [("fakea:r1:t1",), ("fakea:r2:t1",)]
    assert [b["scope"] for b in search["blocked"]] == [BlockScope.REGION]
    assert pa.created[0] in pa.gone
    w.assert_clean(keep=out.state["vm"]["instance_id"])


def test_observed_keeps_the_classified_failure_through_a_journal_round_trip():
    observed = Observed("i-1", Status.FAILED, "no hosts", SshEndpoint("h", 22), None, journal_id="j",
                        error_kind=ErrorKind.CAPACITY, error_block=BlockScope.INSTANCE_TYPE)

    back = Observed.from_dict(observed.to_dict())

    assert back == observed and back.error_kind == ErrorKind.CAPACITY


# --- connecting ----------------------------------------------------------------------------

def test_an_ssh_check_that_keeps_raising_on_a_new_vm_compensates_and_tries_the_next_offer(tmp_path):
    p = ScriptedProvider(A, [offer(A, "r1"), offer(A, "r2")])
    w = World(tmp_path, [p])
    first_host = {}

    def broken_check(endpoint):
        # Not an SshNotReady: a bug or an OS error in the check itself, retried within the budget.
        if not first_host:
            first_host["host"] = endpoint.host
        return OSError("ssh: cannot run") if endpoint.host == first_host["host"] else None
    w.ssh.default = broken_check

    out = w.launch()

    assert out.state["kind"] == "Ready" and out.state["vm"]["location"]["region"] == "r2"
    assert p.created[0] in p.gone and p.calls["create"] == 2
    history = out.state["search"]["history"]
    assert history[0]["outcome"] == "Failed" and "ssh: cannot run" in history[0]["error"]["msg"]
    w.assert_clean(keep=out.state["vm"]["instance_id"])


# --- creating ------------------------------------------------------------------------------

def test_a_half_made_instance_is_not_removed_by_a_run_that_lost_its_lease(tmp_path):
    p = ScriptedProvider(A, [offer(A, "r1")])
    w = World(tmp_path, [p])
    broken = p.spawn("vm1", offer(A, "r1").location, status=Status.FAILED,
                     tags={VM_NAME_TAG: "vm1", JOURNAL_ID_TAG: w.journal.journal_id})
    taken = {}

    def lose_the_lease_after_observing(location, name):
        # Another run takes the key over while this one holds a half-made instance in Creating.
        w.journal.release(w.name, w.journal.load(w.name).lease_owner)
        w.journal.acquire(w.name, "other:1:1:x", 120.0)
        taken["by"] = w.journal.load(w.name).lease_owner
        return [Observed(broken, Status.FAILED, "half made", None, location, journal_id=w.journal.journal_id)]
    p.script("observe", lose_the_lease_after_observing, times=1, where=lambda loc: p.calls["prepare"] > 0)

    with pytest.raises(LeaseLost):
        w.launch()

    assert taken["by"] == "other:1:1:x" and p.calls["delete"] == 0 and p.calls["create"] == 0
    assert broken in p.instances


# --- planning ------------------------------------------------------------------------------

def test_retry_until_up_after_a_planning_outage_plans_again_instead_of_aborting(tmp_path):
    p = ScriptedProvider(A, [offer(A, "r1")])
    p.fail("plan", err(ErrorKind.TRANSIENT, "catalog 502"), times=3)
    w = World(tmp_path, [p], retry_until_up=True, step_attempts=3)

    out = w.launch()

    assert out.state["kind"] == "Ready"
    assert p.calls["plan"] == 4
    exhausted = [e for e in w.events() if e["event"] == "transition" and kind_of(e["to"]) == "Exhausted"]
    assert len(exhausted) == 1 and exhausted[0]["note"].startswith("retries exhausted after 3 attempts")
    assert w.path().count("Planning") == 2
    w.assert_clean(keep=out.state["vm"]["instance_id"])


# --- what the journal says at each step (the notes status, health and the progress lines show) ---

def notes(w):
    return [(kind_of(e["from"]), kind_of(e["to"]), e["note"]) for e in w.events() if e["event"] == "transition"]


def test_a_failover_is_told_step_by_step_in_the_journal(tmp_path):
    p = ScriptedProvider(A, [offer(A, "r1", zone="r1-a"), offer(A, "r1", zone="r1-b")])
    p.fail("create", err(ErrorKind.CAPACITY, "insufficient capacity"), where=lambda o: o.zone == "r1-a", after=True)
    w = World(tmp_path, [p])

    out = w.launch()

    first, second = p.created
    assert out.state["kind"] == "Ready" and out.state["search"]["round"] == 0
    assert notes(w) == [
        ("Reconciling", "Planning", "nothing to reuse; planning"),
        ("Planning", "Preparing", "2 offer(s) from fakea"),
        ("Preparing", "Creating", "prepared"),
        ("Creating", "Compensating/Requesting", "Capacity: insufficient capacity"),
        ("Compensating/Requesting", "Compensating/Requesting", "found fakea/r1/r1-a [%s]" % first),
        ("Compensating/Requesting", "Compensating/AwaitingGone", "deletion requested for fakea/r1/r1-a [%s]" % first),
        ("Compensating/AwaitingGone", "Compensating/CleaningUp", "all instances gone"),
        ("Compensating/CleaningUp", "NextOffer", "compensated; side resources removed"),
        ("NextOffer", "Preparing", "trying fakea:r1:gpu.1x:r1-b"),
        ("Preparing", "Creating", "prepared"),
        ("Creating", "Booting", "created %s" % second),
        ("Booting", "Connecting", "running at %s.fakea.test:22" % second),
        ("Connecting", "Ready", "SSH login OK as ubuntu"),
    ]


def test_a_compensation_whose_instance_never_goes_is_leaked_with_the_teardowns_reason_as_its_note(tmp_path):
    p = ScriptedProvider(A, [offer(A, "r1")], gone_after=None)
    p.fail("create", err(ErrorKind.CAPACITY, "none"), after=True)
    w = World(tmp_path, [p], teardown_timeout=30.0)

    out = w.launch()

    iid = p.created[0]
    assert out.state["kind"] == "Leaked"
    reason = "instances still present after 30 s: fakea/r1 [%s]" % iid
    assert out.state["reason"] == reason and notes(w)[-1] == ("Compensating/AwaitingGone", "Leaked", reason)


def test_a_reuse_whose_vm_is_gone_compensates_then_plans_round_zero_saying_so(tmp_path):
    p = ScriptedProvider(A, [offer(A, "r1")])
    w = World(tmp_path, [p])
    gone = w.launch().state["vm"]["instance_id"]
    p.vanish(gone)
    p.offers = []                              # and nothing is free now

    out = w.launch()

    assert out.state["kind"] == "Exhausted" and out.state["search"]["round"] == 0
    assert notes(w)[-5:] == [
        ("Reconciling", "Compensating/Requesting", "journalled instance %s is gone" % gone),
        ("Compensating/Requesting", "Compensating/AwaitingGone", "deletion requested for fakea/r1 [%s]" % gone),
        ("Compensating/AwaitingGone", "Compensating/CleaningUp", "all instances gone"),
        ("Compensating/CleaningUp", "Planning", "compensated; side resources removed; planning"),
        ("Planning", "Exhausted", "no offers")]


def test_retry_until_up_counts_its_rounds_in_the_search(tmp_path):
    p = ScriptedProvider(A, [offer(A, "r1")])
    p.fail("create", err(ErrorKind.CAPACITY, "none"), times=2)
    w = World(tmp_path, [p], retry_until_up=True)

    out = w.launch()

    assert out.state["kind"] == "Ready" and out.state["search"]["round"] == 2
    assert [n for _f, t, n in notes(w) if t == "Planning"][1:] == ["planning again (retry_until_up)"] * 2


def test_a_planning_outage_is_exhausted_with_an_empty_search(tmp_path):
    p = ScriptedProvider(A, [offer(A, "r1")], plan_error=err(ErrorKind.TRANSIENT, "catalog 502"))
    w = World(tmp_path, [p], step_attempts=2)

    out = w.launch()

    assert out.state == {"kind": "Exhausted", "reason": "planning failed: plan fakea: Transient: catalog 502",
                         "search": {"offers": [], "cursor": 0, "blocked": [], "history": [], "round": 0}}


# --- the pace of waits ---------------------------------------------------------------------

def waits_in(w, kind):
    """The list the run's waits in state ``kind`` are recorded in, as it goes."""
    seen = []

    def record(seconds):
        if kind_of(w.row().label) == kind:
            seen.append(seconds)
    w.clock.on_wait = record
    return seen


def test_a_new_vms_ssh_login_is_tried_again_after_a_quarter_second_then_less_often(tmp_path):
    p = ScriptedProvider(A, [offer(A, "r1")])
    w = World(tmp_path, [p])
    refusals = iter([launch.SshNotReady("connection refused")] * 3)
    w.ssh.default = lambda endpoint: next(refusals, None)
    seen = waits_in(w, "Connecting")

    out = w.launch()

    assert out.state["kind"] == "Ready"
    assert seen[0] == launch.SSH_POLL_FIRST_S == 0.25          # a fresh sshd answers within a moment
    assert all(s <= launch.SSH_POLL_MAX_S == 2.0 for s in seen) and len(seen) == 3


def test_a_throttled_create_waits_at_least_what_the_cloud_asked(tmp_path):
    p = ScriptedProvider(A, [offer(A, "r1")])
    throttled = ProviderError(ErrorKind.TRANSIENT, "429 Too Many Requests")
    throttled.retry_after = 45.0
    p.fail("create", throttled, times=1)
    w = World(tmp_path, [p])
    waits_in_creating = waits_in(w, "Creating")

    out = w.launch()

    assert out.state["kind"] == "Ready" and p.calls["create"] == 2
    assert waits_in_creating and waits_in_creating[0] >= 45.0
