# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the orphan sweep found, for people: each resource's category and the reason, the hourly
cost per category, the orphans' call-out lines and the table the sweep playbook prints."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from ansible_collections.gpuprov.cloud.plugins.module_utils import money
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import Owned, ResourceKind

ORPHAN = "orphan"
FOREIGN = "foreign"
LEGACY = "legacy"
OWNED = "owned"
CATEGORIES = (ORPHAN, FOREIGN, LEGACY, OWNED)


def describe(owned: Owned, category: str, why: str) -> Dict[str, Any]:
    loc = owned.location
    return {"category": category, "why": why, "kind": owned.kind, "id": owned.resource_id,
            "cloud": loc.cloud, "region": loc.region, "zone": loc.zone, "vm_name": owned.vm_name,
            "journal_id": owned.journal_id, "status": owned.status, "price_per_hour": owned.price_per_hour,
            "name": owned.name}


def cost_per_hour(entries: List[Dict[str, Any]]) -> float:
    """The summed hourly price of the instances among ``entries`` whose cloud reports one."""
    return round(float(sum(e["price_per_hour"] or 0.0 for e in entries if e["kind"] == ResourceKind.INSTANCE)), 6)


def price_text(value: Optional[float]) -> str:
    return "-" if value is None else money.amount(value)


def callouts(orphans: List[Dict[str, Any]]) -> List[str]:
    """One line per orphan, for people (the status playbook prints them)."""
    return ["ORPHAN %s/%s %s %s of VM %s (%s $/h): %s" % (
        e["cloud"], e.get("zone") or e["region"], e["kind"], e["id"], e["vm_name"], price_text(e["price_per_hour"]),
        e["why"]) for e in orphans]


def format_table(entries: List[Dict[str, Any]], totals: Dict[str, float]) -> List[str]:
    if not entries:
        return ["nothing carrying gpuprov's identity was found"]
    header = ("CATEGORY", "CLOUD/REGION", "KIND", "ID", "VM", "STATUS", "$/H", "ACTION")
    rows = [header]
    for e in entries:
        rows.append((e["category"].upper(), "%s/%s" % (e["cloud"], e.get("zone") or e["region"]), e["kind"],
                     e["id"], e["vm_name"] or "-", e["status"] or "-", price_text(e["price_per_hour"]),
                     e.get("action") or "-"))
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(header))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    for category in CATEGORIES:
        count = sum(1 for e in entries if e["category"] == category and e["kind"] == ResourceKind.INSTANCE)
        if count:
            unpriced = sum(1 for e in entries if e["category"] == category and e["kind"] == ResourceKind.INSTANCE
                           and e["price_per_hour"] is None)
            lines.append("TOTAL %s: %d instance(s), %s $/h%s" % (
                category, count, price_text(totals[category]),
                " (%d without a reported price)" % unpriced if unpriced else ""))
    return lines
