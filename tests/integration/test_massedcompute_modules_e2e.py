"""gpuprov.cloud.offers / instance / instance_info on the massedcompute cloud, run by the real
ansible-playbook against the Massed Compute API fake (tests/fakes/massedcompute_api.py): the
modules reach the fake over HTTP from their own processes, the instance reaches Running with a
real sshd behind its ip, the collection's key logs in over SSH as the username the API reports,
and absent leaves nothing on the fake (no instance, no SSH key)."""

from __future__ import annotations

import getpass
import json
import sys

import pytest

pytest.importorskip("requests")

from ansible_collections.gpuprov.cloud.tests.fakes.massedcompute_api import MassedComputeApiFake  # noqa: E402
from ansible_collections.gpuprov.cloud.tests.integration.test_primitive_modules_e2e import Play  # noqa: E402

TASKS = """\
    - name: Plan an L40 on massedcompute (a dry run)
      gpuprov.cloud.offers:
        clouds: [massedcompute]
        gpu: L40
        cloud_options: "{{ opts }}"
      register: plan
    - name: Plan 4 H100 NVL (sold out)
      gpuprov.cloud.offers:
        clouds: [massedcompute]
        gpu: H100-NVL
        gpu_count: 4
        cloud_options: "{{ opts }}"
      register: soldout
    - name: One L40 instance
      gpuprov.cloud.instance:
        name: mc1
        cloud: massedcompute
        gpu: L40
        region: us-central-3
        cloud_options: "{{ opts }}"
      register: made
    - name: Wait until it runs with an endpoint
      gpuprov.cloud.instance_info:
        name: mc1
        cloud: massedcompute
        region: us-central-3
        cloud_options: "{{ opts }}"
      register: info
      until: info.instances | selectattr('usable') | list | length == 1
      retries: 10
      delay: 0
    - name: Log in with the collection's key
      ansible.builtin.command:
        argv: [ssh, -i, "{{ key }}", -p, "{{ info.instances[0].ssh_port }}", -o, BatchMode=yes,
               -o, StrictHostKeyChecking=no, -o, UserKnownHostsFile=/dev/null,
               "{{ info.instances[0].ssh_user }}@{{ info.instances[0].ssh_host }}", echo, massed-login-ok]
      register: login
      changed_when: false
    - name: Remove it
      gpuprov.cloud.instance:
        name: mc1
        cloud: massedcompute
        region: us-central-3
        state: absent
        cloud_options: "{{ opts }}"
      register: gone
    - name: Observe it gone
      gpuprov.cloud.instance_info:
        name: mc1
        cloud: massedcompute
        region: us-central-3
        cloud_options: "{{ opts }}"
      register: after
"""


@pytest.fixture
def massed_fake(tmp_path):
    fake = MassedComputeApiFake(str(tmp_path / "massedcompute-fake"), token="massed-e2e-" + "5ecret")
    yield fake
    fake.stop()


def test_offers_instance_and_info_against_the_massedcompute_fake(ansible, tmp_path, massed_fake):
    opts = {"massedcompute": {"api_url": massed_fake.api_url, "ssh_port": massed_fake.ssh_port,
                              "poll_interval_s": 0.2}}
    play = Play(ansible, tmp_path, "MassedCompute", TASKS, ["plan", "soldout", "made", "info", "login", "gone",
                                                            "after"])
    proc, recap, saved = play.run("-e", json.dumps({"opts": opts, "key": str(ansible.home / "id_ed25519")}),
                                  env={"MASSED_COMPUTE_API_KEY": massed_fake.token})
    assert proc.returncode == 0, proc.stdout[-6000:]
    assert recap["failed"] == 0, recap
    assert massed_fake.token not in proc.stdout and massed_fake.token not in json.dumps(saved)

    plan = saved["plan"]
    assert [(r["region"], r["instance_type"], r["price_per_hour"], r["available"]) for r in plan["offers"]] == [
        ("us-central-1", "gpu_1x_l40", 0.86, True), ("us-central-3", "gpu_1x_l40", 0.86, True),
        ("us-central-1", "gpu_2x_l40", 1.72, True)]
    [soldout] = saved["soldout"]["offers"]
    assert not soldout["available"]
    assert soldout["unavailable_reason"] == "massedcompute lists no capacity for gpu_4x_h100_nvl_nvlink in any region"

    made = saved["made"]
    assert made["changed"] is True and made["offer"]["offer_id"] == "massedcompute:us-central-3:gpu_1x_l40"
    assert made["prepared"]["ssh_key_name"].startswith("gpuprov mc1 ")
    [launch] = massed_fake.calls_of("instance.launch")
    assert launch[4]["instanceName"].startswith("mc1_") and launch[4]["regionName"] == "us-central-3"

    [running] = saved["info"]["instances"]
    assert running["status"] == "Running" and running["ssh_port"] == massed_fake.ssh_port
    assert running["ssh_host"].startswith("127.0.0.") and running["ssh_user"] == getpass.getuser().lower()
    assert saved["login"]["stdout"] == "massed-login-ok"

    gone = saved["gone"]
    assert gone["changed"] is True and gone["deleted"] == [running["instance_id"]] and gone["cleaned_up"] is True
    assert saved["after"]["instances"] == []
    assert massed_fake.resources() == set(), "absent left %s on the fake" % sorted(massed_fake.resources())
    assert massed_fake.sshd.running == {}


def test_provision_and_down_on_massedcompute_with_a_capacity_refusal_first(ansible, massed_fake):
    """The whole launch machine on massedcompute: the first offer's launch is refused for
    capacity, the next comes up, the VM answers over SSH (the playbook's smoke command), and
    down leaves nothing."""
    massed_fake.fail_capacity()
    # the "VM" is this machine's sshd: Ansible runs this Python there, as the local cloud does
    opts = {"massedcompute": {"api_url": massed_fake.api_url, "ssh_port": massed_fake.ssh_port,
                              "poll_interval_s": 0.2, "python_interpreter": sys.executable}}
    env = {"MASSED_COMPUTE_API_KEY": massed_fake.token}
    up = ansible.playbook("provision", "-e", "vm=mc2", "-e", "clouds=massedcompute", "-e", "gpu=L40", "-e",
                          "k8s=false", "-e", json.dumps({"gpuprov_cloud_options": opts}), extra_env=env)
    assert up.rc == 0, up
    assert "mc2 is up on massedcompute/us-central-3" in up.out and "offer 2 of 3" in up.out, up
    assert "Out of stock" in up.out, up
    assert "smoke command: Linux" in up.out, up
    assert len(massed_fake.calls_of("instance.launch")) == 2 and len(massed_fake.instances) == 1
    assert massed_fake.token not in up.out

    down = ansible.playbook("down", "-e", "vm=mc2", "-e", json.dumps({"gpuprov_cloud_options": opts}),
                            extra_env=env)
    assert down.rc == 0, down
    assert massed_fake.resources() == set(), "down left %s on the fake" % sorted(massed_fake.resources())
