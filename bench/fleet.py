"""Benchmark: a fleet through `gpuprov.cloud.provision` against one VM through it (the local cloud).

Measured in one run, on one machine, printed as a ratio (never asserted): each round provisions one
`local` VM, then a fleet of 32 (one play, --forks 32), then tears both down, then the same fleet
through a play of only the `vm` task; the medians are compared with the one VM's. The fleet's play
does what one VM's does, per VM, at once: the gap between the two fleet rows is what the play adds
per host beyond the `vm` action's own work (on few cores the vm task's own row is CPU-bound).

Run: make dev && .venv/bin/python bench/fleet.py [rounds] [fleet size]
"""

from __future__ import annotations

import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
BIN = pathlib.Path(sys.executable).parent


def _playbook(home: pathlib.Path, playbook: str, *args: str) -> float:
    """Seconds one ansible-playbook run took: a collection playbook by its short name, or a file."""
    env = dict(os.environ, GPUPROV_HOME=str(home), ANSIBLE_COLLECTIONS_PATH=str(REPO / "build" / "collections"))
    start = time.perf_counter()
    target = playbook if playbook.endswith(".yml") else "gpuprov.cloud.%s" % playbook
    done = subprocess.run([str(BIN / "ansible-playbook"), target, *args], env=env,
                          cwd=str(home), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False)
    took = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit("%s %s failed (rc %d):\n%s" % (playbook, " ".join(args), done.returncode, done.stdout[-6000:]))
    return took


def bench_fleet(rounds: int, size: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        home = pathlib.Path(tmp)
        singles, fleets, vm_tasks = [], [], []
        vm_only = home / "vm_only.yml"
        vm_only.write_text("- hosts: gpuprov_vms\n  gather_facts: false\n  tasks:\n"
                           "    - gpuprov.cloud.vm: {name: '{{ inventory_hostname }}'}\n")
        for index in range(rounds):
            single = "bench-one%d" % index
            fleet = home / ("fleet%d.yml" % index)
            fleet.write_text("gpuprov_vms:\n  hosts:\n%s" % "".join(
                "    bench-f%d-%d:\n" % (index, n) for n in range(size)))
            try:
                singles.append(_playbook(home, "provision", "-e", "vm=%s" % single))
                fleets.append(_playbook(home, "provision", "-i", str(fleet), "--forks", str(size)))
            finally:   # the local cloud's VMs are sshd processes: never leave them running
                _playbook(home, "down", "-e", "vm=%s" % single)
                _playbook(home, "down", "-i", str(fleet), "--forks", str(size))
            try:
                vm_tasks.append(_playbook(home, str(vm_only), "-i", str(fleet), "--forks", str(size)))
            finally:
                _playbook(home, "down", "-i", str(fleet), "--forks", str(size))
        one, many, bare = statistics.median(singles), statistics.median(fleets), statistics.median(vm_tasks)
        print("gpuprov.cloud.provision, one VM:            median %.3f s" % one)
        print("gpuprov.cloud.provision, %d VMs (forks %d):  median %.3f s  ratio %.2fx  (goal <= 2x)" % (
            size, size, many, many / one))
        print("a play of only the vm task, %d VMs:         median %.3f s  ratio %.2fx  (the play adds %.3f s)" % (
            size, bare, bare / one, many - bare))


if __name__ == "__main__":
    bench_fleet(int(sys.argv[1]) if len(sys.argv) > 1 else 3, int(sys.argv[2]) if len(sys.argv) > 2 else 32)
