"""What status shows of the limits (issue 27): LEFT / SPENT / CAP per VM, the summary's total per hour and spent,
and a warning for each VM near or past its deadline, read from the journal alone (a fake clock)."""

from __future__ import annotations

from ansible_collections.gpuprov.cloud.plugins.module_utils.expiry import report, vm_task
from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journal import Journal


def _vm(name, state="Ready", cloud="digitalocean"):
    return {"name": name, "state": state, "instance_id": "i-" + name, "cloud": cloud}


def test_columns_summary_and_warnings(tmp_path, clock):
    journal = Journal(str(tmp_path / "journal.sqlite"), clock=clock)
    vm_task.apply_limits(journal, "a", {"instance_id": "i-a", "price_per_hour": 2.0}, {"ttl": "3h", "max_spend": "25"})
    vm_task.apply_limits(journal, "b", {"instance_id": "i-b", "price_per_hour": 0.4}, {"ttl": "60s"})
    vm_task.apply_limits(journal, "c", {"instance_id": "i-c"}, {})
    vm_task.apply_limits(journal, "d", {"instance_id": "i-other", "price_per_hour": 9.0}, {"ttl": "1s"})
    clock.advance(1800)
    vms = [_vm("a"), _vm("b"), _vm("c"), _vm("d"), {"name": "e", "state": "Aborted", "instance_id": None}]
    warnings = report.annotate(journal, vms, clock())
    journal.close()
    assert [report.columns(vm) for vm in vms] == [
        ("2h30m", "$1", "$25"), ("expired 29m ago", "$0.2", "-"), ("-", "-", "-"), ("-", "-", "-"), ("-", "-", "-")]
    assert vms[1]["limits"]["expired"] and vms[1]["limits"]["decision"] == "reap"
    assert "limits" not in vms[3]   # the row is another instance's: nothing to say of this one
    assert report.summary_line(vms) == ["up: $2.4/h, spent $1.2 so far (2 VMs with a price)",
                                        "expired: b (ansible-playbook gpuprov.cloud.reap -e delete=true removes it)"]
    assert len(warnings) == 1 and warnings[0].startswith("b is past its expiry, 29m ago")
    assert [report.shown_state(vm) for vm in vms] == ["Ready", "Expired", "Ready", "Ready", "Aborted"]
    [line] = report.expired_lines(vms[1])
    assert line.startswith("EXPIRED b: past its expiry, 29m ago") and "powers it off 5m past its deadline" in line, line
    assert "a powered-off VM still bills on digitalocean: only gpuprov.cloud.reap (or down) ends its billing" in line
    [local] = report.expired_lines(dict(vms[1], cloud="local"))
    assert "it has no watchdog on local and runs until reap removes it" in local, local
    assert report.expired_lines(vms[0]) == []


def test_a_vm_reap_saw_stopped_by_its_limits_shows_so_and_no_longer_counts_as_billing(tmp_path, clock):
    journal = Journal(str(tmp_path / "journal.sqlite"), clock=clock)
    vm_task.apply_limits(journal, "a", {"instance_id": "i-a", "price_per_hour": 2.0}, {"ttl": "3h"})
    vm_task.apply_limits(journal, "s", {"instance_id": "i-s", "price_per_hour": 1.0}, {"idle_stop": "10m"})
    clock.advance(1800)
    # reap saw s stopped (its idle_stop: no deadline the journal alone could see) and recorded it in the VM list
    vms = [_vm("a"), dict(_vm("s"), status="stopped itself", updated_at="2026-12-02 10:00:00Z")]
    report.annotate(journal, vms, clock())
    journal.close()
    assert vms[1]["limits"]["expired"] and vms[1]["limits"]["reason"].startswith("expired (stopped itself): idle")
    assert report.shown_state(vms[1]) == "Expired"
    [line] = report.expired_lines(vms[1])
    assert "its cloud showed it stopped itself at 2026-12-02 10:00:00Z; a powered-off VM still bills on digitalocean" in line
    assert report.summary_line(vms)[0] == "up: $2/h, spent $1 so far (1 VM with a price)"
