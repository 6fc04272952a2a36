# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Task parameters -> what the adapters are asked for: the clouds, the ResourceRequest
and the InstanceSpec. One path for ``gpuprov.cloud.vm`` (vm/service.py) and the
modules that wrap one primitive (primitives.py), so a parameter means the same thing
in every task. A wrong value is an InvalidRequest ProviderError whose message starts
with the parameter's name."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers import registry
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    BootScript, ErrorKind, InstanceSpec, ProviderError, ResourceRequest,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.gpus import canonical_gpu


def _invalid(msg: str) -> ProviderError:
    return ProviderError(ErrorKind.INVALID_REQUEST, msg)


def known_cloud(cloud: Any, field: str = "cloud") -> str:
    """``cloud`` when an adapter is registered under that name."""
    if not isinstance(cloud, str) or cloud not in registry.ADAPTERS:
        raise _invalid("%s: unknown cloud %r; expected one of %s"
                       % (field, cloud, ", ".join(registry.known_clouds())))
    return cloud


def the_cloud(params: Dict[str, Any]) -> str:
    """The one cloud of a task that acts on one (``cloud``), the default one when unset."""
    return known_cloud(params.get("cloud") or registry.DEFAULT_CLOUD, "cloud")


def search_clouds(params: Dict[str, Any]) -> List[str]:
    """The clouds of a search (``clouds``) in order, each once; the default one when unset."""
    clouds: List[str] = []
    for cloud in params.get("clouds") or [registry.DEFAULT_CLOUD]:
        if known_cloud(cloud, "clouds") not in clouds:
            clouds.append(cloud)
    return clouds


def _gpu_count(params: Dict[str, Any]) -> int:
    count = params.get("gpu_count")
    if count is None:
        return 1
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise _invalid("gpu_count: expected an integer >= 1, got %r" % (count,))
    return count


def resource_request(params: Dict[str, Any], vm_name: str, regions: Optional[List[str]] = None) -> ResourceRequest:
    """What to plan for: ``gpu`` (aliases made canonical), ``gpu_count``, ``regions``
    (or the ``regions`` given here) and ``spot``."""
    if regions is None:
        regions = params.get("regions") or []
    return ResourceRequest(vm_name=vm_name, gpu=canonical_gpu(params.get("gpu")), gpu_count=_gpu_count(params),
                           regions=list(regions), spot=bool(params.get("spot")))


def _boot_script(value: Any) -> Optional[BootScript]:
    if not value:
        return None
    return BootScript(script=value["script"], env={k: str(v) for k, v in (value.get("env") or {}).items()})


def instance_spec(params: Dict[str, Any], vm_name: str, ssh_public_key: str) -> InstanceSpec:
    """How to make the instance: the key to authorise, ``ssh_user``, ``spot``, and where
    the task has them ``allowed_cidrs``, ``open_ports`` (22 always among them) and
    ``boot_script``."""
    spec = InstanceSpec(vm_name=vm_name, ssh_public_key=ssh_public_key.strip(), ssh_user=params.get("ssh_user"),
                        allowed_cidrs=list(params.get("allowed_cidrs") or []), spot=bool(params.get("spot")),
                        boot_script=_boot_script(params.get("boot_script")))
    ports = params.get("open_ports")
    if ports:
        spec.open_ports = sorted(set(int(p) for p in ports) | {22})
    return spec
