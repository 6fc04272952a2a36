"""Benchmark: `ansible-playbook gpuprov.cloud.status` on a journal of 10,000 VMs.

Builds the journal once through the Journal API (each VM begun, moved through Planning and Booting
to Ready with a poll note on the way, and projected as running; every 500th VM Leaked), then runs
interleaved rounds of: an `ansible-playbook` run of one debug task (the floor), the status playbook
as it pages by default, and the status playbook asked for every VM (-e limit=0). Printed, never
asserted: the medians, each above the floor, and the size of the journal_info result.

Run: make dev && .venv/bin/python bench/status_big.py [rounds] [vms]
"""

from __future__ import annotations

import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
COLLECTIONS = REPO / "build" / "collections"
sys.path.insert(0, str(COLLECTIONS))

from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import projection  # noqa: E402
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.status import read_status  # noqa: E402

BIN = pathlib.Path(sys.executable).parent
LOCATION = {"cloud": "aws", "region": "us-east-1", "zone": "us-east-1a"}


def build_journal(path: pathlib.Path, count: int) -> None:
    journal = projection.open_journal(str(path))
    owner = "bench:1:status"
    # Built once, not measured: no fsync per transition (the status playbook only reads).
    journal.execute("PRAGMA synchronous = OFF")
    try:
        for n in range(count):
            name = "vm%05d" % n
            version = journal.begin(name, "launch", {"kind": "Reconciling"}, "Reconciling", False, owner, 600, None)
            for step in ("Planning", "Booting"):
                version = journal.transition(name, owner, version, {"kind": step}, step, False, "Reconciling",
                                             "to %s" % step)
            journal.note(name, owner, version, "Booting", "instance i-%05d: pending" % n)
            vm = {"name": name, "location": LOCATION, "instance_id": "i-%05d" % n, "price_per_hour": 2.5,
                  "ssh": {"host": "198.51.100.%d" % (n % 250 + 1), "port": 22, "user": "ubuntu"}}
            final = ({"kind": "Leaked", "targets": [{"location": LOCATION, "instance_ids": [vm["instance_id"]]}],
                      "reason": "instances still present after 600 s"} if n % 500 == 0 else {"kind": "Ready", "vm": vm})
            journal.transition(name, owner, version, final, final["kind"], True, "Booting", "SSH login OK")
            journal.release(name, owner)
            projection.upsert_vm(journal, name, cloud="aws", region="us-east-1", instance_id=vm["instance_id"],
                                 ssh_host=vm["ssh"]["host"], ssh_port=22, ssh_user="ubuntu",
                                 status="leaked" if final["kind"] == "Leaked" else "running", stage=final["kind"])
    finally:
        journal.close()


def _run(home: pathlib.Path, *args: str) -> float:
    env = dict(os.environ, GPUPROV_HOME=str(home), ANSIBLE_COLLECTIONS_PATH=str(COLLECTIONS))
    start = time.perf_counter()
    subprocess.run([str(BIN / "ansible-playbook"), *args], env=env, check=True, cwd=str(home),
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main(rounds: int, count: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        home = pathlib.Path(tmp)
        start = time.perf_counter()
        build_journal(home / "journal.sqlite", count)
        print("journal of %d VMs built in %.1f s" % (count, time.perf_counter() - start))
        floor = home / "floor.yml"
        floor.write_text("- hosts: localhost\n  gather_facts: false\n  tasks:\n"
                         "    - ansible.builtin.debug: {msg: hi}\n")
        floors, paged, whole = [], [], []
        for _round in range(rounds):
            floors.append(_run(home, str(floor)))
            paged.append(_run(home, "gpuprov.cloud.status"))
            whole.append(_run(home, "gpuprov.cloud.status", "-e", "limit=0"))
        base = statistics.median(floors)
        print("ansible-playbook, one debug task (floor): median %.3f s" % base)
        for label, times in (("status (default page)", paged), ("status -e limit=0 (every VM)", whole)):
            print("gpuprov.cloud.status, %-28s median %.3f s (goal <= 2 s), %.3f s above the floor"
                  % (label + ":", statistics.median(times), statistics.median(times) - base))
        for label, limit in (("default page", None), ("limit=0", 0)):
            kwargs = {} if limit is None else {"limit": limit}
            size = len(json.dumps(read_status(str(home / "journal.sqlite"), **kwargs)))
            print("journal_info result, %-13s %.2f MB" % (label + ":", size / 1e6))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3, int(sys.argv[2]) if len(sys.argv) > 2 else 10000)
