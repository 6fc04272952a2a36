# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``vms`` projection: one user-facing row per VM, kept in the journal beside the machines.

VM steps write it idempotently; it can be recomputed from the machines' states. The journal
knows nothing of it: this module hands it the table (``TABLES``) and reads and writes the rows
through the journal's plain-SQL API.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional, Tuple

from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journal import Journal
from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journals import open_journal as open_location
from ansible_collections.gpuprov.cloud.plugins.module_utils.state_dir import journal_location

VM_COLUMNS = ("cloud", "region", "zone", "instance_id", "instance_type", "gpu", "gpu_count",
              "ssh_host", "ssh_port", "ssh_user", "host_key_alias", "status", "stage", "detail")

TABLES = (
    """CREATE TABLE IF NOT EXISTS vms (
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
    )""",
)


def open_journal(path: Optional[str] = None, clock=None, password: Optional[str] = None) -> Journal:
    """The journal at ``path`` (an SQLite path or a PostgreSQL DSN; default: ``$GPUPROV_JOURNAL``
    or the state dir's), with the ``vms`` table. ``password``: a PostgreSQL journal's, if not
    from libpq's environment."""
    return open_location(journal_location(path), clock=clock, tables=TABLES, password=password)


def upsert_vm(journal: Journal, name: str, **fields: Any) -> None:
    """Set the given projection columns for ``name`` (others keep their values)."""
    unknown = set(fields) - set(VM_COLUMNS)
    if unknown:
        raise ValueError("unknown vms columns: %s" % ", ".join(sorted(unknown)))
    if fields.get("detail") is not None:
        fields["detail"] = json.dumps(fields["detail"], sort_keys=True)
    fields.setdefault("status", None)
    journal.ensure_tables(TABLES)
    now = journal.clock()
    with journal.transaction() as tx:
        exists = tx.execute("SELECT 1 FROM vms WHERE name = ?", (name,)).fetchone()
        if exists:
            sets = ", ".join("%s = ?" % c for c in fields if not (c == "status" and fields[c] is None))
            values = [v for c, v in fields.items() if not (c == "status" and v is None)]
            tx.execute("UPDATE vms SET %s%supdated_at = ? WHERE name = ?" % (sets, ", " if sets else ""),
                       values + [now, name])
        else:
            if fields["status"] is None:
                fields["status"] = "unknown"
            cols = list(fields)
            tx.execute("INSERT INTO vms (name, %s, updated_at) VALUES (?, %s, ?)"
                       % (", ".join(cols), ", ".join("?" * len(cols))),
                       [name] + [fields[c] for c in cols] + [now])


def delete_vm(journal: Journal, name: str) -> None:
    journal.ensure_tables(TABLES)
    journal.execute("DELETE FROM vms WHERE name = ?", (name,))


def vm(journal: Journal, name: str) -> Optional[Dict[str, Any]]:
    rows = vms(journal, name)
    return rows[0] if rows else None


def vms(journal: Journal, name: Optional[str] = None) -> List[Dict[str, Any]]:
    journal.ensure_tables(TABLES)
    cols = ("name",) + VM_COLUMNS + ("updated_at",)
    sql = "SELECT %s FROM vms" % ", ".join(cols)
    args: Tuple = ()
    if name is not None:
        sql += " WHERE name = ?"
        args = (name,)
    out = []
    for r in journal.query(sql + " ORDER BY name", args):
        row = dict(zip(cols, r))
        if row.get("detail"):
            row["detail"] = json.loads(row["detail"])
        out.append(row)
    return out
