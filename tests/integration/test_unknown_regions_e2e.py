"""``ansible-playbook gpuprov.cloud.provision -e regions=mars-1`` on the local cloud (issue 24, item 4):
the task fails before anything is made, naming the region asked and the one the cloud has."""

from __future__ import annotations


def test_provision_in_a_region_the_cloud_does_not_have_fails_naming_its_regions(ansible):
    run = ansible.playbook("provision", "-e", "vm=mars", "-e", "regions=mars-1")
    assert run.rc != 0, run
    assert run.recap()["mars"]["failed"] == 1, run
    assert "regions: the local cloud has no region mars-1; its regions: local" in run.out, run
    assert ansible.live_sshd() == []
    assert not (ansible.home / "local" / "mars").exists()
