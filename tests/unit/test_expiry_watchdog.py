# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The VM watchdog (plugins/module_utils/expiry/watchdog.py) run under /bin/sh in a temporary folder, with its
--state-dir, --run-dir and --log there and FAKE tools first on PATH: a FAKE ``date`` (``+%s`` reads the test's
clock file), a FAKE ``ss`` (the SSH sessions the test says), a FAKE ``nvidia-smi`` (the GPU process ids the test
says), a FAKE ``k3s`` (the pods the test says) and a FAKE ``poweroff`` and ``systemctl`` that only record being
called. Nothing here powers anything off: every run first checks that ``poweroff`` and ``systemctl`` resolve to the
fakes. The real-machine route (``kill -TERM 1`` in a container) is tests/integration/test_expiry_watchdog_docker.py.
"""

from __future__ import annotations

import os
import pathlib
import shlex
import shutil
import signal
import stat
import subprocess

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.expiry import decide, watchdog
from ansible_collections.gpuprov.cloud.plugins.module_utils.expiry.limits import Limits
from ansible_collections.gpuprov.cloud.tests.unit.helpers import wait_for

REAL_DATE = shutil.which("date") or "/bin/date"
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

FAKES = {
    "date": """#!/bin/sh
# FAKE date (tests only): "+%%s" prints the test's clock; any other use asks the real date
if [ "${1:-}" = +%%s ]; then cat "$FAKE_CLOCK_FILE"; else exec %s "$@"; fi
""" % REAL_DATE,
    "ss": """#!/bin/sh
# FAKE ss (tests only): a header and one established connection to :22 per session the test says; "fail" fails
n=$(cat "$FAKE_SS_SESSIONS_FILE")
if [ "$n" = fail ]; then exit 1; fi
echo "Recv-Q Send-Q Local Address:Port Peer Address:PortProcess"
i=0
while [ "$i" -lt "$n" ]; do echo "0 0 10.0.0.2:22 10.0.0.9:$((40000 + i))"; i=$((i + 1)); done
""",
    "nvidia-smi": """#!/bin/sh
# FAKE nvidia-smi (tests only): --query-compute-apps prints the pids the test wrote; no file: the driver fails
case "$*" in
    *--query-compute-apps=pid*) [ -f "$FAKE_GPU_PIDS_FILE" ] || exit 9; cat "$FAKE_GPU_PIDS_FILE" ;;
    *) echo "FAKE nvidia-smi (tests only): unsupported $*" >&2; exit 2 ;;
esac
""",
    "k3s": """#!/bin/sh
# FAKE k3s (tests only): "kubectl get pods" prints the lines the test wrote (phase, then request/limit per container)
case "$*" in
    "kubectl get pods -A -o jsonpath="*) cat "$FAKE_PODS_FILE" ;;
    *) echo "FAKE k3s (tests only): unsupported $*" >&2; exit 2 ;;
esac
""",
    "poweroff": """#!/bin/sh
# FAKE poweroff (tests only): records the call, powers nothing off
echo "poweroff $*" >> "$FAKE_POWER_LOG"
""",
    "systemctl": """#!/bin/sh
# FAKE systemctl (tests only): records the call, powers nothing off
echo "systemctl $*" >> "$FAKE_POWER_LOG"
""",
}


class FakeVm:
    """A folder playing one VM for the watchdog: bin/ (the fakes), state/ (limits, stopped), run/, the log."""

    def __init__(self, root: pathlib.Path, tools=("date", "ss", "poweroff", "systemctl")):
        self.root = root
        root.mkdir(exist_ok=True)
        self.bin, self.state, self.run_dir = root / "bin", root / "state", root / "run"
        for folder in (self.bin, self.state):
            folder.mkdir()
        self.log = root / "watchdog.log"
        self.script = root / "gpuprov-watchdog"
        self.script.write_text(watchdog.WATCHDOG_SCRIPT)
        for name in tools:
            self.add_tool(name)
        self.files = {name: root / name for name in ("clock", "ssh", "gpu-pids", "pods", "power.log")}
        self.set_clock(1_000_000)
        self.set_ssh(0)

    def add_tool(self, name):
        path = self.bin / name
        path.write_text(FAKES[name])
        path.chmod(0o755)

    @property
    def env(self):
        return {"PATH": "%s:%s" % (self.bin, SYSTEM_PATH), "FAKE_CLOCK_FILE": str(self.files["clock"]),
                "FAKE_SS_SESSIONS_FILE": str(self.files["ssh"]), "FAKE_GPU_PIDS_FILE": str(self.files["gpu-pids"]),
                "FAKE_PODS_FILE": str(self.files["pods"]), "FAKE_POWER_LOG": str(self.files["power.log"])}

    def set_clock(self, epoch):
        self.now = epoch
        self.files["clock"].write_text("%d\n" % epoch)

    def advance(self, seconds):
        self.set_clock(self.now + seconds)

    def set_ssh(self, sessions):
        self.files["ssh"].write_text("%s\n" % sessions)

    def set_gpu_pids(self, *pids):
        self.files["gpu-pids"].write_text("".join("%d\n" % pid for pid in pids))

    def set_pods(self, *lines):
        self.files["pods"].write_text("".join(line + "\n" for line in lines))

    def write_limits(self, **values):
        self.state.joinpath("limits").write_text("".join("%s=%s\n" % (k, "" if v is None else v) for k, v in values.items()))

    def argv(self, *extra):
        return ["/bin/sh", str(self.script), "--state-dir", str(self.state), "--run-dir", str(self.run_dir),
                "--log", str(self.log)] + list(extra)

    def guard(self):
        # Never let a run reach a real power-off: both must resolve to this folder's fakes.
        for name in ("poweroff", "systemctl"):
            assert shutil.which(name, path=self.env["PATH"]) == str(self.bin / name), name

    def check(self):
        """One ``--once`` check; returns the log line it wrote."""
        self.guard()
        before = self.log_lines()
        proc = subprocess.run(self.argv("--once"), env=self.env, capture_output=True, text=True, timeout=60, check=False)
        assert proc.returncode == 0, (proc.stdout, proc.stderr)
        lines = self.log_lines()
        assert len(lines) > len(before), (proc.stdout, proc.stderr)
        return lines[-1]

    def log_lines(self):
        return self.log.read_text().splitlines() if self.log.exists() else []

    def power_calls(self):
        path = self.files["power.log"]
        return path.read_text().splitlines() if path.exists() else []

    def stopped(self):
        path = self.state / "stopped"
        if not path.exists():
            return None
        return dict(line.split("=", 1) for line in path.read_text().splitlines())


@pytest.fixture
def vm(tmp_path):
    return FakeVm(tmp_path)


def expected_power_call():
    """What the watchdog runs to power off on this machine: systemctl where systemd is PID 1, else poweroff -f."""
    try:
        pid1 = pathlib.Path("/proc/1/comm").read_text().strip()
    except OSError:
        pid1 = ""
    return "systemctl poweroff" if pid1 == "systemd" else "poweroff -f"


# --- shellcheck --------------------------------------------------------------------------------------------------------

def shellcheck(path, *excluded):
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck is not installed (.ci/run installs it)")
    exclude = ["-e", ",".join(excluded)] if excluded else []
    proc = subprocess.run(["shellcheck", "-s", "sh"] + exclude + [str(path)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_watchdog_script_is_shellcheck_clean(tmp_path):
    path = tmp_path / "gpuprov-watchdog"
    path.write_text(watchdog.WATCHDOG_SCRIPT)
    shellcheck(path)


def test_the_boot_part_is_shellcheck_clean_under_a_strict_boot_script(tmp_path):
    path = tmp_path / "boot.sh"
    part = watchdog.watchdog_boot_part(Limits(expires_at=2_000_000_000, idle_stop_s=600, max_spend_usd=20.0), 120,
                                       price_per_hour=2.5, interval_s=30)
    path.write_text("#!/bin/sh\nset -eu\n" + part)
    shellcheck(path)


def update_script(command):
    """The script inside deadline_update_command's ``update='...'`` assignment."""
    first = shlex.split(command, posix=True)[0]
    assert first.startswith("update=")
    return first[len("update="):].rstrip(";")


def test_the_deadline_update_command_and_the_script_it_runs_are_shellcheck_clean(tmp_path):
    command = watchdog.deadline_update_command(Limits(expires_at=2_000_000_000), price_per_hour=1.0, up_since=1_999_000_000,
                                               grace_s=60)
    outer, inner = tmp_path / "outer.sh", tmp_path / "inner.sh"
    outer.write_text("#!/bin/sh\n" + command + "\n")
    inner.write_text("#!/bin/sh\n" + update_script(command) + "\n")
    shellcheck(outer, "SC2016")         # the outer command single-quotes the inner script on purpose
    shellcheck(inner)


def test_the_install_over_ssh_command_is_shellcheck_clean_and_fails_when_the_install_does(tmp_path):
    command = watchdog.install_over_ssh_command(Limits(expires_at=2_000_000_000, grace_s=10), price_per_hour=1.0,
                                                up_since=1_999_000_000)
    first = shlex.split(command, posix=True)[0]
    assert first.startswith("install=")
    inner = tmp_path / "install.sh"
    inner.write_text("#!/bin/sh\n" + first[len("install="):].rstrip(";") + "\n")
    shellcheck(inner)
    assert "gpuprov_watchdog_install || { echo 'gpuprov watchdog: the install failed' >&2; exit 3; }" in inner.read_text()
    assert '"grace=10"' in inner.read_text() and '"interval=5"' in inner.read_text()
    update = watchdog.deadline_update_command(Limits(expires_at=2_000_000_000, grace_s=10), price_per_hour=1.0,
                                              up_since=1_999_000_000, grace_s=10, interval_s=5)
    assert command.endswith(" && " + update)   # the limits are written only once the install passed


# --- what the boot part holds ---------------------------------------------------------------------------------------------

def test_the_boot_part_carries_the_script_verbatim_and_the_limits_it_was_given():
    part = watchdog.watchdog_boot_part(Limits(expires_at=2_000_000_000, idle_stop_s=900, max_spend_usd=10.0), 120,
                                       price_per_hour=4.0, interval_s=15)
    assert watchdog.WATCHDOG_SCRIPT.rstrip("\n") in part
    for line in ("deadline=2000000000", "budget_s=9000", "idle_stop=900", "up_since=$(date +%s)", "grace=120", "interval=15"):
        assert '"%s"' % line in part, line
    assert "OnUnitActiveSec=15" in part and "ExecStart=/usr/local/sbin/gpuprov-watchdog --once" in part
    assert "setsid nohup /usr/local/sbin/gpuprov-watchdog" in part
    # the limits file is written only where none is (the controller's newer one is kept)
    assert "if [ ! -e /etc/gpuprov/limits ]; then" in part


def test_the_boot_part_of_a_vm_without_limits_writes_empty_ones():
    part = watchdog.watchdog_boot_part(Limits(), 300)
    for line in ('"deadline="', '"budget_s="', '"idle_stop="', '"grace=300"', '"interval=60"'):
        assert line in part, line


# --- the deadline ----------------------------------------------------------------------------------------------------------

def test_without_a_limits_file_the_watchdog_keeps_the_vm_and_says_why(vm):
    line = vm.check()
    assert "kept: no limits file %s/limits" % vm.state in line
    assert vm.power_calls() == [] and vm.stopped() is None


def test_the_deadline_powers_off_only_once_past_the_deadline_plus_the_grace(vm):
    vm.write_limits(deadline=vm.now + 100, grace=30, idle_stop=None)
    assert "kept: deadline at %d + grace 30; no idle_stop" % (vm.now + 100) in vm.check()
    vm.advance(130)                                   # exactly deadline + grace: not yet past it
    assert "kept:" in vm.check()
    vm.advance(1)
    line = vm.check()
    assert "stop: deadline: now %d is past %d + grace 30" % (vm.now, vm.now - 31) in line
    assert vm.power_calls() == [expected_power_call()]
    assert vm.stopped() == {"reason": "deadline", "at": str(vm.now), "detail": "now %d is past %d + grace 30" % (vm.now, vm.now - 31)}


def test_the_grace_defaults_to_five_minutes(vm):
    vm.write_limits(deadline=vm.now)
    vm.advance(300)
    assert "kept: deadline at %d + grace 300" % (vm.now - 300) in vm.check()
    vm.advance(1)
    assert "stop: deadline" in vm.check()


def test_the_spend_budget_binds_when_it_ends_before_the_expiry(vm):
    vm.write_limits(deadline=vm.now + 10_000, up_since=vm.now - 100, budget_s=200, grace=0)
    assert "kept: max_spend at %d + grace 0" % (vm.now + 100) in vm.check()
    vm.advance(101)
    assert "stop: max_spend" in vm.check()
    assert vm.stopped()["reason"] == "max_spend"


def test_the_expiry_binds_on_a_tie_and_a_budget_without_up_since_is_ignored(vm):
    vm.write_limits(deadline=vm.now + 50, up_since=vm.now - 50, budget_s=100, grace=0)
    assert "kept: deadline at %d" % (vm.now + 50) in vm.check()
    vm.write_limits(budget_s=1, grace=0)
    assert "kept: no deadline; no idle_stop" in vm.check()


def test_lines_that_are_not_whole_numbers_read_as_none_and_the_last_line_of_a_key_wins(vm):
    vm.state.joinpath("limits").write_text("deadline=soon\ngrace=0\n# a comment\ndeadline=%d\n" % (vm.now - 1))
    assert "stop: deadline" in vm.check()
    vm2 = FakeVm(vm.root / "second")
    vm2.state.joinpath("limits").write_text("deadline=12ab\ngrace=0\n")
    assert "kept: no deadline" in vm2.check()


# --- idle ------------------------------------------------------------------------------------------------------------------

def test_idle_for_idle_stop_seconds_with_nothing_in_use_powers_off(vm):
    vm.write_limits(idle_stop=600)
    assert "kept: no deadline; idle for 0s of 600s: ssh 0 (ss), gpu processes -, gpu pods -" in vm.check()
    vm.advance(599)
    assert "idle for 599s of 600s" in vm.check()
    vm.advance(1)
    assert "stop: idle: idle for 600s (idle_stop 600s): ssh 0 (ss), gpu processes -, gpu pods -" in vm.check()
    assert vm.stopped()["reason"] == "idle"
    assert vm.power_calls() == [expected_power_call()]


@pytest.mark.parametrize("make_busy, shown", [
    (lambda vm: vm.set_ssh(2), "ssh 2 (ss)"),
    (lambda vm: (vm.add_tool("nvidia-smi"), vm.set_gpu_pids(4242)), "gpu processes 1"),
    (lambda vm: (vm.add_tool("k3s"), vm.set_pods("Running 1/1 /", "Succeeded 2/2")), "gpu pods 1"),
    (lambda vm: (vm.add_tool("k3s"), vm.set_pods("Pending /4")), "gpu pods 1"),
], ids=["ssh", "gpu-process", "running-gpu-pod", "pending-gpu-pod"])
def test_anything_in_use_keeps_the_vm_and_restarts_the_idle_clock(vm, make_busy, shown):
    vm.write_limits(idle_stop=600)
    vm.check()
    vm.advance(500)
    make_busy(vm)
    line = vm.check()
    assert "busy:" in line and shown in line, line
    assert not (vm.run_dir / "idle-since").exists()
    vm.advance(10_000)
    assert "busy:" in vm.check()
    assert vm.power_calls() == []


def test_finished_pods_and_pods_without_gpus_do_not_count(vm):
    vm.add_tool("k3s")
    vm.set_pods("Succeeded 1/1", "Failed /2", "Running 0/0 /", "Running  ", "Pending /")
    vm.write_limits(idle_stop=600)
    assert "gpu pods 0" in vm.check()


def test_a_failing_nvidia_smi_or_kubectl_is_said_and_counted_as_none(vm):
    vm.add_tool("nvidia-smi")                         # no pid file: the fake fails as a broken driver would
    vm.add_tool("k3s")                                # no pods file: the fake's cat fails
    vm.write_limits(idle_stop=600)
    assert "gpu processes ?, gpu pods ?" in vm.check()
    vm.advance(600)
    assert "stop: idle" in vm.check()


def test_without_ss_the_sessions_are_counted_from_the_kernels_tables(vm):
    vm.set_ssh("fail")
    vm.write_limits(idle_stop=600)
    line = vm.check()
    assert "(/proc/net/tcp)" in line, line


def test_without_nvidia_smi_or_k3s_those_counts_are_not_taken(vm):
    for tool in ("nvidia-smi", "k3s"):
        if shutil.which(tool, path=SYSTEM_PATH):
            pytest.skip("this machine has a real %s" % tool)
    vm.write_limits(idle_stop=600)
    assert "gpu processes -, gpu pods -" in vm.check()


def test_without_idle_stop_the_idle_clock_is_dropped(vm):
    vm.write_limits(idle_stop=600)
    vm.check()
    assert (vm.run_dir / "idle-since").read_text().strip() == str(vm.now)
    vm.write_limits(idle_stop=None)
    vm.advance(10_000)
    assert "no idle_stop" in vm.check()
    assert not (vm.run_dir / "idle-since").exists()


def test_the_shell_and_idle_verdict_agree_on_a_day_of_probes(vm):
    """The same probes and clock through the watchdog and decide.idle_verdict: the same verdict each time."""
    vm.add_tool("nvidia-smi")
    vm.add_tool("k3s")
    idle_stop = 900
    vm.write_limits(idle_stop=idle_stop)
    steps = [(0, 0, (), ()), (300, 0, (), ()), (300, 1, (), ()), (60, 0, (7,), ()), (60, 0, (), ("Running 1/1",)),
             (60, 0, (), ("Succeeded 1/1",)), (899, 0, (), ()), (1, 0, (), ())]
    idle_since = None
    for advance, ssh, pids, pods in steps:
        vm.advance(advance)
        vm.set_ssh(ssh)
        vm.set_gpu_pids(*pids)
        vm.set_pods(*pods)
        probe = decide.IdleProbe(ssh_sessions=ssh, gpu_processes=len(pids), gpu_pods=sum(1 for p in pods if p.startswith("Running")))
        verdict = decide.idle_verdict(probe, idle_since, vm.now, idle_stop)
        idle_since = verdict.idle_since
        line = vm.check()
        shell = "stop" if "stop: idle" in line else "busy" if "busy:" in line else "idle"
        assert shell == verdict.verdict, (line, verdict)
        if verdict.verdict == decide.IDLE:
            assert "idle for %ds of" % verdict.idle_for_s in line
    assert verdict.verdict == decide.STOP


# --- the loop and the command line --------------------------------------------------------------------------------------------

def test_the_loop_powers_off_and_ends_and_only_one_loop_runs(vm):
    vm.write_limits(deadline=vm.now + 1000, grace=0, interval=1)
    vm.guard()
    first = subprocess.Popen(vm.argv(), env=vm.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
    try:
        wait_for(lambda: len(vm.log_lines()) >= 2, "two checks of the loop")
        second = subprocess.run(vm.argv(), env=vm.env, capture_output=True, text=True, timeout=60, check=False)
        assert second.returncode == 0 and "already running as pid %d" % first.pid in second.stderr
        vm.write_limits(deadline=vm.now - 1, grace=0, interval=1)       # the controller moved the deadline back
        wait_for(lambda: first.poll() is not None, "the loop to end after powering off", limit_s=30)
        assert vm.stopped()["reason"] == "deadline"
        assert vm.power_calls() == [expected_power_call()]
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGTERM)
            first.wait(timeout=30)


def test_an_unknown_argument_is_refused_and_help_says_the_usage(vm):
    proc = subprocess.run(["/bin/sh", str(vm.script), "--now"], capture_output=True, text=True, check=False)
    assert proc.returncode == 2 and "unknown argument --now" in proc.stderr
    proc = subprocess.run(["/bin/sh", str(vm.script), "--help"], capture_output=True, text=True, check=False)
    assert proc.returncode == 0 and "usage: gpuprov-watchdog [--once]" in proc.stdout


# --- deadline_update_command ------------------------------------------------------------------------------------------------------

def run_update(command):
    proc = subprocess.run(["/bin/sh", "-c", command], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="the update chowns the file to root, as on a VM: it needs root")
def test_the_update_rewrites_the_limits_and_keeps_the_other_lines(vm):
    vm.write_limits(deadline=vm.now + 10, up_since=vm.now - 50, budget_s=None, idle_stop=None, grace=5, interval=7)
    command = watchdog.deadline_update_command(Limits(expires_at=vm.now + 3600, idle_stop_s=1200, max_spend_usd=3.0),
                                               price_per_hour=2.0, state_dir=str(vm.state))
    run_update(command)
    written = vm.state / "limits"
    values = dict(line.split("=", 1) for line in written.read_text().splitlines())
    assert values == {"deadline": str(vm.now + 3600), "up_since": str(vm.now - 50), "budget_s": "5400", "idle_stop": "1200",
                      "grace": "5", "interval": "7"}
    mode = written.stat()
    assert stat.S_IMODE(mode.st_mode) == 0o644 and mode.st_uid == 0
    assert [p.name for p in vm.state.iterdir()] == ["limits"]          # no temporary file left
    vm.advance(20)                                                      # past the old deadline + grace
    assert "kept: deadline at %d" % (vm.now - 20 + 3600) in vm.check()


@pytest.mark.skipif(os.geteuid() != 0, reason="the update chowns the file to root, as on a VM: it needs root")
def test_the_update_writes_the_journalled_up_since_and_grace_and_makes_the_folder(tmp_path):
    state = tmp_path / "fresh" / "gpuprov"
    run_update(watchdog.deadline_update_command(Limits(), up_since=1234.9, grace_s=60, state_dir=str(state)))
    assert (state / "limits").read_text().splitlines() == ["deadline=", "budget_s=", "idle_stop=", "up_since=1234", "grace=60"]
    run_update(watchdog.deadline_update_command(Limits(), grace_s=4, interval_s=2, state_dir=str(state)))
    assert (state / "limits").read_text().splitlines() == ["up_since=1234", "deadline=", "budget_s=", "idle_stop=",
                                                           "grace=4", "interval=2"]
