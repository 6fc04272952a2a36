"""Check and diff mode with the real ansible-playbook on the local cloud (real sshd):
``--check --diff`` is a dry run end to end that names the offers it would try, in order,
and ``--diff`` shows the VM record before and after."""

from __future__ import annotations

from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journal import Journal


def _row(ansible, name):
    if not ansible.journal_path.exists():
        return None
    journal = Journal(str(ansible.journal_path))
    try:
        return journal.load(name)
    finally:
        journal.close()


def test_check_diff_provision_is_a_dry_run_that_names_the_offers_then_diff_shows_the_vm(ansible):
    dry = ansible.playbook("provision", "--check", "--diff", "-e", "vm=chk1")
    assert dry.rc == 0, dry
    assert "object of type 'dict' has no attribute 'connection'" not in dry.out
    assert "would provision chk1, trying 1 offer(s) in order: 1. local:local:sshd" in dry.out, dry
    assert "gpuprov [chk1 check mode] would try offer 1 of 1: local:local:sshd" in dry.out, dry
    # The diff: nothing before, the VM the first offer would make after.
    assert "+    \"cloud\": \"local\"" in dry.out and "running (would be created)" in dry.out, dry
    assert dry.recap()["chk1"]["failed"] == 0, dry
    assert ansible.live_sshd() == [] and not (ansible.home / "local" / "chk1").exists()
    assert _row(ansible, "chk1") is None

    up = ansible.playbook("provision", "--diff", "-e", "vm=chk1")
    assert up.rc == 0, up
    row = _row(ansible, "chk1")
    instance = row.state["vm"]["instance_id"]
    assert "+    \"instance_id\": \"%s\"" % instance in up.out, up
    assert "+    \"endpoint\": \"" in up.out and "+    \"status\": \"running\"" in up.out, up

    # A VM that is up: check mode keeps it and runs the rest of the play against it.
    again = ansible.playbook("provision", "--check", "--diff", "-e", "vm=chk1")
    assert again.rc == 0, again
    assert "would keep chk1: up at 127.0.0.1" in again.out and "smoke command: Linux" in again.out, again
    assert again.recap()["chk1"]["changed"] == 0, again

    gone = ansible.playbook("down", "--check", "--diff", "-e", "vm=chk1")
    assert gone.rc == 0, gone
    assert "-    \"instance_id\": \"%s\"" % instance in gone.out, gone
    assert [p.rsplit("/", 1)[1] for p in ansible.live_sshd()] == [instance]

    down = ansible.playbook("down", "-e", "vm=chk1")
    assert down.rc == 0, down
    assert ansible.live_sshd() == []


K3S_YAML = """apiVersion: v1
clusters:
- cluster: {certificate-authority-data: Q0E=, server: 'https://127.0.0.1:6443'}
  name: default
users:
- name: default
  user: {client-certificate-data: Q0VSVFNFQ1JFVA==, client-key-data: S0VZU0VDUkVU}
"""


def test_k3s_kubeconfig_diff_shows_the_change_without_the_credentials(ansible):
    playbook = ansible.home / "kubeconfig.yml"
    playbook.write_text("""- hosts: localhost
  gather_facts: false
  tasks:
    - gpuprov.cloud.k3s_kubeconfig:
        name: kdiff
        k3s_yaml: "{{ lookup('file', 'k3s.yaml') }}"
        server: https://203.0.113.9:6443
        dir: "%s"
""" % (ansible.home / "kube"))
    (ansible.home / "k3s.yaml").write_text(K3S_YAML)
    first = ansible.tool("ansible-playbook", "--diff", str(playbook))
    assert first.rc == 0, first.out + first.err
    assert "+++ after: %s" % (ansible.home / "kube" / "gpuprov-kdiff.yaml") in first.out, first.out
    assert "+    server: https://203.0.113.9:6443" in first.out, first.out
    assert "client-key-data: VALUE_SPECIFIED_IN_NO_LOG_PARAMETER" in first.out, first.out
    assert "S0VZU0VDUkVU" not in first.out and "Q0VSVFNFQ1JFVA==" not in first.out
    again = ansible.tool("ansible-playbook", "--diff", str(playbook))
    assert again.rc == 0 and "changed=0" in again.out, again.out
    assert "+    server" not in again.out and "S0VZU0VDUkVU" not in again.out, again.out


def test_provision_with_gpuprov_tags_tags_the_vm_and_a_changed_set_retags_it(ansible):
    import json

    def record_tags(instance_id):
        return json.loads((ansible.home / "local" / "tag1" / instance_id / "instance.json").read_text())["tags"]

    up = ansible.playbook("provision", "-e", "vm=tag1", "-e", '{"gpuprov_tags": {"team": "ml", "cost-center": 42}}')
    assert up.rc == 0, up
    instance = _row(ansible, "tag1").state["vm"]["instance_id"]
    tags = record_tags(instance)
    assert (tags["team"], tags["cost-center"], tags["gpuprov-vm-name"]) == ("ml", "42", "tag1"), tags

    would = ansible.playbook("provision", "--check", "-e", "vm=tag1", "-e", '{"gpuprov_tags": {"team": "ai"}}')
    assert would.rc == 0, would
    assert "would change tags: set team=ai; removed cost-center" in would.out, would
    assert record_tags(instance)["team"] == "ml"

    retag = ansible.playbook("provision", "-e", "vm=tag1", "-e", '{"gpuprov_tags": {"team": "ai"}}')
    assert retag.rc == 0, retag
    assert retag.recap()["tag1"]["changed"] == 1, retag
    tags = record_tags(instance)
    assert tags["team"] == "ai" and "cost-center" not in tags and tags["gpuprov-vm-name"] == "tag1"

    reserved = ansible.playbook("provision", "-e", "vm=tag1", "-e", '{"gpuprov_tags": {"gpuprov-vm-name": "x"}}')
    assert reserved.rc != 0 and "tags: 'gpuprov-vm-name' is reserved" in reserved.out, reserved
    assert "Traceback" not in reserved.out

    assert ansible.playbook("down", "-e", "vm=tag1").rc == 0
