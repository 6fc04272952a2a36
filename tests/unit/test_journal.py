"""The SQLite journal: file safety (0600/0700, garbage, unwritable places, newer
schemas), guarded writes (version and lease), leases, events and the tables a layer above adds.
Every journal lives under pytest's tmp_path; time is a FakeClock, never slept on."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import stat

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import run_options
from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journal import (
    SCHEMA_VERSION, Conflict, Journal, JournalError, LeaseHeld,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.owners import new_owner

IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
# The fixtures clock, jpath and journal are tests/unit/conftest.py's.


def mode(path) -> int:
    return stat.S_IMODE(os.stat(str(path)).st_mode)


def begin(j, key="vm1", owner="me", state=None, ttl=60.0, expected=None, terminal=False, label="A", kind="toy"):
    state = state if state is not None else {"kind": "A", "n": 1}
    return j.begin(key, kind, state, label, terminal, owner, ttl, expected, note="started by %s" % owner)


def raw_row(path, key):
    db = sqlite3.connect(path)
    try:
        return db.execute("SELECT kind, state, label, terminal, version, lease_owner, lease_expires, "
                          "created_at, updated_at, entered_at FROM machines WHERE key = ?", (key,)).fetchone()
    finally:
        db.close()


def raw_events(path, key):
    db = sqlite3.connect(path)
    try:
        return db.execute("SELECT id, key, version, event, from_label, to_label, note, owner, at "
                          "FROM machine_events WHERE key = ? ORDER BY id", (key,)).fetchall()
    finally:
        db.close()


# -- the file ------------------------------------------------------------------------

def test_new_journal_is_0600_in_a_new_0700_parent(tmp_path, clock):
    path = tmp_path / "new-parent" / "journal.sqlite"
    old = os.umask(0o022)   # a permissive umask must not make the journal readable by others
    try:
        j = Journal(str(path), clock=clock)
    finally:
        os.umask(old)
    try:
        assert path.is_file()
        assert mode(path) == 0o600
        assert mode(path.parent) == 0o700
        assert j.path == str(path)
    finally:
        j.close()


def test_wal_and_shm_files_are_0600(jpath, clock):
    old = os.umask(0o022)
    try:
        j = Journal(jpath, clock=clock)
        begin(j)   # a write: WAL mode keeps -wal and -shm beside the file while open
        second = Journal(jpath, clock=clock)   # a reopen chmods what already exists
    finally:
        os.umask(old)
    try:
        assert j._db.execute("PRAGMA journal_mode").fetchone()[0].lower() == "wal"
        for suffix in ("-wal", "-shm"):
            assert os.path.exists(jpath + suffix), suffix
            assert mode(jpath + suffix) == 0o600, suffix
    finally:
        second.close()
        j.close()


def test_existing_journal_file_is_tightened_to_0600(jpath, clock):
    os.makedirs(os.path.dirname(jpath), mode=0o755)
    Journal(jpath, clock=clock).close()
    os.chmod(jpath, 0o644)
    j = Journal(jpath, clock=clock)
    j.close()
    assert mode(jpath) == 0o600


def test_existing_parent_directory_is_left_alone(jpath, clock):
    os.makedirs(os.path.dirname(jpath))
    os.chmod(os.path.dirname(jpath), 0o755)
    Journal(jpath, clock=clock).close()
    assert mode(os.path.dirname(jpath)) == 0o755


def test_path_is_absolute_and_user_expanded(tmp_path, monkeypatch, clock):
    monkeypatch.setenv("HOME", str(tmp_path))
    j = Journal("~/sub/j.sqlite", clock=clock)
    try:
        assert j.path == str(tmp_path / "sub" / "j.sqlite")
        assert os.path.isabs(j.path)
    finally:
        j.close()


@pytest.mark.parametrize("content", [
    pytest.param(bytes(range(256)) * 16, id="binary-garbage"),
    pytest.param(b"this is not a database, it is a shopping list\n" * 50, id="text"),
    pytest.param(b"SQLite format 3\x00" + b"\xff" * 4080, id="sqlite-header-then-garbage"),
])
def test_corrupt_journal_raises_journal_error_naming_path_and_fix(tmp_path, clock, content):
    path = tmp_path / "journal.sqlite"
    path.write_bytes(content)
    with pytest.raises(JournalError) as info:
        Journal(str(path), clock=clock)
    exc = info.value
    assert not isinstance(exc, sqlite3.Error)
    assert exc.__class__ is JournalError  # exactly, not a subclass
    msg = str(exc)
    assert str(path) in msg
    assert "move it aside" in msg and "another path" in msg
    assert path.read_bytes() == content   # the evidence is not overwritten


def test_path_below_a_regular_file_raises_journal_error(tmp_path, clock):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    target = blocker / "journal.sqlite"
    with pytest.raises(JournalError) as info:
        Journal(str(target), clock=clock)
    msg = str(info.value)
    assert str(target) in msg
    assert "cannot create" in msg and "writable path" in msg
    assert "GPUPROV_JOURNAL" in msg


@pytest.mark.skipif(IS_ROOT, reason="root bypasses directory permissions")
def test_path_in_a_read_only_directory_raises_journal_error(tmp_path, clock):
    ro = tmp_path / "ro"
    ro.mkdir()
    os.chmod(str(ro), 0o500)
    try:
        with pytest.raises(JournalError) as info:
            Journal(str(ro / "journal.sqlite"), clock=clock)
        assert str(ro / "journal.sqlite") in str(info.value)
    finally:
        os.chmod(str(ro), 0o700)


@pytest.mark.skipif(IS_ROOT, reason="root bypasses file permissions")
def test_unreadable_journal_file_raises_journal_error(tmp_path, clock):
    ro = tmp_path / "ro"
    ro.mkdir()
    path = ro / "journal.sqlite"
    Journal(str(path), clock=clock).close()
    os.chmod(str(ro), 0o500)   # SQLite cannot create -wal/-shm beside it
    try:
        with pytest.raises(JournalError) as info:
            Journal(str(path), clock=clock)
        assert str(path) in str(info.value)
    finally:
        os.chmod(str(ro), 0o700)


def test_a_directory_at_the_journal_path_raises_journal_error(tmp_path, clock):
    target = tmp_path / "somedir"
    target.mkdir()
    os.chmod(str(target), 0o755)
    try:
        with pytest.raises(JournalError) as info:
            Journal(str(target), clock=clock)
        assert str(target) in str(info.value)
    finally:
        os.chmod(str(target), 0o755)


def test_a_directory_at_the_journal_path_keeps_its_mode(tmp_path, clock):
    target = tmp_path / "somedir"
    target.mkdir()
    os.chmod(str(target), 0o755)
    try:
        with pytest.raises(JournalError):
            Journal(str(target), clock=clock)
        assert mode(target) == 0o755
    finally:
        os.chmod(str(target), 0o755)


def test_a_foreign_sqlite_database_is_refused_at_open(tmp_path, clock):
    path = tmp_path / "other.sqlite"
    db = sqlite3.connect(str(path))
    db.execute("CREATE TABLE machines (x)")
    db.commit()
    db.close()
    try:
        j = Journal(str(path), clock=clock)
    except JournalError as exc:
        assert str(path) in str(exc)
    else:
        try:
            j.load("k")
        except sqlite3.Error as exc:
            pytest.fail("a foreign database surfaced as a raw sqlite error: %r" % exc)
        finally:
            j.close()


def test_schema_newer_than_supported_raises_journal_error(jpath, clock):
    j = Journal(jpath, clock=clock)
    j._db.execute("UPDATE meta SET value = ? WHERE name = 'schema'", (str(SCHEMA_VERSION + 1),))
    j.close()
    with pytest.raises(JournalError) as info:
        Journal(jpath, clock=clock)
    msg = str(info.value)
    assert jpath in msg
    assert "newer" in msg and "upgrade" in msg
    assert "schema %d > %d" % (SCHEMA_VERSION + 1, SCHEMA_VERSION) in msg


def test_schema_version_recorded_and_data_survives_reopen(jpath, clock):
    j = Journal(jpath, clock=clock)
    begin(j, state={"kind": "B", "handle": "i-1"}, label="B")
    j.close()
    j = Journal(jpath, clock=clock)
    try:
        assert j._db.execute("SELECT value FROM meta WHERE name = 'schema'").fetchone()[0] == str(SCHEMA_VERSION)
        row = j.load("vm1")
        assert row.state == {"kind": "B", "handle": "i-1"}
        assert row.version == 1
    finally:
        j.close()


def test_new_owner_is_unique_and_names_host_pid_and_start_time():
    a, b = new_owner(), new_owner()
    assert a != b
    host, pid, started, tag = a.split(":")
    assert (host, pid) == (socket.gethostname(), str(os.getpid()))
    assert started.isdigit() or started == "-"
    assert len(tag) == 8


# -- machines: begin / transition / version guard ---------------------------------------

def test_begin_creates_version_1_under_our_lease(journal, jpath, clock):
    v = begin(journal, state={"kind": "A", "z": 1, "a": [1, 2]}, ttl=60.0)
    assert v == 1
    row = journal.load("vm1")
    assert (row.key, row.kind, row.label, row.terminal, row.version) == ("vm1", "toy", "A", False, 1)
    assert row.state == {"kind": "A", "z": 1, "a": [1, 2]}
    assert (row.lease_owner, row.lease_expires) == ("me", 1060.0)
    assert row.updated_at == row.entered_at == 1000.0
    raw = raw_row(jpath, "vm1")
    assert json.loads(raw[1]) == row.state
    assert raw[1] == json.dumps(row.state, sort_keys=True)   # deterministic JSON
    assert raw[7] == 1000.0   # created_at
    events = journal.events("vm1")
    assert [(e["version"], e["event"], e["from"], e["to"], e["note"], e["owner"], e["at"]) for e in events] == [
        (1, "begin", None, "A", "started by me", "me", 1000.0)]


def test_transition_commits_state_version_and_event(journal, jpath, clock):
    begin(journal)
    clock.advance(5)
    v = journal.transition("vm1", "me", 1, {"kind": "B", "handle": "i-1"}, "B", False, "A", note="made i-1")
    assert v == 2
    clock.advance(5)
    v = journal.transition("vm1", "me", 2, {"kind": "Done"}, "Done", True, "B", note="fin", kind="toy2")
    assert v == 3
    row = journal.load("vm1")
    assert (row.state, row.label, row.terminal, row.version, row.kind) == ({"kind": "Done"}, "Done", True, 3, "toy2")
    assert row.updated_at == row.entered_at == 1010.0
    assert raw_row(jpath, "vm1")[7] == 1000.0   # created_at unchanged
    events = [(e["version"], e["event"], e["from"], e["to"], e["note"], e["at"]) for e in journal.events("vm1")]
    assert events == [(1, "begin", None, "A", "started by me", 1000.0),
                      (2, "transition", "A", "B", "made i-1", 1005.0),
                      (3, "transition", "B", "Done", "fin", 1010.0)]


def test_transition_without_kind_keeps_kind(journal):
    begin(journal)
    journal.transition("vm1", "me", 1, {"kind": "B"}, "B", False, "A")
    assert journal.load("vm1").kind == "toy"


def test_stale_version_on_a_second_connection_conflicts_and_changes_nothing(journal, jpath, clock):
    other = Journal(jpath, clock=clock)
    try:
        begin(journal)
        seen_by_other = other.load("vm1").version
        assert journal.transition("vm1", "me", 1, {"kind": "B"}, "B", False, "A", "first") == 2
        before_row, before_events = raw_row(jpath, "vm1"), raw_events(jpath, "vm1")
        with pytest.raises(Conflict) as info:
            other.transition("vm1", "me", seen_by_other, {"kind": "X"}, "X", True, "A", "stale")
        assert "vm1" in str(info.value) and "version 1" in str(info.value)
        assert isinstance(info.value, JournalError)
        assert raw_row(jpath, "vm1") == before_row
        assert raw_events(jpath, "vm1") == before_events
        # the other connection still works, and with the current version it may write
        assert other.transition("vm1", "me", 2, {"kind": "C"}, "C", False, "B") == 3
    finally:
        other.close()


def test_transition_by_a_non_owner_conflicts_even_with_the_current_version(journal, jpath):
    begin(journal, owner="me")
    before = raw_row(jpath, "vm1"), raw_events(jpath, "vm1")
    with pytest.raises(Conflict):
        journal.transition("vm1", "intruder", 1, {"kind": "X"}, "X", False, "A")
    assert (raw_row(jpath, "vm1"), raw_events(jpath, "vm1")) == before


def test_transition_of_a_missing_key_conflicts(journal):
    with pytest.raises(Conflict):
        journal.transition("ghost", "me", 1, {"kind": "B"}, "B", False, "A")
    assert journal.load("ghost") is None
    assert journal.events("ghost") == []


def test_begin_with_a_stale_expected_version_conflicts_and_changes_nothing(journal, jpath, clock):
    other = Journal(jpath, clock=clock)
    try:
        begin(journal)
        journal.transition("vm1", "me", 1, {"kind": "Done"}, "Done", True, "A")
        journal.release("vm1", "me")
        stale = 1
        before = raw_row(jpath, "vm1"), raw_events(jpath, "vm1")
        with pytest.raises(Conflict) as info:
            begin(other, owner="other", expected=stale)
        assert "expected version 1" in str(info.value)
        assert (raw_row(jpath, "vm1"), raw_events(jpath, "vm1")) == before
        # with the version it read, a fresh begin replaces the terminal row
        assert begin(other, owner="other", expected=2, state={"kind": "A", "again": True}) == 3
        row = other.load("vm1")
        assert (row.version, row.state, row.lease_owner, row.terminal) == (3, {"kind": "A", "again": True},
                                                                           "other", False)
    finally:
        other.close()


def test_begin_of_a_new_key_that_another_run_created_conflicts(journal, jpath, clock):
    other = Journal(jpath, clock=clock)
    try:
        begin(journal, owner="me")
        before = raw_row(jpath, "vm1"), raw_events(jpath, "vm1")
        with pytest.raises(Conflict) as info:
            begin(other, owner="other", expected=None)
        assert "vm1" in str(info.value)
        assert (raw_row(jpath, "vm1"), raw_events(jpath, "vm1")) == before
    finally:
        other.close()


def test_begin_over_a_live_lease_of_another_owner_conflicts_until_it_expires(journal, jpath, clock):
    begin(journal, owner="first", ttl=30.0)
    before = raw_row(jpath, "vm1"), raw_events(jpath, "vm1")
    with pytest.raises(Conflict):
        begin(journal, owner="second", expected=1)
    assert (raw_row(jpath, "vm1"), raw_events(jpath, "vm1")) == before
    clock.advance(31)
    assert begin(journal, owner="second", expected=1) == 2
    assert journal.load("vm1").lease_owner == "second"


# -- leases ------------------------------------------------------------------------------

def test_acquire_on_a_missing_key_creates_nothing(journal):
    journal.acquire("nobody", "me", 30.0)
    assert journal.load("nobody") is None
    assert journal.keys() == []


def test_acquire_while_another_holds_an_unexpired_lease_raises_lease_held(journal, jpath, clock):
    other = Journal(jpath, clock=clock)
    try:
        begin(journal, owner="holder-1", ttl=100.0)
        clock.advance(40)
        with pytest.raises(LeaseHeld) as info:
            other.acquire("vm1", "holder-2", 100.0)
        msg = str(info.value)
        assert "vm1" in msg and "holder-1" in msg and "another run" in msg
        assert "60 s" in msg          # how long to wait
        assert "lease expires" in msg  # what to do if that run is dead
        assert isinstance(info.value, JournalError)
        row = other.load("vm1")
        assert (row.lease_owner, row.lease_expires) == ("holder-1", 1100.0)
        # at expiry it may take over
        clock.advance(61)
        other.acquire("vm1", "holder-2", 100.0)
        row = other.load("vm1")
        assert (row.lease_owner, row.lease_expires) == ("holder-2", clock.now + 100.0)
        assert other.holds("vm1", "holder-2") and not other.holds("vm1", "holder-1")
        assert journal.renew("vm1", "holder-1", 100.0) is False   # the old owner learns it lost
    finally:
        other.close()


def test_acquire_by_the_holder_extends_and_after_release_anyone_may(journal, clock):
    begin(journal, owner="me", ttl=10.0)
    clock.advance(5)
    journal.acquire("vm1", "me", 10.0)
    assert journal.load("vm1").lease_expires == 1015.0
    journal.release("vm1", "me")
    row = journal.load("vm1")
    assert (row.lease_owner, row.lease_expires) == (None, None)
    journal.acquire("vm1", "you", 10.0)
    assert journal.holds("vm1", "you")


def test_renew_extends_only_the_holders_lease(journal, clock):
    begin(journal, owner="me", ttl=10.0)
    clock.advance(8)
    assert journal.renew("vm1", "me", 10.0) is True
    assert journal.load("vm1").lease_expires == 1018.0
    assert journal.renew("vm1", "intruder", 10.0) is False
    assert journal.load("vm1").lease_owner == "me"
    assert journal.renew("missing", "me", 10.0) is False


def test_release_only_by_the_holder(journal):
    begin(journal, owner="me")
    journal.release("vm1", "intruder")
    assert journal.holds("vm1", "me")
    journal.release("vm1", "me")
    assert not journal.holds("vm1", "me")
    assert journal.holds("missing", "me") is False


def test_holds_ignores_nominal_expiry(journal, clock):
    """Expiry alone is no proof of loss: until someone takes over, we still hold it."""
    begin(journal, owner="me", ttl=1.0)
    clock.advance(100)
    assert journal.holds("vm1", "me")
    assert journal.transition("vm1", "me", 1, {"kind": "B"}, "B", False, "A") == 2


# -- notes, events, keys -------------------------------------------------------------------

def test_note_appends_an_event_without_changing_state(journal, jpath, clock):
    begin(journal)
    before = raw_row(jpath, "vm1")
    clock.advance(3)
    journal.note("vm1", "me", 1, "A", "still waiting")
    journal.note("vm1", "me", 1, "A", "attempt 1/3 failed: x", event="retry")
    assert raw_row(jpath, "vm1") == before
    events = journal.events("vm1")
    assert [(e["version"], e["event"], e["from"], e["to"], e["note"], e["at"]) for e in events[1:]] == [
        (1, "poll", "A", "A", "still waiting", 1003.0),
        (1, "retry", "A", "A", "attempt 1/3 failed: x", 1003.0)]


def test_events_are_ordered_per_key_and_limit_keeps_the_latest(journal, clock):
    begin(journal, key="b")
    begin(journal, key="a")
    for i in range(5):
        clock.advance(1)
        journal.note("b", "me", 1, "A", "b%d" % i)
        journal.note("a", "me", 1, "A", "a%d" % i)
    b = journal.events("b")
    assert [e["note"] for e in b] == ["started by me"] + ["b%d" % i for i in range(5)]
    assert [e["id"] for e in b] == sorted(e["id"] for e in b)
    assert all(e["id"] < f["id"] for e, f in zip(b, b[1:], strict=False))
    assert [e["note"] for e in journal.events("b", limit=2)] == ["b3", "b4"]
    assert [e["note"] for e in journal.events("a", limit=100)] == ["started by me"] + ["a%d" % i for i in range(5)]
    assert journal.events("zzz") == []
    assert set(b[0]) == {"id", "version", "event", "from", "to", "note", "owner", "at"}


def test_keys_are_sorted(journal):
    assert journal.keys() == []
    for key in ("web", "alpha", "m-2", "m-10"):
        begin(journal, key=key)
    assert journal.keys() == sorted(["web", "alpha", "m-2", "m-10"])


def test_load_of_a_missing_key_is_none(journal):
    assert journal.load("missing") is None


# -- tables of the layer above ------------------------------------------------------------------

EXTRA = ("CREATE TABLE IF NOT EXISTS extras (name TEXT PRIMARY KEY, value TEXT)",
         "CREATE INDEX IF NOT EXISTS extras_value ON extras (value)")


def names(journal):
    return {row[0] for row in journal.query("SELECT name FROM sqlite_master")}


def test_extra_tables_are_made_with_the_journal(jpath, clock):
    j = Journal(jpath, clock=clock, tables=EXTRA)
    try:
        assert {"extras", "extras_value", "machines"} <= names(j)
        with j.transaction() as tx:
            tx.execute("INSERT INTO extras (name, value) VALUES (?, ?)", ("a", "1"))
        j.execute("INSERT INTO extras (name, value) VALUES (?, ?)", ("b", "2"))
        assert j.query("SELECT name, value FROM extras ORDER BY name") == [("a", "1"), ("b", "2")]
    finally:
        j.close()


def test_extra_tables_are_added_to_a_journal_made_without_them(jpath, clock):
    Journal(jpath, clock=clock).close()
    j = Journal(jpath, clock=clock)
    try:
        assert "extras" not in names(j)
        j.ensure_tables(EXTRA)
        j.ensure_tables(EXTRA)   # once made, nothing more to do
        assert {"extras", "extras_value"} <= names(j)
    finally:
        j.close()
    Journal(jpath, clock=clock).close()
    j = Journal(jpath, clock=clock, tables=EXTRA + ("CREATE TABLE IF NOT EXISTS more (x TEXT)",))
    try:
        assert "more" in names(j)
    finally:
        j.close()


def test_a_failed_transaction_writes_nothing(journal):
    journal.ensure_tables(EXTRA)
    with pytest.raises(RuntimeError):
        with journal.transaction() as tx:
            tx.execute("INSERT INTO extras (name, value) VALUES ('a', '1')")
            raise RuntimeError("boom")
    assert journal.query("SELECT * FROM extras") == []


def test_extra_schema_must_be_create_if_not_exists(jpath, clock):
    with pytest.raises(ValueError):
        Journal(jpath, clock=clock, tables=("DROP TABLE machines",))
    assert not os.path.exists(jpath)


def test_a_path_is_required():
    with pytest.raises(ValueError):
        Journal("")


# -- journal id --------------------------------------------------------------------------------

def test_journal_id_is_made_once_and_shared_by_every_connection(jpath, clock, tmp_path):
    first = Journal(jpath, clock=clock)
    second = Journal(jpath, clock=clock)
    try:
        assert len(first.journal_id) == 32 and int(first.journal_id, 16) >= 0
        assert second.journal_id == first.journal_id
    finally:
        second.close()
        first.close()
    again = Journal(jpath, clock=clock)
    other = Journal(str(tmp_path / "other" / "journal.sqlite"), clock=clock)
    try:
        assert again.journal_id == first.journal_id
        assert other.journal_id != first.journal_id
    finally:
        other.close()
        again.close()


# -- live holder ----------------------------------------------------------------------------------

def test_live_holder_is_the_unexpired_live_owner(journal, clock):
    assert journal.live_holder("vm1") is None
    begin(journal, owner="holder-1", ttl=30.0)
    assert journal.live_holder("vm1") == "holder-1"
    clock.advance(29)
    assert journal.live_holder("vm1") == "holder-1"
    clock.advance(2)
    assert journal.live_holder("vm1") is None          # expired on the journal's clock
    journal.acquire("vm1", "holder-2", 30.0)
    assert journal.live_holder("vm1") == "holder-2"
    journal.release("vm1", "holder-2")
    assert journal.live_holder("vm1") is None


def test_live_holder_ignores_a_dead_owner_on_this_host(journal):
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


# -- cancel requests ---------------------------------------------------------------------------------

def cancel_columns(path, key):
    db = sqlite3.connect(path)
    try:
        return db.execute("SELECT cancel_owner, cancel_reason FROM machines WHERE key = ?", (key,)).fetchone()
    finally:
        db.close()


def test_request_cancel_reaches_only_the_holder_it_names(journal, jpath):
    begin(journal, owner="run-1")
    assert journal.cancel_request("vm1", "run-1") is None
    assert journal.request_cancel("vm1", "run-1", "down asked to stop") is True
    assert journal.cancel_request("vm1", "run-1") == "down asked to stop"
    assert journal.cancel_request("vm1", "run-2") is None
    assert journal.cancel_request("other", "run-1") is None
    assert cancel_columns(jpath, "vm1") == ("run-1", "down asked to stop")
    # a transition does not consume it: the run sees it until it is cleared
    journal.transition("vm1", "run-1", 1, {"kind": "B"}, "B", False, "A")
    assert journal.cancel_request("vm1", "run-1") == "down asked to stop"
    journal.clear_cancel("vm1")
    assert journal.cancel_request("vm1", "run-1") is None
    assert cancel_columns(jpath, "vm1") == (None, None)
    journal.clear_cancel("missing")   # harmless


def test_request_cancel_of_a_run_that_no_longer_holds_the_lease_is_refused(journal, jpath):
    assert journal.request_cancel("missing", "run-1", "x") is False
    begin(journal, owner="run-1")
    assert journal.request_cancel("vm1", "run-0", "stale holder") is False
    assert cancel_columns(jpath, "vm1") == (None, None)
    journal.release("vm1", "run-1")
    assert journal.request_cancel("vm1", "run-1", "finished already") is False
    assert cancel_columns(jpath, "vm1") == (None, None)


def test_request_cancel_without_a_reason_still_reads_as_a_request(journal):
    begin(journal, owner="run-1")
    assert journal.request_cancel("vm1", "run-1", "") is True
    assert journal.cancel_request("vm1", "run-1")


def test_a_fresh_run_starts_without_the_previous_cancel(journal, jpath, clock):
    begin(journal, owner="run-1")
    assert journal.request_cancel("vm1", "run-1", "stop")
    journal.transition("vm1", "run-1", 1, {"kind": "Done"}, "Done", True, "A")
    journal.release("vm1", "run-1")
    begin(journal, owner="run-1", expected=2)     # even the same owner name starts clean
    assert journal.cancel_request("vm1", "run-1") is None
    assert cancel_columns(jpath, "vm1") == (None, None)


# -- provider options ---------------------------------------------------------------------------------

def test_run_options_are_fenced_by_the_lease_and_upsert_per_cloud(journal, jpath, clock):
    assert run_options.recorded(journal, "vm1") == {}
    with pytest.raises(Conflict):
        run_options.record(journal, "vm1", "run-1", "docker", {"docker_host": "unix:///x"})   # no row, no lease
    begin(journal, owner="run-1")
    run_options.record(journal, "vm1", "run-1", "docker", {"docker_host": "unix:///x", "network": "n1"})
    run_options.record(journal, "vm1", "run-1", "local", {"root": "/srv/vms"})
    run_options.record(journal, "vm1", "run-1", "docker", {"docker_host": "tcp://h:2376"})
    assert run_options.recorded(journal, "vm1") == {"docker": {"docker_host": "tcp://h:2376"}, "local": {"root": "/srv/vms"}}
    with pytest.raises(Conflict) as info:
        run_options.record(journal, "vm1", "intruder", "docker", {"docker_host": "evil"})
    assert "vm1" in str(info.value)
    assert run_options.recorded(journal, "vm1")["docker"] == {"docker_host": "tcp://h:2376"}
    assert run_options.recorded(journal, "vm2") == {}
    journal.close()
    again = Journal(jpath, clock=clock)
    try:
        assert run_options.recorded(again, "vm1") == {"docker": {"docker_host": "tcp://h:2376"}, "local": {"root": "/srv/vms"}}
    finally:
        again.close()
