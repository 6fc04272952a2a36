# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A launch search's rows in the journal (vm/launch.py writes them; status reads them).

A running search's state holds its cursor and current offer only; its planned offers, the
offers planning skipped and what happened to each offer it left are rows of launch_search,
each committed with the state that points at them. Kept apart from launch.py so that a
reader (status) needs none of the launch's imports.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journal import JournalError
from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journal_sql import JournalStore
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm.launch_states import (
    RunningSearch, Search, WholeSearch,
)

# A search's plan (seq 0: {offers, history, blocked} as planned) and one row per offer it left
# (seq = cursor + 1: {history, block}), for the plan id its states carry.
SEARCH_TABLES = (
    """CREATE TABLE IF NOT EXISTS launch_search (
        key TEXT NOT NULL,
        plan TEXT NOT NULL,
        seq INTEGER NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (key, plan, seq)
    )""",
)


def clear_rows(key: str) -> Tuple[str, Sequence[Any]]:
    """The write that drops every plan of ``key`` (its search is over, or a new one replaces it)."""
    return ("DELETE FROM launch_search WHERE key = ?", (key,))


def plan_rows(key: str, plan: str, body: str) -> List[Tuple[str, Sequence[Any]]]:
    """The writes of a new plan ``plan`` of ``key`` (its JSON ``body``): the key's older plans go."""
    return [clear_rows(key), ("INSERT INTO launch_search (key, plan, seq, body) VALUES (?, ?, 0, ?)", (key, plan, body))]


def plan_body(journal: JournalStore, key: str, search: RunningSearch) -> Dict[str, Any]:
    """The plan row (seq 0) of a running search: {offers, history, blocked} as planned."""
    found = journal.query("SELECT body FROM launch_search WHERE key = ? AND plan = ? AND seq = 0",
                          (key, search.plan))
    if not found:
        raise JournalError("launch: the planned offers of search %s are missing from the journal %s"
                           % (search.plan, journal.location))
    body: Dict[str, Any] = json.loads(found[0][0])
    return body


def whole_search(journal: JournalStore, key: str, search: Optional[Search],
                 left: Optional[Dict[str, Any]] = None) -> Optional[WholeSearch]:
    """The whole search of ``key``'s state (offers, cursor, history, every block, round): as the
    state holds it, or read from launch_search for a running one; with ``left`` (the row of an
    offer being left, not yet written) appended."""
    if search is None or isinstance(search, WholeSearch):
        return search
    body = plan_body(journal, key, search)
    rows = [json.loads(found) for (found,) in journal.query(
        "SELECT body FROM launch_search WHERE key = ? AND plan = ? AND seq > 0 ORDER BY seq", (key, search.plan))]
    rows += [left] if left else []
    return WholeSearch(body["offers"], search.cursor, body["blocked"] + [row["block"] for row in rows if row["block"]],
                       body["history"] + [row["history"] for row in rows], search.round)
