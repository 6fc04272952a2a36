# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The SQLite journal: the durable record every machine writes before it acts.

Tables:
  meta            name/value pairs: the schema version and the journal's id.
  machines        one row per key: the current state (JSON), its version, the lease
                  (owner, expiry) of the run that may write it, and a pending cancel
                  request addressed to that run.
  machine_events  every transition and notable poll, with its note and timestamp.
  machine_options the non-secret provider options each key was run with, per cloud.
  leases          the lease on a key that has no machines row yet (``acquire`` of a name
                  nobody has journalled: the orphan sweep's, or a run's before its first
                  state); ``begin`` refuses while another live run holds it and moves the
                  lease onto the row it creates. Created on opening a journal that lacks it.

The layer above may add tables of its own (``Journal(path, tables=...)``): they are
created with the journal's own, and on opening a journal that lacks them.

Every state write is guarded by the version the writer read and by its lease
(``UPDATE ... WHERE version = ? AND lease_owner = ?``), so a stale writer or a run
whose lease was taken over changes nothing. This module knows no VM semantics.

A journal is identified before anything is written to it: its ``PRAGMA application_id``
is ``APPLICATION_ID`` (0x67707276, "gprv"), or, for a journal written before
schema 2, the application id is 0 and it holds exactly the schema-1 tables. Any other
file is refused and left byte for byte as it was (machine/journal_file.py: opening a file).
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journal_file import (
    APPLICATION_ID, SCHEMA_VERSION, Conflict, JournalError, JournalFile, LeaseHeld, _created_name, _missing,
    _Transaction,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.owners import lease_held_message, owner_alive

# What the rest of the collection imports from here (the opening half lives in journal_file.py).
__all__ = ["APPLICATION_ID", "LEASES_TABLE", "SCHEMA_VERSION", "Conflict", "Journal", "JournalError", "LeaseHeld",
           "Row", "_created_name"]

# The leases of keys without a machines row (see the module docstring).
LEASES_TABLE = """CREATE TABLE IF NOT EXISTS leases (
    key TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    expires REAL NOT NULL
)"""


def _live(holder: Optional[str], expires: Optional[float], now: float, owner: Optional[str] = None) -> bool:
    """Whether ``holder`` (not ``owner``) holds a lease that still binds at ``now``."""
    return bool(holder) and holder != owner and expires is not None and expires > now and owner_alive(holder)


class Row:
    """A machines row as read, carrying the version a guarded write needs."""

    __slots__ = ("key", "kind", "state", "label", "terminal", "version",
                 "lease_owner", "lease_expires", "updated_at", "entered_at")

    def __init__(self, values: Tuple):
        (self.key, self.kind, state, self.label, terminal, self.version, self.lease_owner,
         self.lease_expires, self.updated_at, self.entered_at) = values
        self.state = json.loads(state)
        self.terminal = bool(terminal)


class Journal(JournalFile):
    """A SQLite journal at ``path`` (created 0600, missing parents 0700).

    ``tables``: ``CREATE TABLE/INDEX IF NOT EXISTS`` statements of the layer above, created
    with the journal and, on opening, when missing."""

    backend = "sqlite"

    def __init__(self, path: str, clock=time.time, tables: Sequence[str] = ()):
        if not path:
            raise ValueError("journal: a path is required")
        self.path = os.path.abspath(os.path.expanduser(path))
        self.clock = clock
        self._tables = (LEASES_TABLE,) + tuple(t for t in tables if t != LEASES_TABLE)
        for statement in self._tables:
            _created_name(statement)   # refuse anything but CREATE ... IF NOT EXISTS before touching the file
        self._file_id: Optional[Tuple[int, int]] = None
        self._journal_id = ""
        self._db = self._open()

    @property
    def journal_id(self) -> str:
        """This journal's id (uuid4 hex), made when the journal was created or migrated."""
        return self._journal_id

    @property
    def location(self) -> str:
        """Where this journal is, as it may be shown (the path)."""
        return self.path

    def reopen(self) -> "Journal":
        """A second connection to this journal (the lease heartbeat's)."""
        return Journal(self.path, clock=self.clock)

    # -- opening: machine/journal_file.py (JournalFile) -----------------------------------------------
    def close(self) -> None:
        self._db.close()
        if self._file_id is not None:
            self._forget()

    def _tx(self):
        return _Transaction(self._db)

    # -- for the layer above: its own tables, through plain SQL ----------------------
    def ensure_tables(self, tables: Iterable[str]) -> None:
        """Create those of ``tables`` (``CREATE TABLE/INDEX IF NOT EXISTS``) that this journal lacks."""
        wanted = [statement for statement in tables if statement not in self._tables]
        if not wanted:
            return
        try:
            if _missing(self._db, wanted):
                with self._tx() as db:
                    for statement in _missing(db, wanted):   # again, under the write lock
                        db.execute(statement)
        except sqlite3.Error as exc:
            raise self._database_error(exc)
        self._tables += tuple(wanted)

    def transaction(self):
        """A write transaction (``with journal.transaction() as tx: tx.execute(sql, args)``),
        committed on success and rolled back on any exception."""
        return self._tx()

    def execute(self, sql: str, args: Sequence[Any] = ()) -> None:
        """One write statement, in its own transaction."""
        self._db.execute(sql, tuple(args))

    def query(self, sql: str, args: Sequence[Any] = ()) -> List[Tuple]:
        """The rows of one read statement."""
        return self._db.execute(sql, tuple(args)).fetchall()

    # -- machines --------------------------------------------------------------------
    def load(self, key: str) -> Optional[Row]:
        cur = self._db.execute(
            "SELECT key, kind, state, label, terminal, version, lease_owner, lease_expires, "
            "updated_at, entered_at FROM machines WHERE key = ?", (key,))
        found = cur.fetchone()
        return Row(found) if found else None

    def keys(self) -> List[str]:
        return [r[0] for r in self._db.execute("SELECT key FROM machines ORDER BY key")]

    def acquire(self, key: str, owner: str, ttl: float) -> None:
        """Take the lease on ``key`` or raise LeaseHeld. A key without a row gets a lease of its
        own (the leases table), which ``begin`` honours and moves onto the row it creates."""
        now = self.clock()
        with self._tx() as db:
            row = db.execute("SELECT lease_owner, lease_expires FROM machines WHERE key = ?", (key,)).fetchone()
            if row is None:
                found = db.execute("SELECT owner, expires FROM leases WHERE key = ?", (key,)).fetchone()
                if found is not None and _live(found[0], found[1], now, owner):
                    raise LeaseHeld(lease_held_message(key, found[0], found[1] - now))
                db.execute("INSERT OR REPLACE INTO leases (key, owner, expires) VALUES (?, ?, ?)",
                           (key, owner, now + ttl))
                return
            holder, expires = row
            if _live(holder, expires, now, owner):
                raise LeaseHeld(lease_held_message(key, holder, expires - now))
            db.execute("UPDATE machines SET lease_owner = ?, lease_expires = ? WHERE key = ?",
                       (owner, now + ttl, key))

    def renew(self, key: str, owner: str, ttl: float) -> bool:
        """Extend our lease (on the row, else on the row-less key); False means it was lost
        (taken over or released)."""
        expires = self.clock() + ttl
        cur = self._db.execute("UPDATE machines SET lease_expires = ? WHERE key = ? AND lease_owner = ?",
                               (expires, key, owner))
        if cur.rowcount == 1:
            return True
        return self._db.execute(
            "UPDATE leases SET expires = ? WHERE key = ? AND owner = ? "
            "AND NOT EXISTS (SELECT 1 FROM machines WHERE key = ?)", (expires, key, owner, key)).rowcount == 1

    def holds(self, key: str, owner: str) -> bool:
        row = self._db.execute("SELECT lease_owner FROM machines WHERE key = ?", (key,)).fetchone()
        if row is not None:
            return row[0] == owner
        found = self._db.execute("SELECT owner FROM leases WHERE key = ?", (key,)).fetchone()
        return found is not None and found[0] == owner

    def release(self, key: str, owner: str) -> None:
        with self._tx() as db:
            db.execute("UPDATE machines SET lease_owner = NULL, lease_expires = NULL "
                       "WHERE key = ? AND lease_owner = ?", (key, owner))
            db.execute("DELETE FROM leases WHERE key = ? AND owner = ?", (key, owner))

    def live_holder(self, key: str) -> Optional[str]:
        """The owner of ``key``'s lease while it is unexpired (journal clock) and that owner
        may still be running; None when nobody holds it."""
        row = self._db.execute("SELECT lease_owner, lease_expires FROM machines WHERE key = ?", (key,)).fetchone()
        if row is None:
            row = self._db.execute("SELECT owner, expires FROM leases WHERE key = ?", (key,)).fetchone()
            if row is None:
                return None
        holder, expires = row
        return holder if _live(holder, expires, self.clock()) else None

    # -- cancel requests ---------------------------------------------------------------
    def request_cancel(self, key: str, holder: str, reason: str) -> bool:
        """Ask the run holding ``key``'s lease to stop at its next step; False when ``holder``
        no longer holds it (finished, or taken over), so there is nobody to ask."""
        cur = self._db.execute(
            "UPDATE machines SET cancel_owner = ?, cancel_reason = ? WHERE key = ? AND lease_owner = ?",
            (holder, reason or "cancel requested", key, holder))
        return cur.rowcount == 1

    def cancel_request(self, key: str, owner: str) -> Optional[str]:
        """The reason of a cancel addressed to ``owner`` on ``key``, else None (one primary-key
        read: it is polled between steps)."""
        row = self._db.execute("SELECT cancel_reason FROM machines WHERE key = ? AND cancel_owner = ?",
                               (key, owner)).fetchone()
        if row is None:
            return None
        return row[0] or "cancel requested"

    def clear_cancel(self, key: str) -> None:
        self._db.execute("UPDATE machines SET cancel_owner = NULL, cancel_reason = NULL WHERE key = ?", (key,))

    def begin(self, key: str, kind: str, state: Dict[str, Any], label: str, terminal: bool,
              owner: str, ttl: float, expected_version: Optional[int], note: str = "") -> int:
        """Write a fresh initial state for ``key`` (replacing a terminal one) under our lease.
        A fresh run starts with no cancel request pending.

        ``expected_version`` is the version read (None when no row existed)."""
        now = self.clock()
        blob = json.dumps(state, sort_keys=True)
        with self._tx() as db:
            if expected_version is None:
                found = db.execute("SELECT owner, expires FROM leases WHERE key = ?", (key,)).fetchone()
                if found is not None and _live(found[0], found[1], now, owner):
                    raise LeaseHeld(lease_held_message(key, found[0], found[1] - now))
                db.execute("DELETE FROM leases WHERE key = ?", (key,))   # the row carries the lease now
                try:
                    db.execute(
                        "INSERT INTO machines (key, kind, state, label, terminal, version, lease_owner, "
                        "lease_expires, created_at, updated_at, entered_at) VALUES (?,?,?,?,?,1,?,?,?,?,?)",
                        (key, kind, blob, label, int(terminal), owner, now + ttl, now, now, now))
                except sqlite3.IntegrityError:
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
        now = self.clock()
        with self._tx() as db:
            cur = db.execute(
                "UPDATE machines SET state = ?, label = ?, terminal = ?, version = version + 1, "
                "updated_at = ?, entered_at = ?, kind = COALESCE(?, kind) "
                "WHERE key = ? AND version = ? AND lease_owner = ?",
                (json.dumps(state, sort_keys=True), label, int(terminal), now, now, kind, key, version, owner))
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
        with self._tx() as db:
            held = db.execute("SELECT 1 FROM machines WHERE key = ? AND lease_owner = ?", (key, owner)).fetchone()
            if not held:
                raise Conflict("%s: note refused, the lease is no longer held by this run" % key)
            self._event(db, key, version, event, label, label, note, owner, self.clock())

    # -- provider options ----------------------------------------------------------------
    def set_options(self, key: str, owner: str, cloud: str, options: Dict[str, Any]) -> None:
        """Record the (non-secret) provider options ``key`` runs with on ``cloud``; fenced like
        note(): Conflict when ``owner`` no longer holds the lease."""
        blob = json.dumps(options, sort_keys=True)
        with self._tx() as db:
            held = db.execute("SELECT 1 FROM machines WHERE key = ? AND lease_owner = ?", (key, owner)).fetchone()
            if not held:
                raise Conflict("%s: options refused, the lease is no longer held by this run" % key)
            db.execute("DELETE FROM machine_options WHERE key = ? AND cloud = ?", (key, cloud))
            db.execute("INSERT INTO machine_options (key, cloud, options) VALUES (?, ?, ?)", (key, cloud, blob))

    def options(self, key: str) -> Dict[str, Dict[str, Any]]:
        """{cloud: options} as recorded for ``key`` ({} when none)."""
        return {cloud: json.loads(blob) for cloud, blob in self._db.execute(
            "SELECT cloud, options FROM machine_options WHERE key = ? ORDER BY cloud", (key,))}

    @staticmethod
    def _event(db, key, version, event, from_label, to_label, note, owner, at) -> None:
        db.execute("INSERT INTO machine_events (key, version, event, from_label, to_label, note, owner, at) "
                   "VALUES (?,?,?,?,?,?,?,?)", (key, version, event, from_label, to_label, note, owner, at))

    def events(self, key: str, limit: Optional[int] = None) -> List[Dict[str, Any]]:
        sql = ("SELECT id, version, event, from_label, to_label, note, owner, at FROM machine_events "
               "WHERE key = ? ORDER BY id")
        rows = self._db.execute(sql, (key,)).fetchall()
        if limit is not None:
            rows = rows[-limit:]
        names = ("id", "version", "event", "from", "to", "note", "owner", "at")
        return [dict(zip(names, r)) for r in rows]
