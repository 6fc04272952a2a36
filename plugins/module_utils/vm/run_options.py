# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The provider options a VM's runs reach each cloud with (the non-secret ones), journalled per key and cloud
before any cloud call can make something: a later step, ``down``, health and reap look where it was made.

A table of this layer's in the journal (the journal itself knows nothing of clouds). Journals made before it
moved here already hold the same table, which is used as it is."""

from __future__ import annotations

import json
from typing import Any, Dict

from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journal_sql import JournalStore

TABLES = (
    """CREATE TABLE IF NOT EXISTS machine_options (
        key TEXT NOT NULL,
        cloud TEXT NOT NULL,
        options TEXT NOT NULL,
        PRIMARY KEY (key, cloud)
    )""",
)


def record(journal: JournalStore, key: str, owner: str, cloud: str, options: Dict[str, Any]) -> None:
    """Journal the options ``key`` runs with on ``cloud`` (replacing that cloud's earlier ones); Conflict when
    ``owner`` no longer holds the key's lease, so a run that lost it writes nothing more."""
    blob = json.dumps(options, sort_keys=True)
    journal.ensure_tables(TABLES)
    with journal.fenced_transaction(key, owner, "options") as tx:
        tx.execute("DELETE FROM machine_options WHERE key = ? AND cloud = ?", (key, cloud))
        tx.execute("INSERT INTO machine_options (key, cloud, options) VALUES (?, ?, ?)", (key, cloud, blob))


def recorded(journal: JournalStore, key: str) -> Dict[str, Dict[str, Any]]:
    """{cloud: options} as journalled for ``key`` ({} when none)."""
    journal.ensure_tables(TABLES)
    rows = journal.query("SELECT cloud, options FROM machine_options WHERE key = ? ORDER BY cloud", (key,))
    return {cloud: json.loads(blob) for cloud, blob in rows}
