# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The PostgreSQL journal: the SQLite journal's interface and semantics on a shared server.

Same tables as the SQLite journal (``meta``, ``machines``, ``machine_events``,
``machine_options``, ``leases``, plus the layer above's), in the DSN's database and current schema.
Every time the journal writes (lease expiry, updated_at, event times) is the SERVER's clock
(``now()``), so controllers with skewed clocks agree on when a lease expires. A holder on
another host is alive until its lease expires; one on this host that is provably dead
(``owners.owner_alive``) may be taken over at once, as on SQLite.

Identity: a gpuprov journal's ``meta`` holds ``application = gpuprov`` (the equivalent of
SQLite's application_id), ``schema`` and ``journal_id``. A schema with other tables and no
such row is refused, and nothing is written to it.

The layer above's plain SQL (``?`` placeholders, SQLite types) is translated: ``?`` to
``%s``, ``REAL`` to ``DOUBLE PRECISION``.
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journal_sql import (
    SCHEMA_VERSION, Conflict, JournalError, LeaseHeld, Row, created_name,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.owners import lease_held_message, owner_alive
from ansible_collections.gpuprov.cloud.plugins.module_utils.requirements import missing_package


def _psycopg():
    """The psycopg package, imported on first use: every start of a module or action reaches this
    file (through the state directory's DSN check), and a SQLite journal must not pay for the import
    (0.1-0.2 s a worker, so seconds for a fleet)."""
    import psycopg  # pylint: disable=import-outside-toplevel
    return psycopg


APPLICATION = "gpuprov"
DSN_SCHEMES = ("postgresql://", "postgres://")

# Serialises creating and migrating the schema across controllers (any constant will do).
_SCHEMA_LOCK = 0x67707276
# With hashtext(key), serialises taking a row-less key's lease and creating its row (the
# transaction-scoped advisory lock of one key; a row lock cannot guard a row not there yet).
_KEY_LOCK_CLASS = 0x67707277

_NOW = "EXTRACT(EPOCH FROM now())::double precision"

_TABLES = (
    "CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """CREATE TABLE IF NOT EXISTS machines (
        key TEXT PRIMARY KEY, kind TEXT NOT NULL, state TEXT NOT NULL, label TEXT NOT NULL,
        terminal INTEGER NOT NULL, version INTEGER NOT NULL, lease_owner TEXT,
        lease_expires DOUBLE PRECISION, created_at DOUBLE PRECISION NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL, entered_at DOUBLE PRECISION NOT NULL,
        cancel_owner TEXT, cancel_reason TEXT)""",
    """CREATE TABLE IF NOT EXISTS machine_events (
        id BIGSERIAL PRIMARY KEY, key TEXT NOT NULL, version INTEGER NOT NULL, event TEXT NOT NULL,
        from_label TEXT, to_label TEXT, note TEXT, owner TEXT, at DOUBLE PRECISION NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS machine_events_key ON machine_events (key, id)",
    """CREATE TABLE IF NOT EXISTS machine_options (
        key TEXT NOT NULL, cloud TEXT NOT NULL, options TEXT NOT NULL, PRIMARY KEY (key, cloud))""",
    # The lease of a key that has no machines row yet (machine/journal.py LEASES_TABLE).
    """CREATE TABLE IF NOT EXISTS leases (
        key TEXT PRIMARY KEY, owner TEXT NOT NULL, expires DOUBLE PRECISION NOT NULL)""",
)

# Statements that bring a journal of schema N up to N + 1 (none yet: schema 2 is the first
# PostgreSQL schema). Run under the schema lock, in one transaction with the meta update.
_MIGRATIONS: Dict[int, Tuple[str, ...]] = {}

_ROW = ("key, kind, state, label, terminal, version, lease_owner, lease_expires, updated_at, entered_at")


def is_dsn(location: Optional[str]) -> bool:
    """Whether a journal location is a PostgreSQL DSN (else it is an SQLite path)."""
    return bool(location) and location.strip().lower().startswith(DSN_SCHEMES)


def scrub_dsn(dsn: str) -> str:
    """``dsn`` without its password (in the user part or a ``password=`` parameter): what may be shown."""
    try:
        parts = urlsplit(dsn.strip())
        netloc = parts.netloc
        if "@" in netloc:
            user, host = netloc.rsplit("@", 1)
            netloc = "%s@%s" % (user.split(":", 1)[0], host)
        query = urlencode([(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True)
                           if k.lower() != "password"])
        return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
    except ValueError:
        return "postgresql://(unparseable DSN)"


def _translate(sql: str) -> str:
    """SQLite-flavoured plain SQL of the layer above, for psycopg: ``?`` placeholders become
    ``%s`` (outside quoted strings; a literal ``%`` is doubled) and REAL means double precision."""
    out = []
    for index, part in enumerate(re.split(r"('(?:[^']|'')*')", sql)):
        if index % 2:
            out.append(part.replace("%", "%%"))
        else:
            part = re.sub(r"\bREAL\b", "DOUBLE PRECISION", part, flags=re.IGNORECASE)
            out.append(part.replace("%", "%%").replace("?", "%s"))
    return "".join(out)


class _Tx:
    """What ``with journal.transaction() as tx`` yields: ``tx.execute(sql, args)`` returns a
    cursor (fetchone, fetchall, rowcount), the SQL translated as in ``execute``."""

    def __init__(self, conn):
        self.conn = conn

    def execute(self, sql: str, args: Sequence[Any] = ()):
        return self.conn.execute(_translate(sql), tuple(args))


class PgJournal:
    """A journal in the PostgreSQL database named by ``dsn`` (``postgresql://...``).

    ``password``: used instead of one in the DSN or libpq's environment (PGPASSWORD,
    PGPASSFILE); never shown. ``clock``: the time the layer above stamps its own rows with
    (default: the server's); the journal's own times are always the server's."""

    backend = "postgresql"

    def __init__(self, dsn: str, clock=None, tables: Sequence[str] = (), password: Optional[str] = None):
        try:
            _psycopg()
        except ImportError:
            raise JournalError("journal: %s is a PostgreSQL journal, which needs psycopg. %s"
                               % (scrub_dsn(dsn), missing_package("psycopg"))) from None
        self._dsn = dsn.strip()
        self._password = password
        self.path = scrub_dsn(self._dsn)   # shown in results and messages: never the password
        self.clock = clock or self.server_time
        self._tables = tuple(tables)
        for statement in self._tables:
            created_name(statement)
        self._journal_id = ""
        self._conn = None
        self._connect()
        self._prepare()

    @property
    def journal_id(self) -> str:
        return self._journal_id

    @property
    def location(self) -> str:
        return self.path

    def reopen(self) -> "PgJournal":
        """A second connection to this journal (the lease heartbeat's)."""
        return PgJournal(self._dsn, clock=self.clock if self.clock != self.server_time else None,
                         password=self._password)

    # -- connecting ------------------------------------------------------------------
    def _scrub(self, text: str) -> str:
        for secret in (self._password, urlsplit(self._dsn).password):
            if secret:
                text = text.replace(secret, "***")
        return text.replace(self._dsn, self.path)

    def _error(self, exc: Exception, doing: str) -> JournalError:
        text = self._scrub(str(exc).strip().replace("\n", " "))
        if "password authentication failed" in text or "no password supplied" in text:
            fix = "check the user and the password (journal_password, PGPASSWORD or PGPASSFILE)"
        elif isinstance(exc, _psycopg().OperationalError):
            fix = "check that the server runs and accepts connections, then run again: the journal is resumable"
        else:
            fix = "see the server's message"
        return JournalError("journal: PostgreSQL journal %s: %s failed (%s); %s" % (self.path, doing, text, fix))

    def _connect(self) -> None:
        extra = {"password": self._password} if self._password else {}
        try:
            self._conn = _psycopg().connect(self._dsn, autocommit=True, connect_timeout=10,
                                            application_name="gpuprov", **extra)
        except _psycopg().Error as exc:
            raise self._error(exc, "connecting")

    def _db(self):
        """The connection, made again if the server dropped it (a restart): the call that saw
        the drop failed; the next one reconnects."""
        if self._conn is None or self._conn.closed or self._conn.broken:
            self._connect()
        return self._conn

    def _run(self, doing: str, work):
        try:
            return work(self._db())
        except JournalError:
            raise
        except _psycopg().Error as exc:
            raise self._error(exc, doing)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()

    def server_time(self) -> float:
        return self._run("reading the clock", lambda db: db.execute("SELECT %s" % _NOW).fetchone()[0])

    # -- schema ------------------------------------------------------------------------
    def _refuse(self, what: str) -> JournalError:
        return JournalError("journal: %s is not a gpuprov journal (%s) and was left unchanged; use another database "
                            "or schema, or set journal (or GPUPROV_JOURNAL) to another location" % (self.path, what))

    @staticmethod
    def _names(db) -> set:
        return {name for (name,) in db.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() "
            "UNION SELECT indexname FROM pg_indexes WHERE schemaname = current_schema()")}

    def _missing(self, db, statements: Sequence[str]) -> List[str]:
        present = self._names(db)
        return [s for s in statements if created_name(s) not in present]

    def _classify(self, db) -> str:
        """'empty', 'current' or 'schema N' (to migrate); JournalError for anything not ours."""
        names = self._names(db)
        if not names:
            return "empty"
        meta = {}
        if "meta" in names:
            meta = dict(db.execute("SELECT name, value FROM meta WHERE name IN ('application', 'schema')"))
        if meta.get("application") != APPLICATION:
            tables = sorted(n for (n,) in db.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"))
            raise self._refuse("its schema has tables %s and no gpuprov meta row" % ", ".join(tables))
        value = meta.get("schema") or ""
        if not value.isdigit():
            raise JournalError("journal: %s: schema version %r is not a number; the journal is damaged"
                               % (self.path, value))
        found = int(value)
        if found > SCHEMA_VERSION:
            raise JournalError("journal: %s was written by a newer gpuprov.cloud (schema %d > %d); upgrade the "
                               "collection" % (self.path, found, SCHEMA_VERSION))
        return "current" if found == SCHEMA_VERSION else "schema %d" % found

    def _prepare(self) -> None:
        def ready(db) -> bool:
            return self._classify(db) == "current" and not self._missing(db, _TABLES + self._tables)

        def build(db) -> None:
            with db.transaction():
                db.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
                found = self._classify(db)   # again, under the lock: another controller may have been first
                if found == "empty":
                    for statement in _TABLES:
                        db.execute(statement)
                    db.execute("INSERT INTO meta (name, value) VALUES ('application', %s), ('schema', %s), "
                               "('journal_id', %s)", (APPLICATION, str(SCHEMA_VERSION), uuid.uuid4().hex))
                elif found.startswith("schema "):
                    for version in range(int(found.split()[1]), SCHEMA_VERSION):
                        for statement in _MIGRATIONS.get(version, ()):
                            db.execute(statement)
                    db.execute("UPDATE meta SET value = %s WHERE name = 'schema'", (str(SCHEMA_VERSION),))
                for statement in self._missing(db, _TABLES + self._tables):
                    db.execute(_translate(statement))

        def identify(db) -> None:
            if not ready(db):
                build(db)
            found = db.execute("SELECT value FROM meta WHERE name = 'journal_id'").fetchone()
            if found is None:
                raise JournalError("journal: %s has no journal_id; the journal is damaged" % self.path)
            self._journal_id = found[0]

        self._run("opening", identify)

    # -- for the layer above: its own tables, through plain SQL ----------------------
    def ensure_tables(self, tables: Iterable[str]) -> None:
        wanted = [s for s in tables if s not in self._tables]
        if not wanted:
            return

        def create(db) -> None:
            if self._missing(db, wanted):
                with db.transaction():
                    db.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
                    for statement in self._missing(db, wanted):
                        db.execute(_translate(statement))
        self._run("creating tables", create)
        self._tables += tuple(wanted)

    def transaction(self):
        return _Transaction(self)

    def execute(self, sql: str, args: Sequence[Any] = ()) -> None:
        self._run("writing", lambda db: db.execute(_translate(sql), tuple(args)))

    def query(self, sql: str, args: Sequence[Any] = ()) -> List[Tuple]:
        return self._run("reading", lambda db: [tuple(r) for r in db.execute(_translate(sql), tuple(args))])

    # -- machines --------------------------------------------------------------------
    def load(self, key: str) -> Optional[Row]:
        found = self._run("reading", lambda db: db.execute(
            "SELECT %s FROM machines WHERE key = %%s" % _ROW, (key,)).fetchone())
        return Row(tuple(found)) if found else None

    def keys(self) -> List[str]:
        return self._run("reading", lambda db: [r[0] for r in db.execute("SELECT key FROM machines ORDER BY key")])

    def _lock_key(self, db, key: str) -> float:
        """Take ``key``'s advisory lock for this transaction; the server's time."""
        db.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (_KEY_LOCK_CLASS, key))
        return db.execute("SELECT %s" % _NOW).fetchone()[0]

    @staticmethod
    def _refuse_held(holder: Optional[str], expires: Optional[float], now: float, owner: str, key: str) -> None:
        if holder and holder != owner and expires is not None and expires > now and owner_alive(holder):
            raise LeaseHeld(lease_held_message(key, holder, expires - now))

    def acquire(self, key: str, owner: str, ttl: float) -> None:
        """As the SQLite journal's: a key without a row gets a lease of its own (``leases``)."""
        def take(db) -> None:
            with db.transaction():
                now = self._lock_key(db, key)
                row = db.execute("SELECT lease_owner, lease_expires FROM machines WHERE key = %s FOR UPDATE",
                                 (key,)).fetchone()
                if row is None:
                    found = db.execute("SELECT owner, expires FROM leases WHERE key = %s", (key,)).fetchone()
                    if found is not None:
                        self._refuse_held(found[0], found[1], now, owner, key)
                    db.execute("INSERT INTO leases (key, owner, expires) VALUES (%s, %s, %s) ON CONFLICT (key) "
                               "DO UPDATE SET owner = EXCLUDED.owner, expires = EXCLUDED.expires",
                               (key, owner, now + ttl))
                    return
                self._refuse_held(row[0], row[1], now, owner, key)
                db.execute("UPDATE machines SET lease_owner = %s, lease_expires = %s WHERE key = %s",
                           (owner, now + ttl, key))
        self._run("taking the lease", take)

    def renew(self, key: str, owner: str, ttl: float) -> bool:
        def extend(db) -> bool:
            if db.execute("UPDATE machines SET lease_expires = %s + %%s WHERE key = %%s AND lease_owner = %%s" % _NOW,
                          (ttl, key, owner)).rowcount == 1:
                return True
            return db.execute("UPDATE leases SET expires = %s + %%s WHERE key = %%s AND owner = %%s "
                              "AND NOT EXISTS (SELECT 1 FROM machines WHERE key = %%s)" % _NOW,
                              (ttl, key, owner, key)).rowcount == 1
        return self._run("renewing the lease", extend)

    def holds(self, key: str, owner: str) -> bool:
        def read(db):
            row = db.execute("SELECT lease_owner FROM machines WHERE key = %s", (key,)).fetchone()
            if row is None:
                row = db.execute("SELECT owner FROM leases WHERE key = %s", (key,)).fetchone()
            return row
        row = self._run("reading", read)
        return row is not None and row[0] == owner

    def release(self, key: str, owner: str) -> None:
        def free(db) -> None:
            with db.transaction():
                db.execute("UPDATE machines SET lease_owner = NULL, lease_expires = NULL "
                           "WHERE key = %s AND lease_owner = %s", (key, owner))
                db.execute("DELETE FROM leases WHERE key = %s AND owner = %s", (key, owner))
        self._run("writing", free)

    def live_holder(self, key: str) -> Optional[str]:
        def read(db):
            row = db.execute("SELECT lease_owner, lease_expires, %s FROM machines WHERE key = %%s" % _NOW,
                             (key,)).fetchone()
            if row is None:
                row = db.execute("SELECT owner, expires, %s FROM leases WHERE key = %%s" % _NOW, (key,)).fetchone()
            return row
        row = self._run("reading", read)
        if row is None:
            return None
        holder, expires, now = row
        if holder and expires is not None and expires > now and owner_alive(holder):
            return holder
        return None

    # -- cancel requests ---------------------------------------------------------------
    def request_cancel(self, key: str, holder: str, reason: str) -> bool:
        return self._run("writing", lambda db: db.execute(
            "UPDATE machines SET cancel_owner = %s, cancel_reason = %s WHERE key = %s AND lease_owner = %s",
            (holder, reason or "cancel requested", key, holder)).rowcount == 1)

    def cancel_request(self, key: str, owner: str) -> Optional[str]:
        row = self._run("reading", lambda db: db.execute(
            "SELECT cancel_reason FROM machines WHERE key = %s AND cancel_owner = %s", (key, owner)).fetchone())
        if row is None:
            return None
        return row[0] or "cancel requested"

    def clear_cancel(self, key: str) -> None:
        self.execute("UPDATE machines SET cancel_owner = NULL, cancel_reason = NULL WHERE key = ?", (key,))

    def begin(self, key: str, kind: str, state: Dict[str, Any], label: str, terminal: bool,
              owner: str, ttl: float, expected_version: Optional[int], note: str = "") -> int:
        blob = json.dumps(state, sort_keys=True)

        def write(db) -> int:
            with db.transaction():
                (now,) = db.execute("SELECT %s" % _NOW).fetchone()
                if expected_version is None:
                    now = self._lock_key(db, key)
                    found = db.execute("SELECT owner, expires FROM leases WHERE key = %s", (key,)).fetchone()
                    if found is not None:
                        self._refuse_held(found[0], found[1], now, owner, key)
                    db.execute("DELETE FROM leases WHERE key = %s", (key,))   # the row carries the lease now
                    try:
                        with db.transaction():   # a savepoint: the duplicate key must not abort the outer one
                            db.execute(
                                "INSERT INTO machines (key, kind, state, label, terminal, version, lease_owner, "
                                "lease_expires, created_at, updated_at, entered_at) "
                                "VALUES (%s,%s,%s,%s,%s,1,%s,%s,%s,%s,%s)",
                                (key, kind, blob, label, int(terminal), owner, now + ttl, now, now, now))
                    except _psycopg().errors.UniqueViolation:
                        raise Conflict("%s was created by another run at the same time" % key)
                    version = 1
                else:
                    cur = db.execute(
                        "UPDATE machines SET kind = %s, state = %s, label = %s, terminal = %s, version = version + 1, "
                        "lease_owner = %s, lease_expires = %s, updated_at = %s, entered_at = %s, "
                        "cancel_owner = NULL, cancel_reason = NULL "
                        "WHERE key = %s AND version = %s AND (lease_owner IS NULL OR lease_owner = %s "
                        "OR lease_expires < %s)",
                        (kind, blob, label, int(terminal), owner, now + ttl, now, now, key,
                         expected_version, owner, now))
                    if cur.rowcount != 1:
                        raise Conflict("%s changed under this run (expected version %d)" % (key, expected_version))
                    version = expected_version + 1
                self._event(db, key, version, "begin", None, label, note, owner, now)
            return version
        return self._run("writing", write)

    def transition(self, key: str, owner: str, version: int, state: Dict[str, Any], label: str,
                   terminal: bool, from_label: str, note: str = "", kind: Optional[str] = None,
                   rows: Sequence[Tuple[str, Sequence[Any]]] = ()) -> int:
        blob = json.dumps(state, sort_keys=True)

        def write(db) -> int:
            with db.transaction():
                (now,) = db.execute("SELECT %s" % _NOW).fetchone()
                cur = db.execute(
                    "UPDATE machines SET state = %s, label = %s, terminal = %s, version = version + 1, "
                    "updated_at = %s, entered_at = %s, kind = COALESCE(%s, kind) "
                    "WHERE key = %s AND version = %s AND lease_owner = %s",
                    (blob, label, int(terminal), now, now, kind, key, version, owner))
                if cur.rowcount != 1:
                    raise Conflict("%s: state write refused (version %d no longer current or lease lost); "
                                   "another run took over" % (key, version))
                for sql, args in rows:
                    db.execute(_translate(sql), tuple(args))
                self._event(db, key, version + 1, "transition", from_label, label, note, owner, now)
            return version + 1
        return self._run("writing", write)

    def note(self, key: str, owner: str, version: int, label: str, note: str, event: str = "poll") -> None:
        def write(db) -> None:
            with db.transaction():
                if not db.execute("SELECT 1 FROM machines WHERE key = %s AND lease_owner = %s",
                                  (key, owner)).fetchone():
                    raise Conflict("%s: note refused, the lease is no longer held by this run" % key)
                (now,) = db.execute("SELECT %s" % _NOW).fetchone()
                self._event(db, key, version, event, label, label, note, owner, now)
        self._run("writing", write)

    def set_options(self, key: str, owner: str, cloud: str, options: Dict[str, Any]) -> None:
        blob = json.dumps(options, sort_keys=True)

        def write(db) -> None:
            with db.transaction():
                if not db.execute("SELECT 1 FROM machines WHERE key = %s AND lease_owner = %s FOR UPDATE",
                                  (key, owner)).fetchone():
                    raise Conflict("%s: options refused, the lease is no longer held by this run" % key)
                db.execute("DELETE FROM machine_options WHERE key = %s AND cloud = %s", (key, cloud))
                db.execute("INSERT INTO machine_options (key, cloud, options) VALUES (%s, %s, %s)",
                           (key, cloud, blob))
        self._run("writing", write)

    def options(self, key: str) -> Dict[str, Dict[str, Any]]:
        rows = self.query("SELECT cloud, options FROM machine_options WHERE key = ? ORDER BY cloud", (key,))
        return {cloud: json.loads(blob) for cloud, blob in rows}

    @staticmethod
    def _event(db, key, version, event, from_label, to_label, note, owner, at) -> None:
        db.execute("INSERT INTO machine_events (key, version, event, from_label, to_label, note, owner, at) "
                   "VALUES (%s,%s,%s,%s,%s,%s,%s,%s)", (key, version, event, from_label, to_label, note, owner, at))

    def events(self, key: str, limit: Optional[int] = None) -> List[Dict[str, Any]]:
        rows = self.query("SELECT id, version, event, from_label, to_label, note, owner, at FROM machine_events "
                          "WHERE key = ? ORDER BY id", (key,))
        if limit is not None:
            rows = rows[-limit:]
        names = ("id", "version", "event", "from", "to", "note", "owner", "at")
        return [dict(zip(names, r)) for r in rows]


class _Transaction:
    """``with journal.transaction() as tx``: committed on success, rolled back on any exception;
    a database error becomes a JournalError naming the journal."""

    def __init__(self, journal: PgJournal):
        self.journal = journal
        self._tx = None

    def __enter__(self) -> _Tx:
        db = self.journal._run("writing", lambda db: db)
        try:
            self._tx = db.transaction()
            self._tx.__enter__()
        except _psycopg().Error as exc:
            raise self.journal._error(exc, "writing")
        return _Tx(db)

    def __exit__(self, exc_type, exc, tb):
        try:
            self._tx.__exit__(exc_type, exc, tb)
        except _psycopg().Error as error:
            raise self.journal._error(error, "writing")
        if isinstance(exc, _psycopg().Error):
            raise self.journal._error(exc, "writing")
        return False
