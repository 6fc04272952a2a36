"""gpuprov.cloud.offers, instance (present, then absent) and instance_info on the runpod cloud,
run by the real ansible-playbook against the RunPod v2 fake (tests/fakes/runpod_api.py),
with a real SSH login to the pod's sshd through the endpoint instance_info reports."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

pytest.importorskip("requests")

from ansible_collections.gpuprov.cloud.tests.fakes.runpod_api import RunpodApiFake  # noqa: E402
from ansible_collections.gpuprov.cloud.tests.integration.test_primitive_modules_e2e import Play  # noqa: E402


@pytest.fixture
def runpod_fake(tmp_path):
    fake = RunpodApiFake(str(tmp_path / "runpod-fake"))
    yield fake
    fake.stop()


TASKS = """\
    - name: Plan an RTX 4090 on runpod
      gpuprov.cloud.offers:
        clouds: [runpod]
        gpu: RTX4090
        cloud_options: "{{ opts }}"
      register: plan
    - name: One pod, twice
      gpuprov.cloud.instance:
        name: rp1
        cloud: runpod
        gpu: RTX4090
        cloud_options: "{{ opts }}"
      register: first
      loop: [1, 2]
    - name: Observe it until it runs (the fake boots on the second read)
      gpuprov.cloud.instance_info:
        name: rp1
        cloud: runpod
        region: "{{ first.results[0].location.region }}"
        cloud_options: "{{ opts }}"
      register: info
      until: info.instances | length > 0 and info.instances[0].ssh_host is truthy
      retries: 3
      delay: 0
"""
REMOVE = """\
    - name: Remove it, twice
      gpuprov.cloud.instance:
        name: rp1
        cloud: runpod
        region: "{{ region }}"
        state: absent
        cloud_options: "{{ opts }}"
      register: gone
      loop: [1, 2]
    - name: Observe nothing
      gpuprov.cloud.instance_info:
        name: rp1
        cloud: runpod
        region: "{{ region }}"
        cloud_options: "{{ opts }}"
      register: info
"""


def test_offers_instance_and_info_on_the_runpod_fake(runpod_fake, ansible, tmp_path):
    secret = runpod_fake.token = "rp-secret-" + os.urandom(6).hex()
    opts = {"runpod": {"api_url": runpod_fake.api_url, "api_key": secret}}
    play = Play(ansible, tmp_path, "Runpod", TASKS, ["plan", "first", "info"])
    proc, recap, saved = play.run("-vvv", "-e", json.dumps({"opts": opts}))
    assert proc.returncode == 0, proc.stdout[-6000:]
    assert secret not in proc.stdout and secret not in json.dumps(saved)

    plan = saved["plan"]
    assert [(r["cloud"], r["region"], r["price_per_hour"], r["available"]) for r in plan["offers"]] == [
        ("runpod", "US-TX-3", 0.69, True), ("runpod", "EU-RO-1", 0.69, True)]
    assert plan["offers"][0]["instance_type"] == "NVIDIA GeForce RTX 4090 x1"

    made, again = saved["first"]["results"]
    assert made["changed"] is True and again["changed"] is False
    pod_id = made["instance"]["instance_id"]
    assert again["instance"]["instance_id"] == pod_id and list(runpod_fake.pods) == [pod_id]
    assert len(runpod_fake.calls_of("pods.create")) == 1
    assert made["prepared"]["ssh_key_name"].startswith("gpuprov-rp1-")
    pod = runpod_fake.pods[pod_id]
    assert pod["name"] == "rp1" and pod["env"]["GPUPROV_VM_NAME"] == "rp1" and pod["env"]["GPUPROV_JOURNAL_ID"]
    # the key is registered under its gpuprov name (and also rides in the pod's env)
    assert runpod_fake.account_keys == [pod["env"]["PUBLIC_KEY"]]
    assert pod["env"]["PUBLIC_KEY"].endswith(" " + made["prepared"]["ssh_key_name"])

    [seen] = saved["info"]["instances"]
    assert seen["instance_id"] == pod_id and seen["status"] == "Running"
    direct = pod["ssh"]["direct"]
    reported = (seen["ssh_host"], seen["ssh_port"], seen["ssh_user"])
    assert reported == (direct["host"], direct["port"], direct["username"])

    # A real login with the collection's key, through the endpoint RunPod reported.
    login = subprocess.run(
        ["ssh", "-i", str(ansible.home / "id_ed25519"), "-p", str(seen["ssh_port"]), "-o", "BatchMode=yes",
         "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "IdentitiesOnly=yes",
         "%s@%s" % (seen["ssh_user"], seen["ssh_host"]), "echo gpuprov-runpod-ok"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60, check=False)
    assert login.returncode == 0 and "gpuprov-runpod-ok" in login.stdout, login.stdout

    remove = Play(ansible, tmp_path, "Runpod absent", REMOVE, ["gone", "info"])
    proc, recap, saved = remove.run("-e", json.dumps({"opts": opts, "region": made["location"]["region"]}))
    assert proc.returncode == 0, proc.stdout[-6000:]
    removed, noop = saved["gone"]["results"]
    assert removed["changed"] is True and removed["deleted"] == [pod_id] and removed["cleaned_up"] is True
    assert noop["changed"] is False and noop["deleted"] == []
    assert saved["info"]["instances"] == []
    # nothing left on the fake: no pod, no sshd, no account key
    assert runpod_fake.pods == {} and runpod_fake.sshd.running == {} and runpod_fake.account_keys == []
