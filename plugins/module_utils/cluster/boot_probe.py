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
    changed=true|false         error=<one line, when failed>
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
           elapsed_s, timeout_s):
    """The decision table. Returns ``(decision, reason, row)``; the first matching row wins.

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

    ==== ========= ================================================ ==========
    row  marker    condition                                        decision
    ==== ========= ================================================ ==========
    1    done      k3s running, GPU (if any) configured             installed
    2    done      GPU present but the install did not configure it push
    3    done      GPU present, no NVIDIA Container Toolkit         push
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
    """
    state = (marker or {}).get("state") if marker else None
    timed_out = timeout_s is not None and elapsed_s is not None and elapsed_s >= timeout_s
    if state == "done":
        if gpu_present and not marker.get("gpu"):
            return PUSH, "the install did not configure the GPU this VM has (GPU missed)", 2
        if gpu_present and not toolkit_present:
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
