# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the ``vm`` task does with a VM's limits (issue 27): its options, checked before anything is made; the
journal write once the launch reached Ready (the journal first, then the VM's watchdog); the diff and warnings.

tasks/service.py calls ``invalid_limits`` before it runs a machine, ``after_ready`` once its VM is up, and
``forget`` when the VM is torn down; everything else is here, so that module keeps to a few calls.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Mapping, Optional

from ansible_collections.gpuprov.cloud.plugins.module_utils.expiry import decide as dec
from ansible_collections.gpuprov.cloud.plugins.module_utils.expiry import limits as lim
from ansible_collections.gpuprov.cloud.plugins.module_utils.expiry import store
from ansible_collections.gpuprov.cloud.plugins.module_utils.expiry.boot import has_watchdog, no_watchdog_warning
from ansible_collections.gpuprov.cloud.plugins.module_utils.expiry.watchdog import install_over_ssh_command

# The vm module's limit options (documented in plugins/modules/vm.py, explained in docs/limits.md). Strings:
# parse_limits reads "8h", "3600" and "12.50" alike, and names the option in its error.
LIMITS_SPEC: Dict[str, Dict[str, Any]] = dict(
    ttl=dict(type="str"),
    expires_at=dict(type="str"),
    idle_stop=dict(type="str"),
    max_spend=dict(type="str"),
    limits_grace=dict(type="str"),
)
LIMIT_OPTIONS = tuple(LIMITS_SPEC)


def invalid_limits(params: Mapping[str, Any], now: float) -> Optional[str]:
    """Why the task's limit options cannot be taken (LimitError's message, naming the option), or None."""
    try:
        lim.parse_limits(params, ttl_from=now)
    except lim.LimitError as exc:
        return str(exc)
    return None


def launch_limits(params: Mapping[str, Any], now: float) -> Optional[lim.Limits]:
    """The limits a new instance's watchdog boots with (a ttl counted from ``now``, a little before the instance
    is up: the journalled deadline, written over SSH once it is up, is the later one); None without any."""
    try:
        found = lim.parse_limits(params, ttl_from=now)
    except lim.LimitError:
        return None   # invalid_limits failed the task already
    return None if found.empty else found


def push_to_vm(stored: store.StoredLimits, vm: Mapping[str, Any], files: Any) -> Optional[str]:
    """Install (or refresh) the VM's watchdog and write the journalled limits to it over SSH
    (install_over_ssh_command, logging in as the health check does); the warning when that fails (the VM keeps
    what it had: the earlier deadline wins, and the reap still enforces the journal's), else None."""
    from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import SshEndpoint
    from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import ssh
    command = install_over_ssh_command(stored.limits, price_per_hour=stored.price_per_hour, up_since=stored.up_since)
    try:
        ssh.SshChecker(files, timeout=30.0, command=command)(SshEndpoint.from_dict(vm["ssh"]), vm["host_key_alias"])
    except Exception as exc:  # pylint: disable=broad-except
        # Whatever failed (a login, sudo, the install, the rename), the VM keeps what it had.
        return ("%s: its watchdog could not be installed or given its limits over SSH (%s: %s); it keeps what it "
                "had, and gpuprov.cloud.reap enforces the journal's limits" % (stored.key, type(exc).__name__, exc))
    return None


def _facts(stored: store.StoredLimits) -> dec.VmFacts:
    # Journal only: nobody looked at the cloud, so a running VM is taken as billing.
    return dec.VmFacts(state=dec.READY, limits=stored.limits, price_per_hour=stored.price_per_hour,
                       up_since=stored.up_since, observed=None)


def expiry_warning(stored: store.StoredLimits, now: float) -> Optional[str]:
    """The warning for a VM that expires within the hour or is past its deadline, else None."""
    decision = dec.decide(_facts(stored), now)
    if decision.action == dec.WARN:
        return "%s %s" % (stored.key, decision.reason)
    if decision.action == dec.REAP:
        return "%s is %s: ansible-playbook gpuprov.cloud.reap -e delete=true removes it" % (stored.key, decision.reason)
    return None


def limits_result(stored: store.StoredLimits, now: float) -> Dict[str, Any]:
    """The task result's ``limits``: the limits as people read them, the effective deadline, the time left,
    the spend so far (USD, None without a price) and the cap."""
    found = lim.deadline_and_cause(stored.limits, stored.up_since, stored.price_per_hour)
    spent = lim.spend_usd(stored.price_per_hour, stored.up_since, now)
    return dict(stored.limits.describe(),
                deadline=None if found is None else lim.iso_utc(found[0]),
                deadline_cause=None if found is None else found[1],
                time_left_s=None if found is None else int(found[0] - now),
                up_since=None if stored.up_since is None else lim.iso_utc(stored.up_since),
                spend_usd=None if spent is None else float(spent), max_spend_usd=stored.limits.max_spend_usd)


@dataclasses.dataclass(frozen=True)
class Applied:
    """What ``apply_limits`` journalled: the row, the row before (None: none for this instance) and whether the
    limits changed."""

    stored: store.StoredLimits
    before: Optional[store.StoredLimits]
    changed: bool


def apply_limits(journal: Any, name: str, vm: Mapping[str, Any], params: Mapping[str, Any]) -> Applied:
    """Journal ``name``'s limits for its instance ``vm`` (a journalled VM record, up): a new instance starts a new
    row (up since now, the journal's clock); the same instance keeps its ``up_since``, and a limit the task leaves
    unset keeps its journalled value (``with_changes``). A ``ttl`` counts from ``up_since``, so a re-run with the
    same ttl computes the same deadline."""
    now = float(journal.clock())
    old = store.read(journal, name)
    same = old is not None and old.instance_id == vm.get("instance_id")
    up_since = old.up_since if same and old is not None and old.up_since is not None else now
    requested = lim.parse_limits(params, ttl_from=up_since)
    before = old if same else None
    merged, _diff = lim.with_changes(before.limits if before else lim.Limits(), requested)
    wanted = store.StoredLimits(key=name, instance_id=vm.get("instance_id"), limits=merged, up_since=up_since,
                                price_per_hour=vm.get("price_per_hour"))
    if before is not None and dataclasses.replace(before, updated_at=0.0) == wanted:
        return Applied(before, before, False)
    written = store.write(journal, wanted)
    return Applied(written, before, before is not None and before.limits != merged
                   or before is None and not merged.empty)


def after_ready(journal: Any, name: str, vm: Mapping[str, Any], params: Mapping[str, Any],
                result: Dict[str, Any], files: Any = None) -> Dict[str, Any]:
    """``result`` (the vm task's, its VM up) with its limits journalled: ``limits`` set, ``changed`` when they
    changed, both sides of the diff given their ``limits``, and a warning when the VM expires within the hour or
    is past its deadline. Then, where its cloud allows a watchdog (boot.has_watchdog), the watchdog is installed
    or refreshed over SSH with the journal's limits on every run (``files``: the run's SSH files; None: no SSH):
    the journal first, then the VM. On a cloud without one, a warning (when they are set or moved) says only the
    reap enforces them."""
    applied = apply_limits(journal, name, vm, params)
    now = float(journal.clock())
    warnings: List[str] = []
    cloud = (vm.get("location") or {}).get("cloud") or ""
    moved = applied.changed or (applied.before is None and not applied.stored.limits.empty)
    # Every run writes them, changed or not: a run killed between the journal commit and this write leaves the VM
    # its old limits, and the re-run, finding the journal already as asked, must still bring the VM up to date.
    if files is not None and has_watchdog(cloud, applied.stored.limits):
        failed = push_to_vm(applied.stored, vm, files)
        if failed:
            warnings.append(failed)
    elif moved:
        said = no_watchdog_warning(name, cloud, applied.stored.limits)
        if said:
            warnings.append(said)
    result["limits"] = limits_result(applied.stored, now)
    if applied.changed:
        result["changed"] = True
    # Both sides of the diff show the limits once either has any: a VM without limits keeps its diff as it was.
    if not (applied.stored.limits.empty and (applied.before is None or applied.before.limits.empty)):
        for side, row in (("before_vm", applied.before), ("after_vm", applied.stored)):
            if result.get(side):
                result[side] = dict(result[side], limits=(row.limits if row else lim.Limits()).describe())
    warned = expiry_warning(applied.stored, now)
    if warned:
        warnings.append(warned)
    if warnings:
        result["warnings"] = list(result.get("warnings") or []) + warnings
    return result


def forget(journal: Any, name: str) -> None:
    """``name`` was torn down: its limits go with it."""
    store.delete(journal, name)


def journalled_warnings(journal: Any, now: float) -> List[str]:
    """A warning for each journalled VM that expires within the hour or is past its deadline."""
    found = (expiry_warning(stored, now) for stored in store.read_all(journal))
    return [warned for warned in found if warned]
