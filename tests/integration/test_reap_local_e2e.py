"""gpuprov.cloud.reap end to end on the local cloud with the real ansible-playbook (issue 27): a VM provisioned with
a ttl of seconds expires (status says so), a dry-run reap lists it and removes nothing, ``-e delete=true`` removes it,
and a second reap changes nothing. Local VMs run no boot script, so no watchdog: the reap is their only enforcer."""

from __future__ import annotations

from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.status import read_status
from ansible_collections.gpuprov.cloud.tests.unit.helpers import wait_for


def _expired(ansible, name):
    vms = read_status(str(ansible.journal_path), name)["vms"]
    return bool(vms and (vms[0].get("limits") or {}).get("expired"))


def test_provision_with_a_ttl_expires_is_listed_then_reaped(ansible):
    up = ansible.playbook("provision", "-e", "vm=short1", "-e", "ttl=3s")
    assert up.rc == 0, up
    [instance] = ansible.live_sshd()
    wait_for(lambda: _expired(ansible, "short1"), "status to say short1 expired", limit_s=120, step_s=0.2)

    status = ansible.playbook("status", "-e", "vm=short1")
    assert status.rc == 0, status
    assert "expired" in status.out and "LEFT" in status.out, status
    assert "[WARNING]: short1 is past its expiry" in status.out and "DEPRECATION" not in status.out, status

    dry = ansible.playbook("reap")
    assert dry.rc == 0, dry
    assert dry.recap()["localhost"]["changed"] == 0, dry
    assert "WOULD REAP short1 (local/local" in dry.out and "would reap 1 VM" in dry.out, dry
    assert ansible.live_sshd() == [instance]

    reaped = ansible.playbook("reap", "-e", "delete=true")
    assert reaped.rc == 0, reaped
    assert reaped.recap()["localhost"]["changed"] == 1, reaped
    assert "REAPED short1 (local/local" in reaped.out and "reaped 1 VM" in reaped.out, reaped
    assert ansible.live_sshd() == []

    again = ansible.playbook("reap", "-e", "delete=true")
    assert again.rc == 0, again
    assert again.recap()["localhost"]["changed"] == 0 and "nothing to reap" in again.out, again
