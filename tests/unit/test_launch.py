"""The launch machine, driven by the REAL executor on a tmp journal, against scripted
fake clouds (tests/fakes/scripted_provider.py): failover, blocking scopes,
compensation, crash adoption, Leaked and its resolution, retry_until_up, reuse,
timeouts, cancellation and planning. No real sleeps: waits advance a fake clock.
"""

from __future__ import annotations

import itertools

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.executor import CancelToken
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import projection
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    BlockScope, ErrorKind, Location, ProviderError, Status,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import launch
from ansible_collections.gpuprov.cloud.tests.fakes.toy_machine import Crash   # the controller dies: no commit
from ansible_collections.gpuprov.cloud.tests.fakes.commit_hook import crash_at_commit
from ansible_collections.gpuprov.cloud.tests.fakes.scripted_provider import (
    ScriptedProvider, World, at, kind_of, offer,
)

A, B = "fakea", "fakeb"
LOC_A1 = Location(A, "r1", "r1-a")
LOC_A1B = Location(A, "r1", "r1-b")


def crash_leaving(kind, times=1):
    """before_commit hook: die right before the transition out of ``kind`` is committed."""
    left = {"n": times}

    def hook(old, new):
        if old["kind"] == kind and left["n"] > 0:
            left["n"] -= 1
            raise Crash("killed leaving %s for %s" % (kind, new["kind"]))
    return hook


def err(kind, msg="scripted", block=None):
    return ProviderError(kind, msg, block)


def two_zone_cloud(**kw):
    return ScriptedProvider(A, [offer(A, "r1", zone="r1-a"), offer(A, "r1", zone="r1-b")], **kw)


def live_ids(provider, name="vm1"):
    return sorted(i.instance_id for i in provider.live(name))


def history_outcomes(state):
    return [(h["offer"], h["outcome"]) for h in state["search"]["history"]]


# --- the happy path and its journal ------------------------------------------------------

def test_happy_path_journals_every_transition_in_order(tmp_path):
    p = ScriptedProvider(A, [offer(A, "r1", zone="r1-a"), offer(A, "r2")])
    w = World(tmp_path, [p])

    out = w.launch()

    assert out.state["kind"] == "Ready" and out.label == "Ready" and not out.resumed
    vm = out.state["vm"]
    assert vm["location"] == LOC_A1.to_dict()
    assert vm["instance_id"] == p.created[0] and live_ids(p) == [vm["instance_id"]]
    assert vm["ssh"] == {"host": p.instances[vm["instance_id"]].host, "port": 22, "user": "ubuntu"}
    assert vm["host_key_fingerprint"] == "SHA256:fp-%s" % vm["ssh"]["host"]
    assert vm["host_key_alias"] == launch.host_key_alias("vm1", LOC_A1.to_dict(), vm["instance_id"])
    assert w.ssh.calls == [(vm["ssh"]["host"], 22, "ubuntu", vm["host_key_alias"])]
    assert p.calls == {"plan": 1, "prepare": 1, "create": 1, "observe": 3}
    # Every transition, in order, with the offer in the attempt labels.
    assert w.path() == ["Reconciling", "Planning", "Preparing", "Creating", "Booting", "Connecting", "Ready"]
    events = w.events()
    assert events[0]["event"] == "begin" and events[0]["to"] == "Reconciling"
    trans = [e for e in events if e["event"] == "transition"]
    assert trans[1]["to"] == "Preparing (offer 1 of 2: fakea:r1:gpu.1x:r1-a)"
    assert trans[1]["note"] == "2 offer(s) from fakea"
    assert trans[3]["note"] == "created %s" % vm["instance_id"]
    assert [e["version"] for e in events if e["event"] in ("begin", "transition")] == list(range(1, 8))
    polls = [e for e in events if e["event"] == "poll"]
    assert polls and polls[0]["to"].startswith("Booting") and "Pending, no endpoint yet" in polls[0]["note"]
    # Journal row and user-facing projection.
    row = w.row()
    assert row.terminal and row.kind == "launch" and row.lease_owner is None
    projected = projection.vm(w.journal, "vm1")
    assert projected["status"] == "running" and projected["instance_id"] == vm["instance_id"]
    assert projected["region"] == "r1" and projected["zone"] == "r1-a" and projected["stage"] == "Ready"
    w.assert_clean(keep=vm["instance_id"])
    assert list(p.side_resources("vm1")) == [("vm1", str(LOC_A1))]


# --- failover and blocking ---------------------------------------------------------------

def test_capacity_on_first_offer_compensates_and_fails_over(tmp_path):
    p = two_zone_cloud()
    rule = p.fail("create", err(ErrorKind.CAPACITY, "no H100 in r1-a"), where=at(zone="r1-a"))
    w = World(tmp_path, [p])

    out = w.launch()

    assert rule.fired == 1
    assert out.state["kind"] == "Ready"
    assert out.state["vm"]["location"] == LOC_A1B.to_dict()
    # Compensation of offer 1: nothing was created, so no delete; its security group removed.
    assert p.ops("delete") == []
    assert p.ops("cleanup") == [(str(LOC_A1),)]
    assert ("vm1", str(LOC_A1)) not in p.side
    assert p.ops("create") == [("fakea:r1:gpu.1x:r1-a",), ("fakea:r1:gpu.1x:r1-b",)]
    search = out.state["search"]
    assert search["history"] == [{"offer": "fakea:r1:gpu.1x:r1-a", "outcome": "Capacity",
                                  "error": {"kind": "Capacity", "msg": "no H100 in r1-a", "block": "offer"}}]
    assert [b["offer_id"] for b in search["blocked"]] == ["fakea:r1:gpu.1x:r1-a"]
    assert search["cursor"] == 1
    assert w.path() == ["Reconciling", "Planning", "Preparing", "Creating", "Compensating/Requesting",
                        "Compensating/AwaitingGone", "Compensating/CleaningUp", "NextOffer", "Preparing",
                        "Creating", "Booting", "Connecting", "Ready"]
    w.assert_clean(keep=out.state["vm"]["instance_id"])


def test_capacity_after_the_instance_was_made_deletes_it_by_identity(tmp_path):
    p = two_zone_cloud()
    # The cloud made the instance, then answered "insufficient capacity".
    p.fail("create", err(ErrorKind.CAPACITY, "insufficient capacity"), where=at(zone="r1-a"), after=True)
    w = World(tmp_path, [p])

    out = w.launch()

    first = p.created[0]
    assert out.state["kind"] == "Ready" and out.state["vm"]["instance_id"] == p.created[1]
    assert first in p.gone
    assert p.ops("delete")[0] == (str(LOC_A1), (first,))
    assert history_outcomes(out.state) == [("fakea:r1:gpu.1x:r1-a", "Capacity")]
    w.assert_clean(keep=p.created[1])


def test_failover_across_two_clouds(tmp_path):
    pa = ScriptedProvider(A, [offer(A, "r1"), offer(A, "r2")])
    pb = ScriptedProvider(B, [offer(B, "eu-1", "b.h100")])
    pa.fail("create", err(ErrorKind.CAPACITY, "sold out"), times=None)
    w = World(tmp_path, [pa, pb], clouds=[A, B])

    out = w.launch()

    assert out.state["kind"] == "Ready"
    assert out.state["vm"]["location"] == {"cloud": B, "region": "eu-1", "zone": None}
    assert pa.calls["create"] == 2 and pb.calls["create"] == 1
    assert history_outcomes(out.state) == [("fakea:r1:gpu.1x", "Capacity"), ("fakea:r2:gpu.1x", "Capacity")]
    assert pa.ops("cleanup") == [("fakea/r1",), ("fakea/r2",)]
    assert w.transitions()[1][1] == "Preparing"
    assert "3 offer(s) from fakea, fakeb" in [e["note"] for e in w.events()]
    w.assert_clean(keep=out.state["vm"]["instance_id"])


def test_quota_blocks_every_offer_of_the_region_and_moves_to_the_next_region(tmp_path):
    pa = ScriptedProvider(A, [offer(A, "r1", "t1"), offer(A, "r1", "t2", zone="r1-c"), offer(A, "r2", "t1")])
    pb = ScriptedProvider(B, [offer(B, "r1", "t1")])
    # Search order: A r1 t1 (Quota) -> A r1 t2 (skipped) -> A r2 t1 (Capacity) -> B r1 t1 (Capacity).
    pa.fail("create", err(ErrorKind.QUOTA, "vCPU quota exceeded in r1"), where=at(region="r1"))
    pa.fail("create", err(ErrorKind.CAPACITY, "none in r2"), where=at(region="r2"))
    pb.fail("create", err(ErrorKind.CAPACITY, "none"))
    w = World(tmp_path, [pa, pb], clouds=[A, B])

    out = w.launch()

    # No prepare/create for the second r1 offer of cloud A.
    assert pa.ops("prepare") == [("fakea:r1:t1",), ("fakea:r2:t1",)]
    assert pa.ops("create") == [("fakea:r1:t1",), ("fakea:r2:t1",)]
    # The region block is per cloud: B's r1 is still tried (its capacity error is the last).
    assert pb.ops("prepare") == [("fakeb:r1:t1",)]
    assert out.state["kind"] == "Exhausted"   # every offer failed, no retry_until_up: terminal
    assert w.row().terminal
    search = out.state["search"]
    quota_block = [b for b in search["blocked"] if b["scope"] == BlockScope.REGION]
    assert quota_block == [{"scope": "region", "cloud": A, "region": "r1", "instance_type": "t1",
                            "offer_id": "fakea:r1:t1", "reason": "vCPU quota exceeded in r1"}]
    assert history_outcomes(out.state) == [("fakea:r1:t1", "Quota"), ("fakea:r2:t1", "Capacity"),
                                           ("fakeb:r1:t1", "Capacity")]
    w.assert_clean()


def test_quota_then_success_in_the_next_region(tmp_path):
    p = ScriptedProvider(A, [offer(A, "r1", "t1"), offer(A, "r1", "t2"), offer(A, "r2", "t1")])
    p.fail("create", err(ErrorKind.QUOTA, "quota"), where=at(region="r1"), times=None)
    w = World(tmp_path, [p])

    out = w.launch()

    assert out.state["kind"] == "Ready"
    assert out.state["vm"]["location"]["region"] == "r2"
    assert p.ops("prepare") == [("fakea:r1:t1",), ("fakea:r2:t1",)]
    assert p.calls["create"] == 2
    w.assert_clean(keep=out.state["vm"]["instance_id"])


def test_unavailable_from_prepare_moves_on_without_compensation(tmp_path):
    p = two_zone_cloud()
    p.fail("prepare", err(ErrorKind.UNAVAILABLE, "type not offered in r1-a"), where=at(zone="r1-a"))
    w = World(tmp_path, [p])

    out = w.launch()

    assert out.state["kind"] == "Ready" and out.state["vm"]["location"] == LOC_A1B.to_dict()
    # Nothing was made for offer 1: no delete, no cleanup, no compensation at all.
    assert p.calls["delete"] == 0 and p.calls["cleanup"] == 0
    assert p.ops("create") == [("fakea:r1:gpu.1x:r1-b",)]
    assert not any(k.startswith("Compensating") for k in w.path())
    # Nothing to undo after a refused prepare: the next offer's Preparing is the one write.
    assert w.path()[:4] == ["Reconciling", "Planning", "Preparing", "Preparing"]
    assert history_outcomes(out.state) == [("fakea:r1:gpu.1x:r1-a", "Unavailable")]
    assert out.state["search"]["blocked"][0]["scope"] == BlockScope.OFFER
    w.assert_clean(keep=out.state["vm"]["instance_id"])


def test_unavailable_from_create_removes_what_prepare_made(tmp_path):
    p = two_zone_cloud()
    p.fail("create", err(ErrorKind.UNAVAILABLE, "type withdrawn"), where=at(zone="r1-a"))
    w = World(tmp_path, [p])

    out = w.launch()

    assert out.state["kind"] == "Ready" and out.state["vm"]["location"] == LOC_A1B.to_dict()
    # The security group prepare made in r1-a must not outlive the attempt.
    w.assert_clean(keep=out.state["vm"]["instance_id"])


def test_an_adapter_block_override_widens_the_scope(tmp_path):
    p = ScriptedProvider(A, [offer(A, "r1", "t1", zone="r1-a"), offer(A, "r1", "t1", zone="r1-b"),
                             offer(A, "r1", "t2", zone="r1-a")])
    p.fail("create", err(ErrorKind.FAILED, "type unsupported in region", block=BlockScope.INSTANCE_TYPE))
    w = World(tmp_path, [p])

    out = w.launch()

    assert out.state["kind"] == "Ready"
    assert p.ops("create") == [("fakea:r1:t1:r1-a",), ("fakea:r1:t2:r1-a",)]


# --- crash between create and journal ----------------------------------------------------

def test_crash_between_create_and_journal_adopts_the_instance(tmp_path):
    p = two_zone_cloud()
    w = World(tmp_path, [p])

    with pytest.raises(Crash):
        w.launch(before_commit=crash_leaving("Creating"))

    row = w.row()
    assert kind_of(row.label) == "Creating" and not row.terminal
    assert row.lease_owner is None        # the lease is released on the way out
    assert p.calls["create"] == 1 and len(p.live("vm1")) == 1

    out = w.launch()

    assert out.resumed and out.state["kind"] == "Ready"
    assert p.calls["create"] == 1                         # never a second create
    assert live_ids(p) == [p.created[0]] == [out.state["vm"]["instance_id"]]
    events = w.events()
    assert any(e["event"] == "resume" for e in events)
    adopted = [e for e in events if e["event"] == "transition" and kind_of(e["from"]) == "Creating"]
    assert adopted[-1]["note"] == "adopted %s (created by an earlier attempt)" % p.created[0]
    assert w.path() == ["Reconciling", "Planning", "Preparing", "Creating", "Booting", "Connecting", "Ready"]
    w.assert_clean(keep=p.created[0])


def test_ambiguous_create_is_reconciled_on_the_retry(tmp_path):
    p = two_zone_cloud()
    # The instance was made but the response was lost (a timeout classified Transient).
    p.fail("create", err(ErrorKind.TRANSIENT, "read timeout"), after=True)
    w = World(tmp_path, [p])

    out = w.launch()

    assert out.state["kind"] == "Ready"
    assert p.calls["create"] == 1 and live_ids(p) == [out.state["vm"]["instance_id"]]
    assert out.state["vm"]["location"] == LOC_A1.to_dict()
    assert any(e["event"] == "retry" and "read timeout" in e["note"] for e in w.events())
    w.assert_clean(keep=out.state["vm"]["instance_id"])


def test_crash_leaving_preparing_reprepares_idempotently(tmp_path):
    p = two_zone_cloud()
    w = World(tmp_path, [p])
    with pytest.raises(Crash):
        w.launch(before_commit=crash_leaving("Preparing"))
    assert kind_of(w.row().label) == "Preparing"

    out = w.launch()

    assert out.state["kind"] == "Ready" and p.calls["prepare"] == 2 and p.calls["create"] == 1
    assert len(p.side_resources("vm1")) == 1
    w.assert_clean(keep=out.state["vm"]["instance_id"])


@pytest.mark.parametrize("scenario", ["plain", "failover"])
def test_a_crash_at_any_commit_point_resumes_to_one_vm(tmp_path, scenario):
    """Kill the controller before the n-th commit, for every n; the resumed run always ends
    Ready with exactly one instance and nothing leaked."""
    n = 0
    while True:
        p = two_zone_cloud()
        if scenario == "failover":
            p.fail("create", err(ErrorKind.CAPACITY, "gone"), where=at(zone="r1-a"), after=True)
        w = World(tmp_path / ("%s-%d" % (scenario, n)), [p])
        crashed = False
        try:
            w.launch(before_commit=crash_at_commit(n))
        except Crash:
            crashed = True
        out = w.launch()
        assert out.state["kind"] == "Ready", (n, out.label)
        instances = live_ids(p)
        assert instances == [out.state["vm"]["instance_id"]], n
        assert p.calls["create"] <= 2
        w.assert_clean(keep=instances[0])
        if not crashed:
            break
        n += 1
    # Every commit of the first run was a crash point (6 plain, 13 with the failover detour,
    # whose compensation first journals the ids it found by identity).
    assert n == {"plain": 6, "failover": 13}[scenario]


def test_the_vms_row_says_running_only_once_the_ready_state_is_committed(tmp_path):
    """The projection's Ready row is written by the Ready transition itself: a controller killed right before
    that commit leaves no row that calls the VM running, and the resumed run writes it with the state."""
    p = ScriptedProvider(A, [offer(A, "r1", zone="r1-a")])
    w = World(tmp_path, [p])
    with pytest.raises(Crash):
        w.launch(before_commit=crash_at_commit(5))   # Planning ... Connecting went through; Ready did not
    assert w.row().label.startswith("Connecting")
    before = projection.vm(w.journal, "vm1")
    assert before is None or before["status"] != "running", before
    out = w.launch()
    assert out.state["kind"] == "Ready"
    row = projection.vm(w.journal, "vm1")
    assert (row["status"], row["stage"], row["instance_id"]) == ("running", "Ready", out.state["vm"]["instance_id"])


# --- fatal errors after create -------------------------------------------------------------

def test_credentials_error_while_booting_compensates_blocks_the_cloud_then_aborts(tmp_path):
    p = two_zone_cloud()
    rule = p.fail("observe", err(ErrorKind.CREDENTIALS, "token expired"),
                  where=lambda loc: bool(p.live("vm1", loc)))
    w = World(tmp_path, [p])

    out = w.launch()

    assert rule.fired == 1
    assert out.state["kind"] == "Aborted" and w.row().terminal
    assert out.state["reason"] == "token expired"
    assert out.state["targets"] == []
    iid = p.created[0]
    assert p.ops("delete") == [(str(LOC_A1), (iid,))]     # an instance was made: compensated
    assert p.ops("cleanup") == [(str(LOC_A1),)]
    assert iid in p.gone and p.calls["create"] == 1   # the cloud is blocked: offer 2 is never tried
    assert w.transitions()[-2:] == [("Compensating/CleaningUp", "NextOffer"), ("NextOffer", "Aborted")]
    assert "Booting" in w.path()
    w.assert_clean()


def test_invalid_request_from_a_create_that_made_something_compensates_then_aborts(tmp_path):
    p = two_zone_cloud()
    p.fail("create", err(ErrorKind.INVALID_REQUEST, "bad image for this type"), after=True)
    w = World(tmp_path, [p])

    out = w.launch()

    assert out.state["kind"] == "Aborted" and out.state["reason"] == "bad image for this type"
    # The Creating state never learnt the id: the teardown found it by its identity.
    made = p.created[0]
    assert p.ops("delete") == [(str(LOC_A1), (made,))]
    assert made in p.gone and p.calls["create"] == 1
    w.assert_clean()


def test_credentials_from_the_first_prepare_leave_the_cloud_at_once_without_compensating(tmp_path):
    p = two_zone_cloud()
    p.fail("prepare", err(ErrorKind.CREDENTIALS, "key revoked"))
    w = World(tmp_path, [p])

    out = w.launch()

    assert out.state["kind"] == "Aborted" and out.state["reason"] == "key revoked"
    # One prepare, refused: nothing was made, so nothing is compensated, and nothing is retried.
    assert p.calls == {"plan": 1, "prepare": 1}
    assert w.path() == ["Reconciling", "Planning", "Preparing", "Aborted"]
    assert not [e for e in w.events() if e["event"] == "retry"]
    assert out.state["search"]["history"][-1]["error"]["block"] == BlockScope.CLOUD
    w.assert_clean()


def test_credentials_from_prepare_go_on_to_the_next_cloud(tmp_path):
    pa, pb = two_zone_cloud(), ScriptedProvider(B, [offer(B, "r1")])
    pa.fail("prepare", err(ErrorKind.CREDENTIALS, "key revoked"))
    w = World(tmp_path, [pa, pb], clouds=[A, B])

    out = w.launch()

    assert out.state["kind"] == "Ready" and out.state["vm"]["location"]["cloud"] == B
    assert pa.calls == {"plan": 1, "prepare": 1}      # fakea's second offer is blocked with it
    assert "Compensating/Requesting" not in w.path()
    assert history_outcomes(out.state)[0] == ("fakea:r1:gpu.1x:r1-a", "Credentials")


def test_credentials_from_a_retried_prepare_compensate_what_the_first_may_have_made(tmp_path):
    p = two_zone_cloud()
    p.fail("prepare", err(ErrorKind.TRANSIENT, "lost answer"), after=True)   # made its side resource
    p.fail("prepare", err(ErrorKind.CREDENTIALS, "key revoked"))
    w = World(tmp_path, [p])

    out = w.launch()

    assert out.state["kind"] == "Aborted" and out.state["reason"] == "key revoked"
    assert p.calls["prepare"] == 2 and p.ops("cleanup") == [(str(LOC_A1),)]
    assert p.calls["create"] == 0
    w.assert_clean()


def test_credentials_refused_before_the_create_call_compensate_only_side_resources(tmp_path):
    p = two_zone_cloud()
    p.fail("observe", err(ErrorKind.CREDENTIALS, "token expired"))   # Creating's observe, before create
    w = World(tmp_path, [p])

    out = w.launch()

    assert out.state["kind"] == "Aborted" and out.state["reason"] == "token expired"
    assert p.calls["create"] == 0
    assert p.ops("cleanup") == [(str(LOC_A1),)]    # prepare's side resource is removed
    assert "Leaked" not in w.path()                 # no create call: nothing can bill
    w.assert_clean()


def test_credentials_refused_after_the_create_call_are_compensated_and_never_leak_silently(tmp_path):
    p = two_zone_cloud()
    p.fail("create", err(ErrorKind.CREDENTIALS, "token expired"), after=True)   # made, then refused
    p.fail("observe", err(ErrorKind.CREDENTIALS, "token expired"),
           where=lambda loc: bool(p.live("vm1", loc)), times=None)
    w = World(tmp_path, [p])

    out = w.launch()

    # The cloud refuses every look: the run says where something may bill, for the next run to resolve.
    assert out.state["kind"] == "Leaked"
    assert out.state["targets"] == [{"location": LOC_A1.to_dict(), "instance_ids": [], "created": True}]
    assert live_ids(p) == [p.created[0]] and p.calls["create"] == 1


# --- failed teardown: Leaked, and how it is resolved ---------------------------------------

def _leak_by_failing_delete(tmp_path):
    p = ScriptedProvider(A, [offer(A, "r1", zone="r1-a")])
    p.boot(pending=1, then=Status.FAILED, reason="GPU fell off the bus", times=1)
    p.fail("delete", err(ErrorKind.TRANSIENT, "api 503"), times=None)
    w = World(tmp_path, [p], teardown_attempts=3)
    out = w.launch()
    return p, w, out


def test_delete_failing_past_the_budget_ends_in_leaked_naming_location_and_ids(tmp_path):
    p, w, out = _leak_by_failing_delete(tmp_path)

    iid = p.created[0]
    assert out.state["kind"] == "Leaked" and out.label == "Leaked" and w.row().terminal
    assert out.state["targets"] == [{"location": LOC_A1.to_dict(), "instance_ids": [iid], "created": True}]
    assert "api 503" in out.state["reason"] and "Requesting" in out.state["reason"]
    assert p.calls["delete"] == 3                    # teardown_attempts
    assert live_ids(p) == [iid]                      # it really is still there
    retries = [e for e in w.events() if e["event"] == "retry"]
    assert [r["note"].split(":")[0] for r in retries] == ["attempt 1/3 failed", "attempt 2/3 failed",
                                                          "attempt 3/3 failed"]
    assert w.transitions()[-1] == ("Compensating/Requesting", "Leaked")
    assert launch.owned_targets(w.row().state, w.row().kind) == out.state["targets"]


def test_the_next_run_after_leaked_compensates_first_then_launches(tmp_path):
    p, w, out = _leak_by_failing_delete(tmp_path)
    leaked = p.created[0]
    p.clear()                                        # the cloud API is back

    out = w.launch()

    assert out.state["kind"] == "Ready" and not out.resumed
    assert w.path(since_begin=True)[:6] == ["Reconciling", "Compensating/Requesting",
                                            "Compensating/AwaitingGone", "Compensating/CleaningUp",
                                            "Planning", "Preparing"]
    assert leaked in p.gone
    assert p.calls["create"] == 2 and live_ids(p) == [out.state["vm"]["instance_id"]] != [leaked]
    w.assert_clean(keep=out.state["vm"]["instance_id"])


def test_instance_that_never_goes_away_leaks_and_down_resolves_it(tmp_path):
    p = ScriptedProvider(A, [offer(A, "r1", zone="r1-a")], gone_after=None)
    p.boot(pending=1, then=Status.FAILED, reason="boot disk error", times=1)
    w = World(tmp_path, [p], teardown_timeout=60.0)

    out = w.launch()

    iid = p.created[0]
    assert out.state["kind"] == "Leaked"
    assert out.state["targets"] == [{"location": LOC_A1.to_dict(), "instance_ids": [iid], "created": True}]
    assert "still present after 60 s" in out.state["reason"]
    assert w.transitions()[-1] == ("Compensating/AwaitingGone", "Leaked")
    assert p.calls["delete"] == 1                    # Terminating: not re-requested while waiting

    p.gone_after = 1                                 # the cloud finally finishes deleting
    down = w.down()

    assert down.state["kind"] == "Done" and w.row().kind == "teardown" and w.row().terminal
    assert w.path(since_begin=True) == ["Requesting", "AwaitingGone", "CleaningUp", "Done"]
    assert down.state["targets"] == [{"location": LOC_A1.to_dict(), "instance_ids": [iid], "created": True}]
    w.assert_clean()

    # And a launch after the down starts afresh.
    again = w.launch()
    assert again.state["kind"] == "Ready"
    assert w.path(since_begin=True)[:3] == ["Reconciling", "Planning", "Preparing"]


def test_down_after_leaked_from_a_failing_delete(tmp_path):
    p, w, out = _leak_by_failing_delete(tmp_path)
    p.clear()

    down = w.down()

    assert down.state["kind"] == "Done"
    assert p.ops("delete")[-1] == (str(LOC_A1), (p.created[0],))
    w.assert_clean()


def test_a_leaked_compensation_that_fails_again_stays_leaked(tmp_path):
    p, w, out = _leak_by_failing_delete(tmp_path)

    again = w.launch()                               # delete still failing

    assert again.state["kind"] == "Leaked"
    assert again.state["targets"] == out.state["targets"]
    assert p.calls["create"] == 1                    # never plans past an unresolved leak


# --- retry_until_up -----------------------------------------------------------------------

def test_exhausted_without_retry_until_up_is_terminal(tmp_path):
    p = two_zone_cloud()
    p.fail("create", err(ErrorKind.CAPACITY, "none"), times=None)
    w = World(tmp_path, [p])

    out = w.launch()

    assert out.state["kind"] == "Exhausted" and w.row().terminal
    assert "every offer failed or was blocked (2 tried)" in out.state["reason"]
    assert p.calls["plan"] == 1 and p.calls["create"] == 2
    assert w.clock.waits == []        # nothing was ever made, so nothing was waited for
    w.assert_clean()


def test_retry_until_up_waits_and_plans_again_until_capacity_appears(tmp_path):
    p = two_zone_cloud()
    p.fail("create", err(ErrorKind.CAPACITY, "none"), times=4)   # two whole rounds fail
    w = World(tmp_path, [p], retry_until_up=True, exhausted_wait=30.0)

    out = w.launch()

    assert out.state["kind"] == "Ready"
    assert out.state["search"]["round"] == 2
    assert p.calls["plan"] == 3 and p.calls["create"] == 5
    path = w.path()
    assert path.count("Exhausted") == 2 and path.count("Planning") == 3
    # Exhausted is not terminal while retrying, and it waited exhausted_wait via Poll.
    assert [e["note"] for e in w.events() if e["to"] == "Exhausted" and e["event"] == "poll"][0].startswith(
        "all offers exhausted; planning again in 30 s")
    assert 30.0 in w.clock.waits
    assert any(e["note"] == "planning again (retry_until_up)" for e in w.events())
    w.assert_clean(keep=out.state["vm"]["instance_id"])


def test_retry_until_up_with_no_offers_at_all(tmp_path):
    p = ScriptedProvider(A, [])
    w = World(tmp_path, [p], retry_until_up=True)
    calls = {"n": 0}

    def offers_later(request):
        calls["n"] += 1
        return [offer(A, "r1")] if calls["n"] >= 3 else []
    p.script("plan", offers_later, times=None)

    out = w.launch()

    assert out.state["kind"] == "Ready" and out.state["search"]["round"] == 2
    assert w.path().count("Exhausted") == 2


# --- reuse --------------------------------------------------------------------------------

def test_second_launch_reuses_a_running_ready_vm(tmp_path):
    p = two_zone_cloud()
    w = World(tmp_path, [p])
    first = w.launch()
    iid = first.state["vm"]["instance_id"]

    second = w.launch()

    assert second.state["kind"] == "Ready" and second.state["reused"] is True
    assert second.state["vm"]["instance_id"] == iid
    assert w.path(since_begin=True) == ["Reconciling", "Connecting", "Ready"]
    assert p.calls["create"] == 1 and p.calls["prepare"] == 1 and p.calls["plan"] == 1
    assert p.calls["delete"] == 0
    assert len(w.ssh.calls) == 2 and w.ssh.calls[0][3] == w.ssh.calls[1][3]   # same host key alias
    w.assert_clean(keep=iid)


def test_reuse_when_the_journalled_vm_is_gone_compensates_and_plans_a_new_one(tmp_path):
    p = two_zone_cloud()
    w = World(tmp_path, [p])
    old = w.launch().state["vm"]["instance_id"]
    p.vanish(old)                                   # deleted in the console

    out = w.launch()

    assert out.state["kind"] == "Ready" and not out.state["reused"]
    assert out.state["vm"]["instance_id"] != old
    assert w.path(since_begin=True)[:6] == ["Reconciling", "Compensating/Requesting",
                                            "Compensating/AwaitingGone", "Compensating/CleaningUp",
                                            "Planning", "Preparing"]
    notes = [e["note"] for e in w.events() if e["event"] == "transition"]
    assert "journalled instance %s is gone" % old in notes
    assert p.calls["create"] == 2
    w.assert_clean(keep=out.state["vm"]["instance_id"])


def test_reuse_when_the_journalled_vm_is_stopped_replaces_it(tmp_path):
    p = two_zone_cloud()
    w = World(tmp_path, [p])
    old = w.launch().state["vm"]["instance_id"]
    p.set_status(old, Status.STOPPED)

    out = w.launch()

    assert out.state["kind"] == "Ready" and out.state["vm"]["instance_id"] != old
    assert old in p.gone and (str(LOC_A1), (old,)) in p.ops("delete")
    w.assert_clean(keep=out.state["vm"]["instance_id"])


def test_reused_vm_whose_ssh_fails_is_not_torn_down(tmp_path):
    p = two_zone_cloud()
    w = World(tmp_path, [p], ssh_timeout=20.0)
    vm = w.launch().state["vm"]
    w.ssh.default = launch.SshNotReady("connection refused")

    out = w.launch()

    assert out.state["kind"] == "Aborted"
    assert out.state["vm"]["instance_id"] == vm["instance_id"] and out.state["targets"] == []
    assert "SSH login failed for 20 s" in out.state["reason"]
    assert p.calls["delete"] == 0 and p.calls["cleanup"] == 0 and p.calls["create"] == 1
    assert live_ids(p) == [vm["instance_id"]]
    # The next run, once SSH works again, reuses the same VM.
    w.ssh.default = None
    again = w.launch()
    assert again.state["kind"] == "Ready" and again.state["reused"]
    assert again.state["vm"]["instance_id"] == vm["instance_id"] and p.calls["create"] == 1


def test_reused_vm_with_a_host_key_mismatch_is_kept(tmp_path):
    p = two_zone_cloud()
    w = World(tmp_path, [p])
    vm = w.launch().state["vm"]
    w.ssh.default = launch.HostKeyMismatch("offered SHA256:evil")

    out = w.launch()

    assert out.state["kind"] == "Aborted" and "host key mismatch" in out.state["reason"]
    assert out.state["vm"]["instance_id"] == vm["instance_id"]
    assert p.calls["delete"] == 0 and live_ids(p) == [vm["instance_id"]]
    # down still knows what to remove.
    assert launch.owned_targets(w.row().state, w.row().kind) == [
        {"location": LOC_A1.to_dict(), "instance_ids": [vm["instance_id"]], "created": True}]


def test_reconciling_fails_closed_when_the_journalled_vm_cannot_be_observed(tmp_path):
    p = two_zone_cloud()
    w = World(tmp_path, [p])
    vm = w.launch().state["vm"]
    p.fail("observe", err(ErrorKind.TRANSIENT, "api down"), times=None)

    out = w.launch()

    assert out.state["kind"] == "Aborted" and "cannot reconcile" in out.state["reason"]
    assert out.state["vm"]["instance_id"] == vm["instance_id"]
    assert p.calls["plan"] == 1 and p.calls["create"] == 1 and p.calls["delete"] == 0
    # Once the cloud answers again, the VM is reused.
    p.clear()
    assert w.launch().state["reused"] is True


# --- boot and SSH failures ------------------------------------------------------------------

def test_boot_timeout_compensates_and_tries_the_next_offer(tmp_path):
    p = two_zone_cloud(boot_timeout_s=120.0, poll_interval_s=5.0)
    p.boot(pending=None, where=at(zone="r1-a"))     # never leaves Pending
    w = World(tmp_path, [p])

    out = w.launch()

    slow = p.created[0]
    assert out.state["kind"] == "Ready" and out.state["vm"]["location"] == LOC_A1B.to_dict()
    assert slow in p.gone and (str(LOC_A1), (slow,)) in p.ops("delete")
    errors = [h["error"]["msg"] for h in out.state["search"]["history"]]
    assert errors == ["boot timeout: not Running with an SSH endpoint after 120 s"]
    # Polled on the executor's schedule: after 1 s first, backing off to the cloud's interval,
    # until time in Booting exceeded 120 s; then while the instance terminated and offer 2 booted.
    waits = w.clock.waits
    assert waits[0] == 1.0 and max(waits) == 5.0 and min(waits) == 1.0
    assert 120.0 < sum(waits) < 140.0
    w.assert_clean(keep=out.state["vm"]["instance_id"])


def test_boot_timeout_setting_overrides_the_cloud_default(tmp_path):
    p = two_zone_cloud(boot_timeout_s=900.0, poll_interval_s=5.0)
    p.boot(pending=None, then=Status.RUNNING, where=at(zone="r1-a"))
    w = World(tmp_path, [p], boot_timeout=30.0)

    out = w.launch()

    assert out.state["kind"] == "Ready"
    assert out.state["search"]["history"][0]["error"]["msg"].endswith("after 30 s")
    assert sum(w.clock.waits) < 60.0   # the 30 s timeout, not the cloud's 900 s


def test_running_without_an_endpoint_is_not_booted(tmp_path):
    p = two_zone_cloud()
    p.boot(pending=0, endpoint=False, where=at(zone="r1-a"))
    w = World(tmp_path, [p])

    out = w.launch()

    assert out.state["kind"] == "Ready" and out.state["vm"]["location"] == LOC_A1B.to_dict()
    assert "boot timeout" in out.state["search"]["history"][0]["error"]["msg"]
    assert any("Running, no endpoint yet" in (e["note"] or "") for e in w.events())


def test_failed_status_while_booting_compensates_and_tries_the_next_offer(tmp_path):
    p = two_zone_cloud()
    p.boot(pending=1, then=Status.FAILED, reason="xid 79", where=at(zone="r1-a"))
    w = World(tmp_path, [p])

    out = w.launch()

    assert out.state["kind"] == "Ready" and out.state["vm"]["location"] == LOC_A1B.to_dict()
    assert out.state["search"]["history"][0]["error"] == {
        "kind": "Failed", "msg": "instance failed while booting: xid 79", "block": "offer"}
    assert p.created[0] in p.gone
    w.assert_clean(keep=out.state["vm"]["instance_id"])


def test_preempted_while_booting_moves_on(tmp_path):
    p = two_zone_cloud()
    p.boot(pending=1, then=Status.STOPPED, where=at(zone="r1-a"))
    w = World(tmp_path, [p])

    out = w.launch()

    assert out.state["kind"] == "Ready" and out.state["vm"]["location"] == LOC_A1B.to_dict()
    assert out.state["search"]["history"][0]["outcome"] == "Capacity"
    w.assert_clean(keep=out.state["vm"]["instance_id"])


def test_instance_vanishing_while_booting_moves_on(tmp_path):
    p = two_zone_cloud(boot_timeout_s=120.0)
    p.boot(pending=None, where=at(zone="r1-a"))
    w = World(tmp_path, [p])
    w.clock.on_wait = lambda s: [p.vanish(i.instance_id) for i in p.live("vm1", LOC_A1)]

    out = w.launch()

    assert out.state["kind"] == "Ready" and out.state["vm"]["location"] == LOC_A1B.to_dict()
    assert out.state["search"]["history"][0]["error"]["msg"] == "instance vanished while booting"
    w.assert_clean(keep=out.state["vm"]["instance_id"])


def test_ssh_timeout_compensates_and_tries_the_next_offer(tmp_path):
    p = two_zone_cloud()
    w = World(tmp_path, [p], ssh_timeout=20.0)
    w.ssh.default = lambda ep: (launch.SshNotReady("connection refused")
                                if p.by_host(ep.host).location == LOC_A1 else None)

    out = w.launch()

    first = p.created[0]
    assert out.state["kind"] == "Ready" and out.state["vm"]["location"] == LOC_A1B.to_dict()
    assert first in p.gone
    msg = out.state["search"]["history"][0]["error"]["msg"]
    assert msg == "SSH login failed for 20 s: connection refused"
    assert len([c for c in w.ssh.calls if c[0] == "%s.%s.test" % (first, A)]) >= 10
    assert projection.vm(w.journal, "vm1")["instance_id"] == out.state["vm"]["instance_id"]
    w.assert_clean(keep=out.state["vm"]["instance_id"])


def test_ssh_that_comes_up_late_is_waited_for(tmp_path):
    p = two_zone_cloud()
    w = World(tmp_path, [p], ssh_timeout=20.0)
    tries = {"n": 0}

    def late(ep):
        tries["n"] += 1
        return launch.SshNotReady("refused") if tries["n"] < 4 else None
    w.ssh.default = late

    out = w.launch()

    assert out.state["kind"] == "Ready" and out.state["vm"]["location"] == LOC_A1.to_dict()
    assert tries["n"] == 4 and p.calls["create"] == 1


def test_host_key_mismatch_on_a_new_vm_compensates_then_aborts(tmp_path):
    p = two_zone_cloud()
    w = World(tmp_path, [p])
    w.ssh.default = launch.HostKeyMismatch("offered SHA256:other")

    out = w.launch()

    assert out.state["kind"] == "Aborted" and "host key mismatch" in out.state["reason"]
    assert "vm" not in out.state
    assert p.calls["create"] == 1 and p.created[0] in p.gone
    assert projection.vm(w.journal, "vm1") is None
    w.assert_clean()


def test_observe_transient_while_booting_is_retried(tmp_path):
    p = two_zone_cloud()
    p.fail("observe", err(ErrorKind.TRANSIENT, "throttled"), times=2, where=lambda loc: bool(p.live("vm1", loc)))
    w = World(tmp_path, [p])

    out = w.launch()

    assert out.state["kind"] == "Ready" and out.state["vm"]["location"] == LOC_A1.to_dict()
    assert len([e for e in w.events() if e["event"] == "retry"]) == 2


def test_observe_transient_past_the_budget_while_booting_moves_on(tmp_path):
    p = two_zone_cloud()
    booting = {"n": 0}

    def first_three_while_booting(loc):
        # Only Booting's observes of r1-a (an instance exists there, not yet deleted).
        if loc == LOC_A1 and any(not i.deleting for i in p.live("vm1", loc)):
            booting["n"] += 1
            return booting["n"] <= 3
        return False
    p.fail("observe", err(ErrorKind.TRANSIENT, "throttled"), times=None, where=first_three_while_booting)
    w = World(tmp_path, [p], step_attempts=3)

    out = w.launch()

    assert booting["n"] == 3 + 1       # three failures, then the compensation's observe
    assert out.state["kind"] == "Ready" and out.state["vm"]["location"] == LOC_A1B.to_dict()
    assert out.state["search"]["history"][0]["error"]["msg"] == "Transient: throttled"
    assert p.created[0] in p.gone
    w.assert_clean(keep=out.state["vm"]["instance_id"])


def test_sporadic_transient_errors_during_a_long_boot_do_not_exhaust_the_budget(tmp_path):
    p = ScriptedProvider(A, [offer(A, "r1")], boot_observes=14)
    flip = itertools.count()
    p.fail("observe", err(ErrorKind.TRANSIENT, "throttled"), times=6,
           where=lambda loc: bool(p.live("vm1", loc)) and next(flip) % 2 == 0)
    w = World(tmp_path, [p], step_attempts=5)

    out = w.launch()

    # Never more than one failure in a row: the boot must not be abandoned.
    assert out.state["kind"] == "Ready"
    assert p.calls["create"] == 1


# --- cancellation -------------------------------------------------------------------------

def test_cancel_while_booting_deletes_the_instance_and_aborts(tmp_path):
    p = two_zone_cloud(boot_observes=5)
    w = World(tmp_path, [p])
    token = CancelToken(w.clock)

    def on_wait(seconds):
        if kind_of(w.row().label) == "Booting":
            token.request()
    w.clock.on_wait = on_wait

    out = w.launch(cancel=token)

    assert out.cancelled and out.state["kind"] == "Aborted"
    assert out.state["reason"] == "cancelled by the user"
    iid = p.created[0]
    assert iid in p.gone and p.ops("delete") == [(str(LOC_A1), (iid,))]
    assert p.calls["create"] == 1                    # never moves on to offer 2
    trans = [e for e in w.events() if e["event"] == "transition"]
    cancel = [e for e in trans if e["note"] == "cancelled by interrupt"]
    assert len(cancel) == 1 and kind_of(cancel[0]["from"]) == "Booting"
    assert cancel[0]["to"] == "Compensating/Requesting"
    assert w.transitions()[-1] == ("Compensating/CleaningUp", "Aborted")
    w.assert_clean()


def test_cancel_during_a_failover_compensation_aborts_instead_of_the_next_offer(tmp_path):
    p = two_zone_cloud(gone_after=3)
    p.fail("create", err(ErrorKind.CAPACITY, "none"), where=at(zone="r1-a"), after=True)
    w = World(tmp_path, [p])
    token = CancelToken(w.clock)

    def on_wait(seconds):
        if w.row().label.startswith("Compensating"):
            token.request()
    w.clock.on_wait = on_wait

    out = w.launch(cancel=token)

    assert out.state["kind"] == "Aborted" and out.state["reason"] == "cancelled by the user"
    assert p.ops("create") == [("fakea:r1:gpu.1x:r1-a",)]
    assert w.row().state["kind"] == "Aborted"
    w.assert_clean()


def test_cancel_before_anything_was_made_aborts_without_cloud_calls(tmp_path):
    p = two_zone_cloud()
    w = World(tmp_path, [p])
    token = CancelToken(w.clock)
    token.request()

    out = w.launch(cancel=token)

    assert out.state["kind"] == "Aborted" and out.cancelled
    assert sum(p.calls.values()) == 0
    assert w.path() == ["Reconciling", "Aborted"]


def test_cancel_while_retry_until_up_waits_aborts(tmp_path):
    p = two_zone_cloud()
    p.fail("create", err(ErrorKind.CAPACITY, "none"), times=None)
    w = World(tmp_path, [p], retry_until_up=True)
    token = CancelToken(w.clock)

    def on_wait(seconds):
        if w.row().state["kind"] == "Exhausted":
            token.request()
    w.clock.on_wait = on_wait

    out = w.launch(cancel=token)

    assert out.state["kind"] == "Aborted" and out.state["reason"] == "cancelled by the user"
    assert w.row().terminal and p.calls["plan"] == 1
    assert w.transitions()[-1] == ("Exhausted", "Aborted")
    w.assert_clean()


def test_cancel_while_rechecking_a_reused_vm_keeps_it(tmp_path):
    p = two_zone_cloud()
    w = World(tmp_path, [p])
    iid = w.launch().state["vm"]["instance_id"]
    w.ssh.default = launch.SshNotReady("refused")
    token = CancelToken(w.clock)
    w.clock.on_wait = lambda seconds: token.request()

    out = w.launch(cancel=token)

    assert out.state["kind"] == "Aborted" and out.state["vm"]["instance_id"] == iid
    assert out.state["reason"] == "cancelled by the user" and out.state["targets"] == []
    assert w.path(since_begin=True) == ["Reconciling", "Connecting", "Aborted"]
    assert [e["note"] for e in w.events() if e["event"] == "transition"][-1] == "cancelled by interrupt"
    assert p.calls["delete"] == 0 and live_ids(p) == [iid]


def test_cancel_during_the_reuse_check_keeps_the_ready_vm(tmp_path):
    p = two_zone_cloud()
    w = World(tmp_path, [p])
    iid = w.launch().state["vm"]["instance_id"]
    token = CancelToken(w.clock)
    token.request()
    cancelled = w.launch(cancel=token)
    assert cancelled.state["kind"] == "Aborted"

    out = w.launch()

    assert out.state["kind"] == "Ready" and out.state["reused"]
    assert out.state["vm"]["instance_id"] == iid
    assert p.calls["create"] == 1 and p.calls["delete"] == 0


# --- planning -----------------------------------------------------------------------------

def test_every_cloud_invalid_request_aborts_naming_the_reasons(tmp_path):
    pa = ScriptedProvider(A, plan_error=err(ErrorKind.INVALID_REQUEST, "fakea has no B300"))
    pb = ScriptedProvider(B, plan_error=err(ErrorKind.INVALID_REQUEST, "fakeb has no B300"))
    w = World(tmp_path, [pa, pb], clouds=[A, B])

    out = w.launch()

    assert out.state["kind"] == "Aborted"
    assert out.state["reason"] == "fakea has no B300; fakeb has no B300"
    assert pa.calls["plan"] == 1 and pb.calls["plan"] == 1
    assert sum(pa.calls.values()) + sum(pb.calls.values()) == 2
    assert w.path() == ["Reconciling", "Planning", "Aborted"]
    assert [e["note"] for e in w.events() if e["event"] == "transition"][-1] == "no cloud can plan this request"


def test_a_cloud_without_credentials_is_left_before_planning_and_the_next_cloud_tried(tmp_path):
    no_key = err(ErrorKind.CREDENTIALS, "fakea: no credentials: set cloud_options.fakea.api_key", BlockScope.CLOUD)
    pa, pb = two_zone_cloud(), ScriptedProvider(B, [offer(B, "r1")])
    pa.fail("check_credentials", no_key, times=None)
    w = World(tmp_path, [pa, pb], clouds=[A, B])

    out = w.launch()

    assert out.state["kind"] == "Ready" and out.state["vm"]["location"]["cloud"] == B
    assert pa.checks["check_credentials"] == 1 and not pa.calls    # never planned nor called
    assert out.state["search"]["history"][0] == {"offer": A, "outcome": "skipped", "error": no_key.to_dict()}
    assert not [e for e in w.events() if e["event"] == "retry"]
    assert w.path() == ["Reconciling", "Planning", "Preparing", "Creating", "Booting", "Connecting", "Ready"]


def test_no_cloud_with_credentials_aborts_at_once_naming_each(tmp_path):
    pa, pb = two_zone_cloud(), ScriptedProvider(B, [offer(B, "r1")])
    pa.fail("check_credentials", err(ErrorKind.CREDENTIALS, "fakea: no credentials"), times=None)
    pb.fail("check_credentials", err(ErrorKind.CREDENTIALS, "fakeb: no credentials"), times=None)
    w = World(tmp_path, [pa, pb], clouds=[A, B], retry_until_up=True)

    out = w.launch()

    assert out.state["kind"] == "Aborted"
    assert out.state["reason"] == "fakea: no credentials; fakeb: no credentials"
    assert not pa.calls and not pb.calls
    assert w.path() == ["Reconciling", "Planning", "Aborted"]     # three events, no retry, no second round
    assert [e["event"] for e in w.events()] == ["begin", "transition", "transition"]


def test_the_recreate_plan_checks_credentials_first(tmp_path):
    pa = two_zone_cloud()
    w = World(tmp_path, [pa])
    iid = w.launch().state["vm"]["instance_id"]
    pb = ScriptedProvider(B, [offer(B, "r1")])
    pb.fail("check_credentials", err(ErrorKind.CREDENTIALS, "fakeb: no credentials"), times=None)
    w2 = World(tmp_path, [pa, pb], clouds=[B], recreate=True)

    out = w2.launch()

    assert out.state["kind"] == "Aborted" and "fakeb: no credentials" in out.state["reason"]
    assert out.state["vm"]["instance_id"] == iid and live_ids(pa) == [iid]   # the VM is kept
    assert not pb.calls


def test_credentials_refused_while_reconciling_fail_closed_at_once(tmp_path):
    p = two_zone_cloud()
    w = World(tmp_path, [p])
    iid = w.launch().state["vm"]["instance_id"]
    p.fail("observe", err(ErrorKind.CREDENTIALS, "token expired"), times=None)
    observed = p.calls["observe"]

    out = w.launch()

    assert out.state["kind"] == "Aborted" and "cannot reconcile" in out.state["reason"]
    assert p.calls["observe"] == observed + 1            # asked once: no retry
    assert out.state["vm"]["instance_id"] == iid and live_ids(p) == [iid]


def test_one_cloud_invalid_request_and_another_with_offers_proceeds(tmp_path):
    pa = ScriptedProvider(A, plan_error=err(ErrorKind.INVALID_REQUEST, "fakea has no H100"))
    pb = ScriptedProvider(B, [offer(B, "eu-1")])
    w = World(tmp_path, [pa, pb], clouds=[A, B])

    out = w.launch()

    assert out.state["kind"] == "Ready" and out.state["vm"]["location"]["cloud"] == B
    assert out.state["search"]["history"][0] == {
        "offer": A, "outcome": "skipped",
        "error": {"kind": "InvalidRequest", "msg": "fakea has no H100", "block": None}}
    assert pa.calls["prepare"] == 0


def test_credentials_on_one_cloud_and_invalid_request_on_the_other_aborts(tmp_path):
    pa = ScriptedProvider(A, plan_error=err(ErrorKind.CREDENTIALS, "no API key for fakea"))
    pb = ScriptedProvider(B, plan_error=err(ErrorKind.INVALID_REQUEST, "no such GPU"))
    w = World(tmp_path, [pa, pb], clouds=[A, B])

    out = w.launch()

    assert out.state["kind"] == "Aborted" and "no API key for fakea" in out.state["reason"]


def test_no_offers_available_is_exhausted_with_the_reasons(tmp_path):
    p = ScriptedProvider(A, [offer(A, "r1", available=False, unavailable_reason="sold out in r1")])
    w = World(tmp_path, [p])

    out = w.launch()

    assert out.state["kind"] == "Exhausted" and "sold out in r1" in out.state["reason"]
    assert p.calls["prepare"] == 0


def test_plan_transient_is_retried(tmp_path):
    pa = ScriptedProvider(A, [offer(A, "r1")])
    pa.fail("plan", err(ErrorKind.TRANSIENT, "catalog 502"))
    w = World(tmp_path, [pa])

    out = w.launch()

    assert out.state["kind"] == "Ready"
    assert pa.calls["plan"] == 2
    retries = [e for e in w.events() if e["event"] == "retry"]
    assert len(retries) == 1 and retries[0]["to"] == "Planning"
    assert retries[0]["note"] == "attempt 1/5 failed: plan fakea: Transient: catalog 502"
    assert len(w.clock.waits) >= 1 and 0.5 <= w.clock.waits[0] <= 1.0   # backoff, on the fake clock


def test_plan_transient_past_the_budget_is_exhausted(tmp_path):
    pa = ScriptedProvider(A, [offer(A, "r1")], plan_error=err(ErrorKind.TRANSIENT, "catalog 502"))
    w = World(tmp_path, [pa], step_attempts=3)

    out = w.launch()

    assert out.state["kind"] == "Exhausted" and "planning failed" in out.state["reason"]
    assert pa.calls["plan"] == 3 and pa.calls["prepare"] == 0


def test_a_cloud_whose_plan_stays_down_does_not_hide_the_others(tmp_path):
    pa = ScriptedProvider(A, [offer(A, "r1")], plan_error=err(ErrorKind.TRANSIENT, "catalog 502"))
    pb = ScriptedProvider(B, [offer(B, "eu-1")])
    w = World(tmp_path, [pa, pb], clouds=[A, B], step_attempts=3)

    out = w.launch()

    assert out.state["kind"] == "Ready" and out.state["vm"]["location"]["cloud"] == B


def test_a_run_killed_while_waiting_in_exhausted_plans_again_without_retry_until_up(tmp_path):
    p = ScriptedProvider(A, [offer(A, "r1")])
    p.fail("create", err(ErrorKind.CAPACITY, "none"))
    w = World(tmp_path, [p], retry_until_up=True)

    def killed(seconds):
        if w.row().state["kind"] == "Exhausted":
            raise Crash("killed while waiting in Exhausted")
    w.clock.on_wait = killed
    with pytest.raises(Crash):
        w.launch()
    w.clock.on_wait = None
    w.settings.retry_until_up = False               # the next provision does not ask for it

    out = w.launch()

    assert p.calls["plan"] == 2
    assert out.state["kind"] == "Ready"
