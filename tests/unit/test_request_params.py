"""One path from task parameters to ResourceRequest / InstanceSpec, for the vm task
(tasks/service.py build_settings) and the primitive modules (primitives.py)."""

from __future__ import annotations

import pathlib
import re

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks import provider_args, request_params
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers import registry
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import ProviderError
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.vm_settings import InvalidParameters, build_settings

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIUnitTestOnlyNotARealKey000000000000000 unit@test"
VM = {"name": "rq1", "state": "present", "clouds": ["local"], "gpu": None, "gpu_count": 1, "regions": [],
      "spot": False, "retry_until_up": False, "boot_timeout": None, "ssh_timeout": 60, "teardown_timeout": 60,
      "journal": None, "ssh_key": None, "ssh_user": None, "cloud_options": {}, "k8s": None, "boot_script": None}


def test_default_cloud_is_defined_once():
    plugins = pathlib.Path(registry.__file__).resolve().parents[2]
    defined = sorted(str(path.relative_to(plugins)) for path in plugins.rglob("*.py")
                     if re.search(r"^DEFAULT_CLOUD\s*=", path.read_text(), re.M))
    assert defined == ["module_utils/providers/registry.py"]
    assert provider_args.DEFAULT_CLOUD is registry.DEFAULT_CLOUD
    assert request_params.the_cloud({}) == request_params.search_clouds({})[0] == registry.DEFAULT_CLOUD


def test_the_vm_task_builds_what_the_primitives_build():
    params = dict(VM, gpu="a100-80gb", gpu_count=2, regions=["us-east-1"], spot=True, ssh_user="ubuntu",
                  boot_script={"script": "#!/bin/sh\ntrue\n", "env": {"N": 3}})
    settings = build_settings(params, KEY)
    assert settings.request == request_params.resource_request(params, "rq1")
    assert settings.spec == request_params.instance_spec(params, "rq1", KEY)
    assert (settings.request.gpu, settings.request.gpu_count, settings.request.regions, settings.request.spot) == (
        "A100-80GB", 2, ["us-east-1"], True)
    assert settings.spec.boot_script.env == {"N": "3"} and settings.spec.open_ports == [22]


def test_instance_options_reach_the_spec():
    spec = request_params.instance_spec({"open_ports": [8080, 443, 8080], "allowed_cidrs": ["203.0.113.7/32"]},
                                        "rq1", KEY + "\n")
    assert spec.open_ports == [22, 443, 8080] and spec.allowed_cidrs == ["203.0.113.7/32"]
    assert spec.ssh_public_key == KEY and spec.boot_script is None


def test_regions_given_by_the_caller_win():
    assert request_params.resource_request({"regions": ["a", "b"]}, "rq1", ["c"]).regions == ["c"]
    assert request_params.resource_request({"regions": ["a", "b"]}, "rq1").regions == ["a", "b"]


def test_clouds_keep_their_order_once_each():
    assert request_params.search_clouds({"clouds": ["docker", "local", "docker"]}) == ["docker", "local"]


@pytest.mark.parametrize("params, message", [
    ({"gpu_count": 0}, "gpu_count: expected an integer >= 1, got 0"),
    ({"gpu_count": True}, "gpu_count: expected an integer >= 1, got True"),
    ({"gpu": "Z80"}, "gpu: unknown GPU 'Z80'"),
    ({"clouds": ["nimbus"]}, "clouds: unknown cloud 'nimbus'; expected one of"),
])
def test_one_message_for_a_wrong_parameter_in_every_task(params, message):
    with pytest.raises(ProviderError) as direct:
        request_params.search_clouds(params)
        request_params.resource_request(params, "rq1")
    assert direct.value.msg.startswith(message)
    with pytest.raises(InvalidParameters) as through_vm:
        build_settings(dict(VM, **params), KEY)
    assert str(through_vm.value) == direct.value.msg


def test_one_cloud_is_named_by_its_field():
    with pytest.raises(ProviderError) as info:
        request_params.the_cloud({"cloud": "nimbus"})
    assert info.value.msg.startswith("cloud: unknown cloud 'nimbus'")
