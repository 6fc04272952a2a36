"""plugins/filter/provision_summary.py: the provision playbook's closing lines for one VM."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpuprov.cloud.plugins.filter.provision_summary import FilterModule, provision_summary

UP = {
    "msg": "train1 is up at 203.0.113.7:22 (aws/us-east-1/us-east-1a)",
    "connection": {"ansible_host": "203.0.113.7"},
    "vm": {"cloud": "aws", "region": "us-east-1", "instance_id": "i-0abc", "price_per_hour": 0.526},
    "search": {"offer": 2, "of": 5, "offer_id": "aws:us-east-1:g4dn.xlarge",
               "skipped": ["aws:us-west-2:g4dn.xlarge: capacity"]},
    "smoke": {"command": "uname -a", "stdout": "Linux train1"},
    "ssh_config": "/home/u/.local/state/gpuprov/ssh_config",
    "k8s": {"enabled": True, "access": "Direct", "note": None},
}


def test_a_vm_that_is_up_gets_every_line_in_order():
    assert provision_summary(UP, "train1", kubeconfig={"path": "/k/train1.yaml"},
                             validation={"path": "direct (public)"}) == [
        "train1 is up on aws/us-east-1 (i-0abc), $0.526/h",
        "offer 2 of 5: aws:us-east-1:g4dn.xlarge; skipped before it: aws:us-west-2:g4dn.xlarge: capacity",
        "smoke command: Linux train1",
        "ssh: add 'Include /home/u/.local/state/gpuprov/ssh_config' to ~/.ssh/config once, then: ssh train1",
        "tear down: ansible-playbook gpuprov.cloud.down -e vm=train1",
        "k3s: KUBECONFIG=/k/train1.yaml kubectl get nodes",
        "k3s API: direct (public)",
    ]


def test_a_reused_vm_behind_a_tunnel_with_the_smoke_command_run_by_ansible():
    result = dict(UP, search=None, smoke=None, k8s={"enabled": True, "access": "SshTunnel"},
                  vm=dict(UP["vm"], price_per_hour=None))
    lines = provision_summary(result, "train1", smoke={"stdout": "Linux via ansible"})
    assert lines[0] == "train1 is up on aws/us-east-1 (i-0abc)"
    assert lines[1] == "reused: no search"
    assert lines[2] == "smoke command: Linux via ansible"
    assert lines[5:] == ["k3s: KUBECONFIG=? kubectl get nodes",
                         "k3s API through SSH: ansible-playbook gpuprov.cloud.tunnel -e vm=train1 (keep it running)"]


def test_without_k3s_the_note_says_why():
    result = dict(UP, k8s={"enabled": False, "note": "k3s skipped: the local cloud cannot host it"})
    assert provision_summary(result, "train1")[-1] == "k3s skipped: the local cloud cannot host it"
    assert provision_summary(dict(UP, k8s={"enabled": False}), "train1")[-1] == "k3s: off (k8s=false)"


def test_check_mode_says_what_would_happen_first_and_a_vm_not_up_gets_no_lines():
    assert provision_summary(UP, "train1", check_mode=True)[0] == UP["msg"]
    planned = {"msg": "would launch train1: first offer aws:us-east-1:g4dn.xlarge", "k8s": {"enabled": True}}
    assert provision_summary(planned, "train1", check_mode=True) == [planned["msg"]]
    assert provision_summary(planned, "train1") == []


def test_anything_but_a_result_is_refused_with_what_was_expected():
    with pytest.raises(AnsibleFilterError, match="expected the registered result of gpuprov.cloud.vm, got str"):
        provision_summary("train1", "train1")
    assert FilterModule().filters()["provision_summary"] is provision_summary


def test_a_price_reads_the_same_here_as_in_check_mode_and_the_offers_table():
    from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks import service
    free = dict(UP, vm=dict(UP["vm"], price_per_hour=0.0))
    assert provision_summary(free, "train1")[0] == "train1 is up on aws/us-east-1 (i-0abc), $0/h"
    assert service._price(0.0) == " ($0/h)" and service._price(2.5) == " ($2.5/h)"
    assert provision_summary(dict(UP, vm=dict(UP["vm"], price_per_hour=2.5)), "train1")[0].endswith(", $2.5/h")


def test_a_vm_with_limits_says_when_it_goes_and_how():
    limited = dict(UP, k8s={"enabled": False, "note": "k3s: off (k8s=false)"},
                   limits={"expires_at": "2026-12-02T18:00:00Z", "idle_stop": "30m", "max_spend": None,
                           "deadline": "2026-12-02T18:00:00Z", "deadline_cause": "expiry", "time_left_s": 3600})
    lines = provision_summary(limited, "train1")
    assert lines[5] == ("limits: train1 removed after 2026-12-02T18:00:00Z (its expiry; ansible-playbook "
                        "gpuprov.cloud.reap -e delete=true), powered off after 30m idle; status shows the time left")
    capped = dict(limited, limits={"max_spend": "$25", "deadline": "2026-12-03T04:00:00Z", "deadline_cause": "max_spend"})
    assert "(its max_spend;" in provision_summary(capped, "train1")[5]
    unlimited = dict(limited, limits={"expires_at": None, "idle_stop": None, "max_spend": None, "deadline": None})
    assert not any(line.startswith("limits:") for line in provision_summary(unlimited, "train1"))
