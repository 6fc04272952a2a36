# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What ``status`` shows of the limits (issue 27): per VM the time left, the spend so far and the cap (columns
LEFT, SPENT and CAP), the summary's total per hour and total spent, and a warning for each VM within the hour of
its deadline or past it. A Ready VM past its deadline shows as Expired, with an EXPIRED line saying why and what
removes it. tasks/status.py calls these; the decision is decide.py's, from the journal alone: status looks at no
cloud, so a VM is taken as billing while the journal says it is up, unless the journal's VM list recorded that a
command that looked (reap, even as a dry run) saw it stopped or gone by its limits (decide.SEEN_STATUS).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ansible_collections.gpuprov.cloud.plugins.module_utils import money
from ansible_collections.gpuprov.cloud.plugins.module_utils.expiry import decide as dec
from ansible_collections.gpuprov.cloud.plugins.module_utils.expiry import limits as lim
from ansible_collections.gpuprov.cloud.plugins.module_utils.expiry import billing, store
from ansible_collections.gpuprov.cloud.plugins.module_utils.expiry.boot import NO_WATCHDOG
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
                                          observed=dec.OBSERVED_BY_STATUS.get(vm.get("status") or "")), now)
        vm["limits"] = dict(limits_result(stored, now), decision=decision.action, reason=decision.reason,
                            expired=decision.action == dec.REAP, price_per_hour=stored.price_per_hour,
                            grace_s=stored.limits.grace)
        warned = expiry_warning(stored, now) if vm["state"] == dec.READY else None
        if warned:
            warnings.append(warned)
    return warnings


def expired(vm: Mapping[str, Any]) -> bool:
    """Whether a status row is of a VM its limits ended (past its deadline, or seen stopped by them)."""
    return bool((vm.get("limits") or {}).get("expired"))


def shown_state(vm: Mapping[str, Any]) -> str:
    """The STATE a row shows: Expired for a Ready VM its limits ended, else the journal's label."""
    return dec.EXPIRED if expired(vm) and vm["state"] == dec.READY else str(vm["state"])


def expired_lines(vm: Mapping[str, Any]) -> List[str]:
    """``EXPIRED <name>: <why>. Run: ...`` for a VM its limits ended; none for another."""
    if not expired(vm) or vm["state"] != dec.READY:
        return []
    seen = dec.OBSERVED_BY_STATUS.get(vm.get("status") or "")
    cloud = vm.get("cloud") or ""
    if seen is not None:
        what = "its cloud showed it %s at %s; %s" % (vm["status"], vm["updated_at"], billing.poweroff_sentence(cloud))
    elif cloud in NO_WATCHDOG:
        what = "it has no watchdog on %s and runs until reap removes it" % cloud
    else:
        what = ("not looked at since (reap looks, even as a dry run): it runs until its watchdog powers it off %s "
                "past its deadline, and %s" % (lim.format_duration(vm["limits"].get("grace_s") or lim.DEFAULT_GRACE_S),
                                               billing.poweroff_sentence(cloud)))
    return ["EXPIRED %s: %s; %s. Run: ansible-playbook gpuprov.cloud.reap -e delete=true" % (
        vm["name"], vm["limits"]["reason"], what)]


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
    """``up: $2.40/h, spent $13.75 so far (3 VMs with a price)`` over the shown VMs that are up (and not seen stopped
    or gone), then ``expired: a, b (...)`` naming those their limits ended; no line without any."""
    per_hour, spent, priced = Decimal(0), Decimal(0), 0
    ended = [vm["name"] for vm in vms if expired(vm) and vm["state"] == dec.READY]
    for vm in vms:
        found = vm.get("limits")
        if not found or vm["state"] != dec.READY or found.get("price_per_hour") is None:
            continue
        if dec.OBSERVED_BY_STATUS.get(vm.get("status") or "") is not None:
            continue   # seen stopped or gone: its price no longer bills
        priced += 1
        per_hour += Decimal(str(found["price_per_hour"]))
        spent += Decimal(str(found.get("spend_usd") or 0))
    shown = []
    if priced:
        shown.append("up: %s, spent %s so far (%d VM%s with a price)" % (
            money.per_hour(float(per_hour)), money.usd(float(spent)), priced, "" if priced == 1 else "s"))
    if ended:
        shown.append("expired: %s (ansible-playbook gpuprov.cloud.reap -e delete=true removes %s)" % (
            ", ".join(ended), "it" if len(ended) == 1 else "them"))
    return shown
