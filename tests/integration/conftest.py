"""End-to-end helpers: run the collection's playbooks with the real ansible-playbook
against a throw-away state directory (journal, keys, local VMs)."""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from typing import Dict, List, Optional

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
COLLECTIONS = REPO / "build" / "collections"
BIN = pathlib.Path(sys.executable).parent
RECAP = re.compile(r"^(\S+)\s*:\s*ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)


class Run:
    def __init__(self, proc: subprocess.CompletedProcess):
        self.rc = proc.returncode
        self.out = proc.stdout

    def recap(self) -> Dict[str, Dict[str, int]]:
        return {m.group(1): {"ok": int(m.group(2)), "changed": int(m.group(3)), "unreachable": int(m.group(4)),
                             "failed": int(m.group(5))} for m in RECAP.finditer(self.out)}

    def __repr__(self) -> str:
        return "<rc=%s>\n%s" % (self.rc, self.out[-6000:])


class Ansible:
    """ansible-playbook with GPUPROV_HOME pointing at a temporary state directory."""

    def __init__(self, home: pathlib.Path):
        self.home = home
        # OpenSSH's control sockets must fit a Unix socket path (108 bytes): pytest-xdist's tmp paths are too
        # long for them, so the sockets get a short folder of their own (removed by the fixture).
        self.control_dir = tempfile.mkdtemp(prefix="gpcp-")
        self.env = dict(os.environ, GPUPROV_HOME=str(home), ANSIBLE_COLLECTIONS_PATH=str(COLLECTIONS),
                        ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1", ANSIBLE_HOST_KEY_CHECKING="True",
                        ANSIBLE_LOCAL_TEMP=str(home / "ansible-tmp"), ANSIBLE_SSH_CONTROL_PATH_DIR=self.control_dir,
                        PATH="%s:%s" % (BIN, os.environ.get("PATH", "")))
        self.env.pop("GPUPROV_JOURNAL", None)

    def command(self, playbook: str, *args: str) -> List[str]:
        return [str(BIN / "ansible-playbook"), "gpuprov.cloud.%s" % playbook, *args]

    def playbook(self, playbook: str, *args: str, timeout: float = 300, extra_env: Optional[dict] = None) -> Run:
        env = dict(self.env, **(extra_env or {}))
        proc = subprocess.run(self.command(playbook, *args), env=env, cwd=str(self.home), capture_output=False,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout,
                              check=False)
        return Run(proc)

    def popen(self, playbook: str, *args: str, extra_env: Optional[dict] = None) -> subprocess.Popen:
        env = dict(self.env, **(extra_env or {}))
        return subprocess.Popen(self.command(playbook, *args), env=env, cwd=str(self.home), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)

    def tool(self, program: str, *args: str, timeout: float = 300, extra_env: Optional[dict] = None) -> Run:
        """Another Ansible command line (``ansible``, ``ansible-inventory``) with the same environment;
        stderr is kept apart from stdout (``--list`` prints JSON on stdout)."""
        env = dict(self.env, **(extra_env or {}))
        proc = subprocess.run([str(BIN / program), *args], env=env, cwd=str(self.home), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, timeout=timeout, check=False)
        run = Run(proc)
        run.err = proc.stderr
        return run

    def live_sshd(self) -> List[str]:
        return live_sshd_folders(self.home)

    @property
    def journal_path(self) -> pathlib.Path:
        return self.home / "journal.sqlite"


def live_sshd_folders(home: pathlib.Path) -> List[str]:
    """State folders of local VMs under ``home`` whose sshd still runs (from /proc)."""
    found = []
    marker = str(home / "local") + os.sep
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % pid) as handle:
                if handle.read().rsplit(")", 1)[1].split()[0] == "Z":
                    continue
            with open("/proc/%s/cmdline" % pid, "rb") as handle:
                cmdline = handle.read().decode(errors="replace").split("\0")
        except (OSError, IndexError):
            continue
        # sshd rewrites its title into one string: "sshd: /usr/sbin/sshd -D -f <config> ..."
        for match in re.finditer(re.escape(marker) + r"\S+/sshd_config", " ".join(cmdline)):
            found.append(os.path.dirname(match.group(0)))
    return sorted(found)


def kill_sshds(home: pathlib.Path) -> None:
    for folder in live_sshd_folders(home):
        try:
            with open(os.path.join(folder, "instance.pid")) as handle:
                os.kill(int(handle.read()), signal.SIGKILL)
        except (OSError, ValueError):
            pass


@pytest.fixture
def ansible(tmp_path):
    if not shutil.which("sshd") and not os.path.exists("/usr/sbin/sshd"):
        pytest.skip("openssh-server (sshd) is not installed; .ci/run installs it")
    home = tmp_path / "gpuprov-home"
    home.mkdir(mode=0o700)
    runner = Ansible(home)
    try:
        yield runner
    finally:
        kill_sshds(home)
        shutil.rmtree(runner.control_dir, ignore_errors=True)


# --- PostgreSQL journals: one throw-away server (tests/pg_server.py), controllers as AWX jobs -----

@pytest.fixture(scope="module")
def postgres():
    """A PostgreSQL server for this test module, destroyed after it."""
    from ansible_collections.gpuprov.cloud.tests import pg_server
    reason = pg_server.unavailable()
    if reason:
        pytest.skip("PostgreSQL journal tests: %s" % reason)
    server = pg_server.PgServer()
    try:
        yield server
    finally:
        server.destroy()


def local_args(shared: pathlib.Path, vm: str) -> List[str]:
    """The provision/down arguments for ``vm`` on a local cloud whose records are in ``shared``, without k3s."""
    return ["-e", "vm=%s" % vm, "-e", "k8s=false",
            "-e", json.dumps({"gpuprov_cloud_options": {"local": {"root": str(shared / "local")}}})]


def journal_row(dsn: str, vm: str):
    """The journal row of ``vm`` in the PostgreSQL journal ``dsn`` as it is now."""
    from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journals import open_journal
    from ansible_collections.gpuprov.cloud.tests import pg_server
    journal = open_journal(dsn, password=pg_server.PASSWORD)
    try:
        return journal.load(vm)
    finally:
        journal.close()


@contextlib.contextmanager
def pg_controllers(tmp_path: pathlib.Path, server, shared_key: bool = False):
    """Two controllers (each its own HOME, as AWX jobs) on one fresh PostgreSQL journal of ``server``,
    the local cloud's instance records in one shared folder (its ``root`` option): yields
    ``(shared, dsn, [runner1, runner2])`` and kills the shared folder's sshds after. With
    ``shared_key``, every job has the same SSH key, as an AWX Machine credential gives it."""
    from ansible_collections.gpuprov.cloud.tests import pg_server
    if not shutil.which("sshd") and not os.path.exists("/usr/sbin/sshd"):
        pytest.skip("openssh-server (sshd) is not installed; .ci/run installs it")
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o700)
    dsn = server.new_database()
    env = {"GPUPROV_JOURNAL": dsn, "PGPASSWORD": pg_server.PASSWORD}
    if shared_key:
        key = shared / "ssh_key"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
        env["GPUPROV_SSH_KEY_FILE"] = str(key)
    runners = []
    for index in (1, 2):
        home = tmp_path / ("job%d-home" % index)
        home.mkdir(mode=0o700)
        runner = Ansible(home)
        runner.env.update(env)
        runners.append(runner)
    try:
        yield shared, dsn, runners
    finally:
        kill_sshds(shared)
