"""Issue 10, across clouds: ``ansible-playbook gpuprov.cloud.provision`` with
``clouds=lambda,runpod,primeintellect,verda`` against the four vendor fakes (real HTTP
servers speaking each vendor's documented API, a real sshd behind every running
instance). Lambda is out of capacity, RunPod rate-limits once and then has capacity:
the VM comes up on RunPod with a real SSH login, the output and ``status`` say which
offer of the search it is and why each earlier one was skipped, and ``down`` leaves
nothing on any fake. Credentials come from the vendors' environment variables.
"""

from __future__ import annotations

import getpass
import json
import subprocess
import sys

import pytest

pytest.importorskip("requests")

from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journal import Journal  # noqa: E402
from ansible_collections.gpuprov.cloud.tests.fakes.lambda_api import LambdaApiFake  # noqa: E402
from ansible_collections.gpuprov.cloud.tests.fakes.primeintellect_api import PrimeIntellectApiFake  # noqa: E402
from ansible_collections.gpuprov.cloud.tests.fakes.runpod_api import RunpodApiFake  # noqa: E402
from ansible_collections.gpuprov.cloud.tests.fakes.verda_api import (  # noqa: E402
    CLIENT_ID as VERDA_ID, CLIENT_SECRET as VERDA_SECRET, VerdaApiFake,
)

NAME = "mkt1"
CLOUDS = "lambda,runpod,primeintellect,verda"
# Lambda's firewall ruleset needs source ranges (it never assumes 0.0.0.0/0): the controller here.
ALLOWED = ["127.0.0.1/32"]


def _resources(fakes):
    """Everything each fake holds that a VM could have left: instances, keys, rules, scripts."""
    lam, run, prime, verda = fakes
    with run.lock:
        runpod = {"pod:%s" % p for p in run.pods} | {"account-key:%s" % k for k in run.account_keys}
    return {"lambda": lam.resources(), "runpod": runpod, "primeintellect": prime.resources(),
            "verda": verda.resources()}


@pytest.fixture
def fakes(tmp_path):
    made = []
    try:
        made.append(LambdaApiFake(str(tmp_path / "lambda")))
        made.append(RunpodApiFake(str(tmp_path / "runpod")))
        made.append(PrimeIntellectApiFake(str(tmp_path / "prime")))
        made.append(VerdaApiFake(str(tmp_path / "verda")))
        yield made
    finally:
        for fake in made:
            fake.stop()


def _run(ansible, fakes, playbook, *args):
    lam, run, prime, verda = fakes
    user = getpass.getuser()
    options = {"lambda": {"api_url": lam.api_url, "ssh_user": user, "ssh_port": lam.ssh_port, "allowed_cidrs": ALLOWED},
               "runpod": {"api_url": run.api_url},
               "primeintellect": {"api_url": prime.url},
               "verda": {"api_url": verda.api_url, "ssh_user": user, "ssh_port": verda.ssh_port}}
    env = {"LAMBDA_API_KEY": lam.token, "RUNPOD_API_KEY": run.token, "PRIME_API_KEY": prime.token,
           "VERDA_CLIENT_ID": VERDA_ID, "VERDA_CLIENT_SECRET": VERDA_SECRET}
    # Every "instance" is an sshd on this host: Ansible runs its modules there with this Python
    # (interpreter discovery would pick whatever python3 this host's PATH shims to).
    return ansible.playbook(playbook, "-e", "vm=%s" % NAME, "-e", json.dumps({"gpuprov_cloud_options": options}),
                            "-e", "ansible_python_interpreter=%s" % sys.executable, *args, extra_env=env, timeout=600)


def test_failover_across_four_marketplaces_then_down_leaves_nothing(ansible, fakes):
    lam, run, prime, verda = fakes
    before = _resources(fakes)
    for _offer in range(8):                 # every Lambda launch is refused: no capacity anywhere
        lam.fail_capacity()
    run.rate_limit("pods.create", retry_after=1)   # RunPod throttles once, then has capacity

    up = _run(ansible, fakes, "provision", "-e", "clouds=%s" % CLOUDS, "-e", "gpu=H100")

    assert up.rc == 0, up.out[-5000:]
    assert up.recap()[NAME]["failed"] == 0, up
    # Lambda was tried and refused, RunPod took it after one 429, the others were never asked to create.
    assert lam.calls_of("instances.launch") and lam.live() == []
    assert len(run.calls_of("pods.create")) == 2 and len(run.pods) == 1
    assert prime.calls_of("pods.create") == [] and verda.calls_of("instances.create") == []
    pod_id = next(iter(run.pods))
    assert "is up on runpod/" in up.out and "(%s)" % pod_id in up.out, up
    assert "smoke command: Linux" in up.out, up          # a real SSH login through Ansible
    # k3s cannot run in a container pod: skipped with a note, not attempted.
    assert "k3s skipped: the runpod cloud cannot host it" in up.out, up
    # The output says which offer it is and why the earlier ones were skipped.
    assert "offer " in up.out and "skipped before it: lambda:" in up.out, up
    assert "lambda:us-east-1:gpu_1x_h100_pcie (Capacity): lambda POST /api/v1/instance-operations/launch: " \
           "HTTP 400 instance-operations/launch/insufficient-capacity: Not enough capacity" in up.out, up.out[-3000:]
    assert "HTTP 429: Too Many Requests" in up.out and "retrying in 1.0 s" in up.out, up.out[-3000:]

    journal = Journal(str(ansible.journal_path))
    try:
        state = journal.load(NAME).state
        retries = [e for e in journal.events(NAME) if e["event"] == "retry"]
    finally:
        journal.close()
    assert state["kind"] == "Ready" and state["vm"]["location"]["cloud"] == "runpod"
    assert state["vm"]["ssh"]["host"] == "127.0.0.1"
    search = state["search"]
    taken = search["cursor"] + 1
    tried = [h for h in search["history"] if h["outcome"] not in ("unavailable", "skipped")]
    assert [(h["offer"], h["outcome"]) for h in tried] == [("lambda:us-east-1:gpu_1x_h100_pcie", "Capacity")]
    assert taken == 2 and search["offers"][0]["cloud"] == "lambda"
    # Out-of-stock offers were never tried; each says why.
    out_of_stock = [h for h in search["history"] if h["outcome"] == "unavailable"]
    assert out_of_stock and all(h["error"]["msg"] for h in out_of_stock)
    assert any("429" in e["note"] or "rate limit" in e["note"].lower() for e in retries), retries

    status = ansible.playbook("status", "-e", "vm=%s" % NAME)
    assert status.rc == 0, status
    assert "SEARCH %s: offer %d of %d (runpod:" % (NAME, taken, len(search["offers"])) in status.out, status
    assert "skipped before it: lambda:" in status.out, status
    price = state["vm"]["price_per_hour"]
    assert price and ("%.4f" % price).rstrip("0").rstrip(".") in status.out, status

    # The pinned login works outside Ansible too.
    ssh = subprocess.run(["ssh", "-F", str(ansible.home / "ssh_config"), "-o", "BatchMode=yes", NAME, "echo", "ok"],
                         capture_output=True, text=True, timeout=60, check=False)
    assert ssh.returncode == 0 and "ok" in ssh.stdout, ssh.stderr

    down = _run(ansible, fakes, "down")
    assert down.rc == 0, down
    assert _resources(fakes) == before, "left behind after down"
    assert run.sshd.running == {}
