"""Controller-side k3s helpers: kubeconfig shaping and merging, the validation checks,
and stage recording in the journal."""

from __future__ import annotations

import json
import os
import pathlib
import stat

import pytest
import yaml

from ansible_collections.gpuprov.cloud.plugins.module_utils.cluster import kubeconfig, stages, validate
from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journal import Journal
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import projection
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


# --- the NVIDIA device plugin's state, when no GPU is allocatable ---------------------------

INSTALLER = (pathlib.Path(__file__).resolve().parents[2] / "roles" / "k3s" / "files" / "k3s-install.sh").read_text()

# What NVIDIA's device plugin v0.17.0 logs where NVML cannot report device memory (its main.go and
# internal/rm/devices.go), then exits 1.
V0170_MEMORY_LOG = """I0819 12:00:00.000000       1 main.go:269] Starting nvidia-device-plugin
I0819 12:00:00.000000       1 main.go:294] Starting Plugins.
E0819 12:00:00.000000       1 main.go:198] error starting plugins: error getting plugins: failed to construct \
resource managers: error building device map: error building device map from config.resources: error building \
GPU device map: error building device: error getting device memory: Not Supported
"""


def _plugin_pod(state, restarts=0, exit_code=None, ready=False):
    status = {"name": validate.PLUGIN_CONTAINER, "ready": ready, "restartCount": restarts, "state": state}
    if exit_code is not None:
        status["lastState"] = {"terminated": {"exitCode": exit_code, "reason": "Error"}}
    return {"metadata": {"name": "nvidia-device-plugin-daemonset-x1"},
            "status": {"phase": "Running", "containerStatuses": [status]}}


DAEMONSET = {"metadata": {"name": validate.PLUGIN_DAEMONSET},
             "spec": {"template": {"spec": {"nodeSelector": {"gpuprov.cloud/gpu": "true"}}}},
             "status": {"desiredNumberScheduled": 0}}


def test_the_validation_names_the_objects_the_installer_deploys():
    # the checks look for what the installer's manifest deploys, by the same names
    assert "name: $PLUGIN_DAEMONSET" in INSTALLER and "PLUGIN_DAEMONSET=%s\n" % validate.PLUGIN_DAEMONSET in INSTALLER
    key, value = validate.PLUGIN_POD_SELECTOR.split("=")
    assert "\n        %s: %s\n" % (key, value) in INSTALLER            # the pod template's label
    assert "- name: %s\n" % validate.PLUGIN_CONTAINER in INSTALLER
    assert "namespace: %s\n" % validate.PLUGIN_NAMESPACE in INSTALLER


def test_log_errors_takes_klog_error_lines_else_lines_that_say_error():
    assert validate.log_errors(V0170_MEMORY_LOG) == [
        "error starting plugins: error getting plugins: failed to construct resource managers: error building "
        "device map: error building device map from config.resources: error building GPU device map: error "
        "building device: error getting device memory: Not Supported"]
    # a warning is no error (v0.20.0 ignores the memory error and serves the GPUs)
    assert validate.log_errors("W0819 12:00:00.000000 1 devices.go:77] Ignoring error getting device memory\n") == []
    assert validate.log_errors("starting\nfatal: failed to open /dev/nvidiactl\n") == [
        "fatal: failed to open /dev/nvidiactl"]
    assert validate.log_errors("") == [] and validate.log_errors(None) == []


def test_device_plugin_reason_says_what_the_plugin_is_doing_and_what_it_logged():
    crashed = _plugin_pod({"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 40s"}}, 4, 1)
    reason = validate.device_plugin_reason(DAEMONSET, [crashed], {"nvidia-device-plugin-daemonset-x1": V0170_MEMORY_LOG})
    assert reason.startswith("device plugin pod nvidia-device-plugin-daemonset-x1: CrashLoopBackOff, 4 restarts, "
                             "last exit code 1; it logged: '...")
    assert reason.endswith("error building device: error getting device memory: Not Supported'"), reason
    assert len(reason) < 260
    # an image an air-gapped VM cannot pull
    pulling = _plugin_pod({"waiting": {"reason": "ImagePullBackOff", "message": "dial tcp: no route"}})
    assert validate.device_plugin_reason(DAEMONSET, [pulling], {}) == (
        "device plugin pod nvidia-device-plugin-daemonset-x1: ImagePullBackOff")
    running = _plugin_pod({"running": {}}, ready=True)
    assert validate.device_plugin_reason(DAEMONSET, [running], {"nvidia-device-plugin-daemonset-x1": "I0 ok\n"}) == (
        "device plugin pod nvidia-device-plugin-daemonset-x1: Running; its log has no error")
    # under runc (no nvidia default runtime) the plugin cannot load NVML: its first and last errors
    runc_log = ("E0819 12:00:00.000000 1 factory.go:118] Incompatible strategy detected auto\n"
                "E0819 12:00:00.000000 1 factory.go:119] If this is a GPU node, did you configure the NVIDIA "
                "Container Toolkit?\n"
                "E0819 12:00:00.000000 1 main.go:198] error starting plugins: invalid device discovery strategy\n")
    assert validate.device_plugin_reason(DAEMONSET, [crashed], {"nvidia-device-plugin-daemonset-x1": runc_log}) == (
        "device plugin pod nvidia-device-plugin-daemonset-x1: CrashLoopBackOff, 4 restarts, last exit code 1; it "
        "logged: 'Incompatible strategy detected auto' ... 'error starting plugins: invalid device discovery strategy'")


def test_device_plugin_reason_without_a_daemonset_or_a_pod():
    assert validate.device_plugin_reason(None, [], {}) == (
        "no NVIDIA device plugin: kube-system has no DaemonSet nvidia-device-plugin-daemonset (the installer deploys "
        "it when it configures the GPU: k3s_gpu auto on a VM with a GPU, or true)")
    assert validate.device_plugin_reason(DAEMONSET, [], {}) == (
        "the NVIDIA device plugin DaemonSet kube-system/nvidia-device-plugin-daemonset has no pod (0 scheduled; its "
        "nodeSelector gpuprov.cloud/gpu=true matches no node)")


class FakeApiClient:
    """A stand-in for validate.ApiClient: canned answers by path (tests only)."""

    server = "https://fake:6443"
    peer_sans = [("IP Address", "127.0.0.1")]

    def __init__(self, answers):
        self.answers = answers
        self.asked = []

    def get(self, path):
        self.asked.append(path)
        return self.answers.get(path, (404, {"kind": "Status", "code": 404}))

    def get_json(self, path, allow_missing=False):
        return validate.ApiClient.get_json(self, path, allow_missing)


def test_validate_once_explains_a_gpu_that_is_not_allocatable_and_asks_nothing_when_it_is():
    pod = _plugin_pod({"waiting": {"reason": "CrashLoopBackOff"}}, 2, 1)
    log_path = ("/api/v1/namespaces/kube-system/pods/nvidia-device-plugin-daemonset-x1/log"
                "?container=nvidia-device-plugin-ctr&tailLines=50")
    answers = {"/readyz": (200, "ok"), "/api/v1/nodes": (200, {"items": [_node(gpus=0)]}),
               "/apis/apps/v1/namespaces/kube-system/deployments/coredns": (200, {"status": {"availableReplicas": 1}}),
               "/apis/apps/v1/namespaces/kube-system/daemonsets/nvidia-device-plugin-daemonset": (200, DAEMONSET),
               "/api/v1/namespaces/kube-system/pods?labelSelector=name%3Dnvidia-device-plugin-ds": (
                   200, {"items": [pod]}),
               log_path: (200, ""),                            # the crashed container's log is the previous one's
               log_path + "&previous=true": (200, V0170_MEMORY_LOG)}
    client = FakeApiClient(answers)
    outcome = validate.validate_once(client, True, ["127.0.0.1"])
    assert not outcome["ok"] and not outcome["checks"]["gpu"]["ok"]
    detail = outcome["checks"]["gpu"]["detail"]
    assert detail.startswith("nvidia.com/gpu allocatable: 0; device plugin pod nvidia-device-plugin-daemonset-x1: "
                             "CrashLoopBackOff, 2 restarts, last exit code 1; it logged: "), detail
    assert "error getting device memory: Not Supported" in detail
    # with a GPU allocatable, or none expected, the device plugin is not asked about
    answers["/api/v1/nodes"] = (200, {"items": [_node(gpus=1)]})
    client = FakeApiClient(answers)
    assert validate.validate_once(client, True, ["127.0.0.1"])["ok"]
    assert validate.validate_once(client, False, ["127.0.0.1"])["checks"]["gpu"]["ok"]
    assert not [p for p in client.asked if "device-plugin" in p], client.asked


def _journal_with_vm(path, name="k1"):
    journal = Journal(str(path))
    owner = "test:1:x"
    version = journal.begin(name, "launch", {"kind": "Reconciling"}, "Reconciling", False, owner, 60, None)
    journal.transition(name, owner, version, {"kind": "Ready", "vm": {}}, "Ready", True, "Reconciling", "SSH login OK")
    journal.release(name, owner)
    projection.upsert_vm(journal, name, cloud="docker", status="running", stage="Ready",
                         detail={"python_interpreter": "/x"})
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


# -- the kubeconfigs of a VM go with it ------------------------------------------------------------

def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def _names(config, section):
    return [e["name"] for e in config.get(section) or []]


USER_CONFIG = {"apiVersion": "v1", "kind": "Config", "current-context": "mine", "preferences": {},
               "clusters": [{"name": "mine", "cluster": {"server": "https://mine:6443"}}],
               "users": [{"name": "mine", "user": {"token": "t"}}],
               "contexts": [{"name": "mine", "context": {"cluster": "mine", "user": "mine"}}]}


def test_down_removes_the_vm_kubeconfig_and_its_merged_entries_and_nothing_else(tmp_path):
    state, kube = str(tmp_path / "state"), tmp_path / "elsewhere"     # k3s_kubeconfig_dir need not be ~/.kube
    target = str(kube / "config")
    write_private(target, kubeconfig.dump(USER_CONFIG))
    paths = {}
    for name, current in (("train1", False), ("train2", True)):
        paths[name] = str(kube / ("gpuprov-%s.yaml" % name))
        config = kubeconfig.for_vm(K3S_YAML, name, "https://127.0.0.1:6443")
        assert kubeconfig.write_for_vm(state, config, paths[name], target, set_current=current) == (True, True)
    merged = yaml.safe_load(open(target))
    assert _names(merged, "contexts") == ["mine", "train1", "train2"] and merged["current-context"] == "train2"
    assert _mode(kubeconfig.record_path(state)) == 0o600

    assert sorted(kubeconfig.remove_for_vm("train2", state)) == sorted([target, paths["train2"]])
    left = yaml.safe_load(open(target))
    for section in ("clusters", "users", "contexts"):
        assert _names(left, section) == ["mine", "train1"], section
    assert "current-context" not in left                   # it pointed at train2: unset, not guessed
    assert left["clusters"][0] == USER_CONFIG["clusters"][0] and left["users"][0] == USER_CONFIG["users"][0]
    assert not os.path.exists(paths["train2"]) and os.path.exists(paths["train1"])
    assert _mode(target) == 0o600

    left["current-context"] = "mine"
    write_private(target, kubeconfig.dump(left))
    assert sorted(kubeconfig.remove_for_vm("train1", state)) == sorted([target, paths["train1"]])
    assert yaml.safe_load(open(target)) == USER_CONFIG     # the user's own entries, untouched
    assert kubeconfig.remove_for_vm("train1", state) == []  # a second down has nothing left to do
    assert json.load(open(kubeconfig.record_path(state))) == {}


def test_down_removes_kubeconfigs_written_before_the_record_only_when_they_are_the_vms(tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    own, target = home / ".kube" / "gpuprov-old1.yaml", home / ".kube" / "config"
    config = kubeconfig.for_vm(K3S_YAML, "old1", "https://127.0.0.1:6443")
    write_private(str(own), kubeconfig.dump(config))
    write_private(str(target), kubeconfig.dump(kubeconfig.merge(USER_CONFIG, config)))
    state = str(tmp_path / "state")
    assert sorted(kubeconfig.remove_for_vm("old1", state)) == sorted([str(target), str(own)])
    assert yaml.safe_load(open(target)) == USER_CONFIG

    # A same-named context of the user's own (no gpuprov kubeconfig of that VM) is not taken.
    theirs = kubeconfig.merge(USER_CONFIG, kubeconfig.for_vm(K3S_YAML, "old2", "https://theirs:6443"))
    write_private(str(target), kubeconfig.dump(theirs))
    assert kubeconfig.remove_for_vm("old2", state) == []
    # Nor entries that differ from the VM's own kubeconfig.
    write_private(str(home / ".kube" / "gpuprov-old2.yaml"),
                  kubeconfig.dump(kubeconfig.for_vm(K3S_YAML, "old2", "https://127.0.0.1:6443")))
    assert kubeconfig.remove_for_vm("old2", state) == [str(home / ".kube" / "gpuprov-old2.yaml")]
    assert yaml.safe_load(open(target)) == theirs


def test_an_unreadable_merged_kubeconfig_is_reported_and_kept_for_the_next_down(tmp_path):
    state, kube = str(tmp_path / "state"), tmp_path / "kube"
    target, own = str(kube / "config"), str(kube / "gpuprov-t.yaml")
    config = kubeconfig.for_vm(K3S_YAML, "t", "https://127.0.0.1:6443")
    kubeconfig.write_for_vm(state, config, own, target)
    good = open(target).read()
    write_private(target, "{ not yaml")
    with pytest.raises(kubeconfig.KubeconfigError) as info:
        kubeconfig.remove_for_vm("t", state)
    assert target in str(info.value) and "delete-context" in str(info.value)
    assert not os.path.exists(own)                         # everything else went
    write_private(target, good)
    assert kubeconfig.remove_for_vm("t", state) == [target]
    assert _names(yaml.safe_load(open(target)), "contexts") == []


def test_check_mode_writes_and_records_nothing(tmp_path):
    state, own = tmp_path / "state", tmp_path / "kube" / "gpuprov-c.yaml"
    config = kubeconfig.for_vm(K3S_YAML, "c", "https://127.0.0.1:6443")
    assert kubeconfig.write_for_vm(str(state), config, str(own), str(tmp_path / "kube" / "config"),
                                   check_mode=True) == (True, True)
    assert not state.exists() and not own.parent.exists()
