"""A Nebius AI Cloud gRPC fake on a loopback port: grpc's generic handler over the SDK's own message classes
and service names (``nebius`` ships no ``*_pb2_grpc`` servicers), only the services the adapter calls
(``_services``), ``common.v1.OperationService`` among them. Mutations answer a kept ``common.v1.Operation``:
an instance's Create finishes once it is RUNNING, its Delete once it is gone, the rest at once.
* Lists page by the request's ``page_size``, else the fake's (0: all), ``next_page_token`` until the last. With
  ``ignore_paging`` the server ignores ``page_token``: every List answers its first page and a next token (the same
  each time, as a server repeating its first answer sends).
* Auth: ``authorization: Bearer <token>``, else UNAUTHENTICATED; another parent id is PERMISSION_DENIED.
* Lifecycle: Create makes it CREATING; ``boot_polls`` reads on, RUNNING at ``127.0.0.N/32`` whose
  ``ssh_port`` forwards to a real sshd with the cloud-init ``users``' keys. Delete: DELETING, then gone.
* Refusals as Nebius's: a name used (ALREADY_EXISTS); an unknown platform/preset, subnet, security group, no
  boot disk, user data over 32768 characters (INVALID_ARGUMENT + BadRequest); more GPUs than ``quota_gpus``
  (RESOURCE_EXHAUSTED + QuotaFailure); deleting a held security group (FAILED_PRECONDITION +
  BadResourceState); unknown ids (NOT_FOUND + ResourceNotFound).
* Update (nebius/api README): a field changes when given non-default or named in ``X-ResetMask`` (a map
  given is replaced whole); ``metadata.parent_id`` required; ``resource_version`` 0 or current (else
  ABORTED), raised by each update. Only labels (the instance's, its managed disk's) may change.
* Capacity: ``iam.v2.ProjectService.Get`` gives the project's parent ``tenant_id``;
  ``capacity.v1.ResourceAdviceService.List`` of it one advice per platform x preset at level
  ``capacity[(platform, preset)]`` (unset: HIGH); no parent_id INVALID_ARGUMENT, another PERMISSION_DENIED.
* A guest power-off (:meth:`guest_poweroff`) applies the instance's ``recovery_policy``, as Compute does (the SDK's
  InstanceSpec.recovery_policy): RECOVER (the default) reboots it, RUNNING and charged on (``reboots`` counts);
  FAIL leaves it STOPPED. ALWAYS is refused on create outside an NVLink instance group (INVALID_ARGUMENT).
* :meth:`fail_create_operation`: ``boot_polls`` reads on the instance is STOPPED (dstack #2977, SkyPilot
  #6856) or ERROR, its Create operation RESOURCE_EXHAUSTED. :meth:`forget_operations`: the retention policy.
* Errors on demand: :meth:`fail_next` (any code and ServiceError), :meth:`fail_capacity`, :meth:`bad_auth` ...
"""

from __future__ import annotations

import concurrent.futures
import datetime
import ipaddress
import socket
import threading
import uuid
from typing import Any, Callable, Dict, List, Optional, Tuple

import grpc

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.nebius import catalog
from ansible_collections.gpuprov.cloud.tests.fakes.marketplace import PortForwarder, SshdPool

from nebius.api.google.protobuf import Any as PbAny
from nebius.api.google.rpc import Status as RpcStatus
from nebius.api.nebius.billing.v1 import AggregationUnit, CostBreakdown, EstimateBatchRequest, EstimateBatchResponse, GeneralResourceCost, ResourceCost
from nebius.api.nebius.capacity.v1 import (
    ComputeInstanceDetails, ListResourceAdviceRequest, ListResourceAdviceResponse, ResourceAdvice, ResourceAdviceSpec, ResourceAdviceStatus,
)
from nebius.api.nebius.iam.v2 import GetProjectRequest, Project
from nebius.api.nebius.common.v1 import (
    BadRequest, BadResourceState, GetByNameRequest, ListOperationsRequest, ListOperationsResponse, NotEnoughResources, Operation, QuotaFailure,
    ResourceMetadata, ResourceNotFound, ServiceError, TooManyRequests,
)
from nebius.api.nebius.compute.v1 import (
    CreateInstanceRequest, DeleteInstanceRequest, GetInstanceRequest, Instance, InstanceSpec, InstanceStatus, ListInstancesRequest,
    ListInstancesResponse, ListPlatformsRequest, ListPlatformsResponse, NetworkInterfaceStatus, Platform, PlatformSpec, PlatformStatus, Preset,
    PresetResources, PublicIPAddressStatus, IPAddressStatus, UpdateInstanceRequest,
)
from nebius.base.fieldmask import Mask
from nebius.api.nebius.vpc.v1 import (
    CreateSecurityGroupRequest, CreateSecurityRuleRequest, DeleteSecurityGroupRequest, DeleteSecurityRuleRequest, GetSecurityGroupByNameRequest,
    GetSecurityGroupRequest, ListSecurityGroupsRequest, ListSecurityGroupsResponse, ListSecurityRulesRequest, ListSecurityRulesResponse,
    ListSubnetsRequest, ListSubnetsResponse, SecurityGroup, SecurityRule, Subnet, SubnetSpec,
)

C = grpc.StatusCode
# platform -> (human name, gpus per preset..., USD per GPU-hour, allowed for preemptibles)
PLATFORMS = {
    "gpu-h100-sxm": ("NVIDIA® H100 NVLink with Intel Sapphire Rapids", ((1, 16, 200), (8, 128, 1600)), 2.95, True),
    "gpu-h200-sxm": ("NVIDIA® H200 NVLink with Intel Sapphire Rapids", ((1, 16, 200), (8, 128, 1600)), 3.50, True),
    "gpu-l40s-a": ("NVIDIA® L40S PCIe with Intel Ice Lake", ((1, 8, 32), (1, 16, 64)), 1.55, False),
    "cpu-d3": ("Non-GPU AMD EPYC Genoa", ((0, 4, 16), (0, 16, 64)), 0.048, False),
}


def preset_name(gpus: int, vcpus: int, memory: int) -> str:
    return ("%dgpu-%dvcpu-%dgb" % (gpus, vcpus, memory)) if gpus else "%dvcpu-%dgb" % (vcpus, memory)


class _Abort(Exception):
    def __init__(self, code: grpc.StatusCode, message: str, error: Optional[ServiceError] = None):
        super().__init__(message)
        self.code, self.message, self.error = code, message, error


class _Status(grpc.Status):
    def __init__(self, code: grpc.StatusCode, details: str, trailing_metadata: Tuple = ()):
        self.code, self.details, self.trailing_metadata = code, details, trailing_metadata


def service_error(code: str, **detail: Any) -> ServiceError:
    return ServiceError(service="compute", code=code, **detail)


# (code, message, ServiceError) of a create refused, at the call or inside its operation, for lack of hosts or quota.
REFUSALS = {
    "capacity": lambda: (C.RESOURCE_EXHAUSTED, "Not enough resources to create the instance", service_error(
        "NotEnoughResources", not_enough_resources=NotEnoughResources(violations=[NotEnoughResources.Violation(
            resource_type="gpu-h100-sxm", requested="1", message="Not enough resources to create the instance")]))),
    "quota": lambda limit="0", requested="1": (C.RESOURCE_EXHAUSTED, "Quota limit exceeded", service_error(
        "QuotaFailure", quota_failure=QuotaFailure(violations=[QuotaFailure.Violation(
            quota="compute.instance.gpu", limit=limit, requested=requested, message="Quota limit exceeded")]))),
}


class NebiusGrpcFake:
    """The fake server. ``fake.api_endpoint`` is its ``127.0.0.1:<port>``; ``fake.token`` the IAM token it accepts; project_id, region, tenant_id."""

    cloud = "nebius"

    def __init__(self, root: str, token: str = "fake-iam-token", project_id: str = "project-e00fake", region: str = "eu-north1",
                 boot_polls: int = 2, quota_gpus: int = 16):
        self.token, self.project_id, self.region, self.tenant_id = token, project_id, region, "tenant-e00fake"
        self.capacity: Dict[Tuple[str, str], str] = {}   # (platform, preset) -> availability level (HIGH unset)
        self.boot_polls, self.quota_gpus = boot_polls, quota_gpus
        self.lock = threading.RLock()
        self.sshd = SshdPool(root)
        self.platforms = {name: dict(human=h, presets=[preset_name(*p) for p in presets],
                                     gpus={preset_name(*p): p[0] for p in presets}, price=price, spot=spot)
                          for name, (h, presets, price, spot) in PLATFORMS.items()}
        self.subnets = {"vpcsubnet-e00default": "vpcnetwork-e00default"}
        self.instances: Dict[str, Dict[str, Any]] = {}
        self.security_groups: Dict[str, Dict[str, Any]] = {}
        self.rules: Dict[str, Dict[str, Any]] = {}
        self.operations: Dict[str, Operation] = {}
        self._failing_creates: List[Tuple[str, Operation]] = []   # (end state, failed status) per next create
        self.calls: List[Tuple[str, Any]] = []
        self.headers: List[Tuple[str, Dict[str, str]]] = []   # each call's gRPC metadata (the token left out)
        self._call_headers: Dict[str, str] = {}
        self.page_size = 0   # the server's page size for lists the request gives none (0: everything at once)
        self.ignore_paging = False
        self._faults: Dict[str, List[Tuple[grpc.StatusCode, str, Optional[ServiceError]]]] = {}
        self._forwarders: Dict[str, PortForwarder] = {}
        self._next_address = 2
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.ssh_port = probe.getsockname()[1]  # every instance's sshd port (on its own address)
        self.server = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=8))
        for service, methods in self._services().items():
            self.server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service, {
                method: grpc.unary_unary_rpc_method_handler(
                    self._handler(key, fn), request_deserializer=request_class.FromString, response_serializer=lambda message: message.SerializeToString())
                for method, (request_class, key, fn) in methods.items()}),))
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()
        self.api_endpoint = "127.0.0.1:%d" % self.port

    def _services(self) -> Dict[str, Dict[str, Tuple[type, str, Callable]]]:
        return {
            "nebius.compute.v1.InstanceService": {
                "Get": (GetInstanceRequest, "instances.get", self.get_instance),
                "GetByName": (GetByNameRequest, "instances.get_by_name", self.get_instance_by_name),
                "List": (ListInstancesRequest, "instances.list", self.list_instances),
                "Create": (CreateInstanceRequest, "instances.create", self.create_instance),
                "Update": (UpdateInstanceRequest, "instances.update", self.update_instance),
                "Delete": (DeleteInstanceRequest, "instances.delete", self.delete_instance)},
            "nebius.compute.v1.PlatformService": {"List": (ListPlatformsRequest, "platforms.list", self.list_platforms)},
            "nebius.vpc.v1.SubnetService": {"List": (ListSubnetsRequest, "subnets.list", self.list_subnets)},
            "nebius.vpc.v1.SecurityGroupService": {
                "Get": (GetSecurityGroupRequest, "security_groups.get", self.get_group),
                "GetByName": (GetSecurityGroupByNameRequest, "security_groups.get_by_name", self.get_group_by_name),
                "List": (ListSecurityGroupsRequest, "security_groups.list", self.list_groups),
                "Create": (CreateSecurityGroupRequest, "security_groups.create", self.create_group),
                "Delete": (DeleteSecurityGroupRequest, "security_groups.delete", self.delete_group)},
            "nebius.vpc.v1.SecurityRuleService": {
                "List": (ListSecurityRulesRequest, "security_rules.list", self.list_rules),
                "Create": (CreateSecurityRuleRequest, "security_rules.create", self.create_rule),
                "Delete": (DeleteSecurityRuleRequest, "security_rules.delete", self.delete_rule)},
            "nebius.billing.v1.CalculatorService": {
                "EstimateBatch": (EstimateBatchRequest, "calculator.estimate_batch", self.estimate_batch)},
            "nebius.iam.v2.ProjectService": {"Get": (GetProjectRequest, "projects.get", self.get_project)},
            "nebius.capacity.v1.ResourceAdviceService": {
                "List": (ListResourceAdviceRequest, "capacity_advice.list", self.list_advice)},
            "nebius.common.v1.OperationService": {"List": (ListOperationsRequest, "operations.list", self.list_operations)},
        }

    # -- plumbing ------------------------------------------------------------------------
    def _handler(self, key: str, fn: Callable) -> Callable:
        def handle(request: Any, context: grpc.ServicerContext) -> Any:
            try:
                with self.lock:
                    self.calls.append((key, request))
                    metadata = dict(context.invocation_metadata())
                    self._call_headers = metadata
                    self.headers.append((key, {k: v for k, v in metadata.items() if k != "authorization"}))
                    if metadata.get("authorization") != "Bearer %s" % self.token:
                        raise _Abort(C.UNAUTHENTICATED, "invalid or expired IAM token", service_error("Unauthenticated"))
                    fault = self._faults.get(key)
                    if fault:
                        raise _Abort(*fault.pop(0))
                    return fn(request)
            except _Abort as abort:
                context.abort_with_status(self._status(abort))
        return handle

    @staticmethod
    def _rpc_status(abort: _Abort) -> RpcStatus:
        details = []
        if abort.error is not None:
            details.append(PbAny(type_url="type.googleapis.com/nebius.common.v1.ServiceError",
                                 value=abort.error.SerializeToString()))
        return RpcStatus(code=abort.code.value[0], message=abort.message, details=details)

    def _status(self, abort: _Abort) -> grpc.Status:
        details = self._rpc_status(abort).SerializeToString()
        return _Status(abort.code, abort.message, (("grpc-status-details-bin", details),))

    def _project(self, parent_id: str) -> None:
        if parent_id != self.project_id:
            raise _Abort(C.PERMISSION_DENIED, "permission denied on %s" % (parent_id or "<empty parent_id>"),
                         service_error("PermissionDenied"))

    @staticmethod
    def _invalid(field: str, message: str) -> _Abort:
        return _Abort(C.INVALID_ARGUMENT, "%s: %s" % (field, message), service_error(
            "BadRequest", bad_request=BadRequest(violations=[BadRequest.Violation(field=field, message=message)])))

    @staticmethod
    def _not_found(resource_id: str) -> _Abort:
        return _Abort(C.NOT_FOUND, "resource %s not found" % resource_id,
                      service_error("ResourceNotFound", resource_not_found=ResourceNotFound(resource_id=resource_id)))

    def _operation(self, resource_id: str, what: str, request: Any = None, done: bool = True) -> Operation:
        """A new operation on ``resource_id`` (kept for OperationService), finished OK when ``done``."""
        operation = Operation(id="computeoperation-" + uuid.uuid4().hex[:12], description=what, resource_id=resource_id,
                              created_at=datetime.datetime.now(datetime.timezone.utc), request=None if request is None
                              else PbAny(type_url="type.googleapis.com/" + type(request).__PROTO_FULL_NAME__,
                                         value=request.SerializeToString()))
        self.operations[operation.id] = operation
        if done:
            self._finish(resource_id, what, RpcStatus(code=0))
        return Operation.FromString(operation.SerializeToString())

    def _finish(self, resource_id: str, what: str, status: RpcStatus) -> None:
        """Finish the running ``what`` operations of ``resource_id`` with ``status``."""
        for operation in self.operations.values():
            if operation.resource_id == resource_id and operation.description == what and operation.status is None:
                operation.status, operation.finished_at = status, datetime.datetime.now(datetime.timezone.utc)

    @staticmethod
    def _tick(record: Dict[str, Any], polls: int) -> bool:
        record["_reads"] = record.get("_reads", 0) + 1
        return record["_reads"] >= polls

    # -- levers --------------------------------------------------------------------------
    def fail_next(self, key: str, code: grpc.StatusCode, message: str, error: Optional[ServiceError] = None, times: int = 1) -> None:
        with self.lock:
            self._faults.setdefault(key, []).extend([(code, message, error)] * times)

    def clear_faults(self) -> None:
        with self.lock:
            self._faults.clear()
            self._failing_creates.clear()

    def fail_create_operation(self, reason: str = "capacity", state: str = "STOPPED", times: int = 1) -> None:
        """The next ``times`` creates end (``boot_polls`` reads on) in ``state``, STOPPED or ERROR, their Create
        operation failed for ``reason``: "capacity", "quota", or a (code, message, ServiceError or None)."""
        code, message, error = REFUSALS[reason]() if isinstance(reason, str) else reason
        assert state in ("STOPPED", "ERROR"), state
        with self.lock:
            self._failing_creates.extend([(state, self._rpc_status(_Abort(code, message, error)))] * times)

    def forget_operations(self) -> None:
        """Drop every finished operation (the retention policy of nebius/api's README)."""
        with self.lock:
            self.operations = {i: o for i, o in self.operations.items() if o.status is None}

    def fail_capacity(self, key: str = "instances.create") -> None:
        self.fail_next(key, *REFUSALS["capacity"]())

    def fail_quota(self, key: str = "instances.create") -> None:
        self.fail_next(key, *REFUSALS["quota"]())

    def rate_limit(self, key: str) -> None:
        self.fail_next(key, C.RESOURCE_EXHAUSTED, "too many requests", service_error(
            "TooManyRequests", too_many_requests=TooManyRequests(violation="rate limit exceeded")))

    def unavailable(self, key: str) -> None:
        self.fail_next(key, C.UNAVAILABLE, "service unavailable")

    def bad_auth(self, key: str) -> None:
        self.fail_next(key, C.UNAUTHENTICATED, "invalid or expired IAM token", service_error("Unauthenticated"))

    def permission_denied(self, key: str) -> None:
        self.fail_next(key, C.PERMISSION_DENIED, "permission denied", service_error("PermissionDenied"))

    def invalid(self, key: str) -> None:
        self.fail_next(key, C.INVALID_ARGUMENT, "spec: invalid", self._invalid("spec", "invalid").error)

    def live(self) -> List[Dict[str, Any]]:
        with self.lock:
            return [dict(id=i, name=r["name"], state=r["state"]) for i, r in self.instances.items()]

    def resources(self) -> set:
        with self.lock:
            return ({"instance:%s" % r["name"] for r in self.instances.values()}
                    | {"disk:%s" % r["disk"] for r in self.instances.values()}
                    | {"security-group:%s" % g["name"] for g in self.security_groups.values()}
                    | {"security-rule:%s" % r["name"] for r in self.rules.values()})

    def finish(self, instance_id: str) -> None:
        """Push an instance to the end of its current phase (running, or gone)."""
        with self.lock:
            record = self.instances.get(instance_id)
            if record is not None:
                record["_reads"] = self.boot_polls
                self._advance(record, tick=False)

    def guest_poweroff(self, instance_id: str) -> str:
        """A power-off from inside the running instance; returns the state it leaves (the recovery policy's)."""
        with self.lock:
            record = self.instances[instance_id]
            if record["state"] != "RUNNING":
                raise ValueError("%s is %s: only a running guest can power itself off" % (instance_id, record["state"]))
            if record["recovery_policy"] == "FAIL":
                record.update(state="STOPPED")
            else:   # RECOVER: Compute restarts the VM (on this host or another) and keeps charging for it
                record["reboots"] += 1
            return record["state"]

    def stop(self) -> None:
        for forwarder in list(self._forwarders.values()):
            forwarder.close()
        self.server.stop(0)
        self.sshd.stop_all()

    # -- lifecycle -----------------------------------------------------------------------
    def _advance(self, record: Dict[str, Any], tick: bool = True) -> None:
        done = self._tick(record, self.boot_polls) if tick else True
        if record["state"] == "CREATING" and done and record.get("fails"):
            state, status = record.pop("fails")
            record.update(state=state, _reads=0)
            self._finish(record["id"], "create instance", status)
        elif record["state"] == "CREATING" and done:
            keys = [key for _user, key in catalog.authorized_keys(record["user_data"])]
            host, port, _user = self.sshd.start(record["id"], keys)
            address = "127.0.0.%d" % self._next_address
            self._next_address += 1
            self._forwarders[record["id"]] = PortForwarder(address, self.ssh_port, (host, port))
            record.update(state="RUNNING", address=address, _reads=0)
            self._finish(record["id"], "create instance", RpcStatus(code=0))
        elif record["state"] == "DELETING" and done:
            self.instances.pop(record["id"], None)
            self._finish(record["id"], "create instance", RpcStatus(code=C.ABORTED.value[0], message="deleted"))
            self._finish(record["id"], "delete instance", RpcStatus(code=0))
            forwarder = self._forwarders.pop(record["id"], None)
            if forwarder:
                forwarder.close()
            self.sshd.stop(record["id"])

    def _instance(self, record: Dict[str, Any]) -> Instance:
        message = Instance(metadata=ResourceMetadata(id=record["id"], parent_id=self.project_id, name=record["name"],
                                                     labels=dict(record["labels"]), resource_version=record["version"]))
        message.spec = record["spec"]
        nic = NetworkInterfaceStatus(index=0, name="eth0", ip_address=IPAddressStatus(address="10.0.0.%d/32" % (len(record["id"]) % 200 + 2)))
        if record.get("address") and record["state"] == "RUNNING":
            nic.public_ip_address = PublicIPAddressStatus(address=record["address"] + "/32")
        message.status = InstanceStatus(state=getattr(InstanceStatus.InstanceState, record["state"]), network_interfaces=[nic])
        return message

    # -- compute ---------------------------------------------------------------------------
    def list_platforms(self, request: ListPlatformsRequest) -> ListPlatformsResponse:
        page, token = self._page([Platform(
            metadata=ResourceMetadata(id="computeplatform-" + name, name=name),
            spec=PlatformSpec(human_readable_name=p["human"], presets=[Preset(
                name=preset, resources=PresetResources(gpu_count=p["gpus"][preset], vcpu_count=int(
                    preset.split("vcpu")[0].split("-")[-1]), memory_gibibytes=int(preset.split("-")[-1][:-2])))
                for preset in p["presets"]]),
            status=PlatformStatus(allowed_for_preemptibles=p["spot"])) for name, p in self.platforms.items()], request)
        return ListPlatformsResponse(items=page, next_page_token=token)

    def _read(self, record: Optional[Dict[str, Any]], resource_id: str) -> Instance:
        if record is not None:
            self._advance(record)
        if record is None or record["id"] not in self.instances:
            raise self._not_found(resource_id)
        return self._instance(record)

    def get_instance(self, request: GetInstanceRequest) -> Instance:
        return self._read(self.instances.get(request.id), request.id)

    def get_instance_by_name(self, request: GetByNameRequest) -> Instance:
        self._project(request.parent_id)
        found = next((r for r in self.instances.values() if r["name"] == request.name), None)
        return self._read(found, request.name)

    def list_instances(self, request: ListInstancesRequest) -> ListInstancesResponse:
        self._project(request.parent_id)
        for record in list(self.instances.values()):
            self._advance(record)
        page, token = self._page([self._instance(r) for r in self.instances.values()], request)
        return ListInstancesResponse(items=page, next_page_token=token)

    def _page(self, items: List[Any], request: Any) -> Tuple[List[Any], str]:
        """One page of a List (``page_size``, else the server's; ``page_token`` is an offset) and the next token."""
        try:
            start = int(request.page_token or 0)
        except ValueError:
            raise self._invalid("page_token", "not a token this list gave") from None
        size = int(request.page_size or 0) or self.page_size or len(items) or 1
        if self.ignore_paging:
            return items[:size], str(size)
        return items[start:start + size], (str(start + size) if start + size < len(items) else "")

    def _gpus_in_use(self) -> int:
        return sum(r["gpus"] for r in self.instances.values())

    def create_instance(self, request: CreateInstanceRequest) -> Operation:
        meta, spec = request.metadata, request.spec
        self._project(meta.parent_id)
        if not meta.name:
            raise self._invalid("metadata.name", "must be set")
        if any(r["name"] == meta.name for r in self.instances.values()):
            raise _Abort(C.ALREADY_EXISTS, "instance %s already exists" % meta.name, service_error("AlreadyExists"))
        platform = self.platforms.get(spec.resources.platform)
        if platform is None:
            raise self._invalid("spec.resources.platform", "unknown platform %r" % spec.resources.platform)
        if spec.resources.preset not in platform["presets"]:
            raise self._invalid("spec.resources.preset", "unknown preset %r" % spec.resources.preset)
        disk = spec.boot_disk.managed_disk
        if disk is None or not disk.name or not disk.spec.size_gibibytes:
            raise self._invalid("spec.boot_disk", "a boot disk (managed_disk with a name and a size) is required")
        if len(spec.network_interfaces) != 1 or spec.network_interfaces[0].subnet_id not in self.subnets:
            raise self._invalid("spec.network_interfaces", "exactly one interface on a subnet of the project")
        for group in spec.network_interfaces[0].security_groups:
            if group.id not in self.security_groups:
                raise self._invalid("spec.network_interfaces.security_groups", "unknown group %s" % group.id)
        if len(spec.cloud_init_user_data) > 32768:   # string {max_len: 32768} in instance.proto
            raise self._invalid("spec.cloud_init_user_data", "value length must be at most 32768 characters")
        if spec.recovery_policy.name == "ALWAYS" and not spec.nvl_instance_group_id:
            raise self._invalid("spec.recovery_policy", "ALWAYS is available only for instances in an nvlinstancegroup")
        if spec.HasField("preemptible") and not platform["spot"]:
            raise self._invalid("spec.preemptible", "platform %s takes no preemptible VMs" % spec.resources.platform)
        gpus = platform["gpus"][spec.resources.preset]
        if self._gpus_in_use() + gpus > self.quota_gpus:
            raise _Abort(*REFUSALS["quota"](str(self.quota_gpus), str(self._gpus_in_use() + gpus)))
        instance_id = "computeinstance-e00" + uuid.uuid4().hex[:16]
        self.instances[instance_id] = dict(
            id=instance_id, name=meta.name, labels=dict(meta.labels), spec=spec, state="CREATING", gpus=gpus,
            disk=disk.name, groups=[g.id for g in spec.network_interfaces[0].security_groups],
            user_data=spec.cloud_init_user_data or "", version=1, recovery_policy=spec.recovery_policy.name, reboots=0)
        self.instances[instance_id]["fails"] = self._failing_creates.pop(0) if self._failing_creates else None
        return self._operation(instance_id, "create instance", request, done=False)

    @staticmethod
    def _without_disk_labels(spec: Any) -> bytes:
        copy = InstanceSpec.FromString(spec.SerializeToString())
        copy.boot_disk.managed_disk.labels.clear()
        return copy.SerializeToString(deterministic=True)

    def update_instance(self, request: UpdateInstanceRequest) -> Operation:
        """The reset-mask update of nebius/api's README, labels only (see the module's docstring)."""
        meta = request.metadata
        mask = Mask.unmarshal(self._call_headers.get("x-resetmask") or "")
        record = self.instances.get(meta.id)
        if not meta.parent_id:
            raise self._invalid("metadata.parent_id", "value is required")
        if record is None or record["state"] == "DELETING":
            raise self._not_found(meta.id)
        if meta.resource_version not in (0, record["version"]):
            raise _Abort(C.ABORTED, "resource version mismatch: %s is at %d, the update names %d" % (meta.id, record["version"], meta.resource_version),
                         service_error("Aborted"))
        if meta.parent_id != self.project_id:
            raise self._invalid("metadata.parent_id", "cannot change")
        reset = mask.field_parts.get("metadata") or Mask()
        if mask.any is not None or reset.any is not None or (meta.name and meta.name != record["name"]) or (
                not meta.name and "name" in reset.field_parts):
            raise self._invalid("metadata.name", "this fake updates labels only (the name would change)")
        labels = dict(meta.labels) if meta.labels else ({} if "labels" in reset.field_parts else record["labels"])
        spec = record["spec"]
        if request.HasField("spec"):
            # a whole spec (the SDK's full update): the same but for the managed boot disk's labels
            if self._without_disk_labels(request.spec) != self._without_disk_labels(record["spec"]):
                raise self._invalid("spec", "this fake updates labels only")
            spec = request.spec
        elif not (mask.field_parts.get("spec") or Mask()).is_empty():
            raise self._invalid("spec", "the reset mask names fields of a spec the request leaves out: they would be reset")
        record.update(labels=labels, spec=spec, version=record["version"] + 1)
        return self._operation(meta.id, "update instance")

    def delete_instance(self, request: DeleteInstanceRequest) -> Operation:
        record = self.instances.get(request.id)
        if record is None:
            raise self._not_found(request.id)
        if record["state"] != "DELETING":
            record.update(state="DELETING", _reads=0)
        return self._operation(request.id, "delete instance", request, done=False)

    def list_operations(self, request: ListOperationsRequest) -> ListOperationsResponse:
        """The operations of one resource (``resource_id`` required; ``page_size`` 1..1000 when given), newest first."""
        if not request.resource_id:
            raise self._invalid("resource_id", "value is required")
        if request.page_size and not 1 <= request.page_size <= 1000:   # "Page size. [1...1000]. Optional"
            raise self._invalid("page_size", "must be in [1, 1000]")
        mine = [o for o in self.operations.values() if o.resource_id == request.resource_id]
        page, token = self._page(sorted(mine, key=lambda o: o.created_at, reverse=True), request)
        return ListOperationsResponse(operations=page, next_page_token=token)

    # -- vpc -------------------------------------------------------------------------------
    def list_subnets(self, request: ListSubnetsRequest) -> ListSubnetsResponse:
        self._project(request.parent_id)
        return ListSubnetsResponse(items=[Subnet(metadata=ResourceMetadata(id=s, parent_id=self.project_id, name="default-subnet"),
                                                 spec=SubnetSpec(network_id=n)) for s, n in self.subnets.items()])

    def _group(self, record: Dict[str, Any]) -> SecurityGroup:
        group = SecurityGroup(metadata=ResourceMetadata(id=record["id"], parent_id=self.project_id, name=record["name"],
                                                        labels=dict(record["labels"])))
        group.spec.network_id = record["network_id"]
        return group

    def list_groups(self, request: ListSecurityGroupsRequest) -> ListSecurityGroupsResponse:
        self._project(request.parent_id)
        page, token = self._page([self._group(g) for g in self.security_groups.values()], request)
        return ListSecurityGroupsResponse(items=page, next_page_token=token)

    def get_group(self, request: GetSecurityGroupRequest) -> SecurityGroup:
        if request.id not in self.security_groups:
            raise self._not_found(request.id)
        return self._group(self.security_groups[request.id])

    def get_group_by_name(self, request: GetSecurityGroupByNameRequest) -> SecurityGroup:
        self._project(request.parent_id)
        found = next((g for g in self.security_groups.values() if g["name"] == request.name), None)
        if found is None:
            raise self._not_found(request.name)
        return self._group(found)

    def create_group(self, request: CreateSecurityGroupRequest) -> Operation:
        self._project(request.metadata.parent_id)
        if any(g["name"] == request.metadata.name for g in self.security_groups.values()):
            raise _Abort(C.ALREADY_EXISTS, "security group %s already exists" % request.metadata.name, service_error("AlreadyExists"))
        if request.spec.network_id not in self.subnets.values():
            raise self._invalid("spec.network_id", "unknown network %r" % request.spec.network_id)
        group_id = "vpcsecuritygroup-e00" + uuid.uuid4().hex[:16]
        self.security_groups[group_id] = dict(id=group_id, name=request.metadata.name, labels=dict(request.metadata.labels),
                                              network_id=request.spec.network_id)
        return self._operation(group_id, "create security group")

    def delete_group(self, request: DeleteSecurityGroupRequest) -> Operation:
        if request.id not in self.security_groups:
            raise self._not_found(request.id)
        users = sorted(r["id"] for r in self.instances.values() if request.id in r["groups"])
        if users:
            raise _Abort(C.FAILED_PRECONDITION, "security group is in use", service_error("BadResourceState", bad_resource_state=BadResourceState(
                resource_id=request.id, message="used by %s" % ", ".join(users))))
        self.security_groups.pop(request.id)
        for rule_id in [i for i, r in self.rules.items() if r["group"] == request.id]:
            self.rules.pop(rule_id)
        return self._operation(request.id, "delete security group")

    def list_rules(self, request: ListSecurityRulesRequest) -> ListSecurityRulesResponse:
        if request.parent_id not in self.security_groups:
            raise self._not_found(request.parent_id)
        return ListSecurityRulesResponse(items=[SecurityRule(
            metadata=ResourceMetadata(id=i, parent_id=r["group"], name=r["name"], labels=dict(r["labels"])),
            spec=r["spec"]) for i, r in self.rules.items() if r["group"] == request.parent_id])

    def create_rule(self, request: CreateSecurityRuleRequest) -> Operation:
        group = request.metadata.parent_id
        if group not in self.security_groups:
            raise self._invalid("metadata.parent_id", "unknown security group %r" % group)
        spec = request.spec
        if spec.access.name != "ALLOW" and spec.access.name != "DENY":
            raise self._invalid("spec.access", "required")
        ingress = spec.ingress
        if ingress is not None and (len(ingress.source_cidrs) > 8 or len(ingress.destination_ports) > 8):
            raise self._invalid("spec.ingress", "at most 8 CIDRs and 8 ports")
        for index, cidr in enumerate(ingress.source_cidrs if ingress is not None else []):
            try:   # "Must be a valid IPv4" CIDR, a prefix without host bits (isIpPrefix(true))
                ipaddress.IPv4Network(cidr, strict=True)
            except ValueError:
                raise self._invalid("spec.ingress.source_cidrs[%d]" % index, "value must be a valid CIDR") from None
        if any(r["group"] == group and r["name"] == request.metadata.name for r in self.rules.values()):
            raise _Abort(C.ALREADY_EXISTS, "rule %s already exists" % request.metadata.name, service_error("AlreadyExists"))
        rule_id = "vpcsecurityrule-e00" + uuid.uuid4().hex[:16]
        self.rules[rule_id] = dict(group=group, name=request.metadata.name, labels=dict(request.metadata.labels), spec=spec)
        return self._operation(rule_id, "create security rule")

    def delete_rule(self, request: DeleteSecurityRuleRequest) -> Operation:
        if self.rules.pop(request.id, None) is None:
            raise self._not_found(request.id)
        return self._operation(request.id, "delete security rule")

    # -- billing ---------------------------------------------------------------------------
    def estimate_batch(self, request: EstimateBatchRequest) -> EstimateBatchResponse:
        costs = []
        for index, resource in enumerate(request.resource_specs):
            if resource.spec.type_url != "type.googleapis.com/nebius.compute.v1.CreateInstanceRequest":
                raise self._invalid("resource_specs[%d].spec" % index, "unsupported %s" % resource.spec.type_url)
            create = CreateInstanceRequest.FromString(resource.spec.value)
            platform = self.platforms.get(create.spec.resources.platform)
            if platform is None or create.spec.resources.preset not in platform["presets"]:
                raise self._invalid("resource_specs[%d]" % index, "unknown platform or preset")
            gpus = platform["gpus"][create.spec.resources.preset]
            hourly = platform["price"] * max(gpus, 1) * (0.5 if create.spec.HasField("preemptible") else 1.0)
            costs.append(ResourceCost(aggregation_unit=AggregationUnit(unit="hour", unit_type=AggregationUnit.UnitType.UNIT_TYPE_TIME_BASED),
                                      general=GeneralResourceCost(total=CostBreakdown(cost="%.4f" % hourly, cost_rounded="%.2f" % hourly))))
        return EstimateBatchResponse(resource_costs=costs, currency=request.currency or "usd")

    # -- tenant and capacity advisor ------------------------------------------------------------
    def get_project(self, request: GetProjectRequest) -> Project:
        if request.id != self.project_id:
            raise _Abort(C.PERMISSION_DENIED, "permission denied on " + request.id, service_error("PermissionDenied"))
        return Project(metadata=ResourceMetadata(id=self.project_id, parent_id=self.tenant_id, name="default"))

    def list_advice(self, request: ListResourceAdviceRequest) -> ListResourceAdviceResponse:
        if not request.parent_id:
            raise self._invalid("parent_id", "value is required")
        if request.parent_id != self.tenant_id:
            raise _Abort(C.PERMISSION_DENIED, "permission denied on " + request.parent_id, service_error("PermissionDenied"))
        avail, items = ResourceAdviceStatus.Availability, []
        for name, preset in [(name, preset) for name, p in self.platforms.items() for preset in p["presets"]]:
            level = self.capacity.get((name, preset), "HIGH")
            state = avail(data_state=avail.DataState.DATA_STATE_FRESH, limit=self.quota_gpus,
                          available=0 if level == "LIMIT_REACHED" else self.quota_gpus,
                          availability_level=getattr(avail.AvailabilityLevel, "AVAILABILITY_LEVEL_" + level))
            items.append(ResourceAdvice(metadata=ResourceMetadata(parent_id=self.tenant_id), spec=ResourceAdviceSpec(
                region=self.region, fabric=self.region + "-a", compute_instance=ComputeInstanceDetails(
                    platform=name, preset=ComputeInstanceDetails.Preset(name=preset))),
                status=ResourceAdviceStatus(on_demand=state, preemptible=state)))
        page, token = self._page(items, request)
        return ListResourceAdviceResponse(items=page, next_page_token=token)
