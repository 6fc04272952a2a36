# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The vm task's parameters as the machines take them (tasks/service.py runs them): the VmSettings of a launch or
teardown, checked field by field, and where k3s can run among the clouds asked for."""

from __future__ import annotations

import time
from typing import Any, Dict, Optional

from ansible_collections.gpuprov.cloud.plugins.module_utils.expiry import vm_task as expiry_vm_task
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers import registry
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import ProviderError, validate_vm_name
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks import request_params
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm.context import VmContext, VmSettings


class InvalidParameters(Exception):
    """A parameter is wrong; the message names it and says what was expected."""


def _positive(params: Dict[str, Any], field: str, minimum: int = 1) -> None:
    value = params.get(field)
    if value is not None and value < minimum:
        raise InvalidParameters("%s: expected an integer >= %d, got %r" % (field, minimum, value))


def build_settings(params: Dict[str, Any], public_key: str) -> VmSettings:
    """VmSettings from validated task parameters, or InvalidParameters."""
    try:
        name = validate_vm_name(params["name"])
        clouds = request_params.search_clouds(params)
        request = request_params.resource_request(params, name)
        spec = request_params.instance_spec(params, name, public_key)
        prefer, max_price = request_params.search_preferences(params)
    except ProviderError as exc:
        raise InvalidParameters(exc.msg) from exc
    for field in ("boot_timeout", "ssh_timeout", "teardown_timeout"):
        _positive(params, field)
    options = params.get("cloud_options") or {}
    unknown = sorted(set(options) - set(clouds) - set(registry.ADAPTERS))
    if unknown:
        raise InvalidParameters("cloud_options: unknown cloud(s) %s; expected keys among %s"
                                % (", ".join(unknown), ", ".join(registry.known_clouds())))
    return VmSettings(vm_name=name, clouds=clouds, request=request, spec=spec,
                      cloud_options={k: dict(v or {}) for k, v in options.items()},
                      retry_until_up=bool(params.get("retry_until_up")),
                      boot_timeout=params.get("boot_timeout"),
                      ssh_timeout=float(params.get("ssh_timeout") or 300),
                      teardown_timeout=float(params.get("teardown_timeout") or 600),
                      boot_script_is_k3s=params.get("k8s") is not False,
                      recreate=bool(params.get("recreate")), prefer=prefer, max_price_per_hour=max_price,
                      limits=expiry_vm_task.launch_limits(params, time.time()))


def k8s_plan(ctx: VmContext, wanted: Optional[bool]) -> Dict[str, Any]:
    """Which of the clouds can host k3s; reject an explicit k8s=true nowhere possible.

    ``wanted`` None means the default (on where the cloud can host it, skipped with a
    note elsewhere)."""
    able = {}
    for cloud in ctx.settings.clouds:
        caps = ctx.capabilities(cloud)
        able[cloud] = bool(caps.kubernetes)
    if wanted is True and not any(able.values()):
        raise InvalidParameters("k8s: none of the clouds (%s) can host k3s; drop k8s: true or choose a cloud "
                                "that can (the docker cloud can with cloud_options.docker.privileged: true)"
                                % ", ".join(ctx.settings.clouds))
    if wanted is True:
        # Only clouds that can host k3s are searched when it was asked for explicitly.
        ctx.settings.clouds = [c for c in ctx.settings.clouds if able[c]]
    return {"requested": wanted, "capable": able}


def k8s_result(ctx: VmContext, vm: Dict[str, Any], plan: Dict[str, Any]) -> Dict[str, Any]:
    """What the k3s role needs to know about the VM's cloud."""
    cloud = vm["location"]["cloud"]
    caps = ctx.capabilities(cloud)
    enabled = plan["requested"] is not False and bool(caps.kubernetes)
    note = ""
    if plan["requested"] is not False and not caps.kubernetes:
        note = "k3s skipped: the %s cloud cannot host it" % cloud
    return {"enabled": enabled, "access": caps.k3s_access if enabled else None,
            "boot_script": bool(enabled and ctx.k3s_spec_for(cloud).boot_script is not None),
            "note": note}
