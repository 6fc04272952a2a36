# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Docker test cloud: a "VM" is a container running sshd, on a real Docker engine.

Primitives (the seed's section 5, Docker row):

- ``plan``: one offer, ``docker/local/container``. GPU asks are satisfiable only
  as "no GPU" unless the engine exposes GPUs (an ``nvidia`` runtime in ``docker
  info``); a GPU ask on an engine without one gets the offer back with
  ``available=False`` and the reason, so the search moves on to other clouds.
- ``prepare``: builds the sshd image from the Dockerfile below (``FROM`` the
  ``base_image`` option) when the image is missing; idempotent. The default base
  image is made offline by ``scripts/build-base-image.sh`` (debootstrap + docker
  import), so no registry is ever needed.
- ``create``: one ``docker run`` (create, copy the VM's files in, start) of the
  sshd image: labels ``gpuprov-vm-name=<name>`` and ``gpuprov-journal-id=<journal
  id>`` (the provider's identity tags), container name ``gpuprov-<name>``,
  ``authorized_keys`` from the spec, the boot script (run once at container start,
  output in ``/var/log/gpuprov-boot.log``, exit status in
  ``/var/lib/gpuprov/boot.status``), port 22 published on ``publish_host``, no
  restart policy. No waiting.
- ``observe``: ``docker ps -a`` by label, normalised status, SSH endpoint, the
  journal id label. A container left "created" (create interrupted between its
  steps) is Failed at once, so the core removes it and creates afresh.
- ``delete``: ``docker rm -f`` (unknown = success). ``cleanup``: nothing; the
  images are shared by every VM and stay.

Why port 22 is published on 127.0.0.1 rather than reached on the container's
bridge address: the controller may run outside Docker's network namespace (on a
Mac, in a VM, in another container with its own network, in AWX), where bridge
addresses do not route, while a port published on the engine host's loopback is
reachable from the engine host in every setup and is not exposed to the network.
Docker picks a free host port for each container (``ssh_port`` fixes one).

Each container gets its own SSH host keys: none are baked into the image; the
entrypoint runs ``ssh-keygen -A`` at container start.

Options: ``cloud_options.docker``, declared in providers/cloud_options/docker.py.
"""

from __future__ import annotations

import hashlib
import io
import re
import tarfile
from typing import Any, Dict, List, Optional

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.docker.image_recipe import DOCKERFILE, ENTRYPOINT
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    ANY_REGION, JOURNAL_ID_TAG, VM_NAME_TAG, BlockScope, Capabilities, ErrorKind, InstanceSpec, K3sAccess,
    Location, Observed, Offer, Owned, PowerOffBilling, ProviderError, ResourceKind, ResourceRequest, SshEndpoint, Status,
    validate_vm_name,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.cloud_options.docker import (
    DEFAULT_BASE_IMAGE, OPTIONS,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.common import check_regions, require_sdk
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.options import TypedOptionsProvider

try:
    import docker
    from docker import errors as docker_errors
    import requests
    HAS_DOCKER = True
except ImportError:  # ansible-test sanity imports module_utils without third-party packages
    docker = None
    docker_errors = None
    requests = None
    HAS_DOCKER = False

CLOUD = "docker"
REGION = "local"
INSTANCE_TYPE = "container"
IMAGE_REPOSITORY = "gpuprov/sshd"
CONTAINER_PREFIX = "gpuprov-"
MANAGED_LABEL = "gpuprov-managed-by"
SSH_USER_LABEL = "gpuprov-ssh-user"
FILES_DIR = "/var/lib/gpuprov"
CREATED_NOT_STARTED = "container created but never started (create was interrupted)"


def _render(template: str, base: str) -> str:
    return template % {"base": base, "files": FILES_DIR}


def default_image_tag(base_image_id: str) -> str:
    """The sshd image tag: a hash of the Dockerfile, the entrypoint and the base image id,
    so a changed recipe or a rebuilt base gets a fresh image and never a stale one."""
    digest = hashlib.sha256()
    for part in (DOCKERFILE, ENTRYPOINT, base_image_id):
        digest.update(part.encode("utf-8"))
        digest.update(b"\0")
    return "%s:%s" % (IMAGE_REPOSITORY, digest.hexdigest()[:16])


def _tar(files: Dict[str, bytes], modes: Optional[Dict[str, int]] = None) -> bytes:
    """An in-memory tar of ``files`` (name -> content)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name in sorted(files):
            data = files[name]
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = (modes or {}).get(name, 0o644)
            info.mtime = 0
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def build_context(base: str) -> bytes:
    """The docker build context (Dockerfile + entrypoint) as a tar, built in memory."""
    return _tar(
        {"Dockerfile": _render(DOCKERFILE, base).encode("utf-8"),
         "entrypoint.sh": _render(ENTRYPOINT, base).encode("utf-8")},
        {"entrypoint.sh": 0o755},
    )


def container_name(vm_name: str) -> str:
    return CONTAINER_PREFIX + vm_name


# --- error classification ---------------------------------------------------------

def _chain(exc: BaseException):
    """``exc`` and its causes/contexts, outermost first."""
    seen = []
    cur: Optional[BaseException] = exc
    for _step in range(16):  # bounded walk of one exception's chain
        if cur is None or any(cur is s for s in seen):
            break
        seen.append(cur)
        cur = cur.__cause__ or cur.__context__
    return seen


def _is_timeout(exc: BaseException) -> bool:
    for e in _chain(exc):
        if requests is not None and isinstance(e, requests.exceptions.Timeout):
            return True
        if isinstance(e, TimeoutError):
            return True
        if "timed out" in str(e).lower():
            return True
    return False


def _is_unreachable(exc: BaseException) -> bool:
    for e in _chain(exc):
        if requests is not None and isinstance(e, requests.exceptions.ConnectionError):
            return True
        if isinstance(e, (ConnectionError, FileNotFoundError)):
            return True
    return False


def _last_lines(text: str, count: int = 20) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return "\n".join(lines[-count:])


class DockerProvider(TypedOptionsProvider):
    """The Docker test cloud (see the module docstring)."""

    name = CLOUD
    option_spec = OPTIONS

    def __init__(self, options: Optional[Dict[str, Any]] = None, journal_id: Optional[str] = None):
        super().__init__(options, journal_id=journal_id)
        require_sdk(self.name, HAS_DOCKER, "docker")
        opts = self.options
        self.base_image = opts["base_image"] or DEFAULT_BASE_IMAGE
        self.image = opts["image"] or None
        self.docker_host = opts["docker_host"] or None
        self.privileged = opts["privileged"]
        self.privileged_cap_drop = [c.upper() for c in opts["privileged_cap_drop"] or []]
        self.publish_host = opts["publish_host"]
        self.ssh_host = opts["ssh_host"] or (
            "127.0.0.1" if self.publish_host in ("0.0.0.0", "::") else self.publish_host)
        self.ssh_port = opts["ssh_port"] or None
        self.timeout = opts["timeout"]
        self.build_timeout = opts["build_timeout"]
        # docker run --init: a tiny init (docker-init, shipped with the engine) as PID 1
        # reaps the boot script's orphans; sshd alone does not.
        self.init = opts["init"]
        # The default base image installs python3 there; Ansible's interpreter discovery
        # does not know a debootstrapped Debian and would warn.
        self.python_interpreter = opts["python_interpreter"]
        self._docker = None

    # --- plumbing -----------------------------------------------------------------

    def _where(self) -> str:
        return self.docker_host or "the default socket (DOCKER_HOST unset)"

    def _client(self, primitive: str):
        """The SDK client, made on first use (making it asks the engine its API version)."""
        if self._docker is None:
            try:
                if self.docker_host:
                    self._docker = docker.DockerClient(base_url=self.docker_host, timeout=self.timeout)
                else:
                    self._docker = docker.from_env(timeout=self.timeout)
            except Exception as exc:  # classified: the SDK wraps connection errors
                raise self._classify(exc, primitive) from exc
        return self._docker

    def _classify(self, exc: BaseException, primitive: str, what: str = "") -> ProviderError:
        """Map an SDK/engine failure to a ProviderError.

        Engine not reachable (no socket, connection refused):
          - plan and prepare: Unavailable, blocking the whole docker cloud. Nothing
            exists yet, an absent engine is a property of this machine that a retry
            with backoff will not fix, and other clouds in the search may serve.
          - create / observe / delete / cleanup: Transient. A VM may exist (create's
            request may have reached the engine before the connection broke), so the
            core must keep its handle, retry with backoff and re-observe; an engine
            that restarts comes back, one that does not ends in the core's budget.
        Timeouts are Transient everywhere (the result is ambiguous; observe decides).
        """
        if isinstance(exc, ProviderError):
            return exc
        prefix = "%s: " % what if what else ""
        if _is_timeout(exc):
            return ProviderError(
                ErrorKind.TRANSIENT,
                "%sthe Docker engine at %s did not answer in time during %s: %s"
                % (prefix, self._where(), primitive, exc))
        if any(isinstance(e, PermissionError) for e in _chain(exc)):
            return ProviderError(
                ErrorKind.CREDENTIALS,
                "%spermission denied on the Docker engine at %s (%s); run as a member of the "
                "docker group or set docker_host" % (prefix, self._where(), exc))
        if _is_unreachable(exc):
            msg = ("%sthe Docker engine is not reachable at %s (%s); start dockerd or set the "
                   "docker_host option / DOCKER_HOST" % (prefix, self._where(), exc))
            if primitive in ("plan", "prepare"):
                return ProviderError(ErrorKind.UNAVAILABLE, msg, BlockScope.CLOUD)
            return ProviderError(ErrorKind.TRANSIENT, msg)
        if docker_errors is not None and isinstance(exc, docker_errors.APIError):
            status = exc.status_code or 0
            explanation = exc.explanation or str(exc)
            if isinstance(explanation, bytes):
                explanation = explanation.decode("utf-8", "replace")
            text = "%sDocker engine error during %s (HTTP %s): %s" % (prefix, primitive, status, explanation)
            if status in (401, 403):
                return ProviderError(ErrorKind.CREDENTIALS, text)
            if status == 409:
                # A name conflict: something already exists; the core re-observes and adopts.
                return ProviderError(ErrorKind.TRANSIENT, text)
            if status == 400:
                return ProviderError(ErrorKind.INVALID_REQUEST, text)
            if status in (502, 503, 504) or status == 0:
                return ProviderError(ErrorKind.TRANSIENT, text)
            lowered = explanation.lower()
            if "port is already allocated" in lowered or "address already in use" in lowered:
                if self.ssh_port:
                    return ProviderError(
                        ErrorKind.FAILED,
                        "%shost port %s (option ssh_port) is already in use: %s"
                        % (prefix, self.ssh_port, explanation))
                return ProviderError(ErrorKind.TRANSIENT, text)
            if primitive == "create":
                return ProviderError(ErrorKind.FAILED, text)
            return ProviderError(ErrorKind.TRANSIENT, text)
        if docker_errors is not None and isinstance(exc, docker_errors.DockerException):
            # The SDK's own checks (bad docker_host URL, TLS settings...): configuration.
            return ProviderError(
                ErrorKind.INVALID_REQUEST,
                "%sdocker_host / Docker client settings: %s" % (prefix, exc))
        return ProviderError(ErrorKind.TRANSIENT, "%sunexpected error during %s: %r" % (prefix, primitive, exc))

    def _location(self) -> Location:
        return Location(CLOUD, REGION)

    # --- contract -----------------------------------------------------------------

    def capabilities(self) -> Capabilities:
        # k3s in a container needs a privileged container (cgroups, mounts, iptables).
        return Capabilities(
            kubernetes=self.privileged,
            boot_script=True,
            spot=False,
            k3s_access=K3sAccess.SSH_TUNNEL,
            boot_timeout_s=120.0,
            poll_interval_s=1.0,
            python_interpreter=self.python_interpreter,
            # Nothing bills here; the watchdog's power-off ends the container's init, and with restart policy
            # "no" the container stays exited until down or reap removes it.
            poweroff_billing=PowerOffBilling.FREE,
            poweroff_source="the docker cloud is a local engine: nothing bills (docs/clouds/docker.md)",
        )

    def plan(self, request: ResourceRequest) -> List[Offer]:
        validate_vm_name(request.vm_name)
        check_regions("the docker cloud", request.regions, [REGION])   # its one region
        try:
            info = self._client("plan").info()
        except Exception as exc:
            raise self._classify(exc, "plan") from exc
        runtimes = sorted((info.get("Runtimes") or {}).keys())
        has_gpu = "nvidia" in runtimes or info.get("DefaultRuntime") == "nvidia"
        offer = Offer(
            cloud=CLOUD, region=REGION, instance_type=INSTANCE_TYPE,
            price_per_hour=0.0, spot=False,
            detail={"engine": info.get("ServerVersion"), "runtimes": runtimes, "gpu_runtime": has_gpu},
        )
        if request.gpu:
            if has_gpu:
                # The engine can hand GPUs to containers; which model it has is not
                # visible through the Docker API, so the ask is passed through as is.
                offer.gpu = request.gpu
                offer.gpu_count = max(1, int(request.gpu_count or 1))
                offer.detail["gpu_model_verified"] = False
            else:
                offer.gpu = request.gpu
                offer.gpu_count = max(1, int(request.gpu_count or 1))
                offer.available = False
                offer.unavailable_reason = (
                    "the Docker engine at %s exposes no GPUs (no 'nvidia' runtime in docker info; "
                    "runtimes: %s); the docker cloud can satisfy this request only without a GPU"
                    % (self._where(), ", ".join(runtimes) or "none"))
        return [offer]

    def prepare(self, offer: Offer, spec: InstanceSpec) -> Dict[str, Any]:
        validate_vm_name(spec.vm_name)
        client = self._client("prepare")
        try:
            base = client.images.get(self.base_image)
        except Exception as exc:
            if isinstance(exc, docker_errors.ImageNotFound):
                raise ProviderError(
                    ErrorKind.INVALID_REQUEST,
                    "base_image: the image %r does not exist on the Docker engine at %s; build it "
                    "offline with scripts/build-base-image.sh (from the collection) or set the "
                    "docker cloud's base_image option to an image with openssh-server"
                    % (self.base_image, self._where())) from exc
            raise self._classify(exc, "prepare", "base_image %r" % self.base_image) from exc
        tag = self.image or default_image_tag(base.id)
        try:
            image = client.images.get(tag)
            return {"image": tag, "image_id": image.id, "base_image": self.base_image, "built": False}
        except Exception as exc:
            if not isinstance(exc, docker_errors.ImageNotFound):
                raise self._classify(exc, "prepare", "image %r" % tag) from exc
        try:
            # One engine request. The engine tags the image only once the build succeeded, and
            # cancels the build when this client goes away, so a crash here leaves either no
            # image under the tag (the next prepare builds it) or a complete one: never half.
            image, _logs = client.images.build(
                fileobj=io.BytesIO(build_context(self.base_image)), custom_context=True,
                tag=tag, buildargs={"BASE": self.base_image}, rm=True, forcerm=True,
                pull=False, timeout=int(self.build_timeout),
                labels={"gpuprov-image": "sshd", MANAGED_LABEL: "gpuprov.cloud"},
            )
        except Exception as exc:
            if isinstance(exc, docker_errors.BuildError):
                log = "".join(
                    str(chunk.get("stream") or chunk.get("error") or "")
                    if isinstance(chunk, dict) else str(chunk)
                    for chunk in (exc.build_log or []))
                raise ProviderError(
                    ErrorKind.FAILED,
                    "building the sshd image %s FROM %s failed: %s\n--- last lines of the build log ---\n%s"
                    % (tag, self.base_image, exc.msg, _last_lines(log))) from exc
            raise self._classify(exc, "prepare", "building the sshd image %s" % tag) from exc
        return {"image": tag, "image_id": image.id, "base_image": self.base_image, "built": True}

    def create(self, offer: Offer, prepared: Dict[str, Any], spec: InstanceSpec) -> str:
        validate_vm_name(spec.vm_name)
        image = (prepared or {}).get("image")
        if not image:
            raise ProviderError(ErrorKind.INVALID_REQUEST, "create: prepared state has no 'image' (run prepare first)")
        if not (spec.ssh_public_key or "").strip():
            raise ProviderError(ErrorKind.INVALID_REQUEST, "ssh_public_key: empty; the container would be unreachable")
        client = self._client("create")
        files = {"authorized_keys": (spec.ssh_public_key.strip() + "\n").encode("utf-8")}
        modes = {"authorized_keys": 0o600}
        if spec.ssh_user and spec.ssh_user != "root":
            files["ssh_user"] = spec.ssh_user.encode("utf-8")
        if spec.boot_script is not None:
            files["boot.sh"] = spec.boot_script.to_shell().encode("utf-8")
            modes["boot.sh"] = 0o700
        kwargs: Dict[str, Any] = {}
        privileged = self.privileged
        if self.privileged and self.privileged_cap_drop:
            # --privileged asks for every capability; an engine whose own bounding set lacks
            # one cannot start such a container. The nearest it can start: all but those.
            privileged = False
            kwargs.update(cap_add=["ALL"], cap_drop=list(self.privileged_cap_drop),
                          security_opt=["seccomp=unconfined", "apparmor=unconfined"])
        if offer.gpu_count and offer.detail.get("gpu_runtime"):
            kwargs["device_requests"] = [docker.types.DeviceRequest(count=int(offer.gpu_count), capabilities=[["gpu"]])]
        name = container_name(spec.vm_name)
        labels = self.resource_tags(spec)   # the user's tags as labels, under gpuprov's own
        labels.update({MANAGED_LABEL: "gpuprov.cloud", SSH_USER_LABEL: spec.ssh_user or "root"})
        try:
            container = client.containers.create(
                image, name=name, hostname=spec.vm_name, detach=True,
                labels=labels, ports={"22/tcp": (self.publish_host, self.ssh_port)},
                restart_policy={"Name": "no"}, privileged=privileged, init=self.init, **kwargs)
        except Exception as exc:
            if isinstance(exc, docker_errors.ImageNotFound):
                raise ProviderError(
                    ErrorKind.FAILED, "create: the sshd image %s is gone from the engine (re-run prepare)" % image) from exc
            if isinstance(exc, docker_errors.APIError) and exc.status_code == 409:
                raise ProviderError(
                    ErrorKind.TRANSIENT,
                    "create: a container named %s already exists (an earlier attempt); re-observe to adopt it: %s"
                    % (name, exc.explanation)) from exc
            raise self._classify(exc, "create", "container %s" % name) from exc
        try:
            container.put_archive(FILES_DIR, _tar(files, modes))
            container.start()
        except Exception as exc:
            # One creation attempt: a container that never started is removed here, so a
            # retry does not find a dead twin. If the removal fails too (or the controller
            # dies first), observe reports it Failed ("created") and the core removes it.
            error = self._classify(exc, "create", "starting container %s" % name)
            try:
                container.remove(force=True, v=True)
            except Exception:  # best effort; reported through the original error
                pass
            raise error from exc
        return container.id

    def _endpoint(self, summary: Dict[str, Any]) -> Optional[SshEndpoint]:
        """The published SSH port (``docker ps`` lists it once the container runs)."""
        user = (summary.get("Labels") or {}).get(SSH_USER_LABEL) or "root"
        for port in summary.get("Ports") or []:
            if port.get("PrivatePort") == 22 and port.get("Type") == "tcp" and port.get("PublicPort"):
                return SshEndpoint(host=self.ssh_host, port=int(port["PublicPort"]), user=user)
        return None

    def _status(self, summary: Dict[str, Any]):
        """Normalise one ``docker ps -a`` row to (status, reason).

        exited / dead -> Failed: the container's PID 1 is sshd and the restart policy is
        "no", so an exited container never comes back by itself; Failed lets the core
        compensate at once instead of waiting out a boot timeout.
        created -> Failed: create() starts the container in the same call, removing it if the
        start fails, so one seen "created" is what an interrupted create left (killed between
        its steps). It would never start by itself; Failed lets the core remove it and
        create afresh at once instead of polling it as Pending for a whole boot timeout.
        """
        state = (summary.get("State") or "").lower()
        text = summary.get("Status") or state
        if state == "running":
            return Status.RUNNING, None
        if state == "created":
            return Status.FAILED, CREATED_NOT_STARTED
        if state == "restarting":
            return Status.PENDING, "container %s (%s)" % (state, text)
        if state == "paused":
            return Status.STOPPED, "container paused"
        if state == "removing":
            return Status.TERMINATING, "container being removed"
        if state in ("exited", "dead"):
            match = re.search(r"\((-?\d+)\)", text)
            code = match.group(1) if match else "unknown"
            return Status.FAILED, "container %s with exit code %s (%s)" % (state, code, text)
        return Status.PENDING, "container state %r (%s)" % (state, text)

    def observe(self, location: Location, vm_name: str) -> List[Observed]:
        validate_vm_name(vm_name)
        try:
            rows = self._client("observe").api.containers(
                all=True, filters={"label": "%s=%s" % (VM_NAME_TAG, vm_name)})
        except Exception as exc:
            raise self._classify(exc, "observe") from exc
        found = []
        for row in rows:
            status, reason = self._status(row)
            endpoint = self._endpoint(row) if status == Status.RUNNING else None
            found.append(Observed(instance_id=row["Id"], status=status, reason=reason,
                                  endpoint=endpoint, location=self._location(),
                                  journal_id=(row.get("Labels") or {}).get(JOURNAL_ID_TAG) or None))
        return found

    def delete(self, location: Location, vm_name: str, instance_ids: List[str]) -> None:
        validate_vm_name(vm_name)
        if not instance_ids:
            return
        api = self._client("delete").api
        for instance_id in instance_ids:
            try:
                info = api.inspect_container(instance_id)
            except Exception as exc:
                if isinstance(exc, docker_errors.NotFound):
                    continue  # already gone: success
                raise self._classify(exc, "delete", "container %s" % instance_id) from exc
            owner = ((info.get("Config") or {}).get("Labels") or {}).get(VM_NAME_TAG)
            if owner != vm_name:
                raise ProviderError(
                    ErrorKind.INVALID_REQUEST,
                    "delete: container %s carries %s=%r, not %r; refusing to remove it"
                    % (instance_id, VM_NAME_TAG, owner, vm_name))
            try:
                api.remove_container(instance_id, force=True, v=True)
            except Exception as exc:
                if isinstance(exc, docker_errors.NotFound):
                    continue
                if isinstance(exc, docker_errors.APIError) and exc.status_code == 409 \
                        and "already in progress" in str(exc.explanation or ""):
                    continue  # a removal is under way: deletion requested
                raise self._classify(exc, "delete", "container %s" % instance_id) from exc

    def cleanup(self, location: Location, vm_name: str) -> None:
        """No per-VM side resources: the images are shared by every VM and stay."""
        validate_vm_name(vm_name)

    def sweep_locations(self) -> List[Location]:
        return [self._location()]

    def list_owned(self, location: Location) -> List[Owned]:
        """Every container labelled with a VM name (``docker ps -a`` by label, one call), as
        observe reports it, price 0 (the docker cloud is free). The images are shared by
        every VM and are no VM's resource. Read-only."""
        if location.region not in (REGION, ANY_REGION):
            return []
        try:
            rows = self._client("observe").api.containers(all=True, filters={"label": VM_NAME_TAG})
        except Exception as exc:
            raise self._classify(exc, "list_owned") from exc
        found = []
        for row in rows:
            labels = row.get("Labels") or {}
            status, _reason = self._status(row)
            names = [n.lstrip("/") for n in row.get("Names") or []]
            found.append(Owned(ResourceKind.INSTANCE, row["Id"], self._location(), vm_name=labels.get(VM_NAME_TAG),
                               journal_id=labels.get(JOURNAL_ID_TAG) or None, status=status, price_per_hour=0.0,
                               name=names[0] if names else None))
        return found

    def diagnose(self, location: Location, vm_name: str) -> Dict[str, Any]:
        """observe plus each container's engine state (exit code, OOMKilled, error, times), health and log tail."""
        from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.docker.diagnose import diagnose
        return diagnose(self, location, vm_name)
