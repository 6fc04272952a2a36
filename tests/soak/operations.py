"""Running one soak operation: the real ``ansible-playbook`` of a controller, with what the schedule
planned against it (the nemesis), and what it reported.

Nemeses (``op.nemesis["mode"]``):
  slow        the test-only crash-point callback holds the run at a point (a slow cloud call) for pause_s
  kill_point  SIGKILL of the controller (ansible-playbook and its worker) at a crash point
  int_point   held at a crash point, then Ctrl-C: SIGINT to the run's process group, as a terminal sends it
              to its foreground group (ansible-playbook is the group's leader), then let go; with
              int_to=leader, to ansible-playbook alone (``kill -INT <pid>``, as tests/integration/test_local_e2e.py
              interrupts a run)
  kill_time   SIGKILL of the process group after_s seconds after the start
  int_time    SIGINT of the process group after_s seconds after the start
  gate        held at a crash point until another run of the round (gate_op) is held at its own point or has
              ended: a race between two runs made to happen in a chosen order, whatever their start-up times
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
import time
from typing import Dict, List, Optional

from ansible_collections.gpuprov.cloud.tests.crashpoints import harness
from ansible_collections.gpuprov.cloud.tests.soak.history import (
    DOWN, HEALTH, INSTANCE_ABSENT, INSTANCE_PRESENT, PLANT, PROVISION, RECREATE, RECREATE_BAD, STATUS, SWEEP_DELETE,
    SWEEP_DRY, Op,
)
from ansible_collections.gpuprov.cloud.tests.soak.world import BIN, World, options_arg

# Crash points worth holding or killing a run at, per operation (names as the callback counts them).
LAUNCH_POINTS = ("after commit begin Reconciling #1", "after commit Reconciling -> Planning #1",
                 "after commit Planning -> Preparing #1", "after commit Preparing -> Creating #1",
                 "before create #1", "after create #1", "after commit Creating -> Booting #1",
                 "after commit Booting -> Connecting #1", "before commit Connecting -> Ready #1",
                 "after commit Connecting -> Ready #1")
RECREATE_POINTS = ("after commit begin Reconciling #1", "before delete #1", "after delete #1",
                   "after commit Planning -> Preparing #1", "after create #1", "before commit Connecting -> Ready #1")
TEARDOWN_POINTS = ("after commit begin Requesting #1", "after observe #1", "before delete #1", "after delete #1",
                   "before commit Requesting -> AwaitingGone #1", "after commit Requesting -> AwaitingGone #1",
                   "after commit AwaitingGone -> CleaningUp #1")
INSTANCE_POINTS = ("after observe #1", "after prepare #1", "before create #1", "after create #1")
POINTS = {PROVISION: LAUNCH_POINTS, RECREATE: RECREATE_POINTS, RECREATE_BAD: RECREATE_POINTS,
          DOWN: TEARDOWN_POINTS, SWEEP_DELETE: TEARDOWN_POINTS, INSTANCE_PRESENT: INSTANCE_POINTS,
          INSTANCE_ABSENT: TEARDOWN_POINTS}

OP_TIMEOUT_S = 300.0
INT_GRACE_S = 120.0      # after a Ctrl-C, how long the run may take to compensate before it is SIGKILLed
READY = re.compile(r'"(\S+) is up on \S+ \(([^)]+)\)')
RESULT = re.compile(r"^(ok|changed|fatal): \[localhost\](?:: FAILED!)? => (\{.*\})\s*$")
KEY_LINE = re.compile(r"gpuprov \[|\[ERROR\]|fatal:|FAILED|is up on|nothing to tear down|made by another|"
                      r"still being worked|LEAKED|ORPHAN|lease|\[WARNING\]: (?!No inventory|provided hosts)")


def command(world: World, op: Op) -> List[str]:
    every_cloud = "clouds=%s" % ",".join(world.clouds)
    playbook = [str(BIN / "ansible-playbook")]
    if op.kind in (PROVISION, RECREATE, RECREATE_BAD):
        argv = playbook + ["gpuprov.cloud.provision", "-e", "vm=%s" % op.name, "-e", "k8s=false",
                           "-e", "clouds=%s" % op.cloud]
        if op.kind != PROVISION:
            argv += ["-e", "recreate=true"]
        if op.kind == RECREATE_BAD:
            argv += ["-e", "gpu=H100"]   # no cloud of the soak has one: the request cannot be satisfied
    elif op.kind == DOWN:
        argv = playbook + ["gpuprov.cloud.down", "-e", "vm=%s" % op.name]
    elif op.kind in (SWEEP_DRY, SWEEP_DELETE):
        argv = playbook + ["-v", "gpuprov.cloud.sweep", "-e", every_cloud]
        if op.kind == SWEEP_DELETE:
            argv += ["-e", "delete=true"]
    elif op.kind == STATUS:
        argv = playbook + ["gpuprov.cloud.status"]
        if op.nemesis.get("orphans"):
            argv += ["-e", "orphans=true", "-e", every_cloud]
    elif op.kind == HEALTH:
        argv = playbook + ["gpuprov.cloud.health", "-e", "fail_on_disagreement=false", "-e", every_cloud,
                           "-e", "ssh_timeout=5"]
        if op.name:
            argv += ["-e", "vm=%s" % op.name]
    elif op.kind in (INSTANCE_PRESENT, INSTANCE_ABSENT):
        argv = playbook + ["-v", str(world.playbooks / "instance.yml"), "-e", "vm=%s" % op.name,
                           "-e", "state=%s" % ("present" if op.kind == INSTANCE_PRESENT else "absent"),
                           "-e", "cloud=%s" % op.cloud]
    else:
        raise ValueError("not a playbook operation: %s" % op.kind)
    return argv + options_arg(world)


def _group_members(pgid: int) -> List[int]:
    """The live processes of process group ``pgid`` (ones this soak started: the group of its run)."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % pid) as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != "Z" and int(fields[2]) == pgid:
            found.append(int(pid))
    return found


def _signal_group(pgid: int, sig: int) -> None:
    for pid in _group_members(pgid):
        try:
            os.kill(pid, sig)
        except OSError:
            pass


def _interrupt(proc: subprocess.Popen, op: Op) -> None:
    """Ctrl-C: to the whole group (a terminal), or to ansible-playbook alone (int_to=leader)."""
    if op.nemesis.get("int_to") == "leader":
        proc.send_signal(signal.SIGINT)
    else:
        _signal_group(proc.pid, signal.SIGINT)


def run(world: World, op: Op, timeout_s: float = OP_TIMEOUT_S) -> Op:
    """Run ``op`` (not a plant) to its end, applying its nemesis; fills in how it ended."""
    controller = world.controllers[op.controller]
    env = dict(controller.env)
    mode = op.nemesis.get("mode")
    points = world.work / "points" / ("op%04d" % op.id)
    points.mkdir(parents=True, exist_ok=True)
    gate = world.work / "points" / ("op%04d" % op.nemesis["gate_op"]) if mode == "gate" else None
    if mode in ("slow", "kill_point", "int_point", "gate"):
        action = "KILL" if mode == "kill_point" else "PAUSE"
        env.update(harness.crash_env(op.nemesis["point"], points, env, action=action))
        if mode == "slow":
            env["CRASHPOINT_PAUSE_S"] = "%.2f" % op.nemesis["pause_s"]
        elif mode in ("int_point", "gate"):
            env["CRASHPOINT_PAUSE_S"] = "60"
    logs = world.work / "logs"
    logs.mkdir(exist_ok=True)
    op.log = str(logs / ("op%04d-%s-%s.log" % (op.id, op.kind, op.controller)))
    lines: List[str] = []
    argv = command(world, op)
    op.start = time.time()
    proc = subprocess.Popen(argv, env=env, cwd=str(controller.home), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)

    def read() -> None:
        with open(op.log, "w") as log:
            log.write(" ".join(argv) + "\n")
            for line in proc.stdout:
                log.write(line)
                lines.append(line.rstrip("\n"))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    pgid = proc.pid
    started = time.monotonic()
    interrupted_at: Optional[float] = None
    resumed = False
    while proc.poll() is None:
        elapsed = time.monotonic() - started
        if op.signal is None:
            if mode == "int_point" and (points / "paused.json").exists():
                _interrupt(proc, op)
                op.signal, op.signal_at, interrupted_at = "INT", op.nemesis["point"], time.monotonic()
            elif mode in ("kill_time", "int_time") and elapsed >= op.nemesis["after_s"]:
                if mode == "kill_time":
                    _signal_group(pgid, signal.SIGKILL)
                else:
                    _interrupt(proc, op)
                op.signal, op.signal_at = ("KILL" if mode == "kill_time" else "INT"), "t+%.2fs" % elapsed
                interrupted_at = time.monotonic()
        if mode == "int_point" and interrupted_at is not None and not resumed and \
                time.monotonic() - interrupted_at > 0.2:
            (points / "resume").write_text("")   # let the held run go on: it sees the interrupt
            resumed = True
        if gate is not None and not resumed and ((gate / "paused.json").exists() or (gate / "done").exists()):
            (points / "resume").write_text("")   # the other run is where it should be: go
            resumed = True
        if op.signal == "INT" and interrupted_at is not None and time.monotonic() - interrupted_at > INT_GRACE_S:
            _signal_group(pgid, signal.SIGKILL)
            op.timed_out = True
        if elapsed > timeout_s and not op.timed_out:
            _signal_group(pgid, signal.SIGKILL)
            op.timed_out = True
        time.sleep(0.02)
    op.end = time.time()
    op.rc = proc.returncode
    if mode == "kill_point" and harness.killed_at(points):
        op.signal, op.signal_at = "KILL", harness.killed_at(points)
    if op.killed:
        # Whatever of the run's group outlived its leader (a worker, an ssh multiplexer): the soak started it.
        _signal_group(pgid, signal.SIGKILL)
    reader.join(timeout=10)
    (points / "done").write_text("")
    if mode in ("slow", "gate") and (points / "paused.json").exists():
        op.nemesis = dict(op.nemesis, held=True)
    _parse(op, lines)
    return op


def _result(lines: List[str]) -> Optional[Dict]:
    """The -v JSON result of the run's one gpuprov task on localhost (sweep, instance)."""
    for line in lines:
        found = RESULT.match(line)
        if found:
            try:
                return json.loads(found.group(2))
            except ValueError:
                continue
    return None


def _parse(op: Op, lines: List[str]) -> None:
    op.lines = [line[:400] for line in lines if KEY_LINE.search(line)][-40:]
    if op.kind in (PROVISION, RECREATE, RECREATE_BAD) and op.ok:
        for line in lines:
            found = READY.search(line)
            if found and found.group(1) == op.name:
                op.ready_id = found.group(2)
    elif op.kind == INSTANCE_PRESENT and op.ok:
        result = _result(lines) or {}
        instance = result.get("instance") or {}
        op.made_id = instance.get("instance_id")
    elif op.kind == SWEEP_DELETE:
        result = _result(lines) or {}
        op.removed = [{k: e.get(k) for k in ("cloud", "kind", "id", "vm_name", "journal_id")}
                      for e in result.get("removed") or []]


def plant(world: World, op: Op) -> Op:
    op.start = time.time()
    made, why = world.plant(op.journal, op.name, op.cloud)
    op.end = time.time()
    op.rc = 0 if made else None
    op.made_id = made
    op.skipped = why
    return op


__all__ = ["POINTS", "command", "plant", "run", "PLANT"]
