"""Benchmark: what the journal and the launch machine cost on top of Ansible itself.

Measured in one run, on one machine, printed as ratios (never asserted):
  1. an idempotent `gpuprov.cloud.vm` re-run on an up `local` VM (reconcile, observe,
     real SSH login, journal writes)  vs  an `ansible-playbook` run of one debug task;
  2. a first provision of a `local` VM  vs  the same debug baseline, and its time from
     Connecting to Ready as the journal recorded it;
  3. one journalled transition (SQLite WAL, synchronous=FULL, version + lease guard)
     vs  one plain SQLite INSERT+COMMIT in the same settings.

Run: make dev && .venv/bin/python bench/reprovision.py [rounds]
(rounds are interleaved: baseline, first provision, re-run, down, then the next round)
"""

from __future__ import annotations

import os
import pathlib
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "build" / "collections"))

from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journal import Journal  # noqa: E402

BIN = pathlib.Path(sys.executable).parent


def _play(home: pathlib.Path, text: str) -> pathlib.Path:
    path = home / ("play-%d.yml" % abs(hash(text)))
    path.write_text(text)
    return path


def _run(home: pathlib.Path, playbook: pathlib.Path) -> float:
    env = dict(os.environ, GPUPROV_HOME=str(home), ANSIBLE_COLLECTIONS_PATH=str(REPO / "build" / "collections"))
    start = time.perf_counter()
    subprocess.run([str(BIN / "ansible-playbook"), str(playbook)], env=env, check=True, cwd=str(home),
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def _connecting_to_ready(home: pathlib.Path, name: str) -> float:
    """Seconds the journal saw between the launch entering Connecting and Ready."""
    journal = Journal(str(home / "journal.sqlite"))
    try:
        events = [e for e in journal.events(name) if e["event"] == "transition"]
    finally:
        journal.close()
    entered = [e["at"] for e in events if (e["to"] or "").startswith("Connecting")]
    ready = [e["at"] for e in events if e["to"] == "Ready"]
    return ready[-1] - entered[-1]


def bench_playbooks(rounds: int) -> None:
    """Each round runs the baseline, a first provision and its re-run back to back (interleaved)."""
    with tempfile.TemporaryDirectory() as tmp:
        home = pathlib.Path(tmp)
        debug = _play(home, "- hosts: localhost\n  gather_facts: false\n  tasks:\n"
                            "    - ansible.builtin.debug: {msg: hi}\n")
        baseline, firsts, reruns, connecting = [], [], [], []
        for index in range(rounds):
            name = "bench%d" % index
            up = _play(home, "- hosts: localhost\n  gather_facts: false\n  tasks:\n"
                             "    - gpuprov.cloud.vm: {name: %s}\n" % name)
            down = _play(home, "- hosts: localhost\n  gather_facts: false\n  tasks:\n"
                               "    - gpuprov.cloud.vm: {name: %s, state: absent}\n" % name)
            baseline.append(_run(home, debug))
            firsts.append(_run(home, up))
            connecting.append(_connecting_to_ready(home, name))
            reruns.append(_run(home, up))
            _run(home, down)
        base = statistics.median(baseline)
        print("ansible-playbook, one debug task:        median %.3f s" % base)
        print("gpuprov.cloud.vm, first provision:       median %.3f s  ratio %.2fx" % (
            statistics.median(firsts), statistics.median(firsts) / base))
        print("gpuprov.cloud.vm, idempotent re-run:     median %.3f s  ratio %.2fx" % (
            statistics.median(reruns), statistics.median(reruns) / base))
        print("first local launch, Connecting -> Ready: median %.3f s  (max %.3f s)" % (
            statistics.median(connecting), max(connecting)))


def bench_journal(count: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        journal = Journal(os.path.join(tmp, "journal.sqlite"))
        owner = "bench:1:x"
        version = journal.begin("k", "bench", {"kind": "S0"}, "S0", False, owner, 60.0, None)
        start = time.perf_counter()
        for index in range(count):
            version = journal.transition("k", owner, version, {"kind": "S%d" % (index + 1)}, "S", False, "S")
        guarded = (time.perf_counter() - start) / count
        journal.close()

        db = sqlite3.connect(os.path.join(tmp, "plain.sqlite"), isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, state TEXT)")
        start = time.perf_counter()
        for index in range(count):
            db.execute("BEGIN IMMEDIATE")
            db.execute("INSERT INTO t (state) VALUES (?)", ('{"kind": "S%d"}' % index,))
            db.execute("COMMIT")
        plain = (time.perf_counter() - start) / count
        db.close()
    print("journal transition (guarded + event):    %.3f ms" % (guarded * 1000))
    print("plain SQLite insert + commit:            %.3f ms  ratio %.2fx" % (plain * 1000, guarded / plain))


if __name__ == "__main__":
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    bench_journal(500)
    bench_playbooks(rounds)
