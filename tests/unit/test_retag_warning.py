"""A kept VM on a cloud that cannot change its tags: the vm module warns once per asked-for change (journalled
as a tags-kept event of the VM), not on every run, and says it again when the request changes. The local cloud
(real sshd) stands in for such a cloud with its retag switched off."""

from __future__ import annotations

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.local import LocalProvider

VM = {"name": "keptvm", "state": "present", "clouds": ["local"], "gpu": None, "gpu_count": 1, "regions": [],
      "spot": False, "retry_until_up": False, "boot_timeout": None, "ssh_timeout": 60, "teardown_timeout": 60,
      "journal": None, "ssh_key": None, "ssh_user": None, "cloud_options": {}, "k8s": None, "boot_script": None,
      "tags": {"team": "ml"}, "purge_tags": True}


@pytest.fixture
def home(home, monkeypatch):
    """conftest.py's home, on a local cloud that cannot change tags; at the end this file's VM is taken down."""
    from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.service import VmService
    monkeypatch.setattr(LocalProvider, "can_retag", False)
    yield home
    if (home / "journal.sqlite").exists():   # never leave an sshd behind
        VmService(dict(VM, state="absent")).run()


def _tags_warnings(result):
    return [w for w in result.get("warnings") or [] if w.startswith("tags:")]


def test_the_cannot_change_tags_warning_is_given_once_per_asked_for_change(home):
    from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.service import VmService
    up = VmService(dict(VM)).run()
    assert up["state"] == "Ready" and not _tags_warnings(up), up
    assert not _tags_warnings(VmService(dict(VM)).run())   # the tags it was made with: nothing to say

    asked = dict(VM, tags={"team": "ai"})
    preview = VmService(asked).run(check_mode=True)
    assert len(_tags_warnings(preview)) == 1   # check mode says it, and records nothing
    first = VmService(asked).run()
    (warning,) = _tags_warnings(first)
    assert warning.startswith("tags: the local cloud cannot change the tags of an existing VM; keptvm keeps the "
                              "ones it was made with (team=ml). Said once for these tags")
    assert first["changed"] is False and "tags" not in first
    again = VmService(asked).run()
    assert again["state"] == "Ready" and not _tags_warnings(again)   # the same request: said already
    assert not _tags_warnings(VmService(asked).run(check_mode=True))

    other = VmService(dict(VM, tags={"team": "ai"}, purge_tags=False)).run()
    assert len(_tags_warnings(other)) == 1   # another request: said again, once
    assert len(_tags_warnings(VmService(dict(VM, tags={"owner": "kim"})).run())) == 1
    assert not _tags_warnings(VmService(dict(VM, tags={"owner": "kim"})).run())
