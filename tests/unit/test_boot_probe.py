"""The k3s boot check's pure decision table, row by row, and the parsers the probe uses."""

from __future__ import annotations

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.cluster import boot_probe as bp


def marker(state, **extra):
    found = {"state": state, "route": "boot", "gpu": False}
    found.update(extra)
    return found


# Defaults of one probe: a boot script delivered, cloud-init done, k3s running, no GPU, no NVIDIA Container
# Toolkit, 10 s in, 900 s limit.
BASE = dict(marker=None, installer_alive=False, runner=bp.RUNNER_DONE, boot_delivered=True, k3s_running=True,
            gpu_present=False, toolkit_present=False, elapsed_s=10.0, timeout_s=900.0)

ROWS = [
    # (row, inputs that differ from BASE, decision, words in the reason)
    (1, dict(marker=marker("done")), bp.INSTALLED, "installed (boot route)"),
    (1, dict(marker=marker("done", gpu=True), gpu_present=True, toolkit_present=True), bp.INSTALLED, "running"),
    (1, dict(marker=marker("done"), toolkit_present=False), bp.INSTALLED, "running"),     # no GPU, no toolkit needed
    (1, dict(marker=marker("done", route="ssh"), boot_delivered=False), bp.INSTALLED, "ssh route"),
    (2, dict(marker=marker("done", gpu=False), gpu_present=True), bp.PUSH, "GPU missed"),
    (2, dict(marker=marker("done", gpu=False), gpu_present=True, k3s_running=False), bp.PUSH, "GPU missed"),
    (3, dict(marker=marker("done", gpu=True), gpu_present=True), bp.PUSH, "no NVIDIA Container Toolkit"),
    (3, dict(marker=marker("done", gpu=True, nvidia_runtime="none"), gpu_present=True, k3s_running=False),
     bp.PUSH, "no nvidia-container-runtime"),
    (4, dict(marker=marker("done"), k3s_running=False), bp.PUSH, "k3s is not running"),
    (5, dict(marker=marker("failed", error="downloading k3s (exit 22)")), bp.PUSH, "downloading k3s (exit 22)"),
    (5, dict(marker=marker("failed"), installer_alive=True), bp.PUSH, "no error recorded"),
    (6, dict(marker=marker("running"), installer_alive=False), bp.PUSH, "no installer is alive"),
    (7, dict(marker=marker("running"), installer_alive=True, elapsed_s=900.0), bp.PUSH, "timed out"),
    (8, dict(marker=marker("running"), installer_alive=True, elapsed_s=899.0), bp.WAIT, "running"),
    (8, dict(marker=marker("running"), installer_alive=True, k3s_running=False), bp.WAIT, "running"),
    (9, dict(marker=marker("exploded")), bp.PUSH, "unknown state"),
    (10, dict(boot_delivered=False, runner=bp.RUNNER_RUNNING), bp.PUSH, "no boot route"),
    (10, dict(boot_delivered=False, runner=bp.RUNNER_ABSENT, k3s_running=False), bp.PUSH, "no boot route"),
    (11, dict(runner=bp.RUNNER_DONE), bp.PUSH, "finished (done)"),
    (11, dict(runner=bp.RUNNER_ERROR), bp.PUSH, "finished (error)"),
    (12, dict(runner=bp.RUNNER_ABSENT), bp.PUSH, "no boot runner"),
    (13, dict(runner=bp.RUNNER_RUNNING, elapsed_s=901.0), bp.PUSH, "did not start within 900 s"),
    (13, dict(runner=bp.RUNNER_UNKNOWN, elapsed_s=1000.0), bp.PUSH, "timed out"),
    (14, dict(runner=bp.RUNNER_RUNNING), bp.WAIT, "waiting for the boot runner (running)"),
    (14, dict(runner=bp.RUNNER_UNKNOWN), bp.WAIT, "unknown"),
    # GPU off (k3s_gpu false): an install that configured the GPU path is redone, so the installer removes it
    (15, dict(marker=marker("done", gpu=True), gpu_present=True, toolkit_present=True, gpu_mode=bp.GPU_OFF),
     bp.PUSH, "remove the device plugin and the node label"),
    (15, dict(marker=marker("done", gpu=True), gpu_present=False, gpu_mode=bp.GPU_OFF), bp.PUSH, "k3s_gpu is false"),
    # ... and one that did not is installed, GPU or not, toolkit or not
    (1, dict(marker=marker("done", gpu=False), gpu_present=True, toolkit_present=False, gpu_mode=bp.GPU_OFF),
     bp.INSTALLED, "running"),
    (2, dict(marker=marker("done", gpu=False), gpu_present=True, gpu_mode=bp.GPU_ON), bp.PUSH, "GPU missed"),
]


@pytest.mark.parametrize("row, changes, decision, words", ROWS,
                         ids=["row%d-%d" % (r[0], i) for i, r in enumerate(ROWS)])
def test_decision_table_row(row, changes, decision, words):
    got, reason, matched = bp.decide(**inputs_with(**changes))
    assert (got, matched) == (decision, row), reason
    assert words in reason


def test_every_row_is_covered():
    assert sorted({r[0] for r in ROWS}) == list(range(1, 16))


@pytest.mark.parametrize("given, mode", [("auto", "auto"), ("AUTO", "auto"), (True, "true"), ("yes", "true"),
                                         ("on", "true"), ("1", "true"), (False, "false"), ("no", "false"),
                                         ("off", "false"), ("0", "false")])
def test_parse_gpu_mode_reads_k3s_gpu_as_the_installer_does(given, mode):
    assert bp.parse_gpu_mode(given) == mode


def test_parse_gpu_mode_names_what_it_got():
    with pytest.raises(ValueError, match="expected auto, true or false, got 'maybe'"):
        bp.parse_gpu_mode("maybe")
    with pytest.raises(ValueError, match="gpu_mode: expected one of auto, true, false, got 'maybe'"):
        bp.decide(**inputs_with(gpu_mode="maybe"))


def inputs_with(**changes):
    found = dict(BASE)
    found.update(changes)
    return found


def test_decide_is_pure():
    inputs = inputs_with(marker=marker("running"), installer_alive=True)
    frozen = dict(inputs)
    frozen["marker"] = dict(inputs["marker"])
    assert bp.decide(**inputs) == bp.decide(**inputs)
    assert inputs == frozen


def test_no_timeout_never_times_out():
    got, _reason, row = bp.decide(**inputs_with(runner=bp.RUNNER_RUNNING, elapsed_s=1e9, timeout_s=None))
    assert (got, row) == (bp.WAIT, 14)


def test_parse_marker():
    text = ("state=done\nroute=ssh\npid=42\nstarted_at=1700000000\nupdated_at=bad\ngpu=true\nchanged=false\n"
            "sans=10.0.0.1,a.example\nerror=x=y\n# comment\n\nnot a pair\n")
    found = bp.parse_marker(text)
    assert found["state"] == "done" and found["route"] == "ssh" and found["pid"] == 42
    assert found["started_at"] == 1700000000.0 and found["updated_at"] is None
    assert found["gpu"] is True and found["changed"] is False
    assert found["sans"] == "10.0.0.1,a.example" and found["error"] == "x=y"
    assert bp.parse_marker(None) is None and bp.parse_marker("") is None and bp.parse_marker("# nothing\n") is None


@pytest.mark.parametrize("text, state", [
    ("status: done\n", bp.RUNNER_DONE),
    ("\nstatus: running\n", bp.RUNNER_RUNNING),
    ("status: not started\n", bp.RUNNER_RUNNING),
    ("status: error\n", bp.RUNNER_ERROR),
    ("status: degraded done\n", bp.RUNNER_ERROR),
    ("status: disabled\n", bp.RUNNER_ABSENT),
    ("something else", bp.RUNNER_UNKNOWN),
    ("", bp.RUNNER_UNKNOWN),
])
def test_parse_cloud_init_status(text, state):
    assert bp.parse_cloud_init_status(text) == state


def test_parse_nvidia_smi():
    text = ("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0b6c1a2e-1111-2222-3333-444455556666)\n"
            "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-1b6c1a2e-1111-2222-3333-444455556666)\n"
            "  MIG 1g.10gb     Device  0: (UUID: MIG-aaaa)\n"
            "No devices found.\n")
    assert bp.parse_nvidia_smi(text) == ["NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3"]
    assert bp.parse_nvidia_smi("") == [] and bp.parse_nvidia_smi(None) == []


def test_elapsed_takes_the_longest_relevant_clock():
    running = marker("running", running_for_s=300.0)
    assert bp.elapsed(running, runner_since_s=5000.0, waited_s=20.0) == 300.0   # the install's own age
    assert bp.elapsed(None, runner_since_s=50.0, waited_s=20.0) == 50.0         # the runner's age
    assert bp.elapsed(None, runner_since_s=None, waited_s=20.0) == 20.0
    assert bp.elapsed(marker("done"), runner_since_s=None, waited_s=0.0) == 0.0
