"""The journal under hostile conditions: lease holders that are zombies or whose pid was
reused, files that are not journals (never written to), journals written before schema 2
(migrated in one transaction), concurrent first opens, read-only places and umask 000.

Checks that need an unprivileged user (root ignores file permissions) run their scenario
as ``nobody`` through setpriv when the suite runs as root."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import sqlite3
import stat
import subprocess
import sys
import tempfile
import textwrap
import time

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import run_options
from ansible_collections.gpuprov.cloud.plugins.module_utils.machine import journal as journal_module
from ansible_collections.gpuprov.cloud.plugins.module_utils.machine import journal_file
from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journal import (
    APPLICATION_ID, SCHEMA_VERSION, Journal, JournalError, LeaseHeld,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.owners import new_owner, owner_alive
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import projection

HOST = socket.gethostname()
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
JOURNAL_SOURCE = os.path.abspath(journal_module.__file__)
HAS_PROC = os.path.exists("/proc/self/stat")
# The clock fixture is tests/unit/conftest.py's.

# The schema-1 DDL exactly as gpuprov wrote it before application_id and schema 2.
SCHEMA_1 = """
CREATE TABLE IF NOT EXISTS meta (
    name TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS machines (
    key TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    state TEXT NOT NULL,
    label TEXT NOT NULL,
    terminal INTEGER NOT NULL,
    version INTEGER NOT NULL,
    lease_owner TEXT,
    lease_expires REAL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    entered_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS machine_events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    key TEXT NOT NULL,
    version INTEGER NOT NULL,
    event TEXT NOT NULL,
    from_label TEXT,
    to_label TEXT,
    note TEXT,
    owner TEXT,
    at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS machine_events_key ON machine_events (key, id);
CREATE TABLE IF NOT EXISTS vms (
    name TEXT PRIMARY KEY,
    cloud TEXT,
    region TEXT,
    zone TEXT,
    instance_id TEXT,
    instance_type TEXT,
    gpu TEXT,
    gpu_count INTEGER,
    ssh_host TEXT,
    ssh_port INTEGER,
    ssh_user TEXT,
    host_key_alias TEXT,
    status TEXT NOT NULL,
    stage TEXT,
    detail TEXT,
    updated_at REAL NOT NULL
);
"""


def mode(path) -> int:
    return stat.S_IMODE(os.stat(str(path)).st_mode)


def sha256(path) -> str:
    with open(str(path), "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()


def header_application_id(path) -> int:
    with open(str(path), "rb") as handle:
        return int.from_bytes(handle.read(100)[68:72], "big")


def raw(path, sql, args=()):
    db = sqlite3.connect(str(path))
    try:
        return db.execute(sql, args).fetchall()
    finally:
        db.close()


def columns(path, table):
    return [r[1] for r in raw(path, "PRAGMA table_info(%s)" % table)]


# -- lease holders: zombies and reused pids ------------------------------------------------

def proc_stat(pid):
    with open("/proc/%d/stat" % pid, "rb") as handle:
        fields = handle.read().rsplit(b")", 1)[1].split()
    return fields[0].decode(), fields[19].decode()


@pytest.fixture
def zombie():
    """A child that has exited and is not reaped: what a SIGKILLed run is until its parent
    (or a late init) waits for it."""
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    try:
        deadline = time.monotonic() + 10
        while proc_stat(pid)[0] != "Z":
            assert time.monotonic() < deadline, "the child never became a zombie"
            time.sleep(0.01)
        yield pid
    finally:
        os.waitpid(pid, 0)


@pytest.fixture
def live_child():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        yield child.pid
    finally:
        child.kill()
        child.wait()


pytestmark_proc = pytest.mark.skipif(not HAS_PROC, reason="needs /proc")


@pytestmark_proc
def test_new_owner_records_host_pid_and_start_time():
    owner = new_owner()
    host, pid, started, tag = owner.split(":")
    assert (host, int(pid)) == (HOST, os.getpid())
    assert started == proc_stat(os.getpid())[1]
    assert len(tag) == 8 and int(tag, 16) >= 0
    assert owner_alive(owner) is True


@pytestmark_proc
def test_a_zombie_holder_is_dead_in_both_owner_formats(zombie):
    started = proc_stat(zombie)[1]
    assert os.path.exists("/proc/%d" % zombie)   # kill(pid, 0) would call this alive
    assert owner_alive("%s:%d:%s:deadbeef" % (HOST, zombie, started)) is False
    assert owner_alive("%s:%d:deadbeef" % (HOST, zombie)) is False


@pytestmark_proc
def test_a_live_holder_is_alive_and_a_reused_pid_is_not(live_child):
    started = proc_stat(live_child)[1]
    assert owner_alive("%s:%d:%s:cafe0001" % (HOST, live_child, started)) is True
    assert owner_alive("%s:%d:cafe0001" % (HOST, live_child)) is True   # old format: no start time to compare
    # the same pid with another recorded start time is another process: the recorded one is gone
    assert owner_alive("%s:%d:%d:cafe0001" % (HOST, live_child, int(started) + 1)) is False
    assert owner_alive("%s:%d:%d:cafe0001" % (HOST, os.getpid(), int(proc_stat(os.getpid())[1]) - 1)) is False


def test_a_missing_pid_is_dead_and_other_hosts_and_odd_owners_are_trusted():
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)   # reaped: the pid no longer exists
    assert owner_alive("%s:%d:12345:0badf00d" % (HOST, pid)) is False
    assert owner_alive("%s:%d:0badf00d" % (HOST, pid)) is False
    assert owner_alive("not-%s:%d:1:0badf00d" % (HOST, pid)) is True   # other host: until the lease expires
    assert owner_alive("not-%s:%d:0badf00d" % (HOST, pid)) is True
    for odd in ("me", "holder-1", "%s:x:y:z" % HOST, "%s:%d:-:0badf00d" % (HOST, os.getpid()), ""):
        assert owner_alive(odd) is True, odd


@pytestmark_proc
def test_acquire_takes_over_at_once_from_a_zombie_holder(tmp_path, clock, zombie):
    path = str(tmp_path / "journal.sqlite")
    dead = "%s:%d:%s:deadbeef" % (HOST, zombie, proc_stat(zombie)[1])
    journal = Journal(path, clock=clock)
    try:
        journal.begin("vm1", "toy", {"kind": "A"}, "A", False, dead, 120.0, None)
        assert journal.live_holder("vm1") is None
        journal.acquire("vm1", "rerun", 120.0)    # no "being worked on ... 119 s more"
        assert journal.holds("vm1", "rerun")
    finally:
        journal.close()


@pytestmark_proc
def test_acquire_still_refuses_a_live_holder(tmp_path, clock, live_child):
    path = str(tmp_path / "journal.sqlite")
    alive = "%s:%d:%s:feedf00d" % (HOST, live_child, proc_stat(live_child)[1])
    journal = Journal(path, clock=clock)
    try:
        journal.begin("vm1", "toy", {"kind": "A"}, "A", False, alive, 120.0, None)
        assert journal.live_holder("vm1") == alive
        with pytest.raises(LeaseHeld):
            journal.acquire("vm1", "rerun", 120.0)
    finally:
        journal.close()


# -- files that are not journals: refused, and not one byte changed ---------------------------

def _sqlite(path, *statements, wal=False):
    db = sqlite3.connect(str(path), isolation_level=None)
    if wal:
        db.execute("PRAGMA journal_mode=WAL")
    for statement in statements:
        db.execute(statement)
    db.close()


def _foreign(kind, path):
    if kind == "text":
        path.write_bytes(b"name,gpu\ntrain1,a100\n" * 20)
    elif kind == "another-application":
        _sqlite(path, "PRAGMA application_id = 305419896", "CREATE TABLE songs (title TEXT)",
                "INSERT INTO songs VALUES ('x')")
    elif kind == "only-meta-name-value":
        _sqlite(path, "CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
                "INSERT INTO meta VALUES ('schema', '1')")
    elif kind == "other-meta-shape":
        _sqlite(path, "CREATE TABLE meta (k TEXT, v TEXT, extra INTEGER)", "INSERT INTO meta VALUES ('a', 'b', 1)")
    elif kind == "machines-of-something-else":
        _sqlite(path, "CREATE TABLE machines (x)")
    elif kind == "schema-1-plus-another-table":
        _sqlite(path, *[s for s in SCHEMA_1.split(";") if s.strip()],
                "INSERT INTO meta VALUES ('schema', '1')", "CREATE TABLE songs (title TEXT)")
    elif kind == "schema-1-with-a-column-missing":
        _sqlite(path, *[s.replace(",\n    entered_at REAL NOT NULL", "") for s in SCHEMA_1.split(";") if s.strip()],
                "INSERT INTO meta VALUES ('schema', '1')")
    elif kind == "sqlite-without-tables":
        _sqlite(path, "PRAGMA user_version = 7")
    elif kind == "wal-mode-other-meta-shape":
        _sqlite(path, "CREATE TABLE meta (k TEXT, v TEXT, extra INTEGER)", "INSERT INTO meta VALUES ('a', 'b', 1)",
                wal=True)
    else:
        raise AssertionError(kind)


FOREIGN = ("text", "another-application", "only-meta-name-value", "other-meta-shape", "machines-of-something-else",
           "schema-1-plus-another-table", "schema-1-with-a-column-missing", "sqlite-without-tables",
           "wal-mode-other-meta-shape")


@pytest.mark.parametrize("kind", FOREIGN)
def test_a_file_that_is_not_a_journal_is_refused_and_left_byte_for_byte(tmp_path, clock, kind):
    path = tmp_path / "foreign.db"
    _foreign(kind, path)
    os.chmod(str(path), 0o644)
    before = (sha256(path), mode(path), sorted(os.listdir(str(tmp_path))))
    assert before[2] == ["foreign.db"]
    with pytest.raises(JournalError) as info:
        Journal(str(path), clock=clock)
    msg = str(info.value)
    assert str(path) in msg
    assert "GPUPROV_JOURNAL" in msg and "another path" in msg
    assert "not a gpuprov journal" in msg
    assert (sha256(path), mode(path), sorted(os.listdir(str(tmp_path)))) == before   # no -wal, -shm, -journal


def test_a_foreign_wal_database_open_elsewhere_is_read_through_its_wal_and_left_alone(tmp_path, clock):
    path = tmp_path / "foreign.db"
    other_application = sqlite3.connect(str(path), isolation_level=None)
    try:
        other_application.execute("PRAGMA journal_mode=WAL")
        other_application.execute("CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)")
        other_application.execute("INSERT INTO meta VALUES ('schema', '1')")
        before = (sha256(path), sorted(os.listdir(str(tmp_path))))
        assert before[1] == ["foreign.db", "foreign.db-shm", "foreign.db-wal"]
        with pytest.raises(JournalError) as info:
            Journal(str(path), clock=clock)
        assert "tables: meta" in str(info.value)
        assert (sha256(path), sorted(os.listdir(str(tmp_path)))) == before
        assert other_application.execute("SELECT value FROM meta").fetchall() == [("1",)]
    finally:
        other_application.close()


def test_a_new_journal_carries_the_application_id_and_schema(tmp_path, clock):
    path = tmp_path / "journal.sqlite"
    journal = Journal(str(path), clock=clock)
    journal_id = journal.journal_id
    assert raw(path, "SELECT name FROM sqlite_master WHERE name = 'machine_options'") == []   # the layer above's
    run_options.recorded(journal, "vm1")
    journal.close()
    assert header_application_id(path) == APPLICATION_ID == 0x67707276
    assert raw(path, "PRAGMA application_id") == [(APPLICATION_ID,)]
    assert dict(raw(path, "SELECT name, value FROM meta")) == {"schema": str(SCHEMA_VERSION), "journal_id": journal_id}
    assert SCHEMA_VERSION == 2
    assert "cancel_owner" in columns(path, "machines") and "cancel_reason" in columns(path, "machines")
    assert columns(path, "machine_options") == ["key", "cloud", "options"]


def test_a_zero_length_file_becomes_a_journal(tmp_path, clock):
    path = tmp_path / "journal.sqlite"
    path.write_bytes(b"")
    os.chmod(str(path), 0o644)
    journal = Journal(str(path), clock=clock)
    try:
        assert len(journal.journal_id) == 32
        assert mode(path) == 0o600
    finally:
        journal.close()
    assert header_application_id(path) == APPLICATION_ID


# -- schema: versions and the migration from 1 ------------------------------------------------

def make_schema_1_journal(path, schema="1"):
    """A journal as gpuprov wrote it before schema 2: WAL, application_id 0, and some history."""
    db = sqlite3.connect(str(path), isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.executescript(SCHEMA_1)
    if schema is not None:
        db.execute("INSERT INTO meta (name, value) VALUES ('schema', ?)", (schema,))
    db.execute("INSERT INTO machines (key, kind, state, label, terminal, version, lease_owner, lease_expires, "
               "created_at, updated_at, entered_at) VALUES ('old1', 'launch', ?, 'Ready', 1, 4, NULL, NULL, "
               "10, 20, 20)", (json.dumps({"kind": "Ready", "vm": {"id": "i-1"}}, sort_keys=True),))
    db.execute("INSERT INTO machine_events (key, version, event, from_label, to_label, note, owner, at) "
               "VALUES ('old1', 4, 'transition', 'Reconciling', 'Ready', 'SSH login OK', 'h:1:ab', 20)")
    db.execute("INSERT INTO vms (name, cloud, status, updated_at) VALUES ('old1', 'docker', 'running', 20)")
    db.close()
    os.chmod(str(path), 0o600)


def test_a_schema_1_journal_is_migrated_in_place_keeping_its_history(tmp_path, clock):
    path = tmp_path / "journal.sqlite"
    make_schema_1_journal(path)
    assert header_application_id(path) == 0
    journal = Journal(str(path), clock=clock)
    try:
        journal_id = journal.journal_id
        assert len(journal_id) == 32 and int(journal_id, 16) >= 0
        row = journal.load("old1")
        assert (row.state, row.label, row.version, row.terminal) == ({"kind": "Ready", "vm": {"id": "i-1"}},
                                                                     "Ready", 4, True)
        assert [e["note"] for e in journal.events("old1")] == ["SSH login OK"]
        assert projection.vm(journal, "old1")["cloud"] == "docker"
        assert journal.cancel_request("old1", "anyone") is None and run_options.recorded(journal, "old1") == {}
    finally:
        journal.close()
    assert raw(path, "PRAGMA application_id") == [(APPLICATION_ID,)]
    assert dict(raw(path, "SELECT name, value FROM meta")) == {"schema": "2", "journal_id": journal_id}
    assert columns(path, "machines")[-2:] == ["cancel_owner", "cancel_reason"]
    assert columns(path, "machine_options") == ["key", "cloud", "options"]
    again = Journal(str(path), clock=clock)
    try:
        assert again.journal_id == journal_id   # made once, by the migration
    finally:
        again.close()


def test_a_migration_that_fails_half_way_leaves_schema_1_whole(tmp_path, clock, monkeypatch):
    path = tmp_path / "journal.sqlite"
    make_schema_1_journal(path)
    # the last step fails: everything before it must roll back with it
    monkeypatch.setattr(journal_file, "_MIGRATE_FROM_1",
                        journal_file._MIGRATE_FROM_1 + ("CREATE TABLE machines (x)",))
    with pytest.raises(JournalError):
        Journal(str(path), clock=clock)
    assert "cancel_owner" not in columns(path, "machines")
    assert raw(path, "SELECT name FROM sqlite_master WHERE name = 'machine_options'") == []
    assert dict(raw(path, "SELECT name, value FROM meta")) == {"schema": "1"}
    assert raw(path, "PRAGMA application_id") == [(0,)]
    monkeypatch.undo()
    Journal(str(path), clock=clock).close()
    assert dict(raw(path, "SELECT name, value FROM meta"))["schema"] == "2"


@pytest.mark.parametrize("value, said", [("x", "schema version 'x' is not a number"),
                                         ("", "schema version '' is not a number"),
                                         (None, "schema version is missing")])
def test_a_schema_that_is_not_a_number_is_a_clear_error(tmp_path, clock, value, said):
    legacy = tmp_path / "legacy.sqlite"
    make_schema_1_journal(legacy, schema=value)
    before = sha256(legacy)
    ours = tmp_path / "ours.sqlite"
    Journal(str(ours), clock=clock).close()
    if value is None:
        raw_db = sqlite3.connect(str(ours))
        raw_db.execute("DELETE FROM meta WHERE name = 'schema'")
    else:
        raw_db = sqlite3.connect(str(ours))
        raw_db.execute("UPDATE meta SET value = ? WHERE name = 'schema'", (value,))
    raw_db.commit()
    raw_db.close()
    for path in (legacy, ours):
        with pytest.raises(JournalError) as info:
            Journal(str(path), clock=clock)
        assert info.value.__class__ is JournalError
        msg = str(info.value)
        assert str(path) in msg and said in msg
        assert "the file is damaged or not a gpuprov journal" in msg
    assert sha256(legacy) == before


def test_a_newer_journal_is_refused_without_a_write(tmp_path, clock):
    path = tmp_path / "journal.sqlite"
    Journal(str(path), clock=clock).close()
    db = sqlite3.connect(str(path))
    db.execute("UPDATE meta SET value = '3' WHERE name = 'schema'")
    db.commit()
    db.close()
    before = sha256(path)
    with pytest.raises(JournalError, match=r"newer gpuprov.cloud \(schema 3 > 2\)"):
        Journal(str(path), clock=clock)
    assert sha256(path) == before


# -- many runs opening one journal at once -------------------------------------------------------

OPEN_AT = textwrap.dedent("""
    import importlib.util, sys, time
    spec = importlib.util.spec_from_file_location("gp_journal", sys.argv[1])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    time.sleep(max(0.0, float(sys.argv[3]) - time.time()))
    journal = module.Journal(sys.argv[2])
    print(journal.journal_id)
    journal.close()
""")


def open_together(path, count):
    start = time.time() + 1.5
    runs = [subprocess.Popen([sys.executable, "-c", OPEN_AT, JOURNAL_SOURCE, str(path), repr(start)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _index in range(count)]
    results = [run.communicate(timeout=120) + (run.returncode,) for run in runs]
    failures = [err.decode() for _out, err, rc in results if rc != 0]
    assert not failures, failures[0]
    return {out.decode().strip() for out, _err, _rc in results}


def test_concurrent_first_opens_make_one_journal(tmp_path):
    path = tmp_path / "state" / "journal.sqlite"
    ids = open_together(path, 10)
    assert len(ids) == 1
    assert dict(raw(path, "SELECT name, value FROM meta")) == {"schema": "2", "journal_id": ids.pop()}


def test_concurrent_opens_migrate_a_schema_1_journal_once(tmp_path):
    path = tmp_path / "journal.sqlite"
    make_schema_1_journal(path)
    ids = open_together(path, 6)
    assert len(ids) == 1
    assert dict(raw(path, "SELECT name, value FROM meta")) == {"schema": "2", "journal_id": ids.pop()}
    assert raw(path, "SELECT key, version FROM machines") == [("old1", 4)]


# -- places: umask 000 and read-only directories ------------------------------------------------

def test_missing_directories_are_0700_even_under_umask_000(tmp_path, clock):
    path = tmp_path / "home" / ".local" / "state" / "gpuprov" / "journal.sqlite"
    old = os.umask(0)
    try:
        Journal(str(path), clock=clock).close()
    finally:
        os.umask(old)
    for folder in (path.parent, path.parent.parent, path.parent.parent.parent, tmp_path / "home"):
        assert mode(folder) == 0o700, folder
    assert mode(path) == 0o600


UNPRIVILEGED = textwrap.dedent("""
    import importlib.util, json, os, sys
    spec = importlib.util.spec_from_file_location("gp_journal", sys.argv[1])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    base = sys.argv[2]
    results = {}

    def attempt(name, path):
        try:
            module.Journal(path).close()
            results[name] = "opened"
        except module.JournalError as exc:
            results[name] = "JournalError: %s" % exc
        except Exception as exc:
            results[name] = "%s: %s" % (type(exc).__name__, exc)

    # a read-only state directory, no journal yet
    os.mkdir(os.path.join(base, "ro-state"), 0o500)
    attempt("ro-state", os.path.join(base, "ro-state", "journal.sqlite"))
    # a read-only directory above a missing state directory
    attempt("ro-parent", os.path.join(base, "ro-state", "gpuprov", "journal.sqlite"))
    # a journal in a directory that turned read-only (SQLite needs -wal and -shm beside it)
    os.mkdir(os.path.join(base, "was-writable"), 0o700)
    module.Journal(os.path.join(base, "was-writable", "journal.sqlite")).close()
    os.chmod(os.path.join(base, "was-writable"), 0o500)
    attempt("ro-dir-existing", os.path.join(base, "was-writable", "journal.sqlite"))
    # a read-only journal file in a writable directory
    os.mkdir(os.path.join(base, "rw"), 0o700)
    module.Journal(os.path.join(base, "rw", "journal.sqlite")).close()
    os.chmod(os.path.join(base, "rw", "journal.sqlite"), 0o400)
    attempt("ro-file", os.path.join(base, "rw", "journal.sqlite"))
    print(json.dumps(results))
""")


def _unprivileged_python():
    """A command prefix running Python as an ordinary user: this one, or nobody via setpriv when root."""
    if not IS_ROOT:
        return [sys.executable]
    setpriv = shutil.which("setpriv")
    if not setpriv:
        pytest.skip("running as root without setpriv: cannot test permissions")
    for python in (sys.executable, "/usr/bin/python3"):
        command = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", python]
        probe = subprocess.run(command + ["-c", "import sqlite3, json"], capture_output=True, check=False)
        if probe.returncode == 0:
            return command
    pytest.skip("no Python that the nobody user can run")


def test_read_only_places_get_errors_that_name_the_path_and_the_fix():
    command = _unprivileged_python()
    base = tempfile.mkdtemp(prefix="gpuprov-ro-")
    try:
        os.chmod(base, 0o755)
        if IS_ROOT:
            os.chown(base, 65534, 65534)
        done = subprocess.run(command + ["-c", UNPRIVILEGED, JOURNAL_SOURCE, base], capture_output=True, timeout=120, check=False)
        assert done.returncode == 0, done.stderr.decode()
        results = json.loads(done.stdout.decode())
    finally:
        for folder, _dirs, _files in os.walk(base):
            os.chmod(folder, 0o700)
        shutil.rmtree(base)
    for name, message in results.items():
        assert message.startswith("JournalError: journal: "), (name, message)
        assert "GPUPROV_JOURNAL" in message and "writable" in message, (name, message)
    ro_state = os.path.join(base, "ro-state")
    assert "cannot create %s/journal.sqlite: directory %s is not writable" % (ro_state, ro_state) in results["ro-state"]
    assert ("cannot create %s/gpuprov/journal.sqlite: directory %s is not writable" % (ro_state, ro_state)
            in results["ro-parent"])
    was = os.path.join(base, "was-writable")
    assert "%s/journal.sqlite is not writable by this user" % was in results["ro-dir-existing"]
    assert "directory %s is read-only" % was in results["ro-dir-existing"]
    assert "%s/journal.sqlite is not writable by this user" % os.path.join(base, "rw") in results["ro-file"]
    assert "chmod u+rw" in results["ro-file"]
