"""The collection's job templates run as AWX runs them: ``ansible_runner.run(...)`` (the library AWX's
task workers call), each job in a private data directory of its own that is also its HOME (AWX mounts it
at /runner), with what AWX injects: the journal credential (GPUPROV_JOURNAL, and PGPASSWORD for
PostgreSQL), the SSH key credential's file (GPUPROV_SSH_KEY_FILE), ANSIBLE_SSH_CONTROL_PATH_DIR (a short
folder of the job's, as AWX's /runner/cp), and the survey's answers plus the template's extra variables as extravars.

Nothing but the journal (and the local cloud's instance folder: its records are machine-local, standing in
for the cloud's own API) is shared between jobs: job 1 provisions, job 2 (another HOME) finds the VM and
changes nothing, SSH included, job 3 shows it in status, a health job (another fresh HOME) logs in with the
host key the journal pinned, job 4 tears it down, job 5's status says Done, and the sweep template, its survey
unanswered, makes a dry run.
Once on SQLite (a shared journal path: a single-node install) and once on PostgreSQL."""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import secrets
import shutil
import subprocess
import sys
import tempfile
from typing import Any, Dict, List, Optional

import pytest

from ansible_collections.gpuprov.cloud.tests.integration.conftest import kill_sshds, live_sshd_folders

ansible_runner = pytest.importorskip(
    "ansible_runner", reason="ansible-runner is not installed (pip install -r requirements-dev.txt)")

REPO = pathlib.Path(__file__).resolve().parents[2]
COLLECTIONS = REPO / "build" / "collections"
TEMPLATES = REPO / "extensions" / "awx" / "job_templates"
BIN = pathlib.Path(sys.executable).parent
VM = "awx1"
# Each job on the local cloud takes seconds; a job that cannot reach its VM would wait for the boot timeout.
JOB_TIMEOUT = 90


# Variables of the process running pytest that AWX's job environment does not have.
HOST_ONLY_VARIABLES = ("GPUPROV_HOME", "XDG_STATE_HOME", "GPUPROV_JOURNAL", "GPUPROV_SSH_KEY_FILE",
                       "PGPASSWORD", "PGPASSFILE", "SSH_AUTH_SOCK")


def template(name: str) -> Dict[str, Any]:
    with open(TEMPLATES / ("%s.json" % name), encoding="utf-8") as handle:
        return json.load(handle)


def survey_extravars(spec: Dict[str, Any], answers: Dict[str, Any]) -> Dict[str, Any]:
    """What AWX makes of a launch's survey answers: each answer checked against its question, the
    defaults of unanswered questions added, unanswered questions without a default left out."""
    questions = {q["variable"]: q for q in spec["spec"]}
    unknown = set(answers) - set(questions)
    assert not unknown, "not in the survey: %s" % sorted(unknown)
    out = {}
    for variable, question in questions.items():
        if variable not in answers:
            assert not question["required"], "the survey requires %s" % variable
            if "default" in question:
                out[variable] = question["default"]
            continue
        answer = answers[variable]
        if question["type"] == "multiplechoice":
            assert answer in question["choices"], (variable, answer)
        elif question["type"] == "multiselect":
            assert set(answer) <= set(question["choices"]), (variable, answer)
        elif question["type"] in ("integer", "float"):
            assert question.get("min", answer) <= answer <= question.get("max", answer), (variable, answer)
        elif question["type"] == "text":
            assert question.get("min", 0) <= len(answer) <= question.get("max", len(answer)), (variable, answer)
        out[variable] = answer
    return out


class Job:
    def __init__(self, result, folder: pathlib.Path):
        self.status = result.status
        self.rc = result.rc
        self.stats = result.stats or {}
        self.events = list(result.events)
        self.folder = folder
        with open(result.stdout.name, encoding="utf-8", errors="replace") as handle:
            self.out = handle.read()

    def changed(self, host: str) -> int:
        return self.stats.get("changed", {}).get(host, 0)

    def result_of(self, task: str) -> Dict[str, Any]:
        for event in self.events:
            data = event.get("event_data", {})
            if event.get("event") == "runner_on_ok" and data.get("task") == task:
                return data["res"]
        raise AssertionError("no ok result of task %r\n%s" % (task, self))

    def __repr__(self) -> str:
        return "<job %s status=%s rc=%s>\n%s" % (self.folder.name, self.status, self.rc, self.out[-6000:])


class AwxSite:
    """What the jobs share: the journal, the SSH key credential's key, and the local cloud's folder."""

    def __init__(self, base: pathlib.Path, journal: str, journal_password: Optional[str] = None):
        self.base = base
        self.journal = journal
        self.journal_password = journal_password
        self.shared = base / "shared"
        self.shared.mkdir(mode=0o700)
        self.key = self.shared / "machine_key"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "awx-machine-credential", "-f",
                        str(self.key)], check=True)
        self.jobs = 0
        # OpenSSH's control sockets must fit a Unix socket path (108 bytes), which pytest-xdist's tmp paths
        # may not leave room for: each job's get a short folder (AWX's own, /runner/cp, is short).
        self.control_dirs: List[str] = []

    def launch(self, name: str, answers: Dict[str, Any]) -> Job:
        """One job of the template ``name``, as AWX launches it."""
        self.jobs += 1
        folder = self.base / ("job%d" % self.jobs)
        (folder / "env").mkdir(parents=True, mode=0o700)
        (folder / "inventory").mkdir()
        # An empty inventory: the playbooks add the VM with add_host and use the implicit localhost.
        (folder / "inventory" / "hosts").write_text("all: {}\n")
        # The SSH key credential's file injector: a 0600 file in the job's folder.
        key_file = folder / "env" / ("awx_%s" % secrets.token_hex(4))
        key_file.write_bytes(self.key.read_bytes())
        key_file.chmod(0o600)
        self.control_dirs.append(tempfile.mkdtemp(prefix="gpcp-"))
        env = {"HOME": str(folder), "ANSIBLE_COLLECTIONS_PATH": str(COLLECTIONS),
               "ANSIBLE_SSH_CONTROL_PATH_DIR": self.control_dirs[-1], "ANSIBLE_FORCE_COLOR": "0",
               "PATH": "%s:%s" % (BIN, os.environ.get("PATH", "")),
               "GPUPROV_JOURNAL": self.journal, "GPUPROV_SSH_KEY_FILE": str(key_file)}
        if self.journal_password is not None:
            env["PGPASSWORD"] = self.journal_password
        spec = template(name)
        # The template's extra variables: these jobs' VMs are on the local cloud, its records in the shared
        # folder (on a real cloud, the cloud's API is what every job sees).
        extravars = {"gpuprov_clouds": ["local"],
                     "gpuprov_cloud_options": {"local": {"root": str(self.shared / "local")}}}
        extravars.update(survey_extravars(spec["survey_spec"], answers))
        result = ansible_runner.run(private_data_dir=str(folder), project_dir=str(REPO), playbook=spec["playbook"],
                                    extravars=extravars, envvars=env, quiet=True,
                                    timeout=JOB_TIMEOUT)
        return Job(result, folder)

    @staticmethod
    def ssh_from(job: Job, vm: str) -> subprocess.CompletedProcess:
        """``ssh <vm>`` through the ssh config the job left in its HOME's state directory."""
        config = job.folder / ".local" / "state" / "gpuprov" / "ssh_config"
        return subprocess.run(["ssh", "-F", str(config), "-o", "BatchMode=yes", vm, "echo", "via-ssh-config"],
                              capture_output=True, text=True, timeout=60, check=False)

    def live_sshd(self) -> List[str]:
        return live_sshd_folders(self.shared)

    def close(self) -> None:
        kill_sshds(self.shared)
        for folder in self.control_dirs:
            shutil.rmtree(folder, ignore_errors=True)


def _postgres_journal(stack):
    """A database on helper A's throw-away PostgreSQL server: (DSN without password, password)."""
    try:
        from ansible_collections.gpuprov.cloud.tests import pg_server  # pylint: disable=import-outside-toplevel
    except ImportError:
        pytest.skip("no PostgreSQL server fixture yet (tests/pg_server.py, issue 12)")
    why = pg_server.unavailable()
    if why:
        pytest.skip(why)
    server = pg_server.PgServer()
    stack.callback(server.destroy)
    return server.new_database(), pg_server.PASSWORD


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def awx_jobs(request, tmp_path_factory):
    """Jobs 1 to 5 on one AWX site, run once per journal backend; the tests below read their results."""
    if not shutil.which("sshd") and not os.path.exists("/usr/sbin/sshd"):
        pytest.skip("openssh-server (sshd) is not installed; .ci/run installs it")
    with contextlib.ExitStack() as stack, pytest.MonkeyPatch.context() as patch:
        for variable in HOST_ONLY_VARIABLES:
            patch.delenv(variable, raising=False)
        base = tmp_path_factory.mktemp("awx-" + request.param)
        if request.param == "sqlite":
            site = AwxSite(base, journal=str(base / "shared" / "journal.sqlite"))
        else:
            dsn, password = _postgres_journal(stack)
            site = AwxSite(base, journal=dsn, journal_password=password)
        stack.callback(site.close)
        jobs = {"provision": site.launch("provision", {"vm": VM})}
        jobs["live_after_provision"] = site.live_sshd()
        jobs["reprovision"] = site.launch("provision", {"vm": VM})
        jobs["live_after_reprovision"] = site.live_sshd()
        jobs["ssh_after_reprovision"] = site.ssh_from(jobs["reprovision"], VM)
        jobs["status"] = site.launch("status", {"vm": VM})
        jobs["health"] = site.launch("health", {"vm": VM})
        jobs["down"] = site.launch("down", {"vm": VM})
        jobs["live_after_down"] = site.live_sshd()
        jobs["status_after_down"] = site.launch("status", {})
        # The sweep template unanswered: its survey's defaults make it a dry run.
        jobs["sweep"] = site.launch("sweep", {})
        jobs["site"] = site
        yield jobs


def test_job1_provisions_the_vm(awx_jobs):
    job = awx_jobs["provision"]
    assert (job.status, job.rc) == ("successful", 0), job
    assert job.changed(VM) == 1, job
    # The smoke command ran in the vm task's verified SSH session (the play's own is skipped).
    assert job.result_of("Provision the VM (runs on the controller)")["smoke"]["stdout"].startswith("Linux"), job
    assert len(awx_jobs["live_after_provision"]) == 1
    # The journal credential's password never shows in the job's output.
    site = awx_jobs["site"]
    if site.journal_password:
        assert site.journal_password not in job.out


def test_job2_with_a_fresh_home_reprovisions_as_a_no_op(awx_jobs):
    job = awx_jobs["reprovision"]
    assert (job.status, job.rc) == ("successful", 0), job
    assert job.changed(VM) == 0, job
    # The smoke command ran in the vm task's verified SSH session (the play's own is skipped).
    assert job.result_of("Provision the VM (runs on the controller)")["smoke"]["stdout"].startswith("Linux"), job
    assert awx_jobs["live_after_reprovision"] == awx_jobs["live_after_provision"]
    # `ssh awx1` worked from this job's HOME too: its ssh config and pinned host key came from the journal.
    ssh = awx_jobs["ssh_after_reprovision"]
    assert ssh.returncode == 0 and "via-ssh-config" in ssh.stdout, ssh.stderr
    status = awx_jobs["status"].result_of("Read the journal")["vms"]
    assert [(vm["name"], vm["state"]) for vm in status] == [(VM, "Ready")], status


def test_job3_status_shows_the_vm(awx_jobs):
    job = awx_jobs["status"]
    assert (job.status, job.rc) == ("successful", 0), job
    vms = {vm["name"]: vm for vm in job.result_of("Read the journal")["vms"]}
    assert vms[VM]["status"] == "running" and vms[VM]["machine"] == "launch", vms
    assert VM in job.out


def test_a_health_job_with_a_fresh_home_logs_in_with_the_journals_host_key(awx_jobs):
    job = awx_jobs["health"]
    assert (job.status, job.rc) == ("successful", 0), job
    result = job.result_of("Compare the journal with the clouds, SSH and k3s (read-only)")
    assert result["healthy"] is True and result["unknown"] == [], result["table"]
    [vm] = result["vms"]
    assert vm["name"] == VM and vm["verdict"] == "ok" and vm["ssh"]["status"] == "ok", vm
    # Its known_hosts was generated from the journal: the job's HOME had none.
    known = job.folder / ".local" / "state" / "gpuprov" / "known_hosts"
    assert known.read_text().startswith("gpuprov-%s-" % VM)
    site = awx_jobs["site"]
    if site.journal_password:
        assert site.journal_password not in job.out


def test_job4_down_leaves_nothing(awx_jobs):
    job = awx_jobs["down"]
    assert (job.status, job.rc) == ("successful", 0), job
    assert job.changed(VM) == 1, job
    assert awx_jobs["live_after_down"] == []
    assert not (awx_jobs["site"].shared / "local" / VM).exists()
    status = awx_jobs["status_after_down"]
    assert (status.status, status.rc) == ("successful", 0), status
    result = status.result_of("Read the journal")
    vms = {vm["name"]: vm for vm in result["vms"]}
    assert vms[VM]["machine"] == "teardown" and vms[VM]["state"] == "Done", vms
    assert result["leaked"] == []


def test_the_sweep_template_is_a_dry_run_by_default(awx_jobs):
    job = awx_jobs["sweep"]
    assert (job.status, job.rc) == ("successful", 0), job
    [result] = [e["event_data"]["res"] for e in job.events if e.get("event") == "runner_on_ok"
                and "cost_per_hour" in (e.get("event_data", {}).get("res") or {})]
    assert result["changed"] is False and result["removed"] == [], result
    # Nothing of the VM job 4 tore down is left to sweep, on the local cloud the jobs share.
    assert [e for e in result["orphans"] if e["cloud"] == "local"] == [], result["table"]
    assert "List what no journal row owns (dry run)" in job.out, job
