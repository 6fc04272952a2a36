# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The journal's SQL, written once: the schema, every statement on the journal's tables, its
messages and error classes, the transaction logic of guarded writes and leases (``SqlJournal``),
and ``JournalStore``, the type the rest of the collection names a journal by. The backends,
machine/journal.py (SQLite) and machine/journal_pg.py (PostgreSQL), give only what differs.

Tables:
  meta            name/value pairs: the schema version and the journal's id (and, on
                  PostgreSQL, ``application = gpuprov``, which identifies the journal there).
  machines        one row per key: the current state (JSON), its version, the lease
                  (owner, expiry) of the run that may write it, and a pending cancel
                  request addressed to that run.
  machine_events  every transition and notable poll, with its note and timestamp.
  leases          the lease on a key that has no machines row yet (``acquire`` of a name
                  nobody has journalled: the orphan sweep's, or a run's before its first
                  state); ``begin`` refuses while another live run holds it and moves the
                  lease onto the row it creates. Created on opening a journal that lacks it.

The layer above may add tables of its own (``tables=...`` when opening): they are created with
the journal's own, and on opening a journal that lacks them.

Every state write is guarded by the version the writer read and by its lease
(``UPDATE ... WHERE version = ? AND lease_owner = ?``), so a stale writer or a run
whose lease was taken over changes nothing. This module knows no VM semantics.

Statements are in SQLite's words with ``?`` placeholders, as the layer above's plain SQL is;
PostgreSQL's backend translates placeholders and ``REAL``. The few dialect differences inside
statements are the substitutions below, by backend name. A backend gives the rest (see
``SqlJournal``): running a statement and a transaction on its connection, the journal's clock,
a transaction's lock on one key, telling a duplicate key, and opening, identifying and closing
its database (each with its own catalog, PRAGMA, clock and lock statements).
"""

from __future__ import annotations

import abc
import contextlib
import json
import re
from typing import Any, Callable, ContextManager, Dict, Iterable, Iterator, List, Optional, Protocol, Sequence, Tuple

from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.owners import lease_held_message, owner_alive

SCHEMA_VERSION = 2


class JournalError(Exception):
    """The journal cannot be opened or read; the message says what to do."""


class Conflict(JournalError):
    """A guarded write found another version or owner: this run must stop."""


class LeaseHeld(JournalError):
    """Another live run holds the key."""


# -- the schema ---------------------------------------------------------------------------

# The auto-numbered key of machine_events, in each backend's words.
_EVENT_ID = {"sqlite": "INTEGER PRIMARY KEY AUTOINCREMENT", "postgresql": "BIGSERIAL PRIMARY KEY"}

_TABLES = (
    """CREATE TABLE IF NOT EXISTS meta (
        name TEXT PRIMARY KEY,
        value TEXT NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS machines (
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
        entered_at REAL NOT NULL,
        cancel_owner TEXT,
        cancel_reason TEXT
    )""",
    """CREATE TABLE IF NOT EXISTS machine_events (
        id {event_id},
        key TEXT NOT NULL,
        version INTEGER NOT NULL,
        event TEXT NOT NULL,
        from_label TEXT,
        to_label TEXT,
        note TEXT,
        owner TEXT,
        at REAL NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS machine_events_key ON machine_events (key, id)",
)

# The leases of keys without a machines row (see the module docstring). Apart from the
# tables above: a journal of schema 2 may lack it, and it is created then, as the layer
# above's tables are.
LEASES_TABLE = """CREATE TABLE IF NOT EXISTS leases (
    key TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    expires REAL NOT NULL
)"""

# Schema 1 -> 2, run in one transaction with the meta update. SQLite journals only: a
# PostgreSQL journal began at schema 2.
MIGRATE_FROM_1 = (
    "ALTER TABLE machines ADD COLUMN cancel_owner TEXT",
    "ALTER TABLE machines ADD COLUMN cancel_reason TEXT",
)


def journal_tables(backend: str) -> Tuple[str, ...]:
    """The journal's own tables (all but ``leases``) as ``backend`` ("sqlite", "postgresql") creates them."""
    return tuple(statement.replace("{event_id}", _EVENT_ID[backend]) for statement in _TABLES)


_CREATED_NAME = re.compile(r"^\s*CREATE\s+(?:TABLE|INDEX)\s+IF\s+NOT\s+EXISTS\s+(\w+)", re.IGNORECASE)


def created_name(statement: str) -> str:
    """The table or index a ``CREATE ... IF NOT EXISTS`` statement makes (the only kind accepted)."""
    found = _CREATED_NAME.match(statement)
    if not found:
        raise ValueError("journal: extra schema must be CREATE TABLE/INDEX IF NOT EXISTS statements: %r"
                         % statement[:60])
    return found.group(1)


# -- meta: the journal's identity ----------------------------------------------------------

INSERT_META = "INSERT INTO meta (name, value) VALUES (?, ?)"
META_VALUE = "SELECT value FROM meta WHERE name = ?"
META_ROWS = "SELECT name, value FROM meta"
SET_SCHEMA = "UPDATE meta SET value = ? WHERE name = 'schema'"


def not_a_journal(location: str, what: str, fix: str) -> JournalError:
    """The refusal of a database that is not a gpuprov journal (nothing was written to it)."""
    return JournalError("journal: %s is not a gpuprov journal (%s) and was left unchanged; %s" % (location, what, fix))


def newer_schema(location: str, found: int) -> JournalError:
    return JournalError("journal: %s was written by a newer gpuprov.cloud (schema %d > %d); upgrade the collection"
                        % (location, found, SCHEMA_VERSION))


# -- the machines --------------------------------------------------------------------------

_ROW = "key, kind, state, label, terminal, version, lease_owner, lease_expires, updated_at, entered_at"
_EVENT_FIELDS = ("id", "version", "event", "from", "to", "note", "owner", "at")

# Appended to the read of a row its transaction goes on to write: SQLite's write transaction
# already holds the whole database.
_ROW_LOCK = {"sqlite": "", "postgresql": " FOR UPDATE"}

# Taking a row-less key's lease in one statement (SQLite's ON CONFLICT upsert needs 3.24).
_TAKE_ROWLESS_LEASE = {
    "sqlite": "INSERT OR REPLACE INTO leases (key, owner, expires) VALUES (?, ?, ?)",
    "postgresql": ("INSERT INTO leases (key, owner, expires) VALUES (?, ?, ?) ON CONFLICT (key) "
                   "DO UPDATE SET owner = EXCLUDED.owner, expires = EXCLUDED.expires"),
}


def _live(holder: Optional[str], expires: Optional[float], now: float, owner: Optional[str] = None) -> bool:
    """Whether ``holder`` (not ``owner``) holds a lease that still binds at ``now``."""
    if not holder or holder == owner or expires is None:
        return False
    return expires > now and owner_alive(holder)


def _refuse_held(key: str, holder: Optional[str], expires: Optional[float], now: float, owner: str) -> None:
    if holder and expires is not None and _live(holder, expires, now, owner):
        raise LeaseHeld(lease_held_message(key, holder, expires - now))


class Row:
    """A machines row as read, carrying the version a guarded write needs."""

    __slots__ = ("key", "kind", "state", "label", "terminal", "version",
                 "lease_owner", "lease_expires", "updated_at", "entered_at")

    def __init__(self, values: Tuple[Any, ...]):
        (self.key, self.kind, state, self.label, terminal, self.version, self.lease_owner,
         self.lease_expires, self.updated_at, self.entered_at) = values
        self.state = json.loads(state)
        self.terminal = bool(terminal)


class JournalStore(Protocol):
    """A journal, whichever its backend: what the machines, their services and the layer above
    call (``SqlJournal`` says what each does). machine/journals.py opens one from its location."""

    backend: str
    path: str
    clock: Callable[[], float]

    @property
    def journal_id(self) -> str: ...

    @property
    def location(self) -> str: ...

    def reopen(self) -> "JournalStore": ...

    def close(self) -> None: ...

    def ensure_tables(self, tables: Iterable[str]) -> None: ...

    def transaction(self) -> ContextManager[Any]: ...

    def execute(self, sql: str, args: Sequence[Any] = ()) -> None: ...

    def query(self, sql: str, args: Sequence[Any] = ()) -> List[Tuple[Any, ...]]: ...

    def load(self, key: str) -> Optional[Row]: ...

    def keys(self) -> List[str]: ...

    def acquire(self, key: str, owner: str, ttl: float) -> None: ...

    def renew(self, key: str, owner: str, ttl: float) -> bool: ...

    def holds(self, key: str, owner: str) -> bool: ...

    def release(self, key: str, owner: str) -> None: ...

    def live_holder(self, key: str) -> Optional[str]: ...

    def request_cancel(self, key: str, holder: str, reason: str) -> bool: ...

    def cancel_request(self, key: str, owner: str) -> Optional[str]: ...

    def clear_cancel(self, key: str) -> None: ...

    def begin(self, key: str, kind: str, state: Dict[str, Any], label: str, terminal: bool,
              owner: str, ttl: float, expected_version: Optional[int], note: str = "") -> int: ...

    def transition(self, key: str, owner: str, version: int, state: Dict[str, Any], label: str,
                   terminal: bool, from_label: str, note: str = "", kind: Optional[str] = None,
                   rows: Sequence[Tuple[str, Sequence[Any]]] = ()) -> int: ...

    def note(self, key: str, owner: str, version: int, label: str, note: str, event: str = "poll") -> None: ...

    def fenced_transaction(self, key: str, owner: str, what: str) -> ContextManager[Any]: ...

    def events(self, key: str, limit: Optional[int] = None, since_last_begin: bool = False) -> List[Dict[str, Any]]: ...


class SqlJournal(abc.ABC):
    """The journal's operations over what a backend gives: its subclass sets ``backend``, ``path``,
    ``clock`` and ``_journal_id``, and implements the abstract methods. ``db`` below is what
    ``_statements`` and ``_transaction`` yield: ``db.execute(sql, args)`` runs a statement written
    here and returns a cursor (``fetchone``, ``fetchall``, ``rowcount``, iteration)."""

    backend = ""
    path = ""
    clock: Callable[[], float]
    _journal_id: Optional[str] = ""

    # -- what a backend gives ------------------------------------------------------------
    @abc.abstractmethod
    def _statements(self, doing: str) -> ContextManager[Any]:
        """``db`` for statements each committed on its own; ``doing`` names the work in errors."""

    @abc.abstractmethod
    def _transaction(self, doing: str) -> ContextManager[Any]:
        """``db`` inside one write transaction, committed on success and rolled back on any exception."""

    @abc.abstractmethod
    def _now(self, db: Any) -> float:
        """The journal's time (lease expiries, updated_at, event times), read inside the work at hand."""

    @abc.abstractmethod
    def _lock_key(self, db: Any, key: str) -> None:
        """Hold back every other transaction that locks ``key`` until this one ends (a row lock
        cannot guard a row not there yet); nothing where a write transaction holds the whole journal."""

    @abc.abstractmethod
    def _insert_new(self, db: Any, sql: str, args: Sequence[Any]) -> bool:
        """Run an INSERT in the transaction; False, with the transaction still usable, when its key exists."""

    # -- who this journal is ---------------------------------------------------------------
    @property
    def journal_id(self) -> str:
        """This journal's id (uuid4 hex), made when the journal was created or migrated."""
        return self._journal_id or ""

    @property
    def location(self) -> str:
        """Where this journal is, as it may be shown (a path, or a DSN without its password)."""
        return self.path

    # -- for the layer above: its own tables, through plain SQL ----------------------
    def transaction(self) -> ContextManager[Any]:
        """A write transaction (``with journal.transaction() as tx: tx.execute(sql, args)``),
        committed on success and rolled back on any exception."""
        return self._transaction("writing")

    def execute(self, sql: str, args: Sequence[Any] = ()) -> None:
        """One write statement, in its own transaction."""
        with self._statements("writing") as db:
            db.execute(sql, tuple(args))

    def query(self, sql: str, args: Sequence[Any] = ()) -> List[Tuple[Any, ...]]:
        """The rows of one read statement."""
        with self._statements("reading") as db:
            return [tuple(r) for r in db.execute(sql, tuple(args)).fetchall()]

    # -- machines --------------------------------------------------------------------
    def load(self, key: str) -> Optional[Row]:
        with self._statements("reading") as db:
            found = db.execute("SELECT %s FROM machines WHERE key = ?" % _ROW, (key,)).fetchone()
        return Row(tuple(found)) if found else None

    def keys(self) -> List[str]:
        with self._statements("reading") as db:
            return [r[0] for r in db.execute("SELECT key FROM machines ORDER BY key", ()).fetchall()]

    def acquire(self, key: str, owner: str, ttl: float) -> None:
        """Take the lease on ``key`` or raise LeaseHeld. A key without a row gets a lease of its
        own (the leases table), which ``begin`` honours and moves onto the row it creates."""
        with self._transaction("taking the lease") as db:
            self._lock_key(db, key)
            now = self._now(db)
            row = db.execute("SELECT lease_owner, lease_expires FROM machines WHERE key = ?" + _ROW_LOCK[self.backend],
                             (key,)).fetchone()
            if row is None:
                found = db.execute("SELECT owner, expires FROM leases WHERE key = ?", (key,)).fetchone()
                if found is not None:
                    _refuse_held(key, found[0], found[1], now, owner)
                db.execute(_TAKE_ROWLESS_LEASE[self.backend], (key, owner, now + ttl))
                return
            _refuse_held(key, row[0], row[1], now, owner)
            db.execute("UPDATE machines SET lease_owner = ?, lease_expires = ? WHERE key = ?", (owner, now + ttl, key))

    def renew(self, key: str, owner: str, ttl: float) -> bool:
        """Extend our lease (on the row, else on the row-less key); False means it was lost
        (taken over or released)."""
        with self._statements("renewing the lease") as db:
            expires = self._now(db) + ttl
            cur = db.execute("UPDATE machines SET lease_expires = ? WHERE key = ? AND lease_owner = ?",
                             (expires, key, owner))
            if cur.rowcount == 1:
                return True
            return bool(db.execute("UPDATE leases SET expires = ? WHERE key = ? AND owner = ? "
                                   "AND NOT EXISTS (SELECT 1 FROM machines WHERE key = ?)",
                                   (expires, key, owner, key)).rowcount == 1)

    def holds(self, key: str, owner: str) -> bool:
        with self._statements("reading") as db:
            row = db.execute("SELECT lease_owner FROM machines WHERE key = ?", (key,)).fetchone()
            if row is None:
                row = db.execute("SELECT owner FROM leases WHERE key = ?", (key,)).fetchone()
        return row is not None and row[0] == owner

    def release(self, key: str, owner: str) -> None:
        with self._transaction("writing") as db:
            db.execute("UPDATE machines SET lease_owner = NULL, lease_expires = NULL "
                       "WHERE key = ? AND lease_owner = ?", (key, owner))
            db.execute("DELETE FROM leases WHERE key = ? AND owner = ?", (key, owner))

    def live_holder(self, key: str) -> Optional[str]:
        """The owner of ``key``'s lease while it is unexpired (journal clock) and that owner
        may still be running; None when nobody holds it."""
        with self._statements("reading") as db:
            row = db.execute("SELECT lease_owner, lease_expires FROM machines WHERE key = ?", (key,)).fetchone()
            if row is None:
                row = db.execute("SELECT owner, expires FROM leases WHERE key = ?", (key,)).fetchone()
                if row is None:
                    return None
            now = self._now(db)
        holder, expires = row
        return holder if _live(holder, expires, now) else None

    # -- cancel requests ---------------------------------------------------------------
    def request_cancel(self, key: str, holder: str, reason: str) -> bool:
        """Ask the run holding ``key``'s lease to stop at its next step; False when ``holder``
        no longer holds it (finished, or taken over), so there is nobody to ask."""
        with self._statements("writing") as db:
            return bool(db.execute(
                "UPDATE machines SET cancel_owner = ?, cancel_reason = ? WHERE key = ? AND lease_owner = ?",
                (holder, reason or "cancel requested", key, holder)).rowcount == 1)

    def cancel_request(self, key: str, owner: str) -> Optional[str]:
        """The reason of a cancel addressed to ``owner`` on ``key``, else None (one primary-key
        read: it is polled between steps)."""
        with self._statements("reading") as db:
            row = db.execute("SELECT cancel_reason FROM machines WHERE key = ? AND cancel_owner = ?",
                             (key, owner)).fetchone()
        if row is None:
            return None
        return row[0] or "cancel requested"

    def clear_cancel(self, key: str) -> None:
        with self._statements("writing") as db:
            db.execute("UPDATE machines SET cancel_owner = NULL, cancel_reason = NULL WHERE key = ?", (key,))

    # -- state writes ------------------------------------------------------------------
    def begin(self, key: str, kind: str, state: Dict[str, Any], label: str, terminal: bool,
              owner: str, ttl: float, expected_version: Optional[int], note: str = "") -> int:
        """Write a fresh initial state for ``key`` (replacing a terminal one) under our lease.
        A fresh run starts with no cancel request pending.

        ``expected_version`` is the version read (None when no row existed)."""
        blob = json.dumps(state, sort_keys=True)
        with self._transaction("writing") as db:
            if expected_version is None:
                self._lock_key(db, key)
            now = self._now(db)
            if expected_version is None:
                found = db.execute("SELECT owner, expires FROM leases WHERE key = ?", (key,)).fetchone()
                if found is not None:
                    _refuse_held(key, found[0], found[1], now, owner)
                db.execute("DELETE FROM leases WHERE key = ?", (key,))   # the row carries the lease now
                if not self._insert_new(
                        db, "INSERT INTO machines (key, kind, state, label, terminal, version, lease_owner, "
                        "lease_expires, created_at, updated_at, entered_at) VALUES (?,?,?,?,?,1,?,?,?,?,?)",
                        (key, kind, blob, label, int(terminal), owner, now + ttl, now, now, now)):
                    raise Conflict("%s was created by another run at the same time" % key)
                version = 1
            else:
                cur = db.execute(
                    "UPDATE machines SET kind = ?, state = ?, label = ?, terminal = ?, version = version + 1, "
                    "lease_owner = ?, lease_expires = ?, updated_at = ?, entered_at = ?, "
                    "cancel_owner = NULL, cancel_reason = NULL "
                    "WHERE key = ? AND version = ? AND (lease_owner IS NULL OR lease_owner = ? "
                    "OR lease_expires < ?)",
                    (kind, blob, label, int(terminal), owner, now + ttl, now, now, key,
                     expected_version, owner, now))
                if cur.rowcount != 1:
                    raise Conflict("%s changed under this run (expected version %d)" % (key, expected_version))
                version = expected_version + 1
            self._event(db, key, version, "begin", None, label, note, owner, now)
        return version

    def transition(self, key: str, owner: str, version: int, state: Dict[str, Any], label: str,
                   terminal: bool, from_label: str, note: str = "", kind: Optional[str] = None,
                   rows: Sequence[Tuple[str, Sequence[Any]]] = ()) -> int:
        """Commit the next state iff we still hold the lease and nobody wrote since ``version``.

        ``rows``: (sql, args) writes to the layer above's tables, committed in the same
        transaction as the state, or not at all; the state may then stay small and point at
        them (a launch's planned offers, written once per search)."""
        blob = json.dumps(state, sort_keys=True)
        with self._transaction("writing") as db:
            now = self._now(db)
            cur = db.execute(
                "UPDATE machines SET state = ?, label = ?, terminal = ?, version = version + 1, "
                "updated_at = ?, entered_at = ?, kind = COALESCE(?, kind) "
                "WHERE key = ? AND version = ? AND lease_owner = ?",
                (blob, label, int(terminal), now, now, kind, key, version, owner))
            if cur.rowcount != 1:
                raise Conflict("%s: state write refused (version %d no longer current or lease lost); "
                               "another run took over" % (key, version))
            for sql, args in rows:
                db.execute(sql, tuple(args))
            self._event(db, key, version + 1, "transition", from_label, label, note, owner, now)
        return version + 1

    def note(self, key: str, owner: str, version: int, label: str, note: str, event: str = "poll") -> None:
        """Record a note (a poll reason, a retry error) without changing the state; fenced
        like a transition, so a run that lost its lease writes nothing more."""
        with self._transaction("writing") as db:
            if not db.execute("SELECT 1 FROM machines WHERE key = ? AND lease_owner = ?", (key, owner)).fetchone():
                raise Conflict("%s: note refused, the lease is no longer held by this run" % key)
            self._event(db, key, version, event, label, label, note, owner, self._now(db))

    # -- the layer above's writes that a lease fences ---------------------------------------------
    @contextlib.contextmanager
    def fenced_transaction(self, key: str, owner: str, what: str) -> Iterator[Any]:
        """A write transaction for the layer above's own rows of ``key``, fenced like note(): Conflict (naming
        ``what``) when ``owner`` no longer holds the key's lease; the row stays locked until the commit."""
        with self._transaction("writing") as db:
            if not db.execute("SELECT 1 FROM machines WHERE key = ? AND lease_owner = ?" + _ROW_LOCK[self.backend],
                              (key, owner)).fetchone():
                raise Conflict("%s: %s refused, the lease is no longer held by this run" % (key, what))
            yield db

    # -- events --------------------------------------------------------------------------
    @staticmethod
    def _event(db: Any, key: str, version: int, event: str, from_label: Optional[str], to_label: str,
               note: str, owner: str, at: float) -> None:
        db.execute("INSERT INTO machine_events (key, version, event, from_label, to_label, note, owner, at) "
                   "VALUES (?,?,?,?,?,?,?,?)", (key, version, event, from_label, to_label, note, owner, at))

    def events(self, key: str, limit: Optional[int] = None, since_last_begin: bool = False) -> List[Dict[str, Any]]:
        """``key``'s events, oldest first: all of them, the last ``limit``, or (``since_last_begin``) those of its
        latest run, from its last ``begin`` on (all when it has none). The latter reads only that run's rows: a
        VM provisioned again and again keeps every earlier run's events, which a run's result does not show."""
        where = "key = ?"
        args: Tuple[str, ...] = (key,)
        if since_last_begin:
            where += (" AND id >= COALESCE((SELECT id FROM machine_events WHERE key = ? AND event = 'begin' "
                      "ORDER BY id DESC LIMIT 1), 0)")
            args = (key, key)
        with self._statements("reading") as db:
            rows = db.execute("SELECT id, version, event, from_label, to_label, note, owner, at FROM machine_events "
                              "WHERE %s ORDER BY id" % where, args).fetchall()
        if limit is not None:
            rows = rows[-limit:]
        return [dict(zip(_EVENT_FIELDS, r, strict=True)) for r in rows]
