# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""AWS EC2 adapter (boto3): the seed's AWS row.

=========  ==================================================================
plan       static GPU -> instance-type ladder (catalog.LADDER) x regions;
           no API call at all. ``gpu=None`` plans small CPU types (t3.medium...).
prepare    DescribeInstanceTypeOfferings (zones; none -> Unavailable), image
           (ami_id option, else the public SSM parameter, else the newest image
           matching a name filter), default-VPC default subnets in those zones,
           per-VM security group ``gpuprov-<name>-j<8 hex>`` (see Identity),
           ingress 22 (+ 6443/80/443 with k3s_direct) from the allowed CIDRs.
create     one logical create: one RunInstances per subnet prepare listed, in
           zone order, each sent once, moving on only past a zone-capacity
           refusal (why that never makes two instances: ``create``); tags on
           instance and volumes; key + boot script as cloud-init user data;
           a ClientToken per (prepared attempt, subnet).
observe    DescribeInstances by tag, live states only; endpoint once Running
           with a public IP (public-IP lag = no endpoint yet); the journal id tag.
delete     TerminateInstances per id; unknown ids are success. No waiting.
cleanup    delete the VM's security groups of this journal (or of none) once no
           instance of it that this journal owns is left.
=========  ==================================================================

Identity: the instance, its volumes and its security group carry the tags
``gpuprov-vm-name`` and, when the adapter works for a journal, ``gpuprov-journal-id``
(set at creation through TagSpecifications, so no untagged resource ever exists).
A journal's group is named ``gpuprov-<name>-j<8 hex of sha256(journal id)>``: group
names are unique per VPC, and two controllers' VMs of one name must not share one.
Groups made before journal ids are named ``gpuprov-<name>`` and carry no journal id
tag; cleanup removes them with the journal's own. Another journal's instances and
groups are never waited for nor removed.

Retries (the contract's "No waiting", base.Provider): reads go through a client whose SDK
retries them (botocore's standard mode, base.SDK_READ_ATTEMPTS attempts); every request that
changes anything goes through the fail-fast client, one attempt, so the core's retry, which
observes first, is the only one.

Options: ``cloud_options.aws``, declared in providers/cloud_options/aws.py. Credentials:
``profile`` when set, else the key options, else boto3's chain (shared files, SSO,
container and instance metadata).
"""

from __future__ import annotations

import hashlib
import importlib.util
import ipaddress
import json
import re
import urllib.error
from typing import Any, Dict, List, Optional

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    ApiLimit, GPUPROV_TAG_PREFIX, JOURNAL_ID_TAG, SDK_READ_ATTEMPTS, VM_NAME_TAG, BlockScope, Capabilities, ErrorKind, InstanceSpec, K3sAccess,
    Location, Observed, Offer, Owned, PowerOffBilling, ProviderError, ResourceRequest, SshEndpoint, Status, tag_changes,
    validate_vm_name,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.aws.catalog import (
    DEFAULT_REGIONS, DEFAULT_SSH_USER, REGIONS, looks_like_region, regions_for, rungs_for,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.aws.errors import (
    GONE_CODES, ZONE_CAPACITY_CODES, classify_error, error_code,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.aws import credentials as aws_credentials
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.aws.lookups import RegionLookups
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.aws.userdata import render_user_data
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.cloud_options.aws import (
    DEFAULT_CONTROLLER_IP_URL, OPTIONS,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.common import (
    check_regions, cidr_list, classified, require_sdk, tcp_ports,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.options import TypedOptionsProvider
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.gpus import canonical_gpu
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.paging import collect

# boto3 itself (about 0.1-0.2 s to import) is imported when the first client is built, so a run
# that needs no AWS call does not pay for it; its exceptions are light and needed to classify.
try:
    from botocore.exceptions import BotoCoreError, ClientError
    HAS_BOTO3 = importlib.util.find_spec("boto3") is not None
except ImportError:  # pragma: no cover - sanity imports module_utils without boto3
    BotoCoreError = ClientError = Exception
    HAS_BOTO3 = False

SSH_USER_TAG = "gpuprov-ssh-user"
SG_PREFIX = "gpuprov-"
# The RunInstances parameter that makes a shutdown from inside the guest terminate the instance (the default stops it).
TERMINATE_ON_SHUTDOWN = ("InstanceInitiatedShutdownBehavior", "terminate")
LIVE_STATES = ("pending", "running", "stopping", "stopped", "shutting-down")
_STATUS = {"pending": Status.PENDING, "running": Status.RUNNING, "stopping": Status.STOPPING,
           "stopped": Status.STOPPED, "shutting-down": Status.TERMINATING}
# StateReason codes of an instance that stopped or is going away on its own.
_FAILED_REASON_CODES = ("Client.VolumeLimitExceeded", "Client.InternalError",
                        "Client.InvalidSnapshot.NotFound", "Client.InvalidKMSKey.InvalidState")
K3S_DIRECT_PORTS = (6443, 80, 443)
# EC2 accepts any tag value up to 256 characters; the set other AWS services accept
# (letters, digits, spaces and _ . : / = + - @) keeps a journal id portable.
_TAG_VALUE_RE = re.compile(r"^[\w .:/=+\-@]{0,256}$")


# What a failed controller address lookup tells the user to do.
_SET_CIDRS = ("set cloud_options.aws.allowed_cidrs (in the playbooks, gpuprov_cloud_options) to the addresses that "
              "may reach the VM, for example [\"203.0.113.7/32\"]")

# Every SDK exception a primitive lets out leaves it classified.
_classified = classified(classify_error, (BotoCoreError, ClientError))


def _sdk_regions() -> set:
    """Every region of every partition in the installed botocore's endpoint data (no API call; about
    0.3 s, so only read for a requested name the catalog does not know)."""
    try:
        import botocore.session
        session = botocore.session.get_session()
        return {region for partition in session.get_available_partitions()
                for region in session.get_available_regions("ec2", partition_name=partition)}
    except (ImportError, BotoCoreError):
        return set()


def journal_suffix(journal_id: Optional[str]) -> str:
    """``-j`` + 8 hex digits of the journal id's hash ('' without a journal id)."""
    return "-j" + hashlib.sha256(journal_id.encode("utf-8")).hexdigest()[:8] if journal_id else ""


def client_token(vm_name: str, prepared: Dict[str, Any], subnet_id: str, instance_type: str, spot: bool) -> str:
    """RunInstances idempotency token for one attempt in one subnet.

    Stable while the prepared attempt is, so that the same subnet's request sent again
    (after an ambiguous failure or a crash) is answered with the instance the first one
    made, if it made one; new once the core's compensation has removed the security group
    and prepare has made another. EC2 keeps a token apart per Region and zone, so it
    covers a repeat in the same subnet only (see ``AwsProvider.create``).
    """
    basis = json.dumps([vm_name, prepared.get("security_group_id"), subnet_id, instance_type,
                        prepared.get("image_id"), bool(spot)])
    return "gpuprov-" + hashlib.sha256(basis.encode("utf-8")).hexdigest()[:48]


class AwsProvider(RegionLookups, TypedOptionsProvider):
    name = "aws"
    option_spec = OPTIONS
    # EC2 meters each action with a token bucket per account and Region (non-mutating ones: 100 at once, refilled
    # 20 a second). The fleet keeps all its EC2 requests together within one such bucket: below every action's own.
    api_limits = (ApiLimit(20, 1.0, burst=100,
                           source="https://docs.aws.amazon.com/ec2/latest/devguide/ec2-api-throttling.html"),)

    def __init__(self, options=None, journal_id: Optional[str] = None):
        super().__init__(options, journal_id=journal_id)
        require_sdk(self.name, HAS_BOTO3, "boto3")
        self._session = None
        self._clients: Dict[Any, Any] = {}
        self._controller_cidrs: List[str] = []

    # -- contract -------------------------------------------------------------------
    def capabilities(self) -> Capabilities:
        return Capabilities(
            kubernetes=True, boot_script=True, spot=True,
            k3s_access=K3sAccess.DIRECT if self._k3s_direct else K3sAccess.SSH_TUNNEL,
            boot_timeout_s=self.options["boot_timeout_s"], poll_interval_s=self.options["poll_interval_s"],
            # A guest shutdown stops an EBS-backed instance (EBS volumes and Elastic IPs bill on) unless the
            # instance was launched to terminate on it, as create asks when terminate_on_guest_shutdown.
            poweroff_billing=PowerOffBilling.ENDS, poweroff_setting="%s=%s" % TERMINATE_ON_SHUTDOWN,
            poweroff_billing_unset=PowerOffBilling.ENDS_COMPUTE,
            poweroff_source="https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/Using_ChangingInstanceInitiatedShutdownBehavior.html"
                            " (a guest shutdown stops the instance unless the attribute says terminate); "
                            "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/Stop_Start.html (stopped: EBS billed)",
        )

    def check_credentials(self) -> None:
        """The key options, else boto3's credential chain as it resolves here without a call
        (providers/aws/credentials.py); Credentials naming the options and variables when neither has any."""
        problem = aws_credentials.missing(self.options)
        if problem:
            raise ProviderError(ErrorKind.CREDENTIALS, problem, BlockScope.CLOUD)

    @_classified
    def verify_credentials(self) -> None:
        """One STS GetCallerIdentity (allowed to every principal, read-only): plan makes no call."""
        regions = self.options.get("regions") or DEFAULT_REGIONS
        self._client("sts", regions[0], fail_fast=True).get_caller_identity()

    def plan(self, request: ResourceRequest) -> List[Offer]:
        """Static ladder x regions, type-major (cheapest rung first, regions in order)."""
        validate_vm_name(request.vm_name)
        gpu = canonical_gpu(request.gpu)
        rungs = rungs_for(gpu, request.gpu_count)
        regions = regions_for(self._requested_regions(request.regions), self.options.get("regions"))
        spot = bool(request.spot)
        return [
            Offer(cloud=self.name, region=region, instance_type=rung.instance_type, gpu=rung.gpu,
                  gpu_count=rung.count, price_per_hour=None if spot else rung.price, spot=spot,
                  detail={"vcpus": rung.vcpus, "memory_gib": rung.memory_gib, "on_demand_price": rung.price})
            for rung in rungs for region in regions
        ]

    @staticmethod
    def _requested_regions(requested: List[str]) -> List[str]:
        """The requested regions AWS has (catalog.REGIONS; for an AWS-looking name the catalog lacks,
        the installed botocore's list too), or InvalidRequest naming AWS's when it has none of them."""
        known = set(REGIONS)
        if any(r not in known and looks_like_region(r) for r in requested or []):
            known |= _sdk_regions()
        return check_regions("aws", requested, known, first=DEFAULT_REGIONS)

    @_classified
    def prepare(self, offer: Offer, spec: InstanceSpec) -> Dict[str, Any]:
        name = validate_vm_name(spec.vm_name)
        self._resource_tags(spec)  # a tag AWS would refuse fails before any call
        ports = self._ports(spec)
        cidrs = self._allowed_cidrs(spec)
        ec2 = self._client("ec2", offer.region)
        # Per region and account, not per VM: the fleet may share these answers (Provider.remembered).
        where = [offer.region, offer.instance_type, offer.zone, offer.gpu]
        zones = self.remembered("zones", where, lambda: self._offering_zones(ec2, offer))
        image_id, image_source = self.remembered("image", where, lambda: list(self._image(ec2, offer)))
        vpc_id, subnets = self.remembered("subnets", where + [zones],
                                          lambda: list(self._subnets(ec2, offer, zones)))
        group_id = self._security_group(ec2, self._client("ec2", offer.region, fail_fast=True), name, vpc_id, ports,
                                        cidrs, spec)
        return {
            "region": offer.region, "instance_type": offer.instance_type, "zones": zones,
            "image_id": image_id, "image_source": image_source, "vpc_id": vpc_id, "subnets": subnets,
            "security_group_id": group_id, "ports": ports, "allowed_cidrs": cidrs,
        }

    @_classified
    def create(self, offer: Offer, prepared: Dict[str, Any], spec: InstanceSpec) -> str:
        """One logical create: one RunInstances per subnet in ``prepared`` (prepare lists the default
        subnet of each zone that offers the type, in zone order: at most one per zone of the region),
        each sent once through the fail-fast client, in order. It moves to the next subnet only past a
        zone-capacity refusal (ZONE_CAPACITY_CODES: EC2 launched nothing); any other outcome ends the
        call, with the instance id or the classified error (an unknown outcome, a timeout, is Transient).

        Why that never leaves two instances, even when the controller dies between two requests:

        * every request before the one that launched was refused, and a refusal launches nothing,
          so one call makes at most one instance;
        * that instance carries the VM identity from its first moment (TagSpecifications), and an
          AWS offer's Location is the region (no zone), which observe lists whole: the core's Creating,
          which observes before it calls create again (after a crash or a Transient), adopts it;
        * the same subnet's request sent again carries the same ClientToken (client_token), which EC2
          answers with the instance the first one made, if it made one.

        EC2 keeps a ClientToken apart per zone, so across subnets the token cannot stand in for that
        observation: a retry that starts again at the first subnet relies on observe listing an instance
        a later subnet's request made, as every cloud without such a token relies on its listing."""
        name = validate_vm_name(spec.vm_name)
        subnets = list(prepared.get("subnets") or [])
        if not subnets or not prepared.get("security_group_id") or not prepared.get("image_id"):
            raise ProviderError(ErrorKind.INVALID_REQUEST,
                                "prepared: missing subnets, security group or image; run prepare first")
        user = spec.ssh_user or self.options.get("ssh_user") or DEFAULT_SSH_USER
        tags = self._resource_tags(spec, own={SSH_USER_TAG: user}, default={"Name": name})
        params: Dict[str, Any] = {
            "ImageId": prepared["image_id"], "InstanceType": offer.instance_type,
            "MinCount": 1, "MaxCount": 1,
            "UserData": render_user_data(spec, user, DEFAULT_SSH_USER),
            "SecurityGroupIds": [prepared["security_group_id"]],
            "TagSpecifications": [{"ResourceType": kind, "Tags": tags} for kind in ("instance", "volume")],
        }
        if spec.terminate_on_guest_shutdown:
            # The watchdog's power-off then terminates: a stopped instance would still bill its EBS volumes.
            params[TERMINATE_ON_SHUTDOWN[0]] = TERMINATE_ON_SHUTDOWN[1]
        if offer.spot:
            params["InstanceMarketOptions"] = {"MarketType": "spot", "SpotOptions": {
                "SpotInstanceType": "one-time", "InstanceInterruptionBehavior": "terminate"}}
        ec2 = self._client("ec2", prepared.get("region") or offer.region, fail_fast=True)
        last = None
        for subnet in subnets:  # bounded by the zones prepare listed; each request sent once
            try:
                reply = ec2.run_instances(
                    SubnetId=subnet["subnet_id"],
                    ClientToken=client_token(name, prepared, subnet["subnet_id"], offer.instance_type, offer.spot),
                    **params)
            except ClientError as exc:
                if error_code(exc) not in ZONE_CAPACITY_CODES:
                    raise
                last = exc
                continue
            return reply["Instances"][0]["InstanceId"]
        err = classify_error(last)
        raise ProviderError(err.kind, "%s [zones tried: %s]" % (
            err.msg, ", ".join(s["zone"] for s in subnets)), err.block)

    @_classified
    def observe(self, location: Location, vm_name: str) -> List[Observed]:
        """Every live instance tagged with the VM name in the region (all zones)."""
        ec2 = self._client("ec2", location.region)
        found = [self._observed(inst, location.region)
                 for inst in self._instances(ec2, [{"Name": "tag:" + VM_NAME_TAG, "Values": [vm_name]},
                                                   {"Name": "instance-state-name", "Values": list(LIVE_STATES)}])]
        return sorted(found, key=lambda o: o.instance_id)

    @_classified
    def observe_all(self, location: Location) -> Optional[List[Observed]]:
        """Every live instance of this journal in the region, in one filtered listing (the fleet's poll)."""
        if not self.journal_id:
            return None
        ec2 = self._client("ec2", location.region)
        found = [self._observed(inst, location.region)
                 for inst in self._instances(ec2, [{"Name": "tag:" + JOURNAL_ID_TAG, "Values": [self.journal_id]},
                                                   {"Name": "instance-state-name", "Values": list(LIVE_STATES)}])]
        return sorted(found, key=lambda o: o.instance_id)

    @_classified
    def delete(self, location: Location, vm_name: str, instance_ids: List[str]) -> None:
        ids = sorted({i for i in instance_ids or [] if i})
        if not ids:
            return
        ec2 = self._client("ec2", location.region)
        settled = set()
        for inst in self._instances(ec2, [{"Name": "instance-id", "Values": ids}]):
            owner = _tags(inst).get(VM_NAME_TAG)
            if owner != vm_name:
                raise ProviderError(ErrorKind.INVALID_REQUEST, "instance_ids: %s belongs to %s, not to VM %s"
                                    % (inst["InstanceId"], owner or "no gpuprov VM", vm_name))
            if inst["State"]["Name"] in ("shutting-down", "terminated"):
                settled.add(inst["InstanceId"])
        # One request per id: a batch fails whole on one unknown id. Ids describe does
        # not know yet (eventual consistency right after create) are still terminated.
        ec2_once = self._client("ec2", location.region, fail_fast=True)
        for instance_id in ids:
            if instance_id in settled:
                continue
            try:
                ec2_once.terminate_instances(InstanceIds=[instance_id])
            except ClientError as exc:
                if error_code(exc) not in GONE_CODES:
                    raise

    can_retag = True

    @_classified
    def retag(self, location: Location, vm_name: str, instance_id: str, tags: Dict[str, str], purge: bool,
              check: bool = False) -> Dict[str, Any]:
        """The user tags of the instance, its volumes and its security groups, read from the instance."""
        self._checked_user_tags(tags)
        ec2 = self._client("ec2", location.region)
        found = list(self._instances(ec2, [{"Name": "instance-id", "Values": [instance_id]}]))
        if not found or _tags(found[0]).get(VM_NAME_TAG) != vm_name:
            raise ProviderError(ErrorKind.INVALID_REQUEST, "tags: %s is not an instance of VM %s in %s"
                                % (instance_id, vm_name, location.region))
        inst = found[0]
        changes = tag_changes(_tags(inst), tags, purge, keep=lambda name: name == "Name" or name.startswith(
            ("gpuprov-", "aws:")))
        if check or not (changes["set"] or changes["removed"]):
            return changes
        resources = [instance_id] + [m["Ebs"]["VolumeId"] for m in inst.get("BlockDeviceMappings") or []
                                     if (m.get("Ebs") or {}).get("VolumeId")]
        resources += [g["GroupId"] for g in inst.get("SecurityGroups") or []
                      if g.get("GroupName", "").startswith(SG_PREFIX + vm_name)]
        ec2_once = self._client("ec2", location.region, fail_fast=True)
        if changes["set"]:
            ec2_once.create_tags(Resources=resources, Tags=[{"Key": k, "Value": v} for k, v in changes["set"].items()])
        if changes["removed"]:
            ec2_once.delete_tags(Resources=resources, Tags=[{"Key": k} for k in changes["removed"]])
        return changes

    @_classified
    def cleanup(self, location: Location, vm_name: str) -> None:
        # Another journal's instances use that journal's group: they neither block nor matter here.
        left = [o for o in self.observe(location, vm_name) if o.owned_by(self.journal_id)]
        if left:
            raise ProviderError(ErrorKind.TRANSIENT, "cleanup: instances of %s still present (%s)" % (
                vm_name, ", ".join("%s %s" % (o.instance_id, o.status) for o in left)))
        ec2 = self._client("ec2", location.region)
        groups = ec2.describe_security_groups(
            Filters=[{"Name": "tag:" + VM_NAME_TAG, "Values": [vm_name]}]).get("SecurityGroups", [])
        ours = [g for g in groups if _tags(g).get(JOURNAL_ID_TAG) in (None, self.journal_id)]
        ec2_once = self._client("ec2", location.region, fail_fast=True)
        for group_id in sorted(g["GroupId"] for g in ours):
            try:
                ec2_once.delete_security_group(GroupId=group_id)
            except ClientError as exc:
                if error_code(exc) != "InvalidGroup.NotFound":
                    raise

    # -- helpers --------------------------------------------------------------------
    def _identity_tags(self, vm_name: str) -> List[Dict[str, str]]:
        """identity_tags as EC2 tags; InvalidRequest for a value no AWS tag may hold."""
        tags = self.identity_tags(vm_name)
        for key, value in tags.items():
            if not _TAG_VALUE_RE.match(value) or value.lower().startswith("aws:"):
                raise ProviderError(ErrorKind.INVALID_REQUEST, "%s: %r cannot be an AWS tag value (at most 256 "
                                    "letters, digits, spaces and _ . : / = + - @)" % (key, value))
        return [{"Key": key, "Value": value} for key, value in tags.items()]

    def _resource_tags(self, spec: InstanceSpec, own: Optional[Dict[str, str]] = None,
                       default: Optional[Dict[str, str]] = None) -> List[Dict[str, str]]:
        """The user's tags over ``default`` (gpuprov's ``Name``: a user's ``Name`` names the resource instead)
        and under the identity tags and ``own`` (gpuprov's, which win), as EC2 tags, each key once (EC2 refuses
        a key twice); InvalidRequest naming the tag for one AWS would refuse."""
        self._checked_user_tags(spec.tags)
        merged = dict(default or {})
        merged.update((k, v) for k, v in spec.tags.items() if not k.lower().startswith(GPUPROV_TAG_PREFIX))
        merged.update({t["Key"]: t["Value"] for t in self._identity_tags(spec.vm_name)})
        merged.update(own or {})
        return [{"Key": key, "Value": value} for key, value in merged.items()]

    @staticmethod
    def _checked_user_tags(tags: Dict[str, str]) -> None:
        for key, value in tags.items():
            if len(key) > 128 or key.lower().startswith("aws:") or not _TAG_VALUE_RE.match(key):
                raise ProviderError(ErrorKind.INVALID_REQUEST, "tags: %r cannot be an AWS tag name (at most 128 "
                                    "letters, digits, spaces and _ . : / = + - @, not starting with aws:)" % key)
            if not _TAG_VALUE_RE.match(value):
                raise ProviderError(ErrorKind.INVALID_REQUEST, "tags.%s: %r cannot be an AWS tag value (at most 256 "
                                    "letters, digits, spaces and _ . : / = + - @)" % (key, value))

    @property
    def _k3s_direct(self) -> bool:
        return bool(self.options["k3s_direct"])

    def _before_send(self, **_event: Any) -> None:
        """botocore's ``before-send`` handler: returns None, so the request is sent (after any wait)."""
        self.paced()

    def _client(self, service: str, region: str, fail_fast: bool = False):
        """One client per (service, region, mode). Reads keep the SDK's retries (standard mode,
        SDK_READ_ATTEMPTS attempts); the fail-fast client, for every request that changes anything,
        makes exactly one HTTP attempt."""
        key = (service, region, fail_fast)
        if key not in self._clients:
            import boto3  # pylint: disable=import-outside-toplevel
            from botocore.config import Config  # pylint: disable=import-outside-toplevel
            if self._session is None:
                # A profile names a whole credential set: it wins over loose keys (which may
                # come from the environment), as the AWS CLI's --profile does.
                if self.options["profile"]:
                    creds = {"profile_name": self.options["profile"]}
                else:
                    creds = {k: self.options[k] for k in ("aws_access_key_id", "aws_secret_access_key",
                                                          "aws_session_token") if self.options[k]}
                self._session = boto3.session.Session(**creds)
            retries = {"mode": "standard", "total_max_attempts": 1 if fail_fast else SDK_READ_ATTEMPTS}
            config = Config(retries=retries, connect_timeout=10, read_timeout=60,
                            user_agent_extra="gpuprov.cloud")
            endpoint = self.options["endpoint_url"] or None
            client = self._session.client(service, region_name=region, endpoint_url=endpoint, config=config)
            # Every HTTP attempt, the SDK's own retries included, goes through the fleet's pacing (api_limits).
            client.meta.events.register("before-send", self._before_send)
            self._clients[key] = client
        return self._clients[key]

    @staticmethod
    def _describe_all(ec2, operation: str, items: str, **kwargs: Any) -> List[Dict[str, Any]]:
        """Every item of a paged EC2 Describe call, each once, ``NextToken`` followed until the
        last page, or a page or token that repeats one (a server ignoring NextToken); paging.collect.
        (botocore's paginator fails on a repeated token and follows a cycle of them forever.)"""
        call = getattr(ec2, operation)

        def page(token):
            reply = call(NextToken=token, **kwargs) if token else call(**kwargs)
            return reply.get(items) or [], reply.get("NextToken")
        return collect(page, "aws %s" % ec2.meta.method_to_api_mapping.get(operation, operation))

    @classmethod
    def _instances(cls, ec2, filters):
        for reservation in cls._describe_all(ec2, "describe_instances", "Reservations", Filters=filters):
            yield from reservation.get("Instances", [])

    def _observed(self, inst: Dict[str, Any], region: str) -> Observed:
        state = inst["State"]["Name"]
        status = _STATUS.get(state, Status.FAILED)
        why = inst.get("StateReason") or {}
        reason = why.get("Message") or inst.get("StateTransitionReason") or None
        code = why.get("Code") or ""
        if state in ("stopping", "stopped", "shutting-down") and (
                code.startswith("Server.") or code in _FAILED_REASON_CODES):
            status = Status.FAILED  # spot interruption, capacity loss, bad volume...
        tags = _tags(inst)
        user = tags.get(SSH_USER_TAG) or self.options.get("ssh_user") or DEFAULT_SSH_USER
        public_ip = inst.get("PublicIpAddress")
        endpoint = SshEndpoint(host=public_ip, port=22, user=user) if (
            status == Status.RUNNING and public_ip) else None
        zone = (inst.get("Placement") or {}).get("AvailabilityZone") or None
        return Observed(instance_id=inst["InstanceId"], status=status, reason=reason, endpoint=endpoint,
                        location=Location(self.name, region, zone), journal_id=tags.get(JOURNAL_ID_TAG) or None)

    def _ports(self, spec: InstanceSpec) -> List[int]:
        return tcp_ports(spec.open_ports, K3S_DIRECT_PORTS if self._k3s_direct else ())

    def _allowed_cidrs(self, spec: InstanceSpec) -> List[str]:
        return cidr_list(spec.allowed_cidrs or self.options["allowed_cidrs"] or self._controller_cidr())

    def _controller_cidr(self) -> List[str]:
        """This controller's public address /32 (/128), asked of controller_ip_url once."""
        if self._controller_cidrs:
            return self._controller_cidrs
        url = self.options.get("controller_ip_url")
        url = DEFAULT_CONTROLLER_IP_URL if url is None else url  # '' disables the lookup
        if not url:
            raise ProviderError(ErrorKind.INVALID_REQUEST, "allowed_cidrs: not set, and the controller address lookup "
                                "is disabled (cloud_options.aws.controller_ip_url is empty); %s" % _SET_CIDRS)
        # Ansible's urls (about 0.1 s to import) serves only this lookup: not imported on a re-run.
        from ansible.module_utils.urls import (  # pylint: disable=import-outside-toplevel
            ConnectionError as UrlConnectionError, open_url,
        )
        try:
            with open_url(url, timeout=10) as reply:  # https by default
                text = reply.read(100).decode("ascii", "replace").strip()
        except (urllib.error.URLError, OSError, UrlConnectionError) as exc:
            # Asked once, never retried: a controller that cannot reach it is told what to set instead.
            raise ProviderError(ErrorKind.INVALID_REQUEST, "allowed_cidrs: not set, and this controller's public "
                                "address could not be looked up at %s (cloud_options.aws.controller_ip_url): %s; %s"
                                % (url, getattr(exc, "reason", None) or exc, _SET_CIDRS)) from exc
        try:
            address = ipaddress.ip_address(text)
        except ValueError:
            raise ProviderError(ErrorKind.INVALID_REQUEST, "allowed_cidrs: not set, and %s answered %r, not an IP "
                                "address; %s" % (url, text[:40], _SET_CIDRS)) from None
        self._controller_cidrs = ["%s/%d" % (address, address.max_prefixlen)]
        return self._controller_cidrs

    def _security_group(self, ec2, ec2_once, name: str, vpc_id: str, ports: List[int], cidrs: List[str],
                        spec: InstanceSpec) -> str:
        """Find or make this journal's group of the VM in the VPC (tagged with the identity, the user's tags
        and a ``Name``, the group's unless the user's tags name one) and add any missing ingress rule. Reads
        go through ``ec2``, every change through ``ec2_once`` (the fail-fast client)."""
        group_name = SG_PREFIX + name + journal_suffix(self.journal_id)
        identity = self._resource_tags(spec, default={"Name": group_name})
        filters = [{"Name": "vpc-id", "Values": [vpc_id]}, {"Name": "group-name", "Values": [group_name]}]
        groups = ec2.describe_security_groups(Filters=filters).get("SecurityGroups", [])
        if not groups:
            try:
                made = ec2_once.create_security_group(
                    GroupName=group_name, VpcId=vpc_id, Description="gpuprov.cloud: SSH to VM %s" % name,
                    TagSpecifications=[{"ResourceType": "security-group", "Tags": identity}])
                # A group just made is what was asked: these tags and no ingress rule (no describe to learn it).
                groups = [{"GroupId": made["GroupId"], "Tags": identity, "IpPermissions": []}] if made.get(
                    "GroupId") else []
            except ClientError as exc:
                if error_code(exc) != "InvalidGroup.Duplicate":  # a concurrent prepare won
                    raise
            if not groups:
                groups = ec2.describe_security_groups(Filters=filters).get("SecurityGroups", [])
            if not groups:
                raise ProviderError(ErrorKind.TRANSIENT, "security group %s not visible yet" % group_name)
        group = groups[0]
        have_tags = _tags(group)
        made_by = have_tags.get(JOURNAL_ID_TAG)
        if made_by is not None and made_by != self.journal_id:
            raise ProviderError(ErrorKind.INVALID_REQUEST, "security group %s in %s belongs to another controller "
                                "(journal %s)" % (group_name, vpc_id, made_by))
        if any(have_tags.get(t["Key"]) != t["Value"] for t in identity):  # made untagged (by hand)
            ec2_once.create_tags(Resources=[group["GroupId"]], Tags=identity)
        have = set()
        for perm in group.get("IpPermissions") or []:
            for rng in (perm.get("IpRanges") or []) + (perm.get("Ipv6Ranges") or []):
                have.add((perm.get("IpProtocol"), perm.get("FromPort"), rng.get("CidrIp") or rng.get("CidrIpv6")))
        wanted = []
        for port in ports:
            missing = [c for c in cidrs if ("tcp", port, c) not in have]
            if missing:
                wanted.append({
                    "IpProtocol": "tcp", "FromPort": port, "ToPort": port,
                    "IpRanges": [{"CidrIp": c, "Description": "gpuprov"} for c in missing if ":" not in c],
                    "Ipv6Ranges": [{"CidrIpv6": c, "Description": "gpuprov"} for c in missing if ":" in c]})
        if wanted:
            try:
                ec2_once.authorize_security_group_ingress(GroupId=group["GroupId"], IpPermissions=wanted)
            except ClientError as exc:
                if error_code(exc) == "InvalidPermission.Duplicate":  # raced: re-run reads the rules again
                    raise ProviderError(ErrorKind.TRANSIENT, "security group %s changed while preparing" % group_name) from exc
                raise
        return group["GroupId"]

    def sweep_locations(self) -> List[Location]:
        """The regions of the ``regions`` option and of the catalog (owned.py). Pure."""
        from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.aws.owned import sweep_locations
        return sweep_locations(self)

    @_classified
    def list_owned(self, location: Location) -> List[Owned]:
        """Tagged instances and security groups of one region (owned.py)."""
        from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.aws.owned import list_owned
        return list_owned(self, location)

    def diagnose(self, location: Location, vm_name: str) -> Dict[str, Any]:
        """observe plus EC2's state reasons, status checks, scheduled events and spot request states."""
        from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.aws.diagnose import diagnose
        return diagnose(self, location, vm_name)


def _tags(resource: Dict[str, Any]) -> Dict[str, str]:
    return {t["Key"]: t["Value"] for t in resource.get("Tags") or []}
