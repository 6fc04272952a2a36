"""gpuprov.cloud.offers / instance / instance_info on the hyperstack cloud, run by the real
ansible-playbook against the Hyperstack API fake (tests/fakes/hyperstack_api.py): the modules
reach the fake over HTTP from their own processes, the VM reaches Running with a real sshd
behind its floating IP, the collection's key logs in over SSH, and absent leaves nothing on
the fake (no VM, key or environment)."""

from __future__ import annotations

import getpass
import json
import sys

import pytest

pytest.importorskip("requests")

from ansible_collections.gpuprov.cloud.tests.fakes.hyperstack_api import HyperstackApiFake  # noqa: E402
from ansible_collections.gpuprov.cloud.tests.integration.test_primitive_modules_e2e import Play  # noqa: E402

TASKS = """\
    - name: Plan an A100 80GB on hyperstack (a dry run)
      gpuprov.cloud.offers:
        clouds: [hyperstack]
        gpu: A100-80GB
        cloud_options: "{{ opts }}"
      register: plan
    - name: One A100 VM
      gpuprov.cloud.instance:
        name: hs1
        cloud: hyperstack
        gpu: A100-80GB
        region: CANADA-1
        cloud_options: "{{ opts }}"
      register: made
    - name: Wait until it runs with an endpoint
      gpuprov.cloud.instance_info:
        name: hs1
        cloud: hyperstack
        region: CANADA-1
        cloud_options: "{{ opts }}"
      register: info
      until: info.instances | selectattr('usable') | list | length == 1
      retries: 10
      delay: 0
    - name: Log in with the collection's key
      ansible.builtin.command:
        argv: [ssh, -i, "{{ key }}", -p, "{{ info.instances[0].ssh_port }}", -o, BatchMode=yes,
               -o, StrictHostKeyChecking=no, -o, UserKnownHostsFile=/dev/null, -o, ConnectionAttempts=5,
               "{{ info.instances[0].ssh_user }}@{{ info.instances[0].ssh_host }}", echo, hyperstack-login-ok]
      register: login
      until: login.rc == 0
      retries: 5
      delay: 1
      changed_when: false
    - name: Remove it
      gpuprov.cloud.instance:
        name: hs1
        cloud: hyperstack
        region: CANADA-1
        state: absent
        cloud_options: "{{ opts }}"
      register: gone
    - name: Observe it gone
      gpuprov.cloud.instance_info:
        name: hs1
        cloud: hyperstack
        region: CANADA-1
        cloud_options: "{{ opts }}"
      register: after
"""


@pytest.fixture
def hyperstack_fake(tmp_path):
    fake = HyperstackApiFake(str(tmp_path / "hyperstack-fake"), token="hyperstack-e2e-" + "5ecret")
    yield fake
    fake.stop()


def _opts(fake, **extra):
    return {"hyperstack": dict({"api_url": fake.api_url, "ssh_user": getpass.getuser(), "ssh_port": fake.ssh_port,
                                "allowed_cidrs": ["127.0.0.0/8"], "poll_interval_s": 0.2}, **extra)}


def test_offers_instance_and_info_against_the_hyperstack_fake(ansible, tmp_path, hyperstack_fake):
    fake = hyperstack_fake
    play = Play(ansible, tmp_path, "Hyperstack", TASKS, ["plan", "made", "info", "login", "gone", "after"])
    proc, recap, saved = play.run("-e", json.dumps({"opts": _opts(fake), "key": str(ansible.home / "id_ed25519")}),
                                  env={"HYPERSTACK_API_KEY": fake.token})
    assert proc.returncode == 0, proc.stdout[-6000:]
    assert recap["failed"] == 0, recap
    assert fake.token not in proc.stdout and fake.token not in json.dumps(saved)

    offers = saved["plan"]["offers"]
    assert [(r["region"], r["instance_type"], r["price_per_hour"], r["available"]) for r in offers] == [
        ("CANADA-1", "n3-A100x1", 1.35, True), ("NORWAY-1", "n3-A100x1", 1.35, False),
        ("CANADA-1", "n3-A100x8", 10.8, False)]
    assert offers[1]["unavailable_reason"] == "hyperstack lists no stock of n3-A100x1 in NORWAY-1"

    made = saved["made"]
    assert made["changed"] is True and made["offer"]["offer_id"] == "hyperstack:CANADA-1:n3-A100x1"
    assert made["prepared"]["environment_name"] == "gpuprov-CANADA-1"
    assert made["prepared"]["key_name"].startswith("gpuprov-hs1-")
    [create] = fake.calls_of("vms.create")
    assert create[4]["name"] == "hs1" and create[4]["enable_port_randomization"] is False
    assert {label.split("=")[0] for label in create[4]["labels"]} == {"gpuprov-vm-name", "gpuprov-journal-id"}
    assert {r["remote_ip_prefix"] for r in create[4]["security_rules"]} == {"127.0.0.0/8"}

    [running] = saved["info"]["instances"]
    assert running["status"] == "Running" and running["ssh_port"] == fake.ssh_port
    assert running["ssh_host"].startswith("127.0.0.") and running["ssh_user"] == getpass.getuser()
    assert saved["login"]["stdout"] == "hyperstack-login-ok"

    gone = saved["gone"]
    assert gone["changed"] is True and gone["deleted"] == [running["instance_id"]] and gone["cleaned_up"] is True
    assert saved["after"]["instances"] == []
    assert fake.resources() == set(), "absent left %s on the fake" % sorted(fake.resources())
    assert fake.sshd.running == {}


def test_provision_and_down_on_hyperstack_with_a_capacity_refusal_first(ansible, hyperstack_fake):
    """The whole launch machine on hyperstack: the first offer's create is refused (out of stock),
    the next comes up in another region, the VM answers over SSH (the playbook's smoke command),
    and down leaves nothing: no VM, key or environment in either region."""
    fake = hyperstack_fake
    fake.fail_capacity()
    # the "VM" is this machine's sshd: Ansible runs this Python there, as the local cloud does
    opts = _opts(fake, python_interpreter=sys.executable)
    env = {"HYPERSTACK_API_KEY": fake.token}
    up = ansible.playbook("provision", "-e", "vm=hs2", "-e", "clouds=hyperstack", "-e", "gpu=H100", "-e",
                          "k8s=false", "-e", json.dumps({"gpuprov_cloud_options": opts}), extra_env=env)
    assert up.rc == 0, up
    assert "hs2 is up on hyperstack/US-1" in up.out and "offer 2 of" in up.out, up
    assert "out of stock" in up.out, up
    assert "smoke command: Linux" in up.out, up
    assert len(fake.calls_of("vms.create")) == 2 and len(fake.instances) == 1
    assert fake.token not in up.out

    down = ansible.playbook("down", "-e", "vm=hs2", "-e", json.dumps({"gpuprov_cloud_options": opts}), extra_env=env)
    assert down.rc == 0, down
    assert fake.resources() == set(), "down left %s on the fake" % sorted(fake.resources())
