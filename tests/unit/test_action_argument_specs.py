"""Every action-backed module has one argument spec: its action plugin validates the task
with it, its module file (which carries the documentation) builds its AnsibleModule from
the same object, and the documented options (as ansible-doc renders them, doc fragments
included) say exactly what the spec accepts."""

from __future__ import annotations

import importlib
import json
import os
import pathlib
import subprocess
import sys

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils import controller_only
from ansible_collections.gpuprov.cloud.plugins.module_utils.cluster import args as cluster_args
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks import args as vm_args
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks import health_args, ssh_files

REPO = pathlib.Path(__file__).resolve().parents[2]
COLLECTIONS = REPO / "build" / "collections"
BIN = pathlib.Path(sys.executable).parent
PLUGINS = "ansible_collections.gpuprov.cloud.plugins."

# module name -> the one spec its action plugin and its module file share
SHARED = {
    "vm": vm_args.VM_ARGUMENT_SPEC,
    "vm_stage": cluster_args.VM_STAGE_ARGUMENT_SPEC,
    "k3s_kubeconfig": cluster_args.K3S_KUBECONFIG_ARGUMENT_SPEC,
    "k3s_validate": cluster_args.K3S_VALIDATE_ARGUMENT_SPEC,
    "health_info": health_args.HEALTH_ARGUMENT_SPEC,
    "ssh_files": ssh_files.SSH_FILES_ARGUMENT_SPEC,
}


@pytest.fixture(scope="module")
def documented():
    """{module: its options} as ansible-doc shows them to users."""
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(COLLECTIONS), ANSIBLE_NOCOLOR="1")
    proc = subprocess.run([str(BIN / "ansible-doc"), "--json", "-t", "module"]
                          + ["gpuprov.cloud.%s" % name for name in SHARED],
                          env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    docs = json.loads(proc.stdout)
    return {name: docs["gpuprov.cloud.%s" % name]["doc"]["options"] for name in SHARED}


def _shape(options, nested):
    """What a spec (``nested="options"``) or its documentation (``nested="suboptions"``)
    says about each option, in one shape: absent keys are the argument spec's defaults."""
    out = {}
    for name, option in options.items():
        shown = {"type": option.get("type", "str")}
        for key in ("required", "default", "choices", "elements"):
            value = option.get(key)
            if value is None or (key == "required" and not value):
                continue   # unset: the same as not said
            shown[key] = value
        if option.get(nested):
            shown["nested"] = _shape(option[nested], nested)
        out[name] = shown
    return out


@pytest.mark.parametrize("module", sorted(SHARED))
def test_documented_options_are_the_spec(module, documented):
    assert _shape(documented[module], "suboptions") == _shape(SHARED[module], "options")


@pytest.mark.parametrize("module", sorted(SHARED))
def test_action_and_module_use_the_one_spec(module, monkeypatch):
    action = importlib.import_module(PLUGINS + "action." + module)
    used = [value for value in vars(action).values() if value is SHARED[module]]
    assert used, "the %s action plugin does not import its shared spec" % module
    assert not [name for name, value in vars(action).items()
                if isinstance(value, dict) and name.endswith("SPEC") and value is not SHARED[module]], \
        "the %s action plugin keeps a spec of its own" % module

    documentation = importlib.import_module(PLUGINS + "modules." + module)
    seen = {}

    class Recording:
        def __init__(self, argument_spec, **kwargs):
            seen.update(argument_spec=argument_spec, **kwargs)
            raise SystemExit(0)

    # The module file's main() validates through controller_only (run as a plain module, it refuses).
    monkeypatch.setattr(controller_only, "JournalModule", Recording)
    with pytest.raises(SystemExit):
        documentation.main()
    assert seen["argument_spec"] is SHARED[module] and seen["supports_check_mode"] is True
