# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The logic of the modules that wrap one provider primitive each:

* ``offers``        plan on every cloud of a search: the table a launch would walk;
* ``instance``      ``present`` = prepare + observe-or-create one offer,
                    ``absent`` = the teardown machine at one location, on the journal;
* ``instance_info`` observe a VM name at a location.

Each function takes the module's validated parameters and ``check_mode`` and
returns the task result; nothing here imports Ansible, so the unit tests call them
directly. A ProviderError never escapes: it becomes ``failed`` with ``msg`` naming
its kind and message (and the primitive and location it came from).

Adapters are reached through the registry (imported by name when first asked for).
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any, Callable, Dict, List, Literal, Optional, Tuple

from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.executor import Executor, LeaseLost
from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journal_sql import (
    Conflict, JournalError, JournalStore, LeaseHeld,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.owners import new_owner
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.provider_args import lease_ttl, options_for
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers import registry
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    ErrorKind, InstanceSpec, Location, Observed, Offer, Provider, ProviderError, Status, validate_vm_name,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.request_params import (
    instance_spec, resource_request, search_clouds, search_preferences, the_cloud,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm.planning import choose_offers
from ansible_collections.gpuprov.cloud.plugins.module_utils.state_dir import (
    default_state_dir, journal_exists, journal_location,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import projection, teardown, teardown_states
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm.context import VmContext, VmSettings
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm.planning import plan_clouds
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm.teardown_states import InstanceRecord
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.instance_teardown import (
    INSTANCE_RECORD_KIND, InstanceTeardown, WatchedProvider, covers, initial_for, journal_key,
)

PLAN_NAME = "offers"   # the VM name a plan is made for when the task names none


def _bundled_adapters():  # pragma: no cover - never called
    """Ansiballz ships a module only the module_utils named in import statements. The
    registry imports adapters by name at run time, so name every one of them here
    (each guards its own SDK imports). tests/unit/test_primitive_modules.py checks
    that this list covers registry.ADAPTERS."""
    from ansible_collections.gpuprov.cloud.plugins.module_utils.providers import aws  # noqa: F401
    from ansible_collections.gpuprov.cloud.plugins.module_utils.providers import digitalocean  # noqa: F401
    from ansible_collections.gpuprov.cloud.plugins.module_utils.providers import docker  # noqa: F401
    from ansible_collections.gpuprov.cloud.plugins.module_utils.providers import gcp  # noqa: F401
    from ansible_collections.gpuprov.cloud.plugins.module_utils.providers import hyperstack  # noqa: F401
    from ansible_collections.gpuprov.cloud.plugins.module_utils.providers import lambda_cloud  # noqa: F401
    from ansible_collections.gpuprov.cloud.plugins.module_utils.providers import local  # noqa: F401
    from ansible_collections.gpuprov.cloud.plugins.module_utils.providers import massedcompute  # noqa: F401
    from ansible_collections.gpuprov.cloud.plugins.module_utils.providers import nebius  # noqa: F401
    from ansible_collections.gpuprov.cloud.plugins.module_utils.providers import primeintellect  # noqa: F401
    from ansible_collections.gpuprov.cloud.plugins.module_utils.providers import runpod  # noqa: F401
    from ansible_collections.gpuprov.cloud.plugins.module_utils.providers import verda  # noqa: F401


class _Failed(Exception):
    """A ProviderError with the primitive and location it came from."""

    def __init__(self, error: ProviderError, primitive: str, where: str = ""):
        super().__init__(str(error))
        self.error, self.primitive, self.where = error, primitive, where


def _call(primitive: str, where: Any, fn: Callable, *args: Any) -> Any:
    try:
        return fn(*args)
    except ProviderError as exc:
        raise _Failed(exc, primitive, str(where or "")) from exc


def _invalid(msg: str) -> ProviderError:
    return ProviderError(ErrorKind.INVALID_REQUEST, msg)


def _failure(error: ProviderError, primitive: Optional[str] = None, where: str = "") -> Dict[str, Any]:
    context = ""
    if primitive:
        context = " (%s%s)" % (primitive, " at " + where if where else "")
    return {"failed": True, "changed": False, "msg": "%s: %s%s" % (error.kind, error.msg, context),
            "error": dict(error.to_dict(), primitive=primitive, location=where or None)}


def guarded(fn: Callable[..., Dict[str, Any]]) -> Callable[..., Dict[str, Any]]:
    """Every ProviderError (a parameter error included) becomes a failed result."""
    def wrapper(params: Dict[str, Any], check_mode: bool = False, **kwargs: Any) -> Dict[str, Any]:
        try:
            return fn(params, check_mode, **kwargs)
        except _Failed as exc:
            return _failure(exc.error, exc.primitive, exc.where)
        except ProviderError as exc:
            return _failure(exc)
    wrapper.__name__ = fn.__name__
    wrapper.__doc__ = fn.__doc__
    return wrapper


# -- parameters -------------------------------------------------------------------------------

def _options(cloud: str, params: Dict[str, Any], clouds: List[str]) -> Dict[str, Any]:
    """The task's ``cloud_options`` of ``cloud``; InvalidRequest naming the parameter when they are wrong."""
    try:
        return options_for(cloud, params.get("cloud_options"), clouds, registry.ADAPTERS)
    except ValueError as exc:
        raise _invalid(str(exc)) from exc


def _provider(cloud: str, params: Dict[str, Any], clouds: List[str], journal_id: Optional[str] = None) -> Provider:
    """The adapter of ``cloud``; with ``journal_id`` it tags what it makes with that journal."""
    return _call("load", cloud, registry.get_provider, cloud, _options(cloud, params, clouds), journal_id)


def offer_row(offer: Offer, rank: Optional[int] = None, skip_reason: Optional[str] = None) -> Dict[str, Any]:
    """An offer as the modules return it (``rank``: its place in a launch's search;
    ``skip_reason``: why a launch would not try it)."""
    return {"rank": rank, "offer_id": offer.offer_id, "cloud": offer.cloud, "region": offer.region,
            "zone": offer.zone, "instance_type": offer.instance_type, "gpu": offer.gpu,
            "gpu_count": offer.gpu_count, "price_per_hour": offer.price_per_hour, "spot": offer.spot,
            "available": offer.available, "unavailable_reason": offer.unavailable_reason,
            "skip_reason": skip_reason, "detail": dict(offer.detail or {})}


def instance_row(observed: Observed, where: Location) -> Dict[str, Any]:
    loc = observed.location or where
    endpoint = observed.endpoint
    return {"instance_id": observed.instance_id, "status": observed.status, "reason": observed.reason,
            "usable": observed.usable, "cloud": loc.cloud, "region": loc.region, "zone": loc.zone,
            "ssh_host": endpoint.host if endpoint else None, "ssh_port": endpoint.port if endpoint else None,
            "ssh_user": endpoint.user if endpoint else None}


def _table(rows: List[Dict[str, Any]]) -> List[str]:
    head = ("#", "CLOUD", "REGION", "ZONE", "TYPE", "GPU", "$/H", "AVAILABLE")
    body = []
    for r in rows:
        gpu = "%dx %s" % (r["gpu_count"], r["gpu"]) if r["gpu"] else "-"
        price = "-" if r["price_per_hour"] is None else ("%.4f" % r["price_per_hour"]).rstrip("0").rstrip(".")
        avail = "yes" if r["rank"] else "no: %s" % (r["skip_reason"] or r["unavailable_reason"] or "unavailable")
        body.append((str(r["rank"] or "-"), r["cloud"], r["region"], r["zone"] or "-", r["instance_type"], gpu,
                     price + (" spot" if r["spot"] else ""), avail))
    widths = [max(len(line[i]) for line in [head] + body) for i in range(len(head) - 1)]
    return ["  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=False)) + "  " + line[-1]
            for line in [head] + body]


# -- offers -----------------------------------------------------------------------------------

@guarded
def offers(params: Dict[str, Any], check_mode: bool = False) -> Dict[str, Any]:
    """Plan on every cloud of ``clouds``: the offers a launch would try, in the order it
    would try them (``rank``, after ``prefer`` and ``max_price_per_hour``), then those it
    would skip, with why. Planned as the launch and check mode plan (vm/planning.py): a
    cloud whose credentials are missing or refused (asked once, read-only, where its plan
    makes no call) has every offer unavailable, with that reason. Never changes anything."""
    del check_mode  # plan makes no change in either mode
    name = validate_vm_name(params.get("name") or PLAN_NAME)
    clouds = search_clouds(params)
    request = resource_request(params, name)
    prefer, max_price = search_preferences(params)
    summary: List[Dict[str, Any]] = []
    errors: List[Dict[str, Any]] = []
    planned: List[Offer] = []
    options = {cloud: _options(cloud, params, clouds) for cloud in clouds}   # a wrong parameter fails the task
    for cloud_plan in plan_clouds(clouds, lambda cloud: registry.get_provider(cloud, options[cloud]), request,
                                  preview=True):
        found, cloud = cloud_plan.offers, cloud_plan.cloud
        error = None
        if cloud_plan.error is not None:
            error = dict(cloud_plan.error.to_dict(), cloud=cloud, primitive=cloud_plan.primitive)
            errors.append(error)
        planned.extend(found)
        summary.append({"cloud": cloud, "offers": len(found), "available": sum(1 for o in found if o.available),
                        "error": error})
    chosen, skipped = choose_offers(planned, prefer, max_price)
    rows = [offer_row(offer, rank) for rank, offer in enumerate(chosen, 1)]
    rows += [offer_row(offer, None, why) for offer, why in skipped]
    rank = len(chosen)
    if errors and len(errors) == len(clouds):
        reasons = "; ".join(_cloud_error(e) for e in errors)
        return {"failed": True, "changed": False, "msg": "no cloud could plan this request: " + reasons,
                "errors": errors, "clouds": summary, "offers": rows, "table": _table(rows) if rows else []}
    skipped = "; ".join(_cloud_error(e) for e in errors)
    msg = "%d offer(s), %d to try%s, from %s" % (
        len(rows), rank, " by price" if prefer == "price" else "", ", ".join(clouds))
    return {"changed": False, "offers": rows, "available": rank, "clouds": summary, "errors": errors,
            "table": _table(rows), "msg": msg + ("; could not plan %s" % skipped if skipped else "")}


def _cloud_error(error: Dict[str, Any]) -> str:
    """``cloud: Kind: msg`` (a message that names its cloud first keeps its own wording)."""
    if error["msg"].startswith(error["cloud"] + ":"):
        return "%s: %s" % (error["kind"], error["msg"])
    return "%s: %s: %s" % (error["cloud"], error["kind"], error["msg"])


# -- instance ---------------------------------------------------------------------------------

def _select_offer(provider: Provider, params: Dict[str, Any], name: str) -> Offer:
    """The offer named by region / zone / instance_type among those plan returns, else the first."""
    cloud, region, zone, itype = provider.name, params.get("region"), params.get("zone"), params.get("instance_type")
    request = resource_request(params, name, [region] if region else None)
    planned = _call("plan", cloud, provider.plan, request)
    matches = []
    for offer in planned:
        if (region and offer.region != region) or (itype and offer.instance_type != itype):
            continue
        if zone and offer.zone not in (None, zone):
            continue
        if zone and offer.zone is None:
            offer = dataclasses.replace(offer, zone=zone)  # a regional offer pinned to one zone
        matches.append(offer)
    if not matches:
        pairs = (("region", region), ("zone", zone), ("instance_type", itype), ("gpu", request.gpu),
                 ("gpu_count", request.gpu_count))
        asked = ", ".join("%s=%s" % (k, v) for k, v in pairs if v)
        listed = ", ".join(o.offer_id for o in planned[:8]) + (" ..." if len(planned) > 8 else "")
        raise _Failed(_invalid("no %s offer matches %s; set gpu / gpu_count / regions so that plan returns it "
                               "(planned: %s)" % (cloud, asked or "the request", listed or "nothing")), "plan", cloud)
    prefer, max_price = search_preferences(params)
    usable, skipped = choose_offers(matches, prefer, max_price)
    if not usable:
        first, why = skipped[0]
        raise _Failed(ProviderError(ErrorKind.UNAVAILABLE, "%s: %s" % (first.offer_id, why)), "plan", cloud)
    return usable[0]


def _location(provider: Provider, params: Dict[str, Any], name: str) -> List[Location]:
    """``region`` (and ``zone``) when given, else the distinct locations of the offers plan returns."""
    if params.get("region"):
        return [Location(provider.name, params["region"], params.get("zone") or None)]
    request = resource_request(params, name)
    found: List[Location] = []
    for offer in _call("plan", provider.name, provider.plan, request):
        if params.get("zone") and offer.zone not in (None, params["zone"]):
            continue
        where = Location(offer.cloud, offer.region, params.get("zone") or offer.zone)
        if where not in found:
            found.append(where)
    if not found:
        raise _Failed(_invalid("region: %s planned no offer for this request; name the region (and zone)"
                               % provider.name), "plan", provider.name)
    return found


def _public_key(params: Dict[str, Any]) -> str:
    from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import ssh

    if params.get("ssh_public_key"):
        return params["ssh_public_key"].strip()
    path = params.get("ssh_key")
    if path:
        path = os.path.expanduser(path)
        if not os.path.exists(path):
            raise _invalid("ssh_key: %s does not exist; name an existing private key, or leave it unset to use "
                           "the collection's own key" % path)
        return ssh.public_key_of(path)
    return ssh.ensure_controller_key(os.path.join(default_state_dir(), "id_ed25519"))


def _present_already(observed: Observed) -> bool:
    """An instance a create would duplicate: live, or stopped (this module never starts one)."""
    return observed.live or observed.status in (Status.STOPPING, Status.STOPPED)


def _journal_id_if_any(params: Dict[str, Any]) -> Optional[str]:
    """The task journal's id, without creating a journal (check mode). None when there is
    no journal yet: then no instance carries its id."""
    path = journal_location(params.get("journal"))
    if not journal_exists(path):
        return None
    journal = projection.open_journal(path, password=params.get("journal_password"))
    try:
        return journal.journal_id
    finally:
        journal.close()


def _foreign(observed: List[Observed], journal_id: Optional[str]) -> List[Observed]:
    return [o for o in observed if not o.owned_by(journal_id)]


def _left_alone(name: str, where: Location, foreign: List[Observed]) -> List[str]:
    return ["%s: left %s (%s) at %s alone: it was made by another controller (journal %s)"
            % (name, o.instance_id, o.status, where, o.journal_id) for o in foreign]


@guarded
def instance(params: Dict[str, Any], check_mode: bool = False, clock: Callable[[], float] = time.monotonic,
             sleep: Optional[Callable[[float], None]] = None) -> Dict[str, Any]:
    """``present``: observe one offer's location, then prepare + create unless the instance exists; ``absent``: the teardown machine at
    one location. ``clock`` and ``sleep`` are the teardown executor's (its waits, its budget)."""
    name = validate_vm_name(params.get("name"))
    cloud = the_cloud(params)
    try:
        if params.get("state", "present") == "absent":
            return _absent(params, name, cloud, check_mode, clock, sleep)
        return _present(params, name, cloud, check_mode)
    except LeaseHeld as exc:
        return {"failed": True, "changed": False, "msg": str(exc)}
    except (LeaseLost, Conflict) as exc:
        return {"failed": True, "changed": False, "msg": "%s; this run stopped without further cloud calls" % exc}
    except JournalError as exc:
        return {"failed": True, "changed": False, "msg": str(exc)}


def _present(params: Dict[str, Any], name: str, cloud: str, check_mode: bool) -> Dict[str, Any]:
    if check_mode:
        return _present_with(_provider(cloud, params, [cloud], _journal_id_if_any(params)), params, name, True)
    journal = projection.open_journal(journal_location(params.get("journal")), password=params.get("journal_password"))
    owner = new_owner()
    key = journal_key(cloud, name)
    try:
        # While a teardown of this name on this cloud runs (another task, or the orphan sweep),
        # nothing is created: the key's lease is held, row or no row.
        ttl = _lease_ttl(params)
        journal.acquire(key, owner, ttl)
        try:
            record = InstanceRecorder(journal, key, owner, ttl)
            return _present_with(_provider(cloud, params, [cloud], journal.journal_id), params, name, False, record)
        finally:
            journal.release(key, owner)
    finally:
        journal.close()


class InstanceRecorder:
    """Writes the journal row (``instance:<cloud>:<vm name>``, kind ``instance``, holding a
    teardown_states.InstanceRecord) that says an instance task made, or found and kept, an
    instance at a location: the orphan sweep and ``status`` see it as
    owned until ``state=absent`` tears it down (tasks/instance_teardown.py). Written under the key's
    lease, before create is called (``Creating``, which owns whatever may appear there) and again
    with the instance id (``Present``); both are terminal, so a crash between leaves a row that
    still owns the location and a re-run that replaces it."""

    KIND = INSTANCE_RECORD_KIND

    def __init__(self, journal: JournalStore, key: str, owner: str, ttl: float):
        self.journal, self.key, self.owner, self.ttl = journal, key, owner, ttl

    def write(self, kind: Literal["Creating", "Present"], name: str, where: Location, instance_id: Optional[str] = None) -> None:
        state = InstanceRecord(kind, name, where.to_dict(), instance_id,
                               [teardown.target(where.to_dict(), [instance_id] if instance_id else [])]).to_dict()
        row = self.journal.load(self.key)
        if row is not None and row.kind == self.KIND and row.state == state:
            return   # a re-run that found what it recorded: nothing to write
        note = "%s: %s at %s" % (kind, instance_id or "create requested", where)
        if row is not None and row.kind == self.KIND:
            self.journal.transition(self.key, self.owner, row.version, state, kind, True, row.label, note)
        else:
            self.journal.begin(self.key, self.KIND, state, kind, True, self.owner, self.ttl,
                               row.version if row is not None else None, note=note)


def _present_with(provider: Provider, params: Dict[str, Any], name: str, check_mode: bool,
                  record: Optional[InstanceRecorder] = None) -> Dict[str, Any]:
    offer = _select_offer(provider, params, name)
    where = offer.location
    found = _call("observe", where, provider.observe, where, name)
    existing = [o for o in found if o.owned_by(provider.journal_id) and _present_already(o)]
    foreign = [o for o in _foreign(found, provider.journal_id) if _present_already(o)]
    if foreign and not existing:
        raise _Failed(_invalid("%s exists at %s, made by another controller (journal %s): %s; this task's journal "
                               "may not adopt it. Use another name, or that controller's journal"
                               % (name, where, foreign[0].journal_id,
                                  ", ".join("%s (%s)" % (o.instance_id, o.status) for o in foreign))),
                      "observe", str(where))
    base = {"offer": offer_row(offer), "location": where.to_dict(),
            "instances": [instance_row(o, where) for o in found]}
    if check_mode:
        if existing:
            return dict(base, changed=False, instance=instance_row(existing[0], where), prepared=None,
                        msg="%s: instance %s exists at %s" % (name, existing[0].instance_id, where))
        return dict(base, changed=True, instance=None, prepared=None,
                    msg="%s: would prepare and create %s" % (name, offer.offer_id))
    if existing:
        # Nothing is made for an instance that exists: no prepare call, no key read (a quick re-run).
        if record is not None:
            record.write("Present", name, where, existing[0].instance_id)
        return dict(base, changed=False, instance=instance_row(existing[0], where), prepared=None,
                    msg="%s: instance %s exists at %s (%s)" % (
                        name, existing[0].instance_id, where, existing[0].status))
    spec = instance_spec(params, name, _public_key(params))
    prepared = _call("prepare", where, provider.prepare, offer, spec)
    if record is not None:
        record.write("Creating", name, where)
    instance_id = _call("create", where, provider.create, offer, prepared, spec)
    if record is not None:
        record.write("Present", name, where, instance_id)
    after = _call("observe", where, provider.observe, where, name)
    mine = [o for o in after if o.instance_id == instance_id]
    made = mine[0] if mine else Observed(instance_id, Status.PENDING, reason="not listed yet", location=where)
    return dict(base, changed=True, instance=instance_row(made, where), prepared=prepared,
                instances=[instance_row(o, where) for o in after] or [instance_row(made, where)],
                msg="%s: created %s at %s (%s)" % (name, instance_id, where, made.status))


def _lease_ttl(params: Dict[str, Any]) -> float:
    """The journal lease of an instance task (held while it creates; renewed while its teardown runs)."""
    try:
        return lease_ttl(params)
    except ValueError as exc:
        raise _invalid(str(exc)) from exc


def _wait_timeout(params: Dict[str, Any]) -> float:
    timeout = params.get("wait_timeout")
    timeout = 600 if timeout is None else timeout
    if timeout < 0:
        raise _invalid("wait_timeout: expected seconds >= 0, got %r" % (timeout,))
    return float(timeout)


def _absent(params: Dict[str, Any], name: str, cloud: str, check_mode: bool,
            clock: Callable[[], float], sleep: Optional[Callable[[float], None]]) -> Dict[str, Any]:
    timeout = _wait_timeout(params)
    if check_mode:
        journal_id = _journal_id_if_any(params)
        provider = _provider(cloud, params, [cloud], journal_id)
        where = _location(provider, params, name)[0]  # with no region: the first offer's, as present picks
        found = _call("observe", where, provider.observe, where, name)
        doomed = sorted(o.instance_id for o in found if o.owned_by(journal_id) and not o.leaving)
        return {"location": where.to_dict(), "instances": [instance_row(o, where) for o in found],
                "changed": bool(doomed), "deleted": doomed, "cleaned_up": False,
                "warnings": _left_alone(name, where, _foreign(found, journal_id)),
                "msg": "%s: would delete %s at %s and clean up" % (name, ", ".join(doomed) or "no instance", where)}
    journal = projection.open_journal(journal_location(params.get("journal")), password=params.get("journal_password"))
    try:
        provider = WatchedProvider(_provider(cloud, params, [cloud], journal.journal_id))
        where = _location(provider, params, name)[0]
        # A teardown makes nothing: the spec (and its key) is never used.
        settings = VmSettings(vm_name=name, clouds=[cloud], request=resource_request(params, name),
                              spec=InstanceSpec(vm_name=name, ssh_public_key=""), teardown_timeout=timeout)
        ctx = VmContext(settings, providers={cloud: provider}, journal_id=journal.journal_id)
        executor = Executor(journal, InstanceTeardown(ctx, wait=bool(params.get("wait", True))),
                            lease_ttl=_lease_ttl(params), clock=clock)
        key = journal_key(cloud, name)
        outcome = executor.run(key, initial_for(name, where), wait_poll=sleep)
        if not covers(outcome.state, where):
            # That run finished a teardown an earlier task left at another location; now this one.
            outcome = executor.run(key, initial_for(name, where), wait_poll=sleep)
        return _absent_result(name, where, provider, outcome, journal)
    finally:
        journal.close()


def _absent_result(name: str, where: Location, provider: WatchedProvider, outcome, journal: JournalStore) -> Dict[str, Any]:
    state = teardown_states.from_dict(outcome.state)
    seen = provider.seen.get(str(where)) or []
    deleted = sorted(i for _where, i in provider.requested)
    result = {"location": where.to_dict(), "instances": [instance_row(o, where) for o in seen],
              "deleted": deleted, "changed": bool(deleted), "cleaned_up": str(where) in provider.cleaned,
              "state": outcome.label, "journal": journal.path,
              "warnings": _left_alone(name, where, _foreign(seen, journal.journal_id))}
    others = [t for t in state.targets if str(Location.from_dict(t["location"])) != str(where)]
    also = "; also cleared what an earlier task left: %s" % teardown.describe_targets(others) if others else ""
    if isinstance(state, teardown_states.Done):
        what = ("deleted %s" % ", ".join(deleted)) if deleted else "no instance"
        return dict(result, msg="%s: %s at %s; side resources removed%s" % (name, what, where, also))
    if isinstance(state, teardown_states.DeletionRequested):
        leaving = [o for o in seen if o.owned_by(journal.journal_id)]
        ids = ", ".join("%s (%s)" % (o.instance_id, o.status) for o in leaving) or "its instances"
        return dict(result, msg="%s: deletion requested for %s at %s; cleanup runs once they are gone (run again)%s"
                    % (name, ids, where, also))
    return dict(result, failed=True, leaked=state.targets,
                msg="%s: teardown incomplete (%s); resources may still bill: %s. Run the task again to retry."
                % (name, state.reason, teardown.describe_targets(state.targets)))


# -- instance_info ----------------------------------------------------------------------------

@guarded
def instance_info(params: Dict[str, Any], check_mode: bool = False) -> Dict[str, Any]:
    """Observe a VM name at ``region``/``zone``, or at every location plan returns."""
    del check_mode  # observe only, in either mode
    name = validate_vm_name(params.get("name"))
    cloud = the_cloud(params)
    provider = _provider(cloud, params, [cloud])
    rows: List[Dict[str, Any]] = []
    seen: set = set()
    present = False
    locations = _location(provider, params, name)
    for where in locations:
        for observed in _call("observe", where, provider.observe, where, name):
            row = instance_row(observed, where)
            key: Tuple[Any, ...] = (row["cloud"], row["region"], row["instance_id"])
            if key not in seen:
                seen.add(key)
                rows.append(row)
                present = present or _present_already(observed)
    return {"changed": False, "instances": rows, "exists": present, "running": any(r["usable"] for r in rows),
            "locations": [w.to_dict() for w in locations],
            "msg": "%s: %d instance(s) at %s" % (name, len(rows), ", ".join(str(w) for w in locations))}
