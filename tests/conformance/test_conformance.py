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
* no adapter sleeps or polls: time.sleep raises inside every primitive, and the
  adapter's source holds no sleep and no ``while True``;
* a crash right after create is adoptable: a fresh adapter instance finds the VM.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import io
import json
import pathlib
import re
import threading
import time
import tokenize

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    ErrorKind, Observed, Offer, ProviderError, Status,
)
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
    stem = source_file.stem
    for path in sorted(source_file.parent.glob(stem + "*.py")):  # the adapter and its helpers
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
