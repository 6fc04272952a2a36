"""gpuprov.cloud.ssh_files (tasks/ssh_files.py): known_hosts and the ssh config written from the
journal into a state directory that has neither, with the key as key_source picks it."""

from __future__ import annotations

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journal import Journal
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import projection
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.ssh_files import SshFilesError, generate

KEY = "AAAAC3NzaC1lZDI1NTE5AAAAIK" + "q" * 42


@pytest.fixture
def journal_path(tmp_path, monkeypatch):
    state = tmp_path / "fresh-state"
    monkeypatch.setenv("GPUPROV_HOME", str(state))
    monkeypatch.delenv("GPUPROV_SSH_KEY_FILE", raising=False)
    path = tmp_path / "shared" / "journal.sqlite"
    path.parent.mkdir()
    journal = Journal(str(path))
    try:
        for name, status, host_key in (("up1", "running", {"type": "ssh-ed25519", "key": KEY}),
                                       ("nokey1", "running", None), ("gone1", "leaked", None)):
            projection.upsert_vm(journal, name, cloud="local", region="local", ssh_host="127.0.0.1", ssh_port=2222,
                                 ssh_user="me", host_key_alias="gpuprov-%s-0123456789ab" % name, status=status,
                                 detail={"host_key": host_key} if host_key else {})
    finally:
        journal.close()
    monkeypatch.setenv("GPUPROV_JOURNAL", str(path))
    return path


def _params(**given):
    return dict({"name": None, "journal": None, "journal_password": None, "ssh_key": None}, **given)


def test_a_fresh_state_directory_gets_the_journals_keys_and_blocks(journal_path, tmp_path):
    state = tmp_path / "fresh-state"
    result = generate(_params(name="up1"), credential_key=str(tmp_path / "awx_key"))
    assert result["changed"] is True and result["hosts"] == ["up1"]
    assert (result["ssh_key"], result["ssh_key_source"]) == (str(tmp_path / "awx_key"), "ansible_ssh_private_key_file")
    assert result["ssh_config"] == str(state / "ssh_config") and result["journal"] == str(journal_path)
    assert (state / "known_hosts").read_text() == "gpuprov-up1-0123456789ab ssh-ed25519 %s\n" % KEY
    config = (state / "ssh_config").read_text()
    assert "Host up1\n    HostName 127.0.0.1\n    Port 2222\n    User me\n" in config
    assert "IdentityFile %s\n" % (tmp_path / "awx_key") in config and "Host nokey1" not in config
    for name in ("known_hosts", "ssh_config"):
        assert (state / name).stat().st_mode & 0o777 == 0o600
    again = generate(_params(name="up1"), credential_key=str(tmp_path / "awx_key"))
    assert again["changed"] is False


def test_check_mode_writes_nothing(journal_path, tmp_path):
    result = generate(_params(), check_mode=True)
    assert result["hosts"] == ["up1"] and result["changed"] is False
    assert not (tmp_path / "fresh-state" / "ssh_config").exists()


@pytest.mark.parametrize("name", ["nokey1", "gone1", "nothere"])
def test_a_vm_without_a_pinned_running_instance_is_a_clear_error(journal_path, name):
    with pytest.raises(SshFilesError, match="%s has no running VM with a pinned host key in the journal %s: "
                                            "provision it first" % (name, journal_path)):
        generate(_params(name=name))


def test_no_journal_yet_no_hosts_and_none_created(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUPROV_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("GPUPROV_JOURNAL", str(tmp_path / "none.sqlite"))
    assert generate(_params(ssh_key="~/k"))["hosts"] == []
    assert not (tmp_path / "none.sqlite").exists()
