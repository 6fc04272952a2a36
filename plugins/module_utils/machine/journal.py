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

The layer above may add tables of its own (``Journal(path, tables=...)``): they are
created with the journal's own, and on opening a journal that lacks them.

Every state write is guarded by the version the writer read and by its lease
(``UPDATE ... WHERE version = ? AND lease_owner = ?``), so a stale writer or a run
whose lease was taken over changes nothing. This module knows no VM semantics.

A journal is identified before anything is written to it: its ``PRAGMA application_id``
is ``APPLICATION_ID`` (0x67707276, "gprv"), or, for a journal written before
schema 2, the application id is 0 and it holds exactly the schema-1 tables. Any other
file is refused and left byte for byte as it was.
"""

from __future__ import annotations

import errno
import json
import os
import re
import sqlite3
import stat
import struct
import threading
import time
import uuid
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple
from urllib.parse import quote

from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.owners import owner_alive

SCHEMA_VERSION = 2

# PRAGMA application_id of every gpuprov journal: the ASCII bytes "gprv", stored big-endian
# at byte offset 68 of the file header. Fixed forever: it is how a journal is recognised.
APPLICATION_ID = 0x67707276

SQLITE_MAGIC = b"SQLite format 3\x00"
_HEADER_SIZE = 100
_APPLICATION_ID_OFFSET = 68

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
        id INTEGER PRIMARY KEY AUTOINCREMENT,
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
    """CREATE TABLE IF NOT EXISTS machine_options (
        key TEXT NOT NULL,
        cloud TEXT NOT NULL,
        options TEXT NOT NULL,
        PRIMARY KEY (key, cloud)
    )""",
)

# Schema 1 -> 2, run in one transaction together with the meta and application_id updates.
_MIGRATE_FROM_1 = (
    "ALTER TABLE machines ADD COLUMN cancel_owner TEXT",
    "ALTER TABLE machines ADD COLUMN cancel_reason TEXT",
    _TABLES[-1],
)

# The exact tables and columns of a schema-1 journal: with application_id 0, this shape
# is what marks a file as a gpuprov journal written before schema 2. A frozen fingerprint of
# that legacy file format (the "vms" entry included), not a description of live tables:
# never edit it when a table changes.
_SCHEMA_1_COLUMNS = {
    "meta": ("name", "value"),
    "machines": ("key", "kind", "state", "label", "terminal", "version", "lease_owner", "lease_expires",
                 "created_at", "updated_at", "entered_at"),
    "machine_events": ("id", "key", "version", "event", "from_label", "to_label", "note", "owner", "at"),
    "vms": ("name", "cloud", "region", "zone", "instance_id", "instance_type", "gpu", "gpu_count", "ssh_host",
            "ssh_port", "ssh_user", "host_key_alias", "status", "stage", "detail", "updated_at"),
}

_ELSEWHERE = "set journal (or GPUPROV_JOURNAL) to another path"

# Journals this process holds open, by (device, inode). Closing any descriptor of a file drops
# every POSIX lock this process holds on it, SQLite's included, so the raw header is read only
# while no connection of ours is open on the file; opening is serialised for the same reason.
_OPEN_LOCK = threading.Lock()
_OPEN_FILES: Dict[Tuple[int, int], int] = {}


class JournalError(Exception):
    """The journal cannot be opened or read; the message says what to do."""


class Conflict(JournalError):
    """A guarded write found another version or owner: this run must stop."""


class LeaseHeld(JournalError):
    """Another live run holds the key."""


# -- identifying a file ------------------------------------------------------------------

def _user_tables(db: sqlite3.Connection) -> List[str]:
    return sorted(name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
                  if not name.startswith("sqlite_"))


def _columns(db: sqlite3.Connection, table: str) -> Tuple[str, ...]:
    return tuple(row[1] for row in db.execute("PRAGMA table_info(%s)" % table))


def _is_schema_1_shape(db: sqlite3.Connection, tables: List[str]) -> bool:
    if set(tables) != set(_SCHEMA_1_COLUMNS):
        return False
    return all(_columns(db, table) == columns for table, columns in _SCHEMA_1_COLUMNS.items())


_CREATED_NAME = re.compile(r"^\s*CREATE\s+(?:TABLE|INDEX)\s+IF\s+NOT\s+EXISTS\s+(\w+)", re.IGNORECASE)


def _created_name(statement: str) -> str:
    """The table or index a ``CREATE ... IF NOT EXISTS`` statement makes (the only kind accepted)."""
    found = _CREATED_NAME.match(statement)
    if not found:
        raise ValueError("journal: extra schema must be CREATE TABLE/INDEX IF NOT EXISTS statements: %r"
                         % statement[:60])
    return found.group(1)


def _missing(db: sqlite3.Connection, tables: Sequence[str]) -> List[str]:
    """The statements of ``tables`` whose table or index does not exist yet."""
    present = {name for (name,) in db.execute("SELECT name FROM sqlite_master")}
    return [statement for statement in tables if _created_name(statement) not in present]


def _create_schema(db: sqlite3.Connection, tables: Tuple[str, ...]) -> None:
    """Every table of the current schema and ``tables``, the meta rows and the application id
    (inside a transaction)."""
    for statement in _TABLES + tables:
        db.execute(statement)
    db.execute("INSERT INTO meta (name, value) VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
    db.execute("INSERT INTO meta (name, value) VALUES ('journal_id', ?)", (uuid.uuid4().hex,))
    db.execute("PRAGMA application_id = %d" % APPLICATION_ID)


def _sync_directory(folder: str) -> None:
    """Make a new directory entry durable (best effort: not every file system can)."""
    try:
        handle = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(handle)
    except OSError:
        pass
    finally:
        os.close(handle)


def _stored_journal_id(db: sqlite3.Connection) -> Optional[str]:
    found = db.execute("SELECT value FROM meta WHERE name = 'journal_id'").fetchone()
    return found[0] if found else None


def _meta_value(db: sqlite3.Connection, tables: List[str], name: str) -> Optional[str]:
    if "meta" not in tables:
        return None
    found = db.execute("SELECT value FROM meta WHERE name = ?", (name,)).fetchone()
    return found[0] if found else None


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
    """A SQLite journal at ``path`` (created 0600, missing parents 0700).

    ``tables``: ``CREATE TABLE/INDEX IF NOT EXISTS`` statements of the layer above, created
    with the journal and, on opening, when missing."""

    backend = "sqlite"

    def __init__(self, path: str, clock=time.time, tables: Sequence[str] = ()):
        if not path:
            raise ValueError("journal: a path is required")
        self.path = os.path.abspath(os.path.expanduser(path))
        self.clock = clock
        self._tables = tuple(tables)
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

    # -- opening ---------------------------------------------------------------------
    def _refuse(self, what: str) -> JournalError:
        return JournalError("journal: %s is not a gpuprov journal (%s) and was left unchanged; move it aside or %s"
                            % (self.path, what, _ELSEWHERE))

    def _damaged(self, value: Optional[str]) -> JournalError:
        said = "is missing" if value is None else "%r is not a number" % value
        return JournalError("journal: %s: schema version %s; the file is damaged or not a gpuprov journal; "
                            "move it aside or %s" % (self.path, said, _ELSEWHERE))

    def _unwritable(self, what: str, fix: str) -> JournalError:
        return JournalError("journal: %s is not writable by this user (%s); %s, or set journal (or GPUPROV_JOURNAL) "
                            "to a writable path" % (self.path, what, fix))

    def _open(self) -> sqlite3.Connection:
        self._make_parent()
        with _OPEN_LOCK:
            self._identify()
            self._check_writable()
            try:
                db = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
            except sqlite3.Error as exc:
                raise self._database_error(exc)
            self._remember()
        try:
            self._prepare(db)
        except BaseException:
            db.close()
            self._forget()
            raise
        for suffix in ("-wal", "-shm"):
            try:
                os.chmod(self.path + suffix, 0o600)
            except OSError:
                pass   # absent, or removed meanwhile by the last run closing it: nothing to protect
        return db

    def _make_parent(self) -> None:
        """Create each missing directory above the journal 0700, whatever the umask."""
        missing = []
        folder = os.path.dirname(self.path)
        while not os.path.isdir(folder) and os.path.dirname(folder) != folder:
            missing.append(folder)
            folder = os.path.dirname(folder)
        for folder in reversed(missing):
            try:
                os.mkdir(folder, 0o700)
            except FileExistsError:
                if os.path.isdir(folder):
                    continue   # made by a concurrent run
                raise JournalError("journal: cannot create %s: %s exists and is not a directory; set journal (or "
                                   "GPUPROV_JOURNAL) to a writable path" % (self.path, folder))
            except OSError as exc:
                above = os.path.dirname(folder)
                if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
                    raise JournalError("journal: cannot create %s: directory %s is not writable (%s); make it "
                                       "writable or set journal (or GPUPROV_JOURNAL) to a writable path"
                                       % (self.path, above, exc.strerror))
                raise JournalError("journal: cannot create %s: creating %s failed (%s); set journal (or "
                                   "GPUPROV_JOURNAL) to a writable path" % (self.path, folder, exc.strerror or exc))
            os.chmod(folder, 0o700)   # mkdir's mode is filtered by the umask

    def _identify(self) -> None:
        """Create a missing journal file, or make sure an existing one is ours, reading it
        only: nothing is written to a file that is not a gpuprov journal."""
        try:
            info = os.stat(self.path)
        except FileNotFoundError:
            info = self._create_file()
        except OSError as exc:
            raise JournalError("journal: cannot inspect %s (%s); %s" % (self.path, exc.strerror or exc, _ELSEWHERE))
        if not stat.S_ISREG(info.st_mode):
            raise JournalError("journal: %s is not a file; set journal (or GPUPROV_JOURNAL) to a file path"
                               % self.path)
        self._file_id = (info.st_dev, info.st_ino)
        if info.st_size == 0 or _OPEN_FILES.get(self._file_id):
            return   # empty: ours to initialise; already open in this process: identified then
        header = self._read_header()
        if len(header) < _HEADER_SIZE or not header.startswith(SQLITE_MAGIC):
            raise self._refuse("not an SQLite database")
        (application_id,) = struct.unpack(">i", header[_APPLICATION_ID_OFFSET:_APPLICATION_ID_OFFSET + 4])
        if application_id == APPLICATION_ID:
            return
        if application_id != 0:
            raise self._refuse("an SQLite database of something else (application_id 0x%08x)"
                               % (application_id & 0xffffffff))
        self._inspect_read_only(wal_mode=header[18] == 2 or header[19] == 2)

    def _create_file(self) -> os.stat_result:
        """Build a whole journal beside ``path`` and link it into place, so a concurrent run
        finds no file or a complete journal (already in WAL mode), never a half-made one."""
        folder = os.path.dirname(self.path)
        temp = "%s.new-%s" % (self.path, uuid.uuid4().hex[:8])
        self._create_private(temp)
        try:
            self._build(temp)
            try:
                os.link(temp, self.path)
            except FileExistsError:
                pass   # another run published its journal first: that one is the journal
            except OSError:
                # No hard links here (some network and FUSE file systems): an empty file that
                # _prepare initialises in place, under SQLite's own locks.
                self._create_private(self.path, exist_ok=True)
            else:
                _sync_directory(folder)
        finally:
            try:
                os.unlink(temp)
            except OSError:
                pass
        try:
            return os.stat(self.path)
        except OSError as exc:
            raise JournalError("journal: cannot inspect %s (%s); %s" % (self.path, exc.strerror or exc, _ELSEWHERE))

    def _create_private(self, path: str, exist_ok: bool = False) -> None:
        """An empty file at ``path``, 0600 whatever the umask, before SQLite touches it."""
        try:
            handle = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        except FileExistsError:
            if exist_ok:
                return
            raise JournalError("journal: cannot create %s: %s already exists; %s" % (self.path, path, _ELSEWHERE))
        except OSError as exc:
            folder = os.path.dirname(self.path)
            if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
                raise JournalError("journal: cannot create %s: directory %s is not writable (%s); make it writable "
                                   "or set journal (or GPUPROV_JOURNAL) to a writable path"
                                   % (self.path, folder, exc.strerror))
            raise JournalError("journal: cannot create %s (%s); set journal (or GPUPROV_JOURNAL) to a writable path"
                               % (self.path, exc.strerror or exc))
        try:
            os.fchmod(handle, 0o600)
        finally:
            os.close(handle)

    def _build(self, temp: str) -> None:
        try:
            db = sqlite3.connect(temp, timeout=30.0, isolation_level=None)
            try:
                with _Transaction(db):
                    _create_schema(db, self._tables)
                db.execute("PRAGMA journal_mode=WAL")
            finally:
                db.close()
        except sqlite3.Error as exc:
            raise self._database_error(exc)

    def _read_header(self) -> bytes:
        try:
            handle = os.open(self.path, os.O_RDONLY)
        except OSError as exc:
            raise JournalError("journal: %s is not readable by this user (%s); fix its permissions or %s"
                               % (self.path, exc.strerror or exc, _ELSEWHERE))
        try:
            return os.read(handle, _HEADER_SIZE)
        finally:
            os.close(handle)

    def _inspect_read_only(self, wal_mode: bool) -> None:
        """Look inside an SQLite file with application_id 0 without writing anything."""
        for _attempt in range(3):
            # A read-only connection to a WAL database creates -wal and -shm when they are missing;
            # then only the main file holds data, and an immutable (lock-free) read sees it all.
            wal_files = os.path.exists(self.path + "-wal") and os.path.exists(self.path + "-shm")
            immutable = wal_mode and not wal_files
            before = self._stamp()
            try:
                found, error = self._classify_read_only(immutable), None
            except JournalError as exc:
                found, error = None, exc
            # A lock-free read is only good if no run opened the file meanwhile (a checkpoint
            # writing the main file could tear it): otherwise read again, through the WAL.
            if not immutable or (self._stamp() == before and not os.path.exists(self.path + "-wal")):
                break
        if error is not None:
            raise error
        if found == "empty":
            raise self._refuse("an SQLite database of something else (it has no gpuprov tables)")

    def _stamp(self) -> Tuple[int, int]:
        info = os.stat(self.path)
        return info.st_size, info.st_mtime_ns

    def _classify_read_only(self, immutable: bool) -> str:
        flags = "mode=ro&immutable=1" if immutable else "mode=ro"
        try:
            db = sqlite3.connect("file:%s?%s" % (quote(self.path), flags), uri=True, timeout=30.0,
                                 isolation_level=None)
        except sqlite3.Error as exc:
            raise self._database_error(exc)
        try:
            with _Snapshot(db):
                return self._classify(db)
        except sqlite3.Error as exc:
            raise self._database_error(exc)
        finally:
            db.close()

    def _classify(self, db: sqlite3.Connection) -> str:
        """'empty' (no tables yet), 'current' (schema SCHEMA_VERSION) or 'schema 1' (to migrate);
        JournalError for anything that is not a gpuprov journal we can write."""
        (application_id,) = db.execute("PRAGMA application_id").fetchone()
        tables = _user_tables(db)
        if not tables:
            return "empty"
        if application_id == 0 and not _is_schema_1_shape(db, tables):
            raise self._refuse("an SQLite database of something else (tables: %s)" % ", ".join(tables))
        if application_id not in (0, APPLICATION_ID):
            raise self._refuse("an SQLite database of something else (application_id 0x%08x)"
                               % (application_id & 0xffffffff))
        value = _meta_value(db, tables, "schema")
        if value is None or not value.strip().isdigit():
            raise self._damaged(value)
        found = int(value)
        if found > SCHEMA_VERSION:
            raise JournalError("journal: %s was written by a newer gpuprov.cloud (schema %d > %d); "
                               "upgrade the collection" % (self.path, found, SCHEMA_VERSION))
        if found == SCHEMA_VERSION and application_id == APPLICATION_ID:
            return "current"
        if found == 1:
            return "schema 1"
        raise JournalError("journal: %s: schema version %d does not go with application_id %d; the file is damaged "
                           "or not a gpuprov journal; move it aside or %s"
                           % (self.path, found, application_id, _ELSEWHERE))

    def _check_writable(self) -> None:
        """Say which path is read-only before SQLite reports it as a locked or damaged database."""
        if not os.access(self.path, os.R_OK | os.W_OK):
            raise self._unwritable("its permissions do not let this user read and write it, or it is on a "
                                   "read-only file system", "fix its permissions (chmod u+rw %s)" % self.path)
        folder = os.path.dirname(self.path)
        beside = os.path.exists(self.path + "-wal") and os.path.exists(self.path + "-shm")
        if not beside and not os.access(folder, os.W_OK | os.X_OK):
            raise self._unwritable("SQLite keeps its -wal and -shm files beside it, and directory %s is read-only"
                                   % folder, "make that directory writable")
        mode = stat.S_IMODE(os.stat(self.path).st_mode)
        if mode != 0o600:
            try:
                os.chmod(self.path, 0o600)
            except OSError as exc:
                raise JournalError("journal: cannot restrict %s to mode 0600 (%s); it must belong to this user; "
                                   "fix its owner or %s" % (self.path, exc.strerror or exc, _ELSEWHERE))

    def _prepare(self, db: sqlite3.Connection) -> None:
        """Initialise an empty file or migrate schema 1 (one transaction each); learn the journal id."""
        try:
            db.execute("PRAGMA busy_timeout=30000")
            with _Snapshot(db):
                ready = (self._classify(db) == "current" and _stored_journal_id(db) is not None
                         and not _missing(db, self._tables))
            if not ready:
                with _Transaction(db):
                    found = self._classify(db)   # again, under the write lock: another run may have been first
                    if found == "empty":
                        _create_schema(db, self._tables)
                    elif found == "schema 1":
                        for statement in _MIGRATE_FROM_1:
                            db.execute(statement)
                        db.execute("UPDATE meta SET value = ? WHERE name = 'schema'", (str(SCHEMA_VERSION),))
                        db.execute("PRAGMA application_id = %d" % APPLICATION_ID)
                    if _stored_journal_id(db) is None:
                        db.execute("INSERT INTO meta (name, value) VALUES ('journal_id', ?)", (uuid.uuid4().hex,))
                    for statement in _missing(db, self._tables):
                        db.execute(statement)
                if found == "empty":
                    # Only the run that initialised it switches it: two runs switching at once
                    # would wait on each other's read lock for the whole busy timeout.
                    db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=FULL")
            self._journal_id = _stored_journal_id(db)
        except sqlite3.Error as exc:
            raise self._database_error(exc)

    def _database_error(self, exc: sqlite3.Error) -> JournalError:
        text = str(exc)
        if "readonly" in text or "read-only" in text:
            return self._unwritable("SQLite: %s" % text, "make it and its directory writable")
        if "locked" in text or "busy" in text:
            return JournalError("journal: %s is locked by another process (%s); retry when the other run has "
                                "finished" % (self.path, text))
        if "unable to open" in text:
            return JournalError("journal: cannot open %s (SQLite: %s); check that it and its directory are "
                                "readable and writable, or %s" % (self.path, text, _ELSEWHERE))
        return JournalError("journal: %s is not a readable gpuprov journal (%s); move it aside or %s"
                            % (self.path, text, _ELSEWHERE))

    def _remember(self) -> None:
        _OPEN_FILES[self._file_id] = _OPEN_FILES.get(self._file_id, 0) + 1

    def _forget(self) -> None:
        with _OPEN_LOCK:
            left = _OPEN_FILES.get(self._file_id, 0) - 1
            if left > 0:
                _OPEN_FILES[self._file_id] = left
            else:
                _OPEN_FILES.pop(self._file_id, None)
        self._file_id = None

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

    def live_holder(self, key: str) -> Optional[str]:
        """The owner of ``key``'s lease while it is unexpired (journal clock) and that owner
        may still be running; None when nobody holds it."""
        row = self._db.execute("SELECT lease_owner, lease_expires FROM machines WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        holder, expires = row
        if holder and expires is not None and expires > self.clock() and owner_alive(holder):
            return holder
        return None

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
        elif self.db.in_transaction:   # SQLite may already have rolled back (disk full, I/O error)
            self.db.execute("ROLLBACK")


class _Snapshot:
    """BEGIN ... ROLLBACK: several reads that see one committed state."""

    def __init__(self, db: sqlite3.Connection):
        self.db = db

    def __enter__(self) -> sqlite3.Connection:
        self.db.execute("BEGIN")
        return self.db

    def __exit__(self, exc_type, exc, tb) -> None:
        if self.db.in_transaction:
            self.db.execute("ROLLBACK")
