"""Conformance harness for the local cloud: real sshd processes on loopback ports.

Errors are produced honestly by pointing the adapter at a broken sshd:
  InvalidRequest  the sshd binary does not exist         plan, prepare, create
  Failed          an "sshd" that exits 1 before binding   create
  Transient       the VM's state folder is not a folder   observe
"""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import time
import uuid
from typing import Iterable, List, Set

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    ErrorKind, InstanceSpec, ResourceRequest,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.local import LocalProvider
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.local import _spawned as local_spawned
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm.ssh import ensure_controller_key
from ansible_collections.gpuprov.cloud.tests.conformance.harness import Harness

JOURNAL_ID = "conformance-journal"

_INJECTABLE = {
    ErrorKind.INVALID_REQUEST: ("plan", "prepare", "create"),
    ErrorKind.FAILED: ("create",),
    ErrorKind.TRANSIENT: ("observe",),
}


class LocalHarness(Harness):
    cloud = "local"

    def __init__(self, tmp: str):
        if not (os.path.exists("/usr/sbin/sshd")):
            pytest.skip("the local cloud needs openssh-server (sshd); .ci/run installs it")
        self.tmp = tmp
        self.root = os.path.join(tmp, "local")
        self.options = {"root": self.root}
        # Built as the core builds it: with its journal's id, so every folder carries it.
        self.provider = LocalProvider(self.options, journal_id=JOURNAL_ID)
        public = ensure_controller_key(os.path.join(tmp, "id_ed25519"))
        name = "conf-" + uuid.uuid4().hex[:8]
        self.request = ResourceRequest(vm_name=name)
        self.spec = InstanceSpec(vm_name=name, ssh_public_key=public)
        self._broken_sshd = os.path.join(tmp, "false-sshd")
        with open(self._broken_sshd, "w") as handle:
            handle.write("#!/bin/sh\necho 'fatal: refusing to start' >&2\nexit 1\n")
        os.chmod(self._broken_sshd, stat.S_IRWXU)
        self._moved = None

    def error_kinds(self) -> Iterable[str]:
        return tuple(_INJECTABLE)

    def inject_error(self, primitive: str, kind: str) -> None:
        if primitive not in _INJECTABLE.get(kind, ()):
            pytest.skip("the local cloud cannot make %s raise %s honestly" % (primitive, kind))
        if kind == ErrorKind.INVALID_REQUEST:
            self.provider.options["sshd"] = os.path.join(self.tmp, "no-such-sshd")
        elif kind == ErrorKind.FAILED:
            self.provider.options["sshd"] = self._broken_sshd
        else:
            vm_dir = os.path.join(self.root, self.spec.vm_name)
            if os.path.isdir(vm_dir):
                self._moved = vm_dir + ".aside"
                os.rename(vm_dir, self._moved)
            os.makedirs(self.root, exist_ok=True)
            with open(vm_dir, "w") as handle:
                handle.write("not a folder")

    def clear_errors(self) -> None:
        self.provider.options.pop("sshd", None)
        vm_dir = os.path.join(self.root, self.spec.vm_name)
        if os.path.isfile(vm_dir):
            os.unlink(vm_dir)
        if self._moved:
            os.rename(self._moved, vm_dir)
            self._moved = None

    def _folders(self) -> List[str]:
        out = []
        if os.path.isdir(self.root):
            for vm in sorted(os.listdir(self.root)):
                vm_dir = os.path.join(self.root, vm)
                if os.path.isdir(vm_dir):
                    out.extend(os.path.join(vm_dir, i) for i in sorted(os.listdir(vm_dir)))
        return out

    def resources(self) -> Set[str]:
        return {os.path.relpath(f, self.root) for f in self._folders()}

    def instance_ids(self) -> List[str]:
        return [os.path.basename(f) for f in self._folders() if LocalProvider._processes(f)]

    def settle_deleted(self, location, instance_id: str) -> None:
        """delete sends SIGTERM and returns; wait (bounded) for that sshd to exit."""
        folders = [f for f in self._folders() if os.path.basename(f) == instance_id]
        for _attempt in range(500):
            # Gone from the scan and as the process the instance recorded (one on its way out shows no command
            # line, yet lives until it is a zombie).
            if not any(LocalProvider._processes(folder) or local_spawned(folder) for folder in folders):
                return
            time.sleep(0.01)
        raise AssertionError("sshd of %s did not exit after SIGTERM" % instance_id)

    def unknown_instance_id(self) -> str:
        return "local-000000000000"

    def close(self) -> None:
        for folder in self._folders():
            for pid in LocalProvider._processes(folder):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)


def make_harness(tmp_path_factory):
    return LocalHarness(str(tmp_path_factory.mktemp("local-cloud")))
