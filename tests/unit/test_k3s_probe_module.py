"""The k3s_probe module run as Ansible runs it (a process with its arguments file), against a
state folder and PATH made here: marker, installer lock, boot runner files, a stand-in nvidia-smi."""

from __future__ import annotations

import fcntl
import json
import os
import pathlib
import subprocess
import sys
import time

import pytest

MODULE = pathlib.Path(__file__).resolve().parents[2] / "plugins" / "modules" / "k3s_probe.py"

NVIDIA_SMI = """#!/bin/sh
# stand-in nvidia-smi for this test
echo "GPU 0: NVIDIA H200 (UUID: GPU-00000000-1111-2222-3333-444444444444)"
"""


def run_probe(tmp_path, path_dirs=(), **args):
    args.setdefault("state_dir", str(tmp_path / "state"))
    args.setdefault("k3s_binary", str(tmp_path / "k3s"))
    args_file = tmp_path / "args.json"
    args_file.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    env = dict(os.environ, PATH=":".join([str(p) for p in path_dirs] + ["/usr/bin", "/bin"]))
    proc = subprocess.run([sys.executable, str(MODULE), str(args_file)], capture_output=True, text=True,
                          env=env, timeout=60, check=False)
    assert proc.stdout, proc.stderr
    return json.loads(proc.stdout)


@pytest.fixture
def state(tmp_path):
    folder = tmp_path / "state"
    folder.mkdir()
    return folder


def write_marker(folder, **fields):
    (folder / "k3s-install.status").write_text("".join("%s=%s\n" % kv for kv in fields.items()))


def test_no_marker_no_boot_route_pushes(tmp_path, state):
    result = run_probe(tmp_path)
    assert (result["decision"], result["row"]) == ("push", 10), result
    assert result["facts"]["boot_runner"]["kind"] in ("none", "cloud-init")
    assert result["changed"] is False


def test_boot_runner_running_then_finished(tmp_path, state):
    (state / "boot.started").write_text("")
    result = run_probe(tmp_path, boot_delivered=True)
    if result["facts"]["boot_runner"]["kind"] == "cloud-init":
        pytest.skip("this machine has cloud-init; the container-start runner is not what the probe reads")
    assert (result["decision"], result["row"]) == ("wait", 14), result
    (state / "boot.status").write_text("1\n")
    result = run_probe(tmp_path, boot_delivered=True)
    assert (result["decision"], result["row"]) == ("push", 11), result
    runner = result["facts"]["boot_runner"]
    assert (runner["kind"], runner["state"], runner["detail"]) == ("gpuprov", "error", "boot script exit status 1")


def test_running_install_holding_the_lock_is_waited_for_then_timed_out(tmp_path, state):
    write_marker(state, state="running", route="boot", pid=os.getpid(), started_at=int(time.time()))
    with open(state / "k3s-install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        result = run_probe(tmp_path, boot_delivered=True, wait=2, poll_interval=1)
        assert (result["decision"], result["row"]) == ("wait", 8), result
        assert result["facts"]["installer_alive"] is True and result["waited_s"] >= 1
        result = run_probe(tmp_path, boot_delivered=True, boot_timeout=0)
        assert (result["decision"], result["row"]) == ("push", 7), result
    # the lock is free again: a "running" marker with no installer is a dead install
    write_marker(state, state="running", route="boot", pid=999999999, started_at=int(time.time()))
    result = run_probe(tmp_path, boot_delivered=True)
    assert (result["decision"], result["row"]) == ("push", 6), result


def test_gpu_seen_by_nvidia_smi_and_missed_by_the_install(tmp_path, state):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text(NVIDIA_SMI)
    smi.chmod(0o755)
    (tmp_path / "k3s").write_text("")
    write_marker(state, state="done", route="boot", gpu="false")
    result = run_probe(tmp_path, path_dirs=[bin_dir], boot_delivered=True, gpu_expected=True)
    assert result["facts"]["gpu"]["present"] is True and result["facts"]["gpu"]["names"] == ["NVIDIA H200"]
    assert result["gpu_missing"] is False
    assert (result["decision"], result["row"]) == ("push", 2), result
    result = run_probe(tmp_path, boot_delivered=True, gpu_expected=True)     # no nvidia-smi on PATH
    assert result["gpu_missing"] is (not result["facts"]["gpu"]["devices"])


def test_installed_when_marker_done_and_k3s_process_in_pid_file(tmp_path, state):
    (tmp_path / "k3s").write_text("")
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "k3s", "server"])
    try:
        (state / "k3s.pid").write_text("%d\n" % sleeper.pid)
        write_marker(state, state="done", route="ssh", gpu="false", manager="pidfile")
        result = run_probe(tmp_path)
        if result["facts"]["k3s"]["manager"] == "systemd" and not result["facts"]["k3s"]["running"]:
            pytest.skip("systemd runs here and has no k3s unit")
        assert (result["decision"], result["row"]) == ("installed", 1), result
        assert result["facts"]["k3s"]["pid"] == sleeper.pid
    finally:
        sleeper.kill()
        sleeper.wait()
    result = run_probe(tmp_path)
    if result["facts"]["k3s"]["manager"] == "process":
        pytest.skip("another 'k3s server' process is visible on this machine (a container's)")
    assert (result["decision"], result["row"]) == ("push", 4), result


def test_gpu_without_the_container_toolkit_is_pushed_until_the_runtime_is_there(tmp_path, state):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text(NVIDIA_SMI)
    smi.chmod(0o755)
    (tmp_path / "k3s").write_text("")
    write_marker(state, state="done", route="boot", gpu="true", nvidia_runtime="none")
    result = run_probe(tmp_path, path_dirs=[bin_dir], boot_delivered=True, gpu_expected=True)
    gpu = result["facts"]["gpu"]
    if gpu["toolkit"]:
        pytest.skip("this machine has the NVIDIA Container Toolkit (%s)" % gpu["toolkit_runtime"])
    assert gpu["present"] is True and gpu["toolkit_runtime"] is None
    assert (result["decision"], result["row"]) == ("push", 3), result
    assert "no NVIDIA Container Toolkit" in result["reason"]
    # a stand-in toolkit runtime on PATH: the toolkit row no longer matches (k3s is not running here)
    runtime = bin_dir / "nvidia-container-runtime"
    runtime.write_text("#!/bin/sh\n# stand-in nvidia-container-runtime for this test\nexit 0\n")
    runtime.chmod(0o755)
    result = run_probe(tmp_path, path_dirs=[bin_dir], boot_delivered=True, gpu_expected=True)
    assert result["facts"]["gpu"]["toolkit"] is True
    assert result["facts"]["gpu"]["toolkit_runtime"] == str(runtime)
    assert result["row"] != 3, result


def test_gpu_off_sends_an_install_that_configured_the_gpu_back_and_leaves_one_that_did_not(tmp_path, state):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text(NVIDIA_SMI)
    smi.chmod(0o755)
    (tmp_path / "k3s").write_text("")
    write_marker(state, state="done", route="boot", gpu="true", nvidia_runtime="present")
    result = run_probe(tmp_path, path_dirs=[bin_dir], boot_delivered=True, gpu="false")
    assert (result["decision"], result["row"]) == ("push", 15), result
    assert "k3s_gpu is false" in result["reason"]
    # once the installer turned the GPU path off, the GPU this VM has no longer sends it back (rows 2, 3)
    write_marker(state, state="done", route="ssh", gpu="false", nvidia_runtime="none")
    result = run_probe(tmp_path, path_dirs=[bin_dir], boot_delivered=True, gpu="no")
    assert result["row"] not in (2, 3, 15), result
    result = run_probe(tmp_path, path_dirs=[bin_dir], boot_delivered=True, gpu="auto")
    assert (result["decision"], result["row"]) == ("push", 2), result


def test_an_unknown_gpu_mode_fails_naming_the_field_and_what_it_got(tmp_path, state):
    result = run_probe(tmp_path, gpu="maybe")
    assert result["failed"] is True
    assert result["msg"] == "gpu (k3s_gpu): expected auto, true or false, got 'maybe'", result
