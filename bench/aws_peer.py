"""Helpers of bench/aws_rerun.py: the peer collection (amazon.aws) and an sshd behind moto's
instance address.

amazon.aws is fetched for the bench only, never into requirements: the community ``ansible``
wheel of the release that pairs with the installed ansible-core (ansible N ships with
ansible-core 2.(N+7): 12.x with 2.19) is downloaded from PyPI with ``pip download --no-deps``
into build/bench (ignored), and only ``ansible_collections/amazon/aws`` is extracted from it (a
wheel is a zip) to build/bench/collections; the wheel is then removed. A later run finds the
extracted collection and downloads nothing.

The ``vm`` module logs in over SSH on every run (a re-run checks the VM it reuses), and moto's
instances have an address nothing answers at. The bench's moto server runs in its own process,
so moto's public-IP generator is pointed at a loopback address where a root sshd of the bench
listens on port 22 (the port the aws adapter uses), with the bench's key authorised.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import pathlib
import random
import shutil
import socket
import subprocess
import sys
import time
import zipfile
from typing import Optional, Tuple

PEER_PREFIX = "ansible_collections/amazon/aws/"

SSHD_CONFIG = """\
ListenAddress {address}:22
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
"""


def community_release() -> str:
    """The pip requirement of the ``ansible`` release paired with the installed ansible-core."""
    core = importlib.metadata.version("ansible-core").split(".")
    major = int(core[1]) - 7
    return "ansible>=%d,<%d" % (major, major + 1)


def ensure_amazon_aws(build: pathlib.Path) -> Tuple[Optional[pathlib.Path], str]:
    """(the collections folder holding amazon.aws, its version) or (None, why it is missing)."""
    collections = build / "collections"
    manifest = collections / PEER_PREFIX / "MANIFEST.json"
    if not manifest.exists():
        build.mkdir(parents=True, exist_ok=True)
        wanted = community_release()
        wheels = sorted(build.glob("ansible-[0-9]*.whl"))
        if not wheels:
            done = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                                   "-d", str(build), wanted], capture_output=True, text=True, check=False)
            wheels = sorted(build.glob("ansible-[0-9]*.whl"))
            if done.returncode != 0 or not wheels:
                return None, "pip download %s failed: %s" % (wanted, (done.stderr or done.stdout).strip()[-300:])
        partial = build / "partial"   # renamed into place when whole: an interrupted run leaves no half copy
        shutil.rmtree(str(partial), ignore_errors=True)
        try:
            with zipfile.ZipFile(str(wheels[-1])) as wheel:
                members = [n for n in wheel.namelist() if n.startswith(PEER_PREFIX)]
                if not members:
                    return None, "%s holds no %s" % (wheels[-1].name, PEER_PREFIX)
                wheel.extractall(str(partial), members)
            shutil.rmtree(str(collections / PEER_PREFIX), ignore_errors=True)
            (collections / PEER_PREFIX).parent.mkdir(parents=True, exist_ok=True)
            (partial / PEER_PREFIX).rename(collections / PEER_PREFIX)
        except (OSError, zipfile.BadZipFile) as exc:
            return None, "extracting amazon.aws from %s: %s" % (wheels[-1].name, exc)
        finally:
            shutil.rmtree(str(partial), ignore_errors=True)
        for wheel_path in wheels:
            wheel_path.unlink()
    version = json.loads(manifest.read_text())["collection_info"]["version"]
    return collections, version


def free_loopback() -> str:
    """A 127.x.y.z address whose port 22 is free (the whole 127/8 is this machine's loopback)."""
    for _attempt in range(20):
        address = "127.%d.%d.%d" % (random.randrange(1, 255), random.randrange(1, 255), random.randrange(2, 255))
        probe = socket.socket()
        try:
            probe.bind((address, 22))
            return address
        except OSError:
            continue
        finally:
            probe.close()
    raise RuntimeError("no loopback address with a free port 22")


class LoopbackSshd:
    """A root sshd on ``address``:22 that lets ``user`` in with ``public_key``."""

    def __init__(self, folder: pathlib.Path, address: str, public_key: str, user: str):
        self.folder, self.address = folder, address
        sshd = shutil.which("sshd") or "/usr/sbin/sshd"
        folder.mkdir(parents=True, exist_ok=True)
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(folder / "ssh_host_ed25519_key")],
                       check=True)
        (folder / "authorized_keys").write_text(public_key.strip() + "\n")
        config = folder / "sshd_config"
        config.write_text(SSHD_CONFIG.format(address=address, folder=folder, user=user))
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)   # root's sshd insists on it
        self.proc = subprocess.Popen([sshd, "-D", "-f", str(config), "-E", str(folder / "sshd.log")],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection((address, 22), timeout=1).close()
                return
            except OSError:
                if self.proc.poll() is not None:
                    break
                time.sleep(0.1)
        self.stop()
        raise RuntimeError("sshd did not start on %s:22: %s" % (address, (folder / "sshd.log").read_text()[-300:]))

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)


def point_public_ips_at(address: str) -> None:
    """Make the in-process moto server give every new instance ``address`` as its public IP."""
    from moto.ec2.models import elastic_network_interfaces

    elastic_network_interfaces.random_public_ip = lambda: address
