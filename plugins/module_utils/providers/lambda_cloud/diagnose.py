# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""``diagnose`` for Lambda: one ``GET /instances`` read, each of the VM's instances with
Lambda's own fields (status, instance type, ip, rulesets, the actions Lambda allows and
why not) and findings: a status other than active, an instance without a firewall
ruleset, a terminate Lambda says it cannot do now. With an instance, one more read,
``GET /firewall-rulesets/global``: the account's global rules apply to every instance on
top of its own ruleset, so a global rule letting any address reach the SSH port is a
finding (gpuprov never writes the global ruleset)."""

from __future__ import annotations

from typing import Any, Dict, List

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import Location, ProviderError


def _vendor(instance: Dict[str, Any]) -> Dict[str, Any]:
    kind = instance.get("instance_type") if isinstance(instance.get("instance_type"), dict) else {}
    region = instance.get("region") if isinstance(instance.get("region"), dict) else {}
    return {"status": instance.get("status"), "instance_type": kind.get("name"),
            "price_cents_per_hour": kind.get("price_cents_per_hour"), "region": region.get("name"),
            "ip": instance.get("ip"), "private_ip": instance.get("private_ip"), "hostname": instance.get("hostname"),
            "ssh_key_names": list(instance.get("ssh_key_names") or []),
            "firewall_rulesets": [r.get("id") for r in instance.get("firewall_rulesets") or [] if isinstance(r, dict)],
            "actions": instance.get("actions") if isinstance(instance.get("actions"), dict) else {}}


def _findings_of(instance_id: str, vendor: Dict[str, Any], unfirewalled: List[str]) -> List[str]:
    out = []
    status = vendor["status"]
    if status == "unhealthy":
        out.append("%s: Lambda reports the instance unhealthy" % instance_id)
    elif status != "active":
        out.append("%s: Lambda status %s" % (instance_id, status))
    if not vendor["firewall_rulesets"]:
        out.append("%s: no firewall ruleset attached%s; only the account's global rules apply" % (
            instance_id, " (Lambda applies no firewall in %s)" % vendor["region"]
            if vendor["region"] in unfirewalled else ""))
    terminate = vendor["actions"].get("terminate")
    if isinstance(terminate, dict) and terminate.get("available") is False:
        out.append("%s: Lambda cannot terminate it now: %s" % (
            instance_id, terminate.get("reason_description") or terminate.get("reason_code") or "no reason given"))
    return out


def _opens_to_all(rule: Any, port: int) -> bool:
    if not isinstance(rule, dict) or rule.get("source_network") not in ("0.0.0.0/0", "0.0.0.0"):
        return False
    if rule.get("protocol") not in ("tcp", "all"):
        return False
    ports = rule.get("port_range")
    return not ports or (isinstance(ports, list) and len(ports) == 2 and ports[0] <= port <= ports[1])


def _global_findings(provider) -> List[str]:
    port = provider.options["ssh_port"]
    try:
        ruleset = provider._get("/firewall-rulesets/global", dict)
    except ProviderError as exc:
        return ["the account's global firewall ruleset could not be read: %s" % exc.msg]
    open_rules = [r for r in ruleset.get("rules") or [] if _opens_to_all(r, port)]
    if not open_rules:
        return []
    return ["the account's global firewall ruleset lets any address (0.0.0.0/0) reach tcp/%d on every instance "
            "(%s); the VM's own ruleset cannot narrow that: change the global ruleset to enforce allowed_cidrs"
            % (port, "; ".join(str(r.get("description") or r.get("protocol")) for r in open_rules))]


def diagnose(provider, location: Location, vm_name: str) -> Dict[str, Any]:
    instances: List[Dict[str, Any]] = []
    findings: List[str] = []
    unfirewalled = list(provider.options["firewall_unsupported_regions"] or [])
    for raw in provider._vm_instances(location, vm_name):
        entry = provider._observed(raw, location).to_dict()
        entry["vendor"] = _vendor(raw)
        instances.append(entry)
        findings.extend(_findings_of(entry["instance_id"], entry["vendor"], unfirewalled))
    if instances:
        findings.extend(_global_findings(provider))
    return {"instances": instances, "findings": findings}
