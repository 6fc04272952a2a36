"""gpuprov.cloud.offers / instance / instance_info on the digitalocean cloud, run by the real
ansible-playbook against the DigitalOcean API fake (tests/fakes/digitalocean_api.py): the modules
reach the fake over HTTP from their own processes, the droplet turns active with a real sshd
behind its public address, the collection's key logs in over SSH as the configured user, and
absent leaves nothing on the fake (no droplet, SSH key, firewall or firewall tag)."""

from __future__ import annotations

import getpass
import json
import sys

import pytest

pytest.importorskip("requests")

from ansible_collections.gpuprov.cloud.tests.fakes.digitalocean_api import DigitalOceanApiFake  # noqa: E402
from ansible_collections.gpuprov.cloud.tests.integration.test_primitive_modules_e2e import Play  # noqa: E402

TASKS = """\
    - name: Plan an RTX 4000 Ada on digitalocean (a dry run)
      gpuprov.cloud.offers:
        clouds: [digitalocean]
        gpu: RTX4000ADA
        cloud_options: "{{ opts }}"
      register: plan
    - name: Plan eight H200s (no region can create them)
      gpuprov.cloud.offers:
        clouds: [digitalocean]
        gpu: H200
        gpu_count: 8
        cloud_options: "{{ opts }}"
      register: soldout
    - name: One RTX 4000 Ada droplet
      gpuprov.cloud.instance:
        name: do1
        cloud: digitalocean
        gpu: RTX4000ADA
        region: tor1
        cloud_options: "{{ opts }}"
      register: made
    - name: Wait until it runs with an endpoint
      gpuprov.cloud.instance_info:
        name: do1
        cloud: digitalocean
        region: tor1
        cloud_options: "{{ opts }}"
      register: info
      until: info.instances | selectattr('usable') | list | length == 1
      retries: 10
      delay: 0
    - name: Log in with the collection's key
      ansible.builtin.command:
        argv: [ssh, -i, "{{ key }}", -p, "{{ info.instances[0].ssh_port }}", -o, BatchMode=yes,
               -o, StrictHostKeyChecking=no, -o, UserKnownHostsFile=/dev/null, -o, ConnectionAttempts=5,
               "{{ info.instances[0].ssh_user }}@{{ info.instances[0].ssh_host }}", echo, do-login-ok]
      register: login
      changed_when: false
      retries: 5
      delay: 1
      until: login.rc == 0
    - name: Remove it
      gpuprov.cloud.instance:
        name: do1
        cloud: digitalocean
        region: tor1
        state: absent
        cloud_options: "{{ opts }}"
      register: gone
    - name: Observe it gone
      gpuprov.cloud.instance_info:
        name: do1
        cloud: digitalocean
        region: tor1
        cloud_options: "{{ opts }}"
      register: after
"""


@pytest.fixture
def do_fake(tmp_path):
    fake = DigitalOceanApiFake(str(tmp_path / "digitalocean-fake"), token="do-e2e-" + "5ecret")
    yield fake
    fake.stop()


def test_offers_instance_and_info_against_the_digitalocean_fake(ansible, tmp_path, do_fake):
    opts = {"digitalocean": {"api_url": do_fake.api_url, "ssh_user": getpass.getuser(), "ssh_port": do_fake.ssh_port,
                             "allowed_cidrs": ["127.0.0.0/8"], "poll_interval_s": 0.2}}
    play = Play(ansible, tmp_path, "DigitalOcean", TASKS, ["plan", "soldout", "made", "info", "login", "gone",
                                                           "after"])
    proc, recap, saved = play.run("-e", json.dumps({"opts": opts, "key": str(ansible.home / "id_ed25519")}),
                                  env={"DIGITALOCEAN_TOKEN": do_fake.token})
    assert proc.returncode == 0, proc.stdout[-6000:]
    assert recap["failed"] == 0, recap
    assert do_fake.token not in proc.stdout and do_fake.token not in json.dumps(saved)

    plan = saved["plan"]
    assert [(r["region"], r["instance_type"], r["price_per_hour"], r["available"]) for r in plan["offers"]] == [
        ("atl1", "gpu-4000adax1-20gb", 0.76, True), ("nyc2", "gpu-4000adax1-20gb", 0.76, True),
        ("tor1", "gpu-4000adax1-20gb", 0.76, True)]
    soldout = saved["soldout"]["offers"]
    assert soldout and not any(r["available"] for r in soldout)
    assert soldout[0]["unavailable_reason"] == "digitalocean lists gpu-h200x8-1128gb as creatable in no region"

    made = saved["made"]
    assert made["changed"] is True and made["offer"]["offer_id"] == "digitalocean:tor1:gpu-4000adax1-20gb"
    [create] = do_fake.calls_of("droplets.create")
    body = create[4]
    assert body["name"] == "do1" and body["tags"][0] == "gpuprov-vm-name:do1"
    assert body["tags"][1].startswith("gpuprov-journal-id:") and body["tags"][2].startswith("gpuprov-firewall:")

    [running] = saved["info"]["instances"]
    assert running["status"] == "Running" and running["ssh_port"] == do_fake.ssh_port
    assert running["ssh_host"].startswith("127.0.0.") and running["ssh_user"] == getpass.getuser()
    assert saved["login"]["stdout"] == "do-login-ok"
    [firewall_call] = do_fake.calls_of("firewalls.create")
    assert {r["sources"]["addresses"][0] for r in firewall_call[4]["inbound_rules"]} == {"127.0.0.0/8"}

    gone = saved["gone"]
    assert gone["changed"] is True and gone["deleted"] == [running["instance_id"]] and gone["cleaned_up"] is True
    assert saved["after"]["instances"] == []
    assert do_fake.resources() == set(), "absent left %s on the fake" % sorted(do_fake.resources())
    assert do_fake.sshd.running == {}


def test_provision_and_down_on_digitalocean_past_a_capacity_refusal(ansible, do_fake):
    """The whole launch machine on digitalocean: the first offer's create is refused for capacity
    (DigitalOcean's 422), the next comes up, the VM answers over SSH (the playbook's smoke command),
    and down leaves nothing."""
    do_fake.fail_capacity()
    # the "VM" is this machine's sshd: Ansible runs this Python there, as the local cloud does
    opts = {"digitalocean": {"api_url": do_fake.api_url, "ssh_user": getpass.getuser(), "ssh_port": do_fake.ssh_port,
                             "allowed_cidrs": ["127.0.0.0/8"], "poll_interval_s": 0.2,
                             "python_interpreter": sys.executable}}
    env = {"DIGITALOCEAN_TOKEN": do_fake.token}
    up = ansible.playbook("provision", "-e", "vm=do2", "-e", "clouds=digitalocean", "-e", "gpu=RTX4000ADA",
                          "-e", "k8s=false", "-e", json.dumps({"gpuprov_cloud_options": opts}), extra_env=env)
    assert up.rc == 0, up
    assert "do2 is up on digitalocean/nyc2" in up.out and "offer 2 of 3" in up.out, up
    assert "Size is not available in this region" in up.out, up
    assert "smoke command: Linux" in up.out, up
    assert len(do_fake.calls_of("droplets.create")) == 2 and len(do_fake.droplets) == 1
    assert do_fake.token not in up.out

    down = ansible.playbook("down", "-e", "vm=do2", "-e", json.dumps({"gpuprov_cloud_options": opts}), extra_env=env)
    assert down.rc == 0, down
    assert do_fake.resources() == set(), "down left %s on the fake" % sorted(do_fake.resources())
