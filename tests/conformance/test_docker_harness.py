"""The docker conformance harness does what tests/conformance/harness.py promises:
a lifecycle through it is visible in resources()/instance_ids(), close() removes
everything, and every (primitive, kind) it claims makes the real adapter raise that
kind once, creating nothing. Real engine; skips with the reason without one."""

from __future__ import annotations

import importlib.util
import pathlib

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    ErrorKind, ProviderError, Status,
)
from ansible_collections.gpuprov.cloud.tests.fakes import docker_engine as de

HARNESS_FILE = pathlib.Path(__file__).resolve().parent / "harnesses" / "docker.py"


def _module():
    spec = importlib.util.spec_from_file_location("gpuprov_harness_docker_test", HARNESS_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def harness_module():
    return _module()


@pytest.fixture
def harness(harness_module, tmp_path_factory):
    made = harness_module.make_harness(tmp_path_factory)
    try:
        yield made
    finally:
        made.close()
        assert made.resources() == set()


def test_lifecycle_through_the_harness(harness):
    provider, request, spec = harness.provider, harness.request, harness.spec
    assert harness.cloud == provider.name == "docker"
    assert harness.resources() == set() and harness.instance_ids() == []
    [offer] = provider.plan(request)
    prepared = provider.prepare(offer, spec)
    instance_id = provider.create(offer, prepared, spec)
    harness.settle(offer.location, instance_id)
    [seen] = provider.observe(offer.location, spec.vm_name)
    assert seen.usable and seen.instance_id == instance_id
    assert harness.instance_ids() == [instance_id]
    assert harness.resources() == {"container:" + instance_id}
    ssh = de.ssh_connect(seen.endpoint, harness.pkey)
    try:
        assert de.run(ssh, "echo ok")[1].strip() == "ok"
    finally:
        ssh.close()
    provider.delete(offer.location, spec.vm_name, [instance_id])
    provider.cleanup(offer.location, spec.vm_name)
    assert harness.instance_ids() == [] and harness.resources() == set()


def test_close_removes_what_was_left(harness_module, tmp_path_factory):
    made = harness_module.make_harness(tmp_path_factory)
    [offer] = made.provider.plan(made.request)
    made.provider.create(offer, made.provider.prepare(offer, made.spec), made.spec)
    assert len(made.resources()) == 1
    made.close()
    assert made.resources() == set()


def _call(harness, primitive, prepared):
    provider, request, spec = harness.provider, harness.request, harness.spec
    offer = provider.plan(request)[0] if primitive != "plan" else None
    location = offer.location if offer else None
    if primitive == "plan":
        return lambda: provider.plan(request)
    if primitive == "prepare":
        return lambda: provider.prepare(offer, spec)
    if primitive == "create":
        return lambda: provider.create(offer, prepared, spec)
    if primitive == "observe":
        return lambda: provider.observe(location, spec.vm_name)
    if primitive == "delete":
        return lambda: provider.delete(location, spec.vm_name, ["0" * 64])
    raise AssertionError(primitive)


CASES = [(p, k) for k, ps in {
    ErrorKind.UNAVAILABLE: ("plan", "prepare"),
    ErrorKind.TRANSIENT: ("plan", "prepare", "create", "observe", "delete"),
    ErrorKind.INVALID_REQUEST: ("plan", "prepare", "create", "observe", "delete"),
    ErrorKind.FAILED: ("prepare", "create"),
}.items() for p in ps]


@pytest.mark.parametrize("primitive,kind", CASES, ids=["%s-%s" % c for c in CASES])
def test_injected_errors(harness, primitive, kind):
    assert kind in harness.error_kinds()
    [offer] = harness.provider.plan(harness.request)
    prepared = harness.provider.prepare(offer, harness.spec)
    call = _call(harness, primitive, prepared)
    harness.inject_error(primitive, kind)
    with pytest.raises(ProviderError) as err:
        call()
    assert err.value.kind == kind, err.value
    assert harness.resources() == set()          # nothing was created
    call_again = _call(harness, primitive, prepared)
    if primitive == "create":                    # one shot: the next call is real
        instance_id = call_again()
        harness.settle(offer.location, instance_id)
        assert harness.provider.observe(offer.location, harness.spec.vm_name)[0].status == Status.RUNNING
    else:
        call_again()


@pytest.mark.parametrize("primitive,kind", [("observe", ErrorKind.CAPACITY), ("cleanup", ErrorKind.TRANSIENT),
                                            ("delete", ErrorKind.UNAVAILABLE)])
def test_unsupported_injections_skip_with_a_reason(harness, primitive, kind):
    with pytest.raises(pytest.skip.Exception) as skipped:
        harness.inject_error(primitive, kind)
    assert "cannot make %s raise %s" % (primitive, kind) in str(skipped.value)
