"""Benchmark: the launch machine's own cost on a simulated cloud with fixed latencies.

The REAL executor, launch machine and SQLite journal (WAL, synchronous=FULL) run against
the scripted in-memory cloud of the tests (tests/fakes/scripted_provider.py). Printed,
never asserted; rounds of every row are interleaved so all see the same machine load.

  failover   wall seconds per refused offer: a search of N offers (one region each) whose
             first N-1 refuse at prepare (Unavailable, blocking the offer), minus a one-offer
             launch, divided by N-1. Real time: journal writes, JSON, the machine's work. Beside
             it, one plain SQLite INSERT + COMMIT in the same settings (this disk's fsync cost,
             the floor of any durable write), measured in the same rounds.
  boot       simulated: the instance is Running B s (fake clock; B from 30.5 to 47.7 s) after
             create and SSH answers 1 s after that; the launch's fake-clock wall from create to
             Ready over that inherent B + 1 s, the worst of the boots. What it measures is the
             poll schedule alone (the cloud's default 10 s interval, or the executor's schedule),
             not the host's speed.

Run: make dev && .venv/bin/python bench/launch_paths.py [rounds] [offer counts, comma-separated]
"""

from __future__ import annotations

import pathlib
import sqlite3
import statistics
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "build" / "collections"))

# pylint: disable=wrong-import-position
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (  # noqa: E402
    BlockScope, ErrorKind, Observed, ProviderError, SshEndpoint, Status,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm.ssh import SshNotReady  # noqa: E402
from ansible_collections.gpuprov.cloud.tests.fakes.scripted_provider import (  # noqa: E402
    ScriptedProvider, World, offer as sim_offer,
)

# The simulated cloud's boots (create -> Running with an endpoint): 30 s and more, not aligned
# with any poll interval; sshd answers SSH_AFTER_S after Running.
BOOTS_S = (30.5, 33.3, 36.1, 38.9, 47.7)
SSH_AFTER_S = 1.0


def failover_wall(count: int) -> float:
    """Real seconds of one launch through ``count`` offers, all but the last refused."""
    last = "r%04d" % (count - 1)
    provider = ScriptedProvider("sim", [sim_offer("sim", "r%04d" % index) for index in range(count)])
    provider.fail("prepare", ProviderError(ErrorKind.UNAVAILABLE, "no capacity", BlockScope.OFFER), times=None,
                  where=lambda subject: subject.region != last)
    with tempfile.TemporaryDirectory() as tmp:
        world = World(pathlib.Path(tmp), [provider])
        started = time.perf_counter()
        out = world.launch()
        wall = time.perf_counter() - started
        world.journal.close()
    assert out.state["kind"] == "Ready", out.state.get("reason")
    return wall


def plain_commit() -> float:
    """Median real seconds of one INSERT + COMMIT in WAL mode with synchronous=FULL."""
    with tempfile.TemporaryDirectory() as tmp:
        db = sqlite3.connect(str(pathlib.Path(tmp) / "plain.sqlite"), isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, state TEXT)")
        times = []
        for index in range(50):
            started = time.perf_counter()
            db.execute("BEGIN IMMEDIATE")
            db.execute("INSERT INTO t (state) VALUES (?)", ('{"kind": "S%d"}' % index,))
            db.execute("COMMIT")
            times.append(time.perf_counter() - started)
        db.close()
    return statistics.median(times)


class TimedBootCloud(ScriptedProvider):
    """Instances are Pending until ``boot_s`` of the fake clock after their create."""

    def __init__(self, clock, boot_s: float):
        super().__init__("sim", [sim_offer("sim", "r1")])
        self.clock = clock
        self.boot_s = boot_s
        self.created_at = {}

    def create(self, offer, prepared, spec):
        instance_id = super().create(offer, prepared, spec)
        self.created_at[instance_id] = self.clock()
        return instance_id

    def observe(self, location, vm_name):
        found = []
        for seen in super().observe(location, vm_name):
            if self.clock() - self.created_at.get(seen.instance_id, -1e9) < self.boot_s:
                seen = Observed(seen.instance_id, Status.PENDING, None, None, seen.location,
                                journal_id=seen.journal_id)
            found.append(seen)
        return found


def boot_ratio(boot_s: float) -> float:
    """Fake-clock wall from create to Ready over the inherent ``boot_s`` + SSH_AFTER_S."""
    with tempfile.TemporaryDirectory() as tmp:
        world = World(pathlib.Path(tmp), [])
        cloud = TimedBootCloud(world.clock, boot_s)
        cloud.journal_id = world.journal.journal_id
        world.providers = {"sim": cloud}
        world.ctx._providers["sim"] = cloud   # pylint: disable=protected-access
        world.ctx._fixed.add("sim")           # pylint: disable=protected-access
        world.settings.clouds[:] = ["sim"]

        def ssh(endpoint: SshEndpoint, alias: str) -> str:
            up = cloud.created_at[next(iter(cloud.created_at))] + boot_s + SSH_AFTER_S
            if world.clock() < up:
                raise SshNotReady("connection refused")
            return "SHA256:fp"
        world.ctx.ssh_check = ssh
        out = world.launch()
        ready_at = world.clock()
        world.journal.close()
    assert out.state["kind"] == "Ready", out.state.get("reason")
    created = cloud.created_at[next(iter(cloud.created_at))]
    return (ready_at - created) / (boot_s + SSH_AFTER_S)


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    counts = [int(n) for n in (sys.argv[2] if len(sys.argv) > 2 else "50,200,1000").split(",")]
    walls = {n: [] for n in [1] + counts}
    plain = []
    failover_wall(2)   # warm-up, not counted: first-use costs (imports, caches) would land on one row
    for _round in range(rounds):
        for n in walls:
            walls[n].append(failover_wall(n))
            plain.append(plain_commit())
    boots = [boot_ratio(boot_s) for boot_s in BOOTS_S]   # deterministic: a fake clock
    base = statistics.median(walls[1])
    commit = statistics.median(plain)
    print("plain SQLite insert + commit (WAL, synchronous=FULL): %.2f ms" % (commit * 1000))
    for n in counts:
        per = (statistics.median(walls[n]) - base) / (n - 1)
        print("failover, per refused offer, %4d offers: %7.2f ms = %.2f plain commits   (launch %.2f s, %d rounds)"
              % (n, per * 1000, per / commit, statistics.median(walls[n]), rounds))
    print("launch wall / inherent latency, boots of %.0f-%.0f s + %.0f s to sshd (simulated clock): worst %.3f, "
          "median %.3f" % (min(BOOTS_S), max(BOOTS_S), SSH_AFTER_S, max(boots), statistics.median(boots)))


if __name__ == "__main__":
    main()
