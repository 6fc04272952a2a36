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
import sqlite3
from typing import Any, Callable, Dict, List, Optional, Tuple

from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journal_sql import JournalStore
from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journals import open_journal as open_location
from ansible_collections.gpuprov.cloud.plugins.module_utils.state_dir import journal_location
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm.launch_states import READY_VM_JSON, ready_vm_in

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


def open_journal(location: Optional[str] = None, clock: Optional[Callable[[], float]] = None,
                 password: Optional[str] = None) -> JournalStore:
    """The journal at ``location`` (an SQLite path or a PostgreSQL DSN, as state_dir.journal_location
    makes the journal option one; default: ``$GPUPROV_JOURNAL`` or the state dir's), with the ``vms``
    table. ``password``: a PostgreSQL journal's, if not from libpq's environment."""
    # Not expanded again: a path's expansion may hold a "$" of its own.
    return open_location(location or journal_location(), clock=clock, tables=TABLES, password=password)


def upsert_vm(journal: JournalStore, name: str, **fields: Any) -> None:
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


def ready_vm_rows(journal: JournalStore, vm: Dict[str, Any]) -> List[Tuple[str, Tuple[Any, ...]]]:
    """The write of the row of a VM that just became Ready, from its record (launch_states.Ready.vm), as the
    (sql, args) a transition commits with the Ready state (``Next(rows=...)``): the row says running exactly
    when the machine says Ready. Every column is set, so the row is replaced whole (no upsert clause: any
    SQLite, PostgreSQL)."""
    journal.ensure_tables(TABLES)   # made now, not in the transition that commits the rows
    location, ssh = vm["location"], vm["ssh"]
    fields = {"cloud": location["cloud"], "region": location["region"], "zone": location.get("zone") or vm.get("zone"),
              "instance_id": vm["instance_id"], "instance_type": vm.get("instance_type"), "gpu": vm.get("gpu"),
              "gpu_count": vm.get("gpu_count"), "ssh_host": ssh["host"], "ssh_port": ssh["port"],
              "ssh_user": ssh["user"], "host_key_alias": vm["host_key_alias"], "status": "running", "stage": "Ready",
              "detail": json.dumps({"python_interpreter": vm.get("python_interpreter"), "host_key": vm.get("host_key"),
                                    "ssh_key_fingerprint": vm["ssh_key_fingerprint"]}, sort_keys=True),
              "updated_at": journal.clock()}
    columns = list(fields)
    insert = "INSERT INTO vms (name, %s) VALUES (?, %s)" % (", ".join(columns), ", ".join("?" * len(columns)))
    return [("DELETE FROM vms WHERE name = ?", (vm["name"],)), (insert, (vm["name"],) + tuple(fields[c] for c in columns))]


def delete_vm(journal: JournalStore, name: str) -> None:
    journal.ensure_tables(TABLES)
    journal.execute("DELETE FROM vms WHERE name = ?", (name,))


def vm(journal: JournalStore, name: str) -> Optional[Dict[str, Any]]:
    rows = vms(journal, name)
    return rows[0] if rows else None


def vms(journal: JournalStore, name: Optional[str] = None) -> List[Dict[str, Any]]:
    journal.ensure_tables(TABLES)
    cols = ("name",) + VM_COLUMNS + ("updated_at",)
    sql = "SELECT %s FROM vms" % ", ".join(cols)
    args: Tuple[Any, ...] = ()
    if name is not None:
        sql += " WHERE name = ?"
        args = (name,)
    out = []
    for r in journal.query(sql + " ORDER BY name", args):
        row = dict(zip(cols, r, strict=True))
        if row.get("detail"):
            row["detail"] = json.loads(row["detail"])
        out.append(row)
    return out


# A Ready machine state's vm record (the launch's: user tags, Python), as JSON text, else NULL. Taken out
# by the database, so a listing of thousands of VMs does not parse each state's whole search in Python;
# the JSON keys are launch_states.READY_VM_JSON's, named there beside the state's dataclass.
_KIND_KEY, _READY, _VM_KEY = READY_VM_JSON
_READY_VM = {
    "sqlite": ("CASE WHEN json_extract(machines.state, '$.%s') = '%s' AND json_type(machines.state, '$.%s') = "
               "'object' THEN json_extract(machines.state, '$.%s') END" % (_KIND_KEY, _READY, _VM_KEY, _VM_KEY)),
    "postgresql": ("CASE WHEN machines.state::jsonb ->> '%s' = '%s' AND jsonb_typeof(machines.state::jsonb -> "
                   "'%s') = 'object' THEN (machines.state::jsonb -> '%s')::text END" % (_KIND_KEY, _READY, _VM_KEY, _VM_KEY)),
}


def vms_with_ready_vm(journal: JournalStore) -> List[Tuple[Dict[str, Any], Optional[Dict[str, Any]]]]:
    """Every row as ``vms`` gives it, each with the vm record of its machine's state when that state
    is Ready (None otherwise), in one statement: a listing (the journal inventory) without a query
    per VM, and rows and records from the same snapshot."""
    journal.ensure_tables(TABLES)
    cols = ("name",) + VM_COLUMNS + ("updated_at",)
    sql = ("SELECT %s, %%s FROM vms LEFT JOIN machines ON machines.key = vms.name ORDER BY vms.name"
           % ", ".join("vms." + c for c in cols))
    try:
        found = [r[:-1] + (json.loads(r[-1]) if r[-1] is not None else None,)
                 for r in journal.query(sql % _READY_VM[journal.backend])]
    except sqlite3.OperationalError:
        # An SQLite without its JSON functions (optional before 3.38): the whole states, read here.
        found = [r[:-1] + (_ready_vm(r[-1]),) for r in journal.query(sql % "machines.state")]
    out = []
    for r in found:
        row = dict(zip(cols, r[:-1], strict=True))   # r: the row's columns, then the Ready VM record
        if row.get("detail"):
            row["detail"] = json.loads(row["detail"])
        out.append((row, r[-1]))
    return out


def _ready_vm(state: Optional[str]) -> Optional[Dict[str, Any]]:
    return ready_vm_in(json.loads(state)) if state is not None else None
