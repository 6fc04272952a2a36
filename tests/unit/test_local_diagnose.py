"""diagnose on the local cloud, with real sshd processes: process states, the listening
port, the log tail and the markers, read-only."""

from __future__ import annotations

import os
import signal
import time
import uuid

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers import local as local_mod
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    InstanceSpec, Location, Observed, ResourceRequest, Status,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.local import LocalProvider
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.local import diagnose as local_diagnose

pytestmark = pytest.mark.skipif(not os.path.exists("/usr/sbin/sshd"), reason="needs openssh-server (sshd)")

LOC = Location("local", "local")


@pytest.fixture
def provider(tmp_path):
    root = str(tmp_path / "local")
    made = LocalProvider({"root": root}, journal_id="journal-a")
    try:
        yield made
    finally:
        for pid, cmdline in local_mod._sshd_processes():
            if root + os.sep in cmdline:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass


def _launch(provider):
    public = ed25519.Ed25519PrivateKey.generate().public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()
    name = "diag-" + uuid.uuid4().hex[:8]
    spec = InstanceSpec(vm_name=name, ssh_public_key=public + " test")
    [offer] = provider.plan(ResourceRequest(vm_name=name))
    instance_id = provider.create(offer, provider.prepare(offer, spec), spec)
    return name, instance_id


def _until_listening(provider, name, deadline_s=10.0):
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        report = provider.diagnose(LOC, name)
        if report["instances"] and report["instances"][0]["vendor"]["listening"]:
            return report
        time.sleep(0.1)
    raise AssertionError("sshd of %s never listened: %r" % (name, provider.diagnose(LOC, name)))


def test_a_healthy_instance_has_no_findings_and_its_vendor_view(provider):
    name, instance_id = _launch(provider)
    report = _until_listening(provider, name)
    assert report["findings"] == []
    [entry] = report["instances"]
    assert entry["instance_id"] == instance_id and entry["status"] == Status.RUNNING
    assert Observed.from_dict(entry).journal_id == "journal-a"     # the instances are Observed dicts
    vendor = entry["vendor"]
    assert vendor["pids"] and all(state in ("sleeping", "running") for state in vendor["process_states"].values())
    assert vendor["spawned"] and not vendor["deleted"] and vendor["port"] == entry["endpoint"]["port"]


def test_a_stopped_sshd_is_called_out(provider):
    name, _instance_id = _launch(provider)
    report = _until_listening(provider, name)
    pid = report["instances"][0]["vendor"]["pids"][0]
    os.kill(pid, signal.SIGSTOP)
    try:
        report = provider.diagnose(LOC, name)
        assert report["instances"][0]["status"] == Status.RUNNING
        assert any("stopped (SIGSTOP)" in f and str(pid) in f for f in report["findings"]), report
    finally:
        os.kill(pid, signal.SIGCONT)


def test_a_dead_sshd_is_failed_with_its_log(provider):
    name, instance_id = _launch(provider)
    report = _until_listening(provider, name)
    for pid in report["instances"][0]["vendor"]["pids"]:
        os.kill(pid, signal.SIGKILL)
    end = time.monotonic() + 10
    while time.monotonic() < end and provider.diagnose(LOC, name)["instances"][0]["status"] != Status.FAILED:
        time.sleep(0.1)
    report = provider.diagnose(LOC, name)
    [entry] = report["instances"]
    assert entry["status"] == Status.FAILED and entry["vendor"]["pids"] == [] and not entry["vendor"]["listening"]
    assert report["findings"] == ["%s: %s" % (instance_id, entry["reason"])]
    assert "sshd is not running" in report["findings"][0]


def test_nothing_there_is_an_empty_report(provider):
    assert provider.diagnose(LOC, "never-made") == {"instances": [], "findings": []}


def test_listening_ports_reads_proc_net():
    import socket
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        assert port not in local_diagnose.listening_ports()
        sock.listen(1)
        assert port in local_diagnose.listening_ports()
