"""diagnose on the docker cloud: against the real engine (a running and a killed
container), and the engine answers that are hard to provoke (OOM kill, engine error,
unhealthy check) through a stand-in for the engine's API."""

from __future__ import annotations

import uuid

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    ErrorKind, InstanceSpec, Location, Observed, ProviderError, ResourceRequest, SshEndpoint, Status,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.docker import (
    DEFAULT_BASE_IMAGE, DockerProvider, docker_errors,
)
from ansible_collections.gpuprov.cloud.tests.fakes import docker_engine as de

LOC = Location("docker", "local")
PREFIX = "tdd-%s" % uuid.uuid4().hex[:6]


# --- against the engine -----------------------------------------------------------------

@pytest.fixture(scope="module")
def engine():
    client, why = de.engine()
    if client is None:
        pytest.skip(why)
    de.ensure_base_image(client, DEFAULT_BASE_IMAGE)
    try:
        yield client
    finally:
        de.remove_containers(client, PREFIX)


@pytest.fixture(scope="module")
def provider(engine):
    return DockerProvider(journal_id="journal-a")


@pytest.fixture(scope="module")
def prepared(provider):
    spec = InstanceSpec(vm_name=PREFIX + "-prep", ssh_public_key="unused")
    return provider.prepare(provider.plan(ResourceRequest(vm_name=spec.vm_name))[0], spec)


def test_a_running_then_killed_container(engine, provider, prepared):
    name = de.unique_name(PREFIX)
    _pkey, public = de.new_key()
    spec = InstanceSpec(vm_name=name, ssh_public_key=public)
    instance_id = provider.create(provider.plan(ResourceRequest(vm_name=name))[0], prepared, spec)
    de.wait_usable(provider, LOC, name)

    report = provider.diagnose(LOC, name)
    assert report["findings"] == []
    [entry] = report["instances"]
    assert Observed.from_dict(entry).usable and entry["journal_id"] == "journal-a"
    vendor = entry["vendor"]
    assert vendor["name"] == "gpuprov-" + name and vendor["status"] == "running"
    assert vendor["started_at"] and vendor["finished_at"] is None and vendor["oom_killed"] is False

    engine.containers.get(instance_id).kill(signal="SIGKILL")
    engine.containers.get(instance_id).wait(timeout=60)
    report = provider.diagnose(LOC, name)
    [entry] = report["instances"]
    assert entry["status"] == Status.FAILED
    assert entry["vendor"]["exit_code"] == 137 and entry["vendor"]["finished_at"]
    assert "exit code 137" in report["findings"][0] and report["findings"][0].startswith(instance_id[:12])


def test_nothing_there_makes_no_engine_call_beyond_the_listing(engine, provider):
    assert provider.diagnose(LOC, de.unique_name(PREFIX)) == {"instances": [], "findings": []}


# --- engine answers through a stand-in ------------------------------------------------------

class _Api:
    def __init__(self, inspect, logs=b"", missing=False):
        self.inspect, self.log_bytes, self.missing = inspect, logs, missing
        self.calls = []

    def inspect_container(self, instance_id):
        self.calls.append(("inspect", instance_id))
        if self.missing:
            raise docker_errors.NotFound("gone")
        return self.inspect

    def logs(self, instance_id, **kwargs):
        self.calls.append(("logs", instance_id, kwargs.get("tail")))
        return self.log_bytes


class _Client:
    def __init__(self, api):
        self.api = api


def _standin(monkeypatch, observed, api):
    provider = DockerProvider()
    monkeypatch.setattr(provider, "observe", lambda location, vm_name: observed)
    monkeypatch.setattr(provider, "_client", lambda primitive: _Client(api))
    return provider


def test_oom_kill_engine_error_and_log_tail_are_findings(monkeypatch):
    observed = [Observed("c0ffee1234567890", Status.FAILED, reason="container exited with exit code 137 (x)",
                         location=LOC)]
    api = _Api({"Name": "/gpuprov-m", "Config": {"Image": "gpuprov/sshd:x"},
                "State": {"Status": "exited", "ExitCode": 137, "OOMKilled": True, "Error": "cgroup trouble",
                          "StartedAt": "2025-01-01T00:00:00Z", "FinishedAt": "2025-01-01T00:05:00Z"}},
               logs=b"line 1\nline 2\n\nServer listening on :: port 22.\n")
    report = _standin(monkeypatch, observed, api).diagnose(LOC, "m")
    vendor = report["instances"][0]["vendor"]
    assert vendor["oom_killed"] is True and vendor["error"] == "cgroup trouble"
    assert vendor["log_tail"] == ["line 1", "line 2", "Server listening on :: port 22."]
    findings = report["findings"]
    assert findings[0] == "c0ffee123456: container exited with exit code 137 (x)"
    assert any("OOM killer" in f for f in findings) and any("engine error: cgroup trouble" in f for f in findings)
    assert findings[-1] == "c0ffee123456: last log lines: line 1 | line 2 | Server listening on :: port 22."
    assert ("logs", "c0ffee1234567890", 5) in api.calls


def test_unhealthy_and_unpublished_running_containers(monkeypatch):
    observed = [Observed("abc", Status.RUNNING, endpoint=None, location=LOC)]
    state = {"Status": "running", "StartedAt": "2025-01-01T00:00:00Z", "FinishedAt": "0001-01-01T00:00:00Z",
             "Health": {"Status": "unhealthy", "Log": [{"Output": "sshd: not answering\n"}]}}
    api = _Api({"Name": "/gpuprov-m", "State": state})
    report = _standin(monkeypatch, observed, api).diagnose(LOC, "m")
    assert report["instances"][0]["vendor"]["finished_at"] is None
    assert report["findings"] == ["abc: health check unhealthy: sshd: not answering",
                                  "abc: running, but port 22 is not published (no SSH endpoint)"]


def test_a_container_removed_meanwhile_is_a_finding_not_an_error(monkeypatch):
    observed = [Observed("abc", Status.RUNNING, endpoint=SshEndpoint("127.0.0.1", 2222, "root"), location=LOC)]
    report = _standin(monkeypatch, observed, _Api({}, missing=True)).diagnose(LOC, "m")
    assert report["findings"] == ["abc: removed while being diagnosed"]


def test_an_engine_failure_is_classified(monkeypatch):
    observed = [Observed("abc", Status.RUNNING, location=LOC)]

    class _Broken(_Api):
        def inspect_container(self, instance_id):
            raise ConnectionError("engine went away")

    with pytest.raises(ProviderError) as err:
        _standin(monkeypatch, observed, _Broken({})).diagnose(LOC, "m")
    assert err.value.kind == ErrorKind.TRANSIENT and "not reachable" in err.value.msg
