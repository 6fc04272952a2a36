"""Issue 28: a fleet that meets a throttling API. ``ansible-playbook gpuprov.cloud.provision`` brings up a
fleet of six VMs on RunPod (its API fake, tests/fakes/runpod_api.py: a real HTTP server, a real sshd behind
each pod) in one play with six forks, while the fake answers the fleet's first catalog call with a 429 and a
Retry-After.

What it proves, from the journal and the fake's own call log:

* the plan is the fleet's: the catalog is asked twice in all (the throttled call, then one answer every VM
  reuses), not once per VM;
* the 429 one worker got slowed the others on the same account: they journal that they held their calls
  for it (they never asked the cloud meanwhile: the catalog count above says so);
* the fleet still comes up whole, with exactly one pod per VM name, and ``down`` leaves nothing.
"""

from __future__ import annotations

import json
import sys

import pytest

pytest.importorskip("requests")

from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journal import Journal  # noqa: E402
from ansible_collections.gpuprov.cloud.tests.fakes.runpod_api import RunpodApiFake  # noqa: E402

FLEET = ["thr%d" % n for n in range(6)]
HOLD_NOTE = "asked this account to slow down"


@pytest.fixture
def runpod(tmp_path):
    fake = RunpodApiFake(str(tmp_path / "runpod"))
    yield fake
    fake.stop()


def _fleet(ansible, runpod, playbook):
    inventory = ansible.home / "fleet.yml"
    inventory.write_text("gpuprov_vms:\n  hosts:\n%s" % "".join("    %s:\n" % name for name in FLEET))
    options = {"runpod": {"api_url": runpod.api_url}}
    return ansible.playbook(playbook, "-i", str(inventory), "--forks", str(len(FLEET)), "-e", "clouds=runpod",
                            "-e", "gpu=H100", "-e", json.dumps({"gpuprov_cloud_options": options}),
                            "-e", "ansible_python_interpreter=%s" % sys.executable,
                            extra_env={"RUNPOD_API_KEY": runpod.token}, timeout=600)


def _events(ansible):
    journal = Journal(str(ansible.journal_path))
    try:
        return {name: journal.events(name) for name in FLEET}, {name: journal.load(name).state for name in FLEET}
    finally:
        journal.close()


def test_one_throttled_worker_slows_the_fleet_which_still_comes_up_once_per_name(ansible, runpod):
    runpod.rate_limit("catalog.gpus", retry_after=3)

    up = _fleet(ansible, runpod, "provision")

    assert up.rc == 0, up
    recap = up.recap()
    assert all(recap[name]["failed"] == 0 for name in FLEET), up
    with runpod.lock:
        names = sorted(pod["name"] for pod in runpod.pods.values())
    assert names == sorted(FLEET), "one pod per VM name, no more: %s" % names
    # One throttled call, then one plan for the whole fleet.
    assert len(runpod.calls_of("catalog.gpus")) == 2, runpod.calls_of("catalog.gpus")

    events, states = _events(ansible)
    assert all(state["kind"] == "Ready" for state in states.values()), states
    throttled = [name for name in FLEET if any(e["event"] == "retry" and "429" in (e["note"] or "")
                                               for e in events[name])]
    held = [name for name in FLEET if any(HOLD_NOTE in (e["note"] or "") for e in events[name])]
    assert len(throttled) == 1, throttled
    assert set(held) - set(throttled), "no other worker held its calls for the 429: %s" % held
    note = next(e["note"] for name in held for e in events[name] if HOLD_NOTE in (e["note"] or ""))
    assert "runpod" in note and "429" in note and runpod.token not in note, note

    down = _fleet(ansible, runpod, "down")
    assert down.rc == 0, down
    with runpod.lock:
        assert runpod.pods == {}
