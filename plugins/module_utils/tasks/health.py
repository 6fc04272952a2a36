# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""``gpuprov.cloud.health`` without Ansible: for each journalled VM, the journal's state
against the cloud's own view (the adapter's ``diagnose``, built as the VM's own runs
build it: this run's options under the journalled ones, with the journal's id), a real
SSH login with the pinned host key, and k3s ``/readyz`` through the access path the
user has; then every disagreement between them, with what fixes it.

Read-only: the journal, the cloud and the kubeconfigs are never changed. The SSH check holds
each VM to the host key the journal pinned for it; known_hosts and the ssh config (which the
tunnelled k3s check uses) are generated from the journal before the checks, as every run does
(a new controller, a new AWX job, has none of its own), except in check mode, which writes
nothing. A host key pinned nowhere is reported, never recorded."""

from __future__ import annotations

import dataclasses
import functools
import os
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import run_options
from ansible_collections.gpuprov.cloud.plugins.module_utils.cluster import kubeconfig, validate
from ansible_collections.gpuprov.cloud.plugins.module_utils.expiry import decide as expiry_decide, store
from ansible_collections.gpuprov.cloud.plugins.module_utils.expiry.vm_task import journalled_warnings
from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journals import shown
from ansible_collections.gpuprov.cloud.plugins.module_utils.private_files import PrivateFileError
from ansible_collections.gpuprov.cloud.plugins.module_utils.state_dir import (
    default_state_dir, journal_exists, journal_location,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    InstanceSpec, Location, Observed, Offer, ProviderError, ResourceRequest, SshEndpoint,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import launch_states as ls, projection, ssh
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks import status
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm.launch_states import Aborted, Ready, WholeSearch
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm.context import VmContext, VmSettings

# Disagreements between the journal and what is there; each comes with its fix.
INSTANCE_GONE = "instance_gone"              # journal Ready, the instance is gone
INSTANCE_NOT_RUNNING = "instance_not_running"  # journal Ready, the instance stopped or failed
UNTRACKED_INSTANCE = "untracked_instance"    # an instance of this journal the journal does not list
EXTRA_INSTANCE = "extra_instance"            # a second instance of this journal beside the VM's
OTHER_JOURNAL = "other_journal"              # an instance of this name made by another controller
LEAKED = "leaked"                            # the journal says Leaked
INTERRUPTED = "interrupted"                  # a run stopped mid-way and nobody works on it
ENDPOINT_CHANGED = "endpoint_changed"        # the cloud's SSH address is not the journalled one
SSH_FAILED = "ssh_failed"                    # journal Ready, the SSH login fails
HOST_KEY_MISMATCH = "host_key_mismatch"      # the VM presents another host key than the pinned one
K3S_NOT_READY = "k3s_not_ready"              # journal k3s Ready, /readyz says otherwise
EXPIRED = "expired"                          # journal Ready, the instance stopped or went by its limits (no leak)

OK, FAILED, UNKNOWN, SKIPPED = "ok", "failed", "unknown", "-"
# A login that fails: paramiko's own errors too, as a handshake that times out ends in
# SSHException("No existing session") from SshChecker.
SSH_FAILURES = (ssh.SshNotReady, EOFError, OSError) + ((ssh.paramiko.SSHException,) if ssh.HAS_PARAMIKO else ())


class NotPinned(Exception):
    """The instance has no pinned host key: its identity cannot be checked."""


class PinnedKeysOnly(ssh.ControllerFiles):
    """The controller files as health uses them: a presented host key is checked against
    the pinned one (the journal's, else known_hosts') and never recorded."""

    journalled: Dict[str, Tuple[str, str]] = {}   # host key alias -> (type, key), as the journal pins them

    def known_key(self, alias: str) -> Optional[tuple]:
        return self.journalled.get(alias) or super().known_key(alias)

    def pin(self, alias: str, key_type: str, key_b64: str) -> None:
        known = self.known_key(alias)
        if known is None:
            raise NotPinned("no host key pinned for %s in %s" % (alias, self.known_hosts))
        if known != (key_type, key_b64):
            raise ssh.HostKeyMismatch("pinned %s, presented %s" % (ssh.fingerprint(*known),
                                                                   ssh.fingerprint(key_type, key_b64)))


@dataclasses.dataclass
class _Record:
    """What the journal holds for one VM name, read before any check."""

    name: str
    row: Any                        # machine.journal.Row, or None: no row
    projection: Optional[Dict[str, Any]]
    options: Dict[str, Dict[str, Any]]
    holder: Optional[str]           # owner of a live lease: a run is working on it
    limits: Optional[store.StoredLimits] = None   # its journalled limits (issue 27), for its instance or another

    @functools.cached_property
    def _loaded(self) -> Tuple[Optional[ls.JournalledState], str]:
        try:
            return (ls.load_journalled(self.row.state, self.row.kind) if self.row is not None else None), ""
        except ls.UnreadableState as exc:
            return None, exc.what

    @property
    def state(self) -> Optional[ls.JournalledState]:
        """The row's state (launch_states.load_journalled); None for no row, or one this version cannot read."""
        return self._loaded[0]

    @property
    def unreadable(self) -> str:
        """Why the row's state cannot be read ('' when it can, or there is no row)."""
        return self._loaded[1]


def _fix(verb: str, name: str) -> str:
    return "ansible-playbook gpuprov.cloud.%s -e vm=%s" % (verb, name)


class HealthCheck:
    """One health run over the journal (every VM, or ``name``)."""

    def __init__(self, params: Dict[str, Any], progress: Callable[[str], None] = lambda line: None,
                 credential_key: Optional[str] = None, check_mode: bool = False):
        self.params = params
        self.check_mode = check_mode  # write nothing, not even the files generated from the journal
        self.progress = progress
        self.state_dir = default_state_dir()
        self.journal_path = journal_location(params.get("journal"))
        # The key a provision of the same job would use: the ssh_key option, GPUPROV_SSH_KEY_FILE, the task's
        # ansible_ssh_private_key_file (credential_key: AWX's Machine credential), else the state dir's own.
        self.key_source, self.key_path = ssh.key_source(params.get("ssh_key"), credential_key, self.state_dir)
        self.files = PinnedKeysOnly(self.state_dir, self.key_path)
        self.files_error: Optional[str] = None  # why known_hosts could not be generated from the journal
        self.ssh_timeout = float(params.get("ssh_timeout") or 10)
        self.k3s_timeout = float(params.get("k3s_timeout") or 10)
        self.k3s_api_port = int(params.get("k3s_api_port") or 6443)
        self.journal_id: Optional[str] = None
        self.expiry_warnings: List[str] = []   # VMs within the hour of their deadline or past it
        self.now = time.time()
        self._ssh_check = None

    # -- entry point ------------------------------------------------------------------
    def run(self) -> Dict[str, Any]:
        if not journal_exists(self.journal_path):
            return {"journal": shown(self.journal_path), "journal_id": None, "vms": [], "disagreements": [],
                    "unknown": [], "healthy": True,
                    "table": ["no journal at %s: no VMs yet" % shown(self.journal_path)]}
        records = self._read_journal()
        vms = []
        for record in records:
            vm = self.check_vm(record)
            self.progress("[%s] %s" % (vm["name"], vm["summary"]))
            vms.append(vm)
        disagreements = [dict(d, vm=vm["name"]) for vm in vms for d in vm["disagreements"]]
        unknown = ["%s: %s" % (vm["name"], u) for vm in vms for u in vm["unknown"]]
        if self.files_error:
            unknown.append("known_hosts and the ssh config could not be written from the journal: %s"
                           % self.files_error)
        result = {"journal": shown(self.journal_path), "journal_id": self.journal_id, "vms": vms,
                  "disagreements": disagreements, "unknown": unknown, "healthy": not disagreements,
                  "table": format_table(vms)}
        if self.expiry_warnings:
            result["warnings"] = list(self.expiry_warnings)
        return result

    def _read_journal(self) -> List[_Record]:
        journal = projection.open_journal(self.journal_path, password=self.params.get("journal_password"))
        try:
            self.journal_id = journal.journal_id
            # VMs only: instance-module and sweep teardown rows have no VM to judge (status lists them).
            names = [key for key in journal.keys() if status.is_vm_key(key)]
            wanted = self.params.get("name")
            if wanted:
                names = [wanted]
            limits = {stored.key: stored for stored in store.read_all(journal)}
            self.now = float(journal.clock())   # the journal's time: the limits count by it
            self.expiry_warnings = [w for w in journalled_warnings(journal, self.now)
                                    if not wanted or w.startswith(wanted + " ")]
            records = [_Record(name=name, row=journal.load(name), projection=projection.vm(journal, name),
                               options=run_options.recorded(journal, name), holder=journal.live_holder(name),
                               limits=limits.get(name)) for name in names]
            read = {}

            def rows_read():
                read["rows"] = projection.vms(journal)
                return read["rows"]

            try:
                # The pinned host keys the SSH check holds a VM to, and the ssh config its tunnel uses, are the
                # journal's: this state directory may be new (an AWX job) or behind another controller's runs.
                if self.check_mode:
                    rows_read()
                else:
                    self.files.write_from_journal(rows_read)
            except PrivateFileError as exc:
                self.files_error = str(exc)
                rows_read()
            self.files.journalled = {row["host_key_alias"]: (row["detail"]["host_key"]["type"],
                                                             row["detail"]["host_key"]["key"])
                                     for row in read["rows"] if row.get("host_key_alias")
                                     and isinstance(row.get("detail"), dict) and row["detail"].get("host_key")}
            return records
        finally:
            journal.close()

    # -- one VM -----------------------------------------------------------------------
    def _context(self, record: _Record) -> VmContext:
        """The adapters exactly as the VM's own runs build them: this run's options (which
        bring the credentials) under the journalled ones, with this journal's id."""
        options = {cloud: {key: option for key, option in (value or {}).items() if option is not None}
                   for cloud, value in (self.params.get("cloud_options") or {}).items()}
        options.setdefault("local", {}).setdefault("root", os.path.join(self.state_dir, "local"))
        settings = VmSettings(vm_name=record.name, clouds=self._search_clouds(),
                              request=ResourceRequest(vm_name=record.name),
                              spec=InstanceSpec(vm_name=record.name, ssh_public_key=""), cloud_options=options)
        return VmContext(settings, files=None, journal_id=self.journal_id, journalled=record.options)

    def _search_clouds(self) -> List[str]:
        """Where to look for a VM the journal names no location for: ``clouds``, else ``cloud``, else nowhere."""
        clouds = [c for c in self.params.get("clouds") or [] if c]
        return clouds or ([self.params["cloud"]] if self.params.get("cloud") else [])

    def _locations(self, ctx: VmContext, record: _Record, unknown: List[str]) -> List[Location]:
        """Where the VM may have instances: every location its journalled state names, else
        (no row, or a row that never reached a cloud) the locations the ``clouds`` plan."""
        found: List[Location] = []
        if record.row is not None:
            state = record.state
            for target in ls.owned_targets(state):
                location = Location.from_dict(target["location"])
                if location not in found:
                    found.append(location)
            # A run that ended owning nothing (Aborted: say another controller's instance has the name) was
            # still at the offers it tried.
            search = ls.search_of(state)
            tried = search.offers[:search.cursor + 1] if isinstance(search, WholeSearch) else []
            for location in [] if found else [Offer.from_dict(offer).location for offer in tried]:
                if location not in found:
                    found.append(location)
        if found:
            return found
        if record.row is None and not ctx.settings.clouds:
            unknown.append("the journal has no row for it, so no location to look at; name the clouds to look on")
        for cloud in ctx.settings.clouds:
            try:
                offers = ctx.provider(cloud).plan(ResourceRequest(vm_name=record.name))
            except ProviderError as exc:
                unknown.append("cloud %s: cannot list its locations: %s" % (cloud, exc))
                continue
            for offer in offers:
                if offer.location not in found:
                    found.append(offer.location)
        return found

    def _cloud_view(self, ctx: VmContext, record: _Record, unknown: List[str]) -> Dict[str, Any]:
        view: Dict[str, Any] = {"looked_at": [], "instances": [], "findings": [], "errors": []}
        for location in self._locations(ctx, record, unknown):
            view["looked_at"].append(str(location))
            try:
                report = ctx.provider(location.cloud).diagnose(location, record.name)
            except ProviderError as exc:
                view["errors"].append({"location": str(location), "kind": exc.kind, "msg": exc.msg})
                unknown.append("cloud %s: %s" % (location, exc))
                continue
            view["instances"].extend(dict(entry, looked_at=str(location)) for entry in report["instances"])
            view["findings"].extend("%s: %s" % (location, finding) for finding in report["findings"])
        return view

    def check_vm(self, record: _Record) -> Dict[str, Any]:
        name, row = record.name, record.row
        unknown: List[str] = []
        disagreements: List[Dict[str, str]] = []

        def disagree(kind: str, msg: str, fix: str) -> None:
            disagreements.append({"kind": kind, "msg": msg, "fix": fix})

        state = record.state
        if record.unreadable:
            unknown.append("the journal holds %s for it" % record.unreadable)
        kind = state.kind if state is not None else None
        tracked = ls.vm_record(state) if isinstance(state, (Ready, Aborted)) else None
        journal_view = {
            "machine": row.kind if row is not None else None,
            "state": row.label if row is not None else "no row",
            "terminal": bool(row.terminal) if row is not None else True,
            "reason": ls.reason_of(state),
            "instance_id": tracked["instance_id"] if tracked else None,
            "location": str(Location.from_dict(tracked["location"])) if tracked else None,
            "ssh": tracked.get("ssh") if tracked else None,
            "in_progress": record.holder is not None, "holder": record.holder,
        }
        ctx = self._context(record)
        cloud = self._cloud_view(ctx, record, unknown)
        looked = set(cloud["looked_at"]) - {e["location"] for e in cloud["errors"]}
        seen = [Observed.from_dict(entry) for entry in cloud["instances"]]
        located = list(zip(seen, [entry["looked_at"] for entry in cloud["instances"]], strict=True))
        mine = [(o, at) for o, at in located if o.owned_by(self.journal_id)]
        theirs = [(o, at) for o, at in located if not o.owned_by(self.journal_id)]
        current = next((o for o, _at in mine if tracked and o.instance_id == tracked["instance_id"]), None)
        tracked_seen = bool(tracked) and journal_view["location"] in looked

        for other, at in theirs:
            disagree(OTHER_JOURNAL,
                     "instance %s (%s) on %s named %s was made by another controller (journal %s)"
                     % (other.instance_id, other.status, at, name, other.journal_id),
                     "it is that controller's to manage: this journal never adopts or deletes it, and its "
                     "provision of %s fails while it exists" % name)
        if record.holder is not None:
            pass  # a live run decides: what it has not committed yet is no disagreement
        elif row is not None and not row.terminal:
            disagree(INTERRUPTED,
                     "a run stopped in %s and nobody is working on it (the controller crashed or was killed)%s"
                     % (row.label, _own_instances(mine)),
                     "%s resumes it; %s tears down what it made" % (_fix("provision", name), _fix("down", name)))
        elif kind == "Leaked":
            left = [(o, at) for o, at in mine if not o.leaving]
            targets = ", ".join("%s %s" % (Location.from_dict(t["location"]), ",".join(t["instance_ids"]) or "(no ids)")
                                for t in ls.targets_of(state))
            if left or not looked:
                disagree(LEAKED, "the journal says Leaked (%s): resources that may still bill: %s%s"
                         % (ls.reason_of(state) or "teardown incomplete", targets, _own_instances(mine)),
                         "%s retries the teardown" % _fix("down", name))
            else:
                disagree(LEAKED, "the journal says Leaked (%s), but no instance of it is left at %s"
                         % (ls.reason_of(state) or "teardown incomplete", ", ".join(sorted(looked))),
                         "%s clears the record and any side resources" % _fix("down", name))
        elif tracked:
            ended = _ended_by_limits(record, tracked, current, tracked_seen, self.now)
            if ended is not None:
                disagree(EXPIRED,
                         "the journal says %s with instance %s on %s, which is %s: %s; not a leak"
                         % (row.label, tracked["instance_id"], journal_view["location"],
                            "gone" if current is None else current.status, ended),
                         "ansible-playbook gpuprov.cloud.reap -e delete=true -e name=%s removes what remains (disks, "
                         "firewall rules)" % name)
            elif tracked_seen and current is None:
                disagree(INSTANCE_GONE,
                         "the journal says %s with instance %s on %s, but the instance is gone"
                         % (row.label, tracked["instance_id"], journal_view["location"]),
                         "%s makes a new one; %s forgets it" % (_fix("provision", name), _fix("down", name)))
            elif current is not None and not current.live:
                disagree(INSTANCE_NOT_RUNNING,
                         "the journal says %s, but instance %s on %s is %s%s"
                         % (row.label, current.instance_id, journal_view["location"], current.status,
                            ": %s" % current.reason if current.reason else ""),
                         "%s replaces it (removing the old one first); %s removes it"
                         % (_fix("provision", name), _fix("down", name)))
            elif current is not None and current.endpoint is not None and tracked.get("ssh") and (
                    current.endpoint.host, current.endpoint.port) != (tracked["ssh"]["host"], tracked["ssh"]["port"]):
                disagree(ENDPOINT_CHANGED,
                         "the journal reaches %s at %s:%s, the cloud now says %s:%s"
                         % (tracked["instance_id"], tracked["ssh"]["host"], tracked["ssh"]["port"],
                            current.endpoint.host, current.endpoint.port),
                         "%s reconnects and rewrites the ssh config" % _fix("provision", name))
            for extra, at in mine:
                if extra.instance_id != tracked["instance_id"] and not extra.leaving:
                    disagree(EXTRA_INSTANCE,
                             "besides %s, instance %s (%s) on %s carries this VM's identity and this journal's id: "
                             "a duplicate that may bill"
                             % (tracked["instance_id"], extra.instance_id, extra.status, at),
                             "%s removes every instance of it, the VM included" % _fix("down", name))
        else:
            said = ("has no record of %s" % name) if row is None else "says %s" % row.label
            for stray, at in mine:
                if stray.leaving:
                    continue
                disagree(UNTRACKED_INSTANCE,
                         "instance %s (%s) on %s carries this journal's identity, but the journal %s: it may bill"
                         % (stray.instance_id, stray.status, at, said),
                         "%s adopts it (or replaces it when it is not live), then %s removes it"
                         % (_fix("provision", name), _fix("down", name)))

        ssh_view = self._ssh(record, tracked, current, tracked_seen, unknown)
        if kind == "Ready" and record.holder is None and ssh_view["status"] == FAILED:
            if ssh_view.get("host_key_mismatch"):
                disagree(HOST_KEY_MISMATCH,
                         "%s answers with another host key than the one pinned for it: %s"
                         % (_where(tracked), ssh_view["detail"]),
                         "someone else may answer at that address: do not log in; %s, then %s"
                         % (_fix("down", name), _fix("provision", name)))
            else:
                disagree(SSH_FAILED, "the journal says Ready, but the SSH login to %s fails: %s"
                         % (_where(tracked), ssh_view["detail"]),
                         "see the findings; %s checks it again and replaces it if it stays unreachable"
                         % _fix("provision", name))
        k3s_view = self._k3s(record, tracked, current, tracked_seen, ssh_view, unknown)
        if k3s_view["status"] == FAILED and record.holder is None:
            disagree(K3S_NOT_READY, "the journal says k3s Ready, but %s" % k3s_view["detail"],
                     "%s validates k3s again" % _fix("provision", name))

        vm = {"name": name, "journal": journal_view, "cloud": cloud, "ssh": ssh_view, "k3s": k3s_view,
              "disagreements": disagreements, "unknown": unknown,
              "verdict": "disagrees" if disagreements else ("unknown" if unknown else "ok")}
        vm["cloud"]["summary"] = _cloud_summary(cloud, tracked, current, mine, theirs)
        vm["summary"] = "%s; cloud: %s; ssh: %s; k3s: %s; %s" % (
            journal_view["state"], vm["cloud"]["summary"], ssh_view["status"], k3s_view["status"], vm["verdict"])
        return vm

    # -- SSH --------------------------------------------------------------------------
    def _checker(self):
        if self._ssh_check is None:
            if not os.path.exists(self.key_path):
                raise RuntimeError("the SSH key %s (%s) does not exist" % (
                    self.key_path, self.key_source or "the state directory's own key"))
            self._ssh_check = ssh.SshChecker(self.files, timeout=self.ssh_timeout)
        return self._ssh_check

    def _ssh(self, record: _Record, tracked, current: Optional[Observed], tracked_seen: bool,
             unknown: List[str]) -> Dict[str, Any]:
        if not tracked:
            return {"status": SKIPPED, "detail": "no VM on record"}
        if tracked_seen and (current is None or not current.live):
            return {"status": SKIPPED, "detail": "the instance is not running"}
        endpoint = SshEndpoint.from_dict(tracked["ssh"])
        other_key = self._other_key(tracked)
        if other_key:
            unknown.append("ssh: %s" % other_key)
            return {"status": UNKNOWN, "detail": other_key}
        started = time.monotonic()
        try:
            fingerprint = self._checker()(endpoint, tracked["host_key_alias"])
        except ssh.HostKeyMismatch as exc:
            return {"status": FAILED, "detail": "host key mismatch: %s" % exc, "host_key_mismatch": True}
        except SSH_FAILURES as exc:
            return {"status": FAILED, "detail": str(exc) or type(exc).__name__}
        except (NotPinned, RuntimeError) as exc:
            unknown.append("ssh: %s" % exc)
            return {"status": UNKNOWN, "detail": str(exc)}
        return {"status": OK, "detail": "login as %s in %.1f s, host key %s"
                % (endpoint.user, time.monotonic() - started, fingerprint)}

    def _other_key(self, tracked: Dict[str, Any]) -> str:
        """Why this run cannot check the login: the VM was made for another SSH key (a failed login
        would say nothing about the VM). Empty when it can, or when the key cannot be read."""
        made_for = tracked.get("ssh_key_fingerprint")
        if not made_for or not os.path.exists(self.key_path):
            return ""
        try:
            holding = ssh.public_key_fingerprint(ssh.public_key_of(self.key_path))
        except (OSError, ValueError) as exc:
            return "cannot read the SSH key %s: %s" % (self.key_path, exc)
        if holding == made_for:
            return ""
        return ("the VM was made for the SSH key %s, and this run holds %s (%s, from %s); give it that key: "
                "ssh_key, GPUPROV_SSH_KEY_FILE or the job's Machine credential (ansible_ssh_private_key_file)"
                % (made_for, holding, self.key_path, self.key_source or "the state directory's own key"))

    # -- k3s --------------------------------------------------------------------------
    def _kubeconfig_path(self, name: str, k3s: Dict[str, Any]) -> Optional[str]:
        candidates = [k3s["kubeconfig"]] if k3s.get("kubeconfig") else []
        try:
            record = kubeconfig._read_record(kubeconfig.record_path(self.state_dir)).get(name) or {}
        except kubeconfig.KubeconfigError:
            record = {}
        candidates += list(record.get("files") or [])
        for path in candidates:
            path = os.path.expanduser(str(path))
            if os.path.exists(path):
                return path
        return None

    def _k3s(self, record: _Record, tracked, current: Optional[Observed], tracked_seen: bool,
             ssh_view: Dict[str, Any], unknown: List[str]) -> Dict[str, Any]:
        detail = (record.projection or {}).get("detail")
        k3s = detail.get("k3s") if isinstance(detail, dict) else None
        if not k3s:
            return {"status": SKIPPED, "detail": "k3s not set up"}
        stage = k3s.get("stage") or "?"
        if stage != "Ready":
            return {"status": stage, "detail": "the journal says k3s %s%s" % (
                stage, ": %s" % k3s["note"] if k3s.get("note") else "")}
        if not tracked or (tracked_seen and (current is None or not current.live)):
            return {"status": UNKNOWN, "detail": "the instance is not running"}
        access = k3s.get("access") or "Direct"
        path = self._kubeconfig_path(record.name, k3s)
        if path is None:
            unknown.append("k3s: no kubeconfig of %s found" % record.name)
            return {"status": UNKNOWN, "detail": "no kubeconfig of %s found (recorded: %s)"
                    % (record.name, k3s.get("kubeconfig") or "none"), "access": access}
        if access == "SshTunnel" and ssh_view["status"] != OK:
            unknown.append("k3s: SSH is not reachable, so neither is the API behind its tunnel")
            return {"status": UNKNOWN, "detail": "SSH is not reachable (%s), so neither is the API behind its tunnel"
                    % ssh_view["detail"], "access": access, "kubeconfig": path}
        status, text, reached = self._readyz(record.name, path, access, self.k3s_api_port)
        view = {"access": access, "kubeconfig": path}
        if reached is None:
            unknown.append("k3s: %s" % text)
            return dict(view, status=UNKNOWN, detail=text)
        if status == 200:
            return dict(view, status=OK, detail="/readyz ok via %s" % reached)
        return dict(view, status=FAILED, detail=text)

    def _readyz(self, name: str, path: str, access: str, remote_port: int) -> Tuple[Optional[int], str, Optional[str]]:
        """(HTTP status or None, what happened, the path taken or None when the check could not be made)."""
        try:
            config = kubeconfig.load_file(path)
        except kubeconfig.KubeconfigError as exc:
            return None, str(exc), None
        forward = client = None
        route = "direct"
        try:
            try:
                connect_to = None
                if access == "SshTunnel":
                    forward = validate.SshForward(self.files.ssh_config, name, remote_port, timeout=self.k3s_timeout)
                    connect_to = ("127.0.0.1", forward.open())
                    route = "an SSH tunnel to %s:%d" % (name, remote_port)
                client = validate.ApiClient(config, connect_to=connect_to, timeout=self.k3s_timeout)
            except (validate.ApiError, KeyError, StopIteration, ValueError, OSError) as exc:
                return None, "cannot open the access path: %s" % exc, None
            route = "%s (%s)" % (route, client.server)
            try:
                http_status, body = client.get("/readyz")
            except validate.ApiError as exc:
                return 0, "the API does not answer through %s: %s" % (route, exc), route
            if http_status != 200:
                said = str(body).strip()[:200]
                return http_status, "/readyz through %s answers HTTP %d: %s" % (route, http_status, said), route
            return http_status, "ok", route
        finally:
            if client is not None:
                client.close()
            if forward is not None:
                forward.close()


def _ended_by_limits(record: _Record, tracked: Dict[str, Any], current: Optional[Observed], tracked_seen: bool,
                     now: float) -> Optional[str]:
    """Why the VM's limits ended it (reap's decision: expiry/decide.py), when its cloud shows it stopped or gone
    and its journalled limits say it stopped itself; else None (a stop or loss that is a disagreement)."""
    stored = record.limits
    if stored is None or stored.instance_id != tracked.get("instance_id") or not tracked_seen:
        return None
    if current is not None and current.live:
        return None
    observed = expiry_decide.ABSENT if current is None else expiry_decide.STOPPED
    decision = expiry_decide.decide(expiry_decide.VmFacts(
        state=expiry_decide.READY, limits=stored.limits, price_per_hour=stored.price_per_hour,
        up_since=stored.up_since, observed=observed), now)
    return decision.reason if decision.expired else None


def _where(tracked: Dict[str, Any]) -> str:
    endpoint = tracked["ssh"]
    return "%s@%s:%s" % (endpoint.get("user"), endpoint["host"], endpoint["port"])


def _own_instances(mine: List[Tuple[Observed, str]]) -> str:
    if not mine:
        return ""
    return "; instances of it at the cloud: %s" % ", ".join("%s %s (%s)" % (at, o.instance_id, o.status)
                                                            for o, at in mine)


def _cloud_summary(cloud: Dict[str, Any], tracked, current: Optional[Observed],
                   mine: List[Tuple[Observed, str]], theirs: List[Tuple[Observed, str]]) -> str:
    if not cloud["looked_at"]:
        return "not looked up (no location on record)"
    if cloud["errors"] and len(cloud["errors"]) == len(cloud["looked_at"]):
        return "unknown (%s)" % ", ".join(sorted({e["kind"] for e in cloud["errors"]}))
    parts = []
    if tracked:
        parts.append("%s %s" % (current.status, current.instance_id) if current is not None else "gone")
    parts += ["%s %s" % (o.status, o.instance_id) for o, _at in mine if current is None or o is not current]
    parts += ["%s %s (journal %s)" % (o.status, o.instance_id, o.journal_id) for o, _at in theirs]
    if cloud["errors"]:
        parts.append("unknown at %s" % ", ".join(e["location"] for e in cloud["errors"]))
    return ", ".join(parts) or "nothing"


def format_table(vms: List[Dict[str, Any]]) -> List[str]:
    if not vms:
        return ["no VMs in the journal"]
    header = ("NAME", "JOURNAL", "CLOUD", "SSH", "K3S", "VERDICT")
    rows = [header]
    for vm in vms:
        state = vm["journal"]["state"] + (" (run in progress)" if vm["journal"]["in_progress"] else "")
        rows.append((vm["name"], state, vm["cloud"]["summary"], vm["ssh"]["status"], vm["k3s"]["status"],
                     vm["verdict"].upper() if vm["verdict"] != "ok" else "ok"))
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(header))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    # What needs acting on first, then what could not be checked, then each VM's details.
    lines += ["DISAGREE %s (%s): %s. Fix: %s" % (vm["name"], item["kind"], item["msg"], item["fix"])
              for vm in vms for item in vm["disagreements"]]
    lines += ["UNKNOWN %s: %s" % (vm["name"], item) for vm in vms for item in vm["unknown"]]
    for vm in vms:
        for finding in vm["cloud"]["findings"]:
            lines.append("  %s: %s" % (vm["name"], finding))
        if vm["ssh"]["status"] not in (SKIPPED,):
            lines.append("  %s: ssh %s: %s" % (vm["name"], vm["ssh"]["status"], vm["ssh"]["detail"]))
        if vm["k3s"]["status"] not in (SKIPPED,):
            lines.append("  %s: k3s %s: %s" % (vm["name"], vm["k3s"]["status"], vm["k3s"]["detail"]))
    return lines
