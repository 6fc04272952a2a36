"""The teardown machine (Requesting -> AwaitingGone -> CleaningUp -> Done | Leaked),
alone as ``down`` runs it, on the REAL executor and a tmp journal, against scripted
fake clouds; and how launch and down hand work to each other through the journal.
"""

from __future__ import annotations

import random

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.executor import CancelToken, LeaseLost
from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.retry import RetryPolicy
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    VM_NAME_TAG, ErrorKind, InstanceSpec, Location, ProviderError, Status,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import launch, teardown
from ansible_collections.gpuprov.cloud.tests.fakes.scripted_provider import (
    ScriptedProvider, World, kind_of, offer,
)

A, B = "fakea", "fakeb"
LOC = Location(A, "r1", "r1-a")
LOC_B = Location(B, "eu-1")


class Crash(BaseException):
    """The controller dies before the commit."""


def crash_leaving(kind):
    fired = {"done": False}

    def hook(old, new):
        if old["kind"] == kind and not fired["done"]:
            fired["done"] = True
            raise Crash("killed leaving %s" % kind)
    return hook


def err(kind, msg="scripted"):
    return ProviderError(kind, msg)


def provisioned(p, location, name="vm1"):
    """A VM as a launch leaves it: the location's side resource plus one running instance.
    The setup calls are then forgotten, so tests count only the teardown's calls."""
    spec = InstanceSpec(vm_name=name, ssh_public_key="ssh-ed25519 AAAA test")
    p.prepare(offer(location.cloud, location.region, zone=location.zone), spec)
    iid = p.spawn(name, location)
    p.calls.clear()
    p.log.clear()
    return iid


def tgt(location, ids=()):
    return teardown.target(location.to_dict(), list(ids))


# --- the happy path ----------------------------------------------------------------------

def test_teardown_requests_awaits_cleans_up_and_is_done(tmp_path):
    p = ScriptedProvider(A)
    iid = provisioned(p, LOC)
    w = World(tmp_path, [p])

    out = w.down(targets=[tgt(LOC, [iid])])

    assert out.state["kind"] == "Done" and out.label == "Done"
    assert out.state["targets"] == [{"location": LOC.to_dict(), "instance_ids": [iid], "created": True}]
    assert p.ops("delete") == [(str(LOC), (iid,))]
    assert p.ops("cleanup") == [(str(LOC),)]
    assert iid in p.gone and p.side_removed
    row = w.row()
    assert row.kind == "teardown" and row.terminal and row.lease_owner is None
    assert w.path() == ["Requesting", "AwaitingGone", "CleaningUp", "Done"]
    trans = [e for e in w.events() if e["event"] == "transition"]
    assert [(e["from"], e["to"]) for e in trans] == [
        ("Requesting", "AwaitingGone"), ("AwaitingGone", "CleaningUp"), ("CleaningUp", "Done")]
    assert trans[0]["note"] == "deletion requested for fakea/r1/r1-a [%s]" % iid
    assert trans[1]["note"] == "all instances gone"
    polls = [e for e in w.events() if e["event"] == "poll"]
    assert len(polls) == 1 and polls[0]["note"] == "waiting for fakea/r1/r1-a [%s] to go" % iid
    assert w.clock.waits == [5.0]                    # one poll at the cloud's interval
    w.assert_clean()


def test_instances_found_by_identity_are_deleted_even_if_not_known(tmp_path):
    p = ScriptedProvider(A)
    known = provisioned(p, LOC)
    stray = p.spawn("vm1", LOC)                      # made by a create whose answer was lost
    other_vm = p.spawn("vm2", LOC)                   # another VM at the same location
    w = World(tmp_path, [p])

    out = w.down(targets=[tgt(LOC, [known])])

    assert out.state["kind"] == "Done"
    assert p.ops("delete")[0] == (str(LOC), tuple(sorted([known, stray])))
    assert out.state["targets"][0]["instance_ids"] == sorted([known, stray])
    assert known in p.gone and stray in p.gone
    assert other_vm in p.instances and not p.instances[other_vm].deleting
    assert p.instances[other_vm].tags == {VM_NAME_TAG: "vm2"}
    w.assert_clean()


def test_a_location_with_no_known_id_is_searched_by_identity(tmp_path):
    p = ScriptedProvider(A)
    iid = provisioned(p, LOC)
    w = World(tmp_path, [p])

    out = w.down(targets=[tgt(LOC)])

    assert out.state["kind"] == "Done" and out.state["targets"][0]["instance_ids"] == [iid]
    w.assert_clean()


def test_nothing_to_remove_is_done_without_deletes(tmp_path):
    p = ScriptedProvider(A)
    w = World(tmp_path, [p])

    out = w.down(targets=[tgt(LOC)])

    assert out.state["kind"] == "Done"
    assert p.calls["delete"] == 0 and p.ops("cleanup") == [(str(LOC),)]
    assert w.clock.waits == []


def test_targets_on_two_clouds_are_all_removed(tmp_path):
    pa, pb = ScriptedProvider(A), ScriptedProvider(B)
    ia, ib = provisioned(pa, LOC), provisioned(pb, LOC_B)
    w = World(tmp_path, [pa, pb], clouds=[A, B])

    out = w.down(targets=[tgt(LOC, [ia]), tgt(LOC_B, [ib])])

    assert out.state["kind"] == "Done"
    assert pa.ops("delete") == [(str(LOC), (ia,))] and pb.ops("delete") == [(str(LOC_B), (ib,))]
    assert pa.ops("cleanup") == [(str(LOC),)] and pb.ops("cleanup") == [(str(LOC_B),)]
    w.assert_clean()


def test_terminating_instances_are_not_deleted_again_while_awaited(tmp_path):
    p = ScriptedProvider(A, gone_after=4)
    iid = provisioned(p, LOC)
    w = World(tmp_path, [p])

    out = w.down(targets=[tgt(LOC, [iid])])

    assert out.state["kind"] == "Done"
    assert p.calls["delete"] == 1 and len(w.clock.waits) == 4


def test_a_delete_that_did_not_take_is_requested_again(tmp_path):
    p = ScriptedProvider(A)
    iid = provisioned(p, LOC)
    ignored = p.script("delete", lambda location, name, ids: None)   # accepted, then nothing happens
    w = World(tmp_path, [p])

    out = w.down(targets=[tgt(LOC, [iid])])

    assert ignored.fired == 1
    assert out.state["kind"] == "Done"
    assert p.ops("delete") == [(str(LOC), (iid,)), (str(LOC), (iid,))]
    w.assert_clean()


# --- crashes -----------------------------------------------------------------------------

def test_crash_between_delete_and_commit_reruns_requesting_safely(tmp_path):
    p = ScriptedProvider(A, gone_after=2)
    iid = provisioned(p, LOC)
    w = World(tmp_path, [p])

    with pytest.raises(Crash):
        w.down(targets=[tgt(LOC, [iid])], before_commit=crash_leaving("Requesting"))

    assert w.row().label == "Requesting" and not w.row().terminal
    assert p.calls["delete"] == 1 and p.instances[iid].deleting

    out = w.down()                                   # resumes the journalled Requesting

    assert out.resumed and out.state["kind"] == "Done"
    assert p.ops("delete") == [(str(LOC), (iid,)), (str(LOC), (iid,))]   # the same, idempotent delete
    assert any(e["event"] == "resume" and e["to"] == "Requesting" for e in w.events())
    w.assert_clean()


@pytest.mark.parametrize("kind", ["AwaitingGone", "CleaningUp"])
def test_crash_later_in_the_teardown_resumes_to_done(tmp_path, kind):
    p = ScriptedProvider(A)
    iid = provisioned(p, LOC)
    w = World(tmp_path, [p])
    with pytest.raises(Crash):
        w.down(targets=[tgt(LOC, [iid])], before_commit=crash_leaving(kind))
    assert w.row().label == kind

    out = w.down()

    assert out.resumed and out.state["kind"] == "Done"
    assert p.calls["cleanup"] == (2 if kind == "CleaningUp" else 1)
    w.assert_clean()


def test_a_launch_after_an_interrupted_down_finishes_the_teardown_first(tmp_path):
    p = ScriptedProvider(A, [offer(A, "r1", zone="r1-a")])
    w = World(tmp_path, [p])
    old = w.launch().state["vm"]["instance_id"]
    with pytest.raises(Crash):
        w.down(before_commit=crash_leaving("Requesting"))
    assert w.row().kind == "teardown" and w.row().label == "Requesting"

    out = w.launch()

    assert out.state["kind"] == "Ready" and out.state["vm"]["instance_id"] != old
    assert w.path(since_begin=True)[:5] == ["Reconciling", "Compensating/Requesting",
                                            "Compensating/AwaitingGone", "Compensating/CleaningUp",
                                            "Planning"]
    assert w.row().kind == "launch"
    assert old in p.gone
    w.assert_clean(keep=out.state["vm"]["instance_id"])


# --- failures: Leaked ----------------------------------------------------------------------

@pytest.mark.parametrize("kind", [ErrorKind.TRANSIENT, ErrorKind.FAILED])
def test_delete_failing_past_the_budget_is_leaked_and_the_next_down_resolves_it(tmp_path, kind):
    p = ScriptedProvider(A)
    iid = provisioned(p, LOC)
    p.fail("delete", err(kind, "delete refused"), times=None)
    w = World(tmp_path, [p], teardown_attempts=4)

    out = w.down(targets=[tgt(LOC, [iid])])

    assert out.state["kind"] == "Leaked" and w.row().terminal
    assert out.state["targets"] == [{"location": LOC.to_dict(), "instance_ids": [iid], "created": True}]
    assert out.state["reason"] == "teardown failed in Requesting: %s: delete refused" % kind
    assert p.calls["delete"] == 4 and iid in p.instances
    assert len([e for e in w.events() if e["event"] == "retry"]) == 4
    assert len(w.clock.waits) == 3                   # backoff between the 4 attempts, on the fake clock
    assert all(1.0 <= s <= 30.0 for s in w.clock.waits)

    p.clear()
    again = w.down()                                 # from the Leaked state's targets

    assert again.state["kind"] == "Done" and not again.resumed
    assert w.path(since_begin=True) == ["Requesting", "AwaitingGone", "CleaningUp", "Done"]
    w.assert_clean()


def test_refused_credentials_are_leaked_at_once_and_the_next_down_resolves_it(tmp_path):
    p = ScriptedProvider(A)
    iid = provisioned(p, LOC)
    p.fail("delete", err(ErrorKind.CREDENTIALS, "delete refused"), times=None)
    w = World(tmp_path, [p], teardown_attempts=4)

    out = w.down(targets=[tgt(LOC, [iid])])

    # Retrying cannot fix credentials: say so at once, naming what may still bill.
    assert out.state["kind"] == "Leaked" and w.row().terminal
    assert out.state["targets"] == [{"location": LOC.to_dict(), "instance_ids": [iid], "created": True}]
    assert out.state["reason"] == "teardown cannot proceed: Credentials: delete refused"
    assert p.calls["delete"] == 1 and iid in p.instances and not w.clock.waits

    p.clear()
    again = w.down()

    assert again.state["kind"] == "Done"
    w.assert_clean()


def test_transient_delete_is_retried_within_the_budget(tmp_path):
    p = ScriptedProvider(A)
    iid = provisioned(p, LOC)
    p.fail("delete", err(ErrorKind.TRANSIENT, "503"), times=2)
    w = World(tmp_path, [p], teardown_attempts=3)

    out = w.down(targets=[tgt(LOC, [iid])])

    assert out.state["kind"] == "Done" and p.calls["delete"] == 3
    w.assert_clean()


def test_an_instance_that_never_goes_away_is_leaked_after_the_timeout(tmp_path):
    p = ScriptedProvider(A, gone_after=None)
    iid = provisioned(p, LOC)
    w = World(tmp_path, [p], teardown_timeout=60.0)

    out = w.down(targets=[tgt(LOC)])

    assert out.state["kind"] == "Leaked"
    assert out.state["targets"] == [{"location": LOC.to_dict(), "instance_ids": [iid], "created": True}]
    assert out.state["reason"] == "instances still present after 60 s: fakea/r1/r1-a [%s]" % iid
    assert sum(w.clock.waits) > 60.0 and w.clock.waits == [5.0] * 13
    assert p.calls["cleanup"] == 0                   # never cleans up under a live instance
    # the id found by identity is journalled before the delete
    assert w.transitions() == [("Requesting", "Requesting"), ("Requesting", "AwaitingGone"),
                               ("AwaitingGone", "Leaked")]


def test_cleanup_failing_past_the_budget_is_leaked(tmp_path):
    p = ScriptedProvider(A)
    iid = provisioned(p, LOC)
    p.fail("cleanup", err(ErrorKind.TRANSIENT, "dependency violation"), times=None)
    w = World(tmp_path, [p], teardown_attempts=2)

    out = w.down(targets=[tgt(LOC, [iid])])

    assert out.state["kind"] == "Leaked" and "CleaningUp" in out.state["reason"]
    assert iid in p.gone and p.side                   # only the security group is left
    assert out.state["targets"] == [{"location": LOC.to_dict(), "instance_ids": [iid], "created": True}]
    p.clear()
    assert w.down().state["kind"] == "Done"
    w.assert_clean()


def test_leaked_names_the_ids_found_by_identity(tmp_path):
    p = ScriptedProvider(A)
    iid = provisioned(p, LOC)
    p.fail("delete", err(ErrorKind.TRANSIENT, "503"), times=None)
    w = World(tmp_path, [p], teardown_attempts=2)

    out = w.down(targets=[tgt(LOC)])                 # the id was never journalled

    assert out.state["kind"] == "Leaked"
    assert out.state["targets"] == [{"location": LOC.to_dict(), "instance_ids": [iid], "created": True}]


def test_a_side_resource_only_teardown_gives_up_after_three_attempts_as_done(tmp_path):
    """A location where no create was ever made: at most a security group may be left, so an unreachable
    cloud gets a short budget (3 attempts, backoff capped at 4 s) and never a Leaked."""
    p = ScriptedProvider(A)
    p.fail("observe", err(ErrorKind.TRANSIENT, "endpoint unreachable"), times=None)
    w = World(tmp_path, [p], teardown_attempts=6)

    out = w.down(targets=[teardown.target(LOC.to_dict(), [], created=False)])

    assert out.state["kind"] == "Done" and "no instance was ever requested" in out.state["reason"]
    assert p.calls["observe"] == 3 and p.calls["delete"] == 0
    twin, policy = random.Random(7), RetryPolicy(initial_backoff=1.0, max_backoff=4.0)
    assert w.clock.waits == [policy.backoff(n, twin) for n in (1, 2)]


def test_a_teardown_backs_off_up_to_thirty_seconds_between_attempts(tmp_path):
    p = ScriptedProvider(A)
    iid = provisioned(p, LOC)
    p.fail("delete", err(ErrorKind.TRANSIENT, "503"), times=None)
    w = World(tmp_path, [p], teardown_attempts=9)

    out = w.down(targets=[tgt(LOC, [iid])])

    assert out.state["kind"] == "Leaked" and p.calls["delete"] == 9
    # Exponential from 2 s, doubling, capped at 30 s, with half of each drawn as jitter (World's rng, seed 7).
    twin, policy = random.Random(7), RetryPolicy(initial_backoff=2.0, max_backoff=30.0)
    assert w.clock.waits == [policy.backoff(n, twin) for n in range(1, 9)]
    assert max(w.clock.waits) <= 30.0 and all(15.0 <= s for s in w.clock.waits[-3:])


def test_targets_at_one_location_merge_every_instance_id():
    first = teardown.target(LOC.to_dict(), ["i-2", "i-1"], created=False)
    second = teardown.target(LOC.to_dict(), ["i-3", "i-1"])
    elsewhere = teardown.target(LOC_B.to_dict(), ["b-1"])

    merged = teardown.merge_targets([first], [second, elsewhere])

    assert merged == [{"location": LOC.to_dict(), "instance_ids": ["i-1", "i-2", "i-3"], "created": True},
                      {"location": LOC_B.to_dict(), "instance_ids": ["b-1"], "created": True}]
    assert teardown.initial("vm1", [first, second]).targets == merged[:1]


def test_a_leaked_compensation_names_every_instance_of_the_merged_targets(tmp_path):
    p = ScriptedProvider(A)
    one, two = provisioned(p, LOC), p.spawn("vm1", LOC)
    p.calls.clear()
    # The cloud lists nothing (its listing lags) and refuses every delete: only the journalled ids remain.
    p.fail("observe", err(ErrorKind.TRANSIENT, "listing 503"), times=None)
    w = World(tmp_path, [p], teardown_attempts=2)

    out = w.down(targets=[tgt(LOC, [one]), tgt(LOC, [two])])

    assert out.state["kind"] == "Leaked"
    assert out.state["targets"] == [{"location": LOC.to_dict(), "instance_ids": sorted([one, two]), "created": True}]


def test_cancel_does_not_stop_a_teardown(tmp_path):
    p = ScriptedProvider(A, gone_after=2)
    iid = provisioned(p, LOC)
    w = World(tmp_path, [p])
    token = CancelToken(w.clock)
    token.request()

    out = w.down(targets=[tgt(LOC, [iid])], cancel=token)

    assert out.cancelled and out.state["kind"] == "Done"
    w.assert_clean()


# --- down after launch states ---------------------------------------------------------------

def test_down_of_a_ready_vm_then_a_fresh_launch(tmp_path):
    p = ScriptedProvider(A, [offer(A, "r1", zone="r1-a")])
    w = World(tmp_path, [p])
    iid = w.launch().state["vm"]["instance_id"]

    out = w.down()

    assert out.state["kind"] == "Done"
    assert out.state["targets"] == [{"location": LOC.to_dict(), "instance_ids": [iid], "created": True}]
    assert out.state["reason"] == "down requested"
    w.assert_clean()
    again = w.launch()
    assert again.state["kind"] == "Ready" and not again.state["reused"]
    assert w.path(since_begin=True)[:2] == ["Reconciling", "Planning"]


@pytest.mark.parametrize("kind", ["Preparing", "Creating", "Booting", "Connecting"])
def test_down_of_a_launch_killed_mid_attempt_removes_everything(tmp_path, kind):
    p = ScriptedProvider(A, [offer(A, "r1", zone="r1-a")])
    w = World(tmp_path, [p])

    def hook(old, new):
        if old["kind"] == kind:
            raise Crash(kind)
    with pytest.raises(Crash):
        w.launch(before_commit=hook)
    row = w.row()
    assert row.kind == "launch" and kind_of(row.label) == kind

    out = w.down()

    assert out.state["kind"] == "Done" and not out.resumed    # a launch row is not resumed by down
    assert [t["location"] for t in out.state["targets"]] == [LOC.to_dict()]
    if kind != "Preparing":
        assert out.state["targets"][0]["instance_ids"] == p.created
    w.assert_clean()


def test_down_of_a_launch_killed_while_compensating_finishes_it(tmp_path):
    p = ScriptedProvider(A, [offer(A, "r1", zone="r1-a"), offer(A, "r1", zone="r1-b")], gone_after=3)
    p.fail("create", err(ErrorKind.CAPACITY, "none"), after=True, where=lambda o: o.zone == "r1-a")

    w = World(tmp_path, [p])

    def killed(seconds):
        if w.row().label == "Compensating/AwaitingGone":
            raise Crash("killed while compensating")
    w.clock.on_wait = killed
    with pytest.raises(Crash):
        w.launch()
    w.clock.on_wait = None
    assert launch.owned_targets(w.row().state, w.row().kind) == [
        {"location": LOC.to_dict(), "instance_ids": [p.created[0]], "created": True}]

    out = w.down()

    assert out.state["kind"] == "Done"
    w.assert_clean()
    assert p.calls["create"] == 1


def test_a_teardown_never_plans_or_creates(tmp_path):
    """A down never calls plan/prepare/create, whatever it finds."""
    p = ScriptedProvider(A, [offer(A, "r1")])
    iid = provisioned(p, LOC)
    p.set_status(iid, Status.FAILED, "xid")
    w = World(tmp_path, [p])

    out = w.down(targets=[tgt(LOC, [iid])])

    assert out.state["kind"] == "Done"
    assert p.calls["plan"] == p.calls["prepare"] == p.calls["create"] == 0


# --- fencing, flags and reasons (pinned by make mutation) --------------------------------------

LOC_2 = Location(A, "r2")


def steal_the_lease(w):
    """Another run takes the key over (its lease), as a takeover after this run's lease expired would."""
    w.journal.release(w.name, w.journal.load(w.name).lease_owner)
    w.journal.acquire(w.name, "other:1:1:x", 120.0)


def around(provider, op, before=None, after=None):
    """Run ``before(args)`` / ``after(args)`` around each call of the fake's primitive ``op`` (it still counts once)."""
    real = getattr(provider, op)

    def call(*args):
        if before:
            before(args)
        result = real(*args)
        if after:
            after(args)
        return result
    setattr(provider, op, call)


def test_a_teardown_that_lost_its_lease_mid_step_deletes_nothing_more(tmp_path):
    p = ScriptedProvider(A)
    one, two = provisioned(p, LOC), provisioned(p, LOC_2)
    w = World(tmp_path, [p])
    seen = []

    def second_listing_loses_the_lease(args):
        seen.append(args[0])
        if len(seen) == 2:            # the second location's listing, still inside Requesting's step
            steal_the_lease(w)
    around(p, "observe", before=second_listing_loses_the_lease)

    with pytest.raises(LeaseLost):
        w.down(targets=[tgt(LOC, [one]), tgt(LOC_2, [two])])

    assert p.calls["delete"] == 0 and one in p.instances and two in p.instances


def test_a_teardown_that_lost_its_lease_while_awaiting_asks_for_no_delete_again(tmp_path):
    p = ScriptedProvider(A)
    iid = provisioned(p, LOC)
    p.script("delete", lambda location, name, ids: None, times=1)     # accepted, but it did not take
    w = World(tmp_path, [p])

    def awaiting_loses_the_lease(args):
        if kind_of(w.row().label) == "AwaitingGone":
            steal_the_lease(w)
    around(p, "observe", before=awaiting_loses_the_lease)

    with pytest.raises(LeaseLost):
        w.down(targets=[tgt(LOC, [iid])])

    assert p.calls["delete"] == 1 and iid in p.instances and not p.instances[iid].deleting


def test_a_teardown_that_lost_its_lease_while_cleaning_up_cleans_no_further_location(tmp_path):
    p = ScriptedProvider(A)
    one, two = provisioned(p, LOC), provisioned(p, LOC_2)
    w = World(tmp_path, [p])
    around(p, "cleanup", after=lambda args: steal_the_lease(w))

    with pytest.raises(LeaseLost):
        w.down(targets=[tgt(LOC, [one]), tgt(LOC_2, [two])])

    assert p.calls["cleanup"] == 1 and ("vm1", str(LOC_2)) in p.side


def test_an_instance_found_where_no_create_was_recorded_makes_the_target_billable(tmp_path):
    p = ScriptedProvider(A)
    iid = provisioned(p, LOC)
    p.fail("delete", err(ErrorKind.TRANSIENT, "503"), times=None)
    w = World(tmp_path, [p], teardown_attempts=2)

    out = w.down(targets=[teardown.target(LOC.to_dict(), [], created=False)])

    # What was found by identity may bill: Leaked, never "Done, no instance was ever requested".
    assert out.state["kind"] == "Leaked"
    assert out.state["targets"] == [{"location": LOC.to_dict(), "instance_ids": [iid], "created": True}]


def test_a_location_that_never_saw_a_create_ends_done_when_its_cleanup_keeps_failing(tmp_path):
    p = ScriptedProvider(A)
    p.fail("cleanup", err(ErrorKind.TRANSIENT, "dependency violation"), times=None)
    w = World(tmp_path, [p])

    out = w.down(targets=[teardown.target(LOC.to_dict(), [], created=False)])

    assert out.state["kind"] == "Done" and p.calls["cleanup"] == 3
    assert out.state["reason"] == ("teardown failed in CleaningUp: Transient: dependency violation (no instance was "
                                   "ever requested at fakea/r1/r1-a [no instances]; side resources such as firewall "
                                   "rules may remain)")


def test_an_instance_that_never_goes_leaks_with_every_target_still_to_clean(tmp_path):
    p = ScriptedProvider(A, gone_after=None)
    stuck = provisioned(p, LOC)
    spec = InstanceSpec(vm_name="vm1", ssh_public_key="ssh-ed25519 AAAA test")
    p.prepare(offer(A, "r2"), spec)                 # only a side resource at r2: its instance is already gone
    p.calls.clear()
    w = World(tmp_path, [p], teardown_timeout=30.0)

    out = w.down(targets=[tgt(LOC, [stuck]), tgt(LOC_2, ["fakea-i-0999"])])

    assert out.state["kind"] == "Leaked"
    # The next down must clean r2's side resource too: both locations stay in the Leaked record.
    assert [t["location"] for t in out.state["targets"]] == [LOC.to_dict(), LOC_2.to_dict()]
    assert out.state["reason"] == "instances still present after 30 s: fakea/r1/r1-a [%s]" % stuck


def test_a_refused_teardown_says_why_in_its_journal_and_a_throttled_one_waits_as_asked(tmp_path):
    p = ScriptedProvider(A)
    iid = provisioned(p, LOC)
    throttled = err(ErrorKind.TRANSIENT, "429 slow down")
    throttled.retry_after = 20.0
    p.fail("delete", throttled, times=1)
    w = World(tmp_path, [p])

    out = w.down(targets=[tgt(LOC, [iid])])

    assert out.state["kind"] == "Done" and w.clock.waits[0] >= 20.0      # the vendor's Retry-After, not 2 s
    notes = [e["note"] for e in w.events() if e["event"] == "transition"]
    assert notes[0] == "deletion requested for fakea/r1/r1-a [%s]" % iid

    q = ScriptedProvider(B)
    left = provisioned(q, LOC_B)
    q.fail("delete", err(ErrorKind.CREDENTIALS, "token revoked"), times=None)
    w2 = World(tmp_path / "two", [q])
    w2.down(targets=[tgt(LOC_B, [left])])
    assert [e["note"] for e in w2.events() if e["event"] == "transition"] == ["Credentials: token revoked"]


def test_target_records_normalise_ids_and_keep_the_created_flag():
    assert teardown.target(LOC.to_dict()) == {"location": LOC.to_dict(), "instance_ids": [], "created": True}
    assert teardown.created_at({"location": LOC.to_dict(), "instance_ids": ["i-1"], "created": False})
    assert not teardown.created_at({"location": LOC.to_dict(), "instance_ids": [], "created": False})
    created = teardown.target(LOC.to_dict(), ["i-1"])
    never = teardown.target(LOC.to_dict(), [], created=False)
    assert teardown.merge_targets([created], None, [never]) == [created]             # a created target stays so
