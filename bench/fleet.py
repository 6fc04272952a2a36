"""Benchmark: a fleet through `gpuprov.cloud.provision` against one VM through it (the local cloud).

Measured in one run, on one machine, printed as a ratio (never asserted): each round provisions one
`local` VM, then a fleet of 32 (one play, --forks 32), then tears both down, then the same fleet
through a play of only the `vm` task; the medians are compared with the one VM's. For reference it
also runs a play of one debug task on one host and on the fleet: Ansible's own cost per host. The fleet's play
does what one VM's does, per VM, at once: the gap between the two fleet rows is what the play adds
per host beyond the `vm` action's own work (on few cores the vm task's own row is CPU-bound).

Each provision's CPU is printed too, split in two: the controller's (ansible-playbook, its workers and what they
run) and the local VMs' own (their sshd listeners and the logins these served). A local VM is an sshd on this
machine, so its work shares the controller's cores here; a cloud's VMs do theirs elsewhere.

The last row is the goal (issue 28): the controller CPU each further VM of the fleet adds (goal <= 60 ms), beside
what each further host costs Ansible itself in the one-debug-task play (its controller CPU, 1 host against the
fleet): the part of a VM's cost no change to gpuprov can remove. CPU seconds, not wall time: they are what a
controller of few cores runs out of, and they are steadier than wall time on a shared machine.

Run: make dev && .venv/bin/python bench/fleet.py [rounds] [fleet size]
"""

from __future__ import annotations

import os
import pathlib
import resource
import statistics
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
BIN = pathlib.Path(sys.executable).parent


def _children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def _local_vms_cpu(home: pathlib.Path) -> float:
    """CPU seconds used so far by the sshd listeners of the local VMs under ``home``, with the logins they
    served (their reaped children): the VMs' own work."""
    marker, tick, total = (str(home) + os.sep).encode(), os.sysconf("SC_CLK_TCK"), 0.0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % entry, "rb") as handle:
                cmdline = handle.read()
            if b"sshd" not in cmdline or marker not in cmdline:
                continue
            with open("/proc/%s/stat" % entry, "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        total += sum(int(field) for field in fields[11:15]) / tick   # utime, stime, cutime, cstime
    return total


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
        singles, fleets, vm_tasks, floors = [], [], [], {"one": [], "fleet": []}
        cpu = {"one": ([], []), "fleet": ([], [])}   # (controller, local VMs) CPU seconds per round
        floor_cpu = {"one": [], "fleet": []}   # the debug play's controller CPU seconds per round (no VMs)
        vm_only = home / "vm_only.yml"
        vm_only.write_text("- hosts: gpuprov_vms\n  gather_facts: false\n  tasks:\n"
                           "    - gpuprov.cloud.vm: {name: '{{ inventory_hostname }}'}\n")
        # Ansible's own cost of one task a host, gpuprov aside: what a fleet's play pays per VM at the least.
        floor = home / "floor.yml"
        floor.write_text("- hosts: gpuprov_vms\n  gather_facts: false\n  tasks:\n"
                         "    - ansible.builtin.debug: {msg: '{{ inventory_hostname }}'}\n")
        one_host = home / "one_host.yml"
        one_host.write_text("gpuprov_vms:\n  hosts:\n    bench-floor:\n")
        for index in range(rounds):
            single = "bench-one%d" % index
            fleet = home / ("fleet%d.yml" % index)
            fleet.write_text("gpuprov_vms:\n  hosts:\n%s" % "".join(
                "    bench-f%d-%d:\n" % (index, n) for n in range(size)))
            try:
                for row, args in (("one", ("-e", "vm=%s" % single)), ("fleet", ("-i", str(fleet), "--forks", str(size)))):
                    controller, vms = _children_cpu(), _local_vms_cpu(home)
                    (singles if row == "one" else fleets).append(_playbook(home, "provision", *args))
                    cpu[row][0].append(_children_cpu() - controller)
                    cpu[row][1].append(_local_vms_cpu(home) - vms)
            finally:   # the local cloud's VMs are sshd processes: never leave them running
                _playbook(home, "down", "-e", "vm=%s" % single)
                _playbook(home, "down", "-i", str(fleet), "--forks", str(size))
            for row, args in (("one", ("-i", str(one_host))), ("fleet", ("-i", str(fleet), "--forks", str(size)))):
                controller = _children_cpu()
                floors[row].append(_playbook(home, str(floor), *args))
                floor_cpu[row].append(_children_cpu() - controller)
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
        floor_one, floor_many = statistics.median(floors["one"]), statistics.median(floors["fleet"])
        print("Ansible alone, one debug task, 1 vs %d hosts: median %.3f s vs %.3f s  (%d hosts add %.3f s)" % (
            size, floor_one, floor_many, size - 1, floor_many - floor_one))
        for row, count in (("one", 1), ("fleet", size)):
            controller, vms = (statistics.median(values) for values in cpu[row])
            print("CPU of the provision, %2d VM(s): controller %.2f s, the local VMs' sshd %.2f s (%.0f%%)" % (
                count, controller, vms, 100.0 * vms / (controller + vms)))
        extra = [statistics.median(cpu["fleet"][n]) - statistics.median(cpu["one"][n]) for n in (0, 1)]
        print("CPU each further VM adds: controller %.0f ms, its sshd %.0f ms" % tuple(
            1000.0 * value / (size - 1) for value in extra))
        floor_extra = statistics.median(floor_cpu["fleet"]) - statistics.median(floor_cpu["one"])
        print("controller CPU per extra VM: %.0f ms (goal <= 60 ms); Ansible's own per host, one debug task: %.0f ms" % (
            1000.0 * extra[0] / (size - 1), 1000.0 * floor_extra / (size - 1)))


if __name__ == "__main__":
    bench_fleet(int(sys.argv[1]) if len(sys.argv) > 1 else 3, int(sys.argv[2]) if len(sys.argv) > 2 else 32)
