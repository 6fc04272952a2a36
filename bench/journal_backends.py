"""Benchmark: one journalled transition on a PostgreSQL journal vs on an SQLite journal.

A transition is what every launch step commits: a version- and lease-guarded UPDATE of the
machine row plus its event, in one transaction (SQLite: WAL, synchronous=FULL; PostgreSQL: a
throw-away local server started as in the tests, over TCP on loopback, fsync on). Rounds are
interleaved so both see the same machine load; the medians and their ratio are printed, never
asserted.

Run: make dev && .venv/bin/python bench/journal_backends.py [rounds] [transitions per round]
"""

from __future__ import annotations

import os
import pathlib
import statistics
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "build" / "collections"))

from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journals import open_journal  # noqa: E402
from ansible_collections.gpuprov.cloud.tests import pg_server  # noqa: E402


def transitions(journal, key: str, count: int) -> float:
    """Median seconds of one transition, over ``count`` of them on a fresh key."""
    version = journal.begin(key, "bench", {"n": 0}, "S0", False, "bench", 600.0, None)
    times = []
    for n in range(count):
        started = time.perf_counter()
        version = journal.transition(key, "bench", version, {"n": n + 1}, "S%d" % (n + 1), False, "S%d" % n)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 50
    reason = pg_server.unavailable()
    if reason:
        sys.exit("bench: cannot start PostgreSQL: %s" % reason)
    server = pg_server.PgServer(fsync=True)
    folder = tempfile.mkdtemp(prefix="gpuprov-bench-")
    try:
        os.environ["PGPASSWORD"] = pg_server.PASSWORD
        pg = open_journal(server.new_database())
        lite = open_journal(os.path.join(folder, "journal.sqlite"))
        pg_times, lite_times = [], []
        for index in range(rounds):
            lite_times.append(transitions(lite, "r%d" % index, count))
            pg_times.append(transitions(pg, "r%d" % index, count))
        pg.close()
        lite.close()
    finally:
        server.destroy()
    pg_median, lite_median = statistics.median(pg_times), statistics.median(lite_times)
    print("journalled transition, median of %d interleaved rounds x %d:" % (rounds, count))
    print("  SQLite      %8.3f ms" % (lite_median * 1000))
    print("  PostgreSQL  %8.3f ms" % (pg_median * 1000))
    print("  ratio PostgreSQL / SQLite: %.2f" % (pg_median / lite_median))


if __name__ == "__main__":
    main()
