# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One definition of each module that wraps provider primitives (offers, instance,
instance_info): its argument spec and its task. The module (shipped by AnsiballZ to
whichever host runs the task) and its action plugin (the controller's own process, when
the task runs there) both run it, so the two paths cannot drift apart.

A task is called with the validated parameters, check mode and diff mode and returns the
whole task result; it never raises a ProviderError (see primitives.guarded) and never
returns a credential.
"""

from __future__ import annotations

from typing import Any, Callable, Dict

from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks import primitives
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.provider_args import (
    TAGS_SPEC, group_argument_spec, reconcile_clouds,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks import diff as vm_diff


class PrimitiveTask:
    """A module's argument spec and what it does with the parameters it validated."""

    def __init__(self, argument_spec: Dict[str, Any],
                 run: Callable[[Dict[str, Any], bool, bool], Dict[str, Any]]):
        self.argument_spec = argument_spec
        self._run = run

    def __call__(self, params: Dict[str, Any], check_mode: bool, diff: bool) -> Dict[str, Any]:
        reconcile_clouds(params)
        return self._run(params, check_mode, diff)


def instance_diff(result: Dict[str, Any], state: str) -> Dict[str, Any]:
    """``result`` with Ansible's ``diff``: the instance record before and after the task."""
    if result.get("failed"):
        return result
    offer = result.get("offer")
    if state == "absent":
        # A teardown's last listing no longer shows what it deleted: the ids and the location do.
        deleted = result.get("deleted") or []
        location = result.get("location") or {}
        before = vm_diff.vm_record(cloud=location.get("cloud"), region=location.get("region"),
                                   zone=location.get("zone"), instance_id=", ".join(deleted)) if deleted else {}
        result["diff"] = vm_diff.result_diff(before, {})
        return result
    after = vm_diff.of_instance_row(result.get("instance"), offer)
    if result.get("instance") is None and offer:   # check mode, nothing there yet
        after = vm_diff.of_offer(offer, "Running (would be created)")
    result["diff"] = vm_diff.result_diff({} if result.get("changed") else after, after)
    return result


def _instance(params: Dict[str, Any], check_mode: bool, diff: bool) -> Dict[str, Any]:
    result = primitives.instance(params, check_mode)
    return instance_diff(result, params["state"]) if diff else result


OFFERS = PrimitiveTask(
    group_argument_spec(name=dict(type="str", default="offers")),
    lambda params, check_mode, diff: primitives.offers(params, check_mode))

INSTANCE = PrimitiveTask(
    group_argument_spec(
        name=dict(type="str", required=True),
        state=dict(type="str", default="present", choices=["present", "absent"]),
        region=dict(type="str"),
        zone=dict(type="str"),
        instance_type=dict(type="str"),
        ssh_public_key=dict(type="str", no_log=False),
        allowed_cidrs=dict(type="list", elements="str", default=[]),
        open_ports=dict(type="list", elements="int", default=[]),
        wait=dict(type="bool", default=True),
        wait_timeout=dict(type="int", default=600),
        tags=TAGS_SPEC["tags"],
    ),
    _instance)

INSTANCE_INFO = PrimitiveTask(
    group_argument_spec(
        name=dict(type="str", required=True),
        region=dict(type="str"),
        zone=dict(type="str"),
    ),
    lambda params, check_mode, diff: primitives.instance_info(params, check_mode))


def finish(module, task: PrimitiveTask) -> None:
    """End ``module`` (an AnsibleModule of ``task.argument_spec``) with the result of ``task`` on its
    parameters. Ansible hides the ``no_log`` options in the task's ``invocation``."""
    result = task(module.params, module.check_mode, module._diff)
    for warning in result.pop("warnings", []):
        module.warn(warning)
    if result.pop("failed", False):
        module.fail_json(**result)
    module.exit_json(**result)
