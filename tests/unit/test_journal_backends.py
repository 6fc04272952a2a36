"""The journal interface on both backends, SQLite and PostgreSQL, with the same tests: guarded
writes (version and lease), leases and their expiry, takeover of a dead holder, events, cancel
requests, provider options, the layer above's tables (the vms projection), schema versioning
and the identity check. PostgreSQL is a real server these tests start (tests/pg_server.py).

Time: SQLite's journal clock is a FakeClock; PostgreSQL's is the server's, so "time passes"
is written as moving the stored lease expiries back by as much, on both backends alike."""

from __future__ import annotations

import multiprocessing
import os
import socket
import sqlite3

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import run_options
from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journal import (
    SCHEMA_VERSION, Conflict, JournalError, LeaseHeld,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journal_pg import is_dsn, scrub_dsn
from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journals import open_journal
from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.owners import new_owner
from ansible_collections.gpuprov.cloud.plugins.module_utils import requirements
from ansible_collections.gpuprov.cloud.plugins.module_utils.state_dir import journal_exists, journal_location
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import projection
from ansible_collections.gpuprov.cloud.tests import pg_server
from ansible_collections.gpuprov.cloud.tests.fakes.toy_machine import FakeClock


@pytest.fixture(scope="module")
def server():
    reason = pg_server.unavailable()
    if reason:
        pytest.skip("PostgreSQL journal tests: %s" % reason)
    srv = pg_server.PgServer()
    yield srv
    srv.destroy()


class Backend:
    """One journal location and how to look at it underneath the interface."""

    def __init__(self, kind, location, clock):
        self.kind, self.location, self.clock = kind, location, clock
        self.opened = []

    def open(self, tables=()):
        j = open_journal(self.location, clock=self.clock if self.kind == "sqlite" else None, tables=tables)
        self.opened.append(j)
        return j

    def raw(self, sql, args=()):
        """Rows read straight from the database (a separate connection)."""
        if self.kind == "sqlite":
            db = sqlite3.connect(self.location)
            try:
                return [tuple(r) for r in db.execute(sql, args).fetchall()]
            finally:
                db.close()
        import psycopg  # pylint: disable=import-outside-toplevel
        with psycopg.connect(self.location, password=pg_server.PASSWORD, autocommit=True) as db:
            return [tuple(r) for r in db.execute(sql.replace("?", "%s"), args).fetchall()]

    def write(self, sql, args=()):
        if self.kind == "sqlite":
            db = sqlite3.connect(self.location, isolation_level=None)
            try:
                db.execute(sql, args)
            finally:
                db.close()
        else:
            import psycopg  # pylint: disable=import-outside-toplevel
            with psycopg.connect(self.location, password=pg_server.PASSWORD, autocommit=True) as db:
                db.execute(sql.replace("?", "%s"), args)

    def now(self):
        if self.kind == "sqlite":
            return self.clock()
        return self.raw("SELECT EXTRACT(EPOCH FROM now())::double precision")[0][0]

    def advance(self, seconds):
        """Time passes for the leases: the journal's clock moves on by ``seconds``."""
        if self.kind == "sqlite":
            self.clock.advance(seconds)
        else:
            self.write("UPDATE machines SET lease_expires = lease_expires - ? WHERE lease_expires IS NOT NULL",
                       (seconds,))
            self.write("UPDATE leases SET expires = expires - ?", (seconds,))

    def row(self, key):
        rows = self.raw("SELECT kind, state, label, terminal, version, lease_owner, lease_expires, created_at, "
                        "updated_at, entered_at, cancel_owner, cancel_reason FROM machines WHERE key = ?", (key,))
        return rows[0] if rows else None

    def events(self, key):
        return self.raw("SELECT id, version, event, from_label, to_label, note, owner, at FROM machine_events "
                        "WHERE key = ? ORDER BY id", (key,))


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request, tmp_path, monkeypatch):
    if request.param == "sqlite":
        b = Backend("sqlite", str(tmp_path / "state" / "journal.sqlite"), FakeClock(1000.0))
    else:
        srv = request.getfixturevalue("server")
        monkeypatch.setenv("PGPASSWORD", pg_server.PASSWORD)
        b = Backend("postgresql", srv.new_database(), None)
    yield b
    for j in b.opened:
        j.close()


@pytest.fixture
def journal(backend):
    return backend.open()


def begin(j, key="vm1", owner="me", state=None, ttl=60.0, expected=None, terminal=False, label="A", kind="toy"):
    state = state if state is not None else {"kind": "A", "n": 1}
    return j.begin(key, kind, state, label, terminal, owner, ttl, expected, note="started by %s" % owner)


# -- guarded writes ----------------------------------------------------------------------

def test_begin_and_transitions_commit_state_version_and_events(journal, backend):
    before = backend.now()
    assert begin(journal, state={"kind": "A", "z": 1}, ttl=60.0) == 1
    row = journal.load("vm1")
    assert (row.key, row.kind, row.label, row.terminal, row.version, row.lease_owner) == (
        "vm1", "toy", "A", False, 1, "me")
    assert row.state == {"kind": "A", "z": 1}
    assert row.lease_expires - row.updated_at == pytest.approx(60.0)
    assert before - 1 <= row.updated_at <= backend.now() + 1
    assert journal.transition("vm1", "me", 1, {"kind": "B"}, "B", False, "A", note="made i-1") == 2
    assert journal.transition("vm1", "me", 2, {"kind": "Done"}, "Done", True, "B", note="fin", kind="toy2") == 3
    row = journal.load("vm1")
    assert (row.state, row.label, row.terminal, row.version, row.kind) == ({"kind": "Done"}, "Done", True, 3, "toy2")
    assert [(e["version"], e["event"], e["from"], e["to"], e["note"], e["owner"]) for e in journal.events("vm1")] == [
        (1, "begin", None, "A", "started by me", "me"), (2, "transition", "A", "B", "made i-1", "me"),
        (3, "transition", "B", "Done", "fin", "me")]
    assert backend.row("vm1")[1] == '{"kind": "Done"}'   # deterministic JSON


def test_a_stale_version_or_another_owner_conflicts_and_changes_nothing(journal, backend):
    other = backend.open()
    begin(journal)
    seen = other.load("vm1").version
    assert journal.transition("vm1", "me", 1, {"kind": "B"}, "B", False, "A") == 2
    before = backend.row("vm1"), backend.events("vm1")
    with pytest.raises(Conflict) as info:
        other.transition("vm1", "me", seen, {"kind": "X"}, "X", True, "A", "stale")
    assert "vm1" in str(info.value) and "version 1" in str(info.value)
    with pytest.raises(Conflict):
        other.transition("vm1", "intruder", 2, {"kind": "X"}, "X", False, "B")
    with pytest.raises(Conflict):
        other.transition("ghost", "me", 1, {"kind": "B"}, "B", False, "A")
    assert (backend.row("vm1"), backend.events("vm1")) == before
    assert other.transition("vm1", "me", 2, {"kind": "C"}, "C", False, "B") == 3   # the connection still works


def test_begin_of_a_key_another_run_created_or_changed_conflicts(journal, backend):
    other = backend.open()
    begin(journal, owner="me", ttl=30.0)
    before = backend.row("vm1"), backend.events("vm1")
    with pytest.raises(Conflict) as info:
        begin(other, owner="other", expected=None)
    assert "vm1" in str(info.value)
    with pytest.raises(Conflict):
        begin(other, owner="other", expected=1)   # a live lease of another owner
    assert (backend.row("vm1"), backend.events("vm1")) == before
    backend.advance(31)
    assert begin(other, owner="other", expected=1) == 2
    with pytest.raises(Conflict) as info:
        begin(journal, owner="me", expected=1)
    assert "expected version 1" in str(info.value)
    assert journal.load("vm1").lease_owner == "other"


def test_a_failed_transaction_writes_nothing(journal):
    journal.ensure_tables(["CREATE TABLE IF NOT EXISTS extras (name TEXT PRIMARY KEY, value TEXT)"])
    with pytest.raises(RuntimeError):
        with journal.transaction() as tx:
            tx.execute("INSERT INTO extras (name, value) VALUES (?, ?)", ("a", "1"))
            raise RuntimeError("boom")
    assert journal.query("SELECT name FROM extras") == []


# -- leases --------------------------------------------------------------------------------

def test_a_held_lease_is_refused_until_it_expires_then_taken_over(journal, backend):
    other = backend.open()
    journal.acquire("nobody", "me", 30.0)
    assert journal.load("nobody") is None and journal.keys() == []
    begin(journal, owner="holder-1", ttl=100.0)
    backend.advance(40)
    with pytest.raises(LeaseHeld) as info:
        other.acquire("vm1", "holder-2", 100.0)
    msg = str(info.value)
    assert "vm1" in msg and "holder-1" in msg and "60 s" in msg and "lease expires" in msg
    assert other.live_holder("vm1") == "holder-1"
    backend.advance(61)
    assert other.live_holder("vm1") is None
    other.acquire("vm1", "holder-2", 100.0)
    row = other.load("vm1")
    assert row.lease_owner == "holder-2"
    assert row.lease_expires - backend.now() == pytest.approx(100.0, abs=2.0)
    assert other.holds("vm1", "holder-2") and not other.holds("vm1", "holder-1")
    assert journal.renew("vm1", "holder-1", 100.0) is False   # the old owner learns it lost
    with pytest.raises(Conflict):
        journal.transition("vm1", "holder-1", 1, {"kind": "B"}, "B", False, "A")


def test_renew_release_and_holds(journal, backend):
    begin(journal, owner="me", ttl=10.0)
    backend.advance(8)
    assert journal.renew("vm1", "me", 10.0) is True
    assert journal.load("vm1").lease_expires - backend.now() == pytest.approx(10.0, abs=2.0)
    assert journal.renew("vm1", "intruder", 10.0) is False
    assert journal.renew("missing", "me", 10.0) is False
    backend.advance(100)
    assert journal.holds("vm1", "me")   # expiry alone is no loss: nobody took over
    assert journal.transition("vm1", "me", 1, {"kind": "B"}, "B", False, "A") == 2
    journal.release("vm1", "intruder")
    assert journal.holds("vm1", "me")
    journal.release("vm1", "me")
    row = journal.load("vm1")
    assert (row.lease_owner, row.lease_expires) == (None, None)
    journal.acquire("vm1", "you", 10.0)
    assert journal.holds("vm1", "you") and journal.live_holder("vm1") == "you"


def test_a_key_without_a_row_has_a_lease_of_its_own_that_begin_honours(journal, backend):
    """The orphan sweep leases a VM name nobody journalled: no other run may take the name, nor
    create its row, until the sweep lets go; the holder's own begin moves the lease onto the row."""
    other = backend.open()
    sweep = new_owner("sweep")
    journal.acquire("vm1", sweep, 100.0)
    assert journal.load("vm1") is None and journal.keys() == []
    assert other.live_holder("vm1") == sweep and other.holds("vm1", sweep) and not other.holds("vm1", "run")
    with pytest.raises(LeaseHeld) as info:
        other.acquire("vm1", "run", 100.0)
    msg = str(info.value)
    assert "vm1" in msg and "orphan sweep" in msg and sweep in msg
    with pytest.raises(LeaseHeld):
        begin(other, owner="run")   # a run that never asked for the lease creates nothing either
    assert other.load("vm1") is None
    backend.advance(60)
    assert journal.renew("vm1", sweep, 100.0) is True
    assert journal.renew("vm1", "run", 100.0) is False
    backend.advance(60)   # 120 s after acquiring, 60 s after the renewal: still held
    with pytest.raises(LeaseHeld):
        other.acquire("vm1", "run", 100.0)
    journal.release("vm1", "run")   # not the holder: nothing changes
    assert other.live_holder("vm1") == sweep
    journal.release("vm1", sweep)
    assert other.live_holder("vm1") is None and not other.holds("vm1", sweep)
    other.acquire("vm1", "run", 100.0)
    assert begin(other, owner="run") == 1
    row = other.load("vm1")
    assert row.lease_owner == "run" and other.holds("vm1", "run")
    with pytest.raises(LeaseHeld):
        journal.acquire("vm1", sweep, 100.0)   # the row's lease now
    other.release("vm1", "run")
    assert journal.live_holder("vm1") is None
    assert backend.raw("SELECT key, owner FROM leases") == []   # begin moved it; nothing is left behind


def test_a_row_less_lease_expires_and_a_dead_holder_loses_it_at_once(journal, backend):
    journal.acquire("vm1", "some-other-host:1:1:sweep-deadbeef", 30.0)
    with pytest.raises(LeaseHeld):
        journal.acquire("vm1", "me", 30.0)
    backend.advance(31)
    journal.acquire("vm1", "me", 30.0)
    assert journal.holds("vm1", "me")
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    journal.acquire("vm2", "%s:%d:1:sweep-deadbeef" % (socket.gethostname(), pid), 300.0)
    assert journal.live_holder("vm2") is None
    assert begin(journal, key="vm2", owner="me") == 1


def test_a_dead_holder_on_this_host_is_taken_over_at_once(journal):
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    dead = "%s:%d:1:deadbeef" % (socket.gethostname(), pid)
    begin(journal, owner=dead, ttl=300.0)
    assert journal.live_holder("vm1") is None
    mine = new_owner()
    journal.acquire("vm1", mine, 300.0)
    assert journal.live_holder("vm1") == mine


def test_a_holder_on_another_host_is_alive_until_its_lease_expires(journal, backend):
    elsewhere = "some-other-host:1:1:deadbeef"
    begin(journal, owner=elsewhere, ttl=300.0)
    with pytest.raises(LeaseHeld):
        journal.acquire("vm1", new_owner(), 300.0)
    backend.advance(301)
    journal.acquire("vm1", "me", 300.0)
    assert journal.holds("vm1", "me")


def _race(location, barrier, results, index):
    j = open_journal(location)
    try:
        barrier.wait()
        try:
            j.begin("vm1", "toy", {"n": index}, "A", False, "run-%d" % index, 60.0, None)
            results.put(("won", index))
        except Conflict:
            results.put(("conflict", index))
    finally:
        j.close()


def test_eight_processes_creating_one_key_make_one_row(journal, backend):
    ctx = multiprocessing.get_context("fork")
    barrier, results = ctx.Barrier(8), ctx.Queue()
    procs = [ctx.Process(target=_race, args=(backend.location, barrier, results, i)) for i in range(8)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(60)
    outcomes = sorted(results.get(timeout=5)[0] for _proc in procs)
    assert outcomes == ["conflict"] * 7 + ["won"]
    assert len(journal.events("vm1")) == 1 and journal.load("vm1").version == 1


# -- notes, cancels, options, keys ------------------------------------------------------------

def test_events_since_the_last_begin_are_the_latest_runs_only(journal):
    """A run's result shows its own events: the journal reads them from the key's last begin on (a VM provisioned
    again and again keeps every earlier run's events), and all of them for a key that has no begin."""
    begin(journal, key="c")
    journal.note("c", "me", 1, "A", "first run")
    assert [e["note"] for e in journal.events("c", since_last_begin=True)] == ["started by me", "first run"]
    version = journal.begin("c", "toy", {"kind": "A", "n": 2}, "A", False, "me", 60.0, 1, note="started again")
    journal.note("c", "me", version, "A", "second run")
    begin(journal, key="d")   # another key's begin in between changes nothing for c
    journal.note("c", "me", version, "A", "still second")
    assert [e["note"] for e in journal.events("c", since_last_begin=True)] == ["started again", "second run",
                                                                               "still second"]
    assert [e["note"] for e in journal.events("c")] == ["started by me", "first run", "started again", "second run",
                                                        "still second"]
    assert journal.events("zzz", since_last_begin=True) == []


def test_notes_events_and_keys(journal):
    begin(journal, key="b")
    begin(journal, key="a")
    for i in range(3):
        journal.note("b", "me", 1, "A", "b%d" % i)
    journal.note("a", "me", 1, "A", "failed: x", event="retry")
    with pytest.raises(Conflict):
        journal.note("a", "intruder", 1, "A", "no")
    assert [e["note"] for e in journal.events("b")] == ["started by me", "b0", "b1", "b2"]
    assert [e["note"] for e in journal.events("b", limit=2)] == ["b1", "b2"]
    assert journal.events("a")[-1]["event"] == "retry"
    assert journal.events("zzz") == []
    assert journal.load("b").version == 1
    assert journal.keys() == ["a", "b"]
    assert journal.load("missing") is None


def test_cancel_requests_reach_only_the_holder_and_a_fresh_run_starts_clean(journal):
    assert journal.request_cancel("missing", "run-1", "x") is False
    begin(journal, owner="run-1")
    assert journal.request_cancel("vm1", "run-0", "stale holder") is False
    assert journal.request_cancel("vm1", "run-1", "down asked to stop") is True
    assert journal.cancel_request("vm1", "run-1") == "down asked to stop"
    assert journal.cancel_request("vm1", "run-2") is None
    journal.clear_cancel("vm1")
    assert journal.cancel_request("vm1", "run-1") is None
    assert journal.request_cancel("vm1", "run-1", "") is True
    assert journal.cancel_request("vm1", "run-1") == "cancel requested"
    journal.transition("vm1", "run-1", 1, {"kind": "Done"}, "Done", True, "A")
    journal.release("vm1", "run-1")
    begin(journal, owner="run-1", expected=2)
    assert journal.cancel_request("vm1", "run-1") is None


def test_options_are_fenced_by_the_lease_and_kept_per_cloud(journal, backend):
    with pytest.raises(Conflict):
        run_options.record(journal, "vm1", "run-1", "docker", {"docker_host": "unix:///x"})
    begin(journal, owner="run-1")
    run_options.record(journal, "vm1", "run-1", "docker", {"docker_host": "unix:///x"})
    run_options.record(journal, "vm1", "run-1", "local", {"root": "/srv/vms"})
    run_options.record(journal, "vm1", "run-1", "docker", {"docker_host": "tcp://h:2376"})
    with pytest.raises(Conflict):
        run_options.record(journal, "vm1", "intruder", "docker", {"docker_host": "evil"})
    assert run_options.recorded(backend.open(), "vm1") == {"docker": {"docker_host": "tcp://h:2376"}, "local": {"root": "/srv/vms"}}


# -- the layer above's tables: the vms projection ------------------------------------------------

def test_the_vms_projection_through_plain_sql(backend):
    j = backend.open(tables=projection.TABLES)
    projection.upsert_vm(j, "gpu-1", cloud="local", status="provisioning", ssh_port=2222, detail={"why": "100%?"})
    projection.upsert_vm(j, "gpu-1", status="running", ssh_host="10.0.0.5")
    projection.upsert_vm(j, "gpu-0", cloud="docker")
    row = projection.vm(j, "gpu-1")
    assert (row["cloud"], row["status"], row["ssh_host"], row["ssh_port"], row["detail"]) == (
        "local", "running", "10.0.0.5", 2222, {"why": "100%?"})
    assert abs(row["updated_at"] - backend.now()) < 5   # a full-precision time, not a 32-bit float
    assert [r["name"] for r in projection.vms(backend.open())] == ["gpu-0", "gpu-1"]
    projection.delete_vm(j, "gpu-0")
    assert [r["name"] for r in projection.vms(j)] == ["gpu-1"]
    assert j.query("SELECT name FROM vms WHERE status = 'running' AND name LIKE ?", ("gpu-%",)) == [("gpu-1",)]


# -- schema, identity ------------------------------------------------------------------------------

def test_one_journal_id_and_the_schema_version_survive_reopening(journal, backend):
    begin(journal)
    again = backend.open()
    assert again.journal_id == journal.journal_id and len(journal.journal_id) == 32
    assert backend.raw("SELECT value FROM meta WHERE name = 'schema'") == [(str(SCHEMA_VERSION),)]
    assert again.load("vm1").version == 1


def test_a_newer_schema_is_refused(journal, backend):
    backend.write("UPDATE meta SET value = ? WHERE name = 'schema'", (str(SCHEMA_VERSION + 1),))
    with pytest.raises(JournalError) as info:
        backend.open()
    assert "newer gpuprov.cloud" in str(info.value)


def test_a_database_of_something_else_is_refused_and_left_alone(backend):
    if backend.kind == "sqlite":
        os.makedirs(os.path.dirname(backend.location))
    backend.write("CREATE TABLE accounts (id INTEGER PRIMARY KEY, owner TEXT)")
    with pytest.raises(JournalError) as info:
        backend.open()
    msg = str(info.value)
    assert "is not a gpuprov journal" in msg and "left unchanged" in msg
    tables = ("SELECT name FROM sqlite_master WHERE type = 'table'" if backend.kind == "sqlite" else
              "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")
    assert backend.raw(tables) == [("accounts",)]


# -- PostgreSQL only: the server's clock, selection, errors without secrets ----------------------------

def test_postgresql_lease_expiry_is_the_servers_clock_not_the_controllers(server, monkeypatch):
    monkeypatch.setenv("PGPASSWORD", pg_server.PASSWORD)
    dsn = server.new_database()
    skewed = open_journal(dsn, clock=lambda: 0.0)   # a controller whose clock is far off
    try:
        begin(skewed, owner="me", ttl=60.0)
        row = skewed.load("vm1")
        server_now = skewed.server_time()
        assert row.lease_expires - server_now == pytest.approx(60.0, abs=2.0)
        assert skewed.renew("vm1", "me", 5.0) and skewed.load("vm1").lease_expires < server_now + 10
    finally:
        skewed.close()


def test_a_dsn_is_selected_and_shown_without_its_password(server, monkeypatch):
    monkeypatch.delenv("PGPASSWORD", raising=False)
    with_secret = server.dsn(pg_server.database_name(server.new_database()), password=True)
    assert is_dsn(with_secret) and is_dsn("postgres://h/db") and not is_dsn("/tmp/postgresql://x")
    monkeypatch.setenv("GPUPROV_JOURNAL", with_secret)
    assert journal_location() == with_secret and journal_exists(with_secret)
    assert journal_location("~/j.sqlite") == os.path.expanduser("~/j.sqlite")
    j = projection.open_journal()
    try:
        assert pg_server.PASSWORD not in j.path and j.path == scrub_dsn(with_secret)
        assert j.path.startswith("postgresql://gpuprov@127.0.0.1:")
    finally:
        j.close()
    assert scrub_dsn("postgresql://u:s3cret@h:5/db?password=s3cret&sslmode=require") == (
        "postgresql://u@h:5/db?sslmode=require")


@pytest.mark.parametrize("dsn", ["postgresql://u:pa/ss3cret@h/db", "postgresql://u:pa?ss3cret@h/db",
                                 "postgres://u:pa#ss3cret@h:5432/db?sslmode=require"])
def test_a_password_with_an_unencoded_separator_is_never_shown(dsn):
    shown = scrub_dsn(dsn)
    assert "ss3cret" not in shown and "u:" not in shown and "h/db" not in shown
    assert shown.startswith("postgresql://(not shown: its user part holds an unencoded") and "%2F" in shown


def test_the_password_option_is_used_and_a_wrong_one_is_a_clear_error(server, monkeypatch):
    monkeypatch.delenv("PGPASSWORD", raising=False)
    dsn = server.new_database()
    open_journal(dsn, password=pg_server.PASSWORD).close()
    with pytest.raises(JournalError) as info:
        open_journal(dsn, password="not-the-password")
    msg = str(info.value)
    assert dsn in msg and "password authentication failed" in msg and "not-the-password" not in msg
    with pytest.raises(JournalError) as info:
        open_journal(server.dsn(pg_server.database_name(dsn)).replace("gpuprov@", "gpuprov:wrong-one@"))
    assert "wrong-one" not in str(info.value) and "password authentication failed" in str(info.value)


def test_a_refused_connection_is_a_clear_error_naming_the_journal(monkeypatch):
    monkeypatch.setenv("PGPASSWORD", "secret-in-env")
    port = pg_server._free_port()   # pylint: disable=protected-access
    dsn = "postgresql://gpuprov:inline-secret@127.0.0.1:%d/journal" % port
    if pg_server.unavailable() and "psycopg" in pg_server.unavailable():
        pytest.skip(pg_server.unavailable())
    with pytest.raises(JournalError) as info:
        open_journal(dsn)
    msg = str(info.value)
    assert "postgresql://gpuprov@127.0.0.1:%d/journal" % port in msg
    assert "inline-secret" not in msg and "secret-in-env" not in msg
    assert "server runs and accepts connections" in msg


def test_a_server_restart_fails_one_call_cleanly_and_the_next_reconnects(server, monkeypatch):
    monkeypatch.setenv("PGPASSWORD", pg_server.PASSWORD)
    j = open_journal(server.new_database())
    try:
        begin(j, owner="me")
        server.restart()
        try:
            j.transition("vm1", "me", 1, {"kind": "B"}, "B", False, "A")
        except JournalError as exc:
            assert "run again" in str(exc)
        row = j.load("vm1")   # reconnected
        assert row.version in (1, 2)
        assert j.transition("vm1", "me", row.version, {"kind": "C"}, "C", False, row.label) == row.version + 1
    finally:
        j.close()


def test_a_sqlite_journal_never_imports_psycopg_and_a_missing_one_is_named():
    """Every module and action start reaches journal_pg (the state directory's DSN check): psycopg is
    imported only for a PostgreSQL journal, and without it such a journal is refused with the fix."""
    import subprocess
    import sys
    probe = (
        "import sys\n"
        "import ansible_collections.gpuprov.cloud.plugins.action.vm\n"
        "from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journals import open_journal\n"
        "print('after-import', 'psycopg' in sys.modules)\n"
        "sys.modules['psycopg'] = None   # as if not installed\n"
        "try:\n"
        "    open_journal('postgresql://u:secret@127.0.0.1:1/db')\n"
        "except Exception as exc:\n"
        "    print('refused', type(exc).__name__, exc)\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                          env=dict(os.environ))
    assert "after-import False" in done.stdout
    assert "refused JournalError" in done.stdout
    # The exact command: this Python's pip and the installed collection's requirements/postgresql.txt.
    assert requirements.install_command("psycopg") in done.stdout
    assert requirements.install_command("psycopg").endswith("/requirements/postgresql.txt")
    assert "secret" not in done.stdout


# -- what a fleet shares (fleet/shared.py): its claims and holds on either backend ------------

def test_the_fleets_claims_answers_and_throttle_holds(journal):
    from ansible_collections.gpuprov.cloud.plugins.module_utils.fleet.shared import FleetRows
    rows = FleetRows(journal)
    assert rows.claim("plan|x", "a", 30, None) and not rows.claim("plan|x", "b", 30, None)
    answer = rows.put("plan|x", "a", [{"offer": "o1"}])
    assert rows.answer("plan|x") == answer and answer.value == [{"offer": "o1"}]
    assert not rows.claim("plan|x", "b", 30, None)        # an answer came since b looked
    assert rows.claim("plan|x", "b", 30, answer)
    rows.release("plan|x", "b")
    assert rows.hold("cloud:acct") is None
    held = rows.throttled("cloud:acct", "HTTP 429: slow down", 20.0)
    assert 0 < held.seconds <= 20.0 and rows.hold("cloud:acct").reason == "HTTP 429: slow down"
    assert rows.throttled("cloud:acct", "again", None).seconds >= held.seconds - 1   # never shortened
    # The budget: two at once, then the third waits its turn (a reservation), the fourth after it.
    assert rows.take("cloud:acct", [(2.0, 0.001)]) == 0.0 and rows.take("cloud:acct", [(2.0, 0.001)]) == 0.0
    third, fourth = rows.take("cloud:acct", [(2.0, 0.001)]), rows.take("cloud:acct", [(2.0, 0.001)])
    assert 0 < third < fourth <= 2000.0
