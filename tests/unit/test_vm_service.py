"""VmService: parameter validation, k8s planning, check mode and the result shape,
against the local cloud (real sshd) in a temporary state directory."""

from __future__ import annotations

import os

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journal import Journal
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import projection, ssh
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.service import VmService
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.vm_settings import InvalidParameters, build_settings

BASE = {"name": "svc", "state": "present", "clouds": ["local"], "gpu": None, "gpu_count": 1, "regions": [],
        "spot": False, "retry_until_up": False, "boot_timeout": None, "ssh_timeout": 60, "teardown_timeout": 60,
        "journal": None, "ssh_key": None, "ssh_user": None, "cloud_options": {}, "k8s": None, "boot_script": None}


@pytest.fixture
def home(home):
    """conftest.py's home; at the end this file's VM is taken down."""
    yield home
    journal_path = home / "journal.sqlite"
    if journal_path.exists():   # never leave an sshd behind
        VmService(dict(BASE, state="absent", name="svc")).run()


@pytest.mark.parametrize("change, message", [
    ({"name": "UPPER"}, "name: expected a DNS label"),
    ({"name": "-x"}, "name: expected a DNS label"),
    ({"gpu": "Voodoo2"}, "gpu: unknown GPU 'Voodoo2'"),
    ({"gpu_count": 0}, "gpu_count: expected an integer >= 1, got 0"),
    ({"ssh_timeout": -5}, "ssh_timeout: expected an integer >= 1"),
    ({"clouds": ["local", "nimbus"]}, "clouds: unknown cloud 'nimbus'; expected one of"),
    ({"cloud_options": {"nimbus": {}}}, "cloud_options: unknown cloud(s) nimbus"),
])
def test_bad_parameters_name_the_field(change, message):
    with pytest.raises(InvalidParameters) as info:
        build_settings(dict(BASE, **change), "ssh-ed25519 AAAA test")
    assert message in str(info.value)


def test_gpu_aliases_and_boot_script_reach_the_spec():
    settings = build_settings(dict(BASE, gpu="a100-80gb", gpu_count=2,
                                   boot_script={"script": "#!/bin/sh\necho hi\n", "env": {"N": 3}}),
                              "ssh-ed25519 AAAA test")
    assert settings.request.gpu == "A100-80GB" and settings.request.gpu_count == 2
    assert settings.spec.boot_script.env == {"N": "3"}
    assert settings.spec.boot_script.to_shell().splitlines()[:2] == ["#!/bin/sh", "export N='3'"]


def test_invalid_parameters_write_nothing(home):
    result = VmService(dict(BASE, gpu_count=0)).run()
    assert result["failed"] and "gpu_count" in result["msg"]
    assert not (home / "journal.sqlite").exists() or Journal(str(home / "journal.sqlite")).load("svc") is None


def test_k8s_true_on_a_cloud_that_cannot_host_it_is_rejected_before_anything_exists(home):
    result = VmService(dict(BASE, k8s=True)).run()
    assert result["failed"] and result["msg"].startswith("k8s: none of the clouds (local) can host k3s")
    assert not (home / "local" / "svc").exists()
    assert Journal(str(home / "journal.sqlite")).load("svc") is None


def test_present_check_mode_then_up_then_check_mode_again(home):
    lines = []
    service = VmService(dict(BASE), progress=lines.append)
    predicted = service.run(check_mode=True)
    assert predicted["changed"] is True and not (home / "local" / "svc").exists()

    up = VmService(dict(BASE), progress=lines.append).run()
    assert not up.get("failed"), up
    assert up["changed"] is True and up["state"] == "Ready"
    assert up["vm"]["cloud"] == "local" and up["vm"]["ssh_host"] == "127.0.0.1"
    assert up["k8s"] == {"enabled": False, "access": None, "boot_script": False,
                         "note": "k3s skipped: the local cloud cannot host it"}
    connection = up["connection"]
    assert connection["ansible_ssh_private_key_file"] == str(home / "id_ed25519")
    assert "StrictHostKeyChecking=yes" in connection["ansible_ssh_common_args"]
    assert any("Booting" in line for line in lines) and all(line.startswith("[svc ") for line in lines)

    assert VmService(dict(BASE)).run(check_mode=True)["changed"] is False
    again = VmService(dict(BASE)).run()
    assert again["changed"] is False and again["vm"]["reused"] is True

    assert VmService(dict(BASE, state="absent")).run(check_mode=True)["changed"] is True
    down = VmService(dict(BASE, state="absent")).run()
    assert down["changed"] is True and down["state"] == "Done"
    assert VmService(dict(BASE, state="absent")).run()["changed"] is False
    journal = Journal(str(home / "journal.sqlite"))
    assert projection.vm(journal, "svc") is None and journal.load("svc").state["kind"] == "Done"


def test_a_named_ssh_key_must_exist(home):
    result = VmService(dict(BASE, ssh_key=str(home / "missing"))).run()
    assert result["failed"] and result["msg"].startswith("ssh_key: ") and "does not exist" in result["msg"]


def test_journal_env_var_is_honoured(home, monkeypatch, tmp_path_factory):
    other = tmp_path_factory.mktemp("elsewhere") / "j.sqlite"
    monkeypatch.setenv("GPUPROV_JOURNAL", str(other))
    result = VmService(dict(BASE, gpu="H100")).run()
    assert result["failed"] and "local cloud has no GPUs" in result["msg"]
    assert other.exists() and oct(os.stat(other).st_mode & 0o777) == "0o600"
    assert Journal(str(other)).load("svc").state["kind"] == "Aborted"


class _CapsOnly:
    """Just enough of an adapter for VmContext.spec_for."""

    def __init__(self, caps):
        self.caps = caps

    def capabilities(self):
        return self.caps


@pytest.mark.parametrize("k8s, expected", [
    (None, {"k3s-able": True, "boot-only": False, "no-boot": False}),
    (True, {"k3s-able": True, "boot-only": False, "no-boot": False}),
    (False, {"k3s-able": True, "boot-only": True, "no-boot": False}),
])
def test_the_k3s_installer_reaches_only_clouds_that_can_host_k3s(k8s, expected):
    from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import Capabilities
    from ansible_collections.gpuprov.cloud.plugins.module_utils.vm.context import VmContext

    settings = build_settings(dict(BASE, k8s=k8s, boot_script={"script": "#!/bin/sh\ntrue\n", "env": {}}),
                              "ssh-ed25519 AAAA test")
    ctx = VmContext(settings, providers={
        "k3s-able": _CapsOnly(Capabilities(kubernetes=True, boot_script=True)),
        "boot-only": _CapsOnly(Capabilities(kubernetes=False, boot_script=True)),
        "no-boot": _CapsOnly(Capabilities(kubernetes=True, boot_script=False)),
    })
    got = {cloud: ctx.spec_for(cloud).boot_script is not None for cloud in expected}
    assert got == expected
    assert settings.spec.boot_script is not None   # the settings themselves are untouched


# -- a second controller (a new AWX job): only the journal and the local cloud's records are shared --

@pytest.fixture
def two_homes(tmp_path, monkeypatch):
    """Two state directories, one journal, one local-cloud root and one SSH key outside both."""
    shared = tmp_path / "shared"
    shared.mkdir()
    key = str(shared / "job_key")
    ssh.ensure_controller_key(key)
    homes = [tmp_path / "home1", tmp_path / "home2"]
    monkeypatch.setenv("GPUPROV_JOURNAL", str(shared / "journal.sqlite"))
    monkeypatch.delenv("GPUPROV_SSH_KEY_FILE", raising=False)
    params = dict(BASE, name="awx", cloud_options={"local": {"root": str(shared / "local")}})

    def in_home(index, **change):
        monkeypatch.setenv("GPUPROV_HOME", str(homes[index]))
        return dict(params, **change)

    yield shared, key, homes, in_home
    # never leave an sshd behind
    VmService(in_home(1, state="absent")).run()


def _events(shared):
    journal = Journal(str(shared / "journal.sqlite"))
    try:
        return journal.events("awx")
    finally:
        journal.close()


def test_a_fresh_home_reuses_reaches_and_tears_down_a_vm_from_the_journal(two_homes):
    shared, key, homes, in_home = two_homes
    up = VmService(in_home(0), credential_key=key).run()
    assert not up.get("failed"), up
    assert up["connection"]["ansible_ssh_private_key_file"] == key
    journal = Journal(str(shared / "journal.sqlite"))
    vm = journal.load("awx").state["vm"]
    row = projection.vm(journal, "awx")
    journal.close()
    assert vm["ssh_key_fingerprint"] == ssh.public_key_fingerprint(ssh.public_key_of(key))
    assert row["detail"]["host_key"] == vm["host_key"] and vm["host_key"]["type"] == "ssh-ed25519"

    again = VmService(in_home(1), credential_key=key).run()
    assert not again.get("failed"), again
    assert again["changed"] is False and again["vm"]["reused"] is True
    assert again["vm"]["instance_id"] == vm["instance_id"]
    # known_hosts and ssh config of the new home were generated from the journal
    assert ssh.ControllerFiles(str(homes[1]), key).known_key(vm["host_key_alias"]) == (
        vm["host_key"]["type"], vm["host_key"]["key"])
    assert "Host awx\n" in (homes[1] / "ssh_config").read_text()

    down = VmService(in_home(1, state="absent")).run()      # no key needed to tear down
    assert down["changed"] is True and down["state"] == "Done", down
    assert down["targets"][0]["instance_ids"] == [vm["instance_id"]]
    from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import Location
    from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.local import LocalProvider
    assert LocalProvider({"root": str(shared / "local")}).observe(Location("local", "local"), "awx") == []


def test_a_run_holding_another_key_is_refused_before_it_touches_the_vm(two_homes, monkeypatch):
    shared, key, homes, in_home = two_homes
    up = VmService(in_home(0, ssh_key=key)).run()
    assert not up.get("failed"), up
    before = _events(shared)

    refused = VmService(in_home(1)).run()      # the new home's own, freshly made key
    assert refused["failed"] and refused["changed"] is False
    made_for = ssh.public_key_fingerprint(ssh.public_key_of(key))
    held = ssh.public_key_fingerprint(ssh.public_key_of(str(homes[1] / "id_ed25519")))
    assert made_for in refused["msg"] and held in refused["msg"]
    assert "GPUPROV_SSH_KEY_FILE" in refused["msg"] and "Machine credential" in refused["msg"]
    assert _events(shared) == before           # not a single transition: no reconcile, no teardown, no create

    monkeypatch.setenv("GPUPROV_SSH_KEY_FILE", key)
    again = VmService(in_home(1)).run()
    assert not again.get("failed") and again["changed"] is False, again
    assert again["vm"]["instance_id"] == up["vm"]["instance_id"]


def test_a_named_key_file_that_is_missing_names_its_source(home, monkeypatch):
    monkeypatch.setenv("GPUPROV_SSH_KEY_FILE", str(home / "nope"))
    result = VmService(dict(BASE)).run()
    assert result["failed"] and result["msg"].startswith("GPUPROV_SSH_KEY_FILE: ")
    monkeypatch.delenv("GPUPROV_SSH_KEY_FILE")
    result = VmService(dict(BASE), credential_key=str(home / "nope")).run()
    assert result["failed"] and result["msg"].startswith("ansible_ssh_private_key_file: ")
