# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The AWS adapter's listing for the orphan sweep (``Provider.list_owned``).

EC2 is regional: ``sweep_locations`` is every region of the catalog (and of the
``regions`` option); ``list_owned`` asks one region. Two listings, each paginated:
DescribeInstances and DescribeSecurityGroups, both filtered to the resources that
carry the ``gpuprov-vm-name`` tag (``tag-key``), whatever their journal id. Volumes
carry the tags too but go with their instance (DeleteOnTermination), so they are
not listed. Terminated instances are gone and omitted.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    ANY_REGION, JOURNAL_ID_TAG, VM_NAME_TAG, ErrorKind, Location, Owned, ProviderError, ResourceKind,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.aws.catalog import (
    CPU_RUNGS, DEFAULT_REGIONS, LADDER, regions_for,
)

_IDENTITY = [{"Name": "tag-key", "Values": [VM_NAME_TAG]}]
_NOT_GONE = {"Name": "instance-state-name", "Values": ["pending", "running", "stopping", "stopped", "shutting-down"]}
# On-demand list prices of the catalog's types (None where it knows no stable figure).
_PRICES = {rung.instance_type: rung.price for rung in LADDER + CPU_RUNGS}


def sweep_locations(provider) -> List[Location]:
    """The ``regions`` option's regions, then the catalog's default ones. No API call."""
    configured = regions_for(provider.options.get("regions"), DEFAULT_REGIONS)
    return [Location(provider.name, region) for region in dict.fromkeys(configured + DEFAULT_REGIONS)]


def list_owned(provider, location: Location) -> List[Owned]:
    """The instances and security groups in ``location.region`` tagged with a VM name."""
    if location.region in (None, "", ANY_REGION):
        raise ProviderError(ErrorKind.INVALID_REQUEST, "location: aws lists one region at a time (EC2 is "
                            "regional); got %s" % (location,))
    ec2 = provider._client("ec2", location.region)
    found = [_instance(provider, inst, location.region)
             for inst in provider._instances(ec2, _IDENTITY + [_NOT_GONE])]
    for group in provider._describe_all(ec2, "describe_security_groups", "SecurityGroups", Filters=_IDENTITY):
        tags = _tags(group)
        found.append(Owned(
            kind=ResourceKind.SECURITY_GROUP, resource_id=group["GroupId"],
            location=Location(provider.name, location.region), vm_name=tags.get(VM_NAME_TAG) or None,
            journal_id=tags.get(JOURNAL_ID_TAG) or None, name=group.get("GroupName")))
    return sorted(found, key=lambda o: (o.kind, o.resource_id))


def _instance(provider, inst: Dict[str, Any], region: str) -> Owned:
    observed = provider._observed(inst, region)  # the status (and zone) observe reports
    tags = _tags(inst)
    return Owned(
        kind=ResourceKind.INSTANCE, resource_id=inst["InstanceId"], location=observed.location,
        vm_name=tags.get(VM_NAME_TAG) or None, journal_id=observed.journal_id, status=observed.status,
        price_per_hour=_price(inst), name=tags.get("Name"))


def _price(inst: Dict[str, Any]) -> Optional[float]:
    """The type's on-demand list price; None for spot (the market price varies) or an unknown type."""
    if inst.get("InstanceLifecycle") == "spot":
        return None
    return _PRICES.get(inst.get("InstanceType"))


def _tags(resource: Dict[str, Any]) -> Dict[str, str]:
    return {t["Key"]: t["Value"] for t in resource.get("Tags") or []}
