"""What a fleet shares through the journal (issue 28, plugins/module_utils/fleet/): the claim and answer rows,
the throttle hold, and the gate in front of an adapter (shared plans, a shared Booting listing, a hold every
worker of one account obeys), on a real SQLite journal with a fake clock; and the executor's SharedWait, which
waits like a Poll without spending the retry budget. Nothing sleeps."""

from __future__ import annotations

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.fleet import gate as fleet_gate
from ansible_collections.gpuprov.cloud.plugins.module_utils.fleet.gate import FleetShare, GatedAdapter
from ansible_collections.gpuprov.cloud.plugins.module_utils.fleet.scope import account_scope
from ansible_collections.gpuprov.cloud.plugins.module_utils.fleet.shared import THROTTLE_HOLD_S, FleetRows
from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.executor import (
    Executor, Next, Retry, SharedWait,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.retry import RetryPolicy
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    ApiLimit, ErrorKind, InstanceSpec, Location, ProviderError, ResourceRequest,
)
from ansible_collections.gpuprov.cloud.tests.fakes.scripted_provider import ScriptedProvider, offer
from ansible_collections.gpuprov.cloud.tests.fakes.toy_machine import ScriptedMachine

WHERE = Location("fake", "r1")


def _throttled(retry_after=None):
    exc = ProviderError(ErrorKind.TRANSIENT, "fake: HTTP 429 Too Many Requests", rate_limited=True)
    exc.retry_after = retry_after
    return exc


class ListingProvider(ScriptedProvider):
    """The scripted cloud with a listing of whole locations (``observe_all``), counted as ``observe_all``."""

    def observe_all(self, location):
        self.calls["observe_all"] += 1
        return self._listing(location)

    def _listing(self, location):
        found = []
        for name in sorted({i.vm_name for i in self.instances.values()}):
            found.extend(ScriptedProvider.observe(self, location, name))
        self.calls["observe"] -= len({i.vm_name for i in self.instances.values()})   # not the VMs' own polls
        return found


def _worker(journal, adapter, owner, options=None, in_machine=True, sleeps=None):
    """One fleet worker's gate in front of ``adapter`` (one VM's run, as the vm task builds it), inside a machine's
    step unless ``in_machine`` is false (then its waits are recorded in ``sleeps``, never slept)."""
    share = FleetShare(journal, owner, sleep=(sleeps.append if sleeps is not None else _never_sleep))
    share.in_machine = in_machine
    return share.gate("fake", adapter, dict(options or {"api_url": "https://one.example"}), {"image": "x"})


def _never_sleep(seconds):
    raise AssertionError("the gate slept %s s inside a machine" % seconds)


def _booting(journal, *names):
    """Journal rows of VMs Booting at WHERE (what the gate looks for before it lists a whole location)."""
    for name in names:
        journal.begin(name, "launch", {"kind": "Booting"}, "Booting (offer 1 of 1: fake:r1:gpu.1x)", False,
                      "owner-" + name, 60.0, None, note="test")


def _spec(name):
    return InstanceSpec(vm_name=name, ssh_public_key="ssh-ed25519 AAAA test")


# -- the rows ---------------------------------------------------------------------------------

def test_one_claimant_asks_and_a_later_answer_refuses_a_stale_claim(journal, clock):
    rows = FleetRows(journal)
    assert rows.answer("q") is None
    assert rows.claim("q", "a", 30, None) is True
    assert rows.claim("q", "b", 30, None) is False          # a's claim is live
    first = rows.put("q", "a", {"offers": [1, 2]})
    assert rows.answer("q") == first and first.value == {"offers": [1, 2]}
    # b looked before a's answer came: its claim is refused, it reads the answer instead.
    assert rows.claim("q", "b", 30, None) is False
    clock.advance(1)
    assert rows.claim("q", "b", 30, first) is True           # it saw that answer and wants a newer one
    rows.release("q", "b")
    assert rows.claim("q", "c", 30, first) is True


def test_a_dead_claimants_claim_runs_out(journal, clock):
    rows = FleetRows(journal)
    assert rows.claim("q", "dead", 30, None)
    clock.advance(29)
    assert not rows.claim("q", "b", 30, None)
    clock.advance(2)
    assert rows.claim("q", "b", 30, None)


def test_a_throttle_hold_doubles_while_the_cloud_keeps_refusing_and_honours_retry_after(journal, clock):
    rows = FleetRows(journal)
    assert rows.hold("fake:x") is None
    assert rows.throttled("fake:x", "429", None).seconds == THROTTLE_HOLD_S
    assert rows.throttled("fake:x", "429", None).seconds == 2 * THROTTLE_HOLD_S
    assert rows.throttled("fake:x", "429", 7).seconds == 7
    clock.advance(6.5)
    assert rows.hold("fake:x").seconds == pytest.approx(0.5)
    assert rows.throttled("fake:x", "429", 0.1).seconds == pytest.approx(0.5)   # never shortens a hold
    clock.advance(1)
    assert rows.hold("fake:x") is None and rows.hold("fake:other") is None


# -- the throttle -------------------------------------------------------------------------------

def test_a_throttle_answer_to_one_worker_holds_every_worker_of_that_account(journal, clock):
    cloud = ScriptedProvider(offers=[offer("fake", "r1")])
    cloud.fail("create", _throttled(retry_after=5))
    first, second = _worker(journal, cloud, "a"), _worker(journal, cloud, "b")
    other_account = _worker(journal, cloud, "c", {"api_url": "https://two.example"})
    prepared = {name: cloud.prepare(cloud.offers[0], _spec(name)) for name in ("vm1", "vm2")}
    with pytest.raises(ProviderError) as got:
        first.create(cloud.offers[0], prepared["vm1"], _spec("vm1"))
    assert got.value.throttled
    with pytest.raises(SharedWait) as held:
        second.create(cloud.offers[0], prepared["vm2"], _spec("vm2"))
    assert held.value.after == pytest.approx(5) and "slow down" in held.value.note and "429" in held.value.note
    assert cloud.calls["create"] == 1                  # the held call never reached the cloud
    other_account.observe(WHERE, "vm3")                # another account is not held
    clock.advance(5.1)
    assert second.create(cloud.offers[0], prepared["vm2"], _spec("vm2"))
    assert cloud.calls["create"] == 2


def test_a_plain_transient_error_holds_nobody(journal):
    cloud = ScriptedProvider(offers=[offer("fake", "r1")])
    cloud.fail("observe", ProviderError(ErrorKind.TRANSIENT, "connection reset"))
    with pytest.raises(ProviderError):
        _worker(journal, cloud, "a").observe(WHERE, "vm1")
    assert _worker(journal, cloud, "b").observe(WHERE, "vm2") == []


def test_the_account_scope_digests_the_credentials_and_never_holds_them():
    scope = account_scope("fake", {"api_key": "s3cret-key", "image": "x"}, ("api_key",), "journal-1")
    assert "s3cret" not in scope and scope.startswith("fake:")
    assert scope == account_scope("fake", {"api_key": "s3cret-key", "image": "y"}, ("api_key",), "journal-1")
    assert scope != account_scope("fake", {"api_key": "other"}, ("api_key",), "journal-1")
    assert scope != account_scope("fake", {"api_key": "s3cret-key"}, ("api_key",), "journal-2")


# -- shared plans -------------------------------------------------------------------------------

def test_the_fleet_plans_a_request_shape_once_and_a_later_round_plans_afresh(journal, clock):
    cloud = ScriptedProvider(offers=[offer("fake", "r1"), offer("fake", "r2")])
    request = ResourceRequest(vm_name="vm1", gpu="H100")
    first = _worker(journal, cloud, "a").plan(request)
    second = _worker(journal, cloud, "b").plan(ResourceRequest(vm_name="vm2", gpu="H100"))
    assert first == second == cloud.offers and cloud.calls["plan"] == 1
    _worker(journal, cloud, "c").plan(ResourceRequest(vm_name="vm3", gpu="A100"))   # another shape
    assert cloud.calls["plan"] == 2
    later = _worker(journal, cloud, "d")
    later.fresh_plans = True
    later.plan(request)
    assert cloud.calls["plan"] == 3
    clock.advance(fleet_gate.PLAN_SHARE_S + 1)
    _worker(journal, cloud, "e").plan(request)
    assert cloud.calls["plan"] == 4


def test_a_worker_waits_for_the_plan_another_is_making_and_checks_the_name_itself(journal):
    cloud = ScriptedProvider(offers=[offer("fake", "r1")])
    asking = _worker(journal, cloud, "a")
    FleetRows(journal).claim(fleet_gate.question_key("plan", asking.scope, {"image": "x"}, {
        "gpu": "H100", "gpu_count": 1, "regions": [], "spot": False}), "a", 30, None)
    with pytest.raises(SharedWait) as waited:
        _worker(journal, cloud, "b").plan(ResourceRequest(vm_name="vm2", gpu="H100"))
    assert waited.value.after == fleet_gate.SHARE_WAIT_S and "planning" in waited.value.note
    with pytest.raises(ProviderError) as bad:
        _worker(journal, cloud, "b").plan(ResourceRequest(vm_name="Not A Label", gpu="H100"))
    assert bad.value.kind == ErrorKind.INVALID_REQUEST and "name" in bad.value.msg
    assert cloud.calls["plan"] == 0


def test_a_failed_plan_is_never_shared(journal):
    cloud = ScriptedProvider(offers=[offer("fake", "r1")])
    cloud.fail("plan", ProviderError(ErrorKind.TRANSIENT, "catalog down"))
    with pytest.raises(ProviderError):
        _worker(journal, cloud, "a").plan(ResourceRequest(vm_name="vm1", gpu="H100"))
    assert _worker(journal, cloud, "b").plan(ResourceRequest(vm_name="vm2", gpu="H100")) == cloud.offers
    assert cloud.calls["plan"] == 2


def test_a_lookup_prepare_makes_is_shared_for_a_while_and_a_failed_one_is_not(journal, clock):
    cloud = ScriptedProvider(offers=[offer("fake", "r1")])
    reads = []

    def image():
        reads.append(1)
        if len(reads) == 1:
            raise ProviderError(ErrorKind.TRANSIENT, "images: connection reset")
        return ["img-1", "name:gpu"]

    first, second = _worker(journal, cloud, "a"), _worker(journal, cloud, "b")
    with pytest.raises(ProviderError):
        cloud.remembered("image", ["r1"], image)          # through the last-built worker's gate
    assert first._adapter.remembered("image", ["r1"], image) == ["img-1", "name:gpu"]
    assert second._adapter.remembered("image", ["r1"], image) == ["img-1", "name:gpu"]
    assert len(reads) == 2
    clock.advance(fleet_gate.LOOKUP_SHARE_S + 1)
    second._adapter.remembered("image", ["r1"], image)
    assert len(reads) == 3
    assert ScriptedProvider().remembered("image", ["r1"], image) and len(reads) == 4   # ungated: always read


# -- the shared Booting listing -----------------------------------------------------------------

def _made(cloud, name):
    spec = _spec(name)
    return cloud.create(cloud.offers[0], cloud.prepare(cloud.offers[0], spec), spec)


def _booted(cloud, *names):
    return {name: _made(cloud, name) for name in names}


def test_one_listing_serves_every_vm_booting_there_and_none_older_than_the_vm_or_its_poll(journal, clock):
    cloud = ListingProvider(offers=[offer("fake", "r1")], boot_observes=5)
    made = _booted(cloud, "vm1", "vm2", "vm3")
    _booting(journal, *made)
    workers = {name: _worker(journal, cloud, "w-" + name) for name in made}
    since = clock() - 10
    for name, instance_id in made.items():
        seen = workers[name].observe_booting(WHERE, name, since, 2.0)
        assert instance_id in [o.instance_id for o in seen]
    assert cloud.calls["observe_all"] == 1 and cloud.calls["observe"] == 0
    clock.advance(3)                                            # older than the poll: listed again
    workers["vm1"].observe_booting(WHERE, "vm1", since, 2.0)
    assert cloud.calls["observe_all"] == 2
    workers["vm2"].observe_booting(WHERE, "vm2", clock() + 1, 60.0)   # taken before vm2 entered Booting
    assert cloud.calls["observe_all"] == 3


def test_an_adapter_without_a_whole_listing_or_a_vm_booting_alone_is_observed_per_vm(journal, clock):
    lister = ListingProvider(offers=[offer("fake", "r1")])
    alone = _booted(lister, "vm9")
    _booting(journal, "vm9")
    assert [o.instance_id for o in _worker(journal, lister, "b").observe_booting(WHERE, "vm9", clock() - 1, 5.0)] == [
        alone["vm9"]]
    assert lister.calls["observe_all"] == 0 and lister.calls["observe"] == 1
    cloud = ScriptedProvider(offers=[offer("fake", "r1")])
    made = _booted(cloud, "vm1")
    _booting(journal, "vm1", "vm2")
    seen = _worker(journal, cloud, "a").observe_booting(WHERE, "vm1", clock() - 1, 5.0)
    assert [o.instance_id for o in seen] == [made["vm1"]] and cloud.calls["observe"] == 1


def test_the_gate_passes_everything_else_through(journal):
    cloud = ScriptedProvider(offers=[offer("fake", "r1")])
    gated = _worker(journal, cloud, "a")
    assert isinstance(gated, GatedAdapter)
    assert gated.capabilities() == cloud.capabilities() and gated.name == "fake"


# -- the budget: the vendor's documented limits, for the whole fleet ---------------------------------

class LimitedProvider(ScriptedProvider):
    """The scripted cloud with a documented limit of 5 requests a second at most 2 at once; each call is one request."""

    api_limits = (ApiLimit(5, 1.0, burst=2),)

    def observe(self, location, vm_name):
        self.paced()
        return super().observe(location, vm_name)


def test_the_fleet_keeps_its_requests_together_under_the_documented_limit(journal, clock):
    """Two at once, then one every 0.2 s, between all workers: each request waits for its slot, in the order they
    came, just before it is sent; none is refused, so no step loses the requests it made already."""
    sleeps = []

    def sleep(seconds):
        sleeps.append(seconds)
        clock.advance(seconds)

    clouds = [LimitedProvider(offers=[offer("fake", "r1")]) for _worker_no in range(2)]   # one adapter a worker
    first, second = (_worker(journal, cloud, owner, sleeps=None) for cloud, owner in zip(clouds, "ab", strict=True))
    for worker in (first, second):
        worker._share._sleep = sleep
    first.observe(WHERE, "vm1")
    second.observe(WHERE, "vm2")          # the bucket's two at once, between both workers
    assert sleeps == []
    first.observe(WHERE, "vm1")           # the third waits 0.2 s for its slot
    second.observe(WHERE, "vm2")          # the fourth waits its own 0.2 s after it
    assert sleeps == [pytest.approx(0.2), pytest.approx(0.2)]
    assert clouds[0].calls["observe"] == clouds[1].calls["observe"] == 2
    rows = FleetRows(journal)
    assert rows.take(first.scope, [(2.0, 5.0)]) == pytest.approx(0.2)     # a reservation queues behind
    assert rows.take(first.scope, [(2.0, 5.0)]) == pytest.approx(0.4)
    assert ApiLimit(250, 60.0).bucket() == (25.0, 3.75) and str(ApiLimit(250, 60.0)) == "250 requests a minute"
    assert str(ApiLimit(20, 1.0, burst=100)) == "100 at once, then 20 per 1s"


def test_outside_a_machine_the_gate_sleeps_the_wait_out_and_then_calls(journal, clock):
    cloud = ScriptedProvider(offers=[offer("fake", "r1")])
    FleetRows(journal).throttled(_worker(journal, cloud, "a").scope, "HTTP 429", 3.0)
    sleeps = []
    assert _worker(journal, cloud, "b", in_machine=False, sleeps=sleeps).observe(WHERE, "vm1") == []
    assert sleeps == [pytest.approx(3.0)] and cloud.calls["observe"] == 1


# -- the executor ---------------------------------------------------------------------------------

def test_a_shared_wait_waits_like_a_poll_and_leaves_the_retry_streak_counting(journal, clock):
    waits = []
    policy = RetryPolicy(max_attempts=2, initial_backoff=1.0, max_backoff=1.0, jitter=0.0)
    machine = ScriptedMachine({"A": [Retry("throttled"), SharedWait(4.0, "held for the fleet"), Retry("again"),
                                     Next({"kind": "Done"})]}, policy=policy)

    def wait(seconds):
        waits.append(seconds)
        clock.advance(seconds)

    executor = Executor(journal, machine, clock=clock, heartbeat=False)
    outcome = executor.run("k", lambda row, kind: {"kind": "A"}, wait_poll=wait)

    assert outcome.state == {"kind": "Failed", "from": "A", "error": "again"}   # two Retries in a row, held between
    assert waits == [1.0, 4.0]
    notes = [(e["event"], e["note"]) for e in journal.events("k")]
    assert ("poll", "held for the fleet") in notes
