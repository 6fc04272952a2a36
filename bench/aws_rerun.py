"""Benchmark: an idempotent `gpuprov.cloud.instance` re-run on aws (moto) above the
`ansible-playbook` floor.

moto's EC2 server (tests/fakes/moto_ec2.py) runs in this process; the module processes reach
it over HTTP with fake credentials. One instance is created first; then each round runs, back
to back (interleaved): a play of one debug task (the floor) and a play whose one task is the
same `instance` again (unchanged). Printed: the medians and the re-run's time above the floor,
never asserted. amazon.aws's ec2_instance (the issue's peer) is not installed in this
environment, so it has no row here.

Run: make dev && .venv/bin/python bench/aws_rerun.py [rounds]
"""

from __future__ import annotations

import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
COLLECTIONS = REPO / "build" / "collections"
sys.path.insert(0, str(COLLECTIONS))

from ansible_collections.gpuprov.cloud.tests.fakes import moto_ec2 as aws_fake  # noqa: E402

BIN = pathlib.Path(sys.executable).parent
HEADER = "- hosts: localhost\n  gather_facts: false\n  tasks:\n"
INSTANCE = """    - gpuprov.cloud.instance:
        name: bench1
        cloud: aws
        gpu: T4
        region: us-east-1
        instance_type: g4dn.xlarge
        cloud_options: "{{ opts }}"
"""


def _run(home: pathlib.Path, text: str, opts) -> float:
    play = home / "play.yml"
    play.write_text(HEADER + text)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "AWS_PROFILE", "AWS_SESSION_TOKEN")}
    env.update(aws_fake.FAKE_ENV, GPUPROV_HOME=str(home), ANSIBLE_COLLECTIONS_PATH=str(COLLECTIONS))
    started = time.perf_counter()
    subprocess.run([str(BIN / "ansible-playbook"), str(play), "-e", json.dumps({"opts": opts})], env=env,
                   check=True, cwd=str(home), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    server = aws_fake.shared_server()
    creds = server.new_account()
    opts = {"aws": dict(creds, endpoint_url=server.endpoint_url, regions=["us-east-1"],
                        allowed_cidrs=["198.51.100.7/32"], ami_name_filter="Deep Learning AMI Ubuntu Linux*",
                        controller_ip_url="")}
    floor, rerun = [], []
    with tempfile.TemporaryDirectory() as tmp:
        home = pathlib.Path(tmp)
        _run(home, INSTANCE, opts)   # creates it
        for _round in range(rounds):
            floor.append(_run(home, "    - ansible.builtin.debug: {msg: hi}\n", opts))
            rerun.append(_run(home, INSTANCE, opts))
    base, again = statistics.median(floor), statistics.median(rerun)
    print("ansible-playbook, one debug task:          median %.3f s" % base)
    print("gpuprov.cloud.instance on aws, re-run:     median %.3f s  above the floor %.3f s  (%d rounds)"
          % (again, again - base, rounds))


if __name__ == "__main__":
    main()
