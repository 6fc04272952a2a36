# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The options gpuprov.cloud.vm takes from its host's variables with ``from_host_vars: true``,
as the provision playbook runs it for every VM of a fleet.

For each option the task does not set, the first of these that is defined wins:

1. the short name (``gpu``, ``clouds``, ``ttl``, ...), normally given with ``-e``;
2. the VM's record in the journal inventory's ``gpuprov`` dict (its ``journal``, ``cloud``,
   ``gpu`` and a non-zero ``gpu_count``), so that a journalled VM is re-checked as it was asked for;
3. the ``gpuprov_<option>`` variable, normally set in the inventory.

An option none of them sets takes the module's default. ``boot_script`` comes from the
k3s role's ``k3s_boot_script`` fact. A ``k8s`` of ``''`` counts as unset (the k3s role's
convention for "where the cloud can").

This is the playbook's former ``module_defaults`` template written as lookups: Ansible compiles
a templated argument afresh in every host's worker, and that one template (26 options) cost
each VM of a fleet about 15 ms of controller CPU, where these lookups cost well under one
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Mapping

# Options that have a short name (read before the record and the gpuprov_ variable).
SHORT_NAMED = (
    "gpu", "gpu_count", "clouds", "regions", "spot", "prefer", "max_price_per_hour", "retry_until_up",
    "recreate", "k8s", "ttl", "expires_at", "idle_stop", "max_spend", "limits_grace",
)
# Options read only from their gpuprov_ variable (and, for journal, the record): `tags` is an Ansible
# keyword and the others are no -e switch of the playbook.
PREFIXED_ONLY = ("cloud_options", "journal", "tags", "purge_tags")
RECORD_VAR = "gpuprov"            # the journal inventory's dict of a host
BOOT_SCRIPT_VAR = "k3s_boot_script"
_UNSET = object()


def _from_record(option: str, record: Mapping[str, Any]) -> Any:
    """The option as the host's journal record gives it, or _UNSET."""
    if option == "clouds":
        return [record["cloud"]] if record.get("cloud") else _UNSET
    if option == "gpu":
        return record["gpu"] if "gpu" in record else _UNSET
    if option == "gpu_count":
        return record["gpu_count"] if record.get("gpu_count") else _UNSET   # 0 GPUs journalled: the default
    if option == "journal":
        return record["journal"] if "journal" in record else _UNSET
    return _UNSET


def options_from_host_vars(task_vars: Mapping[str, Any], template: Callable[[Any], Any]) -> Dict[str, Any]:
    """The vm options that ``task_vars`` give, each templated with ``template`` (the task's templar):
    only the options found, so the module's defaults stay the defaults."""
    def lookup(name: str) -> Any:
        return template(task_vars[name]) if name in task_vars else _UNSET

    record = lookup(RECORD_VAR)
    if not isinstance(record, Mapping):
        record = {}
    options: Dict[str, Any] = {}
    for option in SHORT_NAMED + PREFIXED_ONLY:
        value = lookup(option) if option in SHORT_NAMED else _UNSET
        if value is _UNSET:
            value = _from_record(option, record)
        if value is _UNSET:
            value = lookup("gpuprov_%s" % option)
        if option == "k8s" and isinstance(value, str) and value == "":
            continue   # '' is the k3s role's "where the cloud can": the option stays unset
        if value is not _UNSET:
            options[option] = value
    boot_script = lookup(BOOT_SCRIPT_VAR)
    if boot_script is not _UNSET:
        options["boot_script"] = boot_script
    return options
