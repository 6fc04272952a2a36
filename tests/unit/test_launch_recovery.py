"""The launch and teardown machines at the edges issue 8 found: another journal's
instance, a create interrupted half-way, an unreachable cloud, a request that no
longer matches the journalled VM, journalled adapter options, a cancellation asked
through the journal, and credentials that fail during a teardown.

The REAL executor and machines run on a tmp journal against scripted fake clouds
(tests/fakes/scripted_provider.py); waits advance a fake clock.
"""

from __future__ import annotations

import dataclasses

from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import run_options
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    JOURNAL_ID_TAG, VM_NAME_TAG, BlockScope, ErrorKind, Location, ProviderError, Status,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import teardown
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm.context import VmContext, VmSettings
from ansible_collections.gpuprov.cloud.tests.fakes.scripted_provider import (
    ScriptedProvider, World, offer,
)

A, B = "fakea", "fakeb"
LOC_A = Location(A, "r1")
LOC_B = Location(B, "r1")


def cloud(name):
    return ScriptedProvider(name, [offer(name, "r1")])


def live_ids(provider, name="vm1"):
    return sorted(i.instance_id for i in provider.live(name))


# --- item 6: resources of another journal are never adopted or deleted -------------------

def test_an_instance_of_another_journal_is_refused_and_left_alone(tmp_path):
    p = cloud(A)
    w = World(tmp_path, [p])
    foreign = p.spawn("vm1", LOC_A, tags={VM_NAME_TAG: "vm1", JOURNAL_ID_TAG: "another-journal"})

    out = w.launch()

    assert out.state["kind"] == "Aborted"
    assert "made by another controller" in out.state["reason"] and "another-journal" in out.state["reason"]
    assert p.calls["create"] == 0
    assert live_ids(p) == [foreign]          # never deleted by compensation either
    assert not p.ops("delete")


def test_a_legacy_instance_without_journal_id_is_adopted_by_name(tmp_path):
    p = cloud(A)
    w = World(tmp_path, [p])
    legacy = p.spawn("vm1", LOC_A, tags={VM_NAME_TAG: "vm1"})

    out = w.launch()

    assert out.state["kind"] == "Ready" and out.state["vm"]["instance_id"] == legacy
    assert p.calls["create"] == 0


def test_teardown_never_deletes_another_journals_instance(tmp_path):
    p = cloud(A)
    w = World(tmp_path, [p])
    out = w.launch()
    mine = out.state["vm"]["instance_id"]
    foreign = p.spawn("vm1", LOC_A, tags={VM_NAME_TAG: "vm1", JOURNAL_ID_TAG: "another-journal"})

    down = w.down()

    assert down.state["kind"] == "Done"
    assert live_ids(p) == [foreign]
    assert all(foreign not in op[1] for op in p.ops("delete")), p.ops("delete")
    assert mine not in live_ids(p)


# --- item 2: a create interrupted half-way is replaced at once ----------------------------

def test_a_broken_leftover_of_this_journal_is_deleted_and_created_afresh_at_once(tmp_path):
    p = cloud(A)
    w = World(tmp_path, [p])
    leftover = p.spawn("vm1", LOC_A, status=Status.FAILED,
                       tags={VM_NAME_TAG: "vm1", JOURNAL_ID_TAG: w.journal.journal_id})

    out = w.launch()

    assert out.state["kind"] == "Ready"
    assert out.state["vm"]["instance_id"] != leftover
    assert live_ids(p) == [out.state["vm"]["instance_id"]]
    assert any(leftover in op[1] for op in p.ops("delete"))
    assert "Compensating/Requesting" not in w.path()    # no boot timeout, no failover
    assert p.calls["create"] == 1


def test_a_live_leftover_of_this_journal_is_adopted_not_duplicated(tmp_path):
    p = cloud(A)
    w = World(tmp_path, [p])
    leftover = p.spawn("vm1", LOC_A, status=Status.PENDING,
                       tags={VM_NAME_TAG: "vm1", JOURNAL_ID_TAG: w.journal.journal_id})
    p.set_status(leftover, Status.RUNNING)

    out = w.launch()

    assert out.state["vm"]["instance_id"] == leftover and p.calls["create"] == 0


# --- item 4: an unreachable cloud is blocked, and never called Leaked ----------------------

def test_an_unreachable_cloud_is_blocked_and_the_next_cloud_is_tried(tmp_path):
    a, b = cloud(A), cloud(B)
    down = ProviderError(ErrorKind.TRANSIENT, "connect timeout to the API")
    for op in ("prepare", "observe", "cleanup", "delete"):
        a.fail(op, down, times=None)
    w = World(tmp_path, [a, b], clouds=[A, B])

    out = w.launch()

    assert out.state["kind"] == "Ready" and out.state["vm"]["location"]["cloud"] == B
    assert a.calls["create"] == 0
    blocks = out.state["search"]["blocked"]
    assert any(blk["cloud"] == A and blk["scope"] == BlockScope.CLOUD for blk in blocks), blocks
    assert "Leaked" not in w.path()


def test_a_location_where_create_was_called_is_leaked_when_it_cannot_be_checked(tmp_path):
    a = cloud(A)
    w = World(tmp_path, [a])
    a.fail("create", ProviderError(ErrorKind.TRANSIENT, "timeout: response lost"), times=None, after=True)
    a.fail("observe", ProviderError(ErrorKind.TRANSIENT, "unreachable"), times=None,
           where=lambda loc: a.calls["create"] > 0)

    out = w.launch()

    assert out.state["kind"] == "Leaked"     # the lost create may have made an instance that bills
    assert out.state["targets"][0]["location"]["cloud"] == A


# --- item 8: a request the journalled VM does not satisfy ---------------------------------

def test_a_changed_request_fails_naming_the_fields_and_keeps_the_vm(tmp_path):
    p = ScriptedProvider(A, [offer(A, "r1"), offer(A, "r1", instance_type="gpu.8x", gpu="A100", gpu_count=8)])
    w = World(tmp_path, [p])
    first = w.launch()
    vm_id = first.state["vm"]["instance_id"]
    w.settings.request = dataclasses.replace(w.settings.request, gpu="A100", gpu_count=8)

    out = w.launch()

    assert out.state["kind"] == "Aborted"
    assert "gpu: the VM has H100, the request asks for A100" in out.state["reason"]
    assert "gpu_count" in out.state["reason"] and "recreate" in out.state["reason"]
    assert live_ids(p) == [vm_id] and p.calls["create"] == 1
    # Nothing was lost: the journal still knows the VM, so down removes it.
    assert w.down().state["kind"] == "Done" and live_ids(p) == []


def test_recreate_replaces_a_vm_that_does_not_match(tmp_path):
    p = ScriptedProvider(A, [offer(A, "r1"), offer(A, "r1", instance_type="gpu.8x", gpu="A100", gpu_count=8)])
    w = World(tmp_path, [p])
    old = w.launch().state["vm"]["instance_id"]
    p.offers = [offer(A, "r1", instance_type="gpu.8x", gpu="A100", gpu_count=8)]   # the fake plans no filter
    w.settings.request = dataclasses.replace(w.settings.request, gpu="A100", gpu_count=8)
    w.settings.recreate = True

    out = w.launch()

    assert out.state["kind"] == "Ready" and out.state["vm"]["gpu"] == "A100"
    assert live_ids(p) == [out.state["vm"]["instance_id"]] and old not in live_ids(p)


class _Crash(BaseException):
    """The controller dies: nothing after the raise point runs (no commit)."""


def _crash_leaving(kind):
    left = {"n": 1}

    def hook(old, new):
        if old["kind"] == kind and left["n"]:
            left["n"] = 0
            raise _Crash("killed leaving %s for %s" % (kind, new["kind"]))
    return hook


def _recreating(tmp_path):
    """A Ready VM, then a request it does not match, with recreate: (cloud, world, old instance id)."""
    p = ScriptedProvider(A, [offer(A, "r1")])
    w = World(tmp_path, [p])
    old = w.launch().state["vm"]["instance_id"]
    p.offers = [offer(A, "r1", instance_type="gpu.8x", gpu="A100", gpu_count=8)]
    w.settings.request = dataclasses.replace(w.settings.request, gpu="A100", gpu_count=8)
    w.settings.recreate = True
    return p, w, old


def _killed_leaving(w, kind):
    """Launch until the controller dies right before the transition out of ``kind`` is committed."""
    try:
        w.launch(before_commit=_crash_leaving(kind))
    except _Crash:
        return
    raise AssertionError("the launch never left %s" % kind)


def test_recreate_killed_before_its_teardown_is_journalled_tore_nothing_down_and_plans_again(tmp_path):
    p, w, old = _recreating(tmp_path)
    _killed_leaving(w, "Reconciling")
    assert live_ids(p) == [old] and not p.ops("delete")   # the new request was only planned
    out = w.launch()
    assert out.state["kind"] == "Ready" and out.state["vm"]["gpu"] == "A100"
    assert live_ids(p) == [out.state["vm"]["instance_id"]] and old not in live_ids(p)


def test_recreate_killed_while_tearing_the_old_vm_down_finishes_it_then_makes_one_vm(tmp_path):
    p, w, old = _recreating(tmp_path)
    _killed_leaving(w, "Compensating")
    assert w.row().state["kind"] == "Compensating" and w.row().state["then"] == "Planning"
    out = w.launch()
    assert out.resumed and out.state["kind"] == "Ready" and out.state["vm"]["gpu"] == "A100"
    assert live_ids(p) == [out.state["vm"]["instance_id"]] and old not in live_ids(p) and p.calls["create"] == 2


def test_recreate_for_a_request_nothing_can_meet_keeps_the_vm(tmp_path):
    p, w, old = _recreating(tmp_path)
    p.offers = []   # no cloud has what the new request asks for

    out = w.launch()

    assert out.state["kind"] == "Aborted" and out.state["vm"]["instance_id"] == old
    assert "nothing was torn down and the VM is kept" in out.state["reason"]
    assert "gpu: the VM has H100, the request asks for A100" in out.state["reason"]
    assert live_ids(p) == [old] and not p.ops("delete") and p.calls["create"] == 1
    assert w.down().state["kind"] == "Done" and live_ids(p) == []   # still the journal's to tear down


def test_recreate_when_planning_cannot_answer_keeps_the_vm_after_its_retries(tmp_path):
    p, w, old = _recreating(tmp_path)
    p.fail("plan", ProviderError(ErrorKind.TRANSIENT, "the catalog did not answer"), times=None)

    out = w.launch()

    assert out.state["kind"] == "Aborted" and out.state["vm"]["instance_id"] == old
    assert "cannot tell yet whether the new request can be met" in out.state["reason"]
    assert live_ids(p) == [old] and not p.ops("delete")


def test_recreate_keeps_a_vm_that_matches(tmp_path):
    p = cloud(A)
    w = World(tmp_path, [p], recreate=True)
    first = w.launch().state["vm"]["instance_id"]

    out = w.launch()

    assert out.state["kind"] == "Ready" and out.state["vm"]["instance_id"] == first and out.state["reused"]


def test_a_cloud_refusing_the_request_beside_one_with_nothing_free_now_is_exhausted_not_aborted(tmp_path):
    refusing = ScriptedProvider(A, plan_error=ProviderError(ErrorKind.INVALID_REQUEST, "regions: fakea has no region r9"))
    sold_out = ScriptedProvider(B, [])
    w = World(tmp_path, [refusing, sold_out], clouds=[A, B])

    out = w.launch()

    # fakeb may have capacity later (retry_until_up waits for it): not a request nothing can ever meet.
    assert out.state["kind"] == "Exhausted" and "regions: fakea has no region r9" in out.state["reason"]
    assert sold_out.calls["plan"] == 1 and sold_out.calls["create"] == 0


class _PlacedCloud(ScriptedProvider):
    """A cloud whose plan takes an offer to answer its country too, ignoring case (as Prime Intellect's
    data center, country or region)."""

    regions_fold = True

    def offer_places(self, offer):
        return [offer.region, "US"]


def test_regions_are_judged_on_a_rerun_exactly_as_plan_matched_the_offer(tmp_path):
    p = _PlacedCloud(A, [offer(A, "r1")])
    w = World(tmp_path, [p], recreate=True)
    first = w.launch().state["vm"]
    assert first["places"] == ["r1", "US"] and first["regions_fold"] is True
    for regions in (["us"], ["R1"], ["eu", "US"]):
        w.settings.request = dataclasses.replace(w.settings.request, regions=regions)
        out = w.launch()
        # Never a mismatch, so never a recreate: the same VM, reused.
        assert out.state["kind"] == "Ready" and out.state["vm"]["instance_id"] == first["instance_id"], regions
    w.settings.request = dataclasses.replace(w.settings.request, regions=["eu"])
    w.settings.recreate = False
    out = w.launch()
    assert out.state["kind"] == "Aborted" and "regions: the VM is in r1, the request allows eu" in out.state["reason"]
    assert live_ids(p) == [first["instance_id"]] and p.calls["create"] == 1


def test_a_vm_record_written_before_places_is_judged_by_its_region_and_zone():
    from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import launch_states
    from ansible_collections.gpuprov.cloud.plugins.module_utils.vm.request_match import in_regions
    journalled = {"kind": "Ready", "reused": False, "search": None,
                  "vm": {"location": {"cloud": A, "region": "r1", "zone": "r1-b"}}}
    old = launch_states.from_dict(journalled).vm    # read as every journalled state is: through the migration
    assert in_regions(old, ["r1"]) and in_regions(old, ["r1-b"]) and not in_regions(old, ["R1", "r2"])


def test_a_vm_on_a_cloud_no_longer_listed_is_a_mismatch(tmp_path):
    a, b = cloud(A), cloud(B)
    w = World(tmp_path, [a, b], clouds=[A])
    w.launch()
    w.settings.clouds = [B]

    out = w.launch()

    assert out.state["kind"] == "Aborted" and "clouds: the VM is on fakea, the request allows fakeb" in out.state["reason"]
    assert b.calls["create"] == 0


# --- item 5: adapter options are journalled and reused; credentials are not ---------------

def _settings(name="vm1", clouds=("local",), options=None):
    from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import InstanceSpec, ResourceRequest
    return VmSettings(vm_name=name, clouds=list(clouds), request=ResourceRequest(vm_name=name),
                      spec=InstanceSpec(vm_name=name, ssh_public_key="ssh-ed25519 AAAA x"),
                      cloud_options=options or {})


def test_journalled_options_win_over_this_runs_and_credentials_are_never_journalled(tmp_path):
    options = {"aws": {"region": "us-east-1", "profile": "ml", "aws_secret_access_key": "s3cr3t",
                       "aws_access_key_id": "AKIAEXAMPLE", "aws_session_token": "tok"},
               "local": {"root": str(tmp_path / "now")}}
    ctx = VmContext(_settings(clouds=("local", "aws"), options=options))
    adopted = ctx.adopt_current_options()
    assert adopted["aws"] == {"region": "us-east-1", "profile": "ml"}
    assert adopted["local"] == {"root": str(tmp_path / "now")}

    later = VmContext(_settings(options={"local": {"root": str(tmp_path / "elsewhere")}}),
                      journalled={"local": {"root": str(tmp_path / "then")}})
    assert later.provider("local").root == str(tmp_path / "then")


def test_planning_journals_the_options_before_any_cloud_call(tmp_path):
    p = cloud(A)
    w = World(tmp_path, [p], cloud_options={A: {"endpoint": "http://x", "api_key": "k"}})

    w.launch()

    assert run_options.recorded(w.journal, "vm1") == {A: {"endpoint": "http://x"}}


# --- item 3: a cancellation asked through the journal --------------------------------------

def test_a_search_stops_when_down_asks_through_the_journal(tmp_path):
    p = ScriptedProvider(A, [])
    w = World(tmp_path, [p], retry_until_up=True)

    def plan_then_get_asked_to_stop(request):
        if p.calls["plan"] == 2:
            row = w.journal.load("vm1")
            assert w.journal.request_cancel("vm1", row.lease_owner, "cancelled: down requested")
        return []
    p.script("plan", plan_then_get_asked_to_stop, times=None)

    out = w.launch()

    assert out.state["kind"] == "Aborted" and out.cancelled
    assert p.calls["plan"] == 2
    assert any("down requested" in (e["note"] or "") for e in w.events())


# --- item 5: a teardown without credentials says so, never Done ----------------------------

def test_a_teardown_refused_for_credentials_is_leaked_at_once(tmp_path):
    p = cloud(A)
    w = World(tmp_path, [p])
    vm = w.launch().state["vm"]
    p.fail("observe", ProviderError(ErrorKind.CREDENTIALS, "no credentials found"), times=None)
    observed_before = p.calls["observe"]

    out = w.down()

    assert out.state["kind"] == "Leaked"
    assert "no credentials found" in out.state["reason"]
    assert live_ids(p) == [vm["instance_id"]]
    assert p.calls["observe"] == observed_before + 1   # refused once: no retry loop


def test_targets_remember_whether_a_create_call_was_made():
    where = LOC_A.to_dict()
    merged = teardown.merge_targets([teardown.target(where, [], created=False)],
                                    [teardown.target(where, [], created=True)])
    assert merged[0]["created"] is True
