"""cloud_options is declared and documented as a plain dict (each cloud's options are documented once, on its
page, docs/clouds/<cloud>.md), and validated as strictly as when every module declared each cloud's options as
its suboptions: every place that validates a task's arguments (a module's JournalModule, the action plugins,
the in-process run of offers, instance and instance_info) checks it against provider_args.validation_spec, so
an unknown cloud or option and a wrong value fail before anything runs with the very message Ansible gave for
the suboptions, and a credential given there, or read from its environment variable, is a no_log value."""

from __future__ import annotations

import importlib
import json
import os
import pathlib
import re
import subprocess
import sys
from types import SimpleNamespace

import pytest
from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks import provider_args
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers import options as shared
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers import registry

MODULES = pathlib.Path(__file__).resolve().parents[2] / "plugins" / "modules"
PLUGINS = "ansible_collections.gpuprov.cloud.plugins."
MASK = "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER"

# Bad cloud_options, and what names the field in the message (the suboptions' own wording).
BAD = [
    ({"local": {"rooot": "/x"}}, "cloud_options.local.rooot. Supported parameters include: python_interpreter, "
                                 "root, sshd, user."),
    ({"nimbus": {}}, "cloud_options.nimbus. Supported parameters include: aws, digitalocean, docker"),
    ({"docker": {"privileged": "maybe"}}, "argument 'privileged' is of type str found in 'cloud_options -> docker'"),
    ({"gcp": {"boot_script_via": "floppy"}}, "value of boot_script_via must be one of: cloud-init, startup-script, "
                                             "got: floppy found in cloud_options -> gcp"),
    ({"aws": {"ami_owners": {"a": 1}}}, "argument 'ami_owners' is of type dict found in 'cloud_options -> aws'"),
]


@pytest.fixture(autouse=True)
def state_dir(tmp_path, monkeypatch):
    """A state directory of the test's own: a task that got past its validation would work there, not in ~."""
    monkeypatch.setenv("GPUPROV_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("GPUPROV_JOURNAL", raising=False)


def declared_with_suboptions(spec):
    """The spec as the modules declared it before: each cloud's declared options as cloud_options' suboptions."""
    def undocumented(declared):
        return {key: value for key, value in declared.items() if key not in shared.DOC_KEYS}

    return dict(spec, cloud_options=dict(type="dict", default={}, options={
        cloud: dict(type="dict", options={name: undocumented(declared)
                                          for name, declared in registry.OPTION_SPECS[cloud].items()})
        for cloud in registry.OPTION_SPECS}))


def words(msg):
    """A validation message without the module's name (a module run outside Ansible calls itself basic.py) and
    without Ansible's list of valid booleans (a set, in another order in each process)."""
    return re.sub(r"^Unsupported parameters for \(\S+\) module: ", "", msg).split(" Valid booleans include")[0]


def suboptions_message(spec, cloud_options):
    """The message a module declaring the suboptions gave for these cloud_options."""
    result = ArgumentSpecValidator(declared_with_suboptions(spec)).validate({"cloud_options": cloud_options})
    assert result.errors, cloud_options
    return words(result.errors.msg)


def arguments(name, cloud_options):
    """A task of module ``name`` that only its cloud_options make wrong."""
    args = {"cloud_options": cloud_options}
    if name not in ("orphans", "journal_info", "offers"):
        args["name"] = "vm1"
    if name == "vm_stage":
        args["stage"] = "k3s:Ready"
    return args


# -- the declaration -----------------------------------------------------------------------------

def test_cloud_options_is_declared_a_plain_dict_and_validated_with_each_cloud_s_options():
    assert provider_args.GROUP_SPEC["cloud_options"] == {"type": "dict", "default": {}}
    spec = provider_args.validation_spec(provider_args.GROUP_SPEC)
    assert spec == declared_with_suboptions(provider_args.GROUP_SPEC)
    assert provider_args.GROUP_SPEC["cloud_options"] == {"type": "dict", "default": {}}   # a copy was changed
    assert provider_args.validation_spec({"name": {"type": "str"}}) == {"name": {"type": "str"}}


@pytest.mark.parametrize("cloud_options,expected", BAD)
def test_the_validation_spec_refuses_what_the_suboptions_refused_in_their_words(cloud_options, expected):
    spec = provider_args.validation_spec(provider_args.GROUP_SPEC)
    result = ArgumentSpecValidator(spec).validate({"cloud_options": cloud_options})
    assert words(result.errors.msg) == suboptions_message(provider_args.GROUP_SPEC, cloud_options)
    assert expected in result.errors.msg


def test_the_validation_spec_types_and_fills_each_cloud_s_options_as_the_suboptions_did():
    given = {"cloud_options": {"docker": {"privileged": "yes", "ssh_port": "2222"}, "aws": {"region": "eu-west-1"}}}
    spec = provider_args.validation_spec(provider_args.GROUP_SPEC)
    typed = ArgumentSpecValidator(spec).validate(dict(given)).validated_parameters["cloud_options"]
    before = ArgumentSpecValidator(declared_with_suboptions(provider_args.GROUP_SPEC)).validate(dict(given))
    assert typed == before.validated_parameters["cloud_options"]
    assert typed["docker"]["privileged"] is True and typed["docker"]["ssh_port"] == 2222
    assert typed["aws"]["regions"] == ["eu-west-1"]


# -- a module, run as Ansible runs it ----------------------------------------------------------------

def _run_module(module, args, env=None):
    proc = subprocess.run([sys.executable, str(MODULES / ("%s.py" % module))], capture_output=True, text=True,
                          input=json.dumps({"ANSIBLE_MODULE_ARGS": args}), timeout=60, check=False,
                          env=dict({"PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join(sys.path),
                                    "GPUPROV_HOME": os.environ["GPUPROV_HOME"]}, **(env or {})))
    return proc.stdout + proc.stderr, json.loads(proc.stdout)


@pytest.mark.parametrize("module", ["journal_info", "offers", "instance_info", "vm"])
@pytest.mark.parametrize("cloud_options,expected", BAD[:3])
def test_a_module_refuses_bad_cloud_options_as_it_did(module, cloud_options, expected):
    out, result = _run_module(module, arguments(module, cloud_options))
    assert result["failed"] is True and "Traceback" not in out
    assert expected in result["msg"], result["msg"]
    spec = declared_with_suboptions(provider_args.GROUP_SPEC)
    assert words(result["msg"]) == suboptions_message(spec, cloud_options)


def test_a_credential_in_cloud_options_is_hidden_by_a_module_even_when_its_arguments_fail():
    secret = "lambda-key-s3cr3t-0123"
    out, result = _run_module("offers", {"gpu_count": "not-a-number", "cloud_options": {"lambda": {"api_key": secret}}})
    assert result["failed"] is True and secret not in out
    assert result["invocation"]["module_args"]["cloud_options"]["lambda"]["api_key"] == MASK


def test_a_credential_read_from_its_environment_variable_is_hidden_by_a_module():
    secret = "lambda-env-s3cr3t-4567"
    out, result = _run_module("journal_info", {"journal": "postgresql://u@127.0.0.1:9/j", "cloud_options": {"lambda": {}}},
                              env={"LAMBDA_API_KEY": secret})
    assert result["failed"] is True and secret not in out
    assert result["invocation"]["module_args"]["cloud_options"]["lambda"]["api_key"] == MASK


# -- the action plugins ------------------------------------------------------------------------------

ACTIONS = ["vm", "vm_stage", "health_info", "ssh_files", "orphans"]
IN_PROCESS = ["offers", "instance", "instance_info"]


def action(name, args):
    """The action plugin of ``name`` with a task of these arguments, run on the controller with its Python."""
    module = importlib.import_module(PLUGINS + "action." + name)
    task = SimpleNamespace(args=dict(args), async_val=0, check_mode=False, diff=False, action="gpuprov.cloud." + name,
                           resolved_action="gpuprov.cloud." + name, environment=[{}], delegate_to=None)
    connection = SimpleNamespace(transport="local", _shell=SimpleNamespace(tmpdir="/tmp"))
    plugin = module.ActionModule(task, connection, SimpleNamespace(become=False), None,
                                 SimpleNamespace(template=lambda value: value))
    plugin._load_name = "gpuprov.cloud." + name
    return plugin


@pytest.mark.parametrize("name", ACTIONS)
@pytest.mark.parametrize("cloud_options,expected", BAD[:3])
def test_an_action_plugin_refuses_bad_cloud_options_as_it_did(name, cloud_options, expected):
    with pytest.raises(AnsibleActionFail) as info:
        action(name, arguments(name, cloud_options)).run(task_vars={})
    assert expected in str(info.value.message), info.value.message
    assert words(str(info.value.message)) == suboptions_message(provider_args.GROUP_SPEC, cloud_options)


@pytest.mark.parametrize("name", IN_PROCESS)
@pytest.mark.parametrize("cloud_options,expected", BAD[:3])
def test_an_in_process_run_refuses_bad_cloud_options_as_the_module_does(name, cloud_options, expected):
    plugin = action(name, arguments(name, cloud_options))
    result = plugin.run(task_vars={"ansible_python_interpreter": sys.executable})
    assert result["failed"] is True and expected in result["msg"], result
    out, ran = _run_module(name, arguments(name, cloud_options))
    assert words(ran["msg"]) == words(result["msg"]), out


def test_an_in_process_run_hides_a_credential_of_cloud_options():
    secret = "runpod-key-s3cr3t-89ab"
    plugin = action("offers", {"gpu_count": "x", "cloud_options": {"runpod": {"api_key": secret}}})
    result = plugin.run(task_vars={"ansible_python_interpreter": sys.executable})
    assert result["failed"] is True and secret not in json.dumps(result)
