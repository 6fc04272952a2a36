"""The gcp conformance harness keeps its promises: every (primitive, kind) it claims
makes the adapter raise that kind, settle makes an instance usable, and resources /
instance_ids see what the adapter made and unmade."""

from __future__ import annotations

import importlib.util
import pathlib

import pytest

pytest.importorskip("google.cloud.compute_v1")
pytest.importorskip("pytest_httpserver")

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.gcp import catalog as gcp_catalog  # noqa: E402
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (  # noqa: E402
    ErrorKind, ProviderError, Status,
)

HARNESS = pathlib.Path(__file__).resolve().parent / "harnesses" / "gcp.py"


def _module():
    spec = importlib.util.spec_from_file_location("gpuprov_harness_gcp_unit", HARNESS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


MODULE = _module()


@pytest.fixture
def harness(tmp_path_factory):
    made = MODULE.make_harness(tmp_path_factory)
    yield made
    made.close()


def _launch(h):
    offer = h.provider.plan(h.request)[0]
    prepared = h.provider.prepare(offer, h.spec)
    return offer, prepared, h.provider.create(offer, prepared, h.spec)


def test_lifecycle_and_views(harness):
    h = harness
    assert h.cloud == "gcp" and h.provider.name == "gcp"
    offer, _prepared, iid = _launch(h)
    assert h.instance_ids() == [iid]
    rule = "gpuprov-conf-gcp" + gcp_catalog.journal_suffix(h.provider.journal_id)  # the harness's journal's rule
    assert h.resources() == {"instance:%s/%s" % (offer.zone, iid), "firewall:" + rule}
    h.settle(offer.location, iid)
    (seen,) = h.provider.observe(offer.location, h.spec.vm_name)
    assert seen.usable and seen.instance_id == iid
    h.provider.delete(offer.location, h.spec.vm_name, [iid])
    assert h.instance_ids() == []
    assert [o.status for o in h.provider.observe(offer.location, h.spec.vm_name)] == [Status.STOPPING]
    h.settle_deleted(offer.location, iid)
    assert h.provider.observe(offer.location, h.spec.vm_name) == []
    h.provider.cleanup(offer.location, h.spec.vm_name)
    assert h.resources() == set()
    h.clear_errors()


def test_create_unreachable_and_new_provider(harness):
    spec = harness.spec.__class__.from_dict(dict(harness.spec.to_dict(), vm_name="conf-gcp-lag"))
    iid = harness.create_unreachable(spec)
    offer = harness.provider.plan(harness.request)[0]
    (seen,) = harness.new_provider().observe(offer.location, "conf-gcp-lag")
    assert seen.instance_id == iid and seen.endpoint is None and not seen.usable


def test_clear_errors_disarms(harness):
    harness.inject_error("plan", ErrorKind.CREDENTIALS)
    harness.inject_error("create", ErrorKind.CAPACITY)
    harness.clear_errors()
    offer, _prepared, iid = _launch(harness)
    assert iid in harness.instance_ids()


def _run(h, primitive):
    if primitive == "plan":
        return h.provider.plan(h.request)
    offer = h.provider.plan(h.request)[0]
    if primitive == "prepare":
        return h.provider.prepare(offer, h.spec)
    prepared = h.provider.prepare(offer, h.spec)
    if primitive == "create":
        return h.provider.create(offer, prepared, h.spec)
    iid = h.provider.create(offer, prepared, h.spec)
    if primitive == "observe":
        return h.provider.observe(offer.location, h.spec.vm_name)
    if primitive == "delete":
        return h.provider.delete(offer.location, h.spec.vm_name, [iid])
    h.provider.delete(offer.location, h.spec.vm_name, [iid])
    return h.provider.cleanup(offer.location, h.spec.vm_name)


CLAIMED = sorted({(p, k) for k, (prims, _status, _reason, _message) in MODULE.HTTP_FAULTS.items() for p in prims} | {
    ("create", ErrorKind.QUOTA), ("prepare", ErrorKind.QUOTA), ("create", ErrorKind.CAPACITY),
    ("create", ErrorKind.UNAVAILABLE), ("create", ErrorKind.FAILED)})


@pytest.mark.parametrize("primitive,kind", CLAIMED, ids=["%s-%s" % c for c in CLAIMED])
def test_injected_error_raises_that_kind(harness, primitive, kind):
    # arm just before the primitive runs: the earlier primitives must succeed
    original = getattr(harness.provider, primitive)

    def armed(*args):
        harness.inject_error(primitive, kind)
        return original(*args)
    setattr(harness.provider, primitive, armed)
    with pytest.raises(ProviderError) as info:
        _run(harness, primitive)
    assert info.value.kind == kind
    if primitive == "create" and kind != ErrorKind.TRANSIENT:
        assert harness.instance_ids() == []


def test_every_claimed_kind_is_reachable(harness):
    assert set(harness.error_kinds()) == set(ErrorKind.ALL)
    assert {k for _primitive, k in CLAIMED} == set(ErrorKind.ALL)


def test_unsupported_combination_skips(harness):
    with pytest.raises(pytest.skip.Exception):
        harness.inject_error("observe", ErrorKind.CAPACITY)
