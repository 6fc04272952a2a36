"""The ends a new user meets first, through real ansible-playbook runs on the local cloud (real sshd):
a playbook run without a VM named fails saying how to name one; down says what it did; the tunnel
refuses a VM that has no k3s cluster instead of forwarding a port nothing answers on."""

from __future__ import annotations


def test_provision_and_down_without_a_vm_fail_saying_how_to_name_one(ansible):
    for playbook, verb in (("provision", "provision"), ("down", "tear down")):
        run = ansible.playbook(playbook)
        assert run.rc != 0, run
        assert ("no VM to %s: name one with -e vm=<name> (ansible-playbook gpuprov.cloud.%s -e vm=train1), or give "
                "an inventory whose group gpuprov_vms lists them (-i fleet.yml)" % (verb, playbook)) in run.out, run
        assert "skipping: no hosts matched" not in run.out.split("FAILED!")[0], run


def test_down_says_what_it_tore_down_and_the_tunnel_refuses_a_vm_without_k3s(ansible):
    try:
        up = ansible.playbook("provision", "-e", "vm=plain1")
        assert up.rc == 0, up
        assert "plain1 is up on local/local (" in up.out and "$0/h" in up.out and "$0.0/h" not in up.out, up
        assert "TASK [Say how to reach each VM]" in up.out and "in check mode" not in up.out, up
        tunnel = ansible.playbook("tunnel", "-e", "vm=plain1")
        assert tunnel.rc != 0, tunnel
        assert "plain1 has no k3s cluster" in tunnel.out and "no Kubernetes API to forward" in tunnel.out, tunnel
        assert "forwarding 127.0.0.1:6443" not in tunnel.out, tunnel
    finally:
        down = ansible.playbook("down", "-e", "vm=plain1")
    assert down.rc == 0, down
    assert '"plain1": "plain1 torn down: local/local [local-' in down.out, down
    again = ansible.playbook("down", "-e", "vm=plain1")
    assert again.rc == 0 and '"plain1": "plain1 has nothing to tear down in the journal ' in again.out, again
