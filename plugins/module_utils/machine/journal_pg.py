# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The PostgreSQL journal: the SQLite journal's interface and semantics on a shared server.

Its tables, statements and transaction logic are machine/journal_sql.py's (``SqlJournal``), in
the DSN's database and current schema; this module gives what PostgreSQL does its own way: the
connection (made again after a server restart), errors that name the journal and never its
password, row locks, and a transaction-scoped advisory lock per key. Every time the journal
writes (lease expiry, updated_at, event times) is the SERVER's clock (``now()``), so controllers
with skewed clocks agree on when a lease expires. A holder on another host is alive until its
lease expires; one on this host that is provably dead (``owners.owner_alive``) may be taken over
at once, as on SQLite.

Identity: a gpuprov journal's ``meta`` holds ``application = gpuprov`` (the equivalent of
SQLite's application_id), ``schema`` and ``journal_id``. A schema with other tables and no
such row is refused, and nothing is written to it.

Every statement, the journal's and the layer above's plain SQL alike (``?`` placeholders,
SQLite types), is translated: ``?`` to ``%s``, ``REAL`` to ``DOUBLE PRECISION``.
"""

from __future__ import annotations

import contextlib
import functools
import re
import uuid
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Set, Tuple
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journal_sql import (
    INSERT_META, LEASES_TABLE, META_ROWS, META_VALUE, SCHEMA_VERSION, SET_SCHEMA, JournalError, SqlJournal,
    created_name, journal_tables, newer_schema, not_a_journal,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.requirements import missing_package


def _psycopg() -> Any:
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

_NOW = "SELECT EXTRACT(EPOCH FROM now())::double precision"

_TABLES = journal_tables("postgresql") + (LEASES_TABLE,)

# Statements that bring a journal of schema N up to N + 1 (none yet: schema 2 is the first
# PostgreSQL schema). Run under the schema lock, in one transaction with the meta update.
_MIGRATIONS: Dict[int, Tuple[str, ...]] = {}


def is_dsn(location: Optional[str]) -> bool:
    """Whether a journal location is a PostgreSQL DSN (else it is an SQLite path)."""
    return location is not None and location.strip().lower().startswith(DSN_SCHEMES)


def dsn_userinfo(dsn: str) -> Optional[str]:
    """The user part of a DSN read as widely as it can be: everything between the scheme and the last
    ``@`` (None without one). A password must percent-encode ``/``, ``?`` and ``#`` for libpq; one that
    does not is still all inside this, so nothing of it is ever shown (scrub_dsn) or left unmasked."""
    rest = dsn.strip().partition("://")[2]
    return rest.rpartition("@")[0] if "@" in rest else None


def scrub_dsn(dsn: str) -> str:
    """``dsn`` without its password (in the user part or a ``password=`` parameter): what may be shown."""
    userinfo = dsn_userinfo(dsn)
    if userinfo is not None and any(c in userinfo for c in "/?#"):
        # A URI parser would take part of the password for the host or the path, and show it.
        return ("postgresql://(not shown: its user part holds an unencoded '/', '?' or '#'; percent-encode "
                "them as %2F, %3F and %23)")
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


@functools.lru_cache(maxsize=512)
def _translate(sql: str) -> str:
    """SQLite-flavoured SQL, for psycopg: ``?`` placeholders become ``%s`` (outside quoted
    strings; a literal ``%`` is doubled) and REAL means double precision."""
    out = []
    for index, part in enumerate(re.split(r"('(?:[^']|'')*')", sql)):
        if index % 2:
            out.append(part.replace("%", "%%"))
        else:
            part = re.sub(r"\bREAL\b", "DOUBLE PRECISION", part, flags=re.IGNORECASE)
            out.append(part.replace("%", "%%").replace("?", "%s"))
    return "".join(out)


class _TranslatingConnection:
    """A psycopg connection that takes the journal's SQL: ``execute(sql, args)`` translates it and
    returns the cursor (fetchone, fetchall, rowcount). What ``with journal.transaction() as tx`` yields."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    def execute(self, sql: str, args: Sequence[Any] = ()) -> Any:
        return self.conn.execute(_translate(sql), tuple(args))


class PgJournal(SqlJournal):
    """A journal in the PostgreSQL database named by ``dsn`` (``postgresql://...``).

    ``password``: used instead of one in the DSN or libpq's environment (PGPASSWORD,
    PGPASSFILE); never shown. ``clock``: the time the layer above stamps its own rows with
    (default: the server's); the journal's own times are always the server's."""

    backend = "postgresql"

    def __init__(self, dsn: str, clock: Optional[Callable[[], float]] = None, tables: Sequence[str] = (),
                 password: Optional[str] = None) -> None:
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
        self._conn: Any = None   # a psycopg.Connection once connected
        self._connect()
        self._prepare()

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
            raise self._error(exc, "connecting") from exc

    def _connection(self) -> Any:
        """The connection, made again if the server dropped it (a restart): the call that saw
        the drop failed; the next one reconnects."""
        if self._conn is None or self._conn.closed or self._conn.broken:
            self._connect()
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()

    def server_time(self) -> float:
        with self._statements("reading the clock") as db:
            return self._now(db)

    # -- what SqlJournal runs on ---------------------------------------------------------------
    @contextlib.contextmanager
    def _statements(self, doing: str) -> Iterator[_TranslatingConnection]:
        # The server's errors become JournalErrors that name the journal and what it was doing.
        try:
            yield _TranslatingConnection(self._connection())
        except _psycopg().Error as exc:
            raise self._error(exc, doing) from exc

    @contextlib.contextmanager
    def _transaction(self, doing: str) -> Iterator[_TranslatingConnection]:
        with self._statements(doing) as db:
            with db.conn.transaction():
                yield db

    def _now(self, db: Any) -> float:
        return float(db.execute(_NOW).fetchone()[0])

    def _lock_key(self, db: Any, key: str) -> None:
        db.execute("SELECT pg_advisory_xact_lock(?, hashtext(?))", (_KEY_LOCK_CLASS, key))

    def _insert_new(self, db: Any, sql: str, args: Sequence[Any]) -> bool:
        try:
            with db.conn.transaction():   # a savepoint: the duplicate key must not abort the outer one
                db.execute(sql, args)
        except _psycopg().errors.UniqueViolation:
            return False
        return True

    # -- schema ------------------------------------------------------------------------
    def _refuse(self, what: str) -> JournalError:
        return not_a_journal(self.path, what, "use another database or schema, or set journal (or GPUPROV_JOURNAL) "
                                              "to another location")

    @staticmethod
    def _names(db: _TranslatingConnection) -> Set[str]:
        return {name for (name,) in db.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() "
            "UNION SELECT indexname FROM pg_indexes WHERE schemaname = current_schema()")}

    def _missing(self, db: _TranslatingConnection, statements: Sequence[str]) -> List[str]:
        present = self._names(db)
        return [s for s in statements if created_name(s) not in present]

    def _classify(self, db: _TranslatingConnection) -> str:
        """'empty', 'current' or 'schema N' (to migrate); JournalError for anything not ours."""
        names = self._names(db)
        if not names:
            return "empty"
        meta = {}
        if "meta" in names:
            meta = dict(db.execute(META_ROWS).fetchall())
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
            raise newer_schema(self.path, found)
        return "current" if found == SCHEMA_VERSION else "schema %d" % found

    def _prepare(self) -> None:
        def build(db: _TranslatingConnection) -> None:
            with db.conn.transaction():
                db.execute("SELECT pg_advisory_xact_lock(?)", (_SCHEMA_LOCK,))
                found = self._classify(db)   # again, under the lock: another controller may have been first
                if found == "empty":
                    for statement in _TABLES:
                        db.execute(statement)
                    for name, value in (("application", APPLICATION), ("schema", str(SCHEMA_VERSION)),
                                        ("journal_id", uuid.uuid4().hex)):
                        db.execute(INSERT_META, (name, value))
                elif found.startswith("schema "):
                    for version in range(int(found.split()[1]), SCHEMA_VERSION):
                        for statement in _MIGRATIONS.get(version, ()):
                            db.execute(statement)
                    db.execute(SET_SCHEMA, (str(SCHEMA_VERSION),))
                for statement in self._missing(db, _TABLES + self._tables):
                    db.execute(statement)

        with self._statements("opening") as db:
            if self._classify(db) != "current" or self._missing(db, _TABLES + self._tables):
                build(db)
            found = db.execute(META_VALUE, ("journal_id",)).fetchone()
            if found is None:
                raise JournalError("journal: %s has no journal_id; the journal is damaged" % self.path)
            self._journal_id = found[0]

    # -- for the layer above: its own tables, through plain SQL ----------------------
    def ensure_tables(self, tables: Iterable[str]) -> None:
        wanted = [s for s in tables if s not in self._tables]
        if not wanted:
            return
        with self._statements("creating tables") as db:
            if self._missing(db, wanted):
                with db.conn.transaction():
                    db.execute("SELECT pg_advisory_xact_lock(?)", (_SCHEMA_LOCK,))
                    for statement in self._missing(db, wanted):
                        db.execute(statement)
        self._tables += tuple(wanted)
