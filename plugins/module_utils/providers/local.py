# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``local`` cloud: each VM is an OpenSSH sshd on a free 127.0.0.1 port.

No image, no credentials, no root needed (as root, sshd needs its privilege
separation directory, which prepare creates). Every instance has its own state
folder ``<root>/<vm name>/<instance id>/`` holding its host key, sshd_config,
authorized_keys (the controller's key), pid file, log and ``instance.json``;
observe finds instances by those folders and live pids, so it sees exactly what
exists even after the controller crashed.
"""

from __future__ import annotations

import errno
import getpass
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from typing import Any, Dict, List, Optional

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    Capabilities, ErrorKind, InstanceSpec, Location, Observed, Offer, Provider, ProviderError,
    ResourceRequest, SshEndpoint, Status,
)

REGION = "local"
INSTANCE_TYPE = "sshd"
# An instance with no pid file yet is Pending for this long, then Failed.
_START_GRACE_S = 10.0

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
Subsystem sftp internal-sftp
"""


def _default_root() -> str:
    from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journal import default_state_dir
    return os.path.join(default_state_dir(), "local")


class LocalProvider(Provider):
    name = "local"

    def __init__(self, options: Optional[Dict[str, Any]] = None, journal_id: Optional[str] = None):
        super().__init__(options, journal_id=journal_id)
        self.root = os.path.abspath(os.path.expanduser(self.options.get("root") or _default_root()))
        self.user = self.options.get("user") or getpass.getuser()

    def capabilities(self) -> Capabilities:
        return Capabilities(kubernetes=False, boot_script=False, spot=False, k3s_access=None,
                            boot_timeout_s=30.0, poll_interval_s=0.5, unsupported=("gpu", "kubernetes", "boot_script"),
                            # The "VM" is this host: the controller's own Python is known to work there.
                            python_interpreter=self.options.get("python_interpreter") or sys.executable)

    # -- helpers ---------------------------------------------------------------------
    def _sshd(self) -> str:
        found = self.options.get("sshd") or shutil.which("sshd") or (
            "/usr/sbin/sshd" if os.path.exists("/usr/sbin/sshd") else None)
        if not found or not os.access(found, os.X_OK):
            raise ProviderError(ErrorKind.INVALID_REQUEST,
                                "the local cloud needs the OpenSSH server binary 'sshd', which is not "
                                "installed; install it (Debian/Ubuntu: apt-get install openssh-server) or "
                                "set the local cloud option sshd to its path")
        return os.path.abspath(found)

    def _vm_dir(self, vm_name: str) -> str:
        return os.path.join(self.root, vm_name)

    def _folder(self, vm_name: str, instance_id: str) -> str:
        if os.sep in instance_id or instance_id.startswith("."):
            raise ProviderError(ErrorKind.INVALID_REQUEST, "instance id %r is not a local instance id" % instance_id)
        return os.path.join(self._vm_dir(vm_name), instance_id)

    @staticmethod
    def _pid(folder: str) -> Optional[int]:
        try:
            with open(os.path.join(folder, "instance.pid")) as handle:
                return int(handle.read().strip())
        except (OSError, ValueError):
            return None

    @staticmethod
    def _alive(pid: Optional[int], folder: str) -> bool:
        """True if ``pid`` is a live (non-zombie) sshd started with this folder's config."""
        if not pid:
            return False
        try:
            with open("/proc/%d/stat" % pid) as handle:
                if handle.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return False
            with open("/proc/%d/cmdline" % pid, "rb") as handle:
                cmdline = handle.read().decode(errors="replace")
        except (OSError, IndexError):
            return False
        return os.path.join(folder, "sshd_config") in cmdline

    @staticmethod
    def _exists(pid: int) -> bool:
        """A live (non-zombie) process with this pid, whatever it runs."""
        try:
            with open("/proc/%d/stat" % pid) as handle:
                return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
        except (OSError, IndexError):
            return False

    @staticmethod
    def _log_tail(folder: str) -> str:
        try:
            with open(os.path.join(folder, "sshd.log")) as handle:
                return " | ".join(line.strip() for line in handle.readlines()[-3:])
        except OSError:
            return "no log"

    @staticmethod
    def _young(folder: str) -> bool:
        try:
            with open(os.path.join(folder, "instance.json")) as handle:
                return time.time() - float(json.load(handle).get("created_at", 0)) < _START_GRACE_S
        except (OSError, ValueError):
            return False

    @staticmethod
    def _free_port() -> int:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", 0))
            return sock.getsockname()[1]

    # -- primitives ------------------------------------------------------------------
    def plan(self, request: ResourceRequest) -> List[Offer]:
        if request.gpu:
            raise ProviderError(ErrorKind.INVALID_REQUEST,
                                "gpu: the local cloud has no GPUs (asked for %s); ask for gpu=none or name a "
                                "cloud that has one" % request.gpu)
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
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ed25519

        instance_id = "local-" + uuid.uuid4().hex[:12]
        folder = self._folder(spec.vm_name, instance_id)
        os.makedirs(folder, mode=0o700)
        host_key = ed25519.Ed25519PrivateKey.generate().private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption())
        port = self._free_port()
        files = {
            "ssh_host_ed25519_key": host_key,
            "authorized_keys": (spec.ssh_public_key.strip() + "\n").encode(),
            "sshd_config": _SSHD_CONFIG.format(vm_name=spec.vm_name, instance_id=instance_id, port=port,
                                               folder=folder, user=self.user).encode(),
            "instance.json": json.dumps({"vm_name": spec.vm_name, "instance_id": instance_id, "port": port,
                                         "user": self.user, "created_at": time.time()}).encode(),
        }
        for name, data in files.items():
            fd = os.open(os.path.join(folder, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
        sshd = self._sshd()
        config = os.path.join(folder, "sshd_config")
        try:
            # sshd's own test mode checks the config and host key before anything runs.
            checked = subprocess.run([sshd, "-t", "-f", config], stdin=subprocess.DEVNULL, capture_output=True,
                                     timeout=30, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            checked = None
            problem = str(exc)
        if checked is None or checked.returncode != 0:
            with open(os.path.join(folder, "deleted"), "w"):
                pass  # nothing runs: mark it so observe does not report it
            if checked is not None:
                problem = checked.stderr.decode(errors="replace").strip() or "exit %d" % checked.returncode
            raise ProviderError(ErrorKind.FAILED, "sshd rejected its configuration: %s" % problem)
        try:
            # Start sshd in the foreground (-D) behind a shell that exits at once: the
            # pid is known before create returns (so a delete right after it can stop
            # that exact process), and sshd is re-parented away from this worker.
            done = subprocess.run(
                ["/bin/sh", "-c", '"$0" -D -f "$1" -E "$2" </dev/null >/dev/null 2>&1 & echo $!',
                 sshd, config, os.path.join(folder, "sshd.log")],
                stdin=subprocess.DEVNULL, capture_output=True, timeout=30, start_new_session=True, check=False)
            pid = int(done.stdout.decode().strip() or 0)
        except (OSError, ValueError, subprocess.TimeoutExpired) as exc:
            raise ProviderError(ErrorKind.TRANSIENT, "starting sshd: %s" % exc)
        if done.returncode != 0 or pid <= 0:
            with open(os.path.join(folder, "deleted"), "w"):
                pass  # nothing runs: mark it so observe does not report it
            raise ProviderError(ErrorKind.FAILED, "could not start sshd: %s"
                                % (done.stderr.decode(errors="replace").strip() or "no pid"))
        with open(os.path.join(folder, "instance.pid"), "w") as handle:
            handle.write("%d\n" % pid)
        return instance_id

    def observe(self, location: Location, vm_name: str) -> List[Observed]:
        vm_dir = self._vm_dir(vm_name)
        try:
            entries = sorted(os.listdir(vm_dir))
        except OSError as exc:
            if exc.errno == errno.ENOENT:
                return []
            raise ProviderError(ErrorKind.TRANSIENT, "reading %s: %s" % (vm_dir, exc))
        found = []
        for instance_id in entries:
            folder = os.path.join(vm_dir, instance_id)
            try:
                with open(os.path.join(folder, "instance.json")) as handle:
                    meta = json.load(handle)
            except (OSError, ValueError):
                continue  # not (yet) an instance folder
            pid = self._pid(folder)
            alive = self._alive(pid, folder)
            deleted = os.path.exists(os.path.join(folder, "deleted"))
            where = Location(self.name, REGION)
            if deleted:
                if alive:
                    found.append(Observed(instance_id, Status.TERMINATING, location=where))
                continue
            if alive:
                endpoint = SshEndpoint("127.0.0.1", int(meta["port"]), meta.get("user") or self.user)
                found.append(Observed(instance_id, Status.RUNNING, endpoint=endpoint, location=where))
            elif time.time() - float(meta.get("created_at", 0)) < _START_GRACE_S and (
                    pid is None or self._exists(pid)):
                # sshd not exec'd yet, or still starting: not Running, not failed either.
                found.append(Observed(instance_id, Status.PENDING, location=where))
            else:
                found.append(Observed(instance_id, Status.FAILED, reason="sshd is not running: %s"
                                      % self._log_tail(folder), location=where))
        return found

    def delete(self, location: Location, vm_name: str, instance_ids: List[str]) -> None:
        for instance_id in instance_ids:
            folder = self._folder(vm_name, instance_id)
            if not os.path.isdir(folder):
                continue  # unknown or already cleaned up: success
            with open(os.path.join(folder, "deleted"), "w"):
                pass
            pid = self._pid(folder)
            if self._alive(pid, folder) or (pid and self._young(folder) and self._exists(pid)):
                try:
                    os.kill(pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
                except OSError as exc:
                    raise ProviderError(ErrorKind.TRANSIENT, "stopping sshd %d: %s" % (pid, exc))

    def cleanup(self, location: Location, vm_name: str) -> None:
        vm_dir = self._vm_dir(vm_name)
        if not os.path.isdir(vm_dir):
            return
        busy = []
        for instance_id in sorted(os.listdir(vm_dir)):
            folder = os.path.join(vm_dir, instance_id)
            if self._alive(self._pid(folder), folder):
                busy.append(instance_id)
                continue
            shutil.rmtree(folder, ignore_errors=True)
        if busy:
            raise ProviderError(ErrorKind.TRANSIENT, "instances still running: %s" % ", ".join(busy))
        try:
            os.rmdir(vm_dir)
        except OSError:
            pass
