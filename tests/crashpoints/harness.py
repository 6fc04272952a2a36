"""The crash-point harness: SIGKILL the real ``ansible-playbook`` at every crash point of
``provision``, ``down`` and ``reap``, then check that what exists and what the journal says agree.

How it works:
  1. A trace run of ``provision``, of ``down`` and (after a provision with a ttl that has
     passed) of ``reap -e delete=true``, with the test-only callback
     ``callback/gpuprov_crashpoint.py`` loaded, records the ordered list of points reached:
     every journal commit (before/after; the limits and VM-list writes too), every provider
     primitive (before/after), and every step inside the adapter's create/delete, each with a
     fingerprint of the durable state at that point.
  2. For each point (``jobs()`` at once, each on its own VM name in one state directory):
     run the phase with the callback set to kill the controller (ansible-playbook and its
     worker) at that point, re-run the phase at once, as a user would, and check:
       provision: (a) the re-run reaches Ready with exactly one instance, without waiting
                  for a timeout; (b) down (one run over all the points' VMs) then leaves
                  zero and says Done;
       down:      (after one provision run over all the points' VMs) the re-run of down
                  leaves zero and says Done;
       reap:      (after one provision run over all the points' VMs with ``ttl=REAP_TTL``,
                  once each VM's journalled deadline has passed) the re-run of ``reap -e
                  delete=true -e vm=<vm>`` leaves zero, says Done, and the VM's limits are
                  gone from the journal (its ``vm_limits`` row) as it is from the VM list.
                  On docker the VM's watchdog powers its container off at the deadline plus
                  its grace: a reap finds it running or exited, and must converge either way,
                  so every other point's container is powered off first as the watchdog does
                  (``Cloud.power_off``): both are checked whatever the timing;
       always:    (c) the journal never says Done while anything exists, nor Ready unless
                  exactly the journalled instance exists; after a successful down the VM is
                  gone from the journal's VM list (what the inventory lists) and ssh_config.
     The killed worker is reaped late (see ``late_reaping``): its zombie keeps its pid while
     the re-run runs, as under an init that reaps late.
  3. The matrix (point x cloud x outcome) and its totals are printed and written to a file.

Instances are counted on the real machine: live sshd processes of the VM (local), containers
carrying the VM's label, in any state (docker).

Knobs (environment):
  GPUPROV_CRASH_MATRIX  "default": the first point of each class of consecutive points that
                        leave the same durable state (see ``classes``); "full": every point;
                        "off": skip the matrix
  GPUPROV_CRASH_JOBS    points checked at once (default 4)
  GPUPROV_CRASH_ONLY    a regular expression: only the points whose "<phase> <name>" matches
  GPUPROV_CRASH_REAP    "init": leave reaping the killed controller to the system's init
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import ctypes
import itertools
import dataclasses
import json
import os
import pathlib
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from typing import Dict, List, Optional, Tuple

REPO = pathlib.Path(__file__).resolve().parents[2]
COLLECTIONS = REPO / "build" / "collections"
CALLBACK_DIR = pathlib.Path(__file__).resolve().parent / "callback"
CALLBACK_NAME = "gpuprov_crashpoint"
BIN = pathlib.Path(sys.executable).parent
PHASES = ("provision", "down", "reap")
# The arguments each phase's runs take besides the VM; reap's setup provisions with REAP_TTL.
PHASE_ARGS = {"reap": ["-e", "delete=true"]}
REAP_TTL = "1s"
PR_SET_CHILD_SUBREAPER = 36


def matrix_mode() -> str:
    mode = os.environ.get("GPUPROV_CRASH_MATRIX", "default").strip().lower() or "default"
    if mode not in ("default", "full", "off"):
        raise ValueError("GPUPROV_CRASH_MATRIX=%r: expected default, full or off" % mode)
    return mode


def jobs() -> int:
    return max(1, int(os.environ.get("GPUPROV_CRASH_JOBS", "4")))


def vm_var() -> str:
    """The playbooks' variable for the VM name: ``vm`` (``name`` before the rename)."""
    text = (REPO / "playbooks" / "provision.yml").read_text()
    return "vm" if re.search(r"\bvm is defined\b", text) else "name"


def vm_args(vm: str) -> List[str]:
    return ["-e", "%s=%s" % (vm_var(), vm)]


# --- running ansible-playbook ------------------------------------------------------------

@dataclasses.dataclass
class Run:
    rc: Optional[int]          # None: killed by the harness after its timeout
    out: str
    seconds: float
    killed_at: Optional[str]   # the crash point that killed it, if one did

    @property
    def ok(self) -> bool:
        return self.rc == 0

    def tail(self, lines: int = 25) -> str:
        return "\n".join(self.out.rstrip().splitlines()[-lines:])

    def failure(self) -> str:
        """The task's message, for a symptom line."""
        found = re.findall(r'"msg": "((?:[^"\\]|\\.)*)"', self.out)
        if found:
            return found[-1][:400]
        errors = [line for line in self.out.splitlines() if "ERROR" in line or "fatal:" in line]
        return (errors[-1] if errors else self.tail(3))[:400]


class Sandbox:
    """One state directory (journal, keys, local VMs) and the environment that uses it."""

    def __init__(self, root: pathlib.Path, cloud_args: List[str]):
        self.home = root / "home"
        self.home.mkdir(mode=0o700, parents=True)
        self.cloud_args = list(cloud_args)
        # ssh's ControlPath must fit a socket address (108 bytes): pytest's tmp paths may not.
        self.control_dir = tempfile.mkdtemp(prefix="gpcp-")
        self._numbers = itertools.count(1)   # one number per run, also across threads
        self.env = dict(os.environ, GPUPROV_HOME=str(self.home), ANSIBLE_COLLECTIONS_PATH=str(COLLECTIONS),
                        ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1", ANSIBLE_HOST_KEY_CHECKING="True",
                        ANSIBLE_LOCAL_TEMP=str(self.home / "ansible-tmp"),
                        ANSIBLE_SSH_CONTROL_PATH_DIR=self.control_dir,
                        PATH="%s:%s" % (BIN, os.environ.get("PATH", "")))
        for name in list(self.env):
            if name == "GPUPROV_JOURNAL" or name.startswith("CRASHPOINT_"):
                self.env.pop(name)

    def close(self) -> None:
        shutil.rmtree(self.control_dir, ignore_errors=True)

    @property
    def journal_path(self) -> pathlib.Path:
        return self.home / "journal.sqlite"

    def playbook(self, playbook: str, vm: str, crash: Optional[str] = None, trace: Optional[Dict[str, str]] = None,
                 timeout: float = 300, extra: Optional[List[str]] = None) -> Tuple[Run, Optional[pathlib.Path]]:
        """Run ``gpuprov.cloud.<playbook>`` for ``vm`` (with the phase's PHASE_ARGS, or ``extra``). With
        ``crash`` (a point name) or ``trace`` (the environment that fingerprints each point) the
        crash-point callback is loaded; its folder is returned with the run."""
        number = next(self._numbers)
        env = dict(self.env, **(trace or {}))
        points_dir = None
        if crash or trace is not None:
            points_dir = self.home.parent / ("points-%d-%s" % (number, playbook))
            env.update(crash_env(crash or "", points_dir, env))
        command = [str(BIN / "ansible-playbook"), "gpuprov.cloud.%s" % playbook] + vm_args(vm) + self.cloud_args + (
            PHASE_ARGS.get(playbook, []) if extra is None else extra)
        run = run_command(command, env, str(self.home), timeout)
        log = self.home.parent / ("%d-%s%s.log" % (number, playbook, "-crash" if crash else ""))
        log.write_text("$ %s\n# crash point: %s\n# rc %s, %.1f s\n%s" % (
            " ".join(command), crash, run.rc, run.seconds, run.out))
        if points_dir is not None:
            run.killed_at = killed_at(points_dir)
        return run, points_dir

    def fleet(self, playbook: str, vms: List[str], timeout: float = 600, extra: Optional[List[str]] = None) -> "FleetRun":
        """One run of ``gpuprov.cloud.<playbook>`` over an inventory of ``vms`` (all at once), with ``extra``."""
        number = next(self._numbers)
        inventory = self.home.parent / ("fleet-%d.yml" % number)
        inventory.write_text("gpuprov_vms:\n  hosts:\n%s" % "".join("    %s:\n" % vm for vm in vms))
        command = [str(BIN / "ansible-playbook"), "gpuprov.cloud.%s" % playbook, "-i", str(inventory),
                   "--forks", str(max(1, min(len(vms), 30)))] + self.cloud_args + list(extra or [])
        run = run_command(command, dict(self.env), str(self.home), timeout)
        log = self.home.parent / ("%d-%s-fleet.log" % (number, playbook))
        log.write_text("$ %s\n# rc %s, %.1f s\n%s" % (" ".join(command), run.rc, run.seconds, run.out))
        return FleetRun(run, vms)

    # -- what the journal says --------------------------------------------------------
    def journal(self, vm: str) -> Dict[str, object]:
        """The machine row of ``vm`` (kind, state kind, label, lease owner), the VM-list row, its
        limits (``limits_row``: the ``vm_limits`` row's instance and deadline, or None), and whether
        ssh_config names it. Read with plain SQL: nothing is written."""
        found: Dict[str, object] = {"kind": None, "state": None, "label": None, "lease_owner": None,
                                    "terminal": True, "vm_row": None, "instance_id": None, "limits_row": None}
        if self.journal_path.exists():
            db = sqlite3.connect(str(self.journal_path), timeout=30)
            try:
                row = db.execute("SELECT kind, state, label, lease_owner, terminal FROM machines WHERE key = ?",
                                 (vm,)).fetchone()
                if row:
                    state = json.loads(row[1])
                    found.update(kind=row[0], state=state.get("kind"), label=row[2], lease_owner=row[3],
                                 terminal=bool(row[4]), instance_id=(state.get("vm") or {}).get("instance_id"))
                tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
                vm_row = db.execute("SELECT status FROM vms WHERE name = ?", (vm,)).fetchone() \
                    if "vms" in tables else None   # a journal gets the VM list's table with its first row
                found["vm_row"] = vm_row[0] if vm_row else None
                limits = db.execute("SELECT instance_id, limits FROM vm_limits WHERE key = ?", (vm,)).fetchone() \
                    if "vm_limits" in tables else None
                if limits:
                    found["limits_row"] = {"instance_id": limits[0],
                                           "expires_at": json.loads(limits[1]).get("expires_at")}
            except sqlite3.OperationalError as exc:
                found["error"] = str(exc)
            finally:
                db.close()
        config = self.home / "ssh_config"
        found["in_ssh_config"] = config.exists() and re.search(
            r"^Host %s$" % re.escape(vm), config.read_text(), re.M) is not None
        return found


class FleetRun:
    """Per-VM results of one playbook run over many VMs."""

    FATAL = re.compile(r"^fatal: \[([^\]]+)\]: (?:FAILED|UNREACHABLE)! => (.*)$", re.M)
    READY = re.compile(r"^gpuprov \[(\S+)\s+([\d.]+)s\] .* -> Ready\b", re.M)
    RECAP = re.compile(r"^(\S+)\s*:\s*ok=\d+\s+changed=\d+\s+unreachable=(\d+)\s+failed=(\d+)", re.M)

    def __init__(self, run: Run, vms: List[str]):
        self.run = run
        self.failed: Dict[str, str] = {}
        self.ready_after: Dict[str, float] = {}
        for match in self.FATAL.finditer(run.out):
            try:
                msg = str(json.loads(match.group(2)).get("msg"))
            except ValueError:
                msg = match.group(2)
            self.failed.setdefault(match.group(1), msg[:400])
        for match in self.READY.finditer(run.out):
            self.ready_after[match.group(1)] = float(match.group(2))
        recap = {m.group(1): int(m.group(2)) + int(m.group(3)) for m in self.RECAP.finditer(run.out)}
        for vm in vms:
            if vm not in recap:
                self.failed.setdefault(vm, "no result for it (ansible-playbook rc %s): %s" % (run.rc, run.failure()))
            elif recap[vm]:
                self.failed.setdefault(vm, "failed (see the log)")


def run_command(command: List[str], env: Dict[str, str], cwd: str, timeout: float) -> Run:
    """Run in its own session, so a timeout can stop the whole process group."""
    started = time.monotonic()
    proc = subprocess.Popen(command, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, text=True, start_new_session=True)
    try:
        out, _err = proc.communicate(timeout=timeout)
        rc: Optional[int] = proc.returncode
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        out, _err = proc.communicate()
        out += "\n[harness] killed after %.0f s\n" % timeout
        rc = None
    return Run(rc, out, time.monotonic() - started, None)


@contextlib.contextmanager
def late_reaping():
    """Make this process the reaper of the killed controllers' orphans and reap them only at the
    end, as an init that reaps late does (a container without --init, an AWX pod): a killed
    worker stays a zombie, still holding its pid, while the re-runs run.
    GPUPROV_CRASH_REAP=init leaves reaping to the system's init instead."""
    libc = None
    if os.environ.get("GPUPROV_CRASH_REAP", "late") != "init" and sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
                libc = None
        except (OSError, AttributeError):
            libc = None
    try:
        yield
    finally:
        if libc is not None:
            libc.prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
            while True:
                try:
                    pid, _status = os.waitpid(-1, os.WNOHANG)
                except ChildProcessError:
                    break
                if pid == 0:
                    break


def crash_env(point: str, folder: pathlib.Path, env: Optional[Dict[str, str]] = None,
              action: str = "KILL") -> Dict[str, str]:
    """The environment that makes one ansible-playbook run load the crash-point callback and
    SIGKILL the controller at ``point`` (a point name such as "before commit Creating -> Booting #1"),
    or, with ``action="PAUSE"``, hold it there until ``folder/resume`` exists.
    ``folder`` (created) receives trace.jsonl and, once it happened, killed.json or paused.json."""
    env = env if env is not None else os.environ
    folder.mkdir(parents=True, exist_ok=True)
    enabled = [c for c in env.get("ANSIBLE_CALLBACKS_ENABLED", "").split(",") if c.strip() and c != CALLBACK_NAME]
    plugin_dirs = [str(CALLBACK_DIR)] + [p for p in [env.get("ANSIBLE_CALLBACK_PLUGINS")] if p]
    return {"ANSIBLE_CALLBACK_PLUGINS": os.pathsep.join(plugin_dirs),
            "ANSIBLE_CALLBACKS_ENABLED": ",".join(enabled + [CALLBACK_NAME]),
            "CRASHPOINT_DIR": str(folder), "CRASHPOINT_" + action: point}


def killed_at(folder: pathlib.Path) -> Optional[str]:
    """The point a crash_env run was killed at (None: it never reached it)."""
    path = folder / "killed.json"
    return json.loads(path.read_text())["point"] if path.exists() else None


# --- clouds --------------------------------------------------------------------------------

class Cloud:
    """What exists on one cloud, counted on the real machine."""

    name = ""
    rerun_budget_s = 60.0     # a re-run slower than this waited for a timeout

    def args(self) -> List[str]:
        return ["-e", "clouds=%s" % self.name]

    def instances(self, sandbox: Sandbox, vm: str) -> List[str]:
        raise NotImplementedError

    def watch(self, sandbox: Sandbox, vm: str) -> Dict[str, str]:
        """What a trace run fingerprints at each point (see World in the callback)."""
        return {"CRASHPOINT_WATCH": str(sandbox.home),
                # Ansible's temp files, ssh sockets, logs, and the pid file sshd itself writes.
                "CRASHPOINT_WATCH_SKIP": r"(^|/)(ansible-tmp|cp)/|\.log$|(^|/)sshd\.pid$"}

    def leftovers(self, sandbox: Sandbox, vm: str) -> List[str]:
        """Anything of ``vm`` besides running instances that a successful down must remove."""
        return []

    def remove_all(self, sandbox: Sandbox, vm: str) -> None:
        raise NotImplementedError

    def power_off(self, sandbox: Sandbox, vm: str) -> bool:
        """Power the VM off as its watchdog does at its deadline plus grace; False where no
        watchdog runs (the local cloud's VMs have none)."""
        return False


class LocalCloud(Cloud):
    name = "local"
    rerun_budget_s = 25.0     # a provision takes ~5 s; the boot timeout is 30 s

    def instances(self, sandbox: Sandbox, vm: str) -> List[str]:
        return [os.path.basename(f) for f in live_sshd_folders(sandbox.home / "local" / vm)]

    def leftovers(self, sandbox: Sandbox, vm: str) -> List[str]:
        folder = sandbox.home / "local" / vm
        return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []

    def remove_all(self, sandbox: Sandbox, vm: str) -> None:
        for pid in sshd_pids(sandbox.home / "local" / vm):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def _sshd_processes(under: pathlib.Path):
    marker = str(under) + os.sep
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % pid) as handle:
                if handle.read().rsplit(")", 1)[1].split()[0] == "Z":
                    continue
            with open("/proc/%s/cmdline" % pid, "rb") as handle:
                cmdline = handle.read().decode(errors="replace").replace("\0", " ")
        except (OSError, IndexError):
            continue
        # sshd may rewrite its title into one string: "sshd: /usr/sbin/sshd -D -f <config> ..."
        for match in re.finditer(re.escape(marker) + r"\S+/sshd_config", cmdline):
            yield int(pid), os.path.dirname(match.group(0))


def live_sshd_folders(under: pathlib.Path) -> List[str]:
    """Instance folders under ``under`` whose sshd runs (from /proc; zombies excluded)."""
    return sorted(folder for _pid, folder in _sshd_processes(under))


def sshd_pids(under: pathlib.Path) -> List[int]:
    return sorted(pid for pid, _folder in _sshd_processes(under))


class DockerCloud(Cloud):
    name = "docker"
    rerun_budget_s = 75.0     # a provision takes ~10 s; the boot timeout is 120 s

    def __init__(self, client):
        self.client = client

    def _containers(self, vm: str):
        return self.client.containers.list(all=True, filters={"label": "gpuprov-vm-name=%s" % vm},
                                           ignore_removed=True)

    def instances(self, sandbox: Sandbox, vm: str) -> List[str]:
        return sorted(c.id for c in self._containers(vm))

    def watch(self, sandbox: Sandbox, vm: str) -> Dict[str, str]:
        return dict(super().watch(sandbox, vm), CRASHPOINT_WATCH_DOCKER="gpuprov-vm-name=%s" % vm)

    def remove_all(self, sandbox: Sandbox, vm: str) -> None:
        for container in self._containers(vm):
            try:
                container.remove(force=True, v=True)
            except Exception:  # already gone (NotFound) or being removed: nothing left to do
                pass

    def power_off(self, sandbox: Sandbox, vm: str) -> bool:
        # The watchdog's power-off is `kill -TERM 1` in the container: its init ends and it exits.
        for container in self._containers(vm):
            container.kill(signal="SIGTERM")
            container.wait(timeout=60)
        return True


# --- points --------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Point:
    phase: str       # provision | down | reap
    name: str        # "<label> #<n>"
    state: str       # the state last committed when it was reached
    world: str = ""  # fingerprint of the durable state at the point (trace runs)

    @property
    def label(self) -> str:
        return self.name.rsplit(" #", 1)[0]

    @property
    def kind(self) -> str:
        """commit | primitive | step"""
        words = self.label.split()
        if words[0] == "in":
            return "step"
        return "commit" if words[1] == "commit" else "primitive"


def read_points(phase: str, folder: pathlib.Path) -> List[Point]:
    found = []
    path = folder / "trace.jsonl"
    if path.exists():
        for line in path.read_text().splitlines():
            record = json.loads(line)
            found.append(Point(phase, record["point"], record["state"], record.get("world", "")))
    return found


def wait_until(condition, what: str, limit_s: float) -> Optional[str]:
    """Poll ``condition`` until it holds; None then, else (after ``limit_s``, which only keeps a
    broken run from hanging) the problem, naming ``what``."""
    deadline = time.monotonic() + limit_s
    while not condition():
        if time.monotonic() > deadline:
            return "gave up after %.0f s waiting for %s" % (limit_s, what)
        time.sleep(0.1)
    return None


def _deadlines_passed(sandbox: Sandbox, vms: List[str]) -> bool:
    for vm in vms:
        limits = sandbox.journal(vm)["limits_row"]
        if not isinstance(limits, dict) or limits["expires_at"] is None or time.time() < limits["expires_at"]:
            return False
    return True


def provision_expired(sandbox: Sandbox, vms: List[str]) -> Tuple["FleetRun", Optional[str]]:
    """reap's setup: one provision run over ``vms`` with ``ttl=REAP_TTL``, then a wait until the
    journalled deadline of each VM it brought up has passed (reap reads the journal's clock, this
    machine's). Returns the run and the problem if a deadline never passed (or was never journalled)."""
    run = sandbox.fleet("provision", vms, extra=["-e", "ttl=%s" % REAP_TTL])
    up = [vm for vm in vms if vm not in run.failed]
    return run, wait_until(lambda: _deadlines_passed(sandbox, up), "the journalled deadlines of %s to pass"
                           % ", ".join(up), limit_s=60)


def trace(cloud: Cloud, sandbox: Sandbox, vm: str) -> Tuple[Dict[str, List[Point]], List[str]]:
    """The points of a clean provision, a clean down and a clean reap (of the VM provisioned again,
    its ttl passed), in order; problems if the clean runs fail."""
    points: Dict[str, List[Point]] = {}
    problems = []
    try:
        for phase in PHASES:
            if phase == "reap":
                setup, waited = provision_expired(sandbox, [vm])
                if vm in setup.failed or waited:
                    problems.append("reap's setup failed: %s" % (setup.failed.get(vm) or waited))
                    continue
            run, folder = sandbox.playbook(phase, vm, trace=cloud.watch(sandbox, vm))
            if not run.ok:
                problems.append("the clean %s run failed (rc %s): %s" % (phase, run.rc, run.tail()))
            points[phase] = read_points(phase, folder)
            if not points[phase]:
                problems.append("the %s trace recorded no points: is the callback loaded?\n%s"
                                % (phase, run.tail()))
            if phase != "provision":
                row = sandbox.journal(vm)
                if cloud.instances(sandbox, vm) or row["state"] != "Done" or row["limits_row"] is not None:
                    problems.append("the clean %s left %s, the journal saying %s%s" % (
                        phase, cloud.instances(sandbox, vm), row["label"],
                        " and still holding its limits" if row["limits_row"] is not None else ""))
    finally:
        cloud.remove_all(sandbox, vm)
    return points, problems


def classes(points: List[Point]) -> List[int]:
    """The class of each point: consecutive points whose durable state (the trace's
    fingerprint) is the same are one class, since a kill at either leaves the next run the
    same facts."""
    found, index, previous = [], -1, None
    for point in points:
        if index < 0 or not point.world or point.world != previous:
            index += 1
        found.append(index)
        previous = point.world
    return found


def select(points: List[Point], mode: str) -> List[Point]:
    """The points checked. ``full``: every one. ``default``: the first point of each class (see
    ``classes``). GPUPROV_CRASH_ONLY narrows either to the points whose name matches."""
    if mode == "full":
        chosen = list(points)
    else:
        seen = set()
        chosen = []
        for point, klass in zip(points, classes(points), strict=True):
            if klass not in seen:
                seen.add(klass)
                chosen.append(point)
    only = os.environ.get("GPUPROV_CRASH_ONLY")
    if only:
        chosen = [p for p in chosen if re.search(only, "%s %s" % (p.phase, p.name))]
    return chosen


# --- checking the points ---------------------------------------------------------------------

@dataclasses.dataclass
class Outcome:
    point: Point
    cloud: str
    vm: str
    status: str = "ok"                    # ok | FAIL
    symptoms: List[str] = dataclasses.field(default_factory=list)
    context: str = ""                     # how its setup differed, for the failure list ("powered off first")

    def fail(self, symptom: str) -> None:
        self.status = "FAIL"
        self.symptoms.append(symptom)

    @property
    def cell(self) -> str:
        return self.status


def _truthful(outcome: Outcome, cloud: Cloud, sandbox: Sandbox, when: str) -> Tuple[Dict, List[str]]:
    """Invariant (c): the journal never says Done while anything exists, nor Ready unless
    exactly the journalled instance exists."""
    row = sandbox.journal(outcome.vm)
    found = cloud.instances(sandbox, outcome.vm)
    if row.get("error"):
        outcome.fail("%s: the journal cannot be read: %s" % (when, row["error"]))
    if row["state"] == "Done" and found:
        outcome.fail("%s: the journal says Done while %d instance(s) exist: %s" % (when, len(found), found))
    if row["state"] == "Ready" and found != [row["instance_id"]]:
        outcome.fail("%s: the journal says Ready with %s while %s exist" % (when, row["instance_id"], found))
    return row, found


def _crash(outcome: Outcome, cloud: Cloud, sandbox: Sandbox, phase: str) -> None:
    """Run ``phase`` with the kill at the outcome's point, then check what the kill left."""
    run, _folder = sandbox.playbook(phase, outcome.vm, crash=outcome.point.name)
    if run.killed_at is None:
        # A point the trace reached but this run did not: the path changed, or the callback
        # did not load. Either way nothing was proved here.
        outcome.fail("the killed run never reached the point (rc %s%s): %s" % (
            run.rc, ", stopped after its timeout" if run.rc is None else "", run.failure()))
    elif run.rc != -signal.SIGKILL:
        outcome.fail("ansible-playbook survived the kill at the point (rc %s)" % run.rc)
    _truthful(outcome, cloud, sandbox, "after the kill")


def _after_provision(outcome: Outcome, cloud: Cloud, sandbox: Sandbox, run: "FleetRun") -> None:
    """(a): the re-run of provision reached Ready with exactly one instance, promptly."""
    failed = run.failed.get(outcome.vm)
    if failed is not None:
        outcome.fail("the re-run of provision failed: %s" % failed)
    row, found = _truthful(outcome, cloud, sandbox, "after the re-run")
    if failed is None:
        if row["state"] != "Ready":
            outcome.fail("the re-run succeeded but the journal says %s" % row["label"])
        if len(found) != 1:
            outcome.fail("the re-run left %d instances (want exactly 1): %s" % (len(found), found))
        took = run.ready_after.get(outcome.vm)
        if took is not None and took > cloud.rerun_budget_s:
            outcome.fail("the re-run took %.0f s to Ready (> %.0f s): it waited for a timeout"
                         % (took, cloud.rerun_budget_s))


def _after_down(outcome: Outcome, cloud: Cloud, sandbox: Sandbox, run: "FleetRun", what: str,
                had_vm: bool) -> None:
    """(b): down leaves zero. When a VM existed, a successful down says Done and the VM is gone
    from the VM list and ssh_config; when none did, the journal must not claim one (a terminal
    state other than Ready/Leaked, or no row)."""
    failed = run.failed.get(outcome.vm)
    if failed is not None:
        outcome.fail("%s failed: %s" % (what, failed))
    row, found = _truthful(outcome, cloud, sandbox, "after %s" % what)
    if found:
        outcome.fail("%s left %d instance(s): %s" % (what, len(found), found))
    if failed is not None:
        return
    if had_vm and row["state"] != "Done":
        outcome.fail("%s succeeded but the journal says %s (%s), not Done" % (what, row["label"], row["kind"]))
    elif not row["terminal"] or row["state"] in ("Ready", "Leaked"):
        outcome.fail("%s succeeded but the journal says %s (%s)" % (what, row["label"], row["kind"]))
    left = cloud.leftovers(sandbox, outcome.vm)
    if left:
        outcome.fail("%s left instance folders: %s" % (what, left))
    if row["vm_row"] is not None:
        outcome.fail("%s succeeded but the journal's VM list still has it (%s)" % (what, row["vm_row"]))
    if row["in_ssh_config"]:
        outcome.fail("%s succeeded but ssh_config still has Host %s" % (what, outcome.vm))
    if row["limits_row"] is not None:
        outcome.fail("%s succeeded but the journal still has its limits (vm_limits: %s)" % (what, row["limits_row"]))


def _provision_point(outcome: Outcome, cloud: Cloud, sandbox: Sandbox) -> None:
    _crash(outcome, cloud, sandbox, "provision")
    run, _folder = sandbox.playbook("provision", outcome.vm)   # at once, as a user would
    _after_provision(outcome, cloud, sandbox, FleetRun(run, [outcome.vm]))


def _down_point(outcome: Outcome, cloud: Cloud, sandbox: Sandbox) -> None:
    _crash(outcome, cloud, sandbox, "down")
    run, _folder = sandbox.playbook("down", outcome.vm)
    _after_down(outcome, cloud, sandbox, FleetRun(run, [outcome.vm]), "the re-run of down", had_vm=True)


def _reap_point(outcome: Outcome, cloud: Cloud, sandbox: Sandbox) -> None:
    _crash(outcome, cloud, sandbox, "reap")
    run, _folder = sandbox.playbook("reap", outcome.vm)   # reap -e delete=true -e vm=<vm>, at once
    _after_down(outcome, cloud, sandbox, _localhost_run(run, outcome.vm), "the re-run of reap", had_vm=True)


def _localhost_run(run: Run, vm: str) -> "FleetRun":
    """A run whose play is on localhost (reap) as the FleetRun of ``vm``: the VM failed if the run did."""
    found = FleetRun(run, [])
    if not run.ok:
        found.failed[vm] = "rc %s: %s" % (run.rc, run.failure())
    return found


def _each(function, outcomes: List[Outcome], *args) -> None:
    """``function(outcome, *args)`` for every outcome, ``jobs()`` at once; an error in the
    harness is reported on its point, and the other points still run."""
    def one(outcome):
        try:
            function(outcome, *args)
        except Exception as exc:  # reported on the point, not raised
            outcome.fail("harness error: %s: %s" % (type(exc).__name__, exc))

    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs()) as pool:
        list(pool.map(one, outcomes))


def check_phase(cloud: Cloud, phase: str, points: List[Point], sandbox: Sandbox, prefix: str) -> List[Outcome]:
    """Every point of one phase, each on its own VM name in one shared state directory.

    Per point, the killed run and the re-run that follows it at once are separate
    ansible-playbook processes (``jobs()`` points at once). The runs that only set up or
    finish (the provision before a killed down or reap, the down after a re-run of
    provision) are one playbook run over all the points' VMs."""
    outcomes = [Outcome(p, cloud.name, "%s-%s%03d" % (prefix, phase[0], i)) for i, p in enumerate(points)]
    if not outcomes:
        return outcomes
    if phase == "reap":
        setup, waited = provision_expired(sandbox, [o.vm for o in outcomes])
        for index, outcome in enumerate(outcomes):
            found = cloud.instances(sandbox, outcome.vm)
            if outcome.vm in setup.failed or len(found) != 1 or waited:
                outcome.fail("setup: the clean provision with ttl=%s failed (%d instances): %s"
                             % (REAP_TTL, len(found), setup.failed.get(outcome.vm) or waited))
            elif index % 2 and cloud.power_off(sandbox, outcome.vm):
                outcome.context = "powered off first, as its watchdog does"   # as it would have, were the run slower
        _each(_reap_point, [o for o in outcomes if o.status == "ok"], cloud, sandbox)
        return outcomes
    if phase == "provision":
        _each(_provision_point, outcomes, cloud, sandbox)
        down = sandbox.fleet("down", [o.vm for o in outcomes])
        for outcome in outcomes:
            reran = not any(s.startswith("the re-run of provision failed") for s in outcome.symptoms)
            _after_down(outcome, cloud, sandbox, down, "down after the re-run", had_vm=reran)
        return outcomes
    setup = sandbox.fleet("provision", [o.vm for o in outcomes])
    for outcome in outcomes:
        found = cloud.instances(sandbox, outcome.vm)
        if outcome.vm in setup.failed or len(found) != 1:
            outcome.fail("setup: the clean provision failed (%d instances): %s"
                         % (len(found), setup.failed.get(outcome.vm)))
    _each(_down_point, [o for o in outcomes if o.status == "ok"], cloud, sandbox)
    return outcomes


def run_matrix(cloud: Cloud, points: Dict[str, List[Point]], sandbox: Sandbox, prefix: str,
               seconds: Optional[Dict[str, float]] = None) -> List[Outcome]:
    """Every phase's points checked; ``seconds`` (if given) receives each phase's wall time, its setup and
    finishing runs included (the report shows them: the matrix runs in ``make test``)."""
    outcomes: List[Outcome] = []
    try:
        with late_reaping():
            for phase in PHASES:
                started = time.monotonic()
                outcomes += check_phase(cloud, phase, points.get(phase, []), sandbox, prefix)
                if seconds is not None:
                    seconds[phase] = time.monotonic() - started
    finally:
        for outcome in outcomes:
            cloud.remove_all(sandbox, outcome.vm)
    return outcomes


def new_prefix(cloud: Cloud) -> str:
    return "crash-%s-%s" % (cloud.name[:3], uuid.uuid4().hex[:6])


# --- the report ----------------------------------------------------------------------------

def totals(outcomes: List[Outcome], traced: int) -> Dict[str, int]:
    counts = {"traced": traced, "checked": len(outcomes), "ok": 0, "FAIL": 0}
    for outcome in outcomes:
        counts[outcome.status] += 1
    return counts


def render(results: Dict[str, Dict[str, object]]) -> str:
    """The matrix: one row per (phase, point), one column per cloud, then the totals and every
    failing point with its symptoms.

    ``results``: cloud -> {"points": {phase: [Point]}, "outcomes": [Outcome], "mode": str, "seconds": float,
    optionally "phase_seconds": {phase: float}}"""
    clouds = sorted(results)
    rows: List[Tuple[str, str]] = []
    cells: Dict[Tuple[str, str, str], str] = {}
    for cloud in clouds:
        checked = {(o.point.phase, o.point.name): o for o in results[cloud]["outcomes"]}
        for phase in PHASES:
            points = results[cloud]["points"].get(phase, [])
            by_class: Dict[int, Outcome] = {}
            for point, klass in zip(points, classes(points), strict=True):
                if (phase, point.name) in checked:
                    by_class.setdefault(klass, checked[(phase, point.name)])
            after = None
            for point, klass in zip(points, classes(points), strict=True):
                key = (phase, point.name)
                if key not in rows:
                    # keep every cloud's trace order: a row of one cloud only goes after its predecessor
                    at = rows.index(after) + 1 if after in rows else _phase_start(rows, phase)
                    rows.insert(at, key)
                after = key
                outcome = checked.get(key)
                if outcome is not None:
                    cells[(phase, point.name, cloud)] = outcome.cell
                elif klass in by_class:
                    cells[(phase, point.name, cloud)] = "= " + by_class[klass].cell
                else:
                    cells[(phase, point.name, cloud)] = "-"
    width = max([len(name) for _phase, name in rows] + [10])
    lines = ["%-9s  %-*s  %s" % ("phase", width, "point", "  ".join("%-14s" % c for c in clouds))]
    for phase, name in rows:
        row = "  ".join("%-14s" % cells.get((phase, name, cloud), "") for cloud in clouds)
        lines.append(("%-9s  %-*s  %s" % (phase, width, name, row)).rstrip())
    lines.append("")
    lines.append("'= x': not killed there, it leaves the same durable state as the checked point above it (outcome x);")
    lines.append("'-': traced, not checked in this run; blank: no such point on that cloud")
    for cloud in clouds:
        result = results[cloud]
        counts = totals(result["outcomes"], sum(len(p) for p in result["points"].values()))
        lines.append("totals %-7s (%s, %.0f s): %d points traced, %d killed and checked: %d ok, %d FAIL"
                     % (cloud, result["mode"], result["seconds"], counts["traced"], counts["checked"],
                        counts["ok"], counts["FAIL"]))
        phases = result.get("phase_seconds") or {}
        if phases:
            checked = {phase: len([o for o in result["outcomes"] if o.point.phase == phase]) for phase in PHASES}
            lines.append("       %-7s by phase: %s (the rest: the traces)" % ("", ", ".join(
                "%s %d checked in %.0f s" % (phase, checked[phase], phases[phase]) for phase in PHASES if phase in phases)))
    failing = [o for cloud in clouds for o in results[cloud]["outcomes"] if o.status == "FAIL"]
    if failing:
        lines.append("")
        lines.append("failing points:")
        for outcome in failing:
            lines.append("  %s %s %s (VM %s%s):" % (outcome.cloud, outcome.point.phase, outcome.point.name, outcome.vm,
                                                    ", " + outcome.context if outcome.context else ""))
            lines.extend("      %s" % s for s in outcome.symptoms)
    return "\n".join(lines)


def to_json(results: Dict[str, Dict[str, object]]) -> str:
    """The results as JSON (the points with their fingerprints, the outcomes with their symptoms)."""
    return json.dumps({cloud: {"mode": r["mode"], "seconds": r["seconds"], "phase_seconds": r.get("phase_seconds"),
                               "points": {ph: [dataclasses.asdict(p) for p in pts] for ph, pts in r["points"].items()},
                               "outcomes": [dict(dataclasses.asdict(o), point=dataclasses.asdict(o.point))
                                            for o in r["outcomes"]]}
                       for cloud, r in results.items()}, indent=1)


def _phase_start(rows: List[Tuple[str, str]], phase: str) -> int:
    """Where a phase's first row goes: after every row of the phases before it."""
    return len([r for r in rows if PHASES.index(r[0]) < PHASES.index(phase)])
