"""gpuprov.cloud.health's checks (tasks/health.py) against the local cloud with real sshd:
VMs made by VmService in a temporary state directory, then disagreements made on
purpose (an instance removed, killed or stopped behind the journal's back, a journal
row rewritten, another journal's instance), and k3s /readyz against a real TLS server,
directly and through an SSH tunnel. Every check is read-only."""

from __future__ import annotations

import base64
import datetime
import hashlib
import http.server
import os
import select
import shutil
import signal
import sqlite3
import ssl
import threading
import time

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from ansible_collections.gpuprov.cloud.plugins.module_utils.cluster import kubeconfig, stages
from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journal import Journal
from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.owners import new_owner
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers import local as local_mod
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import projection, ssh
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks import health
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.health import HealthCheck
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.service import VmService
from ansible_collections.gpuprov.cloud.tests.unit.helpers import wait_for

pytestmark = pytest.mark.skipif(not os.path.exists("/usr/sbin/sshd"), reason="needs openssh-server (sshd)")

BASE = {"name": "h1", "state": "present", "clouds": ["local"], "gpu": None, "gpu_count": 1, "regions": [],
        "spot": False, "retry_until_up": False, "boot_timeout": None, "ssh_timeout": 60, "teardown_timeout": 60,
        "journal": None, "ssh_key": None, "ssh_user": None, "cloud_options": {}, "k8s": None, "boot_script": None}
CHECK = {"journal": None, "name": None, "clouds": [], "cloud_options": {}, "ssh_key": None, "ssh_timeout": 3,
         "k3s_timeout": 5, "k3s_api_port": 6443}


# --- helpers ----------------------------------------------------------------------------------

def _kill_under(root):
    """SIGKILL every sshd under ``root`` and wait until each has died (its pidfd turns readable then): a
    check that follows at once must not see one still on its way out."""
    for pid, cmdline in local_mod._sshd_processes():
        if str(root) + os.sep in cmdline:
            try:
                pidfd = os.pidfd_open(pid)
            except ProcessLookupError:
                continue
            try:
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
                assert select.select([pidfd], [], [], 30)[0], "sshd %d outlived SIGKILL" % pid
            finally:
                os.close(pidfd)


@pytest.fixture
def home(home):
    """conftest.py's home; at the end every sshd under it is killed."""
    try:
        yield home
    finally:
        _kill_under(home)


def _up(name, **params):
    result = VmService(dict(BASE, name=name, **params)).run()
    assert not result.get("failed"), result
    return result


def _check(**params):
    return HealthCheck(dict(CHECK, **params)).run()


def _vm(report, name):
    return next(vm for vm in report["vms"] if vm["name"] == name)


def _kinds(vm):
    return [d["kind"] for d in vm["disagreements"]]


def _folder(home, name, instance_id):
    return str(home / "local" / name / instance_id)


def _rewrite(home, name, kind, state, label, terminal, journal_path=None):
    """Replace the journal row of ``name`` as a run would, leaving no lease behind."""
    journal = Journal(str(journal_path or home / "journal.sqlite"))
    try:
        row = journal.load(name)
        owner = new_owner()
        journal.begin(name, kind, state, label, terminal, owner, 60, row.version if row else None)
        journal.release(name, owner)
    finally:
        journal.close()


def _snapshot(home):
    """What a read-only check must leave as it was: the journal's rows and events, the controller files and
    the local cloud's folders."""
    db = sqlite3.connect(str(home / "journal.sqlite"))
    try:
        rows = db.execute("SELECT key, version, state, lease_owner FROM machines ORDER BY key").fetchall()
        events = db.execute("SELECT COUNT(*) FROM machine_events").fetchone()
        vms = db.execute("SELECT * FROM vms ORDER BY name").fetchall()
    finally:
        db.close()
    files = {}
    for name in ("known_hosts", "ssh_config", "kubeconfigs.json"):
        path = home / name
        files[name] = hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else None
    folders = sorted(os.path.relpath(os.path.join(d, f), str(home)) for d, _dirs, fs in os.walk(str(home / "local"))
                     for f in fs)
    return rows, events, vms, files, folders


# --- the journal agrees ---------------------------------------------------------------------------

def test_a_healthy_vm_and_a_read_only_check(home):
    up = _up("h1")
    before = _snapshot(home)
    lines = []
    report = HealthCheck(dict(CHECK), progress=lines.append).run()
    assert _snapshot(home) == before
    assert report["healthy"] is True and report["disagreements"] == [] and report["unknown"] == []
    vm = _vm(report, "h1")
    assert vm["verdict"] == "ok" and vm["journal"]["state"] == "Ready"
    assert vm["journal"]["instance_id"] == up["vm"]["instance_id"]
    assert vm["cloud"]["summary"] == "Running %s" % up["vm"]["instance_id"] and vm["cloud"]["findings"] == []
    assert vm["cloud"]["instances"][0]["vendor"]["listening"] is True
    assert vm["ssh"]["status"] == "ok" and up["vm"]["host_key_fingerprint"] in vm["ssh"]["detail"]
    assert vm["k3s"]["status"] == "-"
    assert report["table"][0].split() == ["NAME", "JOURNAL", "CLOUD", "SSH", "K3S", "VERDICT"]
    assert report["table"][1].split()[:3] == ["h1", "Ready", "Running"] and report["table"][1].endswith("ok")
    assert report["journal_id"] and lines == ["[h1] %s" % vm["summary"]]


def test_no_journal_yet_is_reported_and_not_created(home):
    report = _check()
    assert report["healthy"] and report["vms"] == [] and "no journal at" in report["table"][0]
    assert not (home / "journal.sqlite").exists()


# --- journal Ready, the instance not --------------------------------------------------------------

def test_an_instance_deleted_behind_the_journals_back(home):
    up = _up("gone1")
    instance_id = up["vm"]["instance_id"]
    folder = _folder(home, "gone1", instance_id)
    _kill_under(folder)
    shutil.rmtree(folder)
    report = _check()
    vm = _vm(report, "gone1")
    assert _kinds(vm) == [health.INSTANCE_GONE] and report["healthy"] is False
    [item] = report["disagreements"]
    assert item["vm"] == "gone1"
    assert item["msg"] == ("the journal says Ready with instance %s on local/local, but the instance is gone"
                           % instance_id)
    assert "gpuprov.cloud.provision -e vm=gone1" in item["fix"] and "gpuprov.cloud.down -e vm=gone1" in item["fix"]
    assert vm["cloud"]["summary"] == "gone" and vm["ssh"]["status"] == "-"
    assert any(line.startswith("DISAGREE gone1 (instance_gone): the journal says Ready") for line in report["table"])


def test_a_killed_instance_is_not_running_with_its_log(home):
    up = _up("dead1")
    _kill_under(_folder(home, "dead1", up["vm"]["instance_id"]))
    vm = _vm(_check(), "dead1")
    assert _kinds(vm) == [health.INSTANCE_NOT_RUNNING]
    assert "is Failed: sshd is not running" in vm["disagreements"][0]["msg"]
    assert vm["cloud"]["findings"] and vm["cloud"]["findings"][0].startswith("local/local: %s: sshd is not running"
                                                                             % up["vm"]["instance_id"])


def test_a_vm_its_limits_stopped_is_expired_not_a_stopped_instance_and_a_near_deadline_warns(home):
    up = _up("exp1", ttl="1s")
    _up("soon1", ttl="30m")
    _up("later1", ttl="2h")
    wait_for(lambda: _past(up["limits"]["deadline"]), "exp1's ttl to pass", limit_s=60, step_s=0.2)
    _kill_under(_folder(home, "exp1", up["vm"]["instance_id"]))   # as its watchdog would power it off
    report = _check()
    vm = _vm(report, "exp1")
    assert _kinds(vm) == [health.EXPIRED], vm["disagreements"]
    [item] = vm["disagreements"]
    assert "which is Failed: expired (stopped itself): past its expiry" in item["msg"] and "not a leak" in item["msg"]
    assert item["fix"].startswith("ansible-playbook gpuprov.cloud.reap -e delete=true -e name=exp1")
    assert _kinds(_vm(report, "soon1")) == [] and _kinds(_vm(report, "later1")) == []
    warned = report["warnings"]
    assert [w.split(" ", 1)[0] for w in warned] == ["exp1", "soon1"], warned
    assert warned[1].startswith("soon1 expires in ")
    assert [w.split(" ", 1)[0] for w in _check(name="soon1")["warnings"]] == ["soon1"]


def _past(iso):
    return time.time() > datetime.datetime.strptime(iso, "%Y-%m-%dT%H:%M:%SZ").replace(
        tzinfo=datetime.timezone.utc).timestamp()


def test_ssh_refused_on_a_ready_vm(home):
    up = _up("mute1")
    [pid] = [p for p, cmd in local_mod._sshd_processes() if _folder(home, "mute1", up["vm"]["instance_id"]) in cmd]
    os.kill(pid, signal.SIGSTOP)
    try:
        report = _check(ssh_timeout=1)
    finally:
        os.kill(pid, signal.SIGCONT)
    vm = _vm(report, "mute1")
    assert _kinds(vm) == [health.SSH_FAILED] and vm["ssh"]["status"] == "failed"
    assert "the SSH login to" in vm["disagreements"][0]["msg"] and ":%d fails" % up["vm"]["ssh_port"] in \
        vm["disagreements"][0]["msg"]
    assert any("stopped (SIGSTOP)" in finding for finding in vm["cloud"]["findings"])


def _journal_host_key(home, name, host_key):
    """Set (or, with None, drop) the host key the journal pins for ``name``."""
    journal = Journal(str(home / "journal.sqlite"))
    try:
        detail = dict(projection.vm(journal, name)["detail"])
        if host_key is None:
            detail.pop("host_key", None)
        else:
            detail["host_key"] = host_key
        projection.upsert_vm(journal, name, detail=detail)
    finally:
        journal.close()


def test_another_host_key_is_a_mismatch_and_a_missing_one_is_unknown_never_pinned(home):
    up = _up("key1")
    alias = up["vm"]["host_key_alias"]
    known = home / "known_hosts"
    fake_key = base64.b64encode(b"\0\0\0\x0bssh-ed25519\0\0\0\x20" + b"k" * 32).decode()
    # The journal is what a VM is held to: known_hosts is written from it before the check.
    _journal_host_key(home, "key1", {"type": "ssh-ed25519", "key": fake_key})
    vm = _vm(_check(), "key1")
    assert _kinds(vm) == [health.HOST_KEY_MISMATCH] and "pinned ssh-ed25519 SHA256:" in vm["ssh"]["detail"]
    assert "%s ssh-ed25519 %s" % (alias, fake_key) in known.read_text()

    # Pinned neither in the journal nor in known_hosts: unknown, and still not pinned after the check.
    _journal_host_key(home, "key1", None)
    known.write_text("".join(line for line in known.read_text().splitlines(True) if not line.startswith(alias)))
    report = _check()
    vm = _vm(report, "key1")
    assert _kinds(vm) == [] and vm["verdict"] == "unknown" and vm["ssh"]["status"] == "unknown"
    assert report["unknown"] == ["key1: ssh: no host key pinned for %s in %s" % (alias, known)]
    assert alias not in known.read_text()    # health never pins


def _fresh_home(monkeypatch, home, name):
    """Another controller's state directory (a new AWX job) on the same journal."""
    fresh = home / name
    monkeypatch.setenv("GPUPROV_HOME", str(fresh))
    monkeypatch.setenv("GPUPROV_JOURNAL", str(home / "journal.sqlite"))
    return fresh


def test_a_fresh_state_directory_checks_the_login_with_the_journals_host_key(home, monkeypatch):
    key = home / "machine_key"
    up = _up("fresh1")
    shutil.copy(str(home / "id_ed25519"), str(key))
    os.chmod(str(key), 0o600)
    fresh = _fresh_home(monkeypatch, home, "job2")
    # The key as each source gives it: the option, the environment, the task's Machine credential.
    for params, env, credential in (({"ssh_key": str(key)}, None, None), ({}, str(key), None), ({}, None, str(key))):
        if env:
            monkeypatch.setenv("GPUPROV_SSH_KEY_FILE", env)
        else:
            monkeypatch.delenv("GPUPROV_SSH_KEY_FILE", raising=False)
        report = HealthCheck(dict(CHECK, **params), credential_key=credential).run()
        vm = _vm(report, "fresh1")
        assert vm["verdict"] == "ok" and report["unknown"] == [], (params, env, credential, report["table"])
        assert up["vm"]["host_key_fingerprint"] in vm["ssh"]["detail"]
    assert ("%s ssh-ed25519" % up["vm"]["host_key_alias"]) in (fresh / "known_hosts").read_text()
    assert "Host fresh1\n" in (fresh / "ssh_config").read_text()
    assert oct((fresh / "known_hosts").stat().st_mode & 0o777) == "0o600"


def test_check_mode_checks_with_the_journals_host_keys_and_writes_nothing(home, monkeypatch):
    up = _up("fresh3")
    key = home / "machine_key"
    shutil.copy(str(home / "id_ed25519"), str(key))
    fresh = _fresh_home(monkeypatch, home, "job3")
    report = HealthCheck(dict(CHECK, ssh_key=str(key)), check_mode=True).run()
    vm = _vm(report, "fresh3")
    assert vm["verdict"] == "ok" and up["vm"]["host_key_fingerprint"] in vm["ssh"]["detail"], report["table"]
    assert not fresh.exists()


def test_a_fresh_state_directory_with_another_key_is_unknown_not_a_failed_login(home, monkeypatch):
    _up("fresh2")
    fresh = _fresh_home(monkeypatch, home, "job2")
    ssh.ensure_controller_key(str(fresh / "id_ed25519"))
    report = _check()   # this state directory's own key: not the one the VM was made for
    vm = _vm(report, "fresh2")
    assert _kinds(vm) == [] and vm["ssh"]["status"] == "unknown", report["table"]
    assert "the VM was made for the SSH key SHA256:" in vm["ssh"]["detail"]
    assert "GPUPROV_SSH_KEY_FILE" in vm["ssh"]["detail"]


def test_a_changed_endpoint_is_called_out(home):
    up = _up("moved1")
    journal = Journal(str(home / "journal.sqlite"))
    state = journal.load("moved1").state
    journal.close()
    state["vm"]["ssh"]["port"] = up["vm"]["ssh_port"] + 1 if up["vm"]["ssh_port"] < 65535 else 1
    _rewrite(home, "moved1", "launch", state, "Ready", True)
    vm = _vm(_check(), "moved1")
    assert health.ENDPOINT_CHANGED in _kinds(vm)
    assert "the cloud now says 127.0.0.1:%d" % up["vm"]["ssh_port"] in vm["disagreements"][0]["msg"]


# --- the instance runs, the journal says otherwise ----------------------------------------------

def test_journal_done_while_the_instance_runs(home):
    up = _up("zombie1")
    location = {"cloud": "local", "region": "local", "zone": None}
    _rewrite(home, "zombie1", "teardown", {"kind": "Done", "vm_name": "zombie1", "reason": "down requested",
                                           "targets": [{"location": location,
                                                        "instance_ids": [up["vm"]["instance_id"]],
                                                        "created": True}]}, "Done", True)
    report = _check()
    vm = _vm(report, "zombie1")
    assert _kinds(vm) == [health.UNTRACKED_INSTANCE]
    assert vm["disagreements"][0]["msg"] == (
        "instance %s (Running) on local/local carries this journal's identity, but the journal says Done: it may "
        "bill" % up["vm"]["instance_id"])
    assert vm["ssh"]["status"] == "-"


def test_no_row_while_the_instance_runs_needs_the_clouds_to_look_on(home):
    up = _up("orphan1")
    db = sqlite3.connect(str(home / "journal.sqlite"))
    with db:
        db.execute("DELETE FROM machines WHERE key = 'orphan1'")
    db.close()
    report = _check(name="orphan1")
    vm = _vm(report, "orphan1")
    assert vm["journal"]["state"] == "no row" and _kinds(vm) == [] and vm["verdict"] == "unknown"
    assert "name the clouds to look on" in report["unknown"][0]

    vm = _vm(_check(name="orphan1", clouds=["local"]), "orphan1")
    assert _kinds(vm) == [health.UNTRACKED_INSTANCE]
    assert "but the journal has no record of orphan1" in vm["disagreements"][0]["msg"]
    assert up["vm"]["instance_id"] in vm["disagreements"][0]["msg"]


def test_an_instance_of_another_journal(home):
    _up("shared1")
    other = str(home / "other.sqlite")
    refused = VmService(dict(BASE, name="shared1", journal=other)).run()
    assert refused.get("failed") and "another controller" in refused["msg"]
    report = _check(journal=other)
    vm = _vm(report, "shared1")
    assert _kinds(vm) == [health.OTHER_JOURNAL]
    assert "was made by another controller (journal %s)" % _check()["journal_id"] in vm["disagreements"][0]["msg"]
    assert _check()["healthy"]     # for its own journal, the VM is fine


def test_leaked_with_and_without_what_is_left(home):
    up = _up("leak1")
    location = {"cloud": "local", "region": "local", "zone": None}
    leaked = {"kind": "Leaked", "reason": "instances still present after 60 s",
              "targets": [{"location": location, "instance_ids": [up["vm"]["instance_id"]], "created": True}]}
    _rewrite(home, "leak1", "teardown", dict(leaked, vm_name="leak1"), "Leaked", True)
    vm = _vm(_check(), "leak1")
    assert _kinds(vm) == [health.LEAKED] and "resources that may still bill: local/local %s" % up["vm"][
        "instance_id"] in vm["disagreements"][0]["msg"]
    assert "gpuprov.cloud.down -e vm=leak1 retries" in vm["disagreements"][0]["fix"]

    _kill_under(_folder(home, "leak1", up["vm"]["instance_id"]))
    shutil.rmtree(_folder(home, "leak1", up["vm"]["instance_id"]))
    vm = _vm(_check(), "leak1")
    assert _kinds(vm) == [health.LEAKED] and "no instance of it is left at local/local" in vm["disagreements"][0]["msg"]


def test_an_interrupted_run_and_a_live_one(home):
    up = _up("mid1")
    booting = {"kind": "Booting", "instance_id": up["vm"]["instance_id"], "adopted": False,
               "search": {"offers": [{"cloud": "local", "region": "local", "instance_type": "sshd"}], "cursor": 0,
                          "blocked": [], "history": [], "round": 0}}
    _rewrite(home, "mid1", "launch", booting, "Booting", False)
    vm = _vm(_check(), "mid1")
    assert _kinds(vm) == [health.INTERRUPTED]
    assert vm["disagreements"][0]["msg"].startswith("a run stopped in Booting and nobody is working on it")
    assert "local/local %s (Running)" % up["vm"]["instance_id"] in vm["disagreements"][0]["msg"]

    journal = Journal(str(home / "journal.sqlite"))
    owner = new_owner()                    # this process: alive, so its lease counts
    journal.acquire("mid1", owner, 60)
    journal.close()
    report = _check()
    vm = _vm(report, "mid1")
    assert _kinds(vm) == [] and vm["journal"]["in_progress"] and vm["journal"]["holder"] == owner
    assert "(run in progress)" in report["table"][1]


def test_an_unreachable_cloud_is_unknown_not_a_disagreement(home):
    ssh.ensure_controller_key(str(home / "id_ed25519"))
    location = {"cloud": "docker", "region": "local", "zone": None}
    vm_record = {"name": "far1", "location": location, "instance_id": "c0ffee", "host_key_alias": "gpuprov-far1-x",
                 "ssh": {"host": "127.0.0.1", "port": 9, "user": "root"}}
    _rewrite(home, "far1", "launch", {"kind": "Ready", "vm": vm_record, "reused": False, "search": None}, "Ready", True)
    report = _check(cloud_options={"docker": {"docker_host": "tcp://127.0.0.1:9", "timeout": 2}})
    vm = _vm(report, "far1")
    assert vm["cloud"]["errors"] and vm["cloud"]["errors"][0]["kind"] == "Transient"
    assert vm["cloud"]["summary"] == "unknown (Transient)"
    assert any(u.startswith("far1: cloud docker/local: Transient:") for u in report["unknown"])
    # SSH is still tried (the journalled endpoint answers nothing here): that disagrees, the cloud is unknown.
    assert _kinds(vm) == [health.SSH_FAILED]


def test_a_state_this_version_cannot_read_is_unknown_and_the_others_are_still_checked(home):
    _up("ok1")
    _up("odd1")
    _rewrite(home, "odd1", "launch", {"kind": "Hibernating"}, "Hibernating", True)
    report = _check()
    odd = _vm(report, "odd1")
    assert "odd1: the journal holds a launch state this version cannot read (ValueError: unknown launch state " \
           "'Hibernating') for it" in report["unknown"]
    assert odd["journal"]["state"] == "Hibernating" and odd["journal"]["instance_id"] is None
    assert _vm(report, "ok1")["verdict"] == "ok"


# --- k3s /readyz through the access path ------------------------------------------------------------

class _Api:
    """A TLS server with its own CA that answers /readyz with ``code``."""

    def __init__(self, tmp_path):
        self.code = 200
        ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "health-test-ca")])
        ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
              .serial_number(1).not_valid_before(now - datetime.timedelta(hours=1))
              .not_valid_after(now + datetime.timedelta(hours=1))
              .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
              .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
              .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
              .sign(ca_key, hashes.SHA256()))
        import ipaddress
        leaf = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "k3s")]))
                .issuer_name(ca_name).public_key(key.public_key()).serial_number(2)
                .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(hours=1))
                .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                               critical=False)
                .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
                .sign(ca_key, hashes.SHA256()))
        self.ca_pem = ca.public_bytes(serialization.Encoding.PEM)
        cert_path, key_path = tmp_path / "api.crt", tmp_path / "api.key"
        cert_path.write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
        key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                               serialization.NoEncryption()))
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(cert_path), str(key_path))
        api = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's name)
                body = b"ok" if api.code == 200 else b"[-]etcd failed: not ready"
                self.send_response(api.code if self.path == "/readyz" else 404)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def kubeconfig(self, name, port):
        return {"apiVersion": "v1", "kind": "Config", "current-context": name,
                "clusters": [{"name": name, "cluster": {"server": "https://127.0.0.1:%d" % port,
                                                        "certificate-authority-data":
                                                            base64.b64encode(self.ca_pem).decode()}}],
                "users": [{"name": name, "user": {"token": "health-test-token"}}],
                "contexts": [{"name": name, "context": {"cluster": name, "user": name}}]}

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def api(tmp_path):
    made = _Api(tmp_path)
    try:
        yield made
    finally:
        made.stop()


def _k3s_ready(home, name, access, path):
    stages.record(None, name, "Ready", "validated", {"access": access, "kubeconfig": str(path)})


def test_k3s_direct_ready_then_not(home, api):
    _up("kd1")
    path = home / "kd1.yaml"
    path.write_text(kubeconfig.dump(api.kubeconfig("kd1", api.port)))
    _k3s_ready(home, "kd1", "Direct", path)
    vm = _vm(_check(), "kd1")
    assert vm["k3s"]["status"] == "ok" and "/readyz ok via direct (https://127.0.0.1:%d)" % api.port in \
        vm["k3s"]["detail"]
    assert _kinds(vm) == []

    api.code = 500
    vm = _vm(_check(), "kd1")
    assert _kinds(vm) == [health.K3S_NOT_READY] and vm["k3s"]["status"] == "failed"
    assert "answers HTTP 500: [-]etcd failed" in vm["disagreements"][0]["msg"]


def test_k3s_through_the_ssh_tunnel_of_the_vm(home, api):
    _up("kt1")
    path = home / "kt1.yaml"
    path.write_text(kubeconfig.dump(api.kubeconfig("kt1", 6443)))   # the tunnel's local end, as the role writes it
    _k3s_ready(home, "kt1", "SshTunnel", path)
    vm = _vm(_check(k3s_api_port=api.port), "kt1")
    assert vm["k3s"]["status"] == "ok", vm["k3s"]
    assert "an SSH tunnel to kt1:%d" % api.port in vm["k3s"]["detail"]


def test_k3s_without_ssh_or_kubeconfig_is_unknown_and_other_stages_are_reported(home, api):
    up = _up("ku1")
    _k3s_ready(home, "ku1", "SshTunnel", home / "missing.yaml")
    report = _check()
    vm = _vm(report, "ku1")
    assert vm["k3s"]["status"] == "unknown" and "no kubeconfig of ku1 found" in vm["k3s"]["detail"]

    path = home / "ku1.yaml"
    path.write_text(kubeconfig.dump(api.kubeconfig("ku1", 6443)))
    _k3s_ready(home, "ku1", "SshTunnel", path)
    [pid] = [p for p, cmd in local_mod._sshd_processes() if _folder(home, "ku1", up["vm"]["instance_id"]) in cmd]
    os.kill(pid, signal.SIGSTOP)
    try:
        vm = _vm(_check(ssh_timeout=1), "ku1")
    finally:
        os.kill(pid, signal.SIGCONT)
    assert vm["k3s"]["status"] == "unknown" and "neither is the API behind its tunnel" in vm["k3s"]["detail"]
    assert _kinds(vm) == [health.SSH_FAILED]

    stages.record(None, "ku1", "Failed", "the installer failed", {})
    vm = _vm(_check(), "ku1")
    assert vm["k3s"] == {"status": "Failed", "detail": "the journal says k3s Failed: the installer failed"}
    assert _kinds(vm) == []


def test_sweep_and_instance_teardown_rows_are_not_judged_as_vms(home):
    _up("h9")
    for key in ("sweep:gone1", "instance:local:gone2"):
        _rewrite(home, key, "teardown", {"phase": "Done"}, "Done", True)
    report = _check()
    assert [vm["name"] for vm in report["vms"]] == ["h9"], report["vms"]
    assert report["healthy"] is True, report
