"""``down`` against a provision that is still running (issue 8, item 3): with
``retry_until_up`` and no offer anywhere, the provision keeps searching (journal
state Exhausted, lease held). ``down`` must not answer "nothing to tear down" while
that search can still create a VM: it asks the run to stop through the journal, waits
until it has let go, and only then decides, under the lease.

Both runs are real VmService runs on one journal (the provision in a thread); the
cloud is a scripted fake registered under a test-only name.
"""

from __future__ import annotations

import threading

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journal import Journal
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers import registry
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.service import VmService
from ansible_collections.gpuprov.cloud.tests.fakes import scripted_provider
from ansible_collections.gpuprov.cloud.tests.unit.helpers import wait_for

BASE = {"name": "busy", "state": "present", "clouds": ["nooffers"], "gpu": None, "gpu_count": 1, "regions": [],
        "spot": False, "retry_until_up": True, "boot_timeout": None, "ssh_timeout": 60, "teardown_timeout": 60,
        "journal": None, "ssh_key": None, "ssh_user": None, "cloud_options": {}, "k8s": False, "boot_script": None}


@pytest.fixture
def home(home, monkeypatch):
    """conftest.py's home, with the scripted cloud "nooffers" registered."""
    monkeypatch.setitem(registry.ADAPTERS, "nooffers", (scripted_provider.__name__, "NoOffersCloud"))
    return home


def test_down_stops_a_live_search_before_answering(home):
    results = {}
    provision = threading.Thread(target=lambda: results.update(up=VmService(dict(BASE)).run()))
    provision.start()
    journal = Journal(str(home / "journal.sqlite"))
    try:
        def searching():
            row = journal.load("busy")
            return row is not None and row.state["kind"] == "Exhausted" and journal.live_holder("busy")
        wait_for(searching, "the provision to be searching", limit_s=60.0, step_s=0.05)

        down = VmService(dict(BASE, state="absent")).run()

        # down returned only once the search had stopped: nothing can appear any more.
        assert not down.get("failed"), down
        assert "stopped the run that was provisioning it" in down["msg"]
        assert journal.live_holder("busy") is None
        provision.join(30)
        assert not provision.is_alive()
        assert results["up"]["failed"] and results["up"]["state"] == "Aborted"
        assert any("down requested" in (e["note"] or "") for e in journal.events("busy"))
        assert journal.load("busy").state["kind"] == "Aborted"
    finally:
        journal.close()
        provision.join(60)


def test_down_with_no_live_run_decides_at_once(home):
    result = VmService(dict(BASE, state="absent")).run()
    journal_id = Journal(str(home / "journal.sqlite")).journal_id
    assert result == {"changed": False, "state": "absent", "journal": str(home / "journal.sqlite"),
                      "msg": "busy has nothing to tear down in the journal %s (journal id %s): it holds no record "
                             "of busy" % (home / "journal.sqlite", journal_id),
                      # The scripted cloud cannot list what carries the name: said, not passed over.
                      "warnings": ["busy: could not look for resources named busy on nooffers/*: nooffers cannot "
                                   "list its resources for the orphan sweep"]}
