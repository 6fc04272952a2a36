# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller-side SSH: the controller key, the collection's own known_hosts, the
ssh config file users Include once, the connection variables that reach a VM, and
the login check of the Connecting state with the errors it raises (SshNotReady,
HostKeyMismatch), which the launch machine handles.

Host keys are pinned per instance: each instance gets a HostKeyAlias, its key is
recorded on first contact and every later contact (ours, ``ssh <name>`` and
Ansible's) is checked against it.

The journal is the truth: the pinned host key and the fingerprint of the controller key
are journalled with the VM, and known_hosts and the ssh config are generated from it
(``ControllerFiles.write_from_journal``) before they are used. A controller with an empty
state directory (a new AWX job) can so reach, check and tear down every VM in the journal.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import importlib.util
import logging
import os
import re
import socket
import tempfile
import threading
from typing import Any, Callable, Dict, Iterable, Optional, Tuple

from ansible_collections.gpuprov.cloud.plugins.module_utils.private_files import (
    PrivateFileError, locked, make_private_dirs, write_private,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.requirements import missing_package

# paramiko takes 0.1-0.2 s to import: the first SSH check imports it, not what only reads or writes the ssh
# files (the journal inventory). Without it, the action reports it; sanity's import test runs without it.
HAS_PARAMIKO = importlib.util.find_spec("paramiko") is not None


def _paramiko():
    import paramiko  # pylint: disable=import-outside-toplevel
    return paramiko


def __getattr__(name: str) -> Any:
    """``ssh.paramiko`` (None without it), imported when first asked for."""
    if name == "paramiko":
        return _paramiko() if HAS_PARAMIKO else None
    raise AttributeError("module %r has no attribute %r" % (__name__, name))


# The check's transports log here, not to paramiko's own logger. While a VM boots, its port often accepts
# and drops the connection before sshd answers (docker-proxy does); paramiko's transport thread then logs
# the error with a traceback, which, with no handler configured, Python prints on stderr, and Ansible turns
# stray stderr into a warning. The reason reaches the user through SshNotReady, so these records are
# dropped here, without touching how paramiko logs for anyone else (Ansible's paramiko connection).
SSH_CHECK_LOG_CHANNEL = "gpuprov.cloud.ssh_check"
# What a provision's login runs to prove the VM usable; its output is the smoke line provision shows
# (run in that verified session, so the play needs no second login of its own).
SMOKE_COMMAND = "uname -a"
# The first line of a VM's block in the ssh config (``_markers``), its name in group 1.
_BLOCK_BEGIN = re.compile(r"# BEGIN gpuprov ([^\n]*)\n")
_check_log = logging.getLogger(SSH_CHECK_LOG_CHANNEL)
_check_log.addHandler(logging.NullHandler())
_check_log.propagate = False


class SshNotReady(Exception):
    """The VM does not accept our SSH login yet (refused, timeout, key not there yet)."""


class HostKeyMismatch(Exception):
    """The VM presented a host key other than the one recorded on first contact."""


def ensure_controller_key(path: str) -> str:
    """Create an ed25519 key pair at ``path`` (0600) unless one exists; return the public key line."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519

    with locked(path):
        if not os.path.exists(path):
            key = ed25519.Ed25519PrivateKey.generate()
            private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                        serialization.NoEncryption())
            public = key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                                   serialization.PublicFormat.OpenSSH)
            write_private(path, private)
            write_private(path + ".pub", public + b" gpuprov-controller\n")
            os.chmod(path + ".pub", 0o644)
    return public_key_of(path)


# Where a run's SSH private key comes from, first set wins; the last is the state directory's own key.
KEY_SOURCES = ("ssh_key", "GPUPROV_SSH_KEY_FILE", "ansible_ssh_private_key_file")


def key_source(ssh_key: Optional[str], credential_key: Optional[str], state_dir: str) -> Tuple[Optional[str], str]:
    """(where the key was named, its path): the ``ssh_key`` option, else $GPUPROV_SSH_KEY_FILE, else
    the task's ``ansible_ssh_private_key_file`` (AWX's Machine credential), else (None, the state
    directory's ``id_ed25519``). The one order of every run: vm, health and the journal inventory."""
    for source, value in zip(KEY_SOURCES, (ssh_key, os.environ.get("GPUPROV_SSH_KEY_FILE"), credential_key), strict=True):
        if value:
            return source, os.path.abspath(os.path.expanduser(value))
    return None, os.path.join(state_dir, "id_ed25519")


def public_key_of(path: str) -> str:
    """The OpenSSH public key line for the private key at ``path``."""
    if os.path.exists(path + ".pub"):
        with open(path + ".pub") as handle:
            return handle.read().strip()
    from cryptography.hazmat.primitives import serialization
    with open(path, "rb") as handle:
        key = serialization.load_ssh_private_key(handle.read(), password=None)
    return key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                         serialization.PublicFormat.OpenSSH).decode()


def public_key_fingerprint(public_key: str) -> Optional[str]:
    """``SHA256:...`` of an OpenSSH public key line, as ``ssh-keygen -l`` prints it; None when
    the line holds no decodable key."""
    parts = (public_key or "").split()
    try:
        return fingerprint(parts[0], parts[1]).split(" ", 1)[1] if len(parts) >= 2 else None
    except (binascii.Error, ValueError):
        return None


def fingerprint(key_type: str, key_b64: str) -> str:
    digest = hashlib.sha256(base64.b64decode(key_b64)).digest()
    return "%s SHA256:%s" % (key_type, base64.b64encode(digest).decode().rstrip("="))


class ControllerFiles:
    """``<state dir>/known_hosts`` and ``<state dir>/ssh_config`` (both 0600)."""

    def __init__(self, state_dir: str, key_path: str):
        self.state_dir = state_dir
        self.key_path = key_path
        self.known_hosts = os.path.join(state_dir, "known_hosts")
        self.ssh_config = os.path.join(state_dir, "ssh_config")

    def ensure_writable(self) -> None:
        """Create the state directory (0700 at every level it adds) and prove a file can be
        written in it, so a read-only one is a PrivateFileError naming it before any cloud call,
        not a failure once a VM exists."""
        make_private_dirs(self.state_dir)
        try:
            fd, probe = tempfile.mkstemp(dir=self.state_dir, prefix=".gpuprov-probe-")
        except OSError as exc:
            raise PrivateFileError("write", os.path.join(self.state_dir, ".gpuprov-probe"), exc) from exc
        os.close(fd)
        os.unlink(probe)

    # -- known_hosts -----------------------------------------------------------------
    def _read_known(self) -> Dict[str, tuple]:
        entries: Dict[str, tuple] = {}
        if os.path.exists(self.known_hosts):
            with open(self.known_hosts) as handle:
                for line in handle:
                    parts = line.split()
                    if len(parts) >= 3 and not line.startswith("#"):
                        entries[parts[0]] = (parts[1], parts[2])
        return entries

    def _write_known(self, entries: Dict[str, tuple]) -> None:
        text = "".join("%s %s %s\n" % (alias, kt, kb) for alias, (kt, kb) in sorted(entries.items()))
        write_private(self.known_hosts, text.encode())

    def known_key(self, alias: str) -> Optional[tuple]:
        return self._read_known().get(alias)

    def pin(self, alias: str, key_type: str, key_b64: str) -> None:
        """Record the key seen on first contact, or raise HostKeyMismatch if another is pinned."""
        with locked(self.known_hosts):
            entries = self._read_known()
            if alias in entries and entries[alias] != (key_type, key_b64):
                raise HostKeyMismatch("pinned %s, presented %s" % (fingerprint(*entries[alias]),
                                                                   fingerprint(key_type, key_b64)))
            if alias not in entries:
                entries[alias] = (key_type, key_b64)
                self._write_known(entries)

    def write_from_journal(self, read_rows: Callable[[], Iterable[Dict[str, Any]]]) -> None:
        """Generate known_hosts and the ssh config blocks from the journal's ``vms`` rows: every
        running VM with a journalled host key gets it pinned (the journal wins over what the file
        says) and its ``Host`` block written. Entries for VMs the journal has no key for are kept:
        a VM of this controller may be between its first contact and the journal's Ready.

        ``read_rows`` is called with the ssh config locked: a ``down`` deletes its row before it
        removes its block (under the same lock), so a concurrent run never writes back the block
        or key of a VM torn down meanwhile from a snapshot read before."""
        with locked(self.ssh_config):
            journalled, blocks = {}, {}
            for row in read_rows():
                detail = row.get("detail") if isinstance(row.get("detail"), dict) else {}
                host_key = detail.get("host_key")
                if row.get("status") != "running" or not host_key or not row.get("host_key_alias"):
                    continue
                journalled[row["host_key_alias"]] = (host_key["type"], host_key["key"])
                blocks[row["name"]] = self._block({"name": row["name"], "host_key_alias": row["host_key_alias"],
                                                   "ssh": {"host": row["ssh_host"], "port": int(row["ssh_port"]),
                                                           "user": row.get("ssh_user") or "root"}})
            text = self._read_config()
            updated = self._with_blocks(text, blocks)
            if updated != text or not os.path.exists(self.ssh_config):
                write_private(self.ssh_config, updated.encode())
            with locked(self.known_hosts):
                entries = self._read_known()
                merged = dict(entries, **journalled)
                if merged != entries or not os.path.exists(self.known_hosts):
                    self._write_known(merged)

    # -- ssh_config ------------------------------------------------------------------
    @staticmethod
    def _markers(name: str):
        return "# BEGIN gpuprov %s\n" % name, "# END gpuprov %s\n" % name

    def _read_config(self) -> str:
        if not os.path.exists(self.ssh_config):
            return ""
        with open(self.ssh_config) as handle:
            return handle.read()

    def _with_block(self, text: str, name: str, block: str) -> str:
        """``text`` with the VM's block replaced by ``block`` (removed when empty)."""
        begin, end = self._markers(name)
        if begin in text and end in text:
            head, rest = text.split(begin, 1)
            text = head + rest.split(end, 1)[1]
        return text + begin + block + end if block else text

    def _with_blocks(self, text: str, blocks: Dict[str, str]) -> str:
        """What ``_with_block`` for each of ``blocks`` ({name: block}) in name order gives, in one
        pass over ``text``: per VM, the file is not searched and copied again (quadratic in the
        number of VMs, tens of seconds for thousands)."""
        kept, start, removed = [], 0, set()
        for found in _BLOCK_BEGIN.finditer(text):
            name = found.group(1)
            if name not in blocks or name in removed or found.start() < start:
                continue
            end = self._markers(name)[1]
            stop = text.find(end, found.end())
            if stop >= 0:
                # As _with_block: the first block of the name goes, from its BEGIN to the END after it.
                kept.append(text[start:found.start()])
                start = stop + len(end)
                removed.add(name)
        kept.append(text[start:])
        for name, block in sorted(blocks.items()):
            if block:
                begin, end = self._markers(name)
                kept.append(begin + block + end)
        return "".join(kept)

    def _replace_block(self, name: str, block: str) -> None:
        with locked(self.ssh_config):
            write_private(self.ssh_config, self._with_block(self._read_config(), name, block).encode())

    def connection_options(self, alias: str) -> str:
        return "-o UserKnownHostsFile=%s -o HostKeyAlias=%s -o StrictHostKeyChecking=yes -o IdentitiesOnly=yes" % (
            self.known_hosts, alias)

    def _block(self, vm: Dict[str, Any]) -> str:
        ssh = vm["ssh"]
        return ("Host %s\n    HostName %s\n    Port %d\n    User %s\n    IdentityFile %s\n"
                "    IdentitiesOnly yes\n    UserKnownHostsFile %s\n    HostKeyAlias %s\n"
                "    StrictHostKeyChecking yes\n" % (vm["name"], ssh["host"], ssh["port"], ssh["user"],
                                                     self.key_path, self.known_hosts, vm["host_key_alias"]))

    def write_vm(self, vm: Dict[str, Any]) -> None:
        self._replace_block(vm["name"], self._block(vm))

    def remove_vm(self, name: str) -> None:
        """Drop the VM's ssh config block and every host key pinned for its instances."""
        self._replace_block(name, "")
        pattern = re.compile(r"^gpuprov-%s-[0-9a-f]{12}$" % re.escape(name))
        with locked(self.known_hosts):
            entries = self._read_known()
            kept = {alias: key for alias, key in entries.items() if not pattern.match(alias)}
            if kept != entries:
                self._write_known(kept)


def connection_vars(vm: Dict[str, Any], files: ControllerFiles) -> Dict[str, Any]:
    """Inventory connection variables that reach the VM with its pinned host key: what the vm
    task returns after a launch and what the journal inventory gives each host."""
    found = {"ansible_host": vm["ssh"]["host"], "ansible_port": vm["ssh"]["port"],
             "ansible_user": vm["ssh"]["user"], "ansible_ssh_private_key_file": files.key_path,
             "ansible_ssh_common_args": files.connection_options(vm["host_key_alias"]),
             "ansible_python_interpreter": "auto_silent"}
    if vm.get("python_interpreter"):
        found["ansible_python_interpreter"] = vm["python_interpreter"]
    return found


class SshChecker:
    """The Connecting state's check: real login with the controller key, host key pinned."""

    def __init__(self, files: ControllerFiles, timeout: float = 10.0, command: str = "true"):
        if not HAS_PARAMIKO:
            raise RuntimeError("the SSH check needs paramiko. " + missing_package("paramiko"))
        self.files = files
        self.timeout = timeout
        self.command = command
        # host key alias -> what ``command`` printed at its last login that passed
        self.outputs: Dict[str, str] = {}
        self._pkey = None
        # (host, port, user, alias) -> the login begun ahead by ``begin``: [thread, fingerprint, exception]
        self._ahead: Dict[Tuple[str, int, str, str], list] = {}

    def begin(self, endpoint, alias: str) -> None:
        """Start the login to ``endpoint`` in the background, for a later call with the same endpoint
        and alias to take its outcome instead of logging in again.

        A re-run begins the login to the journalled VM while it asks the cloud whether that VM still
        runs: the two waits overlap. The login changes nothing but the pinned host key of an alias
        that had none, exactly as the later call would; an outcome nobody takes is dropped."""
        key = (endpoint.host, int(endpoint.port), endpoint.user, alias)
        if key in self._ahead:
            return
        slot: list = [None, None, None]

        def login():
            try:
                slot[1] = self._login(endpoint, alias)
            except Exception as exc:  # pylint: disable=broad-except
                slot[2] = exc   # raised by the call that takes it

        slot[0] = threading.Thread(target=login, name="gpuprov-ssh-check-%s" % alias, daemon=True)
        self._ahead[key] = slot
        slot[0].start()

    def _key(self):
        if self._pkey is None:
            self._pkey = _paramiko().PKey.from_path(self.files.key_path)
        return self._pkey

    def __call__(self, endpoint, alias: str) -> str:
        ahead = self._ahead.pop((endpoint.host, int(endpoint.port), endpoint.user, alias), None)
        if ahead is not None:
            ahead[0].join()
            if ahead[2] is not None:
                raise ahead[2]
            return ahead[1]
        return self._login(endpoint, alias)

    def _login(self, endpoint, alias: str) -> str:
        try:
            sock = socket.create_connection((endpoint.host, endpoint.port), timeout=self.timeout)
        except OSError as exc:
            raise SshNotReady("connect: %s" % (exc.strerror or exc)) from exc
        paramiko = _paramiko()
        transport = paramiko.Transport(sock)
        transport.set_log_channel(SSH_CHECK_LOG_CHANNEL)
        try:
            known = self.files.known_key(alias)
            if known:
                # Offer only the pinned key type, so the server cannot switch to another.
                transport.get_security_options().key_types = [known[0]]
            try:
                transport.start_client(timeout=self.timeout)
                # A handshake that timed out returns without raising; asking for the key then
                # raises "No existing session": the server is not ready either way.
                server_key = transport.get_remote_server_key()
            except (paramiko.SSHException, EOFError, OSError) as exc:
                raise SshNotReady("handshake: %s" % exc) from exc
            self.files.pin(alias, server_key.get_name(), server_key.get_base64())
            try:
                transport.auth_publickey(endpoint.user, self._key())
            except (paramiko.SSHException, EOFError, OSError) as exc:
                # During boot the key is often not installed yet: retried until ssh_timeout.
                raise SshNotReady("login as %s: %s" % (endpoint.user, exc)) from exc
            try:
                channel = transport.open_session(timeout=self.timeout)
                channel.settimeout(self.timeout)
                channel.exec_command(self.command)
                output = channel.makefile("rb").read()
                status = channel.recv_exit_status()
            except (paramiko.SSHException, EOFError, OSError) as exc:
                raise SshNotReady("command: %s" % exc) from exc
            if status != 0:
                # A long command (a script) is named by its start: the message goes into warnings and logs.
                shown = self.command if len(self.command) <= 80 else self.command[:60] + "..."
                raise SshNotReady("'%s' exited with %d" % (shown, status))
            self.outputs[alias] = output.decode("utf-8", "replace").strip()
            return fingerprint(server_key.get_name(), server_key.get_base64())
        finally:
            transport.close()
