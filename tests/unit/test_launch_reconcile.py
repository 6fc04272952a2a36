"""What a launch does first with what the journal knew (Reconciling) and how it starts a search
(Planning), as mutation testing (make mutation, issue 30) found no test pinning: the login begun
ahead at the journalled endpoint while the cloud is asked, a cloud error while reconciling named
as the cloud said it, a journalled VM gone or stopped while the request changed (with and without
recreate), every instance of ours at the VM's location journalled before anything is torn down,
the reason a compensation shows while it runs, what the previous run left, and a search with no
offer at all.

The REAL executor and machines run on a tmp journal against scripted fake clouds
(tests/fakes/scripted_provider.py); waits advance a fake clock.
"""

from __future__ import annotations

import dataclasses

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    JOURNAL_ID_TAG, VM_NAME_TAG, ErrorKind, ProviderError, SshEndpoint, Status,
)
from ansible_collections.gpuprov.cloud.tests.fakes.scripted_provider import (
    ScriptedProvider, World, kind_of, offer,
)
from ansible_collections.gpuprov.cloud.tests.fakes.toy_machine import Crash

A = "fakea"
LOC = offer(A, "r1").location


def err(kind, msg="scripted"):
    return ProviderError(kind, msg)


def live_ids(provider, name="vm1"):
    return sorted(i.instance_id for i in provider.live(name))


def notes(w, frm, to):
    """The notes of every committed transition from kind ``frm`` to kind ``to``."""
    return [e["note"] for e in w.events()
            if e["event"] == "transition" and (kind_of(e["from"]), kind_of(e["to"])) == (frm, to)]


def ours(w, provider):
    """An instance of this journal's VM made behind the run's back (a lost create's leftover)."""
    return provider.spawn("vm1", LOC, tags={VM_NAME_TAG: "vm1", JOURNAL_ID_TAG: w.journal.journal_id})


def compensating_seen(w):
    """The journalled state (what status reads) at the first wait the run spends compensating."""
    seen = []

    def on_wait(seconds):
        if not seen and kind_of(w.row().label).startswith("Compensating"):
            seen.append(w.row().state)
    w.clock.on_wait = on_wait
    return seen


def ask_for_a100(w, provider):
    provider.offers = [offer(A, "r1", instance_type="gpu.8x", gpu="A100", gpu_count=8)]   # the fake plans no filter
    w.settings.request = dataclasses.replace(w.settings.request, gpu="A100", gpu_count=8)


class FakeLoginAhead:
    """A fake ssh_check that, like the controller's, can begin a login ahead of the check: it
    records each begin with how many listings the cloud had answered by then, and checks as
    the World's FakeSsh does."""

    def __init__(self, ssh, provider):
        self.ssh = ssh
        self.provider = provider
        self.begun = []

    def begin(self, endpoint, alias):
        self.begun.append((endpoint, alias, self.provider.calls["observe"]))

    def __call__(self, endpoint, alias):
        return self.ssh(endpoint, alias)


# --- reuse: the login begun ahead, a cloud that does not answer -------------------------------

def test_a_reuse_begins_the_login_at_the_journalled_endpoint_before_the_cloud_is_asked(tmp_path):
    p = ScriptedProvider(A, [offer(A, "r1")])
    w = World(tmp_path, [p])
    vm = w.launch().state["vm"]
    login = FakeLoginAhead(w.ssh, p)
    w.ctx.ssh_check = login
    listed_before = p.calls["observe"]

    out = w.launch()

    assert out.state["kind"] == "Ready" and out.state["reused"] is True
    # Begun once, at the journalled endpoint and alias, while no listing had been asked yet.
    assert login.begun == [(SshEndpoint.from_dict(vm["ssh"]), vm["host_key_alias"], listed_before)]
    assert p.calls["observe"] == listed_before + 1
    assert w.ssh.calls[-1] == (vm["ssh"]["host"], vm["ssh"]["port"], vm["ssh"]["user"], vm["host_key_alias"])
    assert w.path(since_begin=True) == ["Reconciling", "Connecting", "Ready"]


def test_a_listing_that_fails_once_while_reconciling_is_retried_naming_the_cloud_error(tmp_path):
    p = ScriptedProvider(A, [offer(A, "r1")])
    w = World(tmp_path, [p])
    iid = w.launch().state["vm"]["instance_id"]
    p.fail("observe", err(ErrorKind.TRANSIENT, "api down"), times=1)

    out = w.launch()

    assert out.state["kind"] == "Ready" and out.state["reused"] and out.state["vm"]["instance_id"] == iid
    retries = [e["note"] for e in w.events() if e["event"] == "retry"]
    assert retries == ["attempt 1/5 failed: ProviderError: Transient: api down"]
    assert p.calls["create"] == 1 and p.calls["delete"] == 0


def test_a_listing_that_keeps_failing_while_reconciling_aborts_with_the_cloud_error(tmp_path):
    p = ScriptedProvider(A, [offer(A, "r1")])
    w = World(tmp_path, [p], step_attempts=3)
    iid = w.launch().state["vm"]["instance_id"]
    p.fail("observe", err(ErrorKind.TRANSIENT, "api down"), times=None)

    out = w.launch()

    assert out.state["kind"] == "Aborted" and out.state["vm"]["instance_id"] == iid
    assert out.state["reason"] == "cannot reconcile the journalled VM: ProviderError: Transient: api down"
    assert live_ids(p) == [iid] and p.calls["delete"] == 0


def test_credentials_refused_while_reconciling_are_the_journalled_reason_for_aborting(tmp_path):
    p = ScriptedProvider(A, [offer(A, "r1")])
    w = World(tmp_path, [p])
    iid = w.launch().state["vm"]["instance_id"]
    p.fail("observe", err(ErrorKind.CREDENTIALS, "token expired"), times=None)

    out = w.launch()

    assert out.state["kind"] == "Aborted"
    assert out.state["reason"] == "cannot reconcile the journalled VM: Credentials: token expired"
    # The journal says why at the transition itself (status's last events show it).
    assert notes(w, "Reconciling", "Aborted") == ["Credentials: token expired"]
    assert live_ids(p) == [iid]


# --- a journalled VM that is gone or stopped -----------------------------------------------

@pytest.mark.parametrize("recreate", [False, True])
def test_a_gone_vm_is_replaced_by_one_for_the_new_request_with_or_without_recreate(tmp_path, recreate):
    p = ScriptedProvider(A, [offer(A, "r1")])
    w = World(tmp_path, [p])
    old = w.launch().state["vm"]["instance_id"]
    p.vanish(old)
    ask_for_a100(w, p)
    w.settings.recreate = recreate
    planned_before = p.calls["plan"]

    out = w.launch()

    # Nothing is left to keep or to recreate: the request is simply met.
    assert out.state["kind"] == "Ready" and out.state["vm"]["gpu"] == "A100" and not out.state["reused"]
    assert notes(w, "Reconciling", "Compensating/Requesting") == ["journalled instance %s is gone" % old]
    assert p.calls["plan"] == planned_before + 1            # planned once, by Planning
    assert live_ids(p) == [out.state["vm"]["instance_id"]]


def test_a_stopped_vm_and_a_leftover_of_ours_beside_it_are_removed_in_one_teardown(tmp_path):
    p = ScriptedProvider(A, [offer(A, "r1")])
    w = World(tmp_path, [p])
    old = w.launch().state["vm"]["instance_id"]
    p.set_status(old, Status.STOPPED)
    leftover = ours(w, p)
    seen = compensating_seen(w)

    out = w.launch()

    assert out.state["kind"] == "Ready" and live_ids(p) == [out.state["vm"]["instance_id"]]
    why = "journalled instance %s is Stopped" % old
    assert notes(w, "Reconciling", "Compensating/Requesting") == [why]
    # Both were journalled before the first delete: no second look was needed to find the leftover.
    assert w.path(since_begin=True)[:5] == ["Reconciling", "Compensating/Requesting", "Compensating/AwaitingGone",
                                            "Compensating/CleaningUp", "Planning"]
    assert p.ops("delete")[-1] == (str(LOC), tuple(sorted([old, leftover])))
    # What status shows while the teardown runs says why.
    assert seen[0]["reason"] == why and seen[0]["teardown"]["reason"] == why


def test_a_gone_vm_whose_teardown_is_refused_leaks_naming_the_leftover_of_ours_found_there(tmp_path):
    p = ScriptedProvider(A, [offer(A, "r1")])
    w = World(tmp_path, [p])
    old = w.launch().state["vm"]["instance_id"]
    p.vanish(old)
    leftover = ours(w, p)
    p.fail("observe", err(ErrorKind.CREDENTIALS, "token expired"), times=None,
           where=lambda loc: kind_of(w.row().label) == "Compensating/Requesting")

    out = w.launch()

    # The listing Reconciling made is journalled with the teardown: the Leaked record names the
    # leftover although the teardown could never list the location itself.
    assert out.state["kind"] == "Leaked"
    assert out.state["targets"] == [{"location": LOC.to_dict(), "instance_ids": sorted([leftover, old]),
                                     "created": True}]
    assert "token expired" in out.state["reason"]
    assert live_ids(p) == [leftover] and p.calls["delete"] == 0 and p.calls["create"] == 1


# --- recreate ------------------------------------------------------------------------------

def test_recreate_tears_down_the_old_vm_and_a_leftover_of_ours_in_one_teardown_saying_why(tmp_path):
    p = ScriptedProvider(A, [offer(A, "r1")])
    w = World(tmp_path, [p])
    old = w.launch().state["vm"]["instance_id"]
    leftover = ours(w, p)
    ask_for_a100(w, p)
    w.settings.recreate = True
    seen = compensating_seen(w)

    out = w.launch()

    assert out.state["kind"] == "Ready" and out.state["vm"]["gpu"] == "A100"
    assert live_ids(p) == [out.state["vm"]["instance_id"]]
    why = ("recreate: the VM does not match the request (gpu: the VM has H100, the request asks for A100; "
           "gpu_count: the VM has 1, the request asks for 8)")
    assert notes(w, "Reconciling", "Compensating/Requesting") == [why]
    assert w.path(since_begin=True)[:5] == ["Reconciling", "Compensating/Requesting", "Compensating/AwaitingGone",
                                            "Compensating/CleaningUp", "Planning"]
    assert (str(LOC), tuple(sorted([old, leftover]))) in p.ops("delete")
    assert seen[0]["reason"] == why and seen[0]["teardown"]["reason"] == why


def test_recreate_for_a_request_no_cloud_offers_keeps_the_vm_saying_there_were_no_offers(tmp_path):
    p = ScriptedProvider(A, [offer(A, "r1")])
    w = World(tmp_path, [p])
    old = w.launch().state["vm"]["instance_id"]
    ask_for_a100(w, p)
    p.offers = []
    w.settings.recreate = True

    out = w.launch()

    assert out.state["kind"] == "Aborted" and out.state["vm"]["instance_id"] == old
    assert out.state["reason"] == (
        "recreate: the VM does not match the request (gpu: the VM has H100, the request asks for A100; "
        "gpu_count: the VM has 1, the request asks for 8); no cloud can try the new request (no offers), "
        "so nothing was torn down and the VM is kept")
    assert live_ids(p) == [old] and p.calls["delete"] == 0


# --- what the previous run left -------------------------------------------------------------

def test_the_run_after_a_leak_says_it_resolves_that_leak(tmp_path):
    p = ScriptedProvider(A, [offer(A, "r1")])
    p.boot(pending=1, then=Status.FAILED, reason="GPU fell off the bus", times=1)
    p.fail("delete", err(ErrorKind.TRANSIENT, "api 503"), times=3)
    w = World(tmp_path, [p], teardown_attempts=3)
    leaked = w.launch().state
    assert leaked["kind"] == "Leaked"
    seen = compensating_seen(w)

    out = w.launch()

    assert out.state["kind"] == "Ready"
    assert notes(w, "Reconciling", "Compensating/Requesting") == [
        "compensating what the previous run left: %s" % leaked["reason"]]
    assert seen[0]["reason"] == "resolving: %s" % leaked["reason"]
    w.assert_clean(keep=out.state["vm"]["instance_id"])


def test_a_search_with_no_offer_is_exhausted_and_the_next_run_plans_at_once(tmp_path):
    p = ScriptedProvider(A, [])
    w = World(tmp_path, [p])

    first = w.launch()

    assert first.state == {"kind": "Exhausted", "reason": "no offer available: no offers",
                           "search": {"offers": [], "cursor": 0, "blocked": [], "history": [], "round": 0}}

    p.offers = [offer(A, "r1")]
    out = w.launch()

    # The Exhausted run owned nothing: no teardown, straight to a new search.
    assert out.state["kind"] == "Ready"
    assert w.path(since_begin=True)[:3] == ["Reconciling", "Planning", "Preparing"]
    assert notes(w, "Reconciling", "Planning") == ["nothing to reuse; planning"] * 2
    assert p.calls["delete"] == 0 and p.calls["cleanup"] == 0


def test_a_launch_after_an_interrupted_down_finishes_that_down_first(tmp_path):
    p = ScriptedProvider(A, [offer(A, "r1")])
    w = World(tmp_path, [p])
    first = w.launch().state["vm"]["instance_id"]
    killed = {"done": False}

    def kill_leaving_requesting(old, new):
        if old["kind"] == "Requesting" and not killed["done"]:
            killed["done"] = True
            raise Crash("killed leaving Requesting")
    with pytest.raises(Crash):
        w.down(before_commit=kill_leaving_requesting)
    assert w.row().kind == "teardown" and w.row().state["kind"] == "Requesting"

    out = w.launch()

    assert out.state["kind"] == "Ready"
    assert notes(w, "Reconciling", "Compensating/Requesting") == ["an interrupted teardown is finished first"]
    assert first in p.gone and out.state["vm"]["instance_id"] != first
    w.assert_clean(keep=out.state["vm"]["instance_id"])
