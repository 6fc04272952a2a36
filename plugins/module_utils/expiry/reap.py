# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The controller's enforcement of the limits (issue 27): ``gpuprov.cloud.reap``.

For every VM whose limits are journalled (the ``vm_limits`` rows), what its cloud says of its instance now and
``decide()``: a VM to reap is listed (a dry run, the default) or, with ``delete``, torn down exactly as ``down``
tears it down: the vm service with ``state: absent``, under the name's lease, through the teardown machine, so a
reap killed half-way is resumed by the next ``reap`` or ``down``. A VM past its deadline that its cloud shows
stopped (or, on docker, exited: Failed) stopped itself: "expired (stopped itself)", never a leak.

A VM whose limits are still journalled while its row is a teardown of its instance (a ``down`` or reap killed
after its first teardown commit, or after Done but before the VM's rows were cleared) is reaped by resuming that
teardown (decide.py's rule 1); one torn down already is only cleared from the journal, and said so (CLEARED).
"""

from __future__ import annotations

import fnmatch
import os
from decimal import Decimal
from typing import Any, Callable, Dict, List, Optional, Tuple

from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import run_options
from ansible_collections.gpuprov.cloud.plugins.module_utils import money
from ansible_collections.gpuprov.cloud.plugins.module_utils.expiry import billing
from ansible_collections.gpuprov.cloud.plugins.module_utils.expiry import decide as dec
from ansible_collections.gpuprov.cloud.plugins.module_utils.expiry import store
from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journal_sql import JournalError
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.provider_args import group_argument_spec
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import Location, ProviderError, Status
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers import registry
from ansible_collections.gpuprov.cloud.plugins.module_utils.state_dir import (
    default_state_dir, journal_exists, journal_location,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import launch_states as ls
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import projection
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import teardown_states as ts

REAP_ARGUMENT_SPEC: Dict[str, Any] = group_argument_spec(
    delete=dict(type="bool", default=False),
    name=dict(type="str"),
)

# What the cloud's status means to the decision table. A container that powered itself off shows as exited,
# which the docker cloud reports as Failed: stopped, as far as billing and the table go.
_OBSERVED = {Status.STOPPED: dec.STOPPED, Status.STOPPING: dec.STOPPED, Status.FAILED: dec.STOPPED,
             Status.RUNNING: dec.RUNNING, Status.PENDING: dec.RUNNING}

# Reads the cloud for one VM: (the journalled VM record, the cloud options) -> an _OBSERVED value, ABSENT or None.
Observer = Callable[[Dict[str, Any], Dict[str, Any], str], Optional[str]]
# Tears one VM down as `down` does: (the vm task's parameters) -> its result.
Teardown = Callable[[Dict[str, Any]], Dict[str, Any]]


def observe_instance(vm: Dict[str, Any], options: Dict[str, Any], journal_id: str) -> Optional[str]:
    """What the VM's cloud says of its journalled instance: an _OBSERVED value, ABSENT when it is not there, None
    when the cloud could not be asked (the decision then takes it as billing)."""
    location = Location.from_dict(vm["location"])
    try:
        found = registry.get_provider(location.cloud, options, journal_id=journal_id).observe(location, vm["name"])
    except ProviderError:
        return None
    for observed in found:
        if observed.instance_id == vm.get("instance_id"):
            return _OBSERVED.get(observed.status)
    return dec.ABSENT


def record_observation(journal: Any, name: str, observed: Optional[str], decision: dec.ReapDecision) -> None:
    """Journal (in the VM list) that the cloud showed ``name`` stopped or gone by its limits, even on a dry run:
    it records what was seen, and changes nothing on the cloud."""
    status = dec.SEEN_STATUS.get(observed or "")
    if not decision.expired or status is None:
        return
    found = projection.vm(journal, name)
    if found is not None and found.get("status") != status:
        projection.upsert_vm(journal, name, status=status)


def teardown_as_down(params: Dict[str, Any]) -> Dict[str, Any]:
    """``down`` for one VM: the vm service with ``state: absent`` (under the name's lease, journalled)."""
    # Imported here: the service brings the launch and teardown machines, which a dry run never needs.
    from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.service import VmService
    result: Dict[str, Any] = VmService(params).run()
    return result


def teardown_of(stored: store.StoredLimits, state: Any) -> Optional[Tuple[str, Dict[str, Any]]]:
    """(decide.py's teardown label, the VM as reap lists it) when ``state``, the journalled state of a row of
    down's (and reap's) teardown machine, tears down ``stored``'s instance: a target names it, or, for Done, the
    teardown is of the same VM name (the row is the name's, so it is the last one made of it). None otherwise."""
    if not isinstance(state, ts.TeardownFields):
        return None
    holding = [t for t in state.targets if stored.instance_id is not None and stored.instance_id in t["instance_ids"]]
    if isinstance(state, ts.Done):
        if state.vm_name != stored.key:
            return None
        label = dec.TORN_DOWN
    elif not holding:
        return None
    else:
        label = dec.TEARDOWN_LEAKED if isinstance(state, ts.Leaked) else dec.TEARDOWN_UNDER_WAY
    where = holding or state.targets
    return label, {"name": stored.key, "instance_id": stored.instance_id,
                   "location": where[0]["location"] if where else None}


def _cloud_options(params: Dict[str, Any], journalled: Dict[str, Dict[str, Any]], cloud: str) -> Dict[str, Any]:
    options = dict(journalled.get(cloud) or {})
    options.update({k: v for k, v in ((params.get("cloud_options") or {}).get(cloud) or {}).items() if v is not None})
    if cloud == "local":
        options.setdefault("root", os.path.join(default_state_dir(), "local"))
    return options


def vm_params(params: Dict[str, Any], name: str, cloud: Optional[str]) -> Dict[str, Any]:
    """The vm task's parameters for ``down`` of ``name`` on ``cloud``: the reap task's shared options, the vm
    module's defaults for the rest."""
    from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.args import VM_ARGUMENT_SPEC
    vm = {key: spec.get("default") for key, spec in VM_ARGUMENT_SPEC.items()}
    vm.update({k: v for k, v in params.items() if k in VM_ARGUMENT_SPEC})
    # No cloud: a Done teardown with no target left to name one; the vm task's default cloud serves (down only
    # clears the journal's rows of it then).
    vm.update(name=name, state="absent", clouds=[cloud] if cloud else None, cloud=None)
    return vm


def _entry(name: str, vm: Dict[str, Any], decision: dec.ReapDecision) -> Dict[str, Any]:
    location = vm.get("location") or {}
    entry = {"name": name, "cloud": location.get("cloud"), "region": location.get("region"),
             "instance_id": vm.get("instance_id"), "reason": decision.reason, "saved_per_hour": decision.saved_per_hour,
             "expired": decision.expired}
    if decision.expired:   # it powered itself off: whether that ended its bill is its cloud's to say
        entry["billing"] = billing.poweroff_sentence(str(location.get("cloud") or ""))
    return entry


def _total(entries: List[Dict[str, Any]]) -> float:
    return float(sum((Decimal(str(e["saved_per_hour"])) for e in entries if e["saved_per_hour"]), Decimal(0)))


def reap(journal: Any, params: Dict[str, Any], delete: bool, observe: Observer = observe_instance,
         teardown: Teardown = teardown_as_down, progress: Callable[[str], None] = lambda line: None) -> Dict[str, Any]:
    """Decide on every VM with journalled limits (``params['name']``: only those it names or matches as a shell
    pattern); with ``delete``, tear down each to reap (or resume its teardown). The result's lists: ``removed`` /
    ``would_remove`` (each with its reason and saved_per_hour; ``removed``'s also with ``cleared``: it was torn
    down already and only the journal's rows of it went), ``not_removed`` (a teardown that failed), ``warned`` and
    ``kept``."""
    pattern = params.get("name")
    decided = []
    for stored in store.read_all(journal):
        if pattern and not fnmatch.fnmatchcase(stored.key, pattern):
            continue
        row = journal.load(stored.key)
        try:
            state = ls.load_journalled(row.state, row.kind) if row is not None else None
        except ls.UnreadableState:
            continue   # not a launch this version can read: status reports it; reap leaves it alone
        tearing = teardown_of(stored, state) if row is not None and row.kind == ts.TEARDOWN_KIND else None
        if tearing is not None:
            label, vm = tearing    # the teardown machine looks at the cloud itself when resumed
        else:
            vm = ls.vm_record(state) or {}
            if state is None or vm.get("instance_id") != stored.instance_id:
                continue   # not this row's instance any more: a launch under way, or another machine's row
            label = state.kind
        observed = None
        if label in dec.UP_STATES and vm.get("location"):
            options = _cloud_options(params, run_options.recorded(journal, stored.key), vm["location"]["cloud"])
            observed = observe(vm, options, journal.journal_id)
        facts = dec.VmFacts(state=label, limits=stored.limits, price_per_hour=stored.price_per_hour,
                            up_since=stored.up_since, observed=observed)
        decision = dec.decide(facts, float(journal.clock()))
        record_observation(journal, stored.key, observed, decision)
        decided.append((stored.key, vm, decision, label == dec.TORN_DOWN))
    removed: List[Dict[str, Any]] = []
    would: List[Dict[str, Any]] = []
    failed: List[Dict[str, Any]] = []
    for name, vm, decision, torn_down in decided:
        if decision.action != dec.REAP:
            continue
        entry = _entry(name, vm, decision)
        if not delete:
            would.append(entry)
            progress("[%s] would reap: %s" % (name, decision.reason))
            continue
        progress("[%s] reaping: %s" % (name, decision.reason))
        result = teardown(vm_params(params, name, entry["cloud"]))
        if result.get("failed"):
            failed.append(dict(entry, error=result.get("msg")))
        else:
            # cleared: nothing was left to tear down, only the journal's rows of it went.
            removed.append(dict(entry, targets=result.get("targets") or [], cleared=torn_down))
    return {"removed": removed, "would_remove": would, "not_removed": failed,
            "warned": [_entry(n, vm, d) for n, vm, d, _t in decided if d.action == dec.WARN],
            "kept": [_entry(n, vm, d) for n, vm, d, _t in decided if d.action == dec.KEEP],
            "saved_per_hour": _total(removed), "would_save_per_hour": _total(would)}


def _message(result: Dict[str, Any], delete: bool) -> str:
    if delete:
        if not result["removed"] and not result["not_removed"]:
            return "nothing to reap"
        count = len([e for e in result["removed"] if not e.get("cleared")])
        cleared = len(result["removed"]) - count
        parts = []
        if count or not cleared:
            parts.append("reaped %d VM%s, saving %s" % (count, "" if count == 1 else "s",
                                                        money.per_hour(result["saved_per_hour"])))
        if cleared:
            parts.append("cleared from the journal %d VM%s torn down already" % (cleared, "" if cleared == 1 else "s"))
        said = "; ".join(parts)
        if result["not_removed"]:
            said += "; %d could not be torn down (re-run reap or down)" % len(result["not_removed"])
        return said
    if not result["would_remove"]:
        return "nothing to reap"
    return "would reap %d VM%s, saving %s: ansible-playbook gpuprov.cloud.reap -e delete=true removes them" % (
        len(result["would_remove"]), "" if len(result["would_remove"]) == 1 else "s",
        money.per_hour(result["would_save_per_hour"]))


def lines(result: Dict[str, Any]) -> List[str]:
    """One line per VM removed, to remove or failed, for people. A VM torn down already, whose rows alone were
    cleared, is CLEARED, not REAPED: nothing of it was removed from its cloud."""
    shown = []
    for verb, key in (("REAPED", "removed"), ("WOULD REAP", "would_remove"), ("NOT REAPED", "not_removed")):
        for entry in result[key]:
            saved = entry["saved_per_hour"]
            shown.append("%s %s (%s/%s %s): %s; saves %s%s%s" % (
                "CLEARED" if entry.get("cleared") else verb, entry["name"], entry["cloud"], entry["region"],
                entry["instance_id"], entry["reason"],
                "unknown" if saved is None else money.per_hour(saved),
                " (%s)" % entry["billing"] if entry.get("billing") else "",
                ": %s" % entry["error"] if entry.get("error") else ""))
    return shown


def run_task(params: Dict[str, Any], check_mode: bool, progress: Callable[[str], None] = lambda line: None,
             observe: Observer = observe_instance, teardown: Teardown = teardown_as_down) -> Dict[str, Any]:
    """The gpuprov.cloud.reap task's result (``failed`` and ``msg`` on failure)."""
    delete = bool(params.get("delete")) and not check_mode
    location = journal_location(params.get("journal"))
    empty: Dict[str, Any] = {"removed": [], "would_remove": [], "not_removed": [], "warned": [], "kept": [],
                             "saved_per_hour": 0.0, "would_save_per_hour": 0.0}
    if not journal_exists(location):
        return dict(empty, changed=False, journal=location, lines=[], msg="no journal at %s: nothing to reap" % location)
    try:
        journal = projection.open_journal(location, password=params.get("journal_password"))
    except JournalError as exc:
        return {"failed": True, "changed": False, "msg": str(exc)}
    try:
        result = reap(journal, params, delete, observe=observe, teardown=teardown, progress=progress)
        result["journal"] = journal.path
    except JournalError as exc:
        return {"failed": True, "changed": False, "msg": str(exc)}
    finally:
        journal.close()
    result["changed"] = bool(result["removed"]) or (bool(params.get("delete")) and bool(result["would_remove"]))
    result["msg"] = _message(result, delete)
    result["lines"] = lines(result)
    if result["not_removed"]:
        result["failed"] = True
    return result
