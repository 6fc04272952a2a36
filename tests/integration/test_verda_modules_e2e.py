"""gpuprov.cloud.offers / instance / instance_info on the verda cloud, run by the real
ansible-playbook against the Verda API fake (tests/fakes/verda_api.py): the modules trade
the client credentials (from VERDA_CLIENT_ID / VERDA_CLIENT_SECRET) for a token at the
fake's OAuth2 endpoint, the instance boots through ordered and provisioning to running
with a real sshd behind its ip, the collection's key logs in over SSH, and absent leaves
nothing on the fake (no instance, OS volume, SSH key or startup script)."""

from __future__ import annotations

import getpass
import json

import pytest

pytest.importorskip("requests")

from ansible_collections.gpuprov.cloud.tests.fakes.verda_api import (  # noqa: E402
    CLIENT_ID, CLIENT_SECRET, VerdaApiFake,
)
from ansible_collections.gpuprov.cloud.tests.integration.test_primitive_modules_e2e import Play  # noqa: E402

TASKS = """\
    - name: Plan an H100 on verda (a dry run)
      gpuprov.cloud.offers:
        clouds: [verda]
        gpu: H100
        cloud_options: "{{ opts }}"
      register: plan
    - name: Plan a GPU Verda does not sell
      gpuprov.cloud.offers:
        clouds: [verda]
        gpu: T4
        cloud_options: "{{ opts }}"
      register: nogpu
      ignore_errors: true
    - name: One H100 instance in FIN-03
      gpuprov.cloud.instance:
        name: ver1
        cloud: verda
        gpu: H100
        region: FIN-03
        cloud_options: "{{ opts }}"
      register: made
    - name: Wait until it runs with an endpoint
      gpuprov.cloud.instance_info:
        name: ver1
        cloud: verda
        region: FIN-03
        cloud_options: "{{ opts }}"
      register: info
      until: info.instances | selectattr('usable') | list | length == 1
      retries: 10
      delay: 0
    - name: Log in with the collection's key
      ansible.builtin.command:
        argv: [ssh, -i, "{{ key }}", -p, "{{ info.instances[0].ssh_port }}", -o, BatchMode=yes,
               -o, StrictHostKeyChecking=no, -o, UserKnownHostsFile=/dev/null,
               "{{ info.instances[0].ssh_user }}@{{ info.instances[0].ssh_host }}", echo, verda-login-ok]
      register: login
      changed_when: false
    - name: Remove it
      gpuprov.cloud.instance:
        name: ver1
        cloud: verda
        region: FIN-03
        state: absent
        cloud_options: "{{ opts }}"
      register: gone
    - name: Observe it gone
      gpuprov.cloud.instance_info:
        name: ver1
        cloud: verda
        region: FIN-03
        cloud_options: "{{ opts }}"
      register: after
"""


@pytest.fixture
def verda_fake(tmp_path):
    fake = VerdaApiFake(str(tmp_path / "verda-fake"))
    yield fake
    fake.stop()


def test_offers_instance_and_info_against_the_verda_fake(ansible, tmp_path, verda_fake):
    opts = {"verda": {"api_url": verda_fake.api_url, "ssh_user": getpass.getuser(), "ssh_port": verda_fake.ssh_port,
                      "poll_interval_s": 0.2}}
    play = Play(ansible, tmp_path, "Verda", TASKS, ["plan", "nogpu", "made", "info", "login", "gone", "after"])
    proc, recap, saved = play.run("-e", json.dumps({"opts": opts, "key": str(ansible.home / "id_ed25519")}),
                                  env={"VERDA_CLIENT_ID": CLIENT_ID, "VERDA_CLIENT_SECRET": CLIENT_SECRET})
    assert proc.returncode == 0, proc.stdout[-6000:]
    assert recap["failed"] == 0 and recap["ignored"] == 1, recap
    for secret in (CLIENT_SECRET, verda_fake.token):
        assert secret not in proc.stdout and secret not in json.dumps(saved)

    plan = saved["plan"]
    assert [(r["region"], r["instance_type"], r["price_per_hour"], r["available"]) for r in plan["offers"]] == [
        ("FIN-01", "1H100.80S.30V", 2.19, True), ("FIN-03", "1H100.80S.30V", 2.19, True),
        ("ICE-01", "1H100.80S.30V", 2.19, False)]
    assert plan["offers"][2]["unavailable_reason"] == "Verda lists no 1H100.80S.30V capacity in ICE-01 now"
    assert "Verda offers no T4" in saved["nogpu"]["msg"]

    made = saved["made"]
    assert made["changed"] is True and made["offer"]["offer_id"] == "verda:FIN-03:1H100.80S.30V"
    [create] = verda_fake.calls_of("instances.create")
    assert create[4]["hostname"] == "ver1" and create[4]["location_code"] == "FIN-03"
    assert create[4]["description"].startswith("gpuprov-vm-name=ver1 gpuprov-journal-id=")

    [running] = saved["info"]["instances"]
    assert running["status"] == "Running" and running["ssh_port"] == verda_fake.ssh_port
    assert running["ssh_host"].startswith("127.0.0.") and running["ssh_user"] == getpass.getuser()
    assert saved["login"]["stdout"] == "verda-login-ok"

    gone = saved["gone"]
    assert gone["changed"] is True and gone["deleted"] == [running["instance_id"]] and gone["cleaned_up"] is True
    assert saved["after"]["instances"] == []
    assert verda_fake.resources() == set(), "absent left %s on the fake" % sorted(verda_fake.resources())
    assert verda_fake.sshd.running == {}
