# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The SQLite journal: the durable record every machine writes before it acts.

Tables:
  machines        one row per key: the current state (JSON), its version, and the
                  lease (owner, expiry) of the run that may write it.
  machine_events  every transition and notable poll, with its note and timestamp.
  vms             the user-facing projection, written idempotently by VM steps and
                  recomputable from ``machines``.

Every state write is guarded by the version the writer read and by its lease
(``UPDATE ... WHERE version = ? AND lease_owner = ?``), so a stale writer or a run
whose lease was taken over changes nothing. This module knows no VM semantics
beyond the projection's columns.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import time
import uuid
from typing import Any, Dict, List, Optional, Tuple

SCHEMA_VERSION = 1

_SCHEMA = """
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

VM_COLUMNS = ("cloud", "region", "zone", "instance_id", "instance_type", "gpu", "gpu_count",
              "ssh_host", "ssh_port", "ssh_user", "host_key_alias", "status", "stage", "detail")


class JournalError(Exception):
    """The journal cannot be opened or read; the message says what to do."""


class Conflict(JournalError):
    """A guarded write found another version or owner: this run must stop."""


class LeaseHeld(JournalError):
    """Another live run holds the key."""


def default_state_dir() -> str:
    """``$GPUPROV_HOME``, else ``$XDG_STATE_HOME/gpuprov``, else ``~/.local/state/gpuprov``."""
    if os.environ.get("GPUPROV_HOME"):
        return os.path.expanduser(os.environ["GPUPROV_HOME"])
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, "gpuprov")


def default_journal_path() -> str:
    """``$GPUPROV_JOURNAL``, else ``<state dir>/journal.sqlite``."""
    return os.path.expanduser(os.environ.get("GPUPROV_JOURNAL") or
                              os.path.join(default_state_dir(), "journal.sqlite"))


def new_owner() -> str:
    return "%s:%d:%s" % (socket.gethostname(), os.getpid(), uuid.uuid4().hex[:8])


def owner_alive(owner: str) -> bool:
    """False only when ``owner`` is provably dead: a process of this host that no longer
    exists (a killed run). Owners on other hosts are trusted until their lease expires."""
    host, _sep, rest = owner.partition(":")
    pid_text = rest.split(":", 1)[0]
    if host != socket.gethostname() or not pid_text.isdigit():
        return True
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


class Row:
    """A machines row as read, carrying the version a guarded write needs."""

    __slots__ = ("key", "kind", "state", "label", "terminal", "version",
                 "lease_owner", "lease_expires", "updated_at", "entered_at")

    def __init__(self, values: Tuple):
        (self.key, self.kind, state, self.label, terminal, self.version, self.lease_owner,
         self.lease_expires, self.updated_at, self.entered_at) = values
        self.state = json.loads(state)
        self.terminal = bool(terminal)


class Journal:
    """A SQLite journal at ``path`` (created 0600, parent 0700 when new)."""

    def __init__(self, path: Optional[str] = None, clock=time.time):
        self.path = os.path.abspath(os.path.expanduser(path or default_journal_path()))
        self.clock = clock
        self._db = self._open()

    # -- opening ---------------------------------------------------------------------
    def _open(self) -> sqlite3.Connection:
        parent = os.path.dirname(self.path)
        try:
            if not os.path.isdir(parent):
                os.makedirs(parent, mode=0o700, exist_ok=True)
            if os.path.exists(self.path) and not os.path.isfile(self.path):
                raise JournalError("journal: %s is not a file; set journal (or GPUPROV_JOURNAL) to a file path"
                                   % self.path)
            if not os.path.exists(self.path):
                # Create it 0600 before SQLite touches it, so no window leaves it readable.
                os.close(os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600))
            os.chmod(self.path, 0o600)
        except JournalError:
            raise
        except OSError as exc:
            raise JournalError("journal: cannot create %s (%s); set journal (or GPUPROV_JOURNAL) "
                               "to a writable path" % (self.path, exc.strerror or exc))
        if not os.access(self.path, os.R_OK | os.W_OK):
            raise JournalError("journal: %s is not readable and writable by this user; fix its "
                               "permissions or set journal to another path" % self.path)
        try:
            db = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=FULL")
            db.execute("PRAGMA busy_timeout=30000")
            tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if tables and "meta" not in tables:
                db.close()
                raise JournalError("journal: %s is an SQLite database of something else (tables: %s); "
                                   "set journal to another path" % (self.path, ", ".join(sorted(tables))))
            db.executescript(_SCHEMA)
            db.execute("INSERT OR IGNORE INTO meta (name, value) VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
            found = db.execute("SELECT value FROM meta WHERE name = 'schema'").fetchone()[0]
        except JournalError:
            raise
        except sqlite3.DatabaseError as exc:
            raise JournalError("journal: %s is not a readable gpuprov journal (%s); move it aside "
                               "or set journal to another path" % (self.path, exc))
        if int(found) > SCHEMA_VERSION:
            raise JournalError("journal: %s was written by a newer gpuprov.cloud (schema %s > %s); "
                               "upgrade the collection" % (self.path, found, SCHEMA_VERSION))
        for suffix in ("-wal", "-shm"):
            if os.path.exists(self.path + suffix):
                os.chmod(self.path + suffix, 0o600)
        return db

    def close(self) -> None:
        self._db.close()

    def _tx(self):
        return _Transaction(self._db)

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
        """Take the lease on ``key`` (creating nothing) or raise LeaseHeld."""
        now = self.clock()
        with self._tx() as db:
            row = db.execute("SELECT lease_owner, lease_expires FROM machines WHERE key = ?", (key,)).fetchone()
            if row is None:
                return  # nothing to lease yet: begin() creates the row with our lease
            holder, expires = row
            if holder and holder != owner and expires is not None and expires > now and owner_alive(holder):
                raise LeaseHeld("%s is being worked on by another run (%s) for up to %.0f s more; "
                                "wait for it, or if that run is dead, retry after the lease expires"
                                % (key, holder, expires - now))
            db.execute("UPDATE machines SET lease_owner = ?, lease_expires = ? WHERE key = ?",
                       (owner, now + ttl, key))

    def renew(self, key: str, owner: str, ttl: float) -> bool:
        """Extend our lease; False means it was lost (taken over or released)."""
        cur = self._db.execute(
            "UPDATE machines SET lease_expires = ? WHERE key = ? AND lease_owner = ?",
            (self.clock() + ttl, key, owner))
        return cur.rowcount == 1

    def holds(self, key: str, owner: str) -> bool:
        row = self._db.execute("SELECT lease_owner FROM machines WHERE key = ?", (key,)).fetchone()
        return row is not None and row[0] == owner

    def release(self, key: str, owner: str) -> None:
        self._db.execute("UPDATE machines SET lease_owner = NULL, lease_expires = NULL "
                         "WHERE key = ? AND lease_owner = ?", (key, owner))

    def begin(self, key: str, kind: str, state: Dict[str, Any], label: str, terminal: bool,
              owner: str, ttl: float, expected_version: Optional[int], note: str = "") -> int:
        """Write a fresh initial state for ``key`` (replacing a terminal one) under our lease.

        ``expected_version`` is the version read (None when no row existed)."""
        now = self.clock()
        blob = json.dumps(state, sort_keys=True)
        with self._tx() as db:
            if expected_version is None:
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
                    "lease_owner = ?, lease_expires = ?, updated_at = ?, entered_at = ? "
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
                   terminal: bool, from_label: str, note: str = "", kind: Optional[str] = None) -> int:
        """Commit the next state iff we still hold the lease and nobody wrote since ``version``."""
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

    # -- vms projection --------------------------------------------------------------
    def upsert_vm(self, name: str, **fields: Any) -> None:
        """Set the given projection columns for ``name`` (others keep their values)."""
        unknown = set(fields) - set(VM_COLUMNS)
        if unknown:
            raise ValueError("unknown vms columns: %s" % ", ".join(sorted(unknown)))
        if fields.get("detail") is not None:
            fields["detail"] = json.dumps(fields["detail"], sort_keys=True)
        fields.setdefault("status", None)
        now = self.clock()
        with self._tx() as db:
            exists = db.execute("SELECT 1 FROM vms WHERE name = ?", (name,)).fetchone()
            if exists:
                sets = ", ".join("%s = ?" % c for c in fields if not (c == "status" and fields[c] is None))
                values = [v for c, v in fields.items() if not (c == "status" and v is None)]
                db.execute("UPDATE vms SET %s%supdated_at = ? WHERE name = ?" % (sets, ", " if sets else ""),
                           values + [now, name])
            else:
                if fields["status"] is None:
                    fields["status"] = "unknown"
                cols = list(fields)
                db.execute("INSERT INTO vms (name, %s, updated_at) VALUES (?, %s, ?)"
                           % (", ".join(cols), ", ".join("?" * len(cols))),
                           [name] + [fields[c] for c in cols] + [now])

    def delete_vm(self, name: str) -> None:
        self._db.execute("DELETE FROM vms WHERE name = ?", (name,))

    def vm(self, name: str) -> Optional[Dict[str, Any]]:
        rows = self.vms(name)
        return rows[0] if rows else None

    def vms(self, name: Optional[str] = None) -> List[Dict[str, Any]]:
        cols = ("name",) + VM_COLUMNS + ("updated_at",)
        sql = "SELECT %s FROM vms" % ", ".join(cols)
        args: Tuple = ()
        if name is not None:
            sql += " WHERE name = ?"
            args = (name,)
        out = []
        for r in self._db.execute(sql + " ORDER BY name", args):
            row = dict(zip(cols, r))
            if row.get("detail"):
                row["detail"] = json.loads(row["detail"])
            out.append(row)
        return out


class _Transaction:
    """BEGIN IMMEDIATE ... COMMIT, rolled back on any exception."""

    def __init__(self, db: sqlite3.Connection):
        self.db = db

    def __enter__(self) -> sqlite3.Connection:
        self.db.execute("BEGIN IMMEDIATE")
        return self.db

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.db.execute("COMMIT")
        else:
            self.db.execute("ROLLBACK")
