# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Opening a journal from its location: a ``postgresql://`` (or ``postgres://``) DSN is a
PostgreSQL journal, anything else the path of an SQLite journal. Both are a ``JournalStore``."""

from __future__ import annotations

import time
from typing import Callable, Optional, Sequence

from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journal import Journal
from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journal_pg import PgJournal, is_dsn, scrub_dsn
from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journal_sql import JournalStore


def open_journal(location: str, clock: Optional[Callable[[], float]] = None, tables: Sequence[str] = (),
                 password: Optional[str] = None) -> JournalStore:
    """The journal at ``location``. ``clock``: the time the caller's own rows are stamped with
    (default: the controller's on SQLite, the server's on PostgreSQL). ``password``: a
    PostgreSQL journal's password, used instead of libpq's environment (ignored for SQLite)."""
    if is_dsn(location):
        return PgJournal(location, clock=clock, tables=tables, password=password)
    return Journal(location, clock=clock or time.time, tables=tables)


def shown(location: str) -> str:
    """``location`` as it may appear in messages and results (a DSN without its password)."""
    return scrub_dsn(location) if is_dsn(location) else location


__all__ = ["JournalStore", "open_journal", "shown", "is_dsn"]
