# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``local`` cloud: each VM is an OpenSSH sshd on a free 127.0.0.1 port.

No image, no credentials, no root needed (as root, sshd needs its privilege
separation directory, which prepare creates). Every instance has its own state
folder ``<root>/<vm name>/<instance id>/`` holding ``instance.json`` (its record,
with the journal id of the controller that made it), its host key, sshd_config,
authorized_keys (the controller's key), the ``spawned`` marker, the pid and start
time of the process create spawned, and the log.

observe finds instances by those folders, and their processes by the pid file of
the process create spawned or, when it names none that lives, by a scan of /proc
for the folder's sshd_config path. So it tells what exists at every point of an
interrupted create, a crash before the pid reached its file included: a live
process is Running; no process is Failed at once, "never started" before the
``spawned`` marker and "started and died" after it. Nothing is ever Pending, so
nothing waits on a grace period.
"""

from __future__ import annotations

import errno
import getpass
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from typing import Any, Dict, List, Optional, Tuple

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    ANY_REGION, Capabilities, ErrorKind, InstanceSpec, Location, Observed, Offer, Owned, PowerOffBilling, ProviderError,
    ResourceKind, ResourceRequest, SshEndpoint, Status, tag_changes,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.cloud_options.local import OPTIONS
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.common import check_regions
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.options import TypedOptionsProvider

REGION = "local"
INSTANCE_TYPE = "sshd"
RECORD = "instance.json"
# Written just before sshd is launched: without a live process, its presence means
# "started and died", its absence "create was interrupted before starting it".
SPAWNED = "spawned"
# Written by delete once the instance's processes were sent SIGTERM (and by create when
# sshd could not start): observe then reports the folder only while a process still lives.
DELETED = "deleted"
NEVER_STARTED = "sshd never started (create was interrupted)"

_SSHD_CONFIG = """\
# Written by gpuprov.cloud's local cloud for VM {vm_name} ({instance_id}).
Port {port}
ListenAddress 127.0.0.1
HostKey {folder}/ssh_host_ed25519_key
PidFile {folder}/sshd.pid
AuthorizedKeysFile {folder}/authorized_keys
AllowUsers {user}
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
UsePAM no
StrictModes no
PrintMotd no
# The VM is this host's own account, but it must act like a fresh VM's: bash, run by sshd for a command,
# would read the account's ~/.bashrc (an interactive setup, such as pyenv's, that costs 0.1 s of CPU a login
# and may print), because it is its first shell level; SHLVL=1 makes it the second, which reads no rc file.
SetEnv SHLVL=1
Subsystem sftp internal-sftp
"""


def _default_root() -> str:
    from ansible_collections.gpuprov.cloud.plugins.module_utils.state_dir import default_state_dir
    return os.path.join(default_state_dir(), "local")


def _write_new(path: str, data: bytes) -> None:
    """Write a new private file (never overwrites: each instance folder is written once)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)


def _touch(path: str) -> None:
    with open(path, "w"):
        pass


def _sshd_cmdline(pid: str) -> Optional[str]:
    """The command line of process ``pid`` when it is live (not a zombie), names an sshd_config and is not
    sshd's config test (``-t``: it checks a config, it does not serve it); None otherwise, or when it is gone
    or not ours to read.

    The command line is read first and the state only for a match: a scan reads one file of nearly every
    process, not two (a fleet's controller runs hundreds, and a launch observes many times)."""
    try:
        with open("/proc/%s/cmdline" % pid, "rb") as handle:
            raw = handle.read()
    except OSError:
        return None  # gone meanwhile, or not ours to read
    if b"sshd_config" not in raw:
        return None
    found = _stat_of(int(pid))
    if found is None or found[0] == b"Z":
        return None
    argv = raw.decode(errors="replace").split("\0")
    return None if "-t" in argv else " ".join(argv)


def _sshd_processes() -> List[Tuple[int, str]]:
    """(pid, command line) of every live (non-zombie) process naming an sshd_config, but sshd's config tests."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            cmdline = _sshd_cmdline(entry)
            if cmdline is not None:
                found.append((int(entry), cmdline))
    return found


def _boot_id() -> str:
    with open("/proc/sys/kernel/random/boot_id") as handle:
        return handle.read().strip()


def _stat_of(pid: int) -> Optional[Tuple[bytes, int]]:
    """(state letter, start time in clock ticks since boot) of process ``pid``; None when it is gone."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
        return fields[0], int(fields[19])
    except (OSError, IndexError, ValueError):
        return None


def _spawned(folder: str) -> Optional[int]:
    """The process create spawned for this instance, when it still lives (not a zombie); None otherwise.

    It is known by its pid (``instance.pid``) and its start time (``instance.start``: the boot and the clock
    tick it started at), so a later process that reuses the pid is never taken for it. Its command line is
    not looked at: for a moment of its exec of sshd the kernel shows none, and no scan can tell it from
    another process then."""
    try:
        with open(os.path.join(folder, "instance.pid"), "rb") as handle:
            pid = int(handle.read().strip() or 0)
        with open(os.path.join(folder, "instance.start")) as handle:
            boot_id, ticks = handle.read().split()
        same_boot = boot_id == _boot_id()
    except (OSError, ValueError):
        return None   # no start recorded (a create interrupted before it, or an older version): the scan decides
    found = _stat_of(pid) if pid > 0 and same_boot else None
    if found is None or found[0] in (b"Z", b"X") or str(found[1]) != ticks:
        return None
    return pid


class _ProcessScan:
    """One scan of /proc (``_sshd_processes``), made the first time it is asked for and not before: where
    every instance's pid file answers, none is made."""

    def __init__(self) -> None:
        self._found: Optional[List[Tuple[int, str]]] = None

    def __call__(self) -> List[Tuple[int, str]]:
        if self._found is None:
            self._found = _sshd_processes()
        return self._found


class LocalProvider(TypedOptionsProvider):
    name = "local"
    option_spec = OPTIONS

    def __init__(self, options: Optional[Dict[str, Any]] = None, journal_id: Optional[str] = None):
        super().__init__(options, journal_id=journal_id)
        self.root = os.path.abspath(os.path.expanduser(self.options.get("root") or _default_root()))
        self.user = self.options.get("user") or getpass.getuser()
        # The sshd found for the option's value (None: the PATH's): plan, prepare and create each need it.
        self._sshd_found: Optional[Tuple[Optional[str], str]] = None

    def capabilities(self) -> Capabilities:
        return Capabilities(kubernetes=False, boot_script=False, spot=False, k3s_access=None,
                            boot_timeout_s=30.0, poll_interval_s=0.5,
                            # sshd listens a few milliseconds after create: a login refused that early is
                            # tried again as soon, not after the 0.25 s a cloud VM's sshd is given.
                            readiness_poll_first_s=0.02,
                            # The "VM" is this host: the controller's own Python is known to work there.
                            python_interpreter=self.options.get("python_interpreter") or sys.executable,
                            # Nothing bills: a local VM is an sshd on the controller (which the watchdog, never
                            # installed here, would power off).
                            poweroff_billing=PowerOffBilling.FREE,
                            poweroff_source="the local cloud runs on the controller itself: nothing bills (docs/clouds/local.md)")

    # -- helpers ---------------------------------------------------------------------
    def _sshd(self) -> str:
        wanted = self.options.get("sshd")
        if self._sshd_found is None or self._sshd_found[0] != wanted:
            found = wanted or shutil.which("sshd") or (
                "/usr/sbin/sshd" if os.path.exists("/usr/sbin/sshd") else None)
            if not found or not os.access(found, os.X_OK):
                raise ProviderError(ErrorKind.INVALID_REQUEST,
                                    "the local cloud needs the OpenSSH server binary 'sshd', which is not "
                                    "installed; install it (Debian/Ubuntu: apt-get install openssh-server) or "
                                    "set the local cloud option sshd to its path")
            self._sshd_found = (wanted, os.path.abspath(found))
        return self._sshd_found[1]

    def _vm_dir(self, vm_name: str) -> str:
        return os.path.join(self.root, vm_name)

    def _folder(self, vm_name: str, instance_id: str) -> str:
        if os.sep in instance_id or instance_id.startswith("."):
            raise ProviderError(ErrorKind.INVALID_REQUEST, "instance id %r is not a local instance id" % instance_id)
        return os.path.join(self._vm_dir(vm_name), instance_id)

    @staticmethod
    def _record(folder: str) -> Optional[Dict[str, Any]]:
        """The instance record, or None for a folder that is not (yet) an instance."""
        try:
            with open(os.path.join(folder, RECORD)) as handle:
                record = json.load(handle)
        except (OSError, ValueError):
            return None
        return record if isinstance(record, dict) else None

    @staticmethod
    def _names_config(cmdline: str, folder: str) -> bool:
        config = os.path.join(folder, "sshd_config")
        return re.search(r"(?:^|\s)%s(?:\s|$)" % re.escape(config), cmdline) is not None

    @staticmethod
    def _processes(folder: str, scan: Optional[List[Tuple[int, str]]] = None) -> List[int]:
        """The live processes serving this instance, found in /proc by its sshd_config path.

        That path is in the argv of the shell that launches sshd from the moment it is
        forked, and in sshd's own title ("sshd: /usr/sbin/sshd -D -f <path> ..."), so a
        process is found even when create died before its pid reached the pid file.
        """
        return sorted(pid for pid, cmdline in (_sshd_processes() if scan is None else scan)
                      if LocalProvider._names_config(cmdline, folder))

    @staticmethod
    def _log_tail(folder: str) -> str:
        try:
            with open(os.path.join(folder, "sshd.log")) as handle:
                return " | ".join(line.strip() for line in handle.readlines()[-3:]) or "empty log"
        except OSError:
            return "no log"

    @staticmethod
    def _free_port() -> int:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", 0))
            return sock.getsockname()[1]

    # -- the steps of create, in order; after a crash between any two, observe reads
    # -- the folder truthfully (see the module docstring) ----------------------------
    def _write_record(self, folder: str, spec: InstanceSpec, instance_id: str, port: int) -> None:
        """The folder and its record: from here on observe reports the instance."""
        os.makedirs(folder, mode=0o700)
        record = {"vm_name": spec.vm_name, "instance_id": instance_id, "port": port, "user": self.user,
                  "created_at": time.time(), "journal_id": self.journal_id, "tags": self.resource_tags(spec)}
        partial = os.path.join(folder, RECORD + ".new")
        _write_new(partial, json.dumps(record).encode())
        os.rename(partial, os.path.join(folder, RECORD))  # whole or absent, never half written

    can_retag = True

    def retag(self, location: Location, vm_name: str, instance_id: str, tags: Dict[str, str], purge: bool,
              check: bool = False) -> Dict[str, Any]:
        folder = self._folder(vm_name, instance_id)
        record = self._record(folder)
        if record is None:
            raise ProviderError(ErrorKind.INVALID_REQUEST, "tags: %s has no instance %s" % (vm_name, instance_id))
        current = dict(record.get("tags") or {})
        changes = tag_changes(current, tags, purge, keep=lambda name: name.startswith("gpuprov-"))
        if check or not (changes["set"] or changes["removed"]):
            return changes
        current.update(changes["set"])
        for name in changes["removed"]:
            current.pop(name)
        partial = os.path.join(folder, RECORD + ".new")
        if os.path.exists(partial):
            os.unlink(partial)   # a retag that died before its rename
        _write_new(partial, json.dumps(dict(record, tags=current)).encode())
        os.rename(partial, os.path.join(folder, RECORD))
        return changes

    def _write_files(self, folder: str, spec: InstanceSpec, instance_id: str, port: int) -> None:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ed25519

        host_key = ed25519.Ed25519PrivateKey.generate().private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption())
        _write_new(os.path.join(folder, "ssh_host_ed25519_key"), host_key)
        _write_new(os.path.join(folder, "authorized_keys"), (spec.ssh_public_key.strip() + "\n").encode())
        _write_new(os.path.join(folder, "sshd_config"), _SSHD_CONFIG.format(
            vm_name=spec.vm_name, instance_id=instance_id, port=port, folder=folder, user=self.user).encode())

    def _check_config(self, folder: str) -> None:
        """sshd's own test mode checks the config and host key before anything runs.

        Neither command here has a timeout: both only read local files and return at once,
        and Python's timed wait for a child polls with sleeps (waiting belongs to the core).
        """
        try:
            checked = subprocess.run([self._sshd(), "-t", "-f", os.path.join(folder, "sshd_config")],
                                     stdin=subprocess.DEVNULL, capture_output=True, check=False)
        except OSError as exc:
            checked = None
            problem = str(exc)
        if checked is None or checked.returncode != 0:
            _touch(os.path.join(folder, DELETED))  # nothing runs: mark it so observe does not report it
            if checked is not None:
                problem = checked.stderr.decode(errors="replace").strip() or "exit %d" % checked.returncode
            raise ProviderError(ErrorKind.FAILED, "sshd rejected its configuration: %s" % problem)

    def _mark_spawned(self, folder: str) -> None:
        _touch(os.path.join(folder, SPAWNED))

    def _spawn(self, folder: str) -> int:
        """Start sshd in the foreground (-D) behind a shell that exits at once: the pid is
        known before create returns, and sshd is re-parented away from this worker (a new
        session: a signal to the worker's group does not reach it)."""
        try:
            done = subprocess.run(
                ["/bin/sh", "-c", '"$0" -D -f "$1" -E "$2" </dev/null >/dev/null 2>&1 & echo $!',
                 self._sshd(), os.path.join(folder, "sshd_config"), os.path.join(folder, "sshd.log")],
                stdin=subprocess.DEVNULL, capture_output=True, start_new_session=True, check=False)
            pid = int(done.stdout.decode().strip() or 0)
        except (OSError, ValueError) as exc:
            # sshd may or may not run: observe finds out from /proc.
            raise ProviderError(ErrorKind.TRANSIENT, "starting sshd: %s" % exc) from exc
        if done.returncode != 0 or pid <= 0:
            _touch(os.path.join(folder, DELETED))  # nothing runs: mark it so observe does not report it
            raise ProviderError(ErrorKind.FAILED, "could not start sshd: %s"
                                % (done.stderr.decode(errors="replace").strip() or "no pid"))
        return pid

    def _write_pid(self, folder: str, pid: int) -> None:
        """The process create spawned, by pid and start time, for observe and delete (``_spawned``); a scan of
        /proc finds the others, and this one too where the files were never written."""
        with open(os.path.join(folder, "instance.pid"), "w") as handle:
            handle.write("%d\n" % pid)
        found = _stat_of(pid)
        if found is not None:   # else it is gone already: nothing to know it by
            with open(os.path.join(folder, "instance.start"), "w") as handle:
                handle.write("%s %d\n" % (_boot_id(), found[1]))

    # -- primitives ------------------------------------------------------------------
    def plan(self, request: ResourceRequest) -> List[Offer]:
        if request.gpu:
            raise ProviderError(ErrorKind.INVALID_REQUEST,
                                "gpu: the local cloud has no GPUs (asked for %s); ask for gpu=none or name a "
                                "cloud that has one" % request.gpu)
        check_regions("the local cloud", request.regions, [REGION])   # its one region
        self._sshd()
        return [Offer(cloud=self.name, region=REGION, instance_type=INSTANCE_TYPE, gpu=None, gpu_count=0,
                      price_per_hour=0.0, detail={"root": self.root})]

    def prepare(self, offer: Offer, spec: InstanceSpec) -> Dict[str, Any]:
        sshd = self._sshd()
        for folder in (self.root, self._vm_dir(spec.vm_name)):
            os.makedirs(folder, mode=0o700, exist_ok=True)
        if os.geteuid() == 0 and not os.path.isdir("/run/sshd"):
            # sshd running as root insists on its privilege separation directory.
            os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
        return {"sshd": sshd, "user": self.user}

    def create(self, offer: Offer, prepared: Dict[str, Any], spec: InstanceSpec) -> str:
        self._sshd()
        instance_id = "local-" + uuid.uuid4().hex[:12]
        folder = self._folder(spec.vm_name, instance_id)
        port = self._free_port()
        self._write_record(folder, spec, instance_id, port)
        self._write_files(folder, spec, instance_id, port)
        self._check_config(folder)
        self._mark_spawned(folder)
        pid = self._spawn(folder)
        self._write_pid(folder, pid)
        return instance_id

    @classmethod
    def _serving(cls, folder: str, scan: _ProcessScan) -> bool:
        """Whether a live process serves this instance.

        The process create spawned (``_spawned``) is the usual one; next, the one sshd's own pid file names,
        when it names this folder's sshd_config. Otherwise the scan decides: it also finds a process whose pid
        reached no file (a create interrupted between its spawn and the write)."""
        if _spawned(folder) is not None:
            return True
        try:
            with open(os.path.join(folder, "sshd.pid"), "rb") as handle:
                pid = int(handle.read().strip() or 0)
        except (OSError, ValueError):
            pid = 0
        cmdline = _sshd_cmdline(str(pid)) if pid > 0 else None
        if cmdline is not None and cls._names_config(cmdline, folder):
            return True
        return bool(cls._processes(folder, scan()))

    def _observed(self, folder: str, record: Dict[str, Any], scan: _ProcessScan) -> Optional[Observed]:
        """What observe says of one instance folder (None: deleted and no process left)."""
        instance_id = os.path.basename(folder)
        where = Location(self.name, REGION)
        live = self._serving(folder, scan)
        journal_id = record.get("journal_id") or None
        if os.path.exists(os.path.join(folder, DELETED)):
            return Observed(instance_id, Status.TERMINATING, location=where, journal_id=journal_id) if live else None
        if live:
            endpoint = SshEndpoint("127.0.0.1", int(record["port"]), record.get("user") or self.user)
            return Observed(instance_id, Status.RUNNING, endpoint=endpoint, location=where, journal_id=journal_id)
        if any(os.path.exists(os.path.join(folder, name)) for name in (SPAWNED, "instance.pid", "sshd.log")):
            return Observed(instance_id, Status.FAILED, reason="sshd is not running: %s" % self._log_tail(folder),
                            location=where, journal_id=journal_id)
        return Observed(instance_id, Status.FAILED, reason=NEVER_STARTED, location=where, journal_id=journal_id)

    def observe(self, location: Location, vm_name: str) -> List[Observed]:
        vm_dir = self._vm_dir(vm_name)
        try:
            entries = sorted(os.listdir(vm_dir))
        except OSError as exc:
            if exc.errno == errno.ENOENT:
                return []
            raise ProviderError(ErrorKind.TRANSIENT, "reading %s: %s" % (vm_dir, exc)) from exc
        scan = _ProcessScan()
        found = []
        for instance_id in entries:
            folder = os.path.join(vm_dir, instance_id)
            record = self._record(folder)
            if record is None:
                continue  # not (yet) an instance folder: create died before its record
            seen = self._observed(folder, record, scan)
            if seen is not None:
                found.append(seen)
        return found

    def delete(self, location: Location, vm_name: str, instance_ids: List[str]) -> None:
        for instance_id in instance_ids:
            folder = self._folder(vm_name, instance_id)
            if not os.path.isdir(folder):
                continue  # unknown or already cleaned up: success
            # Two scans: a launching shell signalled in the first may have forked sshd just
            # before; the second sees that child (a shell with a pending signal forks no more).
            # The process create spawned is signalled too, even while its exec hides its command line.
            for _scan in range(2):
                spawned = _spawned(folder)
                for pid in sorted(set(self._processes(folder)) | ({spawned} if spawned else set())):
                    try:
                        os.kill(pid, signal.SIGTERM)
                    except ProcessLookupError:
                        pass
                    except OSError as exc:
                        raise ProviderError(ErrorKind.TRANSIENT, "stopping sshd %d: %s" % (pid, exc)) from exc
            # Marked only once signalled: an interrupted delete leaves a Running (or Failed)
            # instance that the next delete stops, never a "Terminating" one nobody stops.
            _touch(os.path.join(folder, DELETED))

    def cleanup(self, location: Location, vm_name: str) -> None:
        vm_dir = self._vm_dir(vm_name)
        if not os.path.isdir(vm_dir):
            return
        scan = _ProcessScan()
        busy = []
        for instance_id in sorted(os.listdir(vm_dir)):
            folder = os.path.join(vm_dir, instance_id)
            record = self._record(folder) or {}
            if record.get("journal_id") and record["journal_id"] != self.journal_id:
                continue  # another controller's instance: never ours to remove
            if self._serving(folder, scan):
                busy.append(instance_id)
                continue
            shutil.rmtree(folder, ignore_errors=True)
        if busy:
            raise ProviderError(ErrorKind.TRANSIENT, "instances still running: %s" % ", ".join(busy))
        try:
            os.rmdir(vm_dir)
        except OSError:
            pass

    def sweep_locations(self) -> List[Location]:
        return [Location(self.name, REGION)]

    def _instance_folders(self) -> List[str]:
        """Every instance folder under the root (``<root>/<vm name>/<instance id>``): one
        walk of the tree, the local cloud's one listing."""
        try:
            names = sorted(os.listdir(self.root))
        except OSError as exc:
            if exc.errno == errno.ENOENT:
                return []
            raise ProviderError(ErrorKind.TRANSIENT, "reading %s: %s" % (self.root, exc)) from exc
        folders = []
        for vm_name in names:
            vm_dir = os.path.join(self.root, vm_name)
            if os.path.isdir(vm_dir):
                try:
                    folders.extend(os.path.join(vm_dir, entry) for entry in sorted(os.listdir(vm_dir)))
                except OSError as exc:
                    raise ProviderError(ErrorKind.TRANSIENT, "reading %s: %s" % (vm_dir, exc)) from exc
        return folders

    def list_owned(self, location: Location) -> List[Owned]:
        """Every instance folder under the root that holds a record: instances as observe
        reports them (price 0: the local cloud is free), and the folders of deleted instances
        whose processes are gone (kind ``other``: what cleanup removes). Read-only."""
        if location.region not in (REGION, ANY_REGION):
            return []
        where = Location(self.name, REGION)
        scan = _ProcessScan()
        found = []
        for folder in self._instance_folders():
            record = self._record(folder)
            if record is None:
                continue  # create died before its record: nothing runs, nothing bills
            vm_name = record.get("vm_name") or os.path.basename(os.path.dirname(folder))
            journal_id = record.get("journal_id") or None
            seen = self._observed(folder, record, scan)
            if seen is None:
                found.append(Owned(ResourceKind.OTHER, os.path.basename(folder), where, vm_name=vm_name,
                                   journal_id=journal_id, name="instance folder %s" % folder))
                continue
            found.append(Owned(ResourceKind.INSTANCE, seen.instance_id, where, vm_name=vm_name,
                               journal_id=journal_id, status=seen.status, price_per_hour=0.0,
                               name="sshd on 127.0.0.1:%s" % record.get("port")))
        return found

    def diagnose(self, location: Location, vm_name: str) -> Dict[str, Any]:
        """observe plus each instance's sshd process states, listening port, markers and log tail."""
        from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.local.diagnose import diagnose
        return diagnose(self, location, vm_name)
