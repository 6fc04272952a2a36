# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""``diagnose`` for GCP: Compute Engine's own view of the VM's instances in the zone.

observe's listing, then one more listing of the same instances for the fields it does
not keep: ``status`` and ``statusMessage``, ``lastStartTimestamp`` and
``lastStopTimestamp``, and the scheduling (standard, preemptible or Spot, what GCE
does at host maintenance and at preemption). Guest attributes and the serial console
are not read."""

from __future__ import annotations

from typing import Any, Dict, List

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import VM_NAME_TAG, Location
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers import gcp as gcp_adapter


def _scheduling(inst) -> Dict[str, Any]:
    scheduling = inst.scheduling
    model = scheduling.provisioning_model or ("PREEMPTIBLE" if scheduling.preemptible else "STANDARD")
    return {"provisioning_model": model, "preemptible": bool(scheduling.preemptible),
            "instance_termination_action": scheduling.instance_termination_action or None,
            "on_host_maintenance": scheduling.on_host_maintenance or None,
            "automatic_restart": scheduling.automatic_restart if "automatic_restart" in scheduling else None}


def _vendor(inst) -> Dict[str, Any]:
    return {"status": inst.status, "status_message": inst.status_message or None,
            "creation_timestamp": inst.creation_timestamp or None,
            "last_start_timestamp": inst.last_start_timestamp or None,
            "last_stop_timestamp": inst.last_stop_timestamp or None,
            "machine_type": inst.machine_type.rsplit("/", 1)[-1] or None, "scheduling": _scheduling(inst)}


def _findings_of(name: str, vendor: Dict[str, Any]) -> List[str]:
    out = []
    status = vendor["status"]
    if status != "RUNNING":
        out.append("%s: GCP status %s%s" % (name, status,
                                            ": " + vendor["status_message"] if vendor["status_message"] else ""))
    stopped = vendor["last_stop_timestamp"]
    if status in ("TERMINATED", "STOPPING") and vendor["scheduling"]["provisioning_model"] in ("SPOT", "PREEMPTIBLE"):
        out.append("%s: a %s VM stopped%s: GCE may have preempted it" % (
            name, vendor["scheduling"]["provisioning_model"].lower(), " at %s" % stopped if stopped else ""))
    elif status == "RUNNING" and vendor["status_message"]:
        out.append("%s: %s" % (name, vendor["status_message"]))
    return out


def diagnose(provider: gcp_adapter.GcpProvider, location: Location, vm_name: str) -> Dict[str, Any]:
    found = provider.observe(location, vm_name)
    vendors: Dict[str, Dict[str, Any]] = {}
    if found:
        request = gcp_adapter.compute_v1.ListInstancesRequest(project=provider.project, zone=location.zone,
                                                              filter='labels.%s = "%s"' % (VM_NAME_TAG, vm_name))
        listed = provider._call("instances.list", provider._client("instances").list, request=request,
                                timeout=provider.timeout, retry=provider.read_retry)
        vendors = {inst.name: _vendor(inst) for inst in listed if inst.labels.get(VM_NAME_TAG) == vm_name}
    instances: List[Dict[str, Any]] = []
    findings: List[str] = []
    for item in found:
        entry = item.to_dict()
        vendor = vendors.get(item.instance_id)
        entry["vendor"] = vendor
        instances.append(entry)
        if vendor is None:
            findings.append("%s: gone between two listings" % item.instance_id)
            continue
        findings.extend(_findings_of(item.instance_id, vendor))
    return {"instances": instances, "findings": findings}
