# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What ``status`` shows of the limits (issue 27): per VM the time left, the spend so far and the cap (columns
LEFT, SPENT and CAP), the summary's total per hour and total spent, and a warning for each VM within the hour of
its deadline or past it. tasks/status.py calls these; the decision is decide.py's, from the journal alone (status
looks at no cloud, so a VM is taken as billing while the journal says it is up).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ansible_collections.gpuprov.cloud.plugins.module_utils import money
from ansible_collections.gpuprov.cloud.plugins.module_utils.expiry import decide as dec
from ansible_collections.gpuprov.cloud.plugins.module_utils.expiry import limits as lim
from ansible_collections.gpuprov.cloud.plugins.module_utils.expiry import store
from ansible_collections.gpuprov.cloud.plugins.module_utils.expiry.vm_task import expiry_warning, limits_result

HEADER: Tuple[str, ...] = ("LEFT", "SPENT", "CAP")


def annotate(journal: Any, vms: List[Dict[str, Any]], now: float) -> List[str]:
    """Give each status row ``vms`` of a VM with journalled limits its ``limits`` (vm_task.limits_result, plus
    ``expired`` and ``decision``); returns the warnings for those near or past their deadline."""
    rows = {stored.key: stored for stored in store.read_all(journal)}
    warnings: List[str] = []
    for vm in vms:
        stored = rows.get(vm["name"])
        if stored is None or stored.instance_id != vm.get("instance_id"):
            continue
        decision = dec.decide(dec.VmFacts(state=vm["state"].split(" (", 1)[0], limits=stored.limits,
                                          price_per_hour=stored.price_per_hour, up_since=stored.up_since,
                                          observed=None), now)
        vm["limits"] = dict(limits_result(stored, now), decision=decision.action, reason=decision.reason,
                            expired=decision.action == dec.REAP, price_per_hour=stored.price_per_hour)
        warned = expiry_warning(stored, now) if vm["state"] == dec.READY else None
        if warned:
            warnings.append(warned)
    return warnings


def columns(vm: Mapping[str, Any]) -> Tuple[str, str, str]:
    """A row's LEFT (``2h13m``, ``expired 5m ago``, ``-``), SPENT (``$1.25``, ``-``) and CAP (``$25``, ``-``)."""
    found: Optional[Mapping[str, Any]] = vm.get("limits")
    if not found:
        return ("-", "-", "-")
    left = found.get("time_left_s")
    if left is None:
        shown = "-"
    elif left <= 0 or found.get("expired"):
        shown = "expired %s ago" % lim.format_duration(left)
    else:
        shown = lim.format_duration(left)
    spent = found.get("spend_usd")
    return (shown, "-" if spent is None else money.usd(spent), found.get("max_spend") or "-")


def summary_line(vms: List[Dict[str, Any]]) -> List[str]:
    """``up: $2.40/h, spent $13.75 so far (3 VMs with a price)`` over the shown VMs that are up; none without any."""
    per_hour, spent, priced = Decimal(0), Decimal(0), 0
    for vm in vms:
        found = vm.get("limits")
        if not found or vm["state"] != dec.READY or found.get("price_per_hour") is None:
            continue
        priced += 1
        per_hour += Decimal(str(found["price_per_hour"]))
        spent += Decimal(str(found.get("spend_usd") or 0))
    if not priced:
        return []
    return ["up: %s, spent %s so far (%d VM%s with a price)" % (
        money.per_hour(float(per_hour)), money.usd(float(spent)), priced, "" if priced == 1 else "s")]
