"""Modules whose action plugin does the work, run as plain modules (the action plugin bypassed):
they validate their arguments and fail saying where they run, never doing nothing quietly."""

import json
import pathlib
import subprocess
import sys

import pytest

MODULES = pathlib.Path(__file__).resolve().parents[2] / "plugins" / "modules"
ARGS = {
    "health_info": {},
    "k3s_kubeconfig": {"name": "a", "k3s_yaml": "apiVersion: v1", "server": "https://127.0.0.1:6443"},
    "k3s_validate": {"name": "a", "kubeconfig": "/nonexistent/kubeconfig"},
    "orphans": {},
    "ssh_files": {},
    "vm": {"name": "a"},
    "vm_stage": {"name": "a", "stage": "Installing"},
}


def run_plain(module, args):
    proc = subprocess.run([sys.executable, str(MODULES / ("%s.py" % module))], capture_output=True, text=True,
                          input=json.dumps({"ANSIBLE_MODULE_ARGS": args}), timeout=60, check=False)
    return json.loads(proc.stdout)


@pytest.mark.parametrize("module", sorted(ARGS))
def test_a_plain_run_fails_naming_the_action_plugin(module):
    result = run_plain(module, ARGS[module])
    assert result["failed"] is True
    assert result["msg"].startswith("gpuprov.cloud.%s runs on the controller through its action plugin" % module)


def test_a_plain_run_still_validates_its_arguments_first():
    result = run_plain("vm_stage", {"name": "a"})
    assert result["failed"] is True and "stage" in result["msg"] and "action plugin" not in result["msg"]
