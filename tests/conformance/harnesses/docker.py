"""Conformance harness for the docker adapter: the REAL Docker engine, no fake.

Skips (with the reason) when no engine answers. Every VM name the suite uses
should start with this harness's ``prefix`` (``request.vm_name`` and
``spec.vm_name`` do); ``resources()`` and ``close()`` cover every container
carrying such a name.

Errors are injected honestly, by pointing the next call at a real failure:

=================  ==================================  ===============================
kind               how                                 primitives
=================  ==================================  ===============================
Unavailable        an engine address that refuses      plan, prepare
Transient          an engine that accepts connections  plan, prepare, create, observe,
                   and never answers (1 s timeout)     delete
InvalidRequest     a malformed docker_host URL;        plan, prepare, create, observe,
                   for prepare: a missing base image   delete
Failed             prepare: a base image without sshd  prepare, create
                   (the build fails); create: the
                   fixed host port is held by another
                   container (start fails)
=================  ==================================  ===============================

Capacity, Quota and Credentials cannot be produced by a local engine; other
combinations skip with the reason. ``cleanup`` never talks to the engine.
"""

from __future__ import annotations

import socket
import uuid
from typing import Iterable, List, Optional, Set

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    ErrorKind, InstanceSpec, Location, ResourceRequest,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.docker import (
    DEFAULT_BASE_IMAGE, DockerProvider,
)
from ansible_collections.gpuprov.cloud.tests.conformance.harness import Harness
from ansible_collections.gpuprov.cloud.tests.fakes import docker_engine as de

JOURNAL_ID = "conformance-journal"
ENGINE_PRIMITIVES = ("plan", "prepare", "create", "observe", "delete")
SUPPORTED = {
    ErrorKind.UNAVAILABLE: ("plan", "prepare"),
    ErrorKind.TRANSIENT: ENGINE_PRIMITIVES,
    ErrorKind.INVALID_REQUEST: ENGINE_PRIMITIVES,
    ErrorKind.FAILED: ("prepare", "create"),
}


class _InjectableDocker(DockerProvider):
    """The real adapter; a primitive armed by the harness runs once on a faulty twin."""

    def __init__(self, harness: "DockerHarness"):
        # Built as the core builds it: with its journal's id, so every container carries it.
        super().__init__({}, journal_id=JOURNAL_ID)
        self._harness = harness

    def _route(self, primitive, *args):
        twin = self._harness._take(primitive)
        if twin is None:
            return getattr(super(), primitive)(*args)
        try:
            return getattr(twin, primitive)(*args)
        finally:
            self._harness._after_fault()

    def plan(self, request):
        return self._route("plan", request)

    def prepare(self, offer, spec):
        return self._route("prepare", offer, spec)

    def create(self, offer, prepared, spec):
        return self._route("create", offer, prepared, spec)

    def observe(self, location, vm_name):
        return self._route("observe", location, vm_name)

    def delete(self, location, vm_name, instance_ids):
        return self._route("delete", location, vm_name, instance_ids)

    def cleanup(self, location, vm_name):
        return self._route("cleanup", location, vm_name)


class DockerHarness(Harness):
    cloud = "docker"

    def __init__(self, client):
        self.client = client
        self.prefix = "conf-%s" % uuid.uuid4().hex[:8]
        self.pkey, public = de.new_key()
        self.provider = _InjectableDocker(self)
        self.request = ResourceRequest(vm_name=self.prefix + "-vm")
        self.spec = InstanceSpec(vm_name=self.prefix + "-vm", ssh_public_key=public)
        self._armed: Optional[tuple] = None
        self._listener: Optional[socket.socket] = None
        self._holder = None
        self._broken_base: Optional[str] = None

    # --- levers -------------------------------------------------------------------

    def error_kinds(self) -> Iterable[str]:
        return tuple(SUPPORTED)

    def inject_error(self, primitive: str, kind: str) -> None:
        if primitive not in SUPPORTED.get(kind, ()):
            pytest.skip("the docker harness cannot make %s raise %s honestly (a local engine has "
                        "no %s there)" % (primitive, kind, kind))
        self._armed = (primitive, kind)

    def _take(self, primitive: str) -> Optional[DockerProvider]:
        """The faulty twin for this call when ``primitive`` is armed (one shot)."""
        if not self._armed or self._armed[0] != primitive:
            return None
        kind = self._armed[1]
        self._armed = None
        if kind == ErrorKind.UNAVAILABLE:
            return _twin({"docker_host": "tcp://127.0.0.1:%d" % _closed_port()})
        if kind == ErrorKind.TRANSIENT:
            return _twin({"docker_host": "tcp://127.0.0.1:%d" % self._silent_port(), "timeout": 1})
        if kind == ErrorKind.INVALID_REQUEST:
            if primitive == "prepare":
                return _twin({"base_image": "gpuprov-test/no-such-base:%s" % uuid.uuid4().hex[:8]})
            return _twin({"docker_host": "bogus://gpuprov-harness"})
        if kind == ErrorKind.FAILED and primitive == "prepare":
            return _twin({"base_image": self._base_without_sshd()})
        if kind == ErrorKind.FAILED and primitive == "create":
            return _twin({"ssh_port": self._held_port()})
        raise AssertionError("unreachable: %s/%s" % (primitive, kind))

    def _after_fault(self) -> None:
        if self._holder is not None:
            try:
                self._holder.remove(force=True)
            except de.docker.errors.NotFound:
                pass
            self._holder = None

    def _silent_port(self) -> int:
        """A port that accepts connections (in the kernel) and never answers."""
        if self._listener is None:
            self._listener = socket.socket()
            self._listener.bind(("127.0.0.1", 0))
            self._listener.listen(64)
        return self._listener.getsockname()[1]

    def _held_port(self) -> int:
        """A host port published by another container (not a VM of this harness)."""
        image = DockerProvider({}).prepare(self.provider.plan(self.request)[0], self.spec)["image"]
        self._holder = self.client.containers.run(
            image, entrypoint=["sleep", "infinity"], detach=True,
            name="gpuprov-harness-porthold-%s" % uuid.uuid4().hex[:8],
            ports={"22/tcp": ("127.0.0.1", None)})
        self._holder.reload()
        return int(self._holder.attrs["NetworkSettings"]["Ports"]["22/tcp"][0]["HostPort"])

    def _base_without_sshd(self) -> str:
        if self._broken_base is None:
            repository, tag = "gpuprov-test/no-sshd", uuid.uuid4().hex[:10]
            fixer = self.client.containers.create(DEFAULT_BASE_IMAGE, entrypoint=["rm", "-f", "/usr/sbin/sshd"])
            try:
                fixer.start()
                fixer.wait(timeout=120)
                fixer.commit(repository=repository, tag=tag)
            finally:
                fixer.remove(force=True)
            self._broken_base = "%s:%s" % (repository, tag)
        return self._broken_base

    # --- views --------------------------------------------------------------------

    def settle(self, location: Location, instance_id: str) -> None:
        seen = de.wait_usable(DockerProvider({}), location, self._vm_of(instance_id))
        assert seen.instance_id == instance_id

    def _vm_of(self, instance_id: str) -> str:
        return self.client.containers.get(instance_id).labels[de.VM_NAME_TAG]

    def resources(self) -> Set[str]:
        return {"container:%s" % c.id for c in de.containers_of(self.client, self.prefix)}

    def instance_ids(self) -> List[str]:
        return sorted(c.id for c in de.containers_of(self.client, self.prefix)
                      if c.status not in ("removing", "dead"))

    def close(self) -> None:
        self._after_fault()
        de.remove_containers(self.client, self.prefix)
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        if self._broken_base is not None:
            de.remove_image_and_build_cache(self.client, self._broken_base)
            self._broken_base = None


def _twin(options) -> DockerProvider:
    """A faulty twin of the harness's adapter (same journal id)."""
    return DockerProvider(options, journal_id=JOURNAL_ID)


def _closed_port() -> int:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


def make_harness(tmp_path_factory) -> DockerHarness:
    client, why = de.engine()
    if client is None:
        pytest.skip(why)
    de.ensure_base_image(client, DEFAULT_BASE_IMAGE)
    return DockerHarness(client)
