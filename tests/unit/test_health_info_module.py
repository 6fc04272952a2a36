"""gpuprov.cloud.health_info has one argument spec: its action plugin validates with it, its
module file (the documentation) builds its AnsibleModule from it, and ansible-doc shows
exactly its options, the module_defaults group's shared ones included."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils import controller_only
from ansible_collections.gpuprov.cloud.plugins.action import health_info as action
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.provider_args import GROUP_SPEC
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.health_args import HEALTH_ARGUMENT_SPEC
from ansible_collections.gpuprov.cloud.plugins.modules import health_info as documentation
from ansible_collections.gpuprov.cloud.tests.unit.test_action_argument_specs import BIN, COLLECTIONS, _shape


def test_documented_options_are_the_spec():
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(COLLECTIONS), ANSIBLE_NOCOLOR="1")
    proc = subprocess.run([str(BIN / "ansible-doc"), "--json", "-t", "module", "gpuprov.cloud.health_info"],
                          env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    documented = json.loads(proc.stdout)["gpuprov.cloud.health_info"]["doc"]["options"]
    assert _shape(documented, "suboptions") == _shape(HEALTH_ARGUMENT_SPEC, "options")


def test_it_accepts_every_option_the_group_shares():
    assert set(GROUP_SPEC) <= set(HEALTH_ARGUMENT_SPEC)


def test_action_and_module_use_the_one_spec(monkeypatch):
    assert action.HEALTH_ARGUMENT_SPEC is HEALTH_ARGUMENT_SPEC
    seen = {}

    class Recording:
        def __init__(self, argument_spec, **kwargs):
            seen.update(argument_spec=argument_spec, **kwargs)
            raise SystemExit(0)

    # The module file's main() validates through controller_only (run as a plain module, it refuses).
    monkeypatch.setattr(controller_only, "JournalModule", Recording)
    with pytest.raises(SystemExit):
        documentation.main()
    assert seen["argument_spec"] is HEALTH_ARGUMENT_SPEC and seen["supports_check_mode"] is True
