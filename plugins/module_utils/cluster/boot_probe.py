# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The k3s boot check: what the probe read on the VM, and the pure decision table
that maps it to ``installed``, ``wait`` or ``push`` (install over SSH).

Runs on the VM (imported by the ``k3s_probe`` module), so it uses the standard
library only and stays compatible with the oldest Python Ansible supports on a
target. Nothing here reads files or clocks: ``decide`` is a function of its input.

The installer (``roles/k3s/files/k3s-install.sh``) writes its status marker,
``/var/lib/gpuprov/k3s-install.status``, as ``key=value`` lines::

    state=running|done|failed
    route=boot|ssh
    pid=<installer pid>
    started_at=<epoch s>       updated_at=<epoch s>
    gpu=true|false             (whether this install configured the NVIDIA runtime)
    nvidia_runtime=present|installed|none   (the NVIDIA Container Toolkit's runtime; installed: by this run)
    sans=<comma-separated SAN list rendered into config.yaml>
    manager=systemd|pidfile    (how k3s is kept running)
    changed=true|false         k3s_version=<the release its --version names>
    error=<one line, when failed>
"""

from __future__ import annotations

INSTALLED = "installed"
WAIT = "wait"
PUSH = "push"
DECISIONS = (INSTALLED, WAIT, PUSH)

# Boot-runner states (cloud-init, the docker cloud's container-start runner, ...).
RUNNER_RUNNING = "running"
RUNNER_DONE = "done"
RUNNER_ERROR = "error"
RUNNER_ABSENT = "absent"     # no boot runner left any trace (reused VM, no boot route)
RUNNER_UNKNOWN = "unknown"   # a runner exists but does not say (startup-script services)
RUNNER_STATES = (RUNNER_RUNNING, RUNNER_DONE, RUNNER_ERROR, RUNNER_ABSENT, RUNNER_UNKNOWN)

MARKER_STATES = ("running", "done", "failed")

# What the role asks of the GPU path (k3s_gpu): configure it when a GPU is seen, always, or never.
GPU_AUTO = "auto"
GPU_ON = "true"
GPU_OFF = "false"
GPU_MODES = (GPU_AUTO, GPU_ON, GPU_OFF)


def parse_gpu_mode(value):
    """k3s_gpu as the installer reads it (auto | true/yes/1/on | false/no/0/off) -> one of GPU_MODES.

    Raises ValueError naming what it got for anything else."""
    text = str(value).strip().lower()
    if text in ("true", "yes", "1", "on"):
        return GPU_ON
    if text in ("false", "no", "0", "off"):
        return GPU_OFF
    if text == GPU_AUTO:
        return GPU_AUTO
    raise ValueError("expected auto, true or false, got %r" % (value,))


def parse_marker(text):
    """The marker's ``key=value`` lines as a dict (None for no marker or an empty one).

    Unknown keys are kept; ``gpu`` and ``changed`` become booleans, the times floats."""
    if text is None:
        return None
    found = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, value = line.split("=", 1)
        found[key.strip()] = value.strip()
    if not found:
        return None
    for key in ("gpu", "changed"):
        if key in found:
            found[key] = found[key].lower() in ("true", "yes", "1")
    for key in ("started_at", "updated_at"):
        if key in found:
            try:
                found[key] = float(found[key])
            except ValueError:
                found[key] = None
    if "pid" in found:
        try:
            found["pid"] = int(found["pid"])
        except ValueError:
            found["pid"] = None
    return found


def parse_cloud_init_status(text):
    """``cloud-init status`` output ("status: done") to a runner state."""
    status = ""
    for line in (text or "").splitlines():
        if line.strip().lower().startswith("status:"):
            status = line.split(":", 1)[1].strip().lower()
            break
    if status in ("running", "not started", "not run"):
        return RUNNER_RUNNING
    if status == "done":
        return RUNNER_DONE
    if status in ("error", "degraded done", "degraded"):
        return RUNNER_ERROR
    if status == "disabled":
        return RUNNER_ABSENT
    return RUNNER_UNKNOWN


def parse_nvidia_smi(text):
    """GPU names from ``nvidia-smi -L`` ("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-...)")."""
    names = []
    for line in (text or "").splitlines():
        line = line.strip()
        if not line.startswith("GPU ") or ":" not in line:
            continue
        name = line.split(":", 1)[1].strip()
        if " (UUID" in name:
            name = name.split(" (UUID", 1)[0].strip()
        names.append(name)
    return names


def decide(marker, installer_alive, runner, boot_delivered, k3s_running, gpu_present, toolkit_present,
           elapsed_s, timeout_s, gpu_mode=GPU_AUTO):
    """The decision table. Returns ``(decision, reason, row)``; the first matching row wins (rows are
    numbered in the order they were added; they are tried in the order of the table).

    marker          parsed marker dict, or None when the installer never ran here
    installer_alive whether an installer holds the host-wide lock (or the marker's pid lives)
    runner          the boot runner's state (one of RUNNER_STATES)
    boot_delivered  whether the installer was handed to the cloud as the boot script
    k3s_running     whether the k3s unit/process runs
    gpu_present     whether the VM has an NVIDIA GPU (nvidia-smi -L or /dev/nvidia*)
    toolkit_present whether the NVIDIA Container Toolkit's runtime (nvidia-container-runtime) is on the VM:
                    without it k3s has no ``nvidia`` runtime and nvidia.com/gpu never becomes allocatable
    elapsed_s       how long the boot install has been going, or waited for (seconds)
    timeout_s       how long the boot route may take before SSH takes over
    gpu_mode        what the role asks of the GPU path (k3s_gpu: one of GPU_MODES)

    ==== ========= ================================================ ==========
    row  marker    condition                                        decision
    ==== ========= ================================================ ==========
    15   done      GPU off (k3s_gpu false) but the install          push
                   configured the GPU path
    1    done      k3s running, GPU (if any, and not off) configured installed
    2    done      GPU present, not off, the install did not        push
                   configure it
    3    done      GPU present, not off, no NVIDIA Container        push
                   Toolkit
    4    done      k3s not running                                  push
    5    failed    -                                                push
    6    running   no installer alive (died, VM rebooted)           push
    7    running   elapsed >= timeout                               push
    8    running   otherwise                                        wait
    9    other     unknown state in the marker                      push
    10   none      no boot script was delivered                     push
    11   none      boot runner finished (done/error) without it     push
    12   none      no boot runner at all                            push
    13   none      elapsed >= timeout                               push
    14   none      runner running or unknown                        wait
    ==== ========= ================================================ ==========

    Row 3 sends a finished install whose VM lacks the toolkit (an installer that predates the toolkit
    step, or a toolkit removed since) to the SSH route, whose installer installs the toolkit (NVIDIA's
    apt repository, or the air-gap bundle's packages) and restarts k3s so it detects the runtime.
    Row 15 sends an install that configured the GPU path to the SSH route when the GPU is now off, whose
    installer removes the device plugin and the node label (k3s keeps both when the manifest goes).
    """
    if gpu_mode not in GPU_MODES:
        raise ValueError("gpu_mode: expected one of %s, got %r" % (", ".join(GPU_MODES), gpu_mode))
    state = (marker or {}).get("state") if marker else None
    timed_out = timeout_s is not None and elapsed_s is not None and elapsed_s >= timeout_s
    gpu_wanted = gpu_present and gpu_mode != GPU_OFF
    if state == "done":
        if gpu_mode == GPU_OFF and marker.get("gpu"):
            return PUSH, ("the install configured the GPU path but k3s_gpu is false: the install must remove "
                          "the device plugin and the node label"), 15
        if gpu_wanted and not marker.get("gpu"):
            return PUSH, "the install did not configure the GPU this VM has (GPU missed)", 2
        if gpu_wanted and not toolkit_present:
            return PUSH, ("the VM has a GPU but no NVIDIA Container Toolkit (no nvidia-container-runtime): "
                          "the install must add it"), 3
        if not k3s_running:
            return PUSH, "the install finished but k3s is not running", 4
        return INSTALLED, "k3s installed (%s route) and running" % (marker.get("route") or "unknown"), 1
    if state == "failed":
        route = marker.get("route") or "boot"
        return PUSH, "the %s install failed: %s" % (route, marker.get("error") or "no error recorded"), 5
    if state == "running":
        if not installer_alive:
            return PUSH, "the marker says running but no installer is alive (it died)", 6
        if timed_out:
            return PUSH, "the boot install has run %.0f s (limit %.0f s): timed out" % (elapsed_s, timeout_s), 7
        return WAIT, "the boot install is running (%.0f s so far)" % (elapsed_s or 0), 8
    if marker:
        return PUSH, "the marker has an unknown state %r" % (state,), 9
    if not boot_delivered:
        return PUSH, "no boot route: the installer was not delivered at boot", 10
    if runner in (RUNNER_DONE, RUNNER_ERROR):
        return PUSH, "the boot runner finished (%s) without running the installer" % runner, 11
    if runner == RUNNER_ABSENT:
        return PUSH, "no boot runner on this VM (reused VM or no boot route)", 12
    if timed_out:
        return PUSH, "the boot install did not start within %.0f s: timed out" % timeout_s, 13
    return WAIT, "waiting for the boot runner (%s) to start the installer" % runner, 14


def elapsed(marker, runner_since_s, waited_s):
    """How long the boot route has had: the longest of the marker's age (running
    installs), the boot runner's age and what this probe waited."""
    candidates = [waited_s or 0.0]
    if marker and marker.get("state") == "running" and marker.get("running_for_s") is not None:
        candidates.append(marker["running_for_s"])
    if runner_since_s is not None and not (marker and marker.get("state") == "running"):
        candidates.append(runner_since_s)
    return max(candidates)
