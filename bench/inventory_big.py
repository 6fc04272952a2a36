"""Benchmark: `ansible-inventory -i <x>.gpuprov.yml --list` (the gpuprov.cloud.journal inventory) on a
journal of 10,000 VMs.

Builds the journal once through the Journal API, as a launch leaves it: each VM begun, moved through
Planning and Booting to Ready with a poll note on the way, its Ready state carrying the vm record (user
tags, Python, host key) and a search of 8 offers, and projected as running with the detail launch.py
writes (Python, host key, key fingerprint); every 500th VM Leaked instead. Then runs interleaved rounds of:

- the floor: `ansible-inventory --list` on a one-host static INI inventory, i.e. Ansible's own start-up
  and output, which no plugin can go below (the plugin on an empty journal is a row of its own: it is the
  floor plus the plugin's imports and config, so it shows what the plugin costs before reading any VM);
- Ansible's own cost of this many hosts: the same hosts, groups and variables (the plugin's --list output,
  taken once before the rounds) from an inventory script, no gpuprov code at all. A reference, not a bound:
  Ansible marks a script's values trusted and an inventory plugin's not, so its --list output is smaller
  (no __ansible_unsafe wrappers), while the script plugin parses and checks the JSON itself;
- the goal's reference: the same hosts and groups from an inventory script with only their connection
  variables (the ansible_* ones: host, port, user, key, ssh common args, Python), i.e. what any inventory
  that reaches these VMs costs Ansible, without the plugin's one `gpuprov` dict per host;
- the plugin on the 10,000-VM journal, uncached (every read regenerates known_hosts and the ssh config);
- the same with `cache: true` (jsonfile), the cache filled before the rounds: a cache hit.

Printed, never asserted: the medians of wall and CPU (user + system) seconds, wall above the floor and as a
ratio to it, and the size of the --list output; then the goal row (issue 28): the plugin's uncached --list as
a ratio to the connection-variables script's, wall and CPU, goal <= 1.5x. The rows run interleaved, round
after round, so a slow spell of the machine touches them all. On a shared machine the CPU seconds are the
steadier figure.

Run: make dev && .venv/bin/python bench/inventory_big.py [rounds] [vms]
"""

from __future__ import annotations

import json
import os
import pathlib
import resource
import statistics
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
COLLECTIONS = REPO / "build" / "collections"
sys.path.insert(0, str(COLLECTIONS))

from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import projection  # noqa: E402

BIN = pathlib.Path(sys.executable).parent
LOCATION = {"cloud": "aws", "region": "us-east-1", "zone": "us-east-1a"}
HOST_KEY = {"type": "ssh-ed25519", "key": "AAAAC3NzaC1lZDI1NTE5AAAAI" + "B" * 43}
OFFERS = [{"cloud": "aws", "region": "us-east-1", "zone": "us-east-1%s" % z, "instance_type": "p5.48xlarge",
           "gpu": "H100", "gpu_count": 8, "spot": False, "price_per_hour": 98.32 + n} for n, z in enumerate("abcdef")]
OFFERS += [{"cloud": "gcp", "region": "us-central1", "zone": "us-central1-a", "instance_type": "a3-highgpu-8g",
            "gpu": "H100", "gpu_count": 8, "spot": spot, "price_per_hour": 88.25} for spot in (False, True)]


def _ready(name: str, n: int) -> dict:
    alias = "gpuprov-%s-%012x" % (name, n)
    vm = {"name": name, "location": LOCATION, "instance_id": "i-%05d" % n, "zone": LOCATION["zone"],
          "instance_type": "p5.48xlarge", "gpu": "H100", "gpu_count": 8, "spot": False, "price_per_hour": 98.32,
          "tags": {"team": "ml%d" % (n % 7), "cost-center": str(n % 13)},
          "request": {"clouds": ["aws", "gcp"], "gpu": "H100", "gpu_count": 8, "regions": []},
          "ssh": {"host": "198.51.100.%d" % (n % 250 + 1), "port": 22, "user": "ubuntu"},
          "host_key_alias": alias, "host_key": HOST_KEY, "python_interpreter": "/usr/bin/python3",
          "host_key_fingerprint": "ssh-ed25519 SHA256:" + "x" * 43, "ssh_key_fingerprint": "SHA256:" + "y" * 43}
    search = {"offers": OFFERS, "history": [{"offer": OFFERS[0], "error": None}], "blocked": []}
    return {"kind": "Ready", "vm": vm, "reused": False, "search": search}


def build_journal(path: pathlib.Path, count: int) -> None:
    journal = projection.open_journal(str(path))
    owner = "bench:1:inventory"
    # Built once, not measured: no fsync per transition (the inventory only reads).
    journal.execute("PRAGMA synchronous = OFF")
    try:
        for n in range(count):
            name = "vm%05d" % n
            version = journal.begin(name, "launch", {"kind": "Reconciling"}, "Reconciling", False, owner, 600, None)
            for step in ("Planning", "Booting"):
                version = journal.transition(name, owner, version, {"kind": step}, step, False, "Reconciling",
                                             "to %s" % step)
            journal.note(name, owner, version, "Booting", "instance i-%05d: pending" % n)
            ready = _ready(name, n)
            vm = ready["vm"]
            final = ({"kind": "Leaked", "targets": [{"location": LOCATION, "instance_ids": [vm["instance_id"]]}],
                      "reason": "instances still present after 600 s"} if n % 500 == 0 else ready)
            journal.transition(name, owner, version, final, final["kind"], True, "Booting", "SSH login OK")
            journal.release(name, owner)
            if final["kind"] == "Leaked":
                projection.upsert_vm(journal, name, cloud="aws", region="us-east-1", zone=LOCATION["zone"],
                                     instance_id=vm["instance_id"], status="leaked", stage="Leaked",
                                     detail={"targets": final["targets"]})
                continue
            projection.upsert_vm(journal, name, cloud="aws", region="us-east-1", zone=LOCATION["zone"],
                                 instance_id=vm["instance_id"], instance_type=vm["instance_type"], gpu=vm["gpu"],
                                 gpu_count=vm["gpu_count"], ssh_host=vm["ssh"]["host"], ssh_port=22,
                                 ssh_user="ubuntu", host_key_alias=vm["host_key_alias"], status="running",
                                 stage="Ready", detail={"python_interpreter": vm["python_interpreter"],
                                                        "host_key": HOST_KEY,
                                                        "ssh_key_fingerprint": vm["ssh_key_fingerprint"]})
    finally:
        journal.close()


def _cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def _run(home: pathlib.Path, inventory: pathlib.Path) -> tuple:
    """(wall seconds, CPU seconds, --list output) of one ansible-inventory --list."""
    env = dict(os.environ, GPUPROV_HOME=str(home), GPUPROV_JOURNAL=str(home / "journal.sqlite"),
               ANSIBLE_COLLECTIONS_PATH=str(COLLECTIONS))
    for variable in ("GPUPROV_SSH_KEY_FILE", "ANSIBLE_CONFIG", "ANSIBLE_INVENTORY", "XDG_STATE_HOME"):
        env.pop(variable, None)
    start, cpu = time.perf_counter(), _cpu()
    proc = subprocess.run([str(BIN / "ansible-inventory"), "-i", str(inventory), "--list"], env=env,
                          check=True, cwd=str(home), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start, _cpu() - cpu, proc.stdout


def _trusted(value):
    """--list output with Ansible's __ansible_unsafe wrappers taken off (what a script prints)."""
    if isinstance(value, dict):
        if set(value) == {"__ansible_unsafe"}:
            return value["__ansible_unsafe"]
        return {key: _trusted(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_trusted(item) for item in value]
    return value


def _connection_only(listing: dict) -> dict:
    """The --list output with each host's variables cut to its connection variables (the ansible_* ones)."""
    meta = dict(listing["_meta"], hostvars={host: {k: v for k, v in hostvars.items() if k.startswith("ansible_")}
                                            for host, hostvars in listing["_meta"]["hostvars"].items()})
    return dict(listing, _meta=meta)


def _script(home: pathlib.Path, name: str, listing: dict) -> pathlib.Path:
    """An inventory script that prints ``listing`` (ansible-inventory calls it with --list or --host)."""
    (home / ("%s.json" % name)).write_text(json.dumps(listing))
    script = home / ("%s.sh" % name)
    script.write_text("#!/bin/sh\n# ansible-inventory calls it with --list or --host\ncat '%s'\n" % (home / ("%s.json" % name)))
    script.chmod(0o700)
    return script


def main(rounds: int, count: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        home = pathlib.Path(tmp)
        start = time.perf_counter()
        build_journal(home / "journal.sqlite", count)
        print("journal of %d VMs built in %.1f s (%.1f MB)"
              % (count, time.perf_counter() - start, (home / "journal.sqlite").stat().st_size / 1e6))
        static = home / "hosts.ini"
        static.write_text("web1 ansible_host=127.0.0.1\n")
        empty = home / "empty.gpuprov.yml"
        empty.write_text("plugin: gpuprov.cloud.journal\njournal: %s\n" % (home / "none" / "journal.sqlite"))
        plain = home / "big.gpuprov.yml"
        plain.write_text("plugin: gpuprov.cloud.journal\n")
        cached = home / "cached.gpuprov.yml"
        cached.write_text("plugin: gpuprov.cloud.journal\ncache: true\ncache_plugin: ansible.builtin.jsonfile\n"
                          "cache_connection: %s\ncache_timeout: 86400\n" % (home / "cache"))
        _run(home, cached)   # fills the cache: the rounds measure a hit
        listing = _trusted(json.loads(_run(home, plain)[2]))
        hosts = len(listing["_meta"]["hostvars"])
        reference = "script, the same %d hosts, connection vars only" % hosts
        rows = (("static one-host INI (floor)", static),
                ("gpuprov.cloud.journal, empty journal", empty),
                ("script, the same %d hosts and vars (Ansible's own)" % hosts, _script(home, "hosts", listing)),
                (reference, _script(home, "connection", _connection_only(listing))),
                ("gpuprov.cloud.journal, %d VMs" % count, plain),
                ("gpuprov.cloud.journal, %d VMs, cache hit" % count, cached))
        walls = {label: [] for label, _path in rows}
        cpus = {label: [] for label, _path in rows}
        sizes = {}
        for _round in range(rounds):
            for label, path in rows:
                wall, cpu, output = _run(home, path)
                walls[label].append(wall)
                cpus[label].append(cpu)
                sizes[label] = len(output)
        base = statistics.median(walls[rows[0][0]])
        print("ansible-inventory --list, median of %d rounds:" % rounds)
        for label, _path in rows:
            wall = statistics.median(walls[label])
            print("  %-56s %6.2f s wall (%6.2f s above the floor, x%5.1f), %6.2f s CPU; output %5.2f MB"
                  % (label + ":", wall, wall - base, wall / base, statistics.median(cpus[label]), sizes[label] / 1e6))
        goal = rows[4][0]
        print("goal (issue 28): %s <= 1.5x %s: x%.2f wall, x%.2f CPU"
              % (goal, reference, statistics.median(walls[goal]) / statistics.median(walls[reference]),
                 statistics.median(cpus[goal]) / statistics.median(cpus[reference])))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3, int(sys.argv[2]) if len(sys.argv) > 2 else 10000)
