"""Where gpuprov keeps its state on the controller, and how the environment moves it."""

from __future__ import annotations

from ansible_collections.gpuprov.cloud.plugins.module_utils.state_dir import default_journal_path, default_state_dir


def test_default_paths_follow_the_environment(tmp_path, monkeypatch):
    monkeypatch.delenv("GPUPROV_HOME", raising=False)
    monkeypatch.delenv("GPUPROV_JOURNAL", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)
    assert default_state_dir() == str(tmp_path / "home" / ".local" / "state" / "gpuprov")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert default_state_dir() == str(tmp_path / "xdg" / "gpuprov")
    assert default_journal_path() == str(tmp_path / "xdg" / "gpuprov" / "journal.sqlite")
    monkeypatch.setenv("GPUPROV_HOME", str(tmp_path / "gh"))
    assert default_journal_path() == str(tmp_path / "gh" / "journal.sqlite")
    monkeypatch.setenv("GPUPROV_JOURNAL", str(tmp_path / "j" / "x.sqlite"))
    assert default_journal_path() == str(tmp_path / "j" / "x.sqlite")
