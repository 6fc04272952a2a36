# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Nebius AI Cloud adapter (the ``nebius`` cloud), through the official Python SDK
``nebius`` (gRPC: Nebius publishes no REST API). Every call is one SDK request with one
attempt (``retries=1``: the core retries) and the options' deadline; mutations return a
Nebius Operation that is never waited on here: its ``resource_id`` is the id, and
observe reports what the instance became.

Options: ``cloud_options.nebius`` (providers/cloud_options/nebius.py). Credentials: an
IAM token (E(NEBIUS_IAM_TOKEN)) or a service account (credentials file, or id + key id +
private key file), handed to the SDK, which exchanges and renews them.

* plan: ``PlatformService.List`` of the project: one offer per GPU platform x preset
  (gpu_count = the preset's GPUs) in the project's region, priced by one
  ``billing.v1.CalculatorService.EstimateBatch`` of the same create requests (USD/h).
  A calculator that refuses (other than transiently) leaves the offers unpriced, saying why.
  Stock from one ``capacity.v1.ResourceAdviceService.List`` of the tenant (capacity.py): a preset at
  AVAILABILITY_LEVEL_LIMIT_REACHED is unavailable with that reason; an advisor that cannot be
  consulted leaves the offers available, saying why in their detail. The tenant: option, else
  the project's parent (``iam.v2.ProjectService.Get``).
* prepare: the subnet (option, else the project's first); a security group
  ``gpuprov-<vm>-j<8 hex of sha256(journal id)>`` on its network with one ingress rule
  (TCP ssh_port + open_ports from the allowed CIDRs) and one egress rule (all).
  Nebius has no SSH-key resource: the key goes in with cloud-init.
* create: one ``InstanceService.Create`` named after the VM, labelled gpuprov-vm-name and
  gpuprov-journal-id, with a managed boot disk (deleted with the VM), a public IP, the
  security group and cloud-init user data (login user + key, boot script).
* observe: ``InstanceService.GetByName`` (names are unique per project); the endpoint is
  the public address (``a.b.c.d/32`` stripped) once RUNNING. An instance STOPPED or ERROR
  (where a create without hosts or quota leaves it) gets its reason from one read of its
  operations (operations.py): the failed Create's status, classified (Capacity / Quota ...).
* delete: ``InstanceService.Delete`` of each id; NOT_FOUND is done.
* cleanup: this journal's security group of the VM, its rules first; Transient while an
  instance still holds it.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    JOURNAL_ID_TAG, VM_NAME_TAG, Capabilities, ErrorKind, InstanceSpec, K3sAccess, Location, Observed, Offer,
    Owned, PowerOffBilling, ProviderError, ResourceRequest, SshEndpoint, Status, tag_changes, validate_vm_name,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.cloud_options.nebius import OPTIONS
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.common import (
    check_regions, cidr_list, require_sdk, tcp_ports,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.gpus import canonical_gpu
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.nebius import capacity, catalog, operations
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.nebius.errors import (
    NebiusError, from_exception, malformed,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.options import TypedOptionsProvider
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.paging import collect, message_key

try:
    from nebius.sdk import SDK
    from nebius.base.options import INSECURE
    from nebius.base.resolver import Constant
    from nebius.aio.token.static import Bearer
    from nebius.aio.token.token import Token
    from nebius.api.nebius.common.v1 import GetByNameRequest, ResourceMetadata
    from nebius.api.nebius.compute.v1 import (
        AttachedDiskSpec, CreateInstanceRequest, DeleteInstanceRequest, DiskSpec, GetInstanceRequest,
        InstanceRecoveryPolicy, InstanceServiceClient, UpdateInstanceRequest,
        InstanceSpec as NbInstanceSpec, IPAddress, ListPlatformsRequest, ManagedDisk, NetworkInterfaceSpec,
        PlatformServiceClient, PreemptibleSpec, PublicIPAddress, ResourcesSpec, SecurityGroup as NicSecurityGroup,
        SourceImageFamily,
    )
    from nebius.api.nebius.vpc.v1 import (
        CreateSecurityGroupRequest, CreateSecurityRuleRequest, DeleteSecurityGroupRequest, DeleteSecurityRuleRequest,
        GetSecurityGroupByNameRequest, ListSecurityRulesRequest, ListSubnetsRequest, RuleAccessAction, RuleEgress,
        RuleIngress, RuleProtocol, SecurityGroupServiceClient, SecurityGroupSpec, SecurityRuleServiceClient,
        SecurityRuleSpec, SubnetServiceClient,
    )
    from nebius.api.nebius.billing.v1 import (
        CalculatorServiceClient, EstimateBatchRequest, FilterAggregationUnit, ResourceSpec,
    )
    from nebius.api.google.protobuf import Any as PbAny
    from nebius.base.metadata import Metadata
    HOUR = FilterAggregationUnit.FilterAggregationUnitValue.FILTER_AGGREGATION_UNIT_HOUR
    HAS_SDK, SDK_IMPORT_ERROR = True, None
except ImportError as exc:  # the module imports without the SDK; building the adapter says how to install it
    HAS_SDK, SDK_IMPORT_ERROR = False, exc
SDK_REQUIREMENT = "nebius"   # its pip name

USER_AGENT = "gpuprov-cloud/1"
# The login user cloud-init makes, on the instance's labels: observe reports it in the endpoint.
SSH_USER_LABEL = "gpuprov-ssh-user"
MAX_RULE_ITEMS = 8            # Nebius: at most 8 CIDRs and 8 ports per security rule
# InstanceSpec.cloud_init_user_data: string {max_len: 32768} (nebius/api compute/v1/instance.proto)
USER_DATA_MAX_CHARS = 32768
# The Update header naming the fields to reset (nebius/api README, "Method Update and X-ResetMask")
RESET_MASK_HEADER = "X-ResetMask"
LABELS_RESET_MASK = "metadata.labels"
STATES = {
    "UNSPECIFIED": Status.PENDING, "CREATING": Status.PENDING, "UPDATING": Status.PENDING,
    "STARTING": Status.PENDING, "RUNNING": Status.RUNNING, "STOPPING": Status.STOPPING,
    "STOPPED": Status.STOPPED, "DELETING": Status.TERMINATING, "ERROR": Status.FAILED,
}


class NebiusProvider(TypedOptionsProvider):
    name = "nebius"
    option_spec = OPTIONS

    def __init__(self, options: Optional[Dict[str, Any]] = None, journal_id: Optional[str] = None):
        super().__init__(options, journal_id=journal_id)
        # As the other SDK clouds: before any SDK name is used (plan's first call names an SDK client).
        require_sdk(self.name, HAS_SDK, SDK_REQUIREMENT, SDK_IMPORT_ERROR)
        self._sdk: Any = None

    # -- plumbing -------------------------------------------------------------------

    def _credentials(self) -> Dict[str, Any]:
        opts = self.options
        account = (opts["service_account_id"], opts["service_account_public_key_id"],
                   opts["service_account_private_key_file"])
        if opts["credentials_file"]:
            return {"credentials_file_name": opts["credentials_file"]}
        if all(account):
            return {"service_account_id": account[0], "service_account_public_key_id": account[1],
                    "service_account_private_key_file_name": account[2]}
        if any(account):
            raise ProviderError(ErrorKind.INVALID_REQUEST, "cloud_options.nebius: service_account_id, "
                                "service_account_public_key_id and service_account_private_key_file go together")
        if opts["iam_token"]:
            return {"credentials": Bearer(Token(opts["iam_token"]))}
        raise ProviderError(ErrorKind.CREDENTIALS, "cloud_options.nebius: no credentials: set iam_token "
                            "(or NEBIUS_IAM_TOKEN), credentials_file, or the service_account_* options")

    @property
    def sdk(self) -> Any:
        """The SDK channel, made on first use (capabilities and option checks need no credentials)."""
        if self._sdk is None:
            if not self.options["project_id"]:
                raise ProviderError(ErrorKind.INVALID_REQUEST, "cloud_options.nebius.project_id: required (or "
                                    "NEBIUS_PROJECT_ID): the project the VMs are made in")
            kwargs = self._credentials()
            endpoint = self.options["api_endpoint"]
            if endpoint:
                kwargs["resolver"] = Constant(endpoint)
                if self.options["api_insecure"]:
                    kwargs["address_options"] = {endpoint: [(INSECURE, True)]}
            try:
                self._sdk = SDK(user_agent_prefix=USER_AGENT, **kwargs)
            except Exception as exc:  # noqa: BLE001 - an unreadable key file, a bad endpoint: classified
                raise NebiusError(ErrorKind.CREDENTIALS, "nebius SDK: %s: %s" % (type(exc).__name__, exc)) from exc
        return self._sdk

    def _call(self, what: str, client: type, method: str, request: Any, metadata: Any = None) -> Any:
        """One SDK request (with ``metadata``, gRPC headers, when given), one attempt, its reply or a
        classified error."""
        sdk = self.sdk
        extra = {"metadata": metadata} if metadata is not None else {}
        try:
            return getattr(client(sdk), method)(request, retries=1, timeout=self.options["request_timeout_s"],
                                                auth_timeout=self.options["request_timeout_s"], **extra).wait()
        except ProviderError:
            raise
        except Exception as exc:  # noqa: BLE001 - every SDK failure is classified (errors.py)
            raise from_exception(exc, what) from exc

    def _absent_if_not_found(self, what: str, client: type, method: str, request: Any) -> Any:
        """The reply, or None when the API answers NOT_FOUND."""
        try:
            return self._call(what, client, method, request)
        except NebiusError as err:
            if err.code == "NOT_FOUND":
                return None
            raise

    def _operation_resource(self, what: str, operation: Any) -> str:
        resource_id = getattr(operation, "resource_id", "") or ""
        if not resource_id:
            raise malformed(what, "the operation names no resource_id")
        return resource_id

    @property
    def project(self) -> str:
        return self.options["project_id"]

    def capabilities(self) -> Capabilities:
        return Capabilities(
            kubernetes=True, boot_script=True, spot=True, k3s_access=K3sAccess.SSH_TUNNEL,
            boot_timeout_s=self.options["boot_timeout_s"], poll_interval_s=self.options["poll_interval_s"],
            python_interpreter=self.options["python_interpreter"] or None,
            # Compute takes a guest shutdown for a failure and applies the recovery policy: RECOVER (the default)
            # reboots the VM and charges on; FAIL, which create sets when asked, leaves it stopped, and a stopped
            # VM is not charged (its disks are).
            poweroff_billing=PowerOffBilling.ENDS_COMPUTE, poweroff_setting="recovery_policy=FAIL",
            poweroff_billing_unset=PowerOffBilling.CONTINUES,
            poweroff_source="nebius SDK 0.6 compute.v1 InstanceSpec.recovery_policy (a guest shutdown is subject to "
                            "it; FAIL: stopped, not restarted); https://docs.nebius.com/compute/virtual-machines/"
                            "stopped-with-linux-commands; https://docs.nebius.com/legal/specific-terms/compute "
                            "(stopped time not charged, disks charged)")

    # -- plan -----------------------------------------------------------------------

    def plan(self, request: ResourceRequest) -> List[Offer]:
        validate_vm_name(request.vm_name)
        want = canonical_gpu(request.gpu)
        count = max(int(request.gpu_count or 1), 1) if want else 0
        region = self.options["region"]
        # A project lives in one region: the only one this adapter has.
        check_regions("nebius", request.regions, [region],
                      its="the region of project %s (cloud_options.nebius.region; another region needs a project "
                          "there, cloud_options.nebius.project_id)" % self.project)
        platforms = self._platforms()
        offers, seen_counts = [], []
        for platform in platforms:
            pid = platform.metadata.name or platform.metadata.id
            gpu = catalog.gpu_of(pid, platform.spec.human_readable_name or "")
            if (want is None and gpu is not None) or (want is not None and gpu != want):
                continue
            if request.spot and not platform.status.allowed_for_preemptibles:
                continue
            for preset in platform.spec.presets:
                gpus = int(preset.resources.gpu_count or 0)
                seen_counts.append(gpus)
                if want is not None and gpus < count:
                    continue
                offers.append(Offer(
                    cloud=self.name, region=region, instance_type="%s/%s" % (pid, preset.name), gpu=gpu,
                    gpu_count=gpus, spot=bool(request.spot),
                    detail={"platform": pid, "preset": preset.name, "vcpus": int(preset.resources.vcpu_count or 0),
                            "memory_gib": int(preset.resources.memory_gibibytes or 0)}))
        if want is not None and not offers:
            if not seen_counts:
                raise ProviderError(ErrorKind.INVALID_REQUEST, "gpu: nebius lists no %splatform with %s in project "
                                    "%s" % ("preemptible " if request.spot else "", want, self.project))
            raise ProviderError(ErrorKind.INVALID_REQUEST, "gpu_count: nebius's %s presets hold at most %d GPUs, "
                                "%d asked" % (want, max(seen_counts), count))
        if offers:
            capacity.apply(self, offers, region, bool(request.spot))
        if offers and self.options["prices"]:
            self._price(offers)
        offers.sort(key=lambda o: (o.price_per_hour if o.price_per_hour is not None else 1e9, o.gpu_count,
                                   o.instance_type))
        return offers

    def _platforms(self) -> List[Any]:
        def page(token: str):
            reply = self._call("PlatformService.List", PlatformServiceClient, "list",
                               ListPlatformsRequest(parent_id=self.project, page_token=token))
            return reply.items, reply.next_page_token
        return collect(page, "nebius PlatformService.List", key=message_key)

    def _price(self, offers: List[Offer]) -> None:
        """USD/h of each offer from one EstimateBatch of the create requests (resource_costs in order)."""
        specs = [ResourceSpec(spec=PbAny(type_url="type.googleapis.com/nebius.compute.v1.CreateInstanceRequest",
                                         value=self._create_request(o, None, None).SerializeToString()))
                 for o in offers]
        try:
            reply = self._call("CalculatorService.EstimateBatch", CalculatorServiceClient, "estimate_batch",
                               EstimateBatchRequest(resource_specs=specs, currency="usd",
                                                    filter_aggregation_unit=FilterAggregationUnit(
                                                        filter_aggregation_unit_values=[HOUR])))
        except NebiusError as err:
            if err.kind == ErrorKind.TRANSIENT:
                raise   # the core plans again
            # The calculator is another service (billing) on its own host: a credential that may not call it,
            # or an endpoint without it, leaves the offers unpriced rather than the cloud without offers.
            for offer in offers:
                offer.detail["price_unknown"] = err.msg
            return
        costs = list(reply.resource_costs)
        if len(costs) != len(offers):
            return  # no per-resource breakdown: leave the offers unpriced rather than guess
        for offer, cost in zip(offers, costs, strict=True):
            offer.price_per_hour = _hourly(cost)

    # -- prepare ----------------------------------------------------------------------

    def _cidrs(self, spec: InstanceSpec) -> List[str]:
        cidrs = cidr_list(spec.allowed_cidrs or self.options["allowed_cidrs"] or [])
        if not cidrs:
            raise ProviderError(ErrorKind.INVALID_REQUEST, "allowed_cidrs: nebius needs the source ranges of the "
                                "VM's security group (the task's allowed_cidrs or cloud_options.nebius."
                                "allowed_cidrs); 0.0.0.0/0 is never assumed")
        if len(cidrs) > MAX_RULE_ITEMS:
            raise ProviderError(ErrorKind.INVALID_REQUEST, "allowed_cidrs: nebius takes at most %d per security "
                                "rule, %d given" % (MAX_RULE_ITEMS, len(cidrs)))
        ipv6 = [c for c in cidrs if ":" in c]
        if ipv6:   # RuleIngress.source_cidrs: "Must be a valid IPv4" (nebius/api vpc/v1/security_rule.proto)
            raise ProviderError(ErrorKind.INVALID_REQUEST, "allowed_cidrs: nebius security rules take IPv4 CIDRs "
                                "only, got %s" % ", ".join(ipv6))
        return cidrs

    def _ports(self, spec: InstanceSpec) -> List[int]:
        ports = tcp_ports(spec.open_ports, (self.options["ssh_port"],))
        if len(ports) > MAX_RULE_ITEMS:
            raise ProviderError(ErrorKind.INVALID_REQUEST, "open_ports: nebius takes at most %d ports per security "
                                "rule, %d asked" % (MAX_RULE_ITEMS, len(ports)))
        return ports

    def _subnet(self) -> Dict[str, str]:
        reply = self._call("SubnetService.List", SubnetServiceClient, "list",
                           ListSubnetsRequest(parent_id=self.project))
        subnets = list(reply.items)
        wanted = self.options["subnet_id"]
        for subnet in subnets:
            if not wanted or subnet.metadata.id == wanted:
                return {"subnet_id": subnet.metadata.id, "network_id": subnet.spec.network_id}
        raise ProviderError(ErrorKind.INVALID_REQUEST, "subnet_id: project %s has no subnet %s" % (
            self.project, wanted) if wanted else "subnet_id: project %s has no subnet" % self.project)

    def _wanted_rules(self, group: str, cidrs: List[str], ports: List[int]) -> Dict[str, Any]:
        return {
            group + "-in": SecurityRuleSpec(access=RuleAccessAction.ALLOW, protocol=RuleProtocol.TCP,
                                            ingress=RuleIngress(source_cidrs=cidrs, destination_ports=ports)),
            group + "-out": SecurityRuleSpec(access=RuleAccessAction.ALLOW, protocol=RuleProtocol.ANY,
                                             egress=RuleEgress()),
        }

    def _security_group(self, vm: str, network_id: str) -> str:
        name = catalog.security_group_name(vm, self.journal_id)
        found = self._absent_if_not_found("SecurityGroupService.GetByName", SecurityGroupServiceClient,
                                          "get_by_name", GetSecurityGroupByNameRequest(parent_id=self.project,
                                                                                       name=name))
        if found is not None:
            return found.metadata.id
        operation = self._call("SecurityGroupService.Create", SecurityGroupServiceClient, "create",
                               CreateSecurityGroupRequest(
                                   metadata=ResourceMetadata(parent_id=self.project, name=name,
                                                             labels=self.identity_tags(vm)),
                                   spec=SecurityGroupSpec(network_id=network_id)))
        return self._operation_resource("SecurityGroupService.Create", operation)

    def _rules(self, vm: str, group_id: str, wanted: Dict[str, Any]) -> None:
        """The group holds exactly ``wanted`` (by name and spec): stale rules replaced."""
        have = {r.metadata.name: r for r in self._call(
            "SecurityRuleService.List", SecurityRuleServiceClient, "list",
            ListSecurityRulesRequest(parent_id=group_id)).items}
        for name, spec in sorted(wanted.items()):
            rule = have.get(name)
            if rule is not None and rule.spec.SerializeToString(deterministic=True) == spec.SerializeToString(
                    deterministic=True):
                continue
            if rule is not None:
                self._call("SecurityRuleService.Delete", SecurityRuleServiceClient, "delete",
                           DeleteSecurityRuleRequest(id=rule.metadata.id))
            self._call("SecurityRuleService.Create", SecurityRuleServiceClient, "create", CreateSecurityRuleRequest(
                metadata=ResourceMetadata(parent_id=group_id, name=name, labels=self.identity_tags(vm)), spec=spec))

    def prepare(self, offer: Offer, spec: InstanceSpec) -> Dict[str, Any]:
        vm = validate_vm_name(spec.vm_name)
        cidrs, ports = self._cidrs(spec), self._ports(spec)
        self._user_data(spec.ssh_user or self.options["ssh_user"], spec)   # too long fails before any call
        subnet = self._subnet()
        group_id = self._security_group(vm, subnet["network_id"])
        group = catalog.security_group_name(vm, self.journal_id)
        self._rules(vm, group_id, self._wanted_rules(group, cidrs, ports))
        return {"subnet_id": subnet["subnet_id"], "security_group_id": group_id, "region": offer.region,
                "source_ranges": cidrs, "ports": ports, "ssh_user": spec.ssh_user or self.options["ssh_user"]}

    # -- create -----------------------------------------------------------------------

    @staticmethod
    def _user_data(user: str, spec: InstanceSpec) -> str:
        """The cloud-config of the VM, or InvalidRequest when Nebius would refuse its length."""
        user_data = catalog.cloud_init(user, spec.ssh_public_key, spec.boot_script)
        if len(user_data) > USER_DATA_MAX_CHARS:
            raise ProviderError(ErrorKind.INVALID_REQUEST, "boot script: %d characters of cloud-init user data (the "
                                "script base64-encoded, with the login user and key), nebius takes at most %d" % (
                                    len(user_data), USER_DATA_MAX_CHARS))
        return user_data

    def _create_request(self, offer: Offer, prepared: Optional[Dict[str, Any]],
                        spec: Optional[InstanceSpec]) -> Any:
        """The CreateInstanceRequest of ``offer`` (without network and user data when pricing)."""
        vm = spec.vm_name if spec else "gpuprov-price"
        labels = self.resource_tags(spec) if spec else {}   # the user's labels under the identity ones
        disk = ManagedDisk(name=catalog.boot_disk_name(vm), labels=labels,
                           spec=DiskSpec(size_gibibytes=self.options["disk_size_gib"],
                                         type=getattr(DiskSpec.DiskType, self.options["disk_type"]),
                                         source_image_family=SourceImageFamily(
                                             image_family=self.options["image_family"])))
        body = NbInstanceSpec(
            resources=ResourcesSpec(platform=offer.detail["platform"], preset=offer.detail["preset"]),
            boot_disk=AttachedDiskSpec(attach_mode=AttachedDiskSpec.AttachMode.READ_WRITE, managed_disk=disk))
        if offer.spot:
            body.preemptible = PreemptibleSpec(on_preemption=PreemptibleSpec.PreemptionPolicy.STOP)
        if spec is not None and spec.terminate_on_guest_shutdown:
            # The watchdog's power-off then leaves the VM stopped and uncharged; the default, RECOVER, would
            # reboot it and charge on. Immutable once created, and a host failure then stops it too.
            body.recovery_policy = InstanceRecoveryPolicy.FAIL
        if prepared is not None and spec is not None:
            body.network_interfaces = [NetworkInterfaceSpec(
                name="eth0", subnet_id=prepared["subnet_id"], ip_address=IPAddress(),
                public_ip_address=PublicIPAddress(),
                security_groups=[NicSecurityGroup(id=prepared["security_group_id"])])]
            body.cloud_init_user_data = self._user_data(prepared.get("ssh_user") or self.options["ssh_user"], spec)
        return CreateInstanceRequest(
            metadata=ResourceMetadata(parent_id=self.project, name=vm, labels=labels), spec=body)

    def create(self, offer: Offer, prepared: Dict[str, Any], spec: InstanceSpec) -> str:
        validate_vm_name(spec.vm_name)
        request = self._create_request(offer, prepared, spec)
        request.metadata.labels[SSH_USER_LABEL] = prepared.get("ssh_user") or self.options["ssh_user"]
        operation = self._call("InstanceService.Create", InstanceServiceClient, "create", request)
        return self._operation_resource("InstanceService.Create", operation)

    # -- observe ----------------------------------------------------------------------

    def _get(self, vm: str) -> Any:
        return self._absent_if_not_found("InstanceService.GetByName", InstanceServiceClient, "get_by_name",
                                         GetByNameRequest(parent_id=self.project, name=vm))

    def _observed(self, instance: Any, location: Location) -> Observed:
        state = instance.status.state.name if instance.status is not None else "UNSPECIFIED"
        status = STATES.get(state, Status.PENDING)
        endpoint = None
        if status == Status.RUNNING:
            address = ""
            for nic in instance.status.network_interfaces:
                if nic.public_ip_address is not None and nic.public_ip_address.address:
                    address = catalog.public_address(nic.public_ip_address.address)
                    break
            user = dict(instance.metadata.labels or {}).get(SSH_USER_LABEL) or self.options["ssh_user"]
            if address and user:
                endpoint = SshEndpoint(host=address, port=self.options["ssh_port"], user=user)
        labels = dict(instance.metadata.labels or {})
        reason, failure = None, None
        if state in operations.EXPLAINED_STATES:
            # A create without hosts or quota leaves the instance STOPPED or ERROR; its Operation says why.
            reason, failure = operations.failure_reason(self, instance, state)
        return Observed(instance_id=instance.metadata.id, status=status, endpoint=endpoint, reason=reason,
                        location=Location(self.name, location.region), journal_id=labels.get(JOURNAL_ID_TAG) or None,
                        error_kind=failure.kind if failure else None,
                        error_block=failure.block_scope if failure else None)

    def observe(self, location: Location, vm_name: str) -> List[Observed]:
        vm = validate_vm_name(vm_name)
        instance = self._get(vm)
        if instance is None or dict(instance.metadata.labels or {}).get(VM_NAME_TAG) != vm:
            return []
        return [self._observed(instance, location)]

    def sweep_locations(self) -> List[Location]:
        """The project's region (owned.py). Pure."""
        from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.nebius.owned import sweep_locations
        return sweep_locations(self)

    def list_owned(self, location: Location) -> List[Owned]:
        """Labelled instances and security groups of the project (owned.py)."""
        from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.nebius.owned import list_owned
        return list_owned(self, location)

    # -- retag --------------------------------------------------------------------------

    can_retag = True

    def retag(self, location: Location, vm_name: str, instance_id: str, tags: Dict[str, str], purge: bool,
              check: bool = False) -> Dict[str, Any]:
        """The user labels of the instance: one labels-only InstanceService.Update, fenced by the
        resource_version read (a concurrent change makes it ABORTED: Transient), its Operation not awaited.

        Labels only: the request holds the metadata's id, parent_id (required), resource_version and
        labels, no spec, and sets ``X-ResetMask: metadata.labels`` itself (a map named there and given is
        replaced whole), so nothing else can change; the SDK's own mask, derived from the message, would
        reset every field the request leaves empty (the name among them). The managed boot disk keeps the
        labels it was created with: Nebius changes a managed disk only through a whole instance spec."""
        vm = validate_vm_name(vm_name)
        instance = self._absent_if_not_found("InstanceService.Get", InstanceServiceClient, "get",
                                             GetInstanceRequest(id=instance_id))
        if instance is None or dict(instance.metadata.labels or {}).get(VM_NAME_TAG) != vm:
            raise ProviderError(ErrorKind.INVALID_REQUEST, "tags: %s is not an instance of VM %s" % (instance_id, vm))
        labels = dict(instance.metadata.labels or {})
        changes = tag_changes(labels, dict(tags), purge, keep=_gpuprov_label)
        if check or not (changes["set"] or changes["removed"]):
            return changes
        for name in changes["removed"]:
            labels.pop(name, None)
        labels.update(changes["set"])
        headers = Metadata()
        headers[RESET_MASK_HEADER] = LABELS_RESET_MASK
        update = UpdateInstanceRequest(metadata=ResourceMetadata(
            id=instance.metadata.id, parent_id=instance.metadata.parent_id,
            resource_version=instance.metadata.resource_version, labels=labels))
        self._call("InstanceService.Update", InstanceServiceClient, "update", update, metadata=headers)
        return changes

    # -- delete / cleanup -------------------------------------------------------------

    def delete(self, location: Location, vm_name: str, instance_ids: List[str]) -> None:
        validate_vm_name(vm_name)
        for instance_id in sorted({str(i) for i in instance_ids}):
            self._absent_if_not_found("InstanceService.Delete", InstanceServiceClient, "delete",
                                      DeleteInstanceRequest(id=instance_id))

    def cleanup(self, location: Location, vm_name: str) -> None:
        vm = validate_vm_name(vm_name)
        name = catalog.security_group_name(vm, self.journal_id)
        group = self._absent_if_not_found("SecurityGroupService.GetByName", SecurityGroupServiceClient,
                                          "get_by_name", GetSecurityGroupByNameRequest(parent_id=self.project,
                                                                                       name=name))
        if group is None:
            return
        rules = self._call("SecurityRuleService.List", SecurityRuleServiceClient, "list",
                           ListSecurityRulesRequest(parent_id=group.metadata.id)).items
        for rule in rules:
            self._absent_if_not_found("SecurityRuleService.Delete", SecurityRuleServiceClient, "delete",
                                      DeleteSecurityRuleRequest(id=rule.metadata.id))
        # Held by an instance still deleting: Nebius answers FAILED_PRECONDITION (Transient).
        self._absent_if_not_found("SecurityGroupService.Delete", SecurityGroupServiceClient, "delete",
                                  DeleteSecurityGroupRequest(id=group.metadata.id))


def _gpuprov_label(name: str) -> bool:
    """gpuprov's own labels (identity, login user): never a user's to change."""
    return name.startswith("gpuprov-")


def _hourly(cost: Any) -> Optional[float]:
    """USD/h of one ResourceCost (its general or per-instance total), None when it has none."""
    for field in ("general", "fixed_instance"):
        part = getattr(cost, field, None)
        total = getattr(part, "total", None) if part is not None else None
        if total is not None and total.cost:
            try:
                return round(float(total.cost), 4)
            except ValueError:
                return None
    return None
