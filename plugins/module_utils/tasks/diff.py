# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Diff mode: what a task changed, as Ansible's ``diff`` result (``before``/``after``).

Like community.docker's DifferenceTracker, each side is a flat record of the fields a
person compares, so ``--diff`` prints only what moved: a VM record (cloud, region, type,
GPU, status, endpoint), or a kubeconfig with its secrets masked. An empty record means
nothing exists on that side."""

from __future__ import annotations

import copy
from typing import Any, Dict, Optional

# The VM record's fields, in the order --diff prints them.
VM_FIELDS = ("cloud", "region", "zone", "instance_type", "gpu", "gpu_count", "instance_id", "status", "endpoint")
MASK = "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER"  # what Ansible prints for a no_log value
# kubeconfig keys that hold credentials (client certificates and keys, tokens, passwords).
KUBECONFIG_SECRETS = ("client-certificate-data", "client-key-data", "token", "password")


def vm_record(**fields: Any) -> Dict[str, Any]:
    """One side of a VM diff: the known ``VM_FIELDS`` (others are ignored), None for unknown ones."""
    return {field: fields.get(field) for field in VM_FIELDS}


def endpoint(host: Optional[str], port: Optional[int], user: Optional[str] = None) -> Optional[str]:
    """``user@host:port`` (None while there is no endpoint)."""
    if not host:
        return None
    return "%s%s:%s" % ("%s@" % user if user else "", host, port)


def of_journalled_vm(vm: Optional[Dict[str, Any]], status: str) -> Dict[str, Any]:
    """The VM record of a journalled (or just launched) VM; {} for none."""
    if not vm:
        return {}
    location, ssh = vm.get("location") or {}, vm.get("ssh") or {}
    return vm_record(cloud=location.get("cloud"), region=location.get("region"),
                     zone=location.get("zone") or vm.get("zone"), instance_type=vm.get("instance_type"),
                     gpu=vm.get("gpu"), gpu_count=vm.get("gpu_count"),
                     instance_id=vm.get("instance_id"), status=status,
                     endpoint=endpoint(ssh.get("host"), ssh.get("port"), ssh.get("user")))


def of_offer(offer: Dict[str, Any], status: str) -> Dict[str, Any]:
    """The VM record a launch on ``offer`` (an offer row) would make; its id and endpoint are not known yet."""
    return vm_record(cloud=offer.get("cloud"), region=offer.get("region"), zone=offer.get("zone"),
                     instance_type=offer.get("instance_type"), gpu=offer.get("gpu"),
                     gpu_count=offer.get("gpu_count"), status=status)


def of_instance_row(row: Optional[Dict[str, Any]], offer: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """The VM record of an instance row (plugins/module_utils/tasks/primitives.py), with the type and GPU
    of the offer it was made from; {} for none."""
    if not row:
        return {}
    offer = offer or {}
    return vm_record(cloud=row.get("cloud"), region=row.get("region"), zone=row.get("zone"),
                     instance_type=offer.get("instance_type"), gpu=offer.get("gpu"),
                     gpu_count=offer.get("gpu_count"), instance_id=row.get("instance_id"),
                     status=row.get("status"),
                     endpoint=endpoint(row.get("ssh_host"), row.get("ssh_port"), row.get("ssh_user")))


def result_diff(before: Dict[str, Any], after: Dict[str, Any]) -> Dict[str, Any]:
    """Ansible's ``diff`` value."""
    return {"before": before, "after": after}


def masked_kubeconfig(config: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    """A kubeconfig for --diff: credentials replaced by Ansible's no_log mask ({} for none)."""
    if not config:
        return {}
    shown = copy.deepcopy(config)
    for entry in shown.get("users") or []:
        user = entry.get("user") if isinstance(entry, dict) else None
        if isinstance(user, dict):
            for key in KUBECONFIG_SECRETS:
                if key in user:
                    user[key] = MASK
    return shown
