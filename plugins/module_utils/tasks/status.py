# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read-only view of the journal: every VM name, its machine state, its last
transitions, and Leaked ones called out."""

from __future__ import annotations

import datetime
import fnmatch
from typing import Any, Dict, List, Optional

from ansible_collections.gpuprov.cloud.plugins.module_utils.expiry import report as expiry_report
from ansible_collections.gpuprov.cloud.plugins.module_utils.state_dir import journal_exists, journal_location
from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journal import JournalError
from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journal_sql import JournalStore
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import launch_states as ls, projection
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm.launch_states import Search, WholeSearch
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm.search_rows import whole_search
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm.teardown_states import Done, InstanceRecord
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import Offer


# Journal keys of gpuprov.cloud.instance state=absent teardowns (tasks/instance_teardown.py); a
# VM name is a DNS label, so it never contains the ':'.
INSTANCE_KEY_PREFIX = "instance:"
# Journal keys of the orphan sweep's teardowns (tasks/sweep.py): ``sweep:<vm name>``, or
# ``sweep:<journal id>:<vm name>`` for another journal's resources.
SWEEP_KEY_PREFIX = "sweep:"


def is_instance_key(key: str) -> bool:
    return key.startswith(INSTANCE_KEY_PREFIX)


def is_vm_key(key: str) -> bool:
    """Whether ``key`` is a VM's own (neither an instance-module nor a sweep teardown's)."""
    return not (key.startswith(INSTANCE_KEY_PREFIX) or key.startswith(SWEEP_KEY_PREFIX))


def _hint(key: str) -> str:
    """How to resolve a Leaked row of ``key``."""
    if is_instance_key(key):
        cloud, _sep, name = key[len(INSTANCE_KEY_PREFIX):].partition(":")
        return "re-run gpuprov.cloud.instance with name=%s cloud=%s state=absent" % (name, cloud)
    if key.startswith(SWEEP_KEY_PREFIX):
        return "ansible-playbook gpuprov.cloud.sweep -e delete=true%s" % (
            " -e include_foreign=true" if key.count(":") == 2 else "")
    return "ansible-playbook gpuprov.cloud.down -e vm=%s" % key


def _when(at: Optional[float]) -> str:
    if not at:
        return "-"
    return datetime.datetime.fromtimestamp(at, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")


def search_summary(search: Optional[Search]) -> Optional[Dict[str, Any]]:
    """Where a search stands, for people: the offer it is at (n of m) and why each earlier
    offer or cloud was skipped. None when there was no search (a reused VM)."""
    # A running search keeps its offers and history in the journal's launch_search table
    # (vm/launch.py): its state names the current offer and the count.
    current = search.current if search is not None else None
    if search is None or current is None:
        return None
    history = search.history if isinstance(search, WholeSearch) else []
    skipped = ["%s (%s): %s" % (h["offer"], h["outcome"], h["error"]["msg"]) for h in history if h.get("error")]
    return {"offer": search.cursor + 1, "of": search.size,
            "offer_id": Offer.from_dict(current).offer_id, "price_per_hour": current.get("price_per_hour"),
            "skipped": skipped}


def _whole_search(journal: JournalStore, key: str, search: Optional[Search]) -> Optional[Search]:
    """A running search's offers and history from the journal (vm/launch.py), for its skipped list."""
    try:
        return whole_search(journal, key, search)
    except JournalError:
        return search   # its rows are not there (a damaged journal): the offer and count still show


# How many VMs a status shows unless asked for more: a readable page; the summary counts them all.
DEFAULT_LIMIT = 100


def _state_kind(label: str) -> str:
    """The state a label names, without the offer it is at ("Booting (offer 2 of 5: ...)" -> "Booting")."""
    return label.split(" (", 1)[0]


def _last_events(journal: JournalStore, key: str, last: int) -> List[Dict[str, Any]]:
    """The ``last`` latest transitions and stage events of ``key``, oldest first (polls are noise here)."""
    if last <= 0:
        return []
    rows = journal.query("SELECT event, from_label, to_label, note, at FROM machine_events "
                         "WHERE key = ? AND event != 'poll' ORDER BY id DESC LIMIT ?", (key, last))
    return [{"at": _when(at), "from": from_label, "to": to_label, "note": note, "event": event}
            for event, from_label, to_label, note, at in reversed(rows)]


def _matches(key: str, name: Optional[str]) -> bool:
    return name is None or key == name or fnmatch.fnmatchcase(key, name)


def _checked(field: str, value: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError("%s: expected an integer >= 0, got %r" % (field, value))
    return value


def read_status(path: Optional[str], name: Optional[str] = None, last: int = 3,
                password: Optional[str] = None, limit: int = DEFAULT_LIMIT) -> Dict[str, Any]:
    """Rows for the journalled VMs, without creating a journal that is not there: those whose name is
    ``name`` or matches it as a shell pattern (``train*``), the first ``limit`` by name (0: all), each with
    its ``last`` transitions; ``summary`` and ``leaked`` count every match (``password``: a PostgreSQL
    journal's, when neither its DSN nor libpq's environment has it). ValueError names a bad ``last``/``limit``."""
    last, limit = _checked("last", last), _checked("limit", limit)
    path = journal_location(path)
    if not journal_exists(path):
        return {"journal": path, "vms": [], "leaked": [], "total": 0, "summary": {},
                "table": ["no journal at %s: no VMs yet" % path]}
    journal = projection.open_journal(path, password=password)
    path = journal.path   # a DSN as it may be shown: without its password
    try:
        # One read of every key's label: the summary and the leaked list cover VMs beyond the page.
        matching = [(key, label) for key, label in journal.query("SELECT key, label FROM machines ORDER BY key")
                    if _matches(key, name)]
        summary: Dict[str, int] = {}
        for _key, label in matching:
            summary[_state_kind(label)] = summary.get(_state_kind(label), 0) + 1
        leaked_names = [key for key, label in matching if label == "Leaked"]
        page = matching[:limit] if limit else matching
        vms: List[Dict[str, Any]] = []
        for key, _label in page:
            row = journal.load(key)
            if row is None:   # removed since the listing
                continue
            state = _readable_state(row)
            vm = projection.vm(journal, key) or _instance_record(state)
            leaked = state is not None and state.kind == "Leaked"
            ready = ls.ready_vm(state)
            vms.append({
                "name": key, "machine": row.kind, "state": row.label, "terminal": row.terminal,
                "leaked": leaked, "targets": ls.targets_of(state) if leaked else [],
                "reason": ls.reason_of(state), "cloud": vm.get("cloud"), "region": vm.get("region"),
                "instance_id": vm.get("instance_id"), "ssh_host": vm.get("ssh_host"), "ssh_port": vm.get("ssh_port"),
                "status": vm.get("status") or ("gone" if isinstance(state, Done) else "none"),
                "updated_at": _when(row.updated_at), "in_progress": bool(row.lease_owner),
                "last_transitions": _last_events(journal, key, last),
                # What the VM costs (where its cloud reports a price) and how its search went.
                "price_per_hour": ready.get("price_per_hour") if ready is not None else None,
                "search": search_summary(_whole_search(journal, key, ls.search_of(state))),
                # The k3s stage (gpuprov.cloud.k3s role), e.g. "k3s:Validating", and its facts.
                "stage": vm.get("stage"),
                "k3s": (vm.get("detail") or {}).get("k3s") if isinstance(vm.get("detail"), dict) else None,
            })
        expiry_warnings = expiry_report.annotate(journal, vms, journal.clock())
    finally:
        journal.close()
    return dict({"journal": path, "vms": vms, "leaked": leaked_names, "total": len(matching), "summary": summary,
                 "table": (format_table(vms) if matching or name is None else ["no VM in the journal matches %s" % name])
                 + summary_lines(summary, len(vms), len(matching), limit, name) + expiry_report.summary_line(vms)},
                **({"warnings": expiry_warnings} if expiry_warnings else {}))


def _readable_state(row: Any) -> Optional[ls.JournalledState]:
    """The row's state; None for one this version cannot read: the listing still shows its label."""
    try:
        return ls.load_journalled(row.state, row.kind)
    except ls.UnreadableState:
        return None


def _instance_record(state: Optional[ls.JournalledState]) -> Dict[str, Any]:
    """Where a ``gpuprov.cloud.instance`` task's row says its instance is (kind ``instance``), in the
    shape of a VM's projection; {} for any other row."""
    if not isinstance(state, InstanceRecord):
        return {}
    return {"cloud": state.location.get("cloud"), "region": state.location.get("region"),
            "instance_id": state.instance_id,
            "status": "made by gpuprov.cloud.instance" if state.kind == "Present" else "create requested"}


def summary_lines(summary: Dict[str, int], shown: int, total: int, limit: int, name: Optional[str]) -> List[str]:
    """One line per state with its count (when there is more than one state), the total, then, when the
    page left VMs out, how to see them."""
    if not total:
        return []
    counted = "%d VM%s%s" % (total, "" if total == 1 else "s", " matching %s" % name if name else "")
    if len(summary) == 1:
        [state] = summary
        lines = ["%s, %s%s" % (counted, "all " if total > 1 else "", state)]
    else:
        width = max(len(state) for state in summary)
        lines = ["%s  %d VM%s" % (state.ljust(width), count, "" if count == 1 else "s")
                 for state, count in sorted(summary.items(), key=lambda item: (-item[1], item[0]))]
        lines.append(counted)
    if shown < total:
        lines.append("showing the first %d by name (limit=%d): -e limit=0 shows all, -e vm='<name or pattern*>' "
                     "narrows" % (shown, limit))
    return lines


def format_table(vms: List[Dict[str, Any]]) -> List[str]:
    if not vms:
        return ["no VMs in the journal"]
    header = ("NAME", "STATE", "STATUS", "CLOUD/REGION", "INSTANCE", "SSH", "$/H", "UPDATED") + expiry_report.HEADER
    rows = [header]
    for vm in vms:
        where = "/".join(p for p in (vm["cloud"], vm["region"]) if p) or "-"
        endpoint = "%s:%s" % (vm["ssh_host"], vm["ssh_port"]) if vm["ssh_host"] else "-"
        state = expiry_report.shown_state(vm) + (" (running now)" if vm["in_progress"] else "")
        price = "-" if vm.get("price_per_hour") is None else ("%.4f" % vm["price_per_hour"]).rstrip("0").rstrip(".")
        rows.append((vm["name"], state, vm["status"], where, vm["instance_id"] or "-", endpoint, price,
                     vm["updated_at"]) + expiry_report.columns(vm))
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(header))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    for vm in vms:
        if vm["leaked"]:
            lines.append("LEAKED %s: %s; resources that may still bill: %s. Run: %s"
                         % (vm["name"], vm["reason"], vm["targets"], _hint(vm["name"])))
        lines.extend(expiry_report.expired_lines(vm))
        search = vm.get("search")
        if search:
            lines.append("SEARCH %s: offer %d of %d (%s)%s" % (
                vm["name"], search["offer"], search["of"], search["offer_id"],
                "; skipped before it: " + "; ".join(search["skipped"]) if search["skipped"] else ""))
        if (vm.get("stage") or "").startswith("k3s:"):
            k3s = vm.get("k3s") or {}
            lines.append("K3S %s: %s%s" % (vm["name"], vm["stage"][len("k3s:"):],
                                           ": %s" % k3s["note"] if k3s.get("note") else ""))
        for t in vm["last_transitions"]:
            if t.get("event") == "stage":
                lines.append("  %s %s: %s %s" % (vm["name"], t["at"], t["to"], t["note"] or ""))
                continue
            lines.append("  %s %s: %s -> %s %s" % (vm["name"], t["at"], t["from"] or "-", t["to"], t["note"] or ""))
    return lines
