"""Issue 11, across clouds: ``ansible-playbook gpuprov.cloud.provision`` with
``clouds=massedcompute,hyperstack,digitalocean,nebius`` against the four fakes (three vendor
REST APIs and a Nebius gRPC server on the SDK's own message types, a real sshd behind every
running instance). Massed Compute refuses for capacity, Hyperstack for quota, and the VM
comes up on DigitalOcean with a real SSH login; ``status`` says why each earlier offer was
skipped, and ``down`` leaves nothing on any fake. Credentials come from the vendors'
environment variables. The request is CPU-only: it is the one every fake's catalog shares.
"""

from __future__ import annotations

import getpass
import json
import sys

import pytest

pytest.importorskip("requests")
pytest.importorskip("nebius")

from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journal import Journal  # noqa: E402
from ansible_collections.gpuprov.cloud.tests.fakes.digitalocean_api import DigitalOceanApiFake  # noqa: E402
from ansible_collections.gpuprov.cloud.tests.fakes.hyperstack_api import HyperstackApiFake  # noqa: E402
from ansible_collections.gpuprov.cloud.tests.fakes.massedcompute_api import MassedComputeApiFake  # noqa: E402
from ansible_collections.gpuprov.cloud.tests.fakes.nebius_grpc import NebiusGrpcFake  # noqa: E402

NAME = "mkt2"
CLOUDS = "massedcompute,hyperstack,digitalocean,nebius"
ALLOWED = ["127.0.0.0/8"]


@pytest.fixture
def fakes(tmp_path):
    made = []
    try:
        made.append(MassedComputeApiFake(str(tmp_path / "mc")))
        made.append(HyperstackApiFake(str(tmp_path / "hs")))
        made.append(DigitalOceanApiFake(str(tmp_path / "do")))
        made.append(NebiusGrpcFake(str(tmp_path / "nb")))
        yield made
    finally:
        for fake in made:
            fake.stop()


def _run(ansible, fakes, playbook, *args):
    mc, hs, do, nb = fakes
    login = {"ssh_user": getpass.getuser(), "python_interpreter": sys.executable}
    options = {"massedcompute": dict(login, api_url=mc.api_url, ssh_port=mc.ssh_port),
               "hyperstack": dict(login, api_url=hs.api_url, ssh_port=hs.ssh_port, allowed_cidrs=ALLOWED),
               "digitalocean": dict(login, api_url=do.api_url, ssh_port=do.ssh_port, allowed_cidrs=ALLOWED,
                                    poll_interval_s=0.5),
               "nebius": dict(login, api_endpoint=nb.api_endpoint, api_insecure=True, project_id=nb.project_id,
                              ssh_port=nb.ssh_port, allowed_cidrs=ALLOWED)}
    env = {"MASSED_COMPUTE_API_KEY": mc.token, "HYPERSTACK_API_KEY": hs.token, "DIGITALOCEAN_TOKEN": do.token,
           "NEBIUS_IAM_TOKEN": nb.token}
    return ansible.playbook(playbook, "-e", "vm=%s" % NAME, "-e", json.dumps({"gpuprov_cloud_options": options}),
                            *args, extra_env=env, timeout=600)


def test_capacity_then_quota_then_up_on_the_third_cloud_and_down_leaves_nothing(ansible, fakes):
    mc, hs, do, nb = fakes
    before = [fake.resources() for fake in fakes]
    mc.fail_capacity()
    hs.fail_quota()

    up = _run(ansible, fakes, "provision", "-e", "clouds=%s" % CLOUDS, "-e", "k8s=false")

    assert up.rc == 0, up.out[-5000:]
    out = up.out
    assert "%s is up on digitalocean/" % NAME in out, out[-5000:]
    assert "smoke command: Linux" in out, out[-5000:]          # a real SSH login through Ansible
    assert "offer 3 of " in out and "(Capacity): massedcompute POST" in out, out[-5000:]
    assert "(Quota): hyperstack POST" in out, out[-5000:]
    for fake in fakes:
        assert fake.token not in out

    journal = Journal(str(ansible.journal_path))
    try:
        state = journal.load(NAME).state
    finally:
        journal.close()
    assert state["kind"] == "Ready" and state["vm"]["location"]["cloud"] == "digitalocean"
    tried = [(h["offer"].split(":")[0], h["outcome"]) for h in state["search"]["history"]
             if h["outcome"] not in ("unavailable", "skipped")]
    assert tried == [("massedcompute", "Capacity"), ("hyperstack", "Quota")]
    assert nb.resources() == before[3]          # never reached

    status = ansible.playbook("status", "-e", "vm=%s" % NAME)
    assert status.rc == 0, status
    assert "SEARCH %s: offer 3 of" % NAME in status.out and "(Quota): hyperstack" in status.out, status.out[-3000:]

    down = _run(ansible, fakes, "down")
    assert down.rc == 0, down.out[-5000:]
    assert [fake.resources() for fake in fakes] == before, "left behind after down"
