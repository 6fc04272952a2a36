"""gpuprov.cloud.vm check and diff mode through VmService, on the local cloud (real sshd):
check mode returns state and journal and the offers it would try, in order; diff mode
shows the VM record before and after; k3s_kubeconfig's diff masks the credentials."""

from __future__ import annotations

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks import diff as vm_diff
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.service import VmService

BASE = {"name": "cdiff", "state": "present", "clouds": ["local"], "gpu": None, "gpu_count": 1, "regions": [],
        "spot": False, "retry_until_up": False, "boot_timeout": None, "ssh_timeout": 60, "teardown_timeout": 60,
        "journal": None, "ssh_key": None, "ssh_user": None, "cloud_options": {}, "k8s": None, "boot_script": None}


@pytest.fixture
def home(home):
    """conftest.py's home; at the end this file's VM is taken down."""
    yield home
    if (home / "journal.sqlite").exists():   # never leave an sshd behind
        VmService(dict(BASE, state="absent")).run()


def test_check_mode_returns_state_journal_and_the_offers_in_order(home):
    lines = []
    result = VmService(dict(BASE), progress=lines.append).run(check_mode=True, diff=True)
    assert result["changed"] is True and not result.get("failed"), result
    assert result["state"] == "absent" and result["journal"] == str(home / "journal.sqlite")
    assert [offer["offer_id"] for offer in result["plan"]] == ["local:local:sshd"]
    assert result["plan"][0]["rank"] == 1 and result["search"]["of"] == 1
    assert "trying 1 offer(s) in order: 1. local:local:sshd" in result["msg"]
    assert lines == ["[cdiff check mode] would try offer 1 of 1: local:local:sshd ($0/h)"]
    assert result["diff"]["before"] == {}
    assert result["diff"]["after"]["cloud"] == "local"
    assert result["diff"]["after"]["status"] == "running (would be created)"
    assert not (home / "local" / "cdiff").exists()
    # A dry run creates nothing: no journal, no key (the journal it would use is named all the same).
    assert not (home / "journal.sqlite").exists() and not (home / "id_ed25519").exists()


def test_check_mode_with_an_unknown_gpu_everywhere_fails_naming_why(home):
    result = VmService(dict(BASE, gpu="H100")).run(check_mode=True)
    assert result["failed"] and result["state"] == "absent" and "no offer to try" in result["msg"], result


def test_diff_shows_the_vm_record_before_and_after_up_reuse_and_down(home):
    up = VmService(dict(BASE)).run(diff=True)
    assert up["changed"] and up["state"] == "Ready", up
    after = up["diff"]["after"]
    assert up["diff"]["before"] == {}
    assert set(after) == set(vm_diff.VM_FIELDS)
    assert after["instance_id"] == up["vm"]["instance_id"] and after["status"] == "running"
    assert after["endpoint"] == "%s@127.0.0.1:%d" % (up["vm"]["ssh_user"], up["vm"]["ssh_port"])

    kept = VmService(dict(BASE)).run(check_mode=True, diff=True)
    assert kept["changed"] is False and kept["state"] == "Ready" and kept["plan"] == []
    assert kept["diff"]["before"] == kept["diff"]["after"] == after
    assert kept["vm"]["instance_id"] == after["instance_id"] and kept["connection"]["ansible_host"] == "127.0.0.1"

    reused = VmService(dict(BASE)).run(diff=True)
    assert reused["changed"] is False and reused["diff"]["before"] == reused["diff"]["after"]

    would = VmService(dict(BASE, state="absent")).run(check_mode=True, diff=True)
    assert would["changed"] and would["diff"] == {"before": after, "after": {}}
    down = VmService(dict(BASE, state="absent")).run(diff=True)
    assert down["state"] == "Done" and down["diff"] == {"before": after, "after": {}}
    assert "diff" not in VmService(dict(BASE, state="absent")).run()


def test_masked_kubeconfig_hides_credentials_only():
    cluster = {"server": "https://1.2.3.4:6443", "certificate-authority-data": "Q0E="}
    user = {"client-certificate-data": "Y2VydA==", "client-key-data": "a2V5", "token": "t0k"}
    config = {"clusters": [{"name": "c", "cluster": cluster}], "users": [{"name": "u", "user": user}]}
    shown = vm_diff.masked_kubeconfig(config)
    assert shown["users"][0]["user"] == dict.fromkeys(user, vm_diff.MASK)
    assert shown["clusters"] == config["clusters"]
    assert config["users"][0]["user"]["token"] == "t0k"   # the original is untouched
    assert vm_diff.masked_kubeconfig(None) == {}


def test_instance_diff_shows_the_instance_record_before_and_after(home):
    from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks import primitives
    from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.primitive_tasks import instance_diff as with_diff

    params = {"name": "cdinst", "cloud": "local", "state": "present", "cloud_options": {}, "gpu_count": 1}
    would = with_diff(primitives.instance(dict(params), check_mode=True), "present")
    assert would["diff"]["before"] == {}
    assert would["diff"]["after"]["instance_type"] == "sshd" and would["diff"]["after"]["instance_id"] is None
    made = with_diff(primitives.instance(dict(params)), "present")
    try:
        record = made["diff"]["after"]
        assert made["diff"]["before"] == {} and record["instance_id"] == made["instance"]["instance_id"]
        assert (record["cloud"], record["instance_type"]) == ("local", "sshd")
        kept = with_diff(primitives.instance(dict(params)), "present")
        assert kept["changed"] is False and kept["diff"]["before"] == kept["diff"]["after"]
        assert kept["diff"]["after"]["instance_id"] == record["instance_id"]
    finally:
        gone = with_diff(primitives.instance(dict(params, state="absent")), "absent")
    assert gone["diff"]["after"] == {} and gone["diff"]["before"]["instance_id"] == record["instance_id"]


def test_check_mode_says_a_journalled_vm_that_is_gone_would_be_cleared_then_provisioned(home):
    from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import Location
    from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.local import LocalProvider
    up = VmService(dict(BASE)).run()
    instance_id = up["vm"]["instance_id"]
    LocalProvider({"root": str(home / "local")}).delete(Location("local", "local"), "cdiff", [instance_id])
    would = VmService(dict(BASE)).run(check_mode=True, diff=True)
    assert would["changed"] and would["state"] == "Ready", would
    assert would["msg"].startswith("would clear the journalled %s (not running), then provision cdiff" % instance_id)
    assert would["diff"]["before"]["instance_id"] == instance_id and would["diff"]["after"]["instance_id"] is None
