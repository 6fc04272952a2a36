"""tasks/host_vars.py: the options gpuprov.cloud.vm takes from its host's variables (from_host_vars)."""

from __future__ import annotations

import importlib
import os
from types import SimpleNamespace

import pytest
from ansible.errors import AnsibleActionFail

from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.host_vars import options_from_host_vars


def resolve(task_vars, template=lambda value: value):
    return options_from_host_vars(task_vars, template)


def test_nothing_set_leaves_every_option_to_the_module_default():
    assert resolve({"inventory_hostname": "train1", "ansible_host": "x"}) == {}


def test_the_short_name_beats_the_record_which_beats_the_prefixed_variable():
    record = {"cloud": "aws", "gpu": "A100", "gpu_count": 2, "journal": "/j/journal.db"}
    assert resolve({"gpu": "H100", "gpuprov": record, "gpuprov_gpu": "L4"})["gpu"] == "H100"
    assert resolve({"gpuprov": record, "gpuprov_gpu": "L4"})["gpu"] == "A100"
    assert resolve({"gpuprov_gpu": "L4"})["gpu"] == "L4"
    options = resolve({"gpuprov": record, "gpuprov_clouds": ["gcp"], "gpuprov_journal": "/other.db"})
    assert options["clouds"] == ["aws"] and options["gpu_count"] == 2 and options["journal"] == "/j/journal.db"
    assert resolve({"clouds": ["lambda"], "gpuprov": record})["clouds"] == ["lambda"]


def test_a_record_of_no_cloud_and_zero_gpus_falls_through_to_the_variables():
    options = resolve({"gpuprov": {"cloud": "", "gpu": None, "gpu_count": 0},
                       "gpuprov_clouds": ["gcp"], "gpuprov_gpu_count": 4})
    # A journalled gpu of None is the record's answer (a CPU VM); its 0 GPUs and empty cloud are not.
    assert options == {"clouds": ["gcp"], "gpu": None, "gpu_count": 4}


def test_options_without_a_short_name_are_read_only_from_their_prefixed_variable():
    options = resolve({"tags": {"ignored": "x"}, "cloud_options": {"aws": {}}, "gpuprov_tags": {"team": "ml"},
                       "gpuprov_purge_tags": False, "gpuprov_cloud_options": {"aws": {"ami": "ami-1"}}})
    assert options == {"tags": {"team": "ml"}, "purge_tags": False, "cloud_options": {"aws": {"ami": "ami-1"}}}


def test_an_empty_k8s_is_unset_and_the_boot_script_comes_from_the_k3s_role():
    assert "k8s" not in resolve({"k8s": "", "gpuprov_k8s": True})
    assert resolve({"gpuprov_k8s": "false"})["k8s"] == "false"   # the module's validator makes it a bool
    script = {"script": "#!/bin/sh\n", "env": {}}
    assert resolve({"k3s_boot_script": script})["boot_script"] == script


def test_every_value_found_is_templated_and_nothing_else_is():
    seen = []

    def template(value):
        seen.append(value)
        return "H100" if value == "{{ wanted }}" else value

    assert resolve({"gpuprov_gpu": "{{ wanted }}", "gpuprov_ttl": "8h", "unrelated": "{{ boom }}"}, template) == {
        "gpu": "H100", "ttl": "8h"}
    assert "{{ boom }}" not in seen


def test_a_record_that_is_not_a_dict_is_ignored():
    assert resolve({"gpuprov": "not a record", "gpuprov_gpu": "L4"}) == {"gpu": "L4"}


# -- the action: the VM is the host ------------------------------------------------------------------------------

def vm_action(args, check_mode=True):
    """gpuprov.cloud.vm's action plugin with a task of ``args`` (check mode: nothing is made)."""
    module = importlib.import_module("ansible_collections.gpuprov.cloud.plugins.action.vm")
    task = SimpleNamespace(args=dict(args), async_val=0, check_mode=check_mode, diff=False, action="gpuprov.cloud.vm",
                           resolved_action="gpuprov.cloud.vm", environment=[{}], delegate_to=None)
    connection = SimpleNamespace(transport="local", _shell=SimpleNamespace(tmpdir="/tmp"))
    plugin = module.ActionModule(task, connection, SimpleNamespace(become=False), None,
                                 SimpleNamespace(template=lambda value: value))
    plugin._load_name = "gpuprov.cloud.vm"
    return plugin


def test_from_host_vars_names_the_vm_after_the_inventory_host_unless_the_task_names_it(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUPROV_HOME", str(tmp_path))
    monkeypatch.delenv("GPUPROV_JOURNAL", raising=False)
    host = {"inventory_hostname": "train7", "gpuprov_clouds": ["local"]}
    result = vm_action({"from_host_vars": True}).run(task_vars=host)
    assert not result.get("failed"), result
    assert "train7" in result["msg"] and [row["cloud"] for row in result["plan"]] == ["local"], result
    named = vm_action({"from_host_vars": True, "name": "other1"}).run(task_vars=host)
    assert "other1" in named["msg"] and "train7" not in named["msg"], named
    assert not os.path.exists(tmp_path / "journal.sqlite")   # check mode makes nothing


def test_without_from_host_vars_a_task_without_a_name_is_refused_naming_the_field():
    with pytest.raises(AnsibleActionFail) as info:
        vm_action({"gpu": "H100"}).run(task_vars={"inventory_hostname": "train7"})
    assert str(info.value.message).startswith("name: required") and "from_host_vars" in str(info.value.message)
