"""End to end (real ansible-playbook, local cloud, real sshd): what a VM was made
with is journalled and used by every later step (issue 8, items 5 and 8).

* ``down`` without the adapter options ``provision`` was given still finds the VM
  where it was made, instead of looking in the default place and saying Done.
* Re-provisioning with a request the VM does not satisfy fails, naming the fields,
  and keeps the VM (``recreate=true`` replacing it is tested in tests/unit/test_launch_recovery.py).
"""

from __future__ import annotations

import json
import os

from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import run_options
from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journal import Journal


def _row(ansible, name):
    journal = Journal(str(ansible.journal_path))
    try:
        return journal.load(name), run_options.recorded(journal, name)
    finally:
        journal.close()


def _sshd_under(root):
    """Instance folders under ``root`` whose sshd runs (found in /proc, not from pid files)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as handle:
                cmdline = handle.read().decode(errors="replace")
        except OSError:
            continue
        if str(root) + os.sep in cmdline and "sshd_config" in cmdline and "sshd" in cmdline.split("\0")[0]:
            found.append(pid)
    return found


def test_down_uses_the_options_the_vm_was_made_with(ansible, tmp_path):
    root = tmp_path / "elsewhere"
    options = json.dumps({"gpuprov_cloud_options": {"local": {"root": str(root)}}})
    up = ansible.playbook("provision", "-e", "vm=opts1", "-e", options, "-e", "k8s=false")
    assert up.rc == 0, up
    row, journalled = _row(ansible, "opts1")
    assert journalled["local"]["root"] == str(root)
    assert _sshd_under(root), "the VM runs under the root it was given"

    down = ansible.playbook("down", "-e", "vm=opts1")     # no cloud options this time

    assert down.rc == 0, down
    row, _journalled = _row(ansible, "opts1")
    assert (row.kind, row.state["kind"]) == ("teardown", "Done")
    assert not _sshd_under(root), "down found and removed the VM where it was made"


def test_a_changed_request_fails_naming_the_fields_and_keeps_the_vm(ansible):
    up = ansible.playbook("provision", "-e", "vm=req1", "-e", "k8s=false")
    assert up.rc == 0, up
    first = _row(ansible, "req1")[0].state["vm"]["instance_id"]

    changed = ansible.playbook("provision", "-e", "vm=req1", "-e", "k8s=false", "-e", "spot=true")

    assert changed.rc != 0, changed
    assert "spot: the VM is on-demand, the request asks for spot" in changed.out, changed
    assert "recreate: true" in changed.out, changed
    assert [os.path.basename(f) for f in ansible.live_sshd()] == [first]

    again = ansible.playbook("provision", "-e", "vm=req1", "-e", "k8s=false")    # the VM is intact
    assert again.rc == 0 and again.recap()["req1"]["changed"] == 0, again
    assert _row(ansible, "req1")[0].state["vm"]["instance_id"] == first

    down = ansible.playbook("down", "-e", "vm=req1")
    assert down.rc == 0 and not ansible.live_sshd(), down
