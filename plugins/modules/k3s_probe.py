#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: k3s_probe
short_description: Probe a VM's k3s install (internal, k3s role)
version_added: 0.1.0
description:
  - Runs on the VM. Reads, in one round trip, the k3s installer's status marker
    (C(/var/lib/gpuprov/k3s-install.status)), whether an installer holds the host-wide lock, the boot runner's
    state (C(cloud-init status), or the docker test cloud's container-start runner), the k3s unit or process
    state, GPU presence (C(nvidia-smi -L) and C(/dev/nvidia*)) and the NVIDIA Container Toolkit's runtime
    (C(nvidia-container-runtime) on C(PATH) or in C(/usr/local/nvidia/toolkit), where k3s looks for it).
  - Returns those facts and the decision of a pure decision table
    (C(plugins/module_utils/cluster/boot_probe.py)) - V(installed), V(wait) (the boot install is still
    running) or V(push) (install over SSH, because the boot route is missing, failed, timed out, missed the GPU,
    or the VM has a GPU but no NVIDIA Container Toolkit, which the SSH install then installs, or the install
    configured the GPU path that O(gpu=false) turns off, which the SSH install then removes).
  - With O(wait), polls on the VM while the decision is V(wait), up to O(wait) seconds, so one task covers the
    whole boot check; a boot install still running after O(boot_timeout) seconds is decided V(push).
  - Never changes the VM.
author:
  - gpuprov.cloud contributors (@gpuprov)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  platform:
    platforms: posix
options:
  wait:
    description: Seconds to keep polling while the decision is V(wait); V(0) probes once.
    type: int
    default: 0
  poll_interval:
    description: Seconds between polls.
    type: int
    default: 5
  boot_timeout:
    description:
      - Seconds the boot route may take (counted from the installer's start, or the boot runner's start while
        the installer has not started) before the decision becomes V(push).
    type: int
    default: 900
  boot_delivered:
    description: Whether the installer was handed to the cloud as the VM's boot script.
    type: bool
    default: false
  gpu_expected:
    description: Whether the VM's offer has a GPU; reported back as RV(gpu_missing) when no GPU is visible.
    type: bool
    default: false
  gpu:
    description:
      - What the role asks of the GPU path (C(k3s_gpu)) - V(auto) (when a GPU is seen), V(true) (also V(yes),
        V(on), V(1)) or V(false) (also V(no), V(off), V(0)), read as the installer reads C(GPUPROV_K3S_GPU).
      - With V(false), a GPU VM whose install configured the GPU path is decided V(push) (row 15), and one whose
        install did not is not sent back for the GPU (rows 2 and 3 do not apply).
    type: str
    default: auto
  state_dir:
    description: Where the installer keeps its marker, lock and pid file, and the docker cloud its boot runner files.
    type: path
    default: /var/lib/gpuprov
  k3s_binary:
    description: The k3s binary the installer installs.
    type: path
    default: /usr/local/bin/k3s
notes:
  - Needs no privileges for most facts; the installer lock is only tested, never held.
seealso:
  - name: The k3s role
    description: C(gpuprov.cloud.k3s) runs this module as its boot check.
    link: https://github.com/gpuprov/cloud
"""

EXAMPLES = r"""
- name: Check the boot install, polling while it runs (at most 15 minutes)
  gpuprov.cloud.k3s_probe:
    wait: 900
    boot_timeout: 900
    boot_delivered: true
  register: k3s_boot

- name: Install over SSH when the boot route did not do it
  ansible.builtin.debug:
    msg: "push: {{ k3s_boot.reason }}"
  when: k3s_boot.decision != 'installed'
"""

RETURN = r"""
decision:
  description: V(installed), V(wait) (still running when O(wait) ran out) or V(push).
  returned: always
  type: str
  sample: installed
reason:
  description: Why, in words.
  returned: always
  type: str
row:
  description: The row of the decision table that matched.
  returned: always
  type: int
waited_s:
  description: Seconds this probe polled.
  returned: always
  type: float
elapsed_s:
  description: How long the boot route has had, as the decision counted it.
  returned: always
  type: float
gpu_missing:
  description: O(gpu_expected) but no NVIDIA GPU visible on the VM.
  returned: always
  type: bool
facts:
  description: What was read.
  returned: always
  type: dict
  contains:
    marker: {description: The parsed status marker (null when absent)., type: dict, returned: always}
    installer_alive: {description: Whether an installer holds the lock., type: bool, returned: always}
    boot_runner:
      description: "Boot runner: kind (cloud-init, gpuprov, none), state, since_s."
      type: dict
      returned: always
    k3s:
      description: "k3s: binary, running, manager (systemd, pidfile, process, none), pid."
      type: dict
      returned: always
    gpu:
      description:
        - "GPUs: present, names (nvidia-smi -L), devices (/dev/nvidia*), toolkit (whether the NVIDIA Container
          Toolkit's nvidia-container-runtime is there), toolkit_runtime (its path, or null)."
      type: dict
      returned: always
"""

import fcntl
import glob
import os
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuprov.cloud.plugins.module_utils.cluster import boot_probe


def _read(path):
    try:
        with open(path) as handle:
            return handle.read()
    except (IOError, OSError):
        return None


def _installer_alive(lock_path, marker):
    """An installer runs when the host-wide lock is held (tested, never kept)."""
    if os.path.exists(lock_path):
        try:
            fd = os.open(lock_path, os.O_RDONLY)
        except OSError:
            fd = None
        if fd is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except (IOError, OSError):
                return True
            else:
                fcntl.flock(fd, fcntl.LOCK_UN)
                return False
            finally:
                os.close(fd)
    pid = (marker or {}).get("pid")
    return bool(pid) and os.path.isdir("/proc/%d" % pid)


def _uptime():
    text = _read("/proc/uptime")
    try:
        return float(text.split()[0])
    except (AttributeError, IndexError, ValueError):
        return None


def _boot_runner(module, state_dir, now):
    cloud_init = module.get_bin_path("cloud-init")
    if cloud_init:
        rc, out, err = module.run_command([cloud_init, "status"])
        state = boot_probe.parse_cloud_init_status(out + "\n" + err)
        return {"kind": "cloud-init", "state": state, "since_s": _uptime(), "detail": (out or err).strip()}
    started = os.path.join(state_dir, "boot.started")
    if os.path.exists(started):
        status = _read(os.path.join(state_dir, "boot.status"))
        since = now - os.path.getmtime(started)
        if status is None:
            return {"kind": "gpuprov", "state": boot_probe.RUNNER_RUNNING, "since_s": since, "detail": ""}
        code = status.strip()
        return {"kind": "gpuprov", "state": boot_probe.RUNNER_DONE if code == "0" else boot_probe.RUNNER_ERROR,
                "since_s": since, "detail": "boot script exit status %s" % code}
    return {"kind": "none", "state": boot_probe.RUNNER_ABSENT, "since_s": None, "detail": ""}


def _k3s(module, state_dir, binary):
    found = {"binary": os.path.exists(binary), "running": False, "manager": "none", "pid": None}
    if os.path.isdir("/run/systemd/system") and module.get_bin_path("systemctl"):
        rc, out, err = module.run_command([module.get_bin_path("systemctl"), "is-active", "k3s"])
        found["manager"] = "systemd"
        found["running"] = rc == 0 and out.strip() == "active"
        found["unit_state"] = out.strip()
        if found["running"]:
            return found
    pid_text = _read(os.path.join(state_dir, "k3s.pid"))
    if pid_text and pid_text.strip().isdigit():
        pid = int(pid_text.strip())
        cmdline = (_read("/proc/%d/cmdline" % pid) or "").replace("\0", " ")
        if "k3s" in cmdline:
            found.update(running=True, manager="pidfile", pid=pid)
            return found
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        cmdline = (_read("/proc/%s/cmdline" % entry) or "").replace("\0", " ")
        if "k3s server" in cmdline or "k3s-server" in cmdline:
            found.update(running=True, pid=int(entry))
            if found["manager"] == "none":
                found["manager"] = "process"
            return found
    return found


# Where k3s looks for the NVIDIA runtime at start (besides PATH).
TOOLKIT_DIRS = ("/usr/local/nvidia/toolkit",)


def _toolkit_runtime(module):
    found = module.get_bin_path("nvidia-container-runtime")
    if found:
        return found
    for folder in TOOLKIT_DIRS:
        candidate = os.path.join(folder, "nvidia-container-runtime")
        if os.access(candidate, os.X_OK):
            return candidate
    return None


def _gpu(module):
    names = []
    smi = module.get_bin_path("nvidia-smi")
    if smi:
        rc, out, err = module.run_command([smi, "-L"])
        if rc == 0:
            names = boot_probe.parse_nvidia_smi(out)
    devices = sorted(d for d in glob.glob("/dev/nvidia*") if os.path.basename(d)[len("nvidia"):].isdigit())
    runtime = _toolkit_runtime(module)
    return {"present": bool(names or devices), "names": names, "devices": devices, "toolkit": bool(runtime),
            "toolkit_runtime": runtime}


def probe(module, waited):
    params = module.params
    state_dir = params["state_dir"]
    now = time.time()
    marker = boot_probe.parse_marker(_read(os.path.join(state_dir, "k3s-install.status")))
    if marker and marker.get("started_at"):
        marker["running_for_s"] = max(0.0, now - marker["started_at"])
    alive = _installer_alive(os.path.join(state_dir, "k3s-install.lock"), marker)
    runner = _boot_runner(module, state_dir, now)
    k3s = _k3s(module, state_dir, params["k3s_binary"])
    gpu = _gpu(module)
    elapsed = boot_probe.elapsed(marker, runner["since_s"], waited)
    decision, reason, row = boot_probe.decide(marker, alive, runner["state"], params["boot_delivered"],
                                              k3s["running"], gpu["present"], gpu["toolkit"], elapsed,
                                              params["boot_timeout"], gpu_mode=params["gpu"])
    facts = {"marker": marker, "installer_alive": alive, "boot_runner": runner, "k3s": k3s, "gpu": gpu}
    return decision, reason, row, elapsed, facts


def main():
    module = AnsibleModule(
        argument_spec=dict(
            wait=dict(type="int", default=0),
            poll_interval=dict(type="int", default=5),
            boot_timeout=dict(type="int", default=900),
            boot_delivered=dict(type="bool", default=False),
            gpu_expected=dict(type="bool", default=False),
            gpu=dict(type="str", default="auto"),
            state_dir=dict(type="path", default="/var/lib/gpuprov"),
            k3s_binary=dict(type="path", default="/usr/local/bin/k3s"),
        ),
        supports_check_mode=True,
    )
    if module.params["wait"] < 0 or module.params["poll_interval"] < 1 or module.params["boot_timeout"] < 0:
        module.fail_json(msg="wait and boot_timeout must be >= 0 and poll_interval >= 1")
    try:
        module.params["gpu"] = boot_probe.parse_gpu_mode(module.params["gpu"])
    except ValueError as exc:
        module.fail_json(msg="gpu (k3s_gpu): %s" % exc)
    start = time.time()
    waited = 0.0
    while True:
        decision, reason, row, elapsed, facts = probe(module, waited)
        waited = time.time() - start
        if decision != boot_probe.WAIT or waited + module.params["poll_interval"] > module.params["wait"]:
            break
        time.sleep(module.params["poll_interval"])
    module.exit_json(changed=False, decision=decision, reason=reason, row=row, waited_s=round(waited, 1),
                     elapsed_s=round(elapsed, 1), facts=facts,
                     gpu_missing=bool(module.params["gpu_expected"] and not facts["gpu"]["present"]))


if __name__ == "__main__":
    main()
