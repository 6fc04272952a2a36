"""The status view: every VM with its state, last transitions, Leaked ones called out."""

from __future__ import annotations

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journal import Journal
from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journals import open_journal
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import projection
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.status import read_status

LOC = {"cloud": "aws", "region": "us-east-1", "zone": None}


def _journal_with_rows(path):
    journal = Journal(str(path))
    owner = "test:1:x"
    version = journal.begin("up1", "launch", {"kind": "Reconciling"}, "Reconciling", False, owner, 60, None)
    search = {"offers": [{"cloud": "lambda", "region": "us-east-1", "instance_type": "gpu_1x_h100_pcie",
                          "price_per_hour": 2.49},
                         {"cloud": "aws", "region": "us-east-1", "instance_type": "p5.4xlarge",
                          "price_per_hour": 6.88}],
              "cursor": 1, "blocked": [], "round": 0,
              "history": [{"offer": "runpod", "outcome": "skipped",
                           "error": {"kind": "Transient", "msg": "429 Too Many Requests", "block": None}},
                          {"offer": "lambda:us-east-1:gpu_1x_h100_pcie", "outcome": "Capacity",
                           "error": {"kind": "Capacity", "msg": "Not enough capacity", "block": "offer"}}]}
    journal.transition("up1", owner, version, {"kind": "Ready", "vm": {"price_per_hour": 6.88, "location": LOC}, "reused": False,
                                               "search": search},
                       "Ready", True, "Reconciling", "SSH login OK")
    journal.release("up1", owner)
    projection.upsert_vm(journal, "up1", cloud="aws", region="us-east-1", instance_id="i-1",
                         ssh_host="203.0.113.1", ssh_port=22, status="running", stage="Ready")
    leaked = {"kind": "Leaked", "targets": [{"location": LOC, "instance_ids": ["i-2"]}],
              "reason": "instances still present after 600 s"}
    version = journal.begin("gone1", "launch", {"kind": "Reconciling"}, "Reconciling", False, owner, 60, None)
    journal.transition("gone1", owner, version, leaked, "Leaked", True, "Compensating/AwaitingGone", "teardown failed")
    journal.release("gone1", owner)
    journal.close()


def test_missing_journal_is_reported_not_created(tmp_path):
    result = read_status(str(tmp_path / "none.sqlite"))
    assert result["vms"] == [] and "no journal at" in result["table"][0]
    assert not (tmp_path / "none.sqlite").exists()


def test_table_lists_vms_and_calls_out_leaked_ones(tmp_path):
    path = tmp_path / "j.sqlite"
    _journal_with_rows(path)
    result = read_status(str(path))
    by_name = {vm["name"]: vm for vm in result["vms"]}
    assert by_name["up1"]["state"] == "Ready" and by_name["up1"]["status"] == "running"
    assert by_name["up1"]["ssh_host"] == "203.0.113.1" and not by_name["up1"]["in_progress"]
    assert by_name["gone1"]["leaked"] and by_name["gone1"]["targets"][0]["instance_ids"] == ["i-2"]
    assert result["leaked"] == ["gone1"]
    table = "\n".join(result["table"])
    assert table.splitlines()[0].split() == ["NAME", "STATE", "STATUS", "CLOUD/REGION", "INSTANCE", "SSH", "$/H",
                                             "UPDATED", "LEFT", "SPENT", "CAP"]
    assert by_name["up1"]["price_per_hour"] == 6.88
    assert any(line.startswith("up1 ") and " 6.88 " in line for line in table.splitlines())
    assert by_name["gone1"]["price_per_hour"] is None and by_name["gone1"]["search"] is None
    assert ("SEARCH up1: offer 2 of 2 (aws:us-east-1:p5.4xlarge); skipped before it: runpod (skipped): 429 Too Many "
            "Requests; lambda:us-east-1:gpu_1x_h100_pcie (Capacity): Not enough capacity") in table
    assert "LEAKED gone1: instances still present after 600 s" in table
    assert "gpuprov.cloud.down -e vm=gone1" in table
    assert "Compensating/AwaitingGone -> Leaked teardown failed" in table
    assert [t["to"] for t in by_name["up1"]["last_transitions"]] == ["Reconciling", "Ready"]


def test_one_vm_only(tmp_path):
    path = tmp_path / "j.sqlite"
    _journal_with_rows(path)
    assert [vm["name"] for vm in read_status(str(path), name="up1")["vms"]] == ["up1"]


def test_a_leaked_instance_teardown_row_says_how_to_resolve_it():
    from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks import status
    row = {"name": "instance:aws:w1", "state": "Leaked", "status": "none", "cloud": None, "region": None,
           "instance_id": None, "ssh_host": None, "ssh_port": None, "updated_at": "-", "in_progress": False,
           "leaked": True, "reason": "instances still present", "targets": [], "last_transitions": []}
    lines = status.format_table([row])
    assert any("re-run gpuprov.cloud.instance with name=w1 cloud=aws state=absent" in line for line in lines), lines
    assert not any("down -e vm=instance:" in line for line in lines)


def _fleet_journal(path, states):
    """A journal with one VM per (name, final label), each begun then moved through Booting to its label."""
    journal = Journal(str(path)) if "://" not in str(path) else open_journal(path)
    owner = "test:1:x"
    for name, label in states:
        version = journal.begin(name, "launch", {"kind": "Reconciling"}, "Reconciling", False, owner, 60, None)
        for step in ("Planning", "Booting", label):
            state = {"kind": step} if step != "Leaked" else {"kind": "Leaked", "targets": [], "reason": "gone wrong"}
            version = journal.transition(name, owner, version, state, step, step in ("Ready", "Leaked"),
                                         "Reconciling", "to %s" % step)
            journal.note(name, owner, version, step, "still waiting")   # a poll: never shown
        journal.release(name, owner)
    journal.close()


def test_a_big_journal_is_paged_and_summarised_per_state(tmp_path):
    path = tmp_path / "j.sqlite"
    states = [("vm%03d" % n, "Ready") for n in range(12)] + [("vm%03d" % n, "Leaked") for n in range(12, 15)]
    _fleet_journal(path, states)
    result = read_status(str(path), limit=5, last=2)
    assert [vm["name"] for vm in result["vms"]] == ["vm000", "vm001", "vm002", "vm003", "vm004"]
    # Summary and leaked list count every VM, beyond the page too.
    assert result["total"] == 15 and result["summary"] == {"Ready": 12, "Leaked": 3}
    assert result["leaked"] == ["vm012", "vm013", "vm014"]
    # The last N transitions, oldest first, polls left out.
    assert [t["to"] for t in result["vms"][0]["last_transitions"]] == ["Booting", "Ready"]
    table = result["table"]
    assert table[-4:-2] == ["Ready   12 VMs", "Leaked  3 VMs"]
    assert table[-2] == "15 VMs"
    assert table[-1].startswith("showing the first 5 by name (limit=5): -e limit=0 shows all")
    assert not any("vm005" in line for line in table)


def test_limit_zero_shows_every_vm_and_last_zero_no_transitions(tmp_path):
    path = tmp_path / "j.sqlite"
    _fleet_journal(path, [("a%d" % n, "Ready") for n in range(4)])
    result = read_status(str(path), limit=0, last=0)
    assert [vm["name"] for vm in result["vms"]] == ["a0", "a1", "a2", "a3"]
    assert all(vm["last_transitions"] == [] for vm in result["vms"])
    assert result["table"][-1] == "4 VMs, all Ready" and not any(line.startswith("showing") for line in result["table"])
    assert result["table"].count("4 VMs, all Ready") == 1 and not any(line.startswith("Ready ") for line in result["table"])


def test_name_takes_an_exact_name_or_a_shell_pattern(tmp_path):
    path = tmp_path / "j.sqlite"
    _fleet_journal(path, [("train1", "Ready"), ("train2", "Leaked"), ("infer1", "Ready")])
    result = read_status(str(path), name="train*")
    assert [vm["name"] for vm in result["vms"]] == ["train1", "train2"]
    assert result["summary"] == {"Ready": 1, "Leaked": 1} and result["leaked"] == ["train2"]
    assert "2 VMs matching train*" in result["table"]
    assert [vm["name"] for vm in read_status(str(path), name="infer1")["vms"]] == ["infer1"]
    nothing = read_status(str(path), name="eval*")
    assert nothing["vms"] == [] and nothing["total"] == 0 and nothing["summary"] == {}
    assert nothing["table"] == ["no VM in the journal matches eval*"]


def test_a_summary_counts_states_without_their_offer(tmp_path):
    path = tmp_path / "j.sqlite"
    journal = Journal(str(path))
    for name in ("b1", "b2"):
        journal.begin(name, "launch", {"kind": "Booting"}, "Booting (offer %s of 3: aws:us-east-1:p5)" % name[1],
                      False, "test:1:x", 60, None)
    journal.close()
    assert read_status(str(path))["summary"] == {"Booting": 2}


@pytest.mark.parametrize("field, value", [("limit", -1), ("last", -2), ("limit", "ten")])
def test_a_negative_limit_or_last_is_a_clear_error(tmp_path, field, value):
    path = tmp_path / "j.sqlite"
    _fleet_journal(path, [("a1", "Ready")])
    with pytest.raises(ValueError, match="%s: expected an integer >= 0, got" % field):
        read_status(str(path), **{field: value})


def test_paging_reads_a_postgresql_journal_alike():
    from ansible_collections.gpuprov.cloud.tests import pg_server
    reason = pg_server.unavailable()
    if reason:
        pytest.skip("PostgreSQL journal: %s" % reason)
    server = pg_server.PgServer()
    try:
        dsn = server.dsn(pg_server.database_name(server.new_database()), password=True)
        _fleet_journal(dsn, [("train1", "Ready"), ("train2", "Leaked"), ("train3", "Ready"), ("infer1", "Ready")])
        result = read_status(dsn, name="train*", limit=2, last=2)
        assert [vm["name"] for vm in result["vms"]] == ["train1", "train2"]
        assert [t["to"] for t in result["vms"][0]["last_transitions"]] == ["Booting", "Ready"]
        assert result["total"] == 3 and result["summary"] == {"Ready": 2, "Leaked": 1}
        assert result["leaked"] == ["train2"]
    finally:
        server.destroy()


def test_a_state_this_version_cannot_read_is_listed_by_its_label(tmp_path):
    path = tmp_path / "j.sqlite"
    journal = Journal(str(path))
    journal.begin("odd1", "launch", {"kind": "Hibernating"}, "Hibernating", True, "test:1:x", 60, None)
    journal.close()
    [odd] = read_status(str(path))["vms"]
    assert (odd["name"], odd["state"], odd["status"], odd["reason"], odd["search"]) == (
        "odd1", "Hibernating", "none", None, None)
