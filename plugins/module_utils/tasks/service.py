# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""``gpuprov.cloud.vm`` without Ansible: validate the parameters, run the launch or
teardown machine on the journal, and shape the result. The action plugin only
adds argument parsing, progress printing and the task result."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import time
from typing import Any, Callable, Dict, List, Optional

from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import run_options
from ansible_collections.gpuprov.cloud.plugins.module_utils.cluster import kubeconfig
from ansible_collections.gpuprov.cloud.plugins.module_utils.expiry import vm_task as expiry_vm_task
from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.executor import (
    CancelToken, Executor, HardCancel, LeaseLost,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journal_sql import (
    Conflict, JournalError, JournalStore, LeaseHeld,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.owners import new_owner, owner_role
from ansible_collections.gpuprov.cloud.plugins.module_utils import money
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks import provider_args
from ansible_collections.gpuprov.cloud.plugins.module_utils.private_files import PrivateFileError
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    Location, Offer, ProviderError,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.state_dir import (
    default_state_dir, journal_exists, journal_location,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import launch, launch_states as ls, planning, projection, ssh, teardown, teardown_states as ts
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks import diff as vm_diff, sweep
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm.launch_states import Leaked, Ready, WholeSearch
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.progress import HeartbeatThread, ProgressPrinter
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.status import search_summary
from ansible_collections.gpuprov.cloud.plugins.module_utils.fleet.gate import FleetShare
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm.context import VmContext
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.vm_settings import (
    InvalidParameters, build_settings, k8s_plan, k8s_result,
)

# How long ``down`` waits for a live provision of the same name to stop after asking it to.
DOWN_WAIT_FOR_HOLDER_S = 600.0
# The journal event that records a tags request a cloud could not apply to a kept VM (warned once).
TAGS_KEPT_EVENT = "tags-kept"


class VmService:
    """One task's worth of work on one VM name."""

    def __init__(self, params: Dict[str, Any], progress: Callable[[str], None] = lambda line: None,
                 credential_key: Optional[str] = None):
        self.params = params
        self.progress = progress
        # The task's ansible_ssh_private_key_file (AWX's Machine credential), if any.
        self.credential_key = credential_key
        self.state_dir = default_state_dir()
        self.journal: Optional[JournalStore] = None
        self.journal_path = ""
        self._scratch: Optional[str] = None   # check mode's throw-away journal folder, when it made one
        self.owner = new_owner()
        self.started = time.monotonic()   # progress lines count from the task's start
        self._fleet: Optional[FleetShare] = None   # what this run shares with its fleet (not in check mode)

    # -- setup -----------------------------------------------------------------------
    def _open(self, check_mode: bool = False):
        source, key_path = ssh.key_source(self.params.get("ssh_key"), self.credential_key, self.state_dir)
        if check_mode and not source and not os.path.exists(key_path):
            # A dry run generates no key: the VM it would make is not made, and no journalled VM has it.
            public_key = ""
        elif source:
            if not os.path.exists(key_path):
                raise InvalidParameters("%s: %s does not exist; name an existing private key or leave ssh_key, "
                                        "GPUPROV_SSH_KEY_FILE and ansible_ssh_private_key_file unset to use the "
                                        "collection's own key" % (source, key_path))
            public_key = ssh.public_key_of(key_path)
        else:
            public_key = ssh.ensure_controller_key(key_path)
        self.key_source = source
        self.key_fingerprint = ssh.public_key_fingerprint(public_key) or "no key yet (check mode generates none)"
        if os.path.isdir(self.state_dir) and not os.access(self.state_dir, os.W_OK | os.X_OK):
            # Checked before anything is created: the VM's ssh config and pinned host key go here.
            raise InvalidParameters("state directory %s is not writable by this user; fix its permissions or set "
                                    "GPUPROV_HOME to a writable directory" % self.state_dir)
        settings = build_settings(self.params, public_key)
        try:
            self.lease_ttl = provider_args.lease_ttl(self.params)
        except ValueError as exc:
            raise InvalidParameters(str(exc)) from exc
        settings.cloud_options.setdefault("local", {}).setdefault("root", os.path.join(self.state_dir, "local"))
        files = ssh.ControllerFiles(self.state_dir, key_path)
        location = journal_location(self.params.get("journal"))
        try:
            if check_mode and not journal_exists(location):
                # A dry run creates no journal: an empty one in a scratch folder answers its reads.
                self._scratch = tempfile.mkdtemp(prefix="gpuprov-check-")
                self.journal = projection.open_journal(os.path.join(self._scratch, "journal.sqlite"))
                self.journal_path = location
                return settings, files
            self.journal = projection.open_journal(location, password=self.params.get("journal_password"))
        except JournalError as exc:
            raise InvalidParameters(str(exc)) from exc
        self.journal_path = self.journal.path   # a DSN as it may be shown: without its password
        # known_hosts and the ssh config are generated from the journal: this state directory may be new.
        files.write_from_journal(lambda: projection.vms(self.journal))
        return settings, files

    def _executor(self, machine, cancel: CancelToken, printer: ProgressPrinter) -> Executor:
        return Executor(self.journal, machine, owner=self.owner, lease_ttl=self.lease_ttl, cancel=cancel,
                        on_event=printer.on_event)

    # -- entry point -----------------------------------------------------------------
    def run(self, check_mode: bool = False, diff: bool = False) -> Dict[str, Any]:
        """The task's result; with ``diff``, also Ansible's ``diff`` (the VM record before and after)."""
        try:
            result = self._run(check_mode)
        finally:
            if self._scratch:
                shutil.rmtree(self._scratch, ignore_errors=True)
        before = result.pop("before_vm", None)
        after = result.pop("after_vm", before)  # a failed run changed nothing it can show
        if diff and before is not None:
            result["diff"] = vm_diff.result_diff(before, after)
        return result

    def _run(self, check_mode: bool) -> Dict[str, Any]:
        limits_problem = expiry_vm_task.invalid_limits(self.params, time.time())
        if limits_problem:
            return {"failed": True, "changed": False, "msg": limits_problem}
        try:
            settings, files = self._open(check_mode)
        except (InvalidParameters, PrivateFileError) as exc:
            return {"failed": True, "changed": False, "msg": str(exc)}
        ctx = VmContext(settings, files=files, ssh_check=None, journal_id=self.journal.journal_id,
                        journalled=run_options.recorded(self.journal, settings.vm_name))
        if not check_mode:
            # A run that drives a machine shares plans, listings and throttle answers with its fleet.
            self._fleet = FleetShare(self.journal, self.owner)
            ctx.share_fleet(self._fleet)
        try:
            if self.params.get("state") != "absent":
                self._k8s = k8s_plan(ctx, self.params.get("k8s"))
        except InvalidParameters as exc:
            self.journal.close()
            self.journal = None
            return {"failed": True, "changed": False, "msg": str(exc)}
        except ProviderError as exc:
            self.journal.close()
            self.journal = None
            return {"failed": True, "changed": False, "msg": exc.msg}
        try:
            if self.params.get("state") == "absent":
                return self._absent(ctx, files, check_mode)
            return self._present(ctx, files, check_mode)
        except LeaseHeld as exc:
            return {"failed": True, "changed": False, "msg": str(exc)}
        except (LeaseLost, Conflict) as exc:
            return {"failed": True, "changed": False,
                    "msg": "%s; this run stopped without further cloud calls" % exc}
        except (HardCancel, PrivateFileError, JournalError) as exc:
            return {"failed": True, "changed": False, "msg": str(exc)}
        finally:
            if self.journal is not None:
                self.journal.close()

    def _run_machine(self, machine, key: str, initial) -> Any:
        cancel = CancelToken()
        cancel.install()
        printer = ProgressPrinter(self.params["name"], self.progress, started=self.started)
        try:
            with HeartbeatThread(printer), (self._fleet.machine_running() if self._fleet else contextlib.nullcontext()):
                return self._executor(machine, cancel, printer).run(key, initial)
        finally:
            cancel.uninstall()

    def _present(self, ctx: VmContext, files: ssh.ControllerFiles, check_mode: bool) -> Dict[str, Any]:
        name = ctx.settings.vm_name
        row = self.journal.load(name)
        refused = self._other_key(row, files)
        if refused:
            return {"failed": True, "changed": False, "state": row.label, "journal": self.journal_path, "msg": refused}
        before = _before_vm(row)
        if check_mode:
            return dict(self._check_present(ctx, files, row), before_vm=before)
        ctx.ssh_check = ssh.SshChecker(files, command=ssh.SMOKE_COMMAND)
        outcome = self._run_machine(launch.LaunchMachine(ctx), name, launch.initial)
        run_events = self.journal.events(name, since_last_begin=True)
        changed = any(e["to"] and (e["to"].startswith("Booting") or e["to"].startswith("Compensating"))
                      for e in run_events)
        state = ls.from_dict(outcome.state)
        result: Dict[str, Any] = {
            "changed": changed, "state": outcome.label, "journal": self.journal_path,
            "history": _history(state),
            "search": search_summary(ls.search_of(state)),
            "events": [{k: e[k] for k in ("event", "from", "to", "note", "at")} for e in run_events],
        }
        if isinstance(state, Ready):
            vm = state.vm
            result.update(before_vm=before, after_vm=vm_diff.of_journalled_vm(vm, "running"),
                          vm=_vm_result(vm, "running", state.reused),
                          k8s=k8s_result(ctx, vm, self._k8s), connection=ssh.connection_vars(vm, files),
                          ssh_config=files.ssh_config,
                          msg="%s is up at %s:%d (%s)" % (
                              name, vm["ssh"]["host"], vm["ssh"]["port"], Location.from_dict(vm["location"])))
            smoke = ctx.ssh_check.outputs.get(vm["host_key_alias"])
            if smoke is not None:
                # Run by this run's login, which just passed: the play needs no login of its own for it.
                result["smoke"] = {"command": ctx.ssh_check.command, "stdout": smoke}
            result = expiry_vm_task.after_ready(self.journal, name, vm, self.params, result, files=files)
            # A VM made by this run has this run's tags already; a kept one may need them changed.
            return self._retag(ctx, vm, result, check=False) if state.reused else result
        if isinstance(state, Leaked):
            projection.upsert_vm(self.journal, name, status="leaked", stage="Leaked",
                                 detail={"targets": state.targets})
        reason = ls.reason_of(state)
        result.update(failed=True, msg="%s: %s%s" % (name, outcome.label, ": " + reason if reason else ""))
        if ls.targets_of(state):
            result["leaked"] = ls.targets_of(state)
        return result

    def _check_present(self, ctx: VmContext, files: ssh.ControllerFiles, row) -> Dict[str, Any]:
        """What O(state=present) would do, read-only: keep the journalled VM when it is up and matches
        the request, else search: the offers it would try, in order, and those it would skip."""
        name = ctx.settings.vm_name
        base = {"state": row.label if row else "absent", "journal": self.journal_path, "history": [], "events": []}
        state = ls.load_journalled(row.state, row.kind) if row else None
        vm = ls.vm_record(state) if row and row.kind == launch.LaunchMachine.KIND else None
        up = bool(vm and isinstance(state, Ready) and self._still_up(ctx, vm))
        differs = launch.request_mismatch(vm, ctx.settings) if up else []
        if up and not differs:
            kept = dict(base, changed=False, search=None, plan=[], after_vm=vm_diff.of_journalled_vm(vm, "running"),
                        vm=_vm_result(vm, "running", True), k8s=k8s_result(ctx, vm, self._k8s),
                        connection=ssh.connection_vars(vm, files), ssh_config=files.ssh_config,
                        msg="would keep %s: up at %s:%d (%s)" % (
                            name, vm["ssh"]["host"], vm["ssh"]["port"], Location.from_dict(vm["location"])))
            return self._retag(ctx, vm, kept, check=True)
        if differs and not ctx.settings.recreate:
            return dict(base, changed=False, failed=True, search=None, plan=[],
                        msg="%s exists but does not match the request: %s; set recreate: true to replace it, or "
                            "ask for what it has" % (name, "; ".join(differs)))
        plan, skipped = self._preview_search(ctx)
        first = plan[0] if plan else None
        summary = {"offer": 1, "of": len(plan), "offer_id": first["offer_id"],
                   "price_per_hour": first["price_per_hour"], "skipped": skipped} if first else None
        replacing = ("replace %s (%s), then " % (name, "; ".join(differs)) if differs
                     else "clear the journalled %s (not running), then " % vm["instance_id"] if vm and not up else "")
        if not plan:
            return dict(base, changed=False, failed=True, search=None, plan=[],
                        msg="%s: no offer to try: %s" % (name, "; ".join(skipped) or "no offers"))
        tries = ", ".join("%d. %s%s" % (offer["rank"], offer["offer_id"], _price(offer["price_per_hour"]))
                          for offer in plan)
        return dict(base, changed=True, search=summary, plan=plan,
                    after_vm=vm_diff.of_offer(first, "running (would be created)"),
                    msg="would %sprovision %s, trying %d offer(s) in order: %s%s" % (
                        replacing, name, len(plan), tries,
                        "; skipping %s" % "; ".join(skipped) if skipped else ""))

    def _retag(self, ctx: VmContext, vm: Dict[str, Any], result: Dict[str, Any], check: bool) -> Dict[str, Any]:
        """With the tags option set, give a kept VM those user tags (purge_tags: and no others) where its
        cloud can change them, else warn when they differ from the ones it was made with. Updates and
        returns ``result`` (RV(tags), changed, msg)."""
        if self.params.get("tags") is None:
            return result
        tags, purge = ctx.settings.spec.tags, self.params.get("purge_tags") is not False
        location = Location.from_dict(vm["location"])
        provider = ctx.provider(location.cloud)
        if not provider.can_retag:
            made_with = vm.get("tags") or {}
            if made_with != tags and (purge or any(made_with.get(k) != v for k, v in tags.items())):
                # Once per asked-for change of this instance (journalled), not on every run: nothing can change.
                asked = json.dumps([vm["instance_id"], tags, purge], sort_keys=True)
                if not self._noted(vm["name"], TAGS_KEPT_EVENT, asked, record=not check):
                    result.setdefault("warnings", []).append(
                        "tags: the %s cloud cannot change the tags of an existing VM; %s keeps the ones it was made "
                        "with (%s). Said once for these tags; recreate: true replaces the VM to change them" % (
                            location.cloud, vm["name"], ", ".join(
                                "%s=%s" % item for item in sorted(made_with.items())) or "none"))
            return result
        try:
            changes = provider.retag(location, vm["name"], vm["instance_id"], tags, purge, check=check)
        except ProviderError as exc:
            return dict(result, failed=True, msg="%s: %s" % (vm["name"], exc.msg))
        result["tags"] = changes
        if changes["set"] or changes["removed"]:
            what = "; ".join(part for part in (
                "set %s" % ", ".join("%s=%s" % item for item in sorted(changes["set"].items())) if changes["set"]
                else "", "removed %s" % ", ".join(changes["removed"]) if changes["removed"] else "") if part)
            result.update(changed=True, msg="%s; %stags: %s" % (result["msg"], "would change " if check else "", what))
        return result

    def _noted(self, name: str, event: str, note: str, record: bool) -> bool:
        """Whether the journal already holds ``note`` as an ``event`` of ``name``; if not and ``record``, it does
        now (under the VM's lease; a run that cannot take it records nothing and the next run says it again)."""
        if any(e["event"] == event and e["note"] == note for e in self.journal.events(name)):
            return True
        row = self.journal.load(name)
        if record and row is not None:
            try:
                self.journal.acquire(name, self.owner, self.lease_ttl)
                try:
                    self.journal.note(name, self.owner, row.version, row.label, note, event=event)
                finally:
                    self.journal.release(name, self.owner)
            except (LeaseHeld, Conflict):
                pass
        return False

    def _preview_search(self, ctx: VmContext):
        """The search Planning would make (offer rows, in the order tried) and what it would skip, read-only:
        planned as the launch plans (vm/planning.py), and a cloud whose credentials are missing or refused
        (asked once, read-only, where its plan makes no call) skipped with that reason, as the launch would."""
        planned, skipped = [], []
        for cloud_plan in planning.plan_clouds(ctx.settings.clouds, ctx.provider, ctx.settings.request,
                                               preview=True):
            if cloud_plan.error is not None:
                exc = cloud_plan.error
                skipped.append(exc.msg if exc.msg.startswith(cloud_plan.cloud + ":")
                               else "%s (skipped): %s" % (cloud_plan.cloud, exc.msg))
            if not cloud_plan.refused:
                planned.extend(cloud_plan.offers)
        chosen, passed_over = planning.choose_offers(
            planned, ctx.settings.prefer, ctx.settings.max_price_per_hour)
        skipped.extend("%s (unavailable): %s" % (offer.offer_id, why) for offer, why in passed_over)
        plan = [{"rank": rank, "offer_id": offer.offer_id, "cloud": offer.cloud, "region": offer.region,
                 "zone": offer.zone, "instance_type": offer.instance_type, "gpu": offer.gpu,
                 "gpu_count": offer.gpu_count, "price_per_hour": offer.price_per_hour}
                for rank, offer in enumerate(chosen, 1)]
        for offer in plan:
            self.progress("[%s check mode] would try offer %d of %d: %s%s" % (
                ctx.settings.vm_name, offer["rank"], len(plan), offer["offer_id"], _price(offer["price_per_hour"])))
        return plan, skipped

    def _other_key(self, row, files: ssh.ControllerFiles) -> str:
        """Why this run may not touch the journalled VM: it was made for another SSH key, so this
        run could not log in, and would tear it down or wait out ssh_timeout. Empty: it may."""
        vm = _journalled_vm(row)
        made_for = (vm or {}).get("ssh_key_fingerprint")
        if not made_for or made_for == self.key_fingerprint:
            return ""
        return ("%s was made for the SSH key %s, and this run holds %s (%s, from %s); nothing was done. Give the "
                "run the key the VM was made with: the ssh_key option, GPUPROV_SSH_KEY_FILE, or the job's Machine "
                "credential (ansible_ssh_private_key_file); or tear it down (down needs no key) and provision it "
                "again." % (vm["name"], made_for, self.key_fingerprint, files.key_path,
                            self.key_source or "the state directory's own key"))

    def _still_up(self, ctx: VmContext, vm: Dict[str, Any]) -> bool:
        location = Location.from_dict(vm["location"])
        try:
            found = ctx.provider(location.cloud).observe(location, vm["name"])
        except ProviderError:
            return False
        return any(o.instance_id == vm["instance_id"] and o.usable for o in found)

    def _stop_live_run(self, name: str) -> str:
        """Ask a live run holding ``name`` (a provision still searching or booting) to stop
        through the journal, and wait until it lets go: ``down`` never answers while a VM
        can still appear. Returns what was done, for the message; raises LeaseHeld when
        the run does not stop in time."""
        holder = self.journal.live_holder(name)
        if holder is None or holder == self.owner:
            return ""
        # A sweep's removal is a teardown already: it is waited for, never cancelled half-way.
        sweeping = owner_role(holder) == "sweep"
        if sweeping:
            self.progress("[%s] an orphan sweep (%s) is removing what it found of it: waiting for it" % (name, holder))
        else:
            self.progress("[%s] a run (%s) is working on it: asked it to stop, waiting for it" % (name, holder))
        deadline = time.monotonic() + DOWN_WAIT_FOR_HOLDER_S
        while True:
            if not sweeping:
                self.journal.request_cancel(name, holder, "cancelled: down requested by %s" % self.owner)
            time.sleep(0.2)
            holder = self.journal.live_holder(name)
            if holder is None or holder == self.owner:
                return "waited for the orphan sweep that was removing it; " if sweeping else \
                    "stopped the run that was provisioning it; "
            if time.monotonic() > deadline:
                raise LeaseHeld("%s is still being worked on by another run (%s) %.0f s after down %s; nothing was "
                                "torn down. Re-run down once it has stopped." % (
                                    name, holder, DOWN_WAIT_FOR_HOLDER_S,
                                    "began waiting for it" if sweeping else "asked it to stop"))

    def _forget_controller_files(self, name: str, files: ssh.ControllerFiles,
                                 result: Dict[str, Any]) -> Dict[str, Any]:
        """Remove the VM's ssh config block, pinned host keys and cluster-admin kubeconfigs.
        The VM is gone either way: what cannot be removed is a warning naming it (it is
        kept on record, so the next down retries), never a failed teardown."""
        problems = []
        for remove in (lambda: files.remove_vm(name), lambda: kubeconfig.remove_for_vm(name, self.state_dir)):
            try:
                remove()
            except (kubeconfig.KubeconfigError, PrivateFileError) as exc:
                problems.append(str(exc))
        if problems:
            result["warnings"] = problems
        return result

    def _nothing_here(self, ctx: VmContext, name: str, row, result: Dict[str, Any], stopped: str) -> Dict[str, Any]:
        """``result`` for a down that finds nothing of ``name`` to tear down in this journal. With no
        row at all, the VM may be another journal's (another ``journal``, another controller): it is
        never touched, and the clouds this run can reach are listed for resources carrying the
        name, each a warning saying what it is and which journal made it."""
        where = "%s (journal id %s)" % (self.journal_path, self.journal.journal_id)
        if row is not None:
            return dict(result, msg="%s%s has nothing to tear down in the journal %s" % (stopped, name, where))
        result["msg"] = ("%s%s has nothing to tear down in the journal %s: it holds no record of %s"
                         % (stopped, name, where, name))
        providers, errors = {}, []
        for cloud in ctx.settings.clouds:
            try:
                providers[cloud] = ctx.provider(cloud)
            except ProviderError as exc:
                errors.append({"cloud": cloud, "region": None, "msg": exc.msg})
        found, listing_errors = sweep.list_all(providers, list(ctx.settings.request.regions))
        elsewhere = [_elsewhere_warning(name, o, self.journal.journal_id, self.journal_path)
                     for o in found if o.vm_name == name]
        unchecked = ["%s: could not look for resources named %s on %s/%s: %s"
                     % (name, name, e["cloud"], e["region"] or "*", e["msg"]) for e in errors + listing_errors]
        if elsewhere:
            result["msg"] += "; but resources carrying that name exist on %s (see the warnings)" % ", ".join(
                sorted({str(o.location.cloud) for o in found if o.vm_name == name}))
        if elsewhere or unchecked:
            result["warnings"] = list(result.get("warnings") or []) + elsewhere + unchecked
        return result

    def _absent(self, ctx: VmContext, files: ssh.ControllerFiles, check_mode: bool) -> Dict[str, Any]:
        name = ctx.settings.vm_name
        if check_mode:
            row = self.journal.load(name)
            targets = launch.owned_targets(row.state, row.kind) if row else []
            before = _before_vm(row)
            base = {"state": row.label if row else "absent", "journal": self.journal_path,
                    "before_vm": before, "after_vm": {} if targets else before}
            if not targets:
                return self._nothing_here(ctx, name, row, dict(base, changed=False), "")
            return dict(base, changed=True, msg="would tear down %s" % teardown.describe_targets(targets))
        stopped = self._stop_live_run(name)
        # Decide under the lease: a provision starting now waits for us (or fails clearly).
        self.journal.acquire(name, self.owner, self.lease_ttl)
        row = self.journal.load(name)
        before = _before_vm(row)
        journalled = ls.load_journalled(row.state, row.kind) if row else None
        targets = ls.owned_targets(journalled)
        done = row is not None and row.kind == teardown.TeardownMachine.KIND and isinstance(journalled, ts.Done)
        resolved = row is None or done or (row.terminal and not targets)
        if resolved:
            # A down killed right after committing Done left the projection saying "running".
            projection.delete_vm(self.journal, name)
            # Stopping a provision changed something (it compensated); waiting for a sweep did not.
            result = self._forget_controller_files(name, files, {
                "changed": stopped.startswith("stopped"), "state": row.label if row else "absent",
                "journal": self.journal_path, "before_vm": before, "after_vm": {}})
            # The limits go last: while they are journalled, a reap killed before this point is finished by the next.
            expiry_vm_task.forget(self.journal, name)
            self.journal.release(name, self.owner)
            self.journal.clear_cancel(name)
            return self._nothing_here(ctx, name, row, result, stopped)
        outcome = self._run_machine(teardown.TeardownMachine(ctx), name,
                                    lambda prev, kind: teardown.initial(name, launch.owned_targets(prev, kind),
                                                                        "down requested"))
        self.journal.clear_cancel(name)
        ended = ts.from_dict(outcome.state)
        result = {"changed": True, "state": outcome.label, "journal": self.journal_path,
                  "targets": ended.targets, "before_vm": before,
                  "after_vm": dict(before, status="leaked") if before and not isinstance(ended, ts.Done) else {}}
        if isinstance(ended, ts.Done):
            projection.delete_vm(self.journal, name)
            result["msg"] = "%s%s torn down: %s" % (stopped, name, teardown.describe_targets(ended.targets))
            result = self._forget_controller_files(name, files, result)
            expiry_vm_task.forget(self.journal, name)   # last, as above
            return result
        projection.upsert_vm(self.journal, name, status="leaked", stage="Leaked", detail={"targets": ended.targets})
        result.update(failed=True, leaked=ended.targets,
                      msg="%s: teardown incomplete (%s); resources may still bill: %s. Re-run down to retry."
                      % (name, ended.reason, teardown.describe_targets(ended.targets)))
        return result


def _elsewhere_warning(name: str, owned, journal_id: str, journal_path: str) -> str:
    """What a resource carrying ``name`` that this journal has no record of is, and what to do."""
    what = "%s %s at %s%s" % (owned.kind, owned.resource_id, owned.location,
                              " (%s)" % owned.status if owned.status else "")
    if owned.journal_id and owned.journal_id != journal_id:
        return ("%s: %s carries this VM name and was made by journal %s, not by %s; it was left alone. Tear it down "
                "with the journal that made it (journal / GPUPROV_JOURNAL / -e gpuprov_journal=...)"
                % (name, what, owned.journal_id, journal_path))
    if owned.journal_id:
        return ("%s: %s carries this VM name and this journal's id, but the journal has no record of it (an orphan); "
                "it was left alone: ansible-playbook gpuprov.cloud.sweep -e delete=true removes it" % (name, what))
    return ("%s: %s carries this VM name and no journal id (made before journal ids); it was left alone: "
            "ansible-playbook gpuprov.cloud.sweep -e delete=true -e include_legacy=true removes it" % (name, what))


def _journalled_vm(row: Any) -> Optional[Dict[str, Any]]:
    """The VM record a journalled launch state keeps (directly, or in the state it is reconciling)."""
    if row is None or row.kind != launch.LaunchMachine.KIND:
        return None
    return ls.last_vm_record(ls.from_dict(row.state))


def _before_vm(row: Any) -> Dict[str, Any]:
    """The diff's before side: the journalled VM with the journal's view of its status ({} for none)."""
    vm = _journalled_vm(row)
    if not vm:
        return {}
    kind = ls.from_dict(row.state).kind
    diffed: Dict[str, Any] = vm_diff.of_journalled_vm(vm, {"Ready": "running", "Leaked": "leaked"}.get(kind, kind.lower()))
    return diffed


def _price(price: Optional[float]) -> str:
    return "" if price is None else " (%s)" % money.per_hour(price)


def _history(state: ls.LaunchState) -> List[Dict[str, Any]]:
    """The offers this run's search tried, each with its outcome and classified error, the one a VM
    came up on last (outcome Ready)."""
    search = ls.search_of(state)
    history = list(search.history) if isinstance(search, WholeSearch) else []
    taken = search.current if isinstance(state, Ready) and isinstance(search, WholeSearch) else None
    if taken is not None:
        history.append({"offer": Offer.from_dict(taken).offer_id, "outcome": "Ready", "error": None})
    return history


def _vm_result(vm: Dict[str, Any], status: str, reused: bool) -> Dict[str, Any]:
    loc = vm["location"]
    # Journalled as ssh-keygen -l prints it ("ssh-ed25519 SHA256:..."): returned as the type and the fingerprint.
    words = (vm.get("host_key_fingerprint") or "").split()
    host_key_type = words[0] if len(words) > 1 else (vm.get("host_key") or {}).get("type")
    return {"name": vm["name"], "cloud": loc["cloud"], "region": loc["region"],
            "zone": loc.get("zone") or vm.get("zone"),
            "instance_id": vm["instance_id"], "instance_type": vm.get("instance_type"), "gpu": vm.get("gpu"),
            "gpu_count": vm.get("gpu_count"), "ssh_host": vm["ssh"]["host"], "ssh_port": vm["ssh"]["port"],
            "ssh_user": vm["ssh"]["user"], "host_key_alias": vm["host_key_alias"],
            "host_key_fingerprint": words[-1] if words else None, "host_key_type": host_key_type, "status": status,
            "price_per_hour": vm.get("price_per_hour"), "reused": reused}
