"""Helpers for tests that run the docker adapter against the real Docker engine.

Not a fake: the engine, the images, the containers and sshd are all real. This
module only finds the engine, makes sure the offline base image exists (by
running ``scripts/build-base-image.sh``, which is fast when it does), removes
what a test created, and logs into containers over SSH with a throwaway key.
"""

from __future__ import annotations

import io
import pathlib
import re
import subprocess
import time
import uuid
from typing import List, Optional, Tuple

try:
    import docker
except ImportError:  # the tests that need it skip with the reason
    docker = None

import paramiko
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    VM_NAME_TAG, Observed, SshEndpoint, Status,
)

REPO = pathlib.Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO / "scripts" / "build-base-image.sh"
MANAGED_LABEL = "gpuprov-managed-by"


def engine() -> Tuple[Optional[object], str]:
    """(client, "") when a Docker engine answers, else (None, why not)."""
    if docker is None:
        return None, "the docker SDK is not installed (pip install -r requirements-dev.txt)"
    try:
        client = docker.from_env(timeout=30)
        client.ping()
        return client, ""
    except Exception as exc:  # any failure means: no engine here
        return None, "no Docker engine answers (DOCKER_HOST or the default socket): %s" % (exc,)


def ensure_base_image(client, tag: str) -> None:
    """Build the offline base image when it is missing (the script is a no-op otherwise)."""
    try:
        client.images.get(tag)
        return
    except docker.errors.ImageNotFound:
        pass
    proc = subprocess.run(["bash", str(BUILD_SCRIPT)], capture_output=True, text=True,
                          env=None, check=False)
    if proc.returncode != 0:
        raise RuntimeError("scripts/build-base-image.sh failed (rc %s):\n%s\n%s"
                           % (proc.returncode, proc.stdout[-3000:], proc.stderr[-3000:]))
    client.images.get(tag)


def unique_name(prefix: str = "t") -> str:
    """A VM name unique to one test (a DNS label)."""
    return "%s-%s" % (prefix, uuid.uuid4().hex[:10])


def containers_of(client, name_prefix: str) -> List[object]:
    """Every container (any state) whose VM name starts with ``name_prefix``."""
    found = client.containers.list(all=True, filters={"label": VM_NAME_TAG}, ignore_removed=True)
    return [c for c in found if (c.labels.get(VM_NAME_TAG) or "").startswith(name_prefix)]


def remove_containers(client, name_prefix: str) -> None:
    for container in containers_of(client, name_prefix):
        try:
            container.remove(force=True, v=True)
        except docker.errors.NotFound:
            pass


def remove_image_and_build_cache(client, ref: str) -> None:
    """Remove image ``ref`` and the intermediate images a (failed) classic build left on
    top of it, children before parents."""
    try:
        root = client.images.get(ref).id
    except docker.errors.ImageNotFound:
        return
    generations = [{root}]
    known = {root}
    for _generation in range(16):  # a few generations: the sshd build has a handful of steps
        children = {i["Id"] for i in client.api.images(all=True)
                    if i.get("ParentId") in generations[-1]} - known
        if not children:
            break
        generations.append(children)
        known |= children
    for generation in reversed(generations[1:]):
        for image_id in sorted(generation):
            try:
                client.images.remove(image_id, force=True)
            except docker.errors.NotFound:
                pass
    client.images.remove(root, force=True)


def new_key() -> Tuple[paramiko.PKey, str]:
    """A fresh ed25519 key: (paramiko private key, OpenSSH public key line)."""
    private = ed25519.Ed25519PrivateKey.generate()
    pem = private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                serialization.NoEncryption()).decode()
    public = private.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                               serialization.PublicFormat.OpenSSH).decode()
    return paramiko.Ed25519Key.from_private_key(io.StringIO(pem)), public + " gpuprov-test"


def wait_usable(provider, location, vm_name: str, deadline_s: float = 60.0) -> Observed:
    """Poll observe until the VM is Running with an endpoint (what the core's Booting does)."""
    end = time.monotonic() + deadline_s
    last: List[Observed] = []
    while time.monotonic() < end:
        last = provider.observe(location, vm_name)
        if len(last) == 1 and last[0].usable:
            return last[0]
        if any(o.status == Status.FAILED for o in last):
            break
        time.sleep(0.5)
    raise AssertionError("VM %s never became usable; last observation: %r" % (vm_name, last))


def ssh_connect(endpoint: SshEndpoint, pkey: paramiko.PKey, deadline_s: float = 60.0) -> paramiko.SSHClient:
    """Log in with ``pkey``; retries while sshd is still coming up (generating host keys)."""
    end = time.monotonic() + deadline_s
    error: Optional[BaseException] = None
    while time.monotonic() < end:
        client = paramiko.SSHClient()
        client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
        try:
            client.connect(endpoint.host, port=endpoint.port, username=endpoint.user or "root",
                           pkey=pkey, allow_agent=False, look_for_keys=False,
                           timeout=10, banner_timeout=10, auth_timeout=10)
            return client
        except paramiko.AuthenticationException:
            client.close()
            raise
        except Exception as exc:  # not listening yet / reset while starting
            error = exc
            client.close()
            time.sleep(0.5)
    raise AssertionError("no SSH login to %s:%s: %r" % (endpoint.host, endpoint.port, error))


def run(ssh: paramiko.SSHClient, command: str) -> Tuple[int, str, str]:
    _stdin, stdout, stderr = ssh.exec_command(command, timeout=60)
    out = stdout.read().decode()
    err = stderr.read().decode()
    return stdout.channel.recv_exit_status(), out, err


# --- a container's files, running or stopped (the on-VM watchdog's tests) ---------------------------------------

def put_files(container, files, mode: int = 0o755) -> None:
    """Write {absolute path: bytes} into ``container`` (its folders made)."""
    import tarfile
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        folders = set()
        for path in files:
            parts = pathlib.PurePosixPath(path).parts[1:-1]
            folders.update("/".join(parts[:i]) for i in range(1, len(parts) + 1))
        for folder in sorted(folders):
            info = tarfile.TarInfo(folder)
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(info)
        for path, data in files.items():
            info = tarfile.TarInfo(path.lstrip("/"))
            info.size, info.mode = len(data), mode
            tar.addfile(info, io.BytesIO(data))
    assert container.put_archive("/", buffer.getvalue())


def read_file(container, path: str) -> str:
    """A file's text, from a running or a stopped container ("" when it is not there)."""
    import tarfile

    import docker
    try:
        chunks, _stat = container.get_archive(path)
    except docker.errors.NotFound:
        return ""
    with tarfile.open(fileobj=io.BytesIO(b"".join(chunks))) as tar:
        member = tar.extractfile(tar.getmembers()[0])
        return member.read().decode() if member else ""


WATCHDOG_CHECK_LINE = re.compile(r"^\S+ now=(\d+) (kept|stop): (.*)$")


def watchdog_checks(container) -> List[Tuple[int, str, str]]:
    """The on-VM watchdog's log (/var/log/gpuprov-watchdog.log) as (now, kept|stop, what) per check."""
    found = []
    for line in read_file(container, "/var/log/gpuprov-watchdog.log").splitlines():
        match = WATCHDOG_CHECK_LINE.match(line)
        if match:
            found.append((int(match.group(1)), match.group(2), match.group(3)))
    return found


def watchdog_stopped(container) -> dict:
    """What the watchdog wrote before it powered the container off (/etc/gpuprov/stopped); {} when it did not."""
    text = read_file(container, "/etc/gpuprov/stopped")
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
