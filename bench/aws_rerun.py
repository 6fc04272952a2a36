"""Benchmark: idempotent re-runs on aws (moto) above the `ansible-playbook` floor, beside the
issue's peer, amazon.aws's `ec2_instance`.

moto's EC2 server (tests/fakes/moto_ec2.py) runs in this process; the module processes reach
it over HTTP with fake credentials of one fresh moto account. Each row's resource is made once
first; then each round runs, back to back (interleaved, the order rotating by round), one
ansible-playbook per row:

  floor          a play of one debug task
  instance       `gpuprov.cloud.instance` (g4dn.xlarge, us-east-1) again, unchanged
  ec2_instance   `amazon.aws.ec2_instance` of an equivalent instance (g4dn.xlarge, us-east-1, the
                 DLAMI the adapter picks, found by its Name tag, state running) again
  vm             `gpuprov.cloud.vm` (clouds [aws], gpu T4, regions [us-east-1]) again: it observes
                 the journalled instance and logs in over SSH, as every re-run does

Printed, never asserted: each row's medians of wall seconds and of CPU seconds (ansible-playbook
and every process under it; steadier than wall on a shared machine, and blind to what moto and
sshd spend), both above the floor's, the issue's ratios of them (instance/ec2_instance and
vm/ec2_instance), how many re-runs said changed, and the AWS calls one re-run of each row made.

amazon.aws is not a requirement of the collection: bench/aws_peer.py downloads the community
`ansible` wheel that pairs with the installed ansible-core from PyPI (`pip download --no-deps`)
into build/bench and extracts only ansible_collections/amazon/aws to build/bench/collections,
once (boto3/botocore are already in .venv). If that fails, the ec2_instance row is skipped
with the reason and the rest still runs.

The vm row's SSH login: moto's instances get a loopback public IP (its generator is patched in
this process), where a root sshd of the bench listens on port 22 and lets the bench's key in as
root (cloud_options.aws.ssh_user). Without root or sshd, the vm row is skipped with the reason.

Run: make dev && .venv/bin/python bench/aws_rerun.py [rounds]
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional, Tuple

REPO = pathlib.Path(__file__).resolve().parents[1]
COLLECTIONS = REPO / "build" / "collections"
BENCH_BUILD = REPO / "build" / "bench"
sys.path.insert(0, str(COLLECTIONS))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

# pylint: disable=wrong-import-position
from ansible_collections.gpuprov.cloud.tests.fakes import moto_ec2 as aws_fake  # noqa: E402
import aws_peer  # noqa: E402

BIN = pathlib.Path(sys.executable).parent
REGION = "us-east-1"
INSTANCE_TYPE = "g4dn.xlarge"
DLAMI_FILTER = "Deep Learning AMI Ubuntu Linux*"
HEADER = "- hosts: localhost\n  gather_facts: false\n  tasks:\n"
FLOOR = "    - ansible.builtin.debug: {msg: hi}\n"
INSTANCE = """    - gpuprov.cloud.instance:
        name: bench1
        cloud: aws
        gpu: T4
        region: us-east-1
        instance_type: g4dn.xlarge
        cloud_options: "{{ opts }}"
"""
EC2_INSTANCE = """    - amazon.aws.ec2_instance:
        name: bench-peer
        instance_type: g4dn.xlarge
        image_id: "{{ ami }}"
        region: us-east-1
        state: running
        endpoint_url: "{{ opts.aws.endpoint_url }}"
        access_key: "{{ opts.aws.aws_access_key_id }}"
        secret_key: "{{ opts.aws.aws_secret_access_key }}"
"""
VM = """    - gpuprov.cloud.vm:
        name: benchvm
        clouds: [aws]
        gpu: T4
        regions: [us-east-1]
        ssh_timeout: 60
        cloud_options: "{{ vm_opts }}"
"""


class PlayFailed(Exception):
    """A play of the bench failed; the message holds the play and the tail of its output."""


_RECAP = re.compile(r"^localhost\s*:.*\bchanged=(\d+).*\bfailed=(\d+)", re.M)


class Bench:
    """One GPUPROV_HOME and one set of extra vars for every play; each play times one run."""

    def __init__(self, home: pathlib.Path, extra: Dict[str, object], collections_path: str, server, account: str):
        self.home, self.extra = home, extra
        self.server, self.account = server, account
        self.last_calls: List[str] = []   # the AWS actions the last play made, in order
        self.env = {k: v for k, v in os.environ.items()
                    if k not in ("PYTHONPATH", "AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL",
                                 "AWS_ENDPOINT_URL_EC2")}
        self.env.update(aws_fake.FAKE_ENV, GPUPROV_HOME=str(home), ANSIBLE_COLLECTIONS_PATH=collections_path)

    def run(self, text: str) -> Tuple[float, float, int]:
        """(wall seconds, CPU seconds of ansible-playbook and every process under it, the recap's changed
        count); PlayFailed with the play's output if it failed."""
        play = self.home / "play.yml"
        play.write_text(HEADER + text)
        seen = len(self.server.calls(account=self.account))
        cpu = _children_cpu()
        started = time.perf_counter()
        done = subprocess.run([str(BIN / "ansible-playbook"), str(play), "-e", json.dumps(self.extra)],
                              env=self.env, cwd=str(self.home), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, check=False)
        wall = time.perf_counter() - started
        cpu = _children_cpu() - cpu
        self.last_calls = [c["action"] for c in self.server.calls(account=self.account)[seen:]]
        recap = _RECAP.search(done.stdout)
        if done.returncode != 0 or not recap or recap.group(2) != "0":
            raise PlayFailed("a play failed (rc %d):\n%s\n%s" % (done.returncode, text, done.stdout[-2000:]))
        return wall, cpu, int(recap.group(1))


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def newest_dlami(server, creds) -> str:
    """The AMI the adapter's filter finds (owner amazon, newest first), for the peer's image_id."""
    images = server.client("ec2", REGION, creds).describe_images(
        Owners=["amazon"], Filters=[{"Name": "name", "Values": [DLAMI_FILTER]}])["Images"]
    return max(images, key=lambda image: image.get("CreationDate", ""))["ImageId"]


def start_sshd(folder: pathlib.Path, key: pathlib.Path) -> Tuple[Optional[aws_peer.LoopbackSshd], str]:
    """A root sshd behind moto's instance address that lets ``key`` in, or (None, why not)."""
    if os.geteuid() != 0:
        return None, "the bench is not root, so it cannot run an sshd on port 22 (the aws adapter's port)"
    if not (shutil.which("sshd") or os.path.exists("/usr/sbin/sshd")):
        return None, "openssh-server (sshd) is not installed"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "bench", "-f", str(key)], check=True)
    try:
        address = aws_peer.free_loopback()
        sshd = aws_peer.LoopbackSshd(folder, address, (key.parent / (key.name + ".pub")).read_text(), "root")
    except (RuntimeError, OSError, subprocess.CalledProcessError) as exc:
        return None, str(exc)
    try:
        aws_peer.point_public_ips_at(address)
    except (ImportError, AttributeError) as exc:   # another moto layout
        sshd.stop()
        return None, "cannot point moto's public IPs at the sshd: %s" % exc
    return sshd, ""


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    peer, peer_note = aws_peer.ensure_amazon_aws(BENCH_BUILD)
    if peer is None:
        print("ec2_instance row skipped: %s" % peer_note)
    collections_path = str(COLLECTIONS) + ("" if peer is None else os.pathsep + str(peer))
    server = aws_fake.shared_server()
    creds = server.new_account()
    aws = dict(creds, endpoint_url=server.endpoint_url, regions=[REGION], allowed_cidrs=["198.51.100.7/32"],
               ami_name_filter=DLAMI_FILTER, controller_ip_url="")
    extra = {"opts": {"aws": aws}, "vm_opts": {"aws": dict(aws, ssh_user="root")},
             "ami": newest_dlami(server, creds)}
    rows: Dict[str, str] = {"floor": FLOOR, "instance": INSTANCE}
    if peer is not None:
        rows["ec2_instance"] = EC2_INSTANCE
    times: Dict[str, List[float]] = {}
    cpus: Dict[str, List[float]] = {}
    changed: Dict[str, int] = {}
    calls: Dict[str, List[str]] = {}
    logins = 0
    with tempfile.TemporaryDirectory() as tmp:
        home = pathlib.Path(tmp) / "home"
        home.mkdir()
        sshd, sshd_note = start_sshd(pathlib.Path(tmp) / "sshd", home / "id_ed25519")
        if sshd is None:
            print("vm row skipped: %s" % sshd_note)
        else:
            rows["vm"] = VM
        try:
            bench = Bench(home, extra, collections_path, server, creds["aws_access_key_id"])
            for name, text in list(rows.items()):
                try:
                    if name != "floor":
                        bench.run(text)   # makes it
                    times[name], cpus[name], changed[name] = [], [], 0
                except PlayFailed as exc:
                    print("%s row skipped: making it failed: %s" % (name, exc))
                    del rows[name]
            names = list(rows)
            for round_no in range(rounds):
                for name in names[round_no % len(names):] + names[:round_no % len(names)]:
                    try:
                        wall, cpu, count = bench.run(rows[name])
                    except PlayFailed as exc:
                        sys.exit("the %s re-run of round %d: %s" % (name, round_no + 1, exc))
                    times[name].append(wall)
                    cpus[name].append(cpu)
                    changed[name] += count
                    calls[name] = bench.last_calls
        finally:
            if sshd is not None:
                sshd.stop()
                logins = (sshd.folder / "sshd.log").read_text().count("Accepted publickey for root")
        report(times, cpus, changed, rounds, peer_note if peer is not None else "")
    for name, actions in calls.items():
        if name != "floor":
            print("  AWS calls of one %s re-run: %s" % (name, ", ".join(
                "%s x%d" % (action, actions.count(action)) for action in sorted(set(actions))) or "none"))
    if sshd is not None:
        print("  SSH logins the bench's sshd accepted: %d (the vm row's create and %d re-runs)" % (logins, rounds))


def report(times: Dict[str, List[float]], cpus: Dict[str, List[float]], changed: Dict[str, int], rounds: int,
           peer_version: str) -> None:
    labels = {"floor": "ansible-playbook, one debug task",
              "instance": "gpuprov.cloud.instance re-run",
              "ec2_instance": "amazon.aws.ec2_instance %s re-run" % peer_version,
              "vm": "gpuprov.cloud.vm re-run (aws)"}
    print("%d interleaved rounds on moto; medians of wall (min-max) and of CPU (ansible-playbook and its children),"
          " and each above the floor's:" % rounds)
    above: Dict[str, Dict[str, float]] = {"wall": {}, "CPU": {}}
    for name in times:
        wall, cpu = statistics.median(times[name]), statistics.median(cpus[name])
        above["wall"][name] = wall - statistics.median(times["floor"])
        above["CPU"][name] = cpu - statistics.median(cpus["floor"])
        line = "  %-42s wall %.3f s (%.3f-%.3f)  CPU %.3f s" % (
            labels[name], wall, min(times[name]), max(times[name]), cpu)
        if name != "floor":
            line += "  above the floor: wall %.3f s, CPU %.3f s; changed in %d of %d" % (
                above["wall"][name], above["CPU"][name], changed[name], rounds)
        print(line)
    for kind, values in above.items():
        peer = values.get("ec2_instance")
        if peer is None or peer <= 0:
            print("  no %s ratios: the ec2_instance row %s" % (
                kind, "was skipped" if peer is None else "is not above the floor"))
            continue
        line = "  %s above the floor: instance / ec2_instance %.2f (goal <= 1.0)" % (kind, values["instance"] / peer)
        if "vm" in values:
            line += ", vm / ec2_instance %.2f (goal <= 0.5)" % (values["vm"] / peer)
        print(line)


if __name__ == "__main__":
    main()
