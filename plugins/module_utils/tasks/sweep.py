# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The orphan sweep (``gpuprov.cloud.orphans``): list every resource that carries gpuprov's
identity on the given clouds and regions (``Provider.list_owned``), join it with the journal,
and, when asked, remove the orphans through the teardown machine.

The join, per resource (:func:`classify`):

* **owned**: it carries this journal's id (or none) and a journal row owns it: a run of
  its VM name is in progress (a live lease or a state that is not terminal), or a terminal
  row names a location on its cloud (a Ready VM, a Leaked teardown, a reused VM an Aborted
  run kept, a ``gpuprov.cloud.instance`` teardown that has not finished). ``down`` or the
  next run handles it; the sweep never does.
* **orphan**: this journal's id, and no row owns it (no row, a teardown that ended Done,
  an Aborted or Exhausted run that names no location on its cloud).
* **foreign**: another journal's id (another controller's). Reported; removed only with
  ``include_foreign``, acting as that journal.
* **legacy**: no journal id (made before journal ids). Reported; removed only with
  ``include_legacy``, unless a row owns it.

Removal runs one teardown machine per VM name (and per foreign journal), journalled under
``sweep:<vm name>`` (``sweep:<journal id>:<vm name>`` for a foreign journal's), which never
meets a VM's key (VM names have no ``:``). A sweep killed mid-way leaves those rows
non-terminal; the next sweep resumes them before anything else. While a VM name's teardown
runs, the sweep holds the lease of the VM name and of its ``gpuprov.cloud.instance`` keys
on the clouds it removes from, whether or not the journal has rows for them (a row-less key
has a lease of its own: machine/journal.py ``leases``), so no provision or instance task of
the name can begin, adopt or create meanwhile: it fails naming the sweep. Every step first
re-reads those rows under the leases and stops (Done, ``skipped``) when one owns a target.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Callable, Dict, List, Optional, Tuple

from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.executor import (
    CancelToken, Executor, Next, Outcome, StepCx, StepResult,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journal_sql import JournalError, JournalStore, LeaseHeld
from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.owners import new_owner
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.provider_args import (
    LEASE_TTL_DEFAULT_S, group_argument_spec, lease_ttl,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers import registry
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    ANY_REGION, InstanceSpec, Location, Observed, Owned, ProviderError, ResourceKind, ResourceRequest,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.options import declared_credentials
from ansible_collections.gpuprov.cloud.plugins.module_utils.state_dir import (
    default_state_dir, journal_exists, journal_location,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import projection, teardown, teardown_states as ts
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm.launch_states import (
    JournalledState, UnreadableState, load_journalled, owned_targets,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm.teardown_states import Done, Leaked, TeardownState
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm.context import VmContext, VmSettings
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.status import INSTANCE_KEY_PREFIX, SWEEP_KEY_PREFIX
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.sweep_report import (  # the categories and tables
    CATEGORIES, FOREIGN, LEGACY, ORPHAN, OWNED, callouts, cost_per_hour, describe, format_table, price_text,
)


# The region of account-wide resources (providers/owned_common.py GLOBAL).
GLOBAL = "global"

# The argument spec of gpuprov.cloud.orphans, shared by its action plugin and the module file that
# carries its documentation: the group's shared options and its own.
ORPHANS_ARGUMENT_SPEC = group_argument_spec(
    state=dict(type="str", default="present", choices=["present", "absent"]),
    include_foreign=dict(type="bool", default=False),
    include_legacy=dict(type="bool", default=False),
)


class SweepError(Exception):
    """A parameter is wrong; the message names it and says what was expected."""


def sweep_key(vm_name: str, journal_id: Optional[str] = None) -> str:
    """The journal key of the sweep's teardown of ``vm_name`` (as ``journal_id``, when that is
    another journal's)."""
    return "%s%s%s" % (SWEEP_KEY_PREFIX, (journal_id + ":") if journal_id else "", vm_name)


# -- which clouds ---------------------------------------------------------------------------

def has_credentials(cloud: str, options: Optional[Dict[str, Any]] = None,
                    environ: Optional[Dict[str, str]] = None, exists: Callable[[str], bool] = os.path.exists) -> bool:
    """Whether ``cloud`` looks configured on this controller, without calling it: any source
    of credentials its declaration names (providers/cloud_options/<cloud>.py ``CREDENTIALS``)
    is set: a whole set of its credential options (in ``options`` or their environment
    variables), a variable or a file its SDK reads. A cloud that declares none (the local
    cloud) always counts."""
    declared = declared_credentials(cloud)
    if declared is None:
        return True
    return declared.found(options or {}, os.environ if environ is None else environ, exists)


def default_clouds(cloud_options: Dict[str, Dict[str, Any]]) -> List[str]:
    """Every known cloud that has credentials here (the local cloud always)."""
    return [cloud for cloud in registry.known_clouds() if has_credentials(cloud, cloud_options.get(cloud))]


# -- the join -------------------------------------------------------------------------------

@dataclasses.dataclass
class RowView:
    """What the join needs of one journal row: its machine kind and its state (launch_states.load_journalled)."""

    key: str
    kind: str
    state: Optional[JournalledState]
    terminal: bool
    running: bool        # a live run holds its lease
    # Why its state cannot be read (say a version this one does not know wrote it): then it owns everything of its name.
    unreadable: str = ""

    @classmethod
    def of(cls, journal: JournalStore, key: str) -> Optional["RowView"]:
        row = journal.load(key)
        if row is None:
            return None
        try:
            state, unreadable = load_journalled(row.state, row.kind), ""
        except UnreadableState as exc:
            state, unreadable = None, exc.what
        return cls(key, row.kind, state, row.terminal, journal.live_holder(key) is not None, unreadable)

    @property
    def state_kind(self) -> str:
        return self.state.kind if self.state is not None else "unreadable"


def row_owns(row: Optional[RowView], owned: Owned) -> str:
    """Why ``row`` owns ``owned`` (empty: it does not).

    A terminal row owns every resource of its VM name on each cloud it names a location of,
    not only at that location: a cloud's cleanup removes side resources by the VM name, and
    some of them are global (GCP's firewall rules), so removing anything of the name on that
    cloud could take what the row's VM still uses. ``down`` (or the next run) clears them."""
    if row is None:
        return ""
    if row.running or not row.terminal:
        return "a run of %s is in progress (%s, state %s)" % (owned.vm_name, row.key, row.state_kind)
    if row.unreadable:
        # Fail closed: what such a row owns is unknown here, so nothing of its name is an orphan.
        return "journal row %s holds %s, so it may own anything of %s" % (row.key, row.unreadable, owned.vm_name)
    if row.kind in (ts.TEARDOWN_KIND, ts.INSTANCE_TEARDOWN_KIND) and isinstance(row.state, Done):
        return ""
    for target in owned_targets(row.state):
        where = Location.from_dict(target["location"])
        if where.cloud == owned.location.cloud:
            return "journal row %s (%s) names %s, on the same cloud" % (row.key, row.state_kind, where)
    return ""


def classify(owned: Owned, journal_id: Optional[str], rows: List[Optional[RowView]]) -> Tuple[str, str]:
    """(category, why) of one listed resource against this journal's rows for its VM name
    (the VM's own row and its ``gpuprov.cloud.instance`` teardown rows)."""
    if owned.journal_id and owned.journal_id != journal_id:
        return FOREIGN, "made by journal %s" % owned.journal_id
    for row in rows:
        why = row_owns(row, owned)
        if why:
            return OWNED, why
    if owned.journal_id is None:
        return LEGACY, "carries no journal id (made before journal ids); no row of this journal owns it"
    present = [r for r in rows if r is not None]
    if not present:
        return ORPHAN, "this journal has no row for %s" % owned.vm_name
    return ORPHAN, "the journal's rows for %s (%s) do not own it" % (
        owned.vm_name, ", ".join("%s: %s" % (r.key, r.state_kind) for r in present))


def instance_key(cloud: str, vm_name: str) -> str:
    """The journal key of ``gpuprov.cloud.instance`` tasks on ``vm_name`` at ``cloud``."""
    return "%s%s:%s" % (INSTANCE_KEY_PREFIX, cloud, vm_name)


def name_keys(vm_name: str, clouds: List[str]) -> List[str]:
    """The keys whose rows can own ``vm_name``'s resources on ``clouds``: the VM's own and its
    instance tasks' (the leases a sweep holds while it removes them)."""
    return [vm_name] + [instance_key(cloud, vm_name) for cloud in sorted(set(clouds))]


def rows_for(journal: Optional[JournalStore], vm_name: Optional[str], cloud: str) -> List[Optional[RowView]]:
    if journal is None or not vm_name:
        return []
    return [RowView.of(journal, key) for key in name_keys(vm_name, [cloud])]


# -- listing --------------------------------------------------------------------------------

def _locations(provider, regions: List[str]) -> List[Location]:
    found = provider.sweep_locations()
    if not regions:
        return found
    out = []
    for location in found:
        if location.region == ANY_REGION:
            out.append(location)   # one listing of every region: filtered afterwards
        elif location.region in regions:
            out.append(location)
    return out


def list_all(providers: Dict[str, Any], regions: List[str]) -> Tuple[List[Owned], List[Dict[str, Any]]]:
    """(every resource found, listing errors) over the providers' sweep locations."""
    found: List[Owned] = []
    errors: List[Dict[str, Any]] = []
    for cloud in sorted(providers):
        provider = providers[cloud]
        try:
            locations = _locations(provider, regions)
        except NotImplementedError as exc:
            errors.append({"cloud": cloud, "region": None, "kind": "Unsupported", "msg": str(exc)})
            continue
        for location in locations:
            try:
                listed = provider.list_owned(location)
            except NotImplementedError as exc:
                errors.append({"cloud": cloud, "region": location.region, "kind": "Unsupported", "msg": str(exc)})
                break
            except ProviderError as exc:
                errors.append({"cloud": cloud, "region": location.region, "kind": exc.kind, "msg": exc.msg})
                continue
            # Account-wide resources (registered keys, GCP's firewall rules) belong to every region.
            found.extend(o for o in listed if not regions or o.location.region in regions + [GLOBAL])
    return found, errors


# -- removal --------------------------------------------------------------------------------

class SweepTeardown(teardown.TeardownMachine):
    """The teardown machine on a sweep key: it acts only on instances whose journal id is in
    the state's ``journal_ids`` (None: legacy), and stops (Done, ``skipped``) as soon as a run
    of the VM name owns the location."""

    KIND = ts.SWEEP_TEARDOWN_KIND

    def _observe_all(self, state: TeardownState) -> List[Tuple[ts.Target, List[Observed]]]:
        """Instances of the accepted journals at each target. A target of side resources only
        (no instance was listed there) is not observed: it may be no place instances live in
        (GCP's ``global``, where its firewall rules are), and its cleanup alone clears it."""
        accepted = set(state.journal_ids or [])
        name = state.vm_name
        journal_id = getattr(self.ctx, "journal_id", None)
        found: List[Tuple[ts.Target, List[Observed]]] = []
        for t in state.targets:
            if not ts.created_at(t):
                found.append((t, []))
                continue
            location = Location.from_dict(t["location"])
            observed = self.ctx.provider(location.cloud).observe(location, name)
            found.append((t, [o for o in observed if o.owned_by(journal_id) and o.journal_id in accepted]))
        return found

    def step(self, state: TeardownState, cx: StepCx) -> StepResult[TeardownState]:
        why = self._owned_now(state, cx)
        if why:
            return Next(dataclasses.replace(ts.moved(Done, state), skipped=why), "skipped: %s" % why)
        return super().step(state, cx)

    @staticmethod
    def _owned_now(state: TeardownState, cx: StepCx) -> str:
        """Why a row of the VM name (its own, or an instance task's on a target's cloud) owns a
        target now (empty: none does). The leases this sweep holds are not runs of it."""
        for t in state.targets:
            location = Location.from_dict(t["location"])
            for row in rows_for(cx.journal, state.vm_name, location.cloud):
                if row is None:
                    continue
                if cx.journal.holds(row.key, cx.owner):
                    row.running = False
                why = row_owns(row, Owned(ResourceKind.INSTANCE, "-", location, vm_name=state.vm_name))
                if why:
                    return why
        return ""


def _initial(vm_name: str, targets: List[ts.Target],
             journal_ids: List[Optional[str]]) -> Callable[[Optional[Dict[str, Any]], Optional[str]], TeardownState]:
    def initial(previous: Optional[Dict[str, Any]], previous_kind: Optional[str]) -> TeardownState:
        carried: List[ts.Target] = []
        if previous and previous_kind == SweepTeardown.KIND:
            left = ts.from_dict(previous)
            if isinstance(left, Leaked):
                carried = left.targets
        state = ts.initial(vm_name, ts.merge_targets(targets, carried), "orphan sweep")
        return dataclasses.replace(state, journal_ids=sorted(set(journal_ids), key=lambda j: j or ""))
    return initial


@dataclasses.dataclass
class Group:
    """What one sweep teardown removes: one VM name's resources of one journal (or legacy)."""

    vm_name: str
    act_as: Optional[str]                 # the journal id the adapters work for
    journal_ids: List[Optional[str]]      # which resources it may touch
    entries: List[Dict[str, Any]]
    foreign: bool = False                 # another journal's resources

    @property
    def key(self) -> str:
        return sweep_key(self.vm_name, self.act_as if self.foreign else None)

    def targets(self) -> List[Dict[str, Any]]:
        out = []
        for e in self.entries:
            location = Location(e["cloud"], e["region"], e["zone"]).to_dict()
            instance = e["kind"] == ResourceKind.INSTANCE
            out.append(ts.target(location, [e["id"]] if instance else [], created=instance))
        return ts.merge_targets(out)


def removal_groups(entries: List[Dict[str, Any]], journal_id: Optional[str], include_foreign: bool,
                   include_legacy: bool) -> List[Group]:
    """The teardowns that remove the chosen resources, one per VM name and journal."""
    chosen: Dict[Tuple[str, Optional[str]], Group] = {}
    for e in entries:
        category = e["category"]
        if not e["vm_name"]:
            continue
        if category == ORPHAN or (category == LEGACY and include_legacy):
            group = chosen.setdefault((e["vm_name"], journal_id), Group(e["vm_name"], journal_id, [], []))
            if e["journal_id"] not in group.journal_ids:
                group.journal_ids.append(e["journal_id"])
        elif category == FOREIGN and include_foreign:
            group = chosen.setdefault((e["vm_name"], e["journal_id"]),
                                      Group(e["vm_name"], e["journal_id"], [e["journal_id"]], [], foreign=True))
        else:
            continue
        group.entries.append(e)
    return [chosen[k] for k in sorted(chosen, key=lambda k: (k[0], k[1] or ""))]


class Sweeper:
    """One sweep: list, join, and (``remove``) tear the chosen resources down."""

    def __init__(self, journal: Optional[JournalStore], cloud_options: Dict[str, Dict[str, Any]],
                 clouds: Optional[List[str]] = None, regions: Optional[List[str]] = None,
                 teardown_timeout: float = 600.0, progress: Callable[[str], None] = lambda line: None,
                 providers: Optional[Dict[str, Any]] = None, lease_ttl_s: float = LEASE_TTL_DEFAULT_S):
        self.journal = journal
        self.journal_id = journal.journal_id if journal is not None else None
        self.cloud_options = {k: dict(v or {}) for k, v in (cloud_options or {}).items()}
        self.cloud_options.setdefault("local", {}).setdefault("root", os.path.join(default_state_dir(), "local"))
        self.clouds = list(clouds) if clouds else default_clouds(self.cloud_options)
        unknown = sorted(set(self.clouds) - set(registry.known_clouds()) - set(providers or {}))
        if unknown:
            raise SweepError("clouds: unknown cloud(s) %s; expected some of %s"
                             % (", ".join(unknown), ", ".join(registry.known_clouds())))
        self.regions = list(regions or [])
        self.teardown_timeout = float(teardown_timeout)
        self.lease_ttl = float(lease_ttl_s)
        self.progress = progress
        self._injected = dict(providers or {})
        self.owner = new_owner("sweep")

    def provider(self, cloud: str, journal_id: Optional[str]):
        if cloud in self._injected:
            return self._injected[cloud]
        return registry.get_provider(cloud, self.cloud_options.get(cloud), journal_id=journal_id)

    def find(self) -> Dict[str, Any]:
        """Every resource found, classified, with the listing errors and costs."""
        providers, errors = {}, []
        for cloud in self.clouds:
            try:
                providers[cloud] = self.provider(cloud, self.journal_id)
            except ProviderError as exc:
                errors.append({"cloud": cloud, "region": None, "kind": exc.kind, "msg": exc.msg})
        found, listing_errors = list_all(providers, self.regions)
        entries = []
        for owned in found:
            rows = rows_for(self.journal, owned.vm_name, owned.location.cloud)
            category, why = classify(owned, self.journal_id, rows)
            entries.append(describe(owned, category, why))
        entries.sort(key=lambda e: (CATEGORIES.index(e["category"]), e["cloud"], e["region"], e["vm_name"] or "",
                                    e["kind"], e["id"]))
        return {"entries": entries, "errors": errors + listing_errors}

    def _settings(self, vm_name: str, clouds: List[str]) -> VmSettings:
        return VmSettings(vm_name=vm_name, clouds=clouds, request=ResourceRequest(vm_name=vm_name),
                          spec=InstanceSpec(vm_name=vm_name, ssh_public_key=""),
                          cloud_options=self.cloud_options, teardown_timeout=self.teardown_timeout)

    def interrupted(self) -> List[str]:
        """Sweep teardowns a killed sweep left non-terminal."""
        if self.journal is None:
            return []
        out = []
        for key in self.journal.keys():
            if key.startswith(SWEEP_KEY_PREFIX):
                row = self.journal.load(key)
                if row is not None and not row.terminal:
                    out.append(key)
        return out

    def _run(self, key: str, vm_name: str, act_as: Optional[str], clouds: List[str],
             initial: Callable[[Optional[Dict[str, Any]], Optional[str]], TeardownState]) -> Outcome:
        """Run one sweep teardown under ``key``, holding the leases of every key that could own
        the VM name's resources on ``clouds`` (name_keys) for the whole removal: LeaseHeld, with
        nothing done, while any of them is held by a run."""
        ctx = VmContext(self._settings(vm_name, clouds), journal_id=act_as,
                        providers={c: self._injected[c] for c in clouds if c in self._injected})
        held: List[str] = []

        def on_event(kind: str, data: Dict[str, Any]) -> None:
            for name_key in held:
                self.journal.renew(name_key, self.owner, self.lease_ttl)
            if kind == "transition":
                self.progress("[sweep %s] %s -> %s%s" % (vm_name, data["frm"], data["to"],
                                                         ": %s" % data["note"] if data.get("note") else ""))
            elif kind == "resume":
                self.progress("[sweep %s] resuming the interrupted sweep teardown %s at %s" % (
                    vm_name, key, data["label"]))

        cancel = CancelToken()
        try:
            for name_key in name_keys(vm_name, clouds):
                self.journal.acquire(name_key, self.owner, self.lease_ttl)
                held.append(name_key)
            cancel.install()
            try:
                executor = Executor(self.journal, SweepTeardown(ctx), owner=self.owner, lease_ttl=self.lease_ttl,
                                    cancel=cancel, on_event=on_event)
                return executor.run(key, initial)
            finally:
                cancel.uninstall()
        finally:
            for name_key in reversed(held):
                self.journal.release(name_key, self.owner)

    def remove(self, entries: List[Dict[str, Any]], include_foreign: bool = False,
               include_legacy: bool = False) -> Dict[str, Any]:
        """Resume interrupted sweep teardowns, then tear down each chosen group. Returns
        ``{"removed": [entries], "not_removed": [entries with "error"], "resumed": [keys]}``."""
        resumed = []
        for key in self.interrupted():
            row = self.journal.load(key)
            state = ts.from_dict(row.state)
            clouds = sorted({t["location"]["cloud"] for t in state.targets})
            act_as = self.journal_id
            if key.count(":") == 2:
                act_as = key.split(":")[1]
            try:
                self._run(key, state.vm_name, act_as, clouds, _initial(state.vm_name, [], []))
                resumed.append(key)
            except LeaseHeld as exc:
                self.progress("[sweep] %s not resumed: %s" % (key, exc))
        removed, not_removed = [], []
        for group in removal_groups(entries, self.journal_id, include_foreign, include_legacy):
            clouds = sorted({e["cloud"] for e in group.entries})
            try:
                outcome = self._run(group.key, group.vm_name, group.act_as, clouds,
                                    _initial(group.vm_name, group.targets(), group.journal_ids))
            except LeaseHeld as exc:
                not_removed.extend(dict(e, error=str(exc)) for e in group.entries)
                continue
            state = ts.from_dict(outcome.state)
            if isinstance(state, Done) and state.skipped:
                not_removed.extend(dict(e, error="not removed: %s" % state.skipped) for e in group.entries)
            elif isinstance(state, Done):
                removed.extend(group.entries)
            else:
                not_removed.extend(dict(e, error=state.reason or state.kind) for e in group.entries)
        removed, still = self._still_listed(removed)
        return {"removed": removed, "not_removed": not_removed + still, "resumed": resumed}

    def _still_listed(self, removed: List[Dict[str, Any]]) -> Tuple[List[Dict[str, Any]], List[Dict[str, Any]]]:
        """(gone, still there): a teardown that ended Done removed only what its cloud's delete
        and cleanup remove; a second listing tells, rather than the sweep claiming it."""
        if not removed:
            return [], []
        clouds = sorted({e["cloud"] for e in removed})
        providers = {}
        for cloud in clouds:
            try:
                providers[cloud] = self.provider(cloud, self.journal_id)
            except ProviderError:
                continue
        found, errors = list_all(providers, self.regions)
        unlisted = {e["cloud"] for e in errors} | (set(clouds) - set(providers))
        present = {(o.location.cloud, o.kind, o.resource_id) for o in found}
        gone, still = [], []
        for e in removed:
            if e["cloud"] in unlisted:
                gone.append(e)   # the teardown observed it gone; the second listing could not run
            elif (e["cloud"], e["kind"], e["id"]) in present:
                still.append(dict(e, error="still listed after its teardown ended Done: the %s cloud's cleanup "
                                           "does not remove this %s" % (e["cloud"], e["kind"])))
            else:
                gone.append(e)
        return gone, still


def sweep(journal: Optional[JournalStore], cloud_options: Dict[str, Dict[str, Any]], clouds: Optional[List[str]],
          regions: Optional[List[str]], remove: bool, include_foreign: bool = False, include_legacy: bool = False,
          teardown_timeout: float = 600.0, progress: Callable[[str], None] = lambda line: None,
          providers: Optional[Dict[str, Any]] = None, lease_ttl_s: float = LEASE_TTL_DEFAULT_S) -> Dict[str, Any]:
    """One sweep, shaped as the module returns it (see plugins/modules/orphans.py RETURN)."""
    sweeper = Sweeper(journal, cloud_options, clouds, regions, teardown_timeout, progress, providers, lease_ttl_s)
    found = sweeper.find()
    entries = found["entries"]
    groups = removal_groups(entries, sweeper.journal_id, include_foreign, include_legacy)
    chosen = {(e["cloud"], e["kind"], e["id"]) for g in groups for e in g.entries}
    for e in entries:
        e["action"] = ("remove" if remove else "would remove") if (e["cloud"], e["kind"], e["id"]) in chosen \
            else "keep"
    result: Dict[str, Any] = {"clouds": sweeper.clouds, "regions": sweeper.regions,
                              "journal_id": sweeper.journal_id, "errors": found["errors"]}
    outcome = {"removed": [], "not_removed": [], "resumed": []}
    if remove:
        outcome = sweeper.remove(entries, include_foreign, include_legacy)
        done = {(e["cloud"], e["kind"], e["id"]) for e in outcome["removed"]}
        for e in entries:
            if e["action"] == "remove":
                e["action"] = "removed" if (e["cloud"], e["kind"], e["id"]) in done else "failed"
    by_category = {c: [e for e in entries if e["category"] == c] for c in CATEGORIES}
    totals = {c: cost_per_hour(by_category[c]) for c in CATEGORIES}
    result.update(
        resources=entries, orphans=by_category[ORPHAN], foreign=by_category[FOREIGN],
        legacy=by_category[LEGACY], owned=by_category[OWNED],
        cost_per_hour=dict(totals, total=round(sum(totals.values()), 6)),
        would_remove=[e for e in entries if e["action"] == "would remove"],
        removed=outcome["removed"], not_removed=outcome["not_removed"], resumed=outcome["resumed"],
        callouts=callouts(by_category[ORPHAN]),
        removed_cost_per_hour=cost_per_hour(outcome["removed"]),
        table=format_table(entries, totals) + ["LISTING FAILED %s/%s: %s" % (e["cloud"], e["region"] or "*", e["msg"])
                                               for e in found["errors"]],
    )
    return result


def _message(result: Dict[str, Any], remove: bool) -> str:
    msg = "%d orphan(s) (%s $/h), %d foreign, %d legacy, %d owned" % (
        len(result["orphans"]), price_text(result["cost_per_hour"]["orphan"]), len(result["foreign"]),
        len(result["legacy"]), len(result["owned"]))
    if remove:
        msg += "; removed %d, not removed %d" % (len(result["removed"]), len(result["not_removed"]))
    if result["resumed"]:
        msg += "; resumed the interrupted sweep teardown(s) %s" % ", ".join(result["resumed"])
    return msg


def run_task(params: Dict[str, Any], check_mode: bool,
             progress: Callable[[str], None] = lambda line: None) -> Dict[str, Any]:
    """The gpuprov.cloud.orphans task: its result (``failed`` and ``msg`` on failure)."""
    remove = params["state"] == "absent" and not check_mode
    clouds = params.get("clouds") or ([params["cloud"]] if params.get("cloud") else None)
    timeout = params.get("teardown_timeout")
    if timeout is not None and timeout < 1:
        return {"failed": True, "changed": False, "msg": "teardown_timeout: expected an integer >= 1, got %r" % timeout}
    try:
        lease_ttl_s = lease_ttl(params)
    except ValueError as exc:
        return {"failed": True, "changed": False, "msg": str(exc)}
    location = journal_location(params.get("journal"))
    journal = None
    try:
        # A dry run never creates a journal: without one, every journal id found is foreign.
        if remove or journal_exists(location):
            journal = projection.open_journal(location, password=params.get("journal_password"))
            location = journal.path   # a DSN as it may be shown: without its password
        result = sweep(journal, {k: v for k, v in (params.get("cloud_options") or {}).items() if v},
                       clouds, params.get("regions") or [], remove, include_foreign=params["include_foreign"],
                       include_legacy=params["include_legacy"], teardown_timeout=float(timeout or 600),
                       progress=progress, lease_ttl_s=lease_ttl_s)
    except (JournalError, SweepError) as exc:
        return {"failed": True, "changed": False, "msg": str(exc)}
    finally:
        if journal is not None:
            journal.close()
    result["journal"] = location
    result["warnings"] = ["%s/%s was not swept: %s" % (e["cloud"], e["region"] or "*", e["msg"])
                          for e in result["errors"]]
    if remove:
        result["changed"] = bool(result["removed"] or result["resumed"])
    else:
        result["changed"] = params["state"] == "absent" and bool(result["would_remove"])
    result["msg"] = _message(result, remove)
    if remove and result["not_removed"]:
        result["failed"] = True
        result["msg"] += ": " + "; ".join("%s/%s %s: %s" % (e["cloud"], e["region"], e["id"], e["error"])
                                          for e in result["not_removed"])
    return result
