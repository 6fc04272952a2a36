"""gpuprov.cloud.offers / instance / instance_info on the lambda cloud, run by the real
ansible-playbook against the Lambda API fake (tests/fakes/lambda_api.py): the modules reach
the fake over HTTP from their own processes, the instance reaches Running with a real sshd
behind its ip, the collection's key logs in over SSH, and absent leaves nothing on the fake
(no instance, SSH key or firewall ruleset)."""

from __future__ import annotations

import getpass
import json
import sys

import pytest

pytest.importorskip("requests")

from ansible_collections.gpuprov.cloud.tests.fakes.lambda_api import LambdaApiFake  # noqa: E402
from ansible_collections.gpuprov.cloud.tests.integration.test_primitive_modules_e2e import Play  # noqa: E402

TASKS = """\
    - name: Plan an A10 on lambda (a dry run)
      gpuprov.cloud.offers:
        clouds: [lambda]
        gpu: A10
        cloud_options: "{{ opts }}"
      register: plan
    - name: Plan an H100 x8 (sold out everywhere)
      gpuprov.cloud.offers:
        clouds: [lambda]
        gpu: A100-80GB
        cloud_options: "{{ opts }}"
      register: soldout
    - name: One A10 instance
      gpuprov.cloud.instance:
        name: lam1
        cloud: lambda
        gpu: A10
        region: us-west-1
        cloud_options: "{{ opts }}"
      register: made
    - name: Wait until it runs with an endpoint
      gpuprov.cloud.instance_info:
        name: lam1
        cloud: lambda
        region: us-west-1
        cloud_options: "{{ opts }}"
      register: info
      until: info.instances | selectattr('usable') | list | length == 1
      retries: 10
      delay: 0
    - name: Log in with the collection's key
      ansible.builtin.command:
        argv: [ssh, -i, "{{ key }}", -p, "{{ info.instances[0].ssh_port }}", -o, BatchMode=yes,
               -o, StrictHostKeyChecking=no, -o, UserKnownHostsFile=/dev/null,
               "{{ info.instances[0].ssh_user }}@{{ info.instances[0].ssh_host }}", echo, lambda-login-ok]
      register: login
      changed_when: false
    - name: Remove it
      gpuprov.cloud.instance:
        name: lam1
        cloud: lambda
        region: us-west-1
        state: absent
        cloud_options: "{{ opts }}"
      register: gone
    - name: Observe it gone
      gpuprov.cloud.instance_info:
        name: lam1
        cloud: lambda
        region: us-west-1
        cloud_options: "{{ opts }}"
      register: after
"""


@pytest.fixture
def lambda_fake(tmp_path):
    fake = LambdaApiFake(str(tmp_path / "lambda-fake"), token="lambda-e2e-" + "5ecret")
    yield fake
    fake.stop()


def test_offers_instance_and_info_against_the_lambda_fake(ansible, tmp_path, lambda_fake):
    opts = {"lambda": {"api_url": lambda_fake.api_url, "ssh_user": getpass.getuser(),
                       "ssh_port": lambda_fake.ssh_port, "allowed_cidrs": ["127.0.0.0/8"], "poll_interval_s": 0.2}}
    play = Play(ansible, tmp_path, "Lambda", TASKS, ["plan", "soldout", "made", "info", "login", "gone", "after"])
    proc, recap, saved = play.run("-e", json.dumps({"opts": opts, "key": str(ansible.home / "id_ed25519")}),
                                  env={"LAMBDA_API_KEY": lambda_fake.token})
    assert proc.returncode == 0, proc.stdout[-6000:]
    assert recap["failed"] == 0, recap
    assert lambda_fake.token not in proc.stdout and lambda_fake.token not in json.dumps(saved)

    plan = saved["plan"]
    assert [(r["region"], r["instance_type"], r["price_per_hour"], r["available"]) for r in plan["offers"]] == [
        ("us-east-1", "gpu_1x_a10", 0.75, True), ("us-west-1", "gpu_1x_a10", 0.75, True)]
    soldout = saved["soldout"]["offers"]
    assert soldout and not any(r["available"] for r in soldout)
    assert soldout[0]["unavailable_reason"] == "lambda lists no capacity for gpu_8x_a100_80gb_sxm4 in any region"

    made = saved["made"]
    assert made["changed"] is True and made["offer"]["offer_id"] == "lambda:us-west-1:gpu_1x_a10"
    assert made["prepared"]["ssh_key_name"].startswith("gpuprov-lam1-")
    [launch] = lambda_fake.calls_of("instances.launch")
    assert launch[4]["name"] == "lam1" and {t["key"] for t in launch[4]["tags"]} == {
        "gpuprov-vm-name", "gpuprov-journal-id"}

    [running] = saved["info"]["instances"]
    assert running["status"] == "Running" and running["ssh_port"] == lambda_fake.ssh_port
    assert running["ssh_host"].startswith("127.0.0.") and running["ssh_user"] == getpass.getuser()
    assert saved["login"]["stdout"] == "lambda-login-ok"

    gone = saved["gone"]
    assert gone["changed"] is True and gone["deleted"] == [running["instance_id"]] and gone["cleaned_up"] is True
    assert saved["after"]["instances"] == []
    assert lambda_fake.resources() == set(), "absent left %s on the fake" % sorted(lambda_fake.resources())
    assert lambda_fake.sshd.running == {}


def test_provision_and_down_on_lambda_with_a_capacity_refusal_first(ansible, lambda_fake):
    """The whole launch machine on lambda: the first offer's launch is refused for capacity, the
    second comes up, the VM answers over SSH (the playbook's smoke command), and down leaves nothing."""
    lambda_fake.fail_capacity()
    # the "VM" is this machine's sshd: Ansible runs this Python there, as the local cloud does
    opts = {"lambda": {"api_url": lambda_fake.api_url, "ssh_user": getpass.getuser(),
                       "ssh_port": lambda_fake.ssh_port, "allowed_cidrs": ["127.0.0.0/8"], "poll_interval_s": 0.2,
                       "python_interpreter": sys.executable}}
    env = {"LAMBDA_API_KEY": lambda_fake.token}
    up = ansible.playbook("provision", "-e", "vm=lam2", "-e", "clouds=lambda", "-e", "gpu=A10", "-e", "k8s=false",
                          "-e", json.dumps({"gpuprov_cloud_options": opts}), extra_env=env)
    assert up.rc == 0, up
    assert "lam2 is up on lambda/us-west-1" in up.out and "offer 2 of 2" in up.out, up
    assert "instance-operations/launch/insufficient-capacity" in up.out, up
    assert "smoke command: Linux" in up.out, up
    assert len(lambda_fake.calls_of("instances.launch")) == 2 and len(lambda_fake.instances) == 1
    assert lambda_fake.token not in up.out

    down = ansible.playbook("down", "-e", "vm=lam2", "-e", json.dumps({"gpuprov_cloud_options": opts}),
                            extra_env=env)
    assert down.rc == 0, down
    assert lambda_fake.resources() == set(), "down left %s on the fake" % sorted(lambda_fake.resources())
