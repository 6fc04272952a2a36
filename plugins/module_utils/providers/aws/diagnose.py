# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""``diagnose`` for AWS: EC2's own view of the VM's instances.

Three reads at most, each one listing: DescribeInstances by the VM name tag in every
state (a terminated instance's StateReason says why it went: a spot interruption, a
capacity loss, a user), DescribeInstanceStatus for the live ones (status checks and
scheduled events), and DescribeSpotInstanceRequests for spot ones (the request's
state and status code). ``instances`` are the live ones as observe reports them, each
with a ``vendor`` dict; terminated ones appear as findings only."""

from __future__ import annotations

from typing import Any, Dict, List

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import VM_NAME_TAG, Location
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.aws import (
    LIVE_STATES, AwsProvider, BotoCoreError, ClientError,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.aws.errors import classify_error

# Spot request status codes of a request doing what it should.
_SPOT_FINE = ("fulfilled", "pending-evaluation", "pending-fulfillment")


def _iso(value: Any) -> Any:
    return value.isoformat() if hasattr(value, "isoformat") else value


def _status_checks(status: Dict[str, Any]) -> Dict[str, Any]:
    return {
        "instance": (status.get("InstanceStatus") or {}).get("Status"),
        "system": (status.get("SystemStatus") or {}).get("Status"),
        "events": [{"code": e.get("Code"), "description": e.get("Description"), "not_before": _iso(e.get("NotBefore"))}
                   for e in status.get("Events") or []],
    }


def _spot(request: Dict[str, Any]) -> Dict[str, Any]:
    status = request.get("Status") or {}
    return {"id": request.get("SpotInstanceRequestId"), "state": request.get("State"),
            "status_code": status.get("Code"), "status_message": status.get("Message") or None}


def _findings_of(inst: Dict[str, Any], checks: Dict[str, Any], spot: Dict[str, Any]) -> List[str]:
    out = []
    instance_id, state = inst["InstanceId"], inst["State"]["Name"]
    why = inst.get("StateReason") or {}
    if state != "running":
        reason = why.get("Message") or why.get("Code") or inst.get("StateTransitionReason") or ""
        out.append("%s: %s%s" % (instance_id, state, ": " + reason if reason else ""))
    impaired = ["%s %s" % (what, checks[what]) for what in ("system", "instance")
                if checks.get(what) not in (None, "ok", "not-applicable")]
    if impaired:
        out.append("%s: status checks %s" % (instance_id, ", ".join(impaired)))
    for event in checks.get("events") or []:
        if "[Completed]" in (event.get("description") or "") or "[Canceled]" in (event.get("description") or ""):
            continue
        out.append("%s: scheduled event %s%s%s" % (
            instance_id, event["code"], ": " + event["description"] if event.get("description") else "",
            " (not before %s)" % event["not_before"] if event.get("not_before") else ""))
    if spot and (spot.get("state") != "active" or spot.get("status_code") not in _SPOT_FINE):
        out.append("%s: spot request %s %s (%s%s)" % (
            instance_id, spot.get("id"), spot.get("state"), spot.get("status_code"),
            ": " + spot["status_message"] if spot.get("status_message") else ""))
    return out


def diagnose(provider: AwsProvider, location: Location, vm_name: str) -> Dict[str, Any]:
    try:
        ec2 = provider._client("ec2", location.region)
        every = sorted(provider._instances(ec2, [{"Name": "tag:" + VM_NAME_TAG, "Values": [vm_name]}]),
                       key=lambda i: i["InstanceId"])
        live = [i for i in every if i["State"]["Name"] in LIVE_STATES]
        checks: Dict[str, Dict[str, Any]] = {}
        if live:
            reply = ec2.describe_instance_status(InstanceIds=[i["InstanceId"] for i in live],
                                                 IncludeAllInstances=True)
            checks = {s["InstanceId"]: _status_checks(s) for s in reply.get("InstanceStatuses") or []}
        spot_ids = [i["InstanceId"] for i in every if i.get("InstanceLifecycle") == "spot"]
        spots: Dict[str, Dict[str, Any]] = {}
        if spot_ids:
            reply = ec2.describe_spot_instance_requests(Filters=[{"Name": "instance-id", "Values": spot_ids}])
            spots = {r.get("InstanceId"): _spot(r) for r in reply.get("SpotInstanceRequests") or []}
    except (BotoCoreError, ClientError) as exc:
        raise classify_error(exc) from exc
    instances: List[Dict[str, Any]] = []
    findings: List[str] = []
    for inst in every:
        instance_id = inst["InstanceId"]
        why = inst.get("StateReason") or {}
        findings.extend(_findings_of(inst, checks.get(instance_id) or {}, spots.get(instance_id) or {}))
        if inst["State"]["Name"] not in LIVE_STATES:
            continue
        entry = provider._observed(inst, location.region).to_dict()
        entry["vendor"] = {
            "state": inst["State"]["Name"], "state_reason_code": why.get("Code") or None,
            "state_reason": why.get("Message") or None,
            "state_transition_reason": inst.get("StateTransitionReason") or None,
            "launch_time": _iso(inst.get("LaunchTime")), "instance_type": inst.get("InstanceType"),
            "lifecycle": inst.get("InstanceLifecycle") or "on-demand",
            "status_checks": checks.get(instance_id), "spot_request": spots.get(instance_id),
        }
        instances.append(entry)
    return {"instances": instances, "findings": findings}
