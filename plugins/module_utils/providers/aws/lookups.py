# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What AWS's prepare looks up per region and account, not per VM (a part of AwsProvider, aws/__init__.py): the
zones that offer an instance type, the image, the default VPC and its subnets. Read-only; the fleet may share
their answers (Provider.remembered)."""

from __future__ import annotations

from typing import Any, List

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.aws.catalog import image_defaults
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.aws.errors import error_code
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    BlockScope, ErrorKind, Offer, ProviderError,
)

try:
    from botocore.exceptions import ClientError
except ImportError:  # the adapter itself says how to install boto3 (aws/__init__.py)
    ClientError = Exception

_MISSING_PARAMETER_CODES = ("ParameterNotFound", "ParameterVersionNotFound", "AccessDeniedException")


class RegionLookups:
    """The region lookups of AwsProvider's prepare (a mixin: ``_client``, ``_describe_all`` and ``options`` are
    the adapter's)."""

    options: Any

    def _offering_zones(self, ec2, offer: Offer) -> List[str]:
        zones = {o["Location"] for o in self._describe_all(
            ec2, "describe_instance_type_offerings", "InstanceTypeOfferings", LocationType="availability-zone",
            Filters=[{"Name": "instance-type", "Values": [offer.instance_type]}])}
        if offer.zone:
            zones &= {offer.zone}
        if not zones:
            raise ProviderError(ErrorKind.UNAVAILABLE, "%s is not offered in %s" % (
                offer.instance_type, offer.zone or offer.region), BlockScope.INSTANCE_TYPE)
        return sorted(zones)

    def _image(self, ec2, offer: Offer):
        """(image id, where it came from): ami_id option, SSM parameter, name filter."""
        ami = self.options.get("ami_id")
        if isinstance(ami, dict):
            ami = ami.get(offer.region)
        if ami:
            try:
                known = ec2.describe_images(ImageIds=[ami]).get("Images")
            except ClientError as exc:
                if not error_code(exc).startswith("InvalidAMIID."):
                    raise
                known = []
            if not known:
                raise ProviderError(ErrorKind.INVALID_REQUEST, "ami_id: %s does not exist in %s" % (ami, offer.region))
            return ami, "ami_id"
        wanted = image_defaults(offer.gpu, self.options)
        if wanted["ssm"]:
            try:
                reply = self._client("ssm", offer.region).get_parameter(Name=wanted["ssm"])
                return reply["Parameter"]["Value"], "ssm:" + wanted["ssm"]
            except ClientError as exc:
                if error_code(exc) not in _MISSING_PARAMETER_CODES:
                    raise
        images = ec2.describe_images(Owners=wanted["owners"], Filters=[
            {"Name": "name", "Values": [wanted["name"]]}, {"Name": "state", "Values": ["available"]},
            {"Name": "architecture", "Values": ["x86_64"]}]).get("Images", [])
        if not images:
            raise ProviderError(ErrorKind.UNAVAILABLE, "no image named %r from %s in %s; set ami_id" % (
                wanted["name"], ",".join(wanted["owners"]), offer.region), BlockScope.REGION)
        newest = max(images, key=lambda i: (i.get("CreationDate") or "", i["ImageId"]))
        return newest["ImageId"], "name:" + wanted["name"]

    def _subnets(self, ec2, offer: Offer, zones: List[str]):
        vpcs = ec2.describe_vpcs(Filters=[{"Name": "is-default", "Values": ["true"]}]).get("Vpcs", [])
        if not vpcs:
            raise ProviderError(ErrorKind.UNAVAILABLE, "%s has no default VPC" % offer.region, BlockScope.REGION)
        vpc_id = vpcs[0]["VpcId"]
        found = ec2.describe_subnets(Filters=[
            {"Name": "vpc-id", "Values": [vpc_id]}, {"Name": "default-for-az", "Values": ["true"]},
            {"Name": "availability-zone", "Values": zones}]).get("Subnets", [])
        subnets = sorted(({"subnet_id": s["SubnetId"], "zone": s["AvailabilityZone"]} for s in found),
                         key=lambda s: (zones.index(s["zone"]), s["subnet_id"]))
        if not subnets:
            raise ProviderError(ErrorKind.UNAVAILABLE, "the default VPC of %s has no subnet in %s" % (
                offer.region, ", ".join(zones)), BlockScope.INSTANCE_TYPE)
        return vpc_id, subnets
