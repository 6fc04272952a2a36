"""The soak: seeded rounds of random concurrent operations on a few names, from three controllers (two on
one shared journal, one on its own), with kills and Ctrl-Cs at random moments and crash points, the
oracle checked after every round and at quiescence (oracle.py).

Reproducible by its seed: the seed alone fixes every round's schedule (operations, names, controllers,
start offsets, nemeses); what interleaves within a round depends on timing, as in any concurrency test,
so a finding is confirmed by re-running its seed (and reading the history it prints).

Bounded by rounds and by a time budget: the budget only ends the soak early (no new round starts once it
is spent), it never fails it. Then the settle: a provision and a down of every name, a final sweep, with
the oracle's quiescence checks; then everything the soak made is removed.

    python tests/soak/run.py --minutes 30 --seed 1234        (make soak SOAK_MINUTES=30 SOAK_SEED=1234)
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import os
import pathlib
import random
import shutil
import sys
import tempfile
import threading
import time
import uuid
from typing import Callable, Dict, List, Optional

from ansible_collections.gpuprov.cloud.tests.soak import oracle, operations
from ansible_collections.gpuprov.cloud.tests.soak.history import (
    DOWN, HEALTH, INSTANCE_ABSENT, INSTANCE_PRESENT, PLANT, PROVISION, RECREATE, RECREATE_BAD, STATUS, SWEEP_DELETE,
    SWEEP_DRY, History, Op,
)
from ansible_collections.gpuprov.cloud.tests.soak.world import OWN, SHARED, World, docker_unavailable

# How often each operation is drawn.
WEIGHTS = {PROVISION: 24, RECREATE: 7, RECREATE_BAD: 4, DOWN: 16, SWEEP_DRY: 4, SWEEP_DELETE: 10, STATUS: 4,
           HEALTH: 4, INSTANCE_PRESENT: 6, INSTANCE_ABSENT: 5}
CONTROLLERS = {"c1": 4, "c2": 3, "c3": 3}
JOURNAL_OF = {"c1": SHARED, "c2": SHARED, "c3": OWN}
# What is planned against an operation that changes something (read-only ones only get signals).
NEMESES = {None: 52, "slow": 16, "kill_point": 12, "int_point": 8, "kill_time": 6, "int_time": 6}
PLANT_CHANCE = 0.3        # per round: an orphan is planted before the round's runs start
HOME_CHANCE = 0.85        # a run on a name goes to a controller of the name's home journal (else the other's)
FOCUS_CHANCE = 0.35       # per round: the round is one of the races below, on one name, instead of a random mix
SYNC_DOWN, SYNC_ABSENT, SYNC_PROVISION = "sync-down", "sync-absent", "sync-provision"   # first, alone
HELD = ("slow", "slow", "slow", "kill_point", "int_point")
# Races on one name and journal, each a known hard case. Per run: the points it may be held at (to widen the
# window the others run in: a sweep between its check and its delete, a provision between its plan and its
# create), what is done there (HELD: mostly a hold of `pause` seconds, sometimes a kill or a Ctrl-C), and when it
# starts (`offset`, seconds into the round). Runs marked sync- go first, alone: they set the scene. A `gate` run
# (the index of another run in the race, -1: the one before it) is held at its point until that run is held at its
# own (or has ended): the order the race needs, whatever the runs' start-up times.
FOCUS = {
    # An orphan, a sweep held between its ownership check and its delete, and a provision that starts inside
    # that window and adopts the orphan (the sweep must hold the name: the provision waits or fails, or the
    # sweep skips; never a Ready VM deleted under it).
    "adopt-vs-sweep": [(SYNC_DOWN, {}), (PLANT, {}),
                       (SWEEP_DELETE, {"points": ("before delete #1", "after observe #1"), "modes": ("slow",),
                                       "pause": (2.0, 4.0)}),
                       (PROVISION, {"gate": -1, "points": ("before commit begin Reconciling #1",)})],
    # The same with gpuprov.cloud.instance adopting (or making) the instance.
    "instance-vs-sweep": [(SYNC_ABSENT, {}), (PLANT, {}),
                          (SWEEP_DELETE, {"points": ("before delete #1", "after observe #1"), "modes": ("slow",),
                                          "pause": (2.0, 4.0)}),
                          (INSTANCE_PRESENT, {"gate": -1, "points": ("before plan #1",)})],
    "down-vs-provision": [(PROVISION, {"points": operations.LAUNCH_POINTS}), (DOWN, {"offset": (0.0, 1.5)})],
    # The other journal's down and sweep of a name this journal holds: they must leave it alone.
    "other-journal-down": [(PROVISION, {}), (DOWN, {"other": True, "offset": (0.5, 2.0)}),
                           (SWEEP_DELETE, {"other": True, "points": ("before delete #1",), "offset": (0.5, 2.0)})],
    "recreates": [(RECREATE, {"points": operations.RECREATE_POINTS}), (RECREATE_BAD, {}), (PROVISION, {})],
    # A recreate no cloud can satisfy, of a Ready VM, alone: it must fail and keep the VM.
    "recreate-impossible": [(SYNC_PROVISION, {}), (RECREATE_BAD, {"points": operations.RECREATE_POINTS,
                                                                  "modes": ("slow",), "pause": (0.3, 1.5)}),
                            (STATUS, {"offset": (0.5, 1.5)})],
    # A sweep killed once it journalled its removal of an orphan, a provision that then adopts the orphan, and
    # the next sweep, which resumes the interrupted removal: it must see the name owned now and leave the VM.
    "resumed-sweep-vs-adopt": [(SYNC_DOWN, {}), (PLANT, {}),
                               (SWEEP_DELETE, {"sync": True, "points": ("after commit begin Requesting #1",
                                                                        "after observe #1"),
                                               "modes": ("kill_point", "int_point")}),
                               (PROVISION, {"sync": True}), (SWEEP_DELETE, {})],
    # c1 and c2 on one name of their shared journal (the own journal: c3 twice).
    "two-controllers": [(PROVISION, {"points": operations.LAUNCH_POINTS}), (PROVISION, {}), (DOWN, {})],
}


def _pick(rng: random.Random, weights: Dict) -> object:
    keys = list(weights)
    return rng.choices(keys, weights=[weights[k] for k in keys])[0]


@dataclasses.dataclass
class Planned:
    kind: str
    controller: str
    name: Optional[str]
    cloud: Optional[str]
    offset_s: float
    nemesis: Dict


def _focus(rng: random.Random, round_: int, names: Dict[str, str], instance_names: Dict[str, str]) -> List[Planned]:
    """One race of FOCUS on one name and journal, drawn from ``rng``. Half the adopt-vs-sweep races are on a
    fresh name (``<prefix>-f<round>``, local): one no journal has a row for, where the sweep has no row's lease
    to hold."""
    race = rng.choice(sorted(FOCUS))
    every = {**names, **instance_names}
    name = rng.choice(sorted(instance_names) if race == "instance-vs-sweep" else sorted(names))
    journal = JOURNAL_OF[_controller_for(rng, name, names, instance_names)]
    steps = FOCUS[race]
    if race == "adopt-vs-sweep" and rng.random() < 0.5:
        name = "%s-f%d" % (sorted(names)[0].rsplit("-", 1)[0], round_)
        every[name] = "local"
        journal = rng.choice([SHARED, OWN])
        steps = [s for s in steps if s[0] != SYNC_DOWN]
    mine = [c for c, j in sorted(JOURNAL_OF.items()) if j == journal]
    other = [c for c, j in sorted(JOURNAL_OF.items()) if j != journal]
    planned = []
    for index, (kind, spec) in enumerate(steps):
        controller = rng.choice(other if spec.get("other") else mine)
        if race == "two-controllers":
            controller = mine[index % len(mine)]
        nemesis: Dict = {"race": race}
        if spec.get("sync"):
            nemesis["sync"] = True
        if kind == PLANT:
            planned.append(Planned(PLANT, "c3" if journal == OWN else "c1", name, every[name], 0.0, nemesis))
            continue
        if kind in (SYNC_DOWN, SYNC_ABSENT, SYNC_PROVISION):
            real = {SYNC_DOWN: DOWN, SYNC_ABSENT: INSTANCE_ABSENT, SYNC_PROVISION: PROVISION}[kind]
            planned.append(Planned(real, controller, name, None if real == DOWN else every[name], 0.0,
                                   dict(nemesis, sync=True)))
            continue
        if spec.get("gate"):
            nemesis.update(mode="gate", point=rng.choice(spec["points"]), gate_index=len(planned) + spec["gate"])
        elif spec.get("points"):
            mode = rng.choice(spec.get("modes") or HELD)
            nemesis.update(mode=mode, point=rng.choice(spec["points"]))
            if mode == "slow":
                nemesis["pause_s"] = round(rng.uniform(*spec.get("pause", (0.5, 3.0))), 2)
        planned.append(Planned(kind, controller, None if kind in (SWEEP_DELETE, STATUS) else name,
                               every[name] if kind not in (DOWN, SWEEP_DELETE, STATUS) else None,
                               round(rng.uniform(*spec.get("offset", (0.0, 0.5))), 2), nemesis))
    return planned


def home_journal(name: str, names: Dict[str, str], instance_names: Dict[str, str]) -> str:
    """Each name has a home journal, the one most of its runs use (the other journal's runs on it meet "made by
    another controller", and must leave its VM alone): the shared journal for every other VM name in order (two
    of three: c1 and c2 work together most), the own journal for the rest; instance names and fresh names alike
    by their order among all names."""
    ordered = sorted(names) + sorted(instance_names)
    index = ordered.index(name) if name in ordered else sum(map(ord, name))
    return OWN if index % 2 else SHARED


def _controller_for(rng: random.Random, name: str, names: Dict[str, str], instance_names: Dict[str, str]) -> str:
    journal = home_journal(name, names, instance_names)
    if rng.random() >= HOME_CHANCE:
        journal = OWN if journal == SHARED else SHARED
    return rng.choice([c for c, j in sorted(JOURNAL_OF.items()) if j == journal])


def schedule(seed: str, round_: int, names: Dict[str, str], instance_names: Dict[str, str],
             concurrency: int, focus: float = FOCUS_CHANCE) -> List[Planned]:
    """Round ``round_``'s operations: a function of the seed, the round and ``focus`` (the chance that the
    round is one of the FOCUS races) alone."""
    rng = random.Random("%s/%d" % (seed, round_))
    vm_names, inst_names = sorted(names), sorted(instance_names)
    if rng.random() < focus:
        return _focus(rng, round_, names, instance_names)
    planned = []
    if rng.random() < PLANT_CHANCE:
        name = rng.choice(vm_names + inst_names)
        controller = {SHARED: "c1", OWN: "c3"}[JOURNAL_OF[_controller_for(rng, name, names, instance_names)]]
        planned.append(Planned(PLANT, controller, name, {**names, **instance_names}[name], 0.0, {}))
    for _slot in range(rng.randint(2, max(2, concurrency))):
        kind = _pick(rng, WEIGHTS)
        controller = _pick(rng, CONTROLLERS)
        name, cloud = None, None
        if kind in (INSTANCE_PRESENT, INSTANCE_ABSENT):
            name = rng.choice(inst_names)
            cloud = instance_names[name]
        elif kind in (PROVISION, RECREATE, RECREATE_BAD, DOWN):
            name = rng.choice(vm_names)
            cloud = names[name] if kind != DOWN else None
        elif kind == HEALTH and rng.random() < 0.5:
            name = rng.choice(vm_names)
        if name and kind != HEALTH:
            controller = _controller_for(rng, name, names, instance_names)
        nemesis: Dict = {}
        mode = _pick(rng, NEMESES)
        if kind in (SWEEP_DRY, STATUS, HEALTH) and mode not in (None, "kill_time", "int_time"):
            mode = None
        if mode in ("slow", "kill_point", "int_point"):
            nemesis = {"mode": mode, "point": rng.choice(operations.POINTS[kind])}
            if mode == "slow":
                nemesis["pause_s"] = round(rng.uniform(0.3, 2.5), 2)
        elif mode in ("kill_time", "int_time"):
            nemesis = {"mode": mode, "after_s": round(rng.uniform(0.4, 3.5), 2)}
        if mode in ("int_point", "int_time") and rng.random() < 0.3:
            nemesis["int_to"] = "leader"
        if kind == STATUS and rng.random() < 0.5:
            nemesis["orphans"] = True
        planned.append(Planned(kind, controller, name, cloud, round(rng.uniform(0.0, 1.5), 2), nemesis))
    return planned


@dataclasses.dataclass
class Result:
    seed: str
    history: History
    violations: List[oracle.Violation]
    rounds: int
    clouds: List[str]
    notes: List[str]
    history_file: Optional[str] = None
    focus: float = FOCUS_CHANCE

    def counts(self) -> Dict[str, int]:
        return dict(collections.Counter(o.kind for o in self.history.ops if not o.skipped))

    def summary(self) -> str:
        ops = [o for o in self.history.ops if not o.skipped]
        signals = collections.Counter(o.signal for o in ops if o.signal)
        return ("soak seed=%s: %d round(s), %d operation(s) (%s) on %s; %d killed (%s); %d violation(s)" % (
            self.seed, self.rounds, len(ops), ", ".join("%s %d" % kv for kv in sorted(self.counts().items())),
            "+".join(self.clouds), sum(signals.values()), ", ".join("%s %d" % kv for kv in sorted(signals.items()))
            or "none", len(self.violations)))

    def warnings(self) -> List[str]:
        """What is not a broken promise but worth a look: a run that hung past its limit, or one the soak itself
        failed to run."""
        out = ["%s hung: killed after its time limit (%s)" % (o.label(), o.log) for o in self.history.ops if o.timed_out]
        out += ["%s: %s" % (o.label(), line) for o in self.history.ops for line in o.lines
                if line.startswith("soak: ")]
        return out

    def report(self) -> str:
        lines = [self.summary()]
        lines += ["note: %s" % n for n in self.notes]
        lines += ["warning: %s" % w for w in self.warnings()]
        if self.violations:
            lines.append("VIOLATIONS (reproduce with the seed: python tests/soak/run.py --seed %s --rounds %d --focus %s):"
                         % (self.seed, self.rounds, self.focus))
            lines += ["  " + str(v) for v in self.violations]
            lines.append("history:")
            lines.append(self.history.render())
            if self.history_file:
                lines.append("the history as JSON (every op's key lines, its log file): %s" % self.history_file)
        return "\n".join(lines)


class Soak:
    def __init__(self, seed: Optional[str] = None, rounds: int = 10, budget_s: float = 60.0, concurrency: int = 3,
                 clouds: str = "auto", work: Optional[pathlib.Path] = None, keep: bool = False,
                 log: Callable[[str], None] = print, history_file: Optional[str] = None,
                 focus: float = FOCUS_CHANCE):
        self.seed = str(seed if seed is not None else random.SystemRandom().randrange(10 ** 9))
        self.rounds = rounds
        self.budget_s = budget_s
        self.concurrency = concurrency
        self.clouds = clouds
        self.own_work = work is None
        self.work = pathlib.Path(work or tempfile.mkdtemp(prefix="gpuprov-soak-"))
        self.keep = keep
        self.log = log
        self.history_file = history_file
        self.focus = focus
        self.history = History(seed=self.seed)
        self.violations: List[oracle.Violation] = []
        self._seen = set()
        self.identities: Dict[str, Optional[str]] = {}
        self.notes: List[str] = []

    # -- setup ---------------------------------------------------------------------------------------
    def _names(self):
        # Unique per soak (not per seed): the docker engine is shared with whatever else runs on it.
        prefix = "sk%s" % uuid.uuid4().hex[:6]
        clouds = ["local"]
        if self.clouds in ("auto", "docker", "local,docker"):
            why = docker_unavailable()
            if why is None:
                clouds.append("docker")
            elif self.clouds != "auto":
                raise RuntimeError("the docker cloud was asked for, but %s" % why)
            else:
                self.notes.append("docker left out: %s" % why)
        names = {"%s-a" % prefix: "local", "%s-b" % prefix: "local",
                 "%s-c" % prefix: "docker" if "docker" in clouds else "local"}
        return names, {"%s-i" % prefix: "local"}, clouds

    # -- one round -----------------------------------------------------------------------------------
    def _run_ops(self, world: World, round_: int, planned: List[Planned], phase: str = "soak") -> List[Op]:
        """Run a round: plants and "sync" runs first, one at a time, in order; then the others together, each
        started at its offset."""
        ops = [self.history.new_op(round=round_, kind=p.kind, controller=p.controller, journal=JOURNAL_OF[p.controller],
                                   name=p.name, cloud=p.cloud, phase=phase, offset_s=p.offset_s, nemesis=dict(p.nemesis))
               for p in planned]
        for op in ops:
            if "gate_index" in op.nemesis:
                op.nemesis["gate_op"] = ops[op.nemesis.pop("gate_index")].id
        together = []
        for op in ops:
            if op.kind == PLANT:
                operations.plant(world, op)
            elif op.nemesis.get("sync"):
                self._run_one(world, op)
            else:
                together.append(op)
        began = time.monotonic()

        def go(op: Op) -> None:
            delay = op.offset_s - (time.monotonic() - began)
            if delay > 0:
                time.sleep(delay)
            self._run_one(world, op)

        threads = [threading.Thread(target=go, args=(op,), daemon=True) for op in together]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return ops

    @staticmethod
    def _run_one(world: World, op: Op) -> None:
        try:
            operations.run(world, op)
        except Exception as exc:  # the soak's own failure: recorded, the soak goes on
            op.start = op.start or time.time()
            op.end = op.end or time.time()
            op.lines.append("soak: running it failed: %r" % (exc,))

    def _check(self, world: World, round_: int, phase: str, extra=None) -> List[oracle.Violation]:
        snap = world.snapshot(round_, phase)
        for i in snap.instances:
            self.identities.setdefault(i.id, i.journal_id)
        for controller, name, _instance in oracle.reach_targets(self.history, snap):
            snap.reach["%s/%s" % (controller, name)] = world.ssh(controller, name)
        found = oracle.check_round(self.history, snap, self.identities)
        if extra is not None:
            found += extra(snap)
        new = []
        for v in found:
            if v.key() not in self._seen:
                self._seen.add(v.key())
                self.violations.append(v)
                new.append(v)
        for v in new:
            self.log("  VIOLATION %s" % v)
        return new

    # -- the settle ----------------------------------------------------------------------------------
    def _batches(self, world: World, round_: int, planned: List[Planned]) -> List[Op]:
        """Run ``planned`` at most ``concurrency`` at once (the settle: no nemesis, no offsets)."""
        ops = []
        for start in range(0, len(planned), self.concurrency):
            ops += self._run_ops(world, round_, planned[start:start + self.concurrency], phase="settle")
        return ops

    def _settle(self, world: World, round_: int) -> None:
        """A provision of every name on each journal (on the cloud its VM is on), a down of every name and an
        instance teardown of every instance name, then a sweep of each journal; the oracle after each."""
        names = sorted(world.names)
        inst = sorted(world.instance_names)
        by_journal = {SHARED: "c1", OWN: "c3"}
        snap = world.snapshot(round_, "settle")
        up = []
        for journal, controller in sorted(by_journal.items()):
            for name in names:
                if self._touched(snap, journal, name):
                    up.append(Planned(PROVISION, controller, name, self._row_cloud(world, journal, name) or
                                      world.names[name], 0.0, {}))
        self._batches(world, round_, up)
        self._check(world, round_, "settled-up", lambda s: oracle.check_settled_up(self.history, s, names))
        snap = world.snapshot(round_, "settle")
        down = []
        for journal, controller in sorted(by_journal.items()):
            down += [Planned(DOWN, controller, name, None, 0.0, {}) for name in names
                     if self._touched(snap, journal, name)]
            down += [Planned(INSTANCE_ABSENT, controller, name, world.instance_names[name], 0.0, {}) for name in inst
                     if self._touched(snap, journal, name)]
        downs = self._batches(world, round_, down)
        self._check(world, round_, "settled-down",
                    lambda s: oracle.check_settled_down(self.history, s, downs, names, inst))
        self._batches(world, round_, [Planned(SWEEP_DELETE, controller, None, None, 0.0, {})
                                      for _journal, controller in sorted(by_journal.items())])
        self._check(world, round_, "swept", oracle.check_swept)

    @staticmethod
    def _touched(snap: oracle.Snapshot, journal: str, name: str) -> bool:
        """Whether the journal has a row of the name (its own or an instance task's) or an instance of it is
        on a cloud: what the settle re-runs (a name a journal never touched has nothing to settle)."""
        facts = snap.journals.get(journal)
        if facts is None:
            return False
        return any(k == name or k.endswith(":" + name) for k in facts.rows if not k.startswith("sweep:")) \
            or bool(snap.of(journal, name))

    @staticmethod
    def _row_cloud(world: World, journal: str, name: str) -> Optional[str]:
        j = world.open_journal(journal)
        if j is None:
            return None
        try:
            row = j.load(name)
            vm = (row.state or {}).get("vm") if row else None
            return ((vm or {}).get("location") or {}).get("cloud")
        finally:
            j.close()

    # -- the whole soak ------------------------------------------------------------------------------
    def run(self) -> Result:
        names, instance_names, clouds = self._names()
        self.history.started = time.time()
        world = World(self.work / "world", names, instance_names, log=self.log)
        self.notes += world.notes
        self.history.notes = self.notes
        self.log("soak seed=%s: names %s (instance task: %s), clouds %s, journals: shared (%s; c1, c2), own "
                 "(SQLite; c3); %s round(s) at most, %.0f s budget, up to %d at once; work dir %s" % (
                     self.seed, ", ".join("%s on %s" % kv for kv in sorted(names.items())),
                     ", ".join(instance_names), "+".join(clouds), "PostgreSQL" if world.pg else "SQLite",
                     self.rounds or "no limit on", self.budget_s, self.concurrency, self.work))
        started = time.monotonic()
        done = 0
        forced: List[str] = []
        try:
            while (not self.rounds or done < self.rounds) and time.monotonic() - started < self.budget_s:
                done += 1
                planned = schedule(self.seed, done, names, instance_names, self.concurrency, self.focus)
                for p in planned:    # a race's fresh name: the world watches it from now on (and settles it)
                    if p.name and p.name not in world.names and p.name not in world.instance_names:
                        world.names[p.name] = p.cloud or "local"
                ops = self._run_ops(world, done, planned)
                self.log("round %d (%.0f s): %s" % (done, time.monotonic() - started, "; ".join(
                    "%s %s" % (o.label(), o.outcome()) for o in ops)))
                self._check(world, done, "soak")
            self.log("settling: a provision and a down of every name on each journal, then a sweep")
            self._settle(world, done)
        finally:
            forced = world.close()
            if forced:
                self.notes.append("removed by force at the end: %s" % ", ".join(forced))
            self._save()
            if not self.keep and self.own_work and not self.violations:
                shutil.rmtree(self.work, ignore_errors=True)
        result = Result(self.seed, self.history, self.violations, done, clouds, self.notes, self.history_file,
                        self.focus)
        return result

    def _save(self) -> None:
        path = self.history_file or str(self.work / "history.json")
        try:
            pathlib.Path(path).write_text(self.history.to_json())
            self.history_file = path
        except OSError:
            self.history_file = None


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description="gpuprov.cloud's concurrency soak with an oracle (tests/soak)")
    parser.add_argument("--seed", default=os.environ.get("SOAK_SEED") or None,
                        help="the schedule's seed (default: a random one, printed)")
    parser.add_argument("--minutes", type=float, default=float(os.environ.get("SOAK_MINUTES") or 5),
                        help="time budget: no new round starts after it (default 5)")
    parser.add_argument("--rounds", type=int, default=int(os.environ.get("SOAK_ROUNDS") or 0),
                        help="at most this many rounds (default 0: as many as the budget allows)")
    parser.add_argument("--concurrency", type=int, default=int(os.environ.get("SOAK_CONCURRENCY") or 3),
                        help="at most this many operations at once (default 3)")
    parser.add_argument("--clouds", default=os.environ.get("SOAK_CLOUDS") or "auto",
                        choices=["auto", "local", "local,docker", "docker"],
                        help="auto: local, and docker where the engine answers and the image exists")
    parser.add_argument("--focus", type=float, default=float(os.environ.get("SOAK_FOCUS") or FOCUS_CHANCE),
                        help="the chance that a round is one of the known races on one name (default %s); "
                             "the seed reproduces a schedule for one value of it" % FOCUS_CHANCE)
    parser.add_argument("--work", default=None, help="the work dir (default: a temporary one)")
    parser.add_argument("--keep", action="store_true", help="keep the work dir (logs, history.json)")
    parser.add_argument("--history", default=None, help="write the history as JSON here")
    args = parser.parse_args(argv)
    soak = Soak(seed=args.seed, rounds=args.rounds, budget_s=args.minutes * 60, concurrency=args.concurrency,
                clouds=args.clouds, work=pathlib.Path(args.work) if args.work else None, keep=args.keep,
                log=lambda line: print(line, flush=True), history_file=args.history, focus=args.focus)
    result = soak.run()
    print(result.report(), flush=True)
    return 1 if result.violations else 0


if __name__ == "__main__":
    sys.exit(main())
