"""The shared conformance suite: the seed's 4.1 contract, checked for every adapter
through its fake (one harness per cloud under harnesses/, see harness.py).

What each check pins down:

* plan creates nothing (the fake's resources are unchanged) and returns offers of
  this cloud that survive a JSON round trip (they travel in journalled states);
* prepare is idempotent: twice gives the same JSON-serialisable result and no
  extra resources; cleanup alone removes what prepare made;
* create labels the instance with the VM identity: observe finds it by name, and
  only it (another VM's instance is never returned); the endpoint is reported only
  when the instance is usable;
* delete of an unknown id and of an already-deleted id succeeds; cleanup is
  idempotent; after delete + cleanup nothing of the VM is left;
* every error kind the harness can inject maps to that kind;
* every adapter says what a guest power-off does to billing (a PowerOffBilling value, with its source), and
  where its create request has a shutdown setting the fake received it when asked and not otherwise;
* no adapter sleeps or polls: time.sleep raises inside every primitive, and the
  adapter's source holds no sleep and no ``while True``;
* create sends one request that makes something, and one the vendor refuses as
  Transient is not sent again within the call, by the adapter or by its SDK (clouds
  whose fake logs its requests);
* a crash right after create is adoptable: a fresh adapter instance finds the VM;
* journal identity: what create made is observed with the adapter's journal id; an
  adapter of another journal observes it with the first's id (the core refuses the
  name on that), and its cleanup, alone or after its own prepare, leaves every
  resource of the first in place (harnesses build their adapter with a journal id);
* list_owned (the orphan sweep's listing, which every adapter implements): sweep_locations
  covers where create puts an instance; list_owned there finds it with its VM name and journal id, and another
  journal's with that journal's id, lists prepare's side resources, changes nothing,
  never sleeps, and reports nothing of a VM after delete + cleanup;
* crash points: a crash before each direct call of create and of delete, and after
  each returned, leaves a world a fresh adapter tells the truth about, from which the
  core's recovery reaches exactly one usable instance (create) or none (delete) and
  leaves no resource behind. The matrix (point x cloud x outcome) is printed
  (``pytest -s``) and is the message of a failure.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import io
import json
import pathlib
import re
import sys
import threading
import time
import tokenize
import uuid

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    ANY_REGION, Capabilities, ErrorKind, Observed, Offer, Owned, PowerOffBilling, Provider, ProviderError, ResourceKind, Status,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.owned_common import UNPLACED
from ansible_collections.gpuprov.cloud.tests.conformance.harness import adapter_class

PRIMITIVES = ("plan", "prepare", "create", "observe", "delete", "cleanup")


# -- helpers ---------------------------------------------------------------------------

def _other_spec(harness, suffix="-b"):
    """The harness's spec for a second VM (the name keeps the harness's prefix)."""
    name = harness.spec.vm_name[:63 - len(suffix)].rstrip("-") + suffix
    return dataclasses.replace(harness.spec, vm_name=name)


def _offer(harness) -> Offer:
    offers = harness.provider.plan(harness.request)
    assert offers, "plan returned no offer for the harness's request"
    return offers[0]


def _launch(harness, offer, spec, provider=None):
    provider = provider or harness.provider
    prepared = provider.prepare(offer, spec)
    instance_id = provider.create(offer, prepared, spec)
    assert isinstance(instance_id, str) and instance_id
    return instance_id


def _ids(observed):
    return sorted(o.instance_id for o in observed)


def _teardown(harness, location, *names, provider=None):
    """Best effort: what the core's teardown machine does, without its waiting."""
    provider = provider or harness.provider
    harness.clear_errors()
    for name in names:
        with contextlib.suppress(ProviderError):
            found = provider.observe(location, name)
            if found:
                provider.delete(location, name, _ids(found))
                for seen in found:
                    harness.settle_deleted(location, seen.instance_id)
            provider.cleanup(location, name)


def _delete_and_clean(harness, location, name, ids):
    harness.provider.delete(location, name, ids)
    for instance_id in ids:
        harness.settle_deleted(location, instance_id)
    harness.provider.cleanup(location, name)


@contextlib.contextmanager
def _no_sleep():
    """time.sleep raises when called from this thread (fake servers' threads may sleep)."""
    real, caller = time.sleep, threading.current_thread()
    calls = []

    def guarded(seconds):
        if threading.current_thread() is caller:
            calls.append(seconds)
            raise AssertionError("the adapter slept for %r s; waiting belongs to the core" % (seconds,))
        return real(seconds)

    time.sleep = guarded
    try:
        yield calls
    finally:
        time.sleep = real
    assert not calls, "the adapter slept: %r" % (calls,)


def _code_only(source: str) -> str:
    """The source without comments and string literals (docstrings may say 'sleep(')."""
    kept = [tok.string for tok in tokenize.generate_tokens(io.StringIO(source).readline)
            if tok.type not in (tokenize.COMMENT, tokenize.STRING)]
    return " ".join(kept)


# -- plan --------------------------------------------------------------------------------

def test_plan_creates_nothing(harness):
    before = harness.resources()
    offers = harness.provider.plan(harness.request)
    assert harness.resources() == before
    assert offers, "plan returned no offer for the harness's request"
    for offer in offers:
        assert isinstance(offer, Offer)
        assert offer.cloud == harness.provider.name
        assert Offer.from_dict(json.loads(json.dumps(offer.to_dict()))) == offer


# -- prepare -----------------------------------------------------------------------------

def test_prepare_is_idempotent_and_cleanup_removes_it(harness):
    offer = _offer(harness)
    before = harness.resources()
    try:
        first = harness.provider.prepare(offer, harness.spec)
        after_first = harness.resources()
        second = harness.provider.prepare(offer, harness.spec)
        assert second == first
        assert harness.resources() == after_first, "a second prepare made more resources"
        assert json.loads(json.dumps(first)) == first, "prepare must return JSON-serialisable data"
        harness.provider.cleanup(offer.location, harness.spec.vm_name)
        assert harness.resources() == before
    finally:
        _teardown(harness, offer.location, harness.spec.vm_name)


# -- create / observe --------------------------------------------------------------------

def test_create_labels_the_vm_and_observe_finds_it(harness):
    offer = _offer(harness)
    before = harness.resources()
    name = harness.spec.vm_name
    try:
        instance_id = _launch(harness, offer, harness.spec)
        assert instance_id in harness.instance_ids()
        harness.settle(offer.location, instance_id)
        found = harness.provider.observe(offer.location, name)
        assert _ids(found) == [instance_id]
        seen = found[0]
        assert isinstance(seen, Observed) and seen.status in Status.ALL
        assert Observed.from_dict(json.loads(json.dumps(seen.to_dict()))) == seen
        assert seen.usable, "settled instance is not usable: %r" % (seen,)
        assert seen.endpoint.host and isinstance(seen.endpoint.port, int) and 0 < seen.endpoint.port < 65536

        _delete_and_clean(harness, offer.location, name, [instance_id])
        assert harness.provider.observe(offer.location, name) == []
        assert instance_id not in harness.instance_ids()
        assert harness.resources() == before, "delete + cleanup left resources of the VM"
    finally:
        _teardown(harness, offer.location, name)


def test_observe_returns_exactly_this_vms_instances(harness):
    offer = _offer(harness)
    other = _other_spec(harness)
    try:
        mine = _launch(harness, offer, harness.spec)
        theirs = _launch(harness, offer, other)
        assert mine != theirs
        assert _ids(harness.provider.observe(offer.location, harness.spec.vm_name)) == [mine]
        assert _ids(harness.provider.observe(offer.location, other.vm_name)) == [theirs]
        assert harness.provider.observe(offer.location, _other_spec(harness, "-nobody").vm_name) == []
    finally:
        _teardown(harness, offer.location, harness.spec.vm_name, other.vm_name)


def test_observe_all_lists_every_vm_of_the_journal_as_observe_does(harness):
    """The fleet's shared poll (Provider.observe_all, fleet/gate.py): where an adapter has it, one listing
    holds each VM's instance exactly as that VM's observe reports it, before and after it settles; a VM
    deleted drops out. An adapter without it says None and the core observes per VM."""
    offer = _offer(harness)
    other = _other_spec(harness)
    listed = harness.provider.observe_all(offer.location)
    if listed is None:
        assert type(harness.provider).observe_all is Provider.observe_all, "an adapter's observe_all said None"
        pytest.skip("%s has no listing of whole locations: the core observes per VM" % harness.provider.name)
    try:
        mine = _launch(harness, offer, harness.spec)
        theirs = _launch(harness, offer, other)
        for settle in (False, True):
            if settle:
                harness.settle(offer.location, mine)
                harness.settle(offer.location, theirs)
            every = {o.instance_id: o for o in harness.provider.observe_all(offer.location)}
            for spec, instance_id in ((harness.spec, mine), (other, theirs)):
                alone = [o for o in harness.provider.observe(offer.location, spec.vm_name) if o.instance_id == instance_id]
                assert instance_id in every, "observe_all left out %s (%s)" % (instance_id, spec.vm_name)
                assert every[instance_id].journal_id == alone[0].journal_id == _journal_id(harness)
                if settle:   # a boot may move on between two reads; a settled instance may not
                    assert every[instance_id] == alone[0], "observe_all and observe disagree on %s" % instance_id
        _delete_and_clean(harness, offer.location, other.vm_name, [theirs])
        gone = {o.instance_id: o for o in harness.provider.observe_all(offer.location)}
        assert mine in gone and (theirs not in gone or gone[theirs].leaving)
    finally:
        _teardown(harness, offer.location, harness.spec.vm_name, other.vm_name)


def test_endpoint_only_when_usable(harness):
    offer = _offer(harness)
    spec = _other_spec(harness, "-lag")
    try:
        instance_id = harness.create_unreachable(spec)
        if instance_id is None:
            pytest.skip("the %s harness cannot make an instance that is not reachable yet" % harness.cloud)
        found = harness.provider.observe(offer.location, spec.vm_name)
        assert _ids(found) == [instance_id]
        assert not found[0].usable and found[0].endpoint is None, (
            "observe reported an endpoint for an instance that cannot be reached: %r" % (found[0],))
    finally:
        _teardown(harness, offer.location, spec.vm_name)


# -- what a guest power-off does to billing (issue 27) -------------------------------------

def test_capabilities_say_what_a_guest_poweroff_does_to_billing(harness):
    caps = harness.provider.capabilities()
    assert caps.poweroff_billing in PowerOffBilling.ALL, (
        "the %s adapter does not say what a guest power-off does to billing: Capabilities.poweroff_billing is %r, "
        "expected one of %s" % (harness.cloud, caps.poweroff_billing, ", ".join(PowerOffBilling.ALL)))
    assert caps.poweroff_source.strip(), "the %s adapter names no source for its poweroff_billing" % harness.cloud
    if caps.poweroff_setting is None:
        assert caps.poweroff_billing_unset is None, "a poweroff_billing_unset without a poweroff_setting"
    else:
        assert re.match(r"^[A-Za-z_]+=\S+$", caps.poweroff_setting), caps.poweroff_setting
        assert caps.poweroff_billing_unset in PowerOffBilling.ALL, (
            "the %s adapter has a shutdown setting but does not say what a power-off does without it" % harness.cloud)
        assert caps.poweroff_billing_unset != caps.poweroff_billing, "a shutdown setting that changes nothing"
    assert Capabilities.from_dict(json.loads(json.dumps(caps.to_dict()))) == caps


def test_create_carries_the_shutdown_setting_only_when_asked(harness):
    caps = harness.provider.capabilities()
    offer = _offer(harness)
    asked = dataclasses.replace(harness.spec, terminate_on_guest_shutdown=True)
    plain = _other_spec(harness, "-plain")
    assert not plain.terminate_on_guest_shutdown
    try:
        instance_id = _launch(harness, offer, asked)   # asking never breaks a create, setting or none
        assert _ids(harness.provider.observe(offer.location, asked.vm_name)) == [instance_id]
        if caps.poweroff_setting is not None:
            assert harness.create_shutdown_setting() == caps.poweroff_setting, "asked, the create request lacked it"
            _launch(harness, offer, plain)
            assert harness.create_shutdown_setting() is None, "not asked, the create request carried a shutdown setting"
    finally:
        _teardown(harness, offer.location, asked.vm_name, plain.vm_name)


# -- delete / cleanup --------------------------------------------------------------------

def test_delete_unknown_and_already_deleted_ids_succeeds(harness):
    offer = _offer(harness)
    name = harness.spec.vm_name
    harness.provider.delete(offer.location, name, [harness.unknown_instance_id()])
    harness.provider.delete(offer.location, name, [])
    try:
        instance_id = _launch(harness, offer, harness.spec)
        harness.provider.delete(offer.location, name, [instance_id])
        harness.settle_deleted(offer.location, instance_id)
        harness.provider.delete(offer.location, name, [instance_id])
        assert instance_id not in _ids(harness.provider.observe(offer.location, name))
    finally:
        _teardown(harness, offer.location, name)


def test_cleanup_is_idempotent_and_leaves_nothing(harness):
    offer = _offer(harness)
    name = harness.spec.vm_name
    before = harness.resources()
    harness.provider.cleanup(offer.location, name)   # nothing there yet: still success
    try:
        instance_id = _launch(harness, offer, harness.spec)
        _delete_and_clean(harness, offer.location, name, [instance_id])
        harness.provider.cleanup(offer.location, name)
        assert harness.resources() == before
    finally:
        _teardown(harness, offer.location, name)


# -- errors ------------------------------------------------------------------------------

def test_every_error_kind_maps(harness):
    kinds = list(harness.error_kinds())
    if not kinds:
        pytest.skip("the %s harness injects no errors" % harness.cloud)
    assert set(kinds) <= set(ErrorKind.ALL)
    offer = _offer(harness)
    name = harness.spec.vm_name
    calls = {
        "plan": lambda: harness.provider.plan(harness.request),
        "prepare": lambda: harness.provider.prepare(offer, harness.spec),
        "create": lambda: harness.provider.create(offer, prepared, harness.spec),
        "observe": lambda: harness.provider.observe(offer.location, name),
        "delete": lambda: harness.provider.delete(offer.location, name, [harness.unknown_instance_id()]),
        "cleanup": lambda: harness.provider.cleanup(offer.location, name),
    }
    checked, skipped = [], []
    try:
        prepared = harness.provider.prepare(offer, harness.spec)
        for kind in kinds:
            for primitive in PRIMITIVES:
                try:
                    harness.inject_error(primitive, kind)
                except pytest.skip.Exception as why:
                    skipped.append("%s/%s: %s" % (primitive, kind, why))
                    continue
                try:
                    with pytest.raises(ProviderError) as info:
                        calls[primitive]()
                finally:
                    harness.clear_errors()
                assert info.value.kind == kind, "%s injected %s, adapter raised %r" % (primitive, kind, info.value)
                checked.append((primitive, kind))
            assert any(k == kind for _primitive, k in checked), (
                "the harness lists %s but no primitive could be made to raise it: %s" % (kind, skipped))
    finally:
        _teardown(harness, offer.location, name)
    assert checked


# -- no sleeps, no polling ---------------------------------------------------------------

def test_no_adapter_sleeps_or_loops(harness):
    cls = adapter_class(harness.provider)
    source_file = pathlib.Path(inspect.getsourcefile(cls))
    package = sorted(source_file.parent.glob("*.py"))  # the adapter's package: adapter, catalog, errors...
    assert source_file.name == "__init__.py" and len(package) >= 1, "an adapter is a package: %s" % source_file
    for path in package:
        code = _code_only(path.read_text())
        assert not re.search(r"\bwhile\s+True\b", code), "%s polls (while True)" % path.name
        assert not re.search(r"\bsleep\s*\(", code), "%s sleeps" % path.name

    offer = _offer(harness)
    name = harness.spec.vm_name
    try:
        with _no_sleep():
            harness.provider.plan(harness.request)
            prepared = harness.provider.prepare(offer, harness.spec)
            instance_id = harness.provider.create(offer, prepared, harness.spec)
        harness.settle(offer.location, instance_id)
        with _no_sleep():
            harness.provider.observe(offer.location, name)
            harness.provider.delete(offer.location, name, [instance_id])
        harness.settle_deleted(offer.location, instance_id)
        with _no_sleep():
            harness.provider.cleanup(offer.location, name)
    finally:
        _teardown(harness, offer.location, name)


# -- one creating request, never sent twice ------------------------------------------------

def test_create_sends_one_creating_request_and_never_repeats_a_refused_one(harness):
    """The contract's "No waiting": create sends one request that makes something (AWS: one per zone
    it tries; one here, the first zone having room), and a request the vendor refuses as Transient is
    not sent again within the call, by the adapter or by its SDK: the core retries, observing first."""
    harness.mutating_requests()  # skips where the fake keeps no log
    offer = _offer(harness)
    try:
        prepared = harness.provider.prepare(offer, harness.spec)
        sent = len(harness.mutating_requests())
        harness.inject_error("create", ErrorKind.TRANSIENT)
        try:
            with pytest.raises(ProviderError) as info:
                harness.provider.create(offer, prepared, harness.spec)
        finally:
            harness.clear_errors()
        refused = harness.mutating_requests()[sent:]
        assert info.value.kind == ErrorKind.TRANSIENT, info.value
        assert len(refused) <= 1, "create sent a request refused as Transient again: %s" % refused
        sent = len(harness.mutating_requests())
        harness.provider.create(offer, prepared, harness.spec)
        made = harness.mutating_requests()[sent:]
        assert len(made) == 1, "create sent %d requests that make something: %s" % (len(made), made)
    finally:
        _teardown(harness, offer.location, harness.spec.vm_name)


# -- crash adoption ----------------------------------------------------------------------

def test_crash_after_create_is_adoptable(harness):
    offer = _offer(harness)
    name = harness.spec.vm_name
    before = harness.resources()
    try:
        instance_id = _launch(harness, offer, harness.spec)
        # The controller dies here: nothing of the first adapter instance survives.
        fresh = harness.new_provider()
        assert fresh is not harness.provider
        assert instance_id in _ids(fresh.observe(offer.location, name))
        fresh.delete(offer.location, name, [instance_id])
        harness.settle_deleted(offer.location, instance_id)
        fresh.cleanup(offer.location, name)
        assert harness.resources() == before
    finally:
        _teardown(harness, offer.location, name)


# -- journal identity --------------------------------------------------------------------

def _journal_id(harness) -> str:
    journal_id = harness.provider.journal_id
    assert journal_id, ("the %s harness builds its adapter without a journal id; the core always passes "
                        "one (Provider(options, journal_id=...))" % harness.cloud)
    return journal_id


def _other_journal(harness):
    """An adapter on the same fake working for another journal (a second controller)."""
    other_id = "other" + uuid.uuid4().hex[:27]
    assert other_id != _journal_id(harness)
    return adapter_class(harness.provider)(dict(harness.provider.options), journal_id=other_id)


def test_observe_reports_the_journal_that_made_it(harness):
    journal_id = _journal_id(harness)
    offer = _offer(harness)
    name = harness.spec.vm_name
    try:
        instance_id = _launch(harness, offer, harness.spec)
        found = harness.new_provider().observe(offer.location, name)
        assert [(o.instance_id, o.journal_id) for o in found] == [(instance_id, journal_id)], (
            "observe must report the journal id the instance was made with: %r" % (found,))
        assert found[0].owned_by(journal_id)
    finally:
        _teardown(harness, offer.location, name)


def test_another_journal_sees_but_never_removes(harness):
    journal_id = _journal_id(harness)
    offer = _offer(harness)
    name = harness.spec.vm_name
    other = _other_journal(harness)
    try:
        instance_id = _launch(harness, offer, harness.spec)
        harness.settle(offer.location, instance_id)
        made = harness.resources()

        # The second controller sees the name taken, by whom: the core refuses on that.
        found = other.observe(offer.location, name)
        assert [(o.instance_id, o.journal_id) for o in found] == [(instance_id, journal_id)], (
            "another journal's observe must report the first's instance with the first's journal id: %r"
            % (found,))
        assert not found[0].owned_by(other.journal_id)

        # Its cleanup (alone, and after its own prepare: a compensation) neither waits for
        # nor removes anything of the first controller's.
        other.cleanup(offer.location, name)
        assert harness.resources() == made, "another journal's cleanup removed the first's resources"
        other.prepare(offer, harness.spec)
        other.cleanup(offer.location, name)
        assert harness.resources() == made, (
            "another journal's prepare + cleanup changed the first's resources: gone %s, left %s" % (
                sorted(made - harness.resources()), sorted(harness.resources() - made)))
        assert _ids(harness.provider.observe(offer.location, name)) == [instance_id]
    finally:
        _teardown(harness, offer.location, name)
        with contextlib.suppress(ProviderError):
            other.cleanup(offer.location, name)


# -- crash points inside create and delete -----------------------------------------------
#
# The controller can die between any two steps of a primitive. The suite finds the steps
# without knowing the adapter: a profiler counts the calls made directly from the
# primitive's own frame (Python and C calls alike: an os.kill or an API call is one), and
# a second run raises SimulatedCrash just before the k-th, for every k, and once after
# the primitive returned (its result lost). After each crash a fresh adapter (nothing of
# the first survives) must tell the truth, and the core's recovery must end with exactly
# one instance (create) or none (delete) and no leftover resources. SimulatedCrash is a
# BaseException, so ``except Exception`` does not stop it; ``finally`` blocks and context
# managers still run, where a real kill would skip them (so an adapter must not rely on
# them for what a crash leaves behind). The dying adapter and the one that
# recovers are fresh (harness.new_provider()); prepare, idempotent and journalled by the
# core, is made once a point by the harness's own adapter (sparing an SDK client start-up),
# and the recovering create gets what it returned, as a re-run gets it from the journal.

class SimulatedCrash(BaseException):
    """The controller dies here."""


class _CrashTracer:
    """A profiler counting the direct calls of one activation of ``code``; with
    ``crash_at`` it raises SimulatedCrash just before that call (1-based)."""

    def __init__(self, code, crash_at=None):
        self.code, self.crash_at = code, crash_at
        self.frame = None
        self.calls = []        # "L<line> <callee>" of each direct call, in order
        self.crashed = False
        self._previous = None

    def __enter__(self):
        self._previous = sys.getprofile()
        sys.setprofile(self)
        return self

    def __exit__(self, *exc):
        sys.setprofile(self._previous)
        return False

    def __call__(self, frame, event, arg):
        if event == "call":
            if self.frame is None:
                if frame.f_code is self.code:
                    self.frame = frame
                return
            if frame.f_back is not self.frame:
                return
            callee = getattr(frame.f_code, "co_qualname", frame.f_code.co_name)
        elif event == "c_call":
            if self.frame is None or frame is not self.frame:
                return
            callee = getattr(arg, "__qualname__", None) or getattr(arg, "__name__", None) or repr(arg)
        else:
            return
        self.calls.append("L%d %s" % (self.frame.f_lineno, callee))
        if self.crash_at is not None and len(self.calls) == self.crash_at and not self.crashed:
            self.crashed = True
            raise SimulatedCrash(self.calls[-1])


def _primitive_code(provider, primitive):
    """The code object of the adapter's own ``primitive`` (decorators unwrapped)."""
    return inspect.unwrap(getattr(adapter_class(provider), primitive)).__code__


class _Matrix:
    """Rows of point x cloud x outcome, printed as they come and kept for the assertion."""

    def __init__(self, cloud, primitive):
        self.cloud, self.primitive = cloud, primitive
        self.rows = []

    def add(self, point, outcome):
        self.rows.append((point, outcome))
        print("crash-matrix  %-6s  %-52s  %s" % (self.cloud, point[:52], outcome))

    @property
    def failed(self):
        return [(point, outcome) for point, outcome in self.rows if not outcome.startswith("ok")]

    def totals(self):
        return "crash-matrix totals  %s/%s: %d points, %d ok, %d failed" % (
            self.cloud, self.primitive, len(self.rows), len(self.rows) - len(self.failed), len(self.failed))

    def report(self):
        lines = ["crash-matrix  %-6s  %-52s  %s" % (self.cloud, p[:52], o) for p, o in self.rows]
        return "\n".join(lines + [self.totals()])


def _truth(harness, fresh, location, name, live_before):
    """A fresh adapter's observe, and what it failed to report of the live instances."""
    found = fresh.observe(location, name)
    missing = sorted(set(harness.instance_ids()) - live_before - {o.instance_id for o in found})
    return found, (["observe misses live instance(s) %s" % missing] if missing else [])


def _settle_gone(harness, location, instance_ids):
    for instance_id in instance_ids:
        harness.settle_deleted(location, instance_id)


def _recover_create(harness, offer, prepared, before, live_before):
    """What the core does after a crash inside create (its journal holds ``prepared``);
    returns (how, problems)."""
    name, journal_id, location = harness.spec.vm_name, harness.provider.journal_id, offer.location
    fresh = harness.new_provider()
    found, problems = _truth(harness, fresh, location, name, live_before)
    foreign = [o.instance_id for o in found if not o.owned_by(journal_id)]
    if foreign:
        problems.append("observe reports instances of another journal %s" % foreign)
    own = [o for o in found if o.owned_by(journal_id)]
    leftovers = [o.instance_id for o in own if not o.live]
    live = [o for o in own if o.live]
    if leftovers:  # the core deletes them, then creates again at once
        fresh.delete(location, name, leftovers)
    if len(live) > 1:
        problems.append("duplicate: %d live instances %s" % (len(live), _ids(live)))
    if live:
        instance_id, how = live[0].instance_id, "adopted a %s instance" % live[0].status
    else:
        instance_id = fresh.create(offer, prepared, harness.spec)
        how = "created afresh"
    if leftovers:
        how += " after deleting %d %s leftover(s)" % (len(leftovers), "/".join(
            sorted({o.status for o in own if not o.live})))
    _settle_gone(harness, location, leftovers)
    harness.settle(location, instance_id)
    after = fresh.observe(location, name)
    live_after = [o for o in after if o.live]
    if _ids(live_after) != [instance_id] or not live_after[0].usable:
        problems.append("not exactly one usable instance after recovery: %r" % (after,))
    unseen = sorted(set(harness.instance_ids()) - live_before - {instance_id})
    if unseen:
        problems.append("live instances besides the recovered one: %s" % unseen)
    mine = _ids(o for o in after if o.owned_by(journal_id))
    fresh.delete(location, name, mine)
    _settle_gone(harness, location, mine)
    fresh.cleanup(location, name)
    problems.extend(_leaks(harness, before))
    return how, problems


def _recover_delete(harness, location, before, live_before):
    """What the core's teardown does after a crash inside delete; returns (how, problems)."""
    name, journal_id = harness.spec.vm_name, harness.provider.journal_id
    fresh = harness.new_provider()
    found, problems = _truth(harness, fresh, location, name, live_before)
    own = [o for o in found if o.owned_by(journal_id)]
    again = [o.instance_id for o in own if not o.leaving]
    if again:
        fresh.delete(location, name, again)
    _settle_gone(harness, location, _ids(own))
    fresh.cleanup(location, name)
    left = fresh.observe(location, name)
    if left:
        problems.append("observe still reports %r after teardown" % (left,))
    unseen = sorted(set(harness.instance_ids()) - live_before)
    if unseen:
        problems.append("live instances after teardown: %s" % unseen)
    problems.extend(_leaks(harness, before))
    how = ("deleted %s again" % again) if again else ("nothing left to delete (%s)" % (
        "/".join(sorted({o.status for o in own})) or "gone"))
    return how, problems


def _leaks(harness, before):
    now = harness.resources()
    if now == before:
        return []
    return ["resources differ from before the point: left %s, gone %s" % (sorted(now - before), sorted(before - now))]


def _crash_run(harness, run, code, crash_at):
    """Run ``run(tracer)``; (tracer, problem or None). crash_at None = the after-return point."""
    tracer = _CrashTracer(code, crash_at)
    try:
        run(tracer)
    except SimulatedCrash:
        return tracer, None
    if crash_at is None:
        return tracer, None
    if tracer.crashed:
        return tracer, "the adapter swallowed the crash (it caught a BaseException)"
    # A primitive whose calls depend on what it finds (delete stopping each process it
    # sees) may make fewer calls this time: the point is not reached, and what is checked
    # is the same as after a crash right after it returned.
    return tracer, None


def _crash_matrix(harness, primitive, point_run, recover):
    """Count the direct calls of ``primitive`` in a run whose result is then lost (the
    after-return point), then crash before each of those calls in turn."""
    offer = _offer(harness)
    code = _primitive_code(harness.provider, primitive)
    matrix = _Matrix(harness.cloud, primitive)
    counted = []

    def point(crash_at):
        label = ("%s#%02d %s" % (primitive, crash_at, counted[crash_at - 1]) if crash_at
                 else "%s#after-return" % primitive)
        try:
            tracer, problem = _crash_run(harness, lambda tracer: point_run(offer, tracer), code, crash_at)
            if crash_at is None:
                counted.extend(tracer.calls)
            how, problems = recover(offer)
            if problem:
                problems.insert(0, problem)
            if crash_at and not tracer.crashed:
                how += " (not reached: %d direct calls this time, the primitive returned)" % len(tracer.calls)
            elif crash_at and tracer.calls[crash_at - 1:crash_at] != [counted[crash_at - 1]]:
                how += " (crashed before %s this time)" % (tracer.calls[crash_at - 1:crash_at] or ["nothing"])[0]
            return label, ("FAIL: " + "; ".join(problems) + " [" + how + "]") if problems else "ok: " + how
        except Exception as exc:  # noqa: BLE001 - every failure becomes a row, the matrix goes on
            _teardown(harness, offer.location, harness.spec.vm_name, provider=harness.new_provider())
            return label, "FAIL: %s: %s" % (type(exc).__name__, exc)

    after_return = point(None)
    assert counted, "no call was seen from %s's own frame: %s" % (primitive, after_return)
    for crash_at in range(1, len(counted) + 1):
        matrix.add(*point(crash_at))
    matrix.add(*after_return)
    print(matrix.totals())
    assert not matrix.failed, "crash points failed (point x cloud x outcome):\n" + matrix.report()


def test_crash_inside_create(harness):
    _journal_id(harness)
    state = {}

    def point_run(offer, tracer):
        state["before"], state["live"] = harness.resources(), set(harness.instance_ids())
        state["prepared"] = harness.provider.prepare(offer, harness.spec)
        crashed = harness.new_provider()  # the controller that dies inside create
        with tracer:
            crashed.create(offer, state["prepared"], harness.spec)

    def recover(offer):
        return _recover_create(harness, offer, state["prepared"], state["before"], state["live"])

    try:
        _crash_matrix(harness, "create", point_run, recover)
    finally:
        _teardown(harness, _offer(harness).location, harness.spec.vm_name, provider=harness.new_provider())


def test_crash_inside_delete(harness):
    _journal_id(harness)
    state = {}

    def point_run(offer, tracer):
        state["before"], state["live"] = harness.resources(), set(harness.instance_ids())
        instance_id = _launch(harness, offer, harness.spec)
        harness.settle(offer.location, instance_id)
        crashed = harness.new_provider()  # the controller that dies inside delete
        with tracer:
            crashed.delete(offer.location, harness.spec.vm_name, [instance_id])

    def recover(offer):
        return _recover_delete(harness, offer.location, state["before"], state["live"])

    try:
        _crash_matrix(harness, "delete", point_run, recover)
    finally:
        _teardown(harness, _offer(harness).location, harness.spec.vm_name, provider=harness.new_provider())


# -- list_owned (the orphan sweep's listing) -----------------------------------------------

def _list_owned(harness, provider, offer):
    """``sweep_locations`` and ``list_owned`` at the offer's location as the sweep calls them,
    without sleeping. Every adapter implements them (NotImplementedError fails)."""
    with _no_sleep():
        locations = provider.sweep_locations()
        where = [loc for loc in locations if loc.cloud == provider.name
                 and loc.region in (offer.region, ANY_REGION)]
        assert where, ("%s: sweep_locations %r does not cover the offer's region %s: the sweep would never "
                       "look where create put the instance" % (harness.cloud, locations, offer.region))
        found = []
        for location in where:
            found.extend(provider.list_owned(location))
    for owned in found:
        assert isinstance(owned, Owned) and owned.kind in ResourceKind.ALL, owned
        assert owned.location.cloud == provider.name and owned.location.region != ANY_REGION, owned
        assert Owned.from_dict(json.loads(json.dumps(owned.to_dict()))) == owned
        assert owned.status is None or owned.status in Status.ALL, owned
        assert owned.price_per_hour is None or owned.price_per_hour >= 0, owned
    return found


def _another_public_key() -> str:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519
    public = ed25519.Ed25519PrivateKey.generate().public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return public.decode() + " another-controller"


def test_list_owned_finds_instances_with_their_journal_read_only(harness):
    """list_owned reports what create made with its VM name and journal id (and another
    journal's instance with that journal's id), changes nothing, never sleeps, and after
    delete + cleanup reports nothing of the VM any more."""
    journal_id = _journal_id(harness)
    offer = _offer(harness)
    name = harness.spec.vm_name
    other = _other_journal(harness)
    # Another controller has its own SSH key: clouds that reuse a registered key by its material
    # would otherwise share the first VM's key with it (and rightly keep it while it is used).
    theirs_spec = dataclasses.replace(_other_spec(harness, "-f"), ssh_public_key=_another_public_key())
    before = harness.resources()
    try:
        prepared_only = _list_owned(harness, harness.provider, offer)
        harness.provider.prepare(offer, harness.spec)
        if harness.resources() != before:
            side = [o for o in _list_owned(harness, harness.provider, offer)
                    if o.vm_name == name and o.kind != ResourceKind.INSTANCE]
            assert side, ("prepare made %s, and list_owned reports no side resource of %s: the sweep would "
                          "never find them" % (sorted(harness.resources() - before), name))
        mine = _launch(harness, offer, harness.spec)
        harness.settle(offer.location, mine)
        theirs = _launch(harness, offer, theirs_spec, provider=other)
        harness.settle(offer.location, theirs)
        made = harness.resources()
        found = _list_owned(harness, harness.new_provider(), offer)
        assert harness.resources() == made, "list_owned changed the fake's resources"
        instances = {o.resource_id: o for o in found if o.kind == ResourceKind.INSTANCE}
        assert mine in instances, "list_owned misses the instance create made: %r" % (found,)
        assert (instances[mine].vm_name, instances[mine].journal_id) == (name, journal_id), instances[mine]
        # Where the vendor's listing names no region (Prime Intellect's pods), the adapter says UNPLACED.
        assert instances[mine].location.region in (offer.region, UNPLACED), instances[mine]
        assert theirs in instances, "list_owned misses another journal's instance: %r" % (found,)
        assert (instances[theirs].vm_name, instances[theirs].journal_id) == (theirs_spec.vm_name, other.journal_id)
        assert not any(o.resource_id == mine for o in prepared_only)

        _delete_and_clean(harness, offer.location, name, [mine])
        left = [o for o in _list_owned(harness, harness.provider, offer) if o.vm_name == name]
        assert not left, "list_owned still reports %s after delete + cleanup: %r" % (name, left)
    finally:
        _teardown(harness, offer.location, name)
        _teardown(harness, offer.location, theirs_spec.vm_name, provider=other)
