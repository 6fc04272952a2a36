# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Task parameters -> what the adapters are asked for: the clouds, the ResourceRequest
and the InstanceSpec. One path for ``gpuprov.cloud.vm`` (tasks/service.py) and the
modules that wrap one primitive (primitives.py), so a parameter means the same thing
in every task. A wrong value is an InvalidRequest ProviderError whose message starts
with the parameter's name."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers import registry
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    JOURNAL_ID_TAG, VM_NAME_TAG, BootScript, ErrorKind, InstanceSpec, ProviderError, ResourceRequest,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.gpus import canonical_gpu

# Tag keys gpuprov keeps for itself: the identity tags and the other gpuprov-* tags adapters set.
RESERVED_TAG_PREFIX = "gpuprov-"


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


def user_tags(params: Dict[str, Any]) -> Dict[str, str]:
    """The ``tags`` option as string keys and values. A key gpuprov keeps for itself (the identity
    tags, which every resource carries and a user can never override) is refused, naming it."""
    tags = params.get("tags") or {}
    if not isinstance(tags, dict):
        raise _invalid("tags: expected a dict of tag names to values, got %s" % type(tags).__name__)
    out: Dict[str, str] = {}
    for key, value in tags.items():
        key = str(key).strip()
        if not key:
            raise _invalid("tags: expected non-empty tag names, got %r" % (key,))
        if key.lower().startswith(RESERVED_TAG_PREFIX):
            raise _invalid("tags: %r is reserved; tag names starting with %r are gpuprov's own (%s and %s name the "
                           "VM and its journal on every resource and cannot be set or overridden)"
                           % (key, RESERVED_TAG_PREFIX, VM_NAME_TAG, JOURNAL_ID_TAG))
        if isinstance(value, (dict, list)):
            raise _invalid("tags.%s: expected a string or number, got %s" % (key, type(value).__name__))
        out[key] = "" if value is None else str(value).lower() if isinstance(value, bool) else str(value)
    return out


def instance_spec(params: Dict[str, Any], vm_name: str, ssh_public_key: str) -> InstanceSpec:
    """How to make the instance: the key to authorise, ``ssh_user``, ``spot``, and where
    the task has them ``allowed_cidrs``, ``open_ports`` (22 always among them), ``boot_script``
    and the user's ``tags``."""
    spec = InstanceSpec(vm_name=vm_name, ssh_public_key=ssh_public_key.strip(), ssh_user=params.get("ssh_user"),
                        allowed_cidrs=list(params.get("allowed_cidrs") or []), spot=bool(params.get("spot")),
                        boot_script=_boot_script(params.get("boot_script")), tags=user_tags(params))
    ports = params.get("open_ports")
    if ports:
        spec.open_ports = sorted(set(int(p) for p in ports) | {22})
    return spec


PREFER = ("order", "price")


def search_preferences(params: Dict[str, Any]) -> Tuple[str, Optional[float]]:
    """How a search orders and filters offers: ``prefer`` (V(order) or V(price)) and
    ``max_price_per_hour`` (USD, None for no limit)."""
    prefer = params.get("prefer") or "order"
    if prefer not in PREFER:
        raise _invalid("prefer: expected one of %s, got %r" % (", ".join(PREFER), prefer))
    limit = params.get("max_price_per_hour")
    if limit is not None:
        if isinstance(limit, bool) or not isinstance(limit, (int, float)) or limit < 0:
            raise _invalid("max_price_per_hour: expected a number of US dollars >= 0, got %r" % (limit,))
        limit = float(limit)
    return prefer, limit
