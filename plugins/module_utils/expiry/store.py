# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A VM's journalled limits (issue 27): the ``vm_limits`` table, beside the machines in the journal.

One row per VM name: the instance the limits are for, the limits (``Limits.to_dict`` as JSON), when that instance
came up (``up_since``: the spend and a ``ttl`` count from it), the offer's price per hour, and when the row was last
written. The journal knows nothing of it: this module hands it the table (``LIMITS_TABLES``, as vm/search_rows.py
hands SEARCH_TABLES) and reads and writes the rows through the journal's plain-SQL API.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, List, Optional, Sequence, Tuple

from ansible_collections.gpuprov.cloud.plugins.module_utils.expiry.limits import Limits

LIMITS_TABLES = (
    """CREATE TABLE IF NOT EXISTS vm_limits (
        key TEXT PRIMARY KEY,
        instance_id TEXT,
        limits TEXT NOT NULL,
        up_since REAL,
        price_per_hour REAL,
        updated_at REAL NOT NULL
    )""",
)

_COLUMNS = "key, instance_id, limits, up_since, price_per_hour, updated_at"


@dataclasses.dataclass(frozen=True)
class StoredLimits:
    """One ``vm_limits`` row. ``up_since`` and ``updated_at``: epoch seconds (the journal's clock)."""

    key: str
    instance_id: Optional[str]
    limits: Limits
    up_since: Optional[float]
    price_per_hour: Optional[float]
    updated_at: float = 0.0


def _row(values: Sequence[Any]) -> StoredLimits:
    key, instance_id, limits, up_since, price, updated_at = values
    return StoredLimits(key=key, instance_id=instance_id, limits=Limits.from_dict(json.loads(limits)),
                        up_since=None if up_since is None else float(up_since),
                        price_per_hour=None if price is None else float(price), updated_at=float(updated_at))


def read(journal: Any, key: str) -> Optional[StoredLimits]:
    """``key``'s row, or None."""
    journal.ensure_tables(LIMITS_TABLES)
    found: List[Tuple[Any, ...]] = journal.query("SELECT %s FROM vm_limits WHERE key = ?" % _COLUMNS, (key,))
    return _row(found[0]) if found else None


def read_all(journal: Any) -> List[StoredLimits]:
    """Every row, by key."""
    journal.ensure_tables(LIMITS_TABLES)
    return [_row(values) for values in journal.query("SELECT %s FROM vm_limits ORDER BY key" % _COLUMNS)]


def write(journal: Any, stored: StoredLimits) -> StoredLimits:
    """Journal ``stored`` (replacing ``key``'s row); returns it as written, stamped with the journal's clock."""
    journal.ensure_tables(LIMITS_TABLES)
    written = dataclasses.replace(stored, updated_at=float(journal.clock()))
    args = (written.instance_id, json.dumps(written.limits.to_dict(), sort_keys=True), written.up_since,
            written.price_per_hour, written.updated_at, written.key)
    with journal.transaction() as tx:
        if tx.execute("SELECT 1 FROM vm_limits WHERE key = ?", (written.key,)).fetchone():
            tx.execute("UPDATE vm_limits SET instance_id = ?, limits = ?, up_since = ?, price_per_hour = ?, "
                       "updated_at = ? WHERE key = ?", args)
        else:
            tx.execute("INSERT INTO vm_limits (instance_id, limits, up_since, price_per_hour, updated_at, key) "
                       "VALUES (?, ?, ?, ?, ?, ?)", args)
    return written


def delete(journal: Any, key: str) -> None:
    """Forget ``key``'s row (its VM was torn down)."""
    journal.ensure_tables(LIMITS_TABLES)
    journal.execute("DELETE FROM vm_limits WHERE key = ?", (key,))
