# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Opening a SQLite journal file (machine/journal.py's): how a file is identified as a gpuprov
journal before anything is written to it, how a new journal is built whole and private beside its
path and linked into place (with machine/journal_sql.py's tables), and the migration of a schema-1
journal. Any other file is refused and left byte for byte as it was; every refusal says what to do.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import stat
import struct
import threading
import uuid
from typing import Any, Dict, List, Optional, Sequence, Tuple
from urllib.parse import quote

from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journal_sql import (
    INSERT_META, META_VALUE, MIGRATE_FROM_1, SCHEMA_VERSION, SET_SCHEMA, JournalError, created_name, journal_tables,
    newer_schema, not_a_journal,
)

# PRAGMA application_id of every gpuprov journal: the ASCII bytes "gprv", stored big-endian
# at byte offset 68 of the file header. Fixed forever: it is how a journal is recognised.
APPLICATION_ID = 0x67707276

SQLITE_MAGIC = b"SQLite format 3\x00"
_HEADER_SIZE = 100
_APPLICATION_ID_OFFSET = 68

_TABLES = journal_tables("sqlite")

# Schema 1 -> 2, run in one transaction together with the meta and application_id updates.
_MIGRATE_FROM_1 = MIGRATE_FROM_1

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


def missing_tables(db: sqlite3.Connection, tables: Sequence[str]) -> List[str]:
    """The statements of ``tables`` whose table or index does not exist yet."""
    present = {name for (name,) in db.execute("SELECT name FROM sqlite_master")}
    return [statement for statement in tables if created_name(statement) not in present]


def _create_schema(db: sqlite3.Connection, tables: Tuple[str, ...]) -> None:
    """Every table of the current schema and ``tables``, the meta rows and the application id
    (inside a transaction)."""
    for statement in _TABLES + tables:
        db.execute(statement)
    db.execute(INSERT_META, ("schema", str(SCHEMA_VERSION)))
    db.execute(INSERT_META, ("journal_id", uuid.uuid4().hex))
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
    found = db.execute(META_VALUE, ("journal_id",)).fetchone()
    return found[0] if found else None


def _meta_value(db: sqlite3.Connection, tables: List[str], name: str) -> Optional[str]:
    if "meta" not in tables:
        return None
    found = db.execute(META_VALUE, (name,)).fetchone()
    return found[0] if found else None


class JournalFile:
    """The opening half of ``Journal``: its subclass sets ``path``, ``_tables``, ``_file_id`` and
    ``_journal_id`` and calls ``_open``."""

    path = ""
    _tables: Tuple[str, ...] = ()
    _file_id: Optional[Tuple[int, int]] = None
    _journal_id: Optional[str] = ""

    def _refuse(self, what: str) -> JournalError:
        return not_a_journal(self.path, what, "move it aside or " + _ELSEWHERE)

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
                raise self._database_error(exc) from exc
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
                                   "GPUPROV_JOURNAL) to a writable path" % (self.path, folder)) from None
            except OSError as exc:
                above = os.path.dirname(folder)
                if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
                    raise JournalError("journal: cannot create %s: directory %s is not writable (%s); make it "
                                       "writable or set journal (or GPUPROV_JOURNAL) to a writable path"
                                       % (self.path, above, exc.strerror)) from exc
                raise JournalError("journal: cannot create %s: creating %s failed (%s); set journal (or "
                                   "GPUPROV_JOURNAL) to a writable path" % (self.path, folder, exc.strerror or exc)) from exc
            os.chmod(folder, 0o700)   # mkdir's mode is filtered by the umask

    def _identify(self) -> None:
        """Create a missing journal file, or make sure an existing one is ours, reading it
        only: nothing is written to a file that is not a gpuprov journal."""
        try:
            info = os.stat(self.path)
        except FileNotFoundError:
            info = self._create_file()
        except OSError as exc:
            raise JournalError("journal: cannot inspect %s (%s); %s" % (self.path, exc.strerror or exc, _ELSEWHERE)) from exc
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
            raise JournalError("journal: cannot inspect %s (%s); %s" % (self.path, exc.strerror or exc, _ELSEWHERE)) from exc

    def _create_private(self, path: str, exist_ok: bool = False) -> None:
        """An empty file at ``path``, 0600 whatever the umask, before SQLite touches it."""
        try:
            handle = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        except FileExistsError:
            if exist_ok:
                return
            raise JournalError("journal: cannot create %s: %s already exists; %s" % (self.path, path, _ELSEWHERE)) from None
        except OSError as exc:
            folder = os.path.dirname(self.path)
            if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
                raise JournalError("journal: cannot create %s: directory %s is not writable (%s); make it writable "
                                   "or set journal (or GPUPROV_JOURNAL) to a writable path"
                                   % (self.path, folder, exc.strerror)) from exc
            raise JournalError("journal: cannot create %s (%s); set journal (or GPUPROV_JOURNAL) to a writable path"
                               % (self.path, exc.strerror or exc)) from exc
        try:
            os.fchmod(handle, 0o600)
        finally:
            os.close(handle)

    def _build(self, temp: str) -> None:
        try:
            db = sqlite3.connect(temp, timeout=30.0, isolation_level=None)
            try:
                with WriteTransaction(db):
                    _create_schema(db, self._tables)
                db.execute("PRAGMA journal_mode=WAL")
            finally:
                db.close()
        except sqlite3.Error as exc:
            raise self._database_error(exc) from exc

    def _read_header(self) -> bytes:
        try:
            handle = os.open(self.path, os.O_RDONLY)
        except OSError as exc:
            raise JournalError("journal: %s is not readable by this user (%s); fix its permissions or %s"
                               % (self.path, exc.strerror or exc, _ELSEWHERE)) from exc
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
            raise self._database_error(exc) from exc
        try:
            with _Snapshot(db):
                return self._classify(db)
        except sqlite3.Error as exc:
            raise self._database_error(exc) from exc
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
            raise newer_schema(self.path, found)
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
                                   "fix its owner or %s" % (self.path, exc.strerror or exc, _ELSEWHERE)) from exc

    def _prepare(self, db: sqlite3.Connection) -> None:
        """Initialise an empty file or migrate schema 1 (one transaction each); learn the journal id."""
        try:
            db.execute("PRAGMA busy_timeout=30000")
            with _Snapshot(db):
                ready = (self._classify(db) == "current" and _stored_journal_id(db) is not None
                         and not missing_tables(db, self._tables))
            if not ready:
                with WriteTransaction(db):
                    found = self._classify(db)   # again, under the write lock: another run may have been first
                    if found == "empty":
                        _create_schema(db, self._tables)
                    elif found == "schema 1":
                        for statement in _MIGRATE_FROM_1:
                            db.execute(statement)
                        db.execute(SET_SCHEMA, (str(SCHEMA_VERSION),))
                        db.execute("PRAGMA application_id = %d" % APPLICATION_ID)
                    if _stored_journal_id(db) is None:
                        db.execute(INSERT_META, ("journal_id", uuid.uuid4().hex))
                    for statement in missing_tables(db, self._tables):
                        db.execute(statement)
                if found == "empty":
                    # Only the run that initialised it switches it: two runs switching at once
                    # would wait on each other's read lock for the whole busy timeout.
                    db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=FULL")
            self._journal_id = _stored_journal_id(db)
        except sqlite3.Error as exc:
            raise self._database_error(exc) from exc

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
        if self._file_id is not None:   # _identify, just before, sets it
            _OPEN_FILES[self._file_id] = _OPEN_FILES.get(self._file_id, 0) + 1

    def _forget(self) -> None:
        file_id, self._file_id = self._file_id, None
        if file_id is None:
            return
        with _OPEN_LOCK:
            left = _OPEN_FILES.get(file_id, 0) - 1
            if left > 0:
                _OPEN_FILES[file_id] = left
            else:
                _OPEN_FILES.pop(file_id, None)


class WriteTransaction:
    """BEGIN IMMEDIATE ... COMMIT, rolled back on any exception."""

    def __init__(self, db: sqlite3.Connection):
        self.db = db

    def __enter__(self) -> sqlite3.Connection:
        self.db.execute("BEGIN IMMEDIATE")
        return self.db

    def __exit__(self, exc_type: Optional[type], exc: Optional[BaseException], tb: Any) -> None:
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

    def __exit__(self, exc_type: Optional[type], exc: Optional[BaseException], tb: Any) -> None:
        if self.db.in_transaction:
            self.db.execute("ROLLBACK")
