"""The watchdog at boot (issue 27): composed into the boot script where the cloud runs one and the VM has limits,
never on local or nebius; the k3s installer keeps its own part; and a failed SSH update of the limits is a warning."""

from __future__ import annotations

import dataclasses

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.expiry import boot, store, vm_task
from ansible_collections.gpuprov.cloud.plugins.module_utils.expiry.limits import Limits
from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journal import Journal
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import BootScript, Capabilities
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import ssh
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm.context import VmContext
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.vm_settings import build_settings

LIMITS = Limits(expires_at=2_000_000_000)
K3S = BootScript(script="#!/bin/bash\necho k3s\nexec true\n", env={"K3S_TOKEN": "x"})
PARAMS = {"name": "wd", "clouds": ["aws"], "gpu": None, "gpu_count": 1, "regions": [], "spot": False,
          "cloud_options": {}, "k8s": None, "boot_script": None, "ttl": "1h"}


class FakeProvider:
    """An adapter stand-in that only answers capabilities()."""

    def __init__(self, caps):
        self.caps = caps

    def capabilities(self):
        return self.caps


def test_compose_puts_the_watchdog_first_and_keeps_the_installer_and_its_env():
    part = "echo watchdog"
    alone = boot.compose(None, part)
    assert alone.script == "#!/bin/sh\necho watchdog" and alone.env == {}
    both = boot.compose(K3S, part)
    assert both.script.splitlines() == ["#!/bin/bash", "echo watchdog", "echo k3s", "exec true"]
    assert both.env == {"K3S_TOKEN": "x"}


@pytest.mark.parametrize("cloud, limits, expected", [
    ("aws", LIMITS, True),
    ("aws", Limits(), False),           # no limits: nothing to enforce
    ("aws", Limits(grace_s=60), False),  # a grace alone limits nothing
    ("aws", None, False),
    ("local", LIMITS, False),           # it would power off the controller
    ("nebius", LIMITS, True),           # made with recovery_policy=FAIL: a guest power-off stops it
])
def test_which_vms_get_the_watchdog(cloud, limits, expected):
    assert boot.has_watchdog(cloud, limits) is expected


def test_a_cloud_without_a_boot_script_gets_no_boot_part_its_watchdog_goes_over_ssh():
    settings = build_settings(dict(PARAMS, clouds=["runpod"]), "ssh-ed25519 AAAA test")
    ctx = VmContext(settings, providers={"runpod": FakeProvider(Capabilities(boot_script=False, kubernetes=False))})
    assert ctx.spec_for("runpod").boot_script is None
    assert ctx.spec_for("runpod").terminate_on_guest_shutdown is False


def test_the_spec_a_cloud_gets_carries_the_watchdog_and_the_k3s_plan_does_not_see_it():
    settings = build_settings(PARAMS, "ssh-ed25519 AAAA test")
    assert settings.limits is not None and settings.limits.expires_at is not None
    caps = Capabilities(boot_script=True, kubernetes=False)
    ctx = VmContext(settings, providers={"aws": FakeProvider(caps)})
    assert "gpuprov-watchdog" in ctx.spec_for("aws").boot_script.script
    assert ctx.spec_for("aws").terminate_on_guest_shutdown is True
    assert ctx.k3s_spec_for("aws").boot_script is None
    no_limits = VmContext(dataclasses.replace(settings, limits=None), providers={"aws": FakeProvider(caps)})
    assert no_limits.spec_for("aws").boot_script is None


def test_the_boot_part_carries_the_tasks_grace_and_the_check_interval_it_implies():
    settings = build_settings(dict(PARAMS, limits_grace="10s"), "ssh-ed25519 AAAA test")
    assert settings.limits is not None and settings.limits.grace_s == 10
    ctx = VmContext(settings, providers={"aws": FakeProvider(Capabilities(boot_script=True, kubernetes=False))})
    script = ctx.spec_for("aws").boot_script.script
    assert '"grace=10"' in script and '"interval=5"' in script and "OnUnitActiveSec=5" in script
    default = VmContext(build_settings(PARAMS, "ssh-ed25519 AAAA test"),
                        providers={"aws": FakeProvider(Capabilities(boot_script=True, kubernetes=False))})
    assert '"grace=300"' in default.spec_for("aws").boot_script.script


def test_a_failed_ssh_update_of_the_limits_is_a_warning(tmp_path, clock):
    journal = Journal(str(tmp_path / "journal.sqlite"), clock=clock)
    files = ssh.ControllerFiles(str(tmp_path), str(tmp_path / "id_ed25519"))
    ssh.ensure_controller_key(str(tmp_path / "id_ed25519"))
    vm = {"name": "wd", "instance_id": "i-1", "price_per_hour": 1.0, "host_key_alias": "wd-i-1",
          "location": {"cloud": "aws", "region": "us-east-1"}, "ssh": {"host": "127.0.0.1", "port": 9, "user": "u"}}
    result = vm_task.after_ready(journal, "wd", vm, {"ttl": "2h"}, {"changed": False}, files=files)
    assert store.read(journal, "wd").limits.expires_at == 1000 + 7200   # the journal first
    [warned] = result["warnings"]
    assert warned.startswith("wd: its watchdog could not be installed or given its limits over SSH") and "reap" in warned
    assert "gpuprov_watchdog_install" not in warned   # the script is not dumped into the warning
    journal.close()


def test_a_vm_on_a_cloud_without_a_watchdog_is_said_to_rest_on_the_reap(tmp_path, clock):
    journal = Journal(str(tmp_path / "journal.sqlite"), clock=clock)
    vm = {"name": "lo", "instance_id": "i-1", "price_per_hour": None, "host_key_alias": "lo-i-1",
          "location": {"cloud": "local", "region": "local"}, "ssh": {"host": "127.0.0.1", "port": 9, "user": "u"}}
    files = ssh.ControllerFiles(str(tmp_path), str(tmp_path / "id_ed25519"))
    result = vm_task.after_ready(journal, "lo", vm, {"ttl": "2h"}, {"changed": False}, files=files)
    [warned] = result["warnings"]
    assert warned.startswith("lo: no watchdog on the local cloud (its VM is an sshd on this controller")
    assert "only gpuprov.cloud.reap enforces its limits" in warned
    again = vm_task.after_ready(journal, "lo", vm, {"ttl": "2h"}, {"changed": False}, files=files)
    assert "warnings" not in again   # said when the limits are set or moved, not on every run
    journal.close()
