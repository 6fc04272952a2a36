# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The SQLite journal: the durable record every machine writes before it acts, in one file.

Its tables, statements and transaction logic are machine/journal_sql.py's (``SqlJournal``); this
module gives what SQLite's journal does its own way: one connection per journal, ``BEGIN
IMMEDIATE`` write transactions (they hold the whole file, so no row or key locks), the
controller's clock (``clock``), and SQLite's errors, which reach the caller as they are except
when opening.

A journal is identified before anything is written to it: its ``PRAGMA application_id``
is ``APPLICATION_ID`` (0x67707276, "gprv"), or, for a journal written before
schema 2, the application id is 0 and it holds exactly the schema-1 tables. Any other
file is refused and left byte for byte as it was (machine/journal_file.py: opening a file).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from typing import Any, Callable, ContextManager, Iterable, Optional, Sequence, Tuple

from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journal_file import (
    APPLICATION_ID, JournalFile, WriteTransaction, missing_tables,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journal_sql import (
    LEASES_TABLE, SCHEMA_VERSION, Conflict, JournalError, LeaseHeld, Row, SqlJournal, created_name,
)

# What the rest of the collection imports from here (the shared half lives in journal_sql.py,
# the opening half in journal_file.py).
__all__ = ["APPLICATION_ID", "LEASES_TABLE", "SCHEMA_VERSION", "Conflict", "Journal", "JournalError", "LeaseHeld",
           "Row"]


class Journal(JournalFile, SqlJournal):
    """A SQLite journal at ``path`` (created 0600, missing parents 0700).

    ``tables``: ``CREATE TABLE/INDEX IF NOT EXISTS`` statements of the layer above, created
    with the journal and, on opening, when missing."""

    backend = "sqlite"

    def __init__(self, path: str, clock: Callable[[], float] = time.time, tables: Sequence[str] = ()) -> None:
        if not path:
            raise ValueError("journal: a path is required")
        self.path = os.path.abspath(os.path.expanduser(path))
        self.clock = clock
        self._tables = (LEASES_TABLE,) + tuple(t for t in tables if t != LEASES_TABLE)
        for statement in self._tables:
            created_name(statement)   # refuse anything but CREATE ... IF NOT EXISTS before touching the file
        self._file_id: Optional[Tuple[int, int]] = None
        self._journal_id = ""
        self._db = self._open()

    def reopen(self) -> "Journal":
        """A second connection to this journal (the lease heartbeat's)."""
        return Journal(self.path, clock=self.clock)

    # -- opening: machine/journal_file.py (JournalFile) -----------------------------------------------
    def close(self) -> None:
        self._db.close()
        if self._file_id is not None:
            self._forget()

    # -- what SqlJournal runs on -----------------------------------------------------------------------
    def _statements(self, doing: str) -> ContextManager[sqlite3.Connection]:
        # SQLite's own errors reach the caller unchanged (vm/projection.py tells a missing JSON function).
        return contextlib.nullcontext(self._db)

    def _transaction(self, doing: str) -> WriteTransaction:
        return WriteTransaction(self._db)

    def _now(self, db: Any) -> float:
        return self.clock()

    def _lock_key(self, db: Any, key: str) -> None:
        pass   # BEGIN IMMEDIATE already holds the whole journal

    def _insert_new(self, db: Any, sql: str, args: Sequence[Any]) -> bool:
        try:
            db.execute(sql, tuple(args))
        except sqlite3.IntegrityError:
            return False
        return True

    # -- for the layer above: its own tables, through plain SQL ----------------------
    def ensure_tables(self, tables: Iterable[str]) -> None:
        """Create those of ``tables`` (``CREATE TABLE/INDEX IF NOT EXISTS``) that this journal lacks."""
        wanted = [statement for statement in tables if statement not in self._tables]
        if not wanted:
            return
        try:
            if missing_tables(self._db, wanted):
                with WriteTransaction(self._db) as db:
                    for statement in missing_tables(db, wanted):   # again, under the write lock
                        db.execute(statement)
        except sqlite3.Error as exc:
            raise self._database_error(exc) from exc
        self._tables += tuple(wanted)
