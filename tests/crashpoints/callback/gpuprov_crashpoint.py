# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Test-only crash points for the real ``ansible-playbook`` (never enabled in use).

The crash-point harness (tests/crashpoints/harness.py) enables this callback with
ANSIBLE_CALLBACK_PLUGINS / ANSIBLE_CALLBACKS_ENABLED. Loaded in the controller's main
process, before any worker forks, it wraps the gpuprov classes in place:

  * every journal commit: ``Journal.begin`` and ``Journal.transition`` (before and after), and
    ``PgJournal``'s, where a PostgreSQL journal is importable; and the writes of the tables kept
    beside the machines: the limits (``expiry.store.write`` / ``delete``: "limits write",
    "limits delete") and the VM list (``vm.projection.upsert_vm`` / ``delete_vm``: "vms upsert",
    "vms delete"). Those are module functions: they are replaced on their module, which every
    caller reaches them through (``store.write(...)``, ``projection.delete_vm(...)``, and the
    module's own calls), so the callers' lookups find the wrapper;
  * every provider primitive of every importable adapter: plan, prepare, create, observe,
    delete, cleanup (before and after);
  * every step inside an adapter's ``create`` and ``delete``: each call made directly from
    that frame, found with ``sys.setprofile`` active only while create/delete runs (calls
    that cannot act outside the process, such as ``str.strip`` or ``len``, are not steps).

Workers are forked (Ansible's 'fork' start method), so they inherit the wrapped classes.
The modules are imported through Ansible's collection loader, the way the action plugin
imports them, so the objects wrapped are the very ones the action plugin uses.

A point is named ``<label> #<n>``: the n-th time that label is reached. A label reached
again without a commit in between (a poll repeating the same observe) is one point.

Environment (read only here):
  CRASHPOINT_DIR    folder for ``trace.jsonl`` (every point reached) and ``killed.json``
  CRASHPOINT_KILL   a point name: at that point, SIGKILL the ansible-playbook process and
                    the worker (the whole controller dies, as on a crash or an OOM kill)
  CRASHPOINT_PAUSE  a point name: at that point, write ``paused.json`` and wait until the test
                    creates ``resume`` in CRASHPOINT_DIR (at most CRASHPOINT_PAUSE_S, 120 s):
                    the run stays live there, holding its lease, while the test races it
  CRASHPOINT_WATCH  (trace runs) the state directory: each point's record then carries a
                    fingerprint of the durable state (see World); CRASHPOINT_WATCH_SKIP is a
                    regular expression of paths under it to leave out (logs, pid files the
                    VM's own processes write), CRASHPOINT_WATCH_DOCKER a label filter for the
                    VM's containers, CRASHPOINT_SETTLE the seconds to wait before each one
"""

from __future__ import annotations

import functools
import inspect
import json
import os
import signal
import stat
import sys
import time

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
    name: gpuprov_crashpoint
    type: aggregate
    short_description: test-only crash points for gpuprov.cloud (SIGKILL at a named point)
    description:
      - Used by the crash-point harness of the gpuprov.cloud tests only.
    requirements:
      - enabled explicitly with ANSIBLE_CALLBACKS_ENABLED
"""

_MU = "ansible_collections.gpuprov.cloud.plugins.module_utils."
PRIMITIVES = ("plan", "prepare", "create", "observe", "delete", "cleanup")
PROFILED = ("create", "delete")
# Calls that only compute inside this process: not crash points of their own.
_PURE_BUILTINS = frozenset((
    "len", "isinstance", "issubclass", "getattr", "hasattr", "sorted", "min", "max", "any", "all",
    "repr", "iter", "next", "format", "sum", "abs", "id", "hash", "callable", "vars", "locals",
    "globals", "setattr", "round", "divmod", "ord", "chr",
))
_PURE_SELF_TYPES = (str, bytes, bytearray, dict, list, tuple, set, frozenset, int, float)
# Modules whose functions only compute (paths, JSON, ids, clocks).
_PURE_MODULES = frozenset(("posixpath", "genericpath", "json", "uuid", "time", "codecs", "copy", "abc"))


def _short(label) -> str:
    """"Creating (offer 1 of 1: ...)" -> "Creating": the point names the state, not the offer."""
    return str(label or "").split(" (", 1)[0]


class World:
    """A fingerprint of the durable state a crash would leave: the files under the state
    directory, the processes that run from it, the journal's rows (machines, vms, vm_limits; not
    their timestamps),
    and, on docker, the state and writable-layer files of the VM's containers. Two points with
    the same fingerprint leave the next run the same facts."""

    def __init__(self, home: str, skip: str, docker_label: str, settle: float):
        import re

        self.home = os.path.abspath(home)
        self.skip = re.compile(skip) if skip else None
        self.docker_label = docker_label
        self.settle = settle
        self._docker = None

    def fingerprint(self) -> str:
        import hashlib

        time.sleep(self.settle)  # effects that land a moment after their call (a signal, a pid file)
        digest = hashlib.sha1()
        for part in (self._files(), self._processes(), self._journal(), self._containers()):
            digest.update(json.dumps(part, sort_keys=True, default=str).encode())
        return digest.hexdigest()[:12]

    def _files(self):
        import hashlib

        found = []
        for root, dirs, files in os.walk(self.home):
            dirs[:] = sorted(d for d in dirs if not (self.skip and self.skip.search(d + "/")))
            found.extend((os.path.relpath(os.path.join(root, d), self.home) + "/", None) for d in dirs)
            for name in sorted(files):
                path = os.path.join(root, name)
                rel = os.path.relpath(path, self.home)
                if name.startswith("journal.sqlite") or (self.skip and self.skip.search(rel)):
                    continue
                try:
                    info = os.lstat(path)
                    if stat.S_ISLNK(info.st_mode):
                        found.append((rel, "-> " + os.readlink(path)))
                    elif not stat.S_ISREG(info.st_mode):
                        found.append((rel, stat.S_IFMT(info.st_mode)))   # a socket or fifo: never read it
                    else:
                        with open(path, "rb") as handle:
                            found.append((rel, hashlib.sha1(handle.read()).hexdigest()))
                except OSError:
                    found.append((rel, None))
        return found

    def _processes(self):
        found = []
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open("/proc/%s/stat" % pid) as handle:
                    if handle.read().rsplit(")", 1)[1].split()[0] == "Z":
                        continue
                with open("/proc/%s/cmdline" % pid, "rb") as handle:
                    cmdline = handle.read().decode(errors="replace").replace("\0", " ").strip()
            except (OSError, IndexError):
                continue
            if self.home + os.sep in cmdline:
                found.append(cmdline)
        return sorted(found)

    def _journal(self):
        import sqlite3

        path = os.path.join(self.home, "journal.sqlite")
        if not os.path.exists(path):
            return None
        db = sqlite3.connect(path, timeout=30)
        try:
            machines = db.execute("SELECT key, kind, state, label, terminal, version, lease_owner FROM machines "
                                  "ORDER BY key").fetchall()
            found = [machines]
            for table, key in (("vms", "name"), ("vm_limits", "key")):
                # Each table but its write times; a journal may not have the table yet (no columns).
                columns = [r[1] for r in db.execute("PRAGMA table_info(%s)" % table) if r[1] != "updated_at"]
                found.append(db.execute("SELECT %s FROM %s ORDER BY %s" % (", ".join(columns), table, key)).fetchall()
                             if columns else [])
            return found
        except sqlite3.Error as exc:
            return str(exc)
        finally:
            db.close()

    def _containers(self):
        if not self.docker_label:
            return None
        if self._docker is None:
            import docker

            self._docker = docker.from_env(timeout=30).api
        found = []
        for row in self._docker.containers(all=True, filters={"label": self.docker_label}):
            found.append((row["Id"], row["State"], self._container_files(row["Id"])))
        return sorted(found)

    def _container_files(self, container_id: str):
        """The container's own files (its writable layer): read from the engine's storage when
        it is on this machine (fast), else through ``docker diff`` (a second or two)."""
        info = self._docker.inspect_container(container_id)
        upper = ((info.get("GraphDriver") or {}).get("Data") or {}).get("UpperDir")
        if upper and os.path.isdir(upper):
            return World(upper, "", "", 0.0)._files()
        return sorted((c["Path"], c["Kind"]) for c in self._docker.diff(container_id) or [])


class Points:
    """Counts the points this process reaches; records or kills at them."""

    def __init__(self, directory: str, kill_at: str, controller_pid: int, world=None, pause_at: str = "",
                 pause_s: float = 120.0):
        self.directory = directory
        self.kill_at = kill_at
        self.pause_at = pause_at
        self.pause_s = pause_s
        self.controller_pid = controller_pid
        self.world = world      # fingerprints each point (trace runs)
        self.epoch = 0          # commits made by this process so far
        self.state = "-"        # the state this process last committed
        self.counts = {}
        self.seen = set()

    def reach(self, label: str, once_per_state: bool = True) -> bool:
        """Count (and maybe kill at) ``label``; False when it is a repeat within one state."""
        if once_per_state:
            if (label, self.epoch) in self.seen:
                return False  # the same point again within one state (a repeated poll)
            self.seen.add((label, self.epoch))
        count = self.counts[label] = self.counts.get(label, 0) + 1
        name = "%s #%d" % (label, count)
        record = {"point": name, "label": label, "n": count, "state": self.state, "pid": os.getpid(),
                  "at": time.time()}
        if self.world is not None:
            record["world"] = self.world.fingerprint()
        self._write("trace.jsonl", record, append=True)
        if name == self.pause_at:
            self._pause(name)
        if name == self.kill_at:
            self._write("killed.json", {"point": name, "pid": os.getpid(), "at": time.time()}, append=False)
            try:
                os.kill(self.controller_pid, signal.SIGKILL)
            finally:
                os.kill(os.getpid(), signal.SIGKILL)
        return True

    def _pause(self, name: str) -> None:
        """Hold this run at the point (its lease heartbeat keeps running) until the test
        creates ``resume`` in the folder, or ``pause_s`` passed."""
        self._write("paused.json", {"point": name, "pid": os.getpid(), "at": time.time()}, append=False)
        deadline = time.monotonic() + self.pause_s
        while not os.path.exists(os.path.join(self.directory, "resume")) and time.monotonic() < deadline:
            time.sleep(0.05)

    def committed(self, label) -> None:
        """A commit happened; ``label``: the machine state it committed (None: a row beside the machines,
        which leaves the state last committed as it was)."""
        self.epoch += 1
        if label is not None:
            self.state = _short(label)

    def _write(self, filename: str, record, append: bool) -> None:
        path = os.path.join(self.directory, filename)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else os.O_TRUNC), 0o600)
        try:
            os.write(fd, (json.dumps(record, sort_keys=True) + "\n").encode())
            os.fsync(fd)  # the record must survive the SIGKILL that may follow
        finally:
            os.close(fd)


def _bound(func, args, kwargs):
    """The call's arguments by parameter name, whatever order the caller used."""
    return inspect.signature(func).bind(*args, **kwargs).arguments


def _wrap_commit(points: Points, func, describe):
    @functools.wraps(func)
    def commit(*args, **kwargs):
        label, new_label = describe(_bound(func, args, kwargs))
        points.reach("before commit %s" % label)
        result = func(*args, **kwargs)
        points.committed(new_label)
        points.reach("after commit %s" % label)
        return result
    commit.crashpoint_wrapped = True
    return commit


def _c_name(arg) -> str:
    owner = getattr(arg, "__self__", None)
    qualname = getattr(arg, "__qualname__", None) or repr(arg)
    module = getattr(arg, "__module__", None)
    if owner is not None and not inspect.ismodule(owner) and "." not in qualname:
        return "%s.%s" % (type(owner).__name__, qualname)
    if module and module != "builtins" and not qualname.startswith(module + "."):
        return "%s.%s" % (module, qualname)
    return qualname


def _pure_c(arg) -> bool:
    owner = getattr(arg, "__self__", None)
    if isinstance(owner, _PURE_SELF_TYPES):
        return True
    if inspect.ismodule(owner):
        return (owner.__name__ == "builtins" and arg.__name__ in _PURE_BUILTINS) or owner.__name__ in _PURE_MODULES
    return False


def _pure_python(code) -> bool:
    name = code.co_name
    if name.startswith("<") or (name.startswith("__") and name not in ("__enter__", "__exit__", "__call__")):
        return True  # comprehensions, lambdas, and what the interpreter calls on its own (__del__, __getattr__)
    filename = code.co_filename
    if filename.startswith("<frozen "):
        module = filename[len("<frozen "):-1]  # "<frozen os>": a frozen stdlib module
        return module.startswith("importlib") or module in _PURE_MODULES
    parts = os.path.normpath(filename).split(os.sep)
    module = os.path.splitext(parts[-1])[0]
    return module in _PURE_MODULES or (len(parts) > 1 and parts[-2] in _PURE_MODULES)


def _python_name(frame) -> str:
    """The callee's qualified name; a decorator's wrapper is named after the function it wraps."""
    code = frame.f_code
    for name in code.co_freevars:
        wrapped = frame.f_locals.get(name)
        if inspect.isfunction(wrapped):
            return wrapped.__qualname__
    return getattr(code, "co_qualname", code.co_name)


class _Steps:
    """The profile function: a point before each call made directly from ``func``'s frame."""

    def __init__(self, points: Points, scope: str, func):
        self.points = points
        self.scope = scope
        self.code = func.__code__
        self.frame = None
        self.in_c_call = None  # a direct C call in progress: Python calls under it are not direct

    def __call__(self, frame, event, arg):
        if self.frame is None:
            if event == "call" and frame.f_code is self.code:
                self.frame = frame
            return
        if event == "call":
            if self.in_c_call is None and frame.f_back is self.frame and not _pure_python(frame.f_code):
                self.step(frame.f_back, _python_name(frame))
        elif frame is self.frame:
            if event == "c_call":
                self.in_c_call = arg
                if not _pure_c(arg):
                    self.step(frame, _c_name(arg))
            elif event in ("c_return", "c_exception") and arg is self.in_c_call:
                self.in_c_call = None

    def step(self, frame, callee: str) -> None:
        self.points.reach("in %s %s:%d %s" % (self.scope, os.path.basename(frame.f_code.co_filename),
                                              frame.f_lineno, callee), once_per_state=False)


def _wrap_primitive(points: Points, cloud: str, primitive: str, func):
    profiled = primitive in PROFILED

    @functools.wraps(func)
    def call(*args, **kwargs):
        fresh = points.reach("before %s" % primitive)
        if profiled and fresh:
            steps = _Steps(points, "%s.%s" % (cloud, primitive), func)
            previous = sys.getprofile()
            sys.setprofile(steps)
            try:
                result = func(*args, **kwargs)
            finally:
                sys.setprofile(previous)
        else:
            result = func(*args, **kwargs)
        points.reach("after %s" % primitive)
        return result
    call.crashpoint_wrapped = True
    return call


def install(points: Points) -> None:
    """Wrap the journal and every importable adapter class in place (once per process)."""
    import importlib

    journal = importlib.import_module(_MU + "machine.journal")
    registry = importlib.import_module(_MU + "providers.registry")
    classes = [journal.Journal]
    try:   # a PostgreSQL journal's commits are the same points (the soak's shared journal)
        classes.append(importlib.import_module(_MU + "machine.journal_pg").PgJournal)
    except ImportError:
        pass
    for cls in classes:
        if not getattr(cls.transition, "crashpoint_wrapped", False):
            cls.begin = _wrap_commit(points, cls.begin, lambda a: ("begin %s" % _short(a.get("label")), a.get("label")))
            cls.transition = _wrap_commit(points, cls.transition, lambda a: (
                "%s -> %s" % (_short(a.get("from_label")), _short(a.get("label"))), a.get("label")))
    # The rows beside the machines: (module, function, label). Not machine states: the state stays as it was.
    for module_name, function, label in (("expiry.store", "write", "limits write"),
                                         ("expiry.store", "delete", "limits delete"),
                                         ("vm.projection", "upsert_vm", "vms upsert"),
                                         ("vm.projection", "delete_vm", "vms delete")):
        module = importlib.import_module(_MU + module_name)
        func = getattr(module, function)
        if not getattr(func, "crashpoint_wrapped", False):
            setattr(module, function, _wrap_commit(points, func, lambda _a, label=label: (label, None)))
    for cloud in sorted(registry.ADAPTERS):
        module_name, class_name = registry.ADAPTERS[cloud]
        try:
            module = importlib.import_module(module_name if "." in module_name else _MU + "providers." + module_name)
        except ImportError:
            continue  # an SDK this machine lacks: that cloud cannot run here anyway
        adapter = getattr(module, class_name)
        for primitive in PRIMITIVES:
            func = adapter.__dict__.get(primitive)
            if func is None or getattr(func, "crashpoint_wrapped", False):
                continue
            setattr(adapter, primitive, _wrap_primitive(points, cloud, primitive, func))


class CallbackModule(CallbackBase):
    """Installs the crash points when ansible-playbook loads its callbacks."""

    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "gpuprov_crashpoint"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        directory = os.environ.get("CRASHPOINT_DIR")
        if not directory:
            raise RuntimeError("gpuprov_crashpoint: CRASHPOINT_DIR is not set (test-only plugin)")
        world = None
        if os.environ.get("CRASHPOINT_WATCH"):
            world = World(os.environ["CRASHPOINT_WATCH"], os.environ.get("CRASHPOINT_WATCH_SKIP", ""),
                          os.environ.get("CRASHPOINT_WATCH_DOCKER", ""),
                          float(os.environ.get("CRASHPOINT_SETTLE", "0.1")))
        install(Points(directory, os.environ.get("CRASHPOINT_KILL", ""), os.getpid(), world,
                       os.environ.get("CRASHPOINT_PAUSE", ""), float(os.environ.get("CRASHPOINT_PAUSE_S", "120"))))
