"""``make mutation``: each mutant of the core, one at a time, against the unit tests that run its line.

Works on private copies of the working tree (never on the checkout others test against): one copy runs the
coverage pass (which test ran which line; cached by the content of the targets and the tests), and each of ``-j``
workers has its own copy in which it writes one mutant at a time, runs the selected tests with ``-x`` under a time
limit, and puts the file back. Prints a table per file and every survivor, and writes build/mutation/report.json.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import json
import os
import pathlib
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Dict, List, Optional, Tuple

from ansible_collections.gpuprov.cloud.tests.mutation.operators import Mutant, mutants_of, short

ROOT = pathlib.Path(__file__).resolve().parents[2]
DEFAULT_TARGETS = ["plugins/module_utils/machine/executor.py", "plugins/module_utils/vm/launch.py",
                   "plugins/module_utils/vm/teardown.py", "plugins/module_utils/providers/base.py",
                   "plugins/module_utils/machine/journal.py"]
DEFAULT_TESTS = ["tests/unit"]
REPORT = ROOT / "build" / "mutation" / "report.json"
EQUIVALENT = ROOT / "tests" / "mutation" / "equivalent.txt"
COLLECTION = pathlib.Path("ansible_collections", "gpuprov", "cloud")
PLUGIN = "ansible_collections.gpuprov.cloud.tests.mutation.plugin"
# What pytest-timeout prints when a test ran past its limit (signal method; thread method).
TIMEOUT = re.compile(r"Timeout \(>|\+ Timeout \+")
# pytest's exit codes: 1 tests failed, 2 interrupted (a collection error: the mutant broke an import), 3 an
# internal error (a hook or fixture the mutant broke); 4 and 5 (usage, no tests) are the runner's own errors.
KILLED_CODES = (1, 2, 3)
# pytest exits 4 when a conftest.py cannot be imported or a test module named by its id cannot be collected; the
# baseline imported and collected them, so the mutant broke an import (a class that no longer builds, a name gone):
# the tests fail.
IMPORT_BROKEN = re.compile(r"ImportError while loading conftest|found no collectors for ")
COVERAGE_BATCH = 20
RUNNING: set = set()   # the pytest process groups now running, stopped with the runner
DETECTED = ("killed", "timed out")
SURVIVED = ("survived", "no test")


# -- the private copies --------------------------------------------------------------------------
def tracked_files() -> List[str]:
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                         check=True, capture_output=True).stdout.decode()
    return sorted({p for p in out.split("\0") if p})


def snapshot(into: pathlib.Path) -> pathlib.Path:
    """The working tree as it is now (tracked and untracked, not ignored), at into/ansible_collections/gpuprov/cloud."""
    dest = into / COLLECTION
    for rel in tracked_files():
        src = ROOT / rel
        if not os.path.lexists(src) or src.is_dir():
            continue
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest / rel, follow_symlinks=False)
    # Some tests list the checkout's files with git (ls-files -co): an empty repository answers that.
    subprocess.run(["git", "init", "-q", str(dest)], check=True)
    return dest


def environment(copy_root: pathlib.Path) -> Dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(copy_root)
    env["ANSIBLE_COLLECTIONS_PATH"] = str(copy_root)
    return env


def drop_bytecode(path: pathlib.Path):
    # A mutant can have the same size and mtime second as the original: never let Python reuse either's .pyc.
    for pyc in (path.parent / "__pycache__").glob(path.stem + ".*.pyc"):
        pyc.unlink(missing_ok=True)


def run_limited(cmd: List[str], cwd: pathlib.Path, env: Dict[str, str], limit: Optional[float], log: pathlib.Path):
    """(exit code or None on timeout, seconds)."""
    started = time.monotonic()
    if STOPPING.is_set():
        raise Stopped()
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        RUNNING.add(proc.pid)
        try:
            code = proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            code = None
        finally:
            RUNNING.discard(proc.pid)
    if STOPPING.is_set():
        raise Stopped()
    return code, time.monotonic() - started


class Stopped(Exception):
    """The runner was told to stop (SIGTERM, Ctrl-C): what a test run then returns is no verdict."""


STOPPING = threading.Event()


def stop(signum, frame):
    STOPPING.set()
    for pgid in list(RUNNING):
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    raise Stopped()


# -- the coverage pass ---------------------------------------------------------------------------
def digest_files(copy: pathlib.Path, rels: List[str]) -> str:
    digest = hashlib.sha256()
    for rel in sorted(set(rels)):
        digest.update(rel.encode() + b"\0" + (copy / rel).read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def test_files(copy: pathlib.Path, tests: List[str]):
    """(test modules, each measured on its own; everything else they share: conftests, helpers, the fakes)."""
    modules, shared = [], []
    conftests = {str(parent / "conftest.py") for t in tests for parent in pathlib.Path(t).parents}
    for rel in tests + ["tests/fakes"] + sorted(conftests):
        path = copy / rel
        found = sorted(path.rglob("*.py")) if path.is_dir() else ([path] if path.exists() else [])
        for file in found:
            name = str(file.relative_to(copy))
            (modules if file.name.startswith("test_") and name.startswith(tuple(tests)) else shared).append(name)
    return sorted(set(modules)), sorted(set(shared))


def coverage_map(copy_root: pathlib.Path, targets: List[str], tests: List[str], jobs: int, use_cache: bool) -> dict:
    """{"shared", "modules": {module: hash}, "tests": {nodeid: {duration, passed}}, "lines": {target: {line: [nodeid]}}}.

    Cached per test module: a changed or new test module is measured again on its own; a change to a target or
    to what the tests share (conftests, helpers, fakes) measures them all.
    """
    copy = copy_root / COLLECTION
    modules, shared = test_files(copy, tests)
    base = digest_files(copy, targets + shared)
    hashes = {m: digest_files(copy, [m]) for m in modules}
    cache = REPORT.parent / ("coverage-%s.json" % base)
    known = json.loads(cache.read_text())["modules"] if use_cache and cache.exists() else {}
    known = {m: v for m, v in known.items() if hashes.get(m) == v["hash"]}
    stale = [m for m in modules if m not in known]
    if stale:
        print("coverage: measuring %d test module(s) on %d process(es) (once per change of them or of the targets)"
              % (len(stale), min(jobs, len(stale))), flush=True)
        cache.parent.mkdir(parents=True, exist_ok=True)
        # In batches, each saved when done: an interrupted pass resumes where it stopped.
        for start in range(0, len(stale), COVERAGE_BATCH):
            known.update(measure(copy_root, targets, stale[start:start + COVERAGE_BATCH], hashes, jobs))
            cache.write_text(json.dumps({"modules": known}))
            print("coverage: %d/%d module(s) measured" % (min(start + COVERAGE_BATCH, len(stale)), len(stale)), flush=True)
        # Another target text or conftest makes another cache: keep the last few (about 10 MB each).
        for old in sorted(cache.parent.glob("coverage-*.json"), key=lambda p: p.stat().st_mtime)[:-3]:
            old.unlink(missing_ok=True)
    else:
        print("coverage: cached (%s)" % cache.relative_to(ROOT))
    results: Dict[str, dict] = {}
    lines: Dict[str, Dict[str, set]] = {t: {} for t in targets}
    for entry in known.values():
        results.update(entry["tests"])
        for target, by_line in entry["lines"].items():
            for line, nodeids in by_line.items():
                lines[target].setdefault(line, set()).update(nodeids)
    return {"shared": digest_files(copy, shared), "modules": hashes, "tests": results,
            "lines": {t: {n: sorted(v) for n, v in b.items()} for t, b in lines.items()}}


def measure(copy_root: pathlib.Path, targets: List[str], modules: List[str], hashes: Dict[str, str], jobs: int) -> dict:
    """One pytest run over ``modules`` under coverage: {module: {"hash", "tests", "lines"}}."""
    import coverage   # only the coverage pass needs it

    copy = copy_root / COLLECTION
    out = pathlib.Path(tempfile.mkdtemp(prefix="coverage-", dir=copy_root))
    env = environment(copy_root)
    env["GPUPROV_MUTATION_COVERAGE"] = str(out)
    env["GPUPROV_MUTATION_INCLUDE"] = os.pathsep.join(str(copy / t) for t in targets)
    workers = min(jobs, len(modules))
    argsfile = out / "modules.args"
    argsfile.write_text("\n".join(modules) + "\n")
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", PLUGIN, "--basetemp",
           str(copy_root / "pytest-coverage")] + (["-n", str(workers)] if workers > 1 else []) + ["@" + str(argsfile)]
    run_limited(cmd, copy, env, None, out / "pytest.log")
    made = {m: {"hash": hashes[m], "tests": {}, "lines": {t: {} for t in targets}} for m in modules}

    def module_of(nodeid):
        return made.get(nodeid.split("::", 1)[0])

    for part in out.glob("tests.*.json"):
        for nodeid, result in json.loads(part.read_text()).items():
            entry = module_of(nodeid)
            if entry is not None:
                mine = entry["tests"].setdefault(nodeid, dict(result))
                mine["passed"] = mine["passed"] and result["passed"]
                mine["duration"] = max(mine["duration"], result["duration"])
    for part in out.glob("coverage.*"):
        data = coverage.CoverageData(basename=str(part))
        data.read()
        for target in targets:
            for line, contexts in (data.contexts_by_lineno(str(copy / target)) or {}).items():
                for nodeid in contexts:
                    entry = module_of(nodeid) if nodeid else None
                    if entry is not None:
                        entry["lines"][target].setdefault(str(line), set()).add(nodeid)
    for entry in made.values():
        entry["lines"] = {t: {n: sorted(v) for n, v in b.items()} for t, b in entry["lines"].items()}
    return made


# A target's own tests where their names do not start with test_<its name>.
OWN_TESTS = {"plugins/module_utils/providers/base.py": ("test_provider_",)}


def own_test_prefixes(path: str) -> Tuple[str, ...]:
    """The name prefixes of a target's own test modules: test_launch for launch.py (test_launch_edges.py, ...)."""
    return ("test_" + pathlib.Path(path).stem,) + OWN_TESTS.get(path, ())


def select(mutant: Mutant, cover: dict) -> List[str]:
    """The passing tests that ran the mutant's lines (for import-time code: the lines that use what it sets, else
    all of the file's), in the order to run them."""
    by_line = cover["lines"].get(mutant.path, {})
    chosen = {t for line in (mutant.uses or mutant.lines) for t in by_line.get(str(line), [])}
    homes = own_test_prefixes(mutant.path)
    if not mutant.in_function:
        # Import-time code (a class's fields and defaults): its effect shows wherever the names are read, which
        # the lines that mention them only approximate (and a test that only reads a class attribute runs no line
        # of the file); the file's own tests always run too.
        own = {t for t in cover["tests"] if pathlib.Path(t.split("::", 1)[0]).stem.startswith(homes)}
        chosen |= own if chosen else own | {t for tests in by_line.values() for t in tests}
    results = cover["tests"]
    chosen = {t for t in chosen if results.get(t, {}).get("passed") and not results[t].get("skipped")}
    # By module: the file's own tests first (test_launch*.py for launch.py), then the modules with the most tests
    # that ran the line; the likeliest to notice first, so that -x stops soonest (and stages() can split them).
    per_module: Dict[str, int] = {}
    for test in chosen:
        module = test.split("::", 1)[0]
        per_module[module] = per_module.get(module, 0) + 1

    def order(test):
        module = test.split("::", 1)[0]
        return (not pathlib.Path(module).stem.startswith(homes), -per_module[module], module, results[test]["duration"], test)
    return sorted(chosen, key=order)


# -- equivalent mutants --------------------------------------------------------------------------
def read_equivalent(path: pathlib.Path) -> Dict[str, str]:
    """id -> reason, from lines "<id> <reason>" (# starts a comment line)."""
    found = {}
    if path.exists():
        for raw in path.read_text().splitlines():
            line = raw.strip()
            if line and not line.startswith("#"):
                ident, _sep, reason = line.partition(" ")
                found[ident] = reason.strip()
    return found


# -- one mutant ------------------------------------------------------------------------------------
class Worker:
    def __init__(self, copy_root: pathlib.Path, args):
        self.root = copy_root
        self.copy = copy_root / COLLECTION
        self.env = environment(copy_root)
        self.args = args

    def run(self, mutant: Mutant, tests: List[str], cover: dict, startup: float) -> dict:
        target = self.copy / mutant.path
        original = target.read_text()
        mutated = mutant.apply(original)
        if not mutant.check(mutated):
            return {"status": "invalid"}
        result = {"tests": len(tests), "seconds": 0.0}
        try:
            target.write_text(mutated)
            drop_bytecode(target)
            for stage in stages(tests):
                code, seconds, log = self._pytest(stage, cover, startup)
                result["seconds"] = round(result["seconds"] + seconds, 2)
                if code != 0:
                    break
        finally:
            target.write_text(original)
            drop_bytecode(target)
        failed = re.search(r"^(?:FAILED|ERROR) (\S+)", log, re.M) if code in KILLED_CODES else None
        if failed:
            result["killed_by"] = failed.group(1)
        if code is None or (code in KILLED_CODES and TIMEOUT.search(log)):
            result["status"] = "timed out"
        elif code == 0:
            result["status"] = "survived"
        elif code in KILLED_CODES or (code == 4 and IMPORT_BROKEN.search(log)):
            result["status"] = "killed"
        else:
            result["status"] = "error"
            result["log"] = log[-2000:]
        return result

    def _pytest(self, tests: List[str], cover: dict, startup: float):
        # Each test's limit is its baseline's; the whole run's, their sum's (a backstop for a hang pytest-timeout
        # cannot interrupt).
        factor, extra = self.args.time_factor, self.args.time_extra
        limits = {t: round(factor * cover["tests"][t]["duration"] + extra, 1) for t in tests}
        limit = factor * (sum(cover["tests"][t]["duration"] for t in tests) + startup) + extra
        argsfile = self.root / "selected.args"
        argsfile.write_text("\n".join(tests) + "\n")
        (self.root / "limits.json").write_text(json.dumps(limits))
        env = dict(self.env, GPUPROV_MUTATION_LIMITS=str(self.root / "limits.json"))
        cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", "-p", PLUGIN,
               "--basetemp", str(self.root / "pytest"), "@" + str(argsfile)]
        code, seconds = run_limited(cmd, self.copy, env, limit, self.root / "pytest.log")
        return code, seconds, (self.root / "pytest.log").read_text(errors="replace")


def stages(tests: List[str]) -> List[List[str]]:
    """The selected tests in two runs: first those of the one or two modules likeliest to notice (the order
    select() gives), then the rest. pytest imports every module it is given before the first test, and the fakes
    some import are slow to load; most mutants are killed by the first stage."""
    modules: List[str] = []
    for test in tests:
        module = test.split("::", 1)[0]
        if module not in modules:
            modules.append(module)
    first = set(modules[:2])
    head = [t for t in tests if t.split("::", 1)[0] in first]
    rest = [t for t in tests if t.split("::", 1)[0] not in first]
    return [head, rest] if rest else [head]


# -- the report ------------------------------------------------------------------------------------
def table(entries: List[dict], targets: List[str]) -> List[dict]:
    rows = []
    for target in targets:
        mine = [e for e in entries if e["path"] == target and e.get("status")]
        count = {s: sum(1 for e in mine if e["status"] == s) for s in
                 ("killed", "timed out", "survived", "no test", "equivalent", "invalid", "error")}
        judged = count["killed"] + count["timed out"] + count["survived"] + count["no test"]
        rows.append(dict(count, file=target, mutants=len(mine),
                         percent=round(100.0 * (count["killed"] + count["timed out"]) / judged, 1) if judged else None))
    return rows


COLUMNS = ("mutants", "killed", "timed out", "survived", "no test", "equivalent")


def print_table(rows: List[dict]):
    head = "%-26s" % "file" + "".join(" %10s" % c for c in COLUMNS) + " %9s" % "killed %"
    print(head)
    print("-" * len(head))
    for r in rows:
        percent = "-" if r["percent"] is None else "%.1f" % r["percent"]
        print("%-26s" % r["file"].replace("plugins/module_utils/", "") + "".join(" %10d" % r[c] for c in COLUMNS)
              + " %9s" % percent)
    extra = sum(r["invalid"] + r["error"] for r in rows)
    if extra:
        print("(%d mutant(s) not judged: a splice that did not parse as intended, or pytest failing to start)" % extra)


def describe(entry: dict) -> str:
    return "%s:%d  %s  [%s]  %s -> %s  (%s)" % (entry["path"], entry["line"], entry["qualname"], entry["operator"],
                                                entry["before_short"], entry["after_short"], entry["id"])


def parse_args(argv=None):
    parser = argparse.ArgumentParser(prog="make mutation", description=__doc__.splitlines()[0])
    parser.add_argument("targets", nargs="*", help="files to mutate (default: the core: %s)" % " ".join(DEFAULT_TARGETS))
    parser.add_argument("-j", "--jobs", type=int, default=2, help="parallel workers, each with its own copy (2)")
    parser.add_argument("--tests", nargs="+", default=DEFAULT_TESTS, help="test paths for the coverage pass")
    parser.add_argument("--min", type=float, default=95.0, help="fail when a file's killed %% is under this (95)")
    parser.add_argument("--survivors", action="store_true", help="run only the previous report's survivors")
    parser.add_argument("--file", help="only mutants of files whose path contains this")
    parser.add_argument("--line", type=int, help="only mutants on this line (with --file)")
    parser.add_argument("--operator", help="only mutants of this operator")
    parser.add_argument("--list", action="store_true", help="list the mutants and exit")
    parser.add_argument("--show", action="store_true", help="print the last report's table and survivors, run nothing")
    parser.add_argument("--no-cache", action="store_true", help="redo the coverage pass")
    parser.add_argument("--fresh", action="store_true",
                        help="run every mutant, even those judged by the last report on the same targets and tests")
    parser.add_argument("--time-factor", type=float, default=3.0, help="time limit: factor x the tests' baseline")
    parser.add_argument("--time-extra", type=float, default=10.0, help="... plus these seconds")
    parser.add_argument("--report", type=pathlib.Path, default=REPORT)
    parser.add_argument("--equivalent", type=pathlib.Path, default=EQUIVALENT)
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    targets = [str(pathlib.Path(t)) for t in (args.targets or DEFAULT_TARGETS)]
    started = time.monotonic()
    equivalent = read_equivalent(args.equivalent)
    previous = json.loads(args.report.read_text()) if args.report.exists() else {"mutants": []}
    if args.show:
        return summary(previous["mutants"], targets, previous.get("stale_equivalent", []), args)
    # Real paths: coverage records them so, and the lines are looked up by them.
    scratch = pathlib.Path(os.path.realpath(tempfile.mkdtemp(prefix="gpuprov-mutation-")))
    os.chmod(scratch, 0o755)   # some tests read the collection as another user (setpriv to nobody)
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        return _main(args, targets, started, equivalent, previous, scratch)
    except Stopped:
        print("mutation: stopped; %s holds the verdicts so far, and the same command resumes from them" % args.report)
        return 130
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _main(args, targets, started, equivalent, previous, scratch) -> int:
    first = scratch / "w0"
    copy = snapshot(first)
    mutants: List[Mutant] = []
    for target in targets:
        mutants += mutants_of(target, (copy / target).read_text())
    by_id = {m.id: m for m in mutants}
    stems = {pathlib.Path(t).stem for t in targets}
    stale = sorted(i for i in equivalent if i.rsplit("-", 1)[0] in stems and i not in by_id)

    chosen = mutants
    if args.survivors:
        wanted = {e["id"] for e in previous["mutants"] if e.get("status") in SURVIVED}
        chosen = [m for m in chosen if m.id in wanted]
    if args.file:
        chosen = [m for m in chosen if args.file in m.path]
    if args.line:
        chosen = [m for m in chosen if args.line in m.lines]
    if args.operator:
        chosen = [m for m in chosen if m.operator == args.operator]
    if args.list:
        for m in chosen:
            print("%s:%d  %s  [%s]  %s  (%s)" % (m.path, m.lineno, m.qualname, m.operator, m.describe(), m.id))
        print("%d mutants" % len(chosen))
        return 0
    # Measured for the default targets too, so that one cached pass serves runs on any of them.
    measured = sorted(set(DEFAULT_TARGETS) | set(targets))
    cover = coverage_map(first, measured, args.tests, args.jobs, not args.no_cache)
    # A plain run takes the last report's verdict of a mutant while its basis holds: the same text of its file and
    # of what the tests share, and of the test module that killed it (a mutant killed by name), else of every test
    # module chosen for it (another target's change does not count).
    files = {t: digest_files(copy, [t]) for t in targets}
    selected = {m.id: select(m, cover) for m in chosen}
    bases = {m.id: basis(files[m.path], selected[m.id], cover) for m in chosen}

    def holds(mutant, entry):
        killer = entry.get("killed_by")
        if killer and cover["tests"].get(killer, {}).get("passed"):
            return entry.get("basis") == basis(files[mutant.path], [killer], cover)
        return entry.get("basis") == bases[mutant.id]

    if not (args.fresh or args.survivors or args.file or args.line or args.operator):
        earlier = {e["id"]: e for e in previous["mutants"] if e.get("status") in DETECTED + SURVIVED}
        reused = [m for m in chosen if m.id in earlier and holds(m, earlier[m.id])]
        if reused:
            print("mutation: %d verdict(s) taken from the last report (nothing they rest on changed; --fresh runs them)"
                  % len(reused))
        chosen = [m for m in chosen if m not in reused]
    print("mutation: %d mutants of %d file(s), %d to run, %d worker(s), copies under %s"
          % (len(mutants), len(targets), len(chosen), args.jobs, scratch))

    failing = sorted(t for t, r in cover["tests"].items() if not r["passed"])
    if failing:
        print("coverage: %d test(s) failed on the unchanged code and are never selected: %s"
              % (len(failing), ", ".join(failing[:5]) + (" ..." if len(failing) > 5 else "")))
    startup = measure_startup(copy)

    workers: "queue.Queue[Worker]" = queue.Queue()
    workers.put(Worker(first, args))
    for n in range(1, args.jobs):
        other = scratch / ("w%d" % n)
        shutil.copytree(first / COLLECTION, other / COLLECTION, symlinks=True,
                        ignore=shutil.ignore_patterns("__pycache__", "pytest-coverage", "coverage-*"))
        workers.put(Worker(other, args))

    results: Dict[str, dict] = {}
    began = time.monotonic()
    lock = threading.Lock()
    done = [0]

    def judge(mutant: Mutant) -> None:
        if STOPPING.is_set():
            return
        if mutant.id in equivalent:
            result = {"status": "equivalent", "reason": equivalent[mutant.id]}
        else:
            tests = selected[mutant.id]
            if not tests:
                result = {"status": "no test"}
            else:
                worker = workers.get()
                try:
                    result = worker.run(mutant, tests, cover, startup)
                finally:
                    workers.put(worker)
        killer = result.get("killed_by")
        result["basis"] = basis(files[mutant.path], [killer], cover) if killer in cover["tests"] else bases[mutant.id]
        with lock:
            results[mutant.id] = result
            done[0] += 1
            if result["status"] in ("survived", "timed out", "error"):
                print("  %-9s %s:%d %s  %s" % (result["status"], mutant.path, mutant.lineno, mutant.qualname,
                                               mutant.describe()), flush=True)
            if done[0] % 25 == 0 and done[0] < len(chosen):
                write_report(args, targets, mutants, results, equivalent, previous, cover, stale, started, final=False)
            if done[0] % 25 == 0 or done[0] == len(chosen):
                spent = time.monotonic() - began
                print("mutation: %d/%d judged, %.0f s, about %.0f min left"
                      % (done[0], len(chosen), spent, spent / done[0] * (len(chosen) - done[0]) / 60), flush=True)

    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
            for future in [pool.submit(judge, m) for m in chosen]:
                future.result()
    except Stopped:
        with lock:
            write_report(args, targets, mutants, results, equivalent, previous, cover, stale, started, final=False)
        raise

    entries = write_report(args, targets, mutants, results, equivalent, previous, cover, stale, started, final=True)
    print("\nmutation: %d mutant(s) run in %.0f s; report: %s" % (len(chosen), time.monotonic() - started, args.report))
    return summary(entries, targets, stale, args)


def summary(entries: List[dict], targets: List[str], stale: List[str], args) -> int:
    """The table, the survivors and the timed out; 1 when a file is under --min."""
    rows = table(entries, targets)
    entries = [e for e in entries if e["path"] in targets]
    print()
    print_table(rows)
    survivors = [e for e in entries if e.get("status") in SURVIVED]
    if survivors:
        print("\nsurvivors (%d):" % len(survivors))
        for e in survivors:
            print("  " + describe(e) + ("  [no test runs this line]" if e["status"] == "no test" else ""))
    timed_out = [e for e in entries if e.get("status") == "timed out"]
    if timed_out:
        print("\ntimed out (detected, but only because a test ran past %gx its baseline + %g s):"
              % (args.time_factor, args.time_extra))
        for e in timed_out:
            print("  " + describe(e))
    if stale:
        print("\nstale entries in %s (no such mutant any more): %s" % (args.equivalent.relative_to(ROOT), ", ".join(stale)))

    low = [r["file"] for r in rows if r["percent"] is not None and r["percent"] < args.min]
    if low:
        print("mutation: under %g%% killed: %s" % (args.min, ", ".join(low)))
        return 1
    return 0


def write_report(args, targets, mutants, results, equivalent, previous, cover, stale, started, final) -> List[dict]:
    """The report: this run's verdicts, and the last report's where this run has none (written as it goes, so an
    interrupted run resumes where it stopped)."""
    kept = {e["id"]: e for e in previous.get("mutants", [])}
    entries = []
    for mutant in mutants:
        entry = {"id": mutant.id, "path": mutant.path, "line": mutant.lineno, "qualname": mutant.qualname,
                 "operator": mutant.operator, "before": mutant.before, "after": mutant.after,
                 "before_short": short(mutant.before), "after_short": short(mutant.after)}
        if mutant.id in results:
            entry.update(results[mutant.id])
        elif mutant.id in equivalent:
            entry.update(status="equivalent", reason=equivalent[mutant.id])
        elif mutant.id in kept:
            entry.update({k: v for k, v in kept[mutant.id].items() if k not in entry})
        entries.append(entry)
    # Other files' verdicts stay in it (each with its basis).
    entries += [e for e in previous["mutants"] if e["path"] not in targets]
    args.report.parent.mkdir(parents=True, exist_ok=True)
    partial = args.report.with_suffix(".partial")
    partial.write_text(json.dumps({"targets": targets, "complete": final,
                                   "seconds": round(time.monotonic() - started), "table": table(entries, targets),
                                   "stale_equivalent": stale, "mutants": entries}, indent=1))
    partial.replace(args.report)
    return entries


def basis(file_hash: str, tests: List[str], cover: dict) -> str:
    modules = sorted({cover["modules"].get(t.split("::", 1)[0], "") for t in tests})
    return hashlib.sha256(json.dumps([file_hash, cover["shared"], modules]).encode()).hexdigest()[:16]


def measure_startup(copy: pathlib.Path) -> float:
    """What pytest costs before the first test: part of each mutant's time limit."""
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--co", "tests/unit/test_executor.py"],
                   cwd=copy, env=environment(copy.parents[2]), capture_output=True, check=False)
    return time.monotonic() - started


if __name__ == "__main__":
    sys.exit(main())
