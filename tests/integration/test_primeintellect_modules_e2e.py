"""gpuprov.cloud.offers / instance / instance_info on the primeintellect cloud, run by the real
ansible-playbook against the Prime Intellect API fake (tests/fakes/primeintellect_api.py):
offers priced per pod with out-of-stock reasons, a pod made and booted, a real SSH login to it
with the collection's key through the user and port of its ``sshConnection``, and nothing left
on the fake (pod, SSH key) after state=absent."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

pytest.importorskip("requests")

from ansible_collections.gpuprov.cloud.tests.fakes.primeintellect_api import (  # noqa: E402
    PrimeIntellectApiFake,
)
from ansible_collections.gpuprov.cloud.tests.integration.test_primitive_modules_e2e import Play  # noqa: E402


@pytest.fixture
def prime(tmp_path):
    fake = PrimeIntellectApiFake(str(tmp_path / "prime-fake"), token="pi-e2e-key")
    try:
        yield fake
    finally:
        fake.stop()


def _play(ansible, prime, tmp_path, title, tasks, names):
    defaults = {"cloud": "primeintellect",
                "cloud_options": {"primeintellect": {"api_url": "{{ api_url }}", "poll_interval_s": 0.2}}}
    # The key comes from the environment, as PRIME_API_KEY (the CLI's and SkyPilot's variable).
    proc, recap, saved = Play(ansible, tmp_path, title, tasks, names, defaults).run(
        "-e", "api_url=%s" % prime.url, env={"PRIME_API_KEY": prime.token})
    assert prime.token not in proc.stdout
    return proc, recap, saved


def test_offers_priced_per_pod_with_stock_reasons(ansible, prime, tmp_path):
    proc, recap, saved = _play(ansible, prime, tmp_path, "Prime offers", """\
    - name: H100 offers
      gpuprov.cloud.offers:
        clouds: [primeintellect]
        gpu: H100
      register: h100
    - name: A100 80GB offers (out of stock)
      gpuprov.cloud.offers:
        clouds: [primeintellect]
        gpu: A100-80GB
      register: a100
    - name: A GPU Prime does not list
      gpuprov.cloud.offers:
        clouds: [primeintellect]
        gpu: MI325X
      register: nogpu
      ignore_errors: true
""", ["h100", "a100", "nogpu"])
    assert proc.returncode == 0, proc.stdout[-6000:]
    assert recap["failed"] == 0 and recap["ignored"] == 1, recap
    rows = saved["h100"]["offers"]
    assert [(r["region"], r["price_per_hour"], r["available"]) for r in rows] == [
        ("CANADA-1", 1.9, True), ("US-KS-2", 2.69, True)]
    assert rows[0]["instance_type"] == "hyperstack/1xH100_80GB/n3-H100x1"
    [a100] = saved["a100"]["offers"]
    assert a100["available"] is False and a100["unavailable_reason"].startswith("stockStatus Unavailable at FIN-01")
    assert saved["nogpu"]["errors"][0]["kind"] == "InvalidRequest"
    assert "primeintellect offers no MI325X" in saved["nogpu"]["msg"]
    assert prime.resources() == set()


def test_instance_present_login_and_absent_leaves_nothing(ansible, prime, tmp_path):
    if not shutil.which("ssh"):
        pytest.skip("no ssh client")
    proc, recap, saved = _play(ansible, prime, tmp_path, "Prime present", """\
    - name: One H100 pod
      gpuprov.cloud.instance:
        name: pi1
        gpu: H100
      register: made
    - name: Wait for it to run with an SSH endpoint
      gpuprov.cloud.instance_info:
        name: pi1
        region: "{{ made.instance.region }}"
      register: info
      until: info.running
      retries: 10
      delay: 1
""", ["made", "info"])
    assert proc.returncode == 0, proc.stdout[-6000:]
    assert recap["changed"] == 1 and recap["failed"] == 0, recap
    [pod] = list(prime.pods.values())
    assert pod["providerType"] == "hyperstack" and pod["name"].startswith("pi1-j")   # <vm>-j<journal id>
    [key] = list(prime.keys.values())
    assert re.match(r"^gpuprov-pi1-[0-9a-f]{12}-j[0-9a-f]{32}$", key["name"])
    [inst] = saved["info"]["instances"]
    assert inst["status"] == "Running" and inst["usable"] is True and inst["ssh_host"] == "127.0.0.1"
    assert inst["ssh_port"] == int(pod["sshConnection"].rsplit(" ", 1)[1])

    # A real login with the collection's key, as the pod's sshConnection says.
    login = subprocess.run(
        ["ssh", "-i", str(ansible.home / "id_ed25519"), "-p", str(inst["ssh_port"]), "-o", "BatchMode=yes",
         "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "ConnectTimeout=10",
         "%s@%s" % (inst["ssh_user"], inst["ssh_host"]), "echo gpuprov-prime-ok"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60, check=False)
    assert login.returncode == 0 and "gpuprov-prime-ok" in login.stdout, login.stdout

    proc, recap, saved = _play(ansible, prime, tmp_path, "Prime absent", """\
    - name: No pi1
      gpuprov.cloud.instance:
        name: pi1
        state: absent
        region: CANADA-1
        wait_timeout: 60
      register: gone
    - name: Observe pi1
      gpuprov.cloud.instance_info:
        name: pi1
        region: CANADA-1
      register: info
""", ["gone", "info"])
    assert proc.returncode == 0, proc.stdout[-6000:]
    assert saved["gone"]["changed"] is True and saved["gone"]["cleaned_up"] is True
    assert saved["info"]["exists"] is False and saved["info"]["instances"] == []
    assert prime.resources() == set(), prime.resources()
    assert prime.sshd.running == {}
