"""gpuprov.cloud.offers / instance / instance_info on the nebius cloud, run by the real
ansible-playbook against the Nebius gRPC fake (tests/fakes/nebius_grpc.py): the modules
reach the fake through the official SDK from their own processes (plaintext gRPC on
loopback), the instance reaches RUNNING with a real sshd behind its public address, the
collection's key (delivered by cloud-init user data) logs in over SSH, and absent leaves
nothing on the fake (no instance, boot disk, security group or rule)."""

from __future__ import annotations

import getpass
import json
import sys

import pytest

pytest.importorskip("nebius")

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.nebius import catalog  # noqa: E402
from ansible_collections.gpuprov.cloud.tests.fakes.nebius_grpc import NebiusGrpcFake  # noqa: E402
from ansible_collections.gpuprov.cloud.tests.integration.test_primitive_modules_e2e import Play  # noqa: E402

TASKS = """\
    - name: Plan an H100 on nebius (a dry run)
      gpuprov.cloud.offers:
        clouds: [nebius]
        gpu: H100
        cloud_options: "{{ opts }}"
      register: plan
    - name: One H100 instance
      gpuprov.cloud.instance:
        name: neb1
        cloud: nebius
        gpu: H100
        region: eu-north1
        cloud_options: "{{ opts }}"
      register: made
    - name: Wait until it runs with an endpoint
      gpuprov.cloud.instance_info:
        name: neb1
        cloud: nebius
        region: eu-north1
        cloud_options: "{{ opts }}"
      register: info
      until: info.instances | selectattr('usable') | list | length == 1
      retries: 10
      delay: 0
    - name: Log in with the collection's key
      ansible.builtin.command:
        argv: [ssh, -i, "{{ key }}", -p, "{{ info.instances[0].ssh_port }}", -o, BatchMode=yes,
               -o, StrictHostKeyChecking=no, -o, UserKnownHostsFile=/dev/null, -o, ConnectionAttempts=5,
               "{{ info.instances[0].ssh_user }}@{{ info.instances[0].ssh_host }}", echo, nebius-login-ok]
      register: login
      until: login.rc == 0
      retries: 5
      delay: 1
      changed_when: false
    - name: Remove it
      gpuprov.cloud.instance:
        name: neb1
        cloud: nebius
        region: eu-north1
        state: absent
        cloud_options: "{{ opts }}"
      register: gone
    - name: Observe it gone
      gpuprov.cloud.instance_info:
        name: neb1
        cloud: nebius
        region: eu-north1
        cloud_options: "{{ opts }}"
      register: after
"""


@pytest.fixture
def nebius_fake(tmp_path):
    fake = NebiusGrpcFake(str(tmp_path / "nebius-fake"), token="nebius-e2e-" + "5ecret")
    yield fake
    fake.stop()


def options(fake, **extra):
    opts = {"api_endpoint": fake.api_endpoint, "api_insecure": True, "project_id": fake.project_id,
            "ssh_user": getpass.getuser(), "ssh_port": fake.ssh_port, "allowed_cidrs": ["127.0.0.0/8"],
            "poll_interval_s": 0.2}
    opts.update(extra)
    return {"nebius": opts}


def test_offers_instance_and_info_against_the_nebius_fake(ansible, tmp_path, nebius_fake):
    play = Play(ansible, tmp_path, "Nebius", TASKS, ["plan", "made", "info", "login", "gone", "after"])
    proc, recap, saved = play.run("-e", json.dumps({"opts": options(nebius_fake),
                                                    "key": str(ansible.home / "id_ed25519")}),
                                  env={"NEBIUS_IAM_TOKEN": nebius_fake.token})
    assert proc.returncode == 0, proc.stdout[-6000:]
    assert recap["failed"] == 0, recap
    assert nebius_fake.token not in proc.stdout and nebius_fake.token not in json.dumps(saved)

    plan = saved["plan"]
    assert [(r["region"], r["instance_type"], r["price_per_hour"], r["available"]) for r in plan["offers"]] == [
        ("eu-north1", "gpu-h100-sxm/1gpu-16vcpu-200gb", 2.95, True),
        ("eu-north1", "gpu-h100-sxm/8gpu-128vcpu-1600gb", 23.6, True)]

    made = saved["made"]
    assert made["changed"] is True and made["offer"]["offer_id"] == "nebius:eu-north1:gpu-h100-sxm/1gpu-16vcpu-200gb"
    assert made["prepared"]["security_group_id"].startswith("vpcsecuritygroup-")
    [(_key, create)] = [c for c in nebius_fake.calls if c[0] == "instances.create"]
    assert create.metadata.name == "neb1"
    assert {"gpuprov-vm-name", "gpuprov-journal-id"} <= set(create.metadata.labels)
    assert [user for user, _key in catalog.authorized_keys(create.spec.cloud_init_user_data)] == [getpass.getuser()]

    [running] = saved["info"]["instances"]
    assert running["status"] == "Running" and running["ssh_port"] == nebius_fake.ssh_port
    assert running["ssh_host"].startswith("127.0.0.") and running["ssh_user"] == getpass.getuser()
    assert saved["login"]["stdout"] == "nebius-login-ok"

    gone = saved["gone"]
    assert gone["changed"] is True and gone["deleted"] == [running["instance_id"]] and gone["cleaned_up"] is True
    assert saved["after"]["instances"] == []
    assert nebius_fake.resources() == set(), "absent left %s on the fake" % sorted(nebius_fake.resources())
    assert nebius_fake.sshd.running == {}


@pytest.mark.parametrize("where", ["call", "operation"])
def test_provision_and_down_on_nebius_with_a_capacity_refusal_first(ansible, nebius_fake, where):
    """The whole launch machine on nebius: the first offer's create is refused for capacity
    (RESOURCE_EXHAUSTED + NotEnoughResources), by the Create call itself or later inside its
    Operation (the instance left STOPPED, then deleted by the compensation), the second comes up,
    the VM answers over SSH (the playbook's smoke command), and down leaves nothing."""
    if where == "call":
        nebius_fake.fail_capacity()
    else:
        nebius_fake.fail_create_operation("capacity")
    # the "VM" is this machine's sshd: Ansible runs this Python there, as the local cloud does
    opts = options(nebius_fake, python_interpreter=sys.executable)
    env = {"NEBIUS_IAM_TOKEN": nebius_fake.token}
    up = ansible.playbook("provision", "-e", "vm=neb2", "-e", "clouds=nebius", "-e", "gpu=H100", "-e", "k8s=false",
                          "-e", json.dumps({"gpuprov_cloud_options": opts}), extra_env=env)
    assert up.rc == 0, up
    assert "neb2 is up on nebius/eu-north1" in up.out and "offer 2 of 2" in up.out, up
    # a refused call names its ServiceError; a failed operation is seen as the instance it left, STOPPED
    assert ("NotEnoughResources" if where == "call" else "instance stopped while booting") in up.out, up
    assert "smoke command: Linux" in up.out, up
    creates = [c for c in nebius_fake.calls if c[0] == "instances.create"]
    assert len(creates) == 2
    assert len(nebius_fake.instances) == 1
    # the failed operation's instance was deleted by the compensation (and is gone), never kept
    assert len([c for c in nebius_fake.calls if c[0] == "instances.delete"]) == (0 if where == "call" else 1)
    assert nebius_fake.token not in up.out

    down = ansible.playbook("down", "-e", "vm=neb2", "-e", json.dumps({"gpuprov_cloud_options": opts}),
                            extra_env=env)
    assert down.rc == 0, down
    assert nebius_fake.resources() == set(), "down left %s on the fake" % sorted(nebius_fake.resources())
