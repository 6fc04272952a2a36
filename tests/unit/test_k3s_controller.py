"""Controller-side k3s helpers: kubeconfig shaping and merging, the validation checks,
and stage recording in the journal."""

from __future__ import annotations

import os
import stat

import pytest
import yaml

from ansible_collections.gpuprov.cloud.plugins.module_utils.cluster import kubeconfig, stages, validate
from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journal import Journal
from ansible_collections.gpuprov.cloud.plugins.module_utils.private_files import write_private

K3S_YAML = """apiVersion: v1
clusters:
- cluster:
    certificate-authority-data: Q0E=
    server: https://127.0.0.1:6443
  name: default
contexts:
- context: {cluster: default, user: default}
  name: default
current-context: default
kind: Config
users:
- name: default
  user: {client-certificate-data: Q0VSVA==, client-key-data: S0VZ}
"""


def test_kubeconfig_for_vm_is_named_after_the_vm_and_points_at_the_server():
    config = kubeconfig.for_vm(K3S_YAML, "train1", "https://127.0.0.1:16443")
    assert config["current-context"] == "train1"
    assert config["contexts"] == [{"name": "train1", "context": {"cluster": "train1", "user": "train1"}}]
    assert config["clusters"][0]["cluster"] == {"certificate-authority-data": "Q0E=", "server": "https://127.0.0.1:16443"}
    assert config["users"][0] == {"name": "train1", "user": {"client-certificate-data": "Q0VSVA==", "client-key-data": "S0VZ"}}
    assert yaml.safe_load(kubeconfig.dump(config)) == config


@pytest.mark.parametrize("text, words", [("- a list", "no mapping"), ("clusters: []\n", "no cluster"),
                                         ("{", "not YAML")])
def test_kubeconfig_rejects_what_is_not_a_k3s_yaml(text, words):
    with pytest.raises(kubeconfig.KubeconfigError, match=words):
        kubeconfig.for_vm(text, "x", "https://h:6443")


def test_merge_replaces_by_name_and_keeps_the_rest():
    existing = {"apiVersion": "v1", "kind": "Config", "current-context": "other",
                "clusters": [{"name": "other", "cluster": {"server": "https://o"}},
                             {"name": "train1", "cluster": {"server": "https://old"}}],
                "users": [{"name": "other", "user": {}}], "contexts": [{"name": "other", "context": {}}]}
    new = kubeconfig.for_vm(K3S_YAML, "train1", "https://new")
    merged = kubeconfig.merge(existing, new)
    assert [c["name"] for c in merged["clusters"]] == ["other", "train1"]
    assert merged["clusters"][1]["cluster"]["server"] == "https://new"
    assert merged["current-context"] == "other"
    assert kubeconfig.merge(existing, new, set_current=True)["current-context"] == "train1"
    assert kubeconfig.merge(None, new)["current-context"] == "train1"
    assert existing["clusters"][1]["cluster"]["server"] == "https://old"   # input untouched


def test_write_private_is_0600_and_reports_changes(tmp_path):
    path = str(tmp_path / "kube" / "gpuprov-x.yaml")
    assert write_private(path, "a") is True
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode) == 0o700
    assert write_private(path, "a") is False
    os.chmod(path, 0o644)
    assert write_private(path, "a") is True and stat.S_IMODE(os.stat(path).st_mode) == 0o600


def _node(ready="True", gpus=None):
    alloc = {"cpu": "4"}
    if gpus is not None:
        alloc["nvidia.com/gpu"] = str(gpus)
    conditions = [{"type": "Ready", "status": ready, "reason": "KubeletNotReady"}]
    return {"metadata": {"name": "n1"}, "status": {"allocatable": alloc, "conditions": conditions}}


def test_node_ready():
    assert validate.node_ready({"items": [_node()]})[0] is True
    ok, detail = validate.node_ready({"items": [_node("False")]})
    assert not ok and "n1 (KubeletNotReady)" in detail
    assert validate.node_ready({"items": []}) == (False, "no nodes registered yet")


def test_coredns_available():
    deployment = {"status": {"availableReplicas": 1}}
    assert validate.coredns_available(deployment, None)[0] is True
    assert validate.coredns_available({"status": {"availableReplicas": 0}}, None)[0] is False
    pod = {"metadata": {"name": "coredns-1", "labels": {"k8s-app": "kube-dns"}},
           "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}
    assert validate.coredns_available(None, {"items": [pod]})[0] is True
    pod["status"]["phase"] = "Pending"
    assert validate.coredns_available(None, {"items": [pod]})[0] is False


def test_gpu_allocatable():
    assert validate.gpu_allocatable({"items": [_node(gpus=8)]})[0] == 8
    assert validate.gpu_allocatable({"items": [_node()]})[0] == 0


SANS = [("DNS", "kubernetes"), ("DNS", "*.example.test"), ("IP Address", "127.0.0.1"),
        ("IP Address", "0:0:0:0:0:0:0:1"), ("IP Address", "203.0.113.9")]


@pytest.mark.parametrize("host, covered", [
    ("127.0.0.1", True), ("::1", True), ("[::1]", True), ("203.0.113.9", True), ("203.0.113.10", False),
    ("KUBERNETES", True), ("a.example.test", True), ("a.b.example.test", False), ("example.test", False),
    ("127.0.0.2", False),
])
def test_san_covers(host, covered):
    assert validate.san_covers(SANS, host) is covered


def test_missing_sans():
    assert validate.missing_sans(SANS, ["127.0.0.1", "127.0.0.2", ""]) == ["127.0.0.2"]


def _journal_with_vm(path, name="k1"):
    journal = Journal(str(path))
    owner = "test:1:x"
    version = journal.begin(name, "launch", {"kind": "Reconciling"}, "Reconciling", False, owner, 60, None)
    journal.transition(name, owner, version, {"kind": "Ready", "vm": {}}, "Ready", True, "Reconciling", "SSH login OK")
    journal.release(name, owner)
    journal.upsert_vm(name, cloud="docker", status="running", stage="Ready", detail={"python_interpreter": "/x"})
    return journal


def test_record_stage_keeps_status_merges_detail_and_adds_an_event(tmp_path):
    path = tmp_path / "j.sqlite"
    _journal_with_vm(path).close()
    row = stages.record(str(path), "k1", "CheckingBootInstall", "polling", {"route": "boot"})
    assert row["stage"] == "k3s:CheckingBootInstall" and row["status"] == "running"
    row = stages.record(str(path), "k1", "k3s:Ready", "validated")
    assert row["detail"]["python_interpreter"] == "/x"
    assert row["detail"]["k3s"]["route"] == "boot" and row["detail"]["k3s"]["stage"] == "Ready"
    journal = Journal(str(path))
    try:
        events = journal.events("k1")
        assert [(e["event"], e["to"]) for e in events[-2:]] == [("stage", "k3s:CheckingBootInstall"),
                                                                ("stage", "k3s:Ready")]
        assert journal.load("k1").lease_owner is None      # the lease was released
        spans = stages.timings(events)
        assert [s["stage"] for s in spans["spans"]] == ["Reconciling", "Ready", "k3s:CheckingBootInstall", "k3s:Ready"]
        assert spans["k3s_s"] >= 0 and spans["spans"][-1]["seconds"] is None
    finally:
        journal.close()


def test_record_stage_refuses_unknown_stages_vms_and_held_leases(tmp_path):
    path = tmp_path / "j.sqlite"
    journal = _journal_with_vm(path)
    with pytest.raises(stages.StageError, match="expected one of"):
        stages.record(str(path), "k1", "Dancing")
    with pytest.raises(stages.StageError, match="provision it first"):
        stages.record(str(path), "nope", "Ready")
    journal.acquire("k1", "otherhost:1:y", 60)   # another live run (another host) works on the VM
    with pytest.raises(stages.StageError, match="another run"):
        stages.record(str(path), "k1", "Ready")
    journal.close()
