# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""GCP Compute Engine adapter (google-cloud-compute, REST transport).

Options: ``cloud_options.gcp``, declared in providers/cloud_options/gcp.py. The
project and the service-account key also come from the environment AWX's GCE
credential sets (GCP_PROJECT / GCE_PROJECT, GCP_SERVICE_ACCOUNT_FILE /
GCE_CREDENTIALS_FILE_PATH). Without a key file: Application Default Credentials, or
anonymous credentials when ``api_endpoint`` points at a fake.

What a call may hold (the contract's "No waiting", base.Provider): every read passes
``retry=self.read_retry``, the SDK's retries on 503/504 bounded by ``read_retry_s``
(default 20 s, at most base.SDK_READ_RETRY_S; the SDK's own default, 600 s, would hide a
long wait from the core, which owns retries, budgets and cancellation); every mutation
passes ``retry=SENT_ONCE`` (none). create and prepare each make at most one server-side
wait, for the Operation of their insert or patch (``_finish``): GCP reports a stock-out
or a quota only there.

Identity: instances and their boot disks carry the labels ``gpuprov-vm-name`` and,
when the adapter works for a journal, ``gpuprov-journal-id`` (GCP label values are
at most 63 lowercase letters, digits, '-' and '_'; a journal id that is not one is an
InvalidRequest before any call). Firewall rules have no labels: the rule of a journal
is named ``gpuprov-<vm>-j<8 hex of sha256(journal id)>`` (rules are global, so two
controllers' rules for one VM name must differ by name) and its description ends
with ``(gpuprov-vm-name=<vm>, gpuprov-journal-id=<id>)``. Rules made before journal
ids are named ``gpuprov-<vm>`` and describe no journal id. ``observe`` reports the
journal id label (None when absent); ``cleanup`` deletes the journal's own rule and
the pre-journal one unless its description names another journal.

With ``gpu`` unset the adapter plans ``e2-standard-2`` (2 vCPU, 8 GB) in the
default zones. Each Offer is one zone; ``detail`` carries the machine type, the
accelerator type and whether the GPUs are attached (N1) or built in.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Dict, List, Optional

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    GPUPROV_TAG_PREFIX, JOURNAL_ID_TAG, VM_NAME_TAG, BlockScope, Capabilities, ErrorKind, InstanceSpec, K3sAccess,
    Location, Observed, Offer, Owned, PowerOffBilling, ProviderError, ResourceRequest, SshEndpoint, Status, tag_changes,
    validate_vm_name,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.cloud_options.gcp import CREDENTIALS, OPTIONS
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.common import (
    check_regions, cidr_list, require_sdk, tcp_ports,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.options import TypedOptionsProvider
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.gpus import canonical_gpu
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.gcp.pages import all_pages
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.gcp import catalog
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.gcp.errors import (
    classify_exception, classify_operation,
)

try:
    import google.auth
    from google.api_core import exceptions as gexc
    from google.api_core import retry as gretry
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import compute_v1
    from google.oauth2 import service_account
    HAS_GCP = True
    GCP_IMPORT_ERROR = None
except ImportError as _exc:  # ansible-test sanity imports module_utils without SDKs
    HAS_GCP = False
    GCP_IMPORT_ERROR = _exc

SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]
K3S_DIRECT_PORTS = (6443, 80, 443)
# google-api-core's ``retry`` for a request sent once: None turns the SDK's retries off (it has none for
# mutations today; None keeps it so, whatever its defaults become).
SENT_ONCE = None

STATUS_MAP = {
    "PROVISIONING": Status.PENDING, "STAGING": Status.PENDING, "REPAIRING": Status.PENDING,
    "RUNNING": Status.RUNNING,
    "STOPPING": Status.STOPPING, "SUSPENDING": Status.STOPPING,
    "TERMINATED": Status.STOPPED, "SUSPENDED": Status.STOPPED,
}

_CLIENTS = {
    "instances": "InstancesClient", "firewalls": "FirewallsClient", "images": "ImagesClient",
    "zone_operations": "ZoneOperationsClient", "global_operations": "GlobalOperationsClient",
    "machine_types": "MachineTypesClient", "disks": "DisksClient", "accelerator_types": "AcceleratorTypesClient",
}


def _adc_here() -> bool:
    """Application Default Credentials this machine holds without a call: the file gcloud writes
    (under CLOUDSDK_CONFIG when set), or a GCE VM (its DMI says so), whose metadata server answers."""
    if not HAS_GCP:
        return False
    try:
        from google.auth import _cloud_sdk, _metadata  # pylint: disable=import-outside-toplevel
        return (os.path.exists(_cloud_sdk.get_application_default_credentials_path())
                or bool(_metadata.detect_gce_residency_linux()))
    except (ImportError, AttributeError, OSError):
        return False


def _http_status(exc: BaseException) -> Optional[int]:
    code = getattr(exc, "code", None)
    return code if isinstance(code, int) and "GoogleAPICallError" in {
        c.__name__ for c in type(exc).__mro__} else None


def _metadata_user(instance) -> Optional[str]:
    """The user of the first ``ssh-keys`` metadata entry (``user:key``), as create wrote it."""
    for item in instance.metadata.items:
        if item.key == "ssh-keys" and ":" in item.value:
            return item.value.split(":", 1)[0].strip() or None
    return None


class GcpProvider(TypedOptionsProvider):
    name = "gcp"
    option_spec = OPTIONS

    def __init__(self, options: Optional[Dict[str, Any]] = None, journal_id: Optional[str] = None):
        super().__init__(options, journal_id=journal_id)
        require_sdk(self.name, HAS_GCP, "google-cloud-compute", GCP_IMPORT_ERROR)
        # Without one, every call is refused before it is made (check_credentials names the option).
        self.project = (self.options["project"] or "").strip()
        self.k3s_direct = self.options["k3s_direct"]
        self.network = self.options["network"] or "default"
        self.op_timeout = self.options["operation_timeout_s"]
        self.timeout = self.options["request_timeout_s"]
        self.boot_via = self.options["boot_script_via"]
        read_retry_s = self.options["read_retry_s"]
        self.read_retry = gretry.Retry(
            initial=0.2, maximum=5.0, multiplier=2.0, timeout=read_retry_s,
            predicate=gretry.if_exception_type(gexc.ServiceUnavailable, gexc.DeadlineExceeded),
        ) if read_retry_s > 0 else None
        self._credentials = None
        self._clients: Dict[str, Any] = {}

    def check_credentials(self) -> None:
        """The project, and credentials: a key file, Application Default Credentials this machine holds
        (GOOGLE_APPLICATION_CREDENTIALS, gcloud's ADC file), a GCE VM's metadata server, or anonymous ones
        with api_endpoint. Local only: the metadata server is not asked."""
        problem = CREDENTIALS.missing(self.options, elsewhere=bool(self.options.get("api_endpoint")) or _adc_here())
        if problem:
            raise ProviderError(ErrorKind.CREDENTIALS, problem, BlockScope.CLOUD)

    # -- plumbing -------------------------------------------------------------------

    def _creds(self):
        if self._credentials is None:
            path = self.options.get("credentials_file")
            try:
                if path:
                    self._credentials = service_account.Credentials.from_service_account_file(
                        path, scopes=SCOPES)
                elif self.options.get("api_endpoint"):
                    self._credentials = AnonymousCredentials()
                else:
                    self._credentials, _project = google.auth.default(scopes=SCOPES)
            except (OSError, ValueError) as exc:
                raise ProviderError(ErrorKind.CREDENTIALS, "credentials_file: cannot load %r: %s" % (path, exc)) from exc
            except Exception as exc:  # DefaultCredentialsError and friends
                raise ProviderError(ErrorKind.CREDENTIALS, "%s (%s)" % (CREDENTIALS.message(), type(exc).__name__),
                                    BlockScope.CLOUD) from exc
        return self._credentials

    def _client(self, kind: str):
        if kind not in self._clients:
            self.check_credentials()
            endpoint = self.options.get("api_endpoint")
            client_options = {"api_endpoint": endpoint} if endpoint else None
            cls = getattr(compute_v1, _CLIENTS[kind])
            self._clients[kind] = cls(credentials=self._creds(), client_options=client_options,
                                      transport="rest")
        return self._clients[kind]

    def _call(self, where: str, fn, *args, **kwargs):
        """One API call (or one pager's pages, when ``fn`` returns a pager: :func:`_pages`) ->
        result, every failure classified. 404s raise too; callers that accept one catch it first."""
        try:
            result = fn(*args, **kwargs)
            if hasattr(result, "pages"):
                result = all_pages(result, "gcp %s" % where)
            return result
        except ProviderError:
            raise
        except Exception as exc:
            raise classify_exception(exc, "gcp %s" % where) from exc

    def _call_or_none(self, where: str, fn, *args, **kwargs):
        """Like _call, but a 404 returns None (get-if-exists, idempotent delete)."""
        try:
            return self._call(where, fn, *args, **kwargs)
        except ProviderError as err:
            if _http_status(err.__cause__) == 404:
                return None
            raise

    def _finish(self, op, where: str, zone: Optional[str] = None):
        """The one server-side wait a primitive may make: a single zoneOperations/globalOperations.wait
        request (the server holds it until DONE or about two minutes; ``operation_timeout_s`` on the
        client), never repeated; then classify the operation's errors."""
        done = compute_v1.Operation.Status.DONE
        if op.status != done:
            if zone:
                op = self._call(where + " wait", self._client("zone_operations").wait, project=self.project,
                                zone=zone, operation=op.name, timeout=self.op_timeout, retry=SENT_ONCE)
            else:
                op = self._call(where + " wait", self._client("global_operations").wait,
                                project=self.project, operation=op.name, timeout=self.op_timeout, retry=SENT_ONCE)
        if op.status != done:
            # The core retries; create observes first and adopts the instance if it appears.
            raise ProviderError(ErrorKind.TRANSIENT, "gcp %s: operation %s still %s after the wait"
                                % (where, op.name, getattr(compute_v1.Operation.Status(op.status), "name", op.status)))
        error = classify_operation(op, "gcp %s" % where)
        if error is not None:
            raise error
        return op

    # -- contract -------------------------------------------------------------------

    def capabilities(self) -> Capabilities:
        return Capabilities(kubernetes=True, boot_script=True, spot=True,
                            k3s_access=K3sAccess.DIRECT if self.k3s_direct else K3sAccess.SSH_TUNNEL,
                            boot_timeout_s=self.options["boot_timeout_s"],
                            poll_interval_s=self.options["poll_interval_s"],
                            # A shutdown from the guest stops the instance (TERMINATED): no VM or GPU charges, its
                            # disks and static IPs bill on. No create field makes a guest shutdown delete it
                            # (Scheduling's instanceTerminationAction acts on preemption and maxRunDuration only).
                            poweroff_billing=PowerOffBilling.ENDS_COMPUTE,
                            poweroff_source="google-cloud-compute InstancesClient.stop: stopped instances do not incur "
                                            "VM usage charges, persistent disks and static IPs do; "
                                            "https://cloud.google.com/compute/docs/instances/instance-life-cycle "
                                            "(a guest shutdown ends TERMINATED)")

    def _zone_filter(self, request: ResourceRequest):
        """(ordered regions or None, ordered zones or None) limiting the search."""
        zones = [z for z in self.options["zones"] or [] if z]
        regions = [r for r in request.regions or self.options["regions"] or [] if r]
        if not regions and not zones:
            regions = list(catalog.DEFAULT_REGIONS)
        return regions or None, zones or None

    def _zones_listing(self, kind: str, names, scopes: Optional[set] = None) -> Dict[str, set]:
        """name -> zones listing it, from one aggregatedList (all pages) filtered by name; every zone
        the answer has a scope for (those without such a type too) is added to ``scopes``."""
        pattern = "|".join(sorted(names))
        if kind == "machine_types":
            request = compute_v1.AggregatedListMachineTypesRequest(
                project=self.project, filter='name eq "%s"' % pattern)
            attr = "machine_types"
        else:
            request = compute_v1.AggregatedListAcceleratorTypesRequest(
                project=self.project, filter='name eq "%s"' % pattern)
            attr = "accelerator_types"
        pairs = self._call(kind + ".aggregatedList", self._client(kind).aggregated_list,
                           request=request, timeout=self.timeout, retry=self.read_retry)
        found: Dict[str, set] = {}
        for scope, scoped in pairs:
            zone = scope.split("/", 1)[1] if scope.startswith("zones/") else scope
            if scopes is not None and scope.startswith("zones/"):
                scopes.add(zone)
            for item in getattr(scoped, attr):
                if item.name in names and item.deprecated.state not in ("DELETED", "OBSOLETE"):
                    found.setdefault(item.name, set()).add(zone)
        return found

    def plan(self, request: ResourceRequest) -> List[Offer]:
        gpu = canonical_gpu(request.gpu)
        spot = bool(request.spot)
        rungs = catalog.select_rungs(gpu, request.gpu_count if gpu else 0, spot)
        # The regions GCP has: those of every zone the aggregated list has a scope for (it lists each zone
        # of the project's reach, with a "no results" warning where no type matched).
        seen: set = set()
        by_type = self._zones_listing("machine_types", {r.machine_type for r in rungs}, seen)
        asked = check_regions("gcp", request.regions, {catalog.region_of(z) for z in seen},
                              first=catalog.DEFAULT_REGIONS)
        regions, zones = self._zone_filter(dataclasses.replace(request, regions=asked))
        attached = {r.accelerator for r in rungs if r.attached}
        by_accel = self._zones_listing("accelerator_types", attached) if attached else {}
        offers = []
        for rung in rungs:
            where = set(by_type.get(rung.machine_type, ()))
            if rung.attached:
                where &= by_accel.get(rung.accelerator, set())
            if zones:
                where &= set(zones)
            if regions:
                ordered = [z for region in regions for z in sorted(where) if catalog.region_of(z) == region]
            else:
                ordered = [z for z in zones if z in where]
            for zone in ordered:
                offers.append(Offer(
                    cloud=self.name, region=catalog.region_of(zone), zone=zone,
                    instance_type=rung.machine_type, gpu=rung.gpu, gpu_count=rung.count,
                    price_per_hour=None if spot else rung.price, spot=spot,
                    detail={"machine_type": rung.machine_type, "accelerator": rung.accelerator,
                            "accelerator_count": rung.count, "attached": rung.attached,
                            "disk_type": rung.disk, "nic_type": rung.nic}))
        return offers

    def _cidrs(self, spec: InstanceSpec) -> List[str]:
        raw = list(spec.allowed_cidrs or []) or self.options["allowed_cidrs"]
        if not raw:
            raise ProviderError(ErrorKind.INVALID_REQUEST,
                                "allowed_cidrs: name the addresses allowed to reach the VM (e.g. the "
                                "controller's public /32); gcp never opens 0.0.0.0/0 by default")
        return cidr_list(raw)

    def _ssh_user(self, spec: InstanceSpec) -> str:
        return spec.ssh_user or self.options.get("ssh_user") or "gpuprov"

    def _image_family(self, offer: Offer):
        """(project, family) of the boot image; InvalidRequest if its driver cannot run the GPU."""
        default = catalog.gpu_image(offer.gpu) if offer.gpu else catalog.CPU_IMAGE
        project = self.options.get("image_project") or default[0]
        family = self.options.get("image_family") or default[1]
        if offer.gpu:
            catalog.check_driver(offer.gpu, family)
        return project, family

    def _image(self, offer: Offer) -> Dict[str, str]:
        project, family = self._image_family(offer)
        image = self._call_or_none("images.getFromFamily", self._client("images").get_from_family,
                                   project=project, family=family, timeout=self.timeout, retry=self.read_retry)
        if image is None:
            raise ProviderError(ErrorKind.INVALID_REQUEST, "image_family: no image family %r in project %r"
                                % (family, project))
        return {"image": image.self_link, "image_project": project, "image_family": family}

    def prepare(self, offer: Offer, spec: InstanceSpec) -> Dict[str, Any]:
        vm = validate_vm_name(spec.vm_name)
        cidrs = self._cidrs(spec)
        self._image_family(offer)  # a driver that cannot run the GPU fails before any call
        self._resource_labels(spec)  # so does a user tag that cannot be a GCP label
        ports = tcp_ports(spec.open_ports, K3S_DIRECT_PORTS if self.k3s_direct else ())
        labels = self._labels(vm)
        rule = catalog.firewall_name(vm, self.journal_id)
        desired = compute_v1.Firewall(
            name=rule, network="global/networks/%s" % self.network, direction="INGRESS", priority=1000,
            description="gpuprov: SSH%s for VM %s %s" % (
                " and k3s" if self.k3s_direct else "", vm, catalog.describe_identity(labels)),
            allowed=[compute_v1.Allowed(I_p_protocol="tcp", ports=[str(p) for p in ports])],
            source_ranges=cidrs, target_tags=[rule])
        firewalls = self._client("firewalls")
        found = self._call_or_none("firewalls.get", firewalls.get, project=self.project, firewall=rule,
                                   timeout=self.timeout, retry=self.read_retry)
        if found is None:
            try:
                op = self._call("firewalls.insert", firewalls.insert_unary, project=self.project,
                                firewall_resource=desired, timeout=self.timeout, retry=SENT_ONCE)
                self._finish(op, "firewalls.insert")
            except ProviderError as err:
                if _http_status(err.__cause__) != 409:  # 409: a concurrent prepare made it
                    raise
        elif (sorted(found.source_ranges) != cidrs or list(found.target_tags) != [rule]
              or found.description != desired.description
              or sorted(p for a in found.allowed for p in a.ports) != sorted(str(p) for p in ports)):
            op = self._call("firewalls.patch", firewalls.patch_unary, project=self.project, firewall=rule,
                            firewall_resource=desired, timeout=self.timeout, retry=SENT_ONCE)
            self._finish(op, "firewalls.patch")
        prepared = {"firewall": rule, "network_tag": rule, "network": self.network,
                    "source_ranges": cidrs, "ports": ports, "ssh_user": self._ssh_user(spec)}
        prepared.update(self._image(offer))
        return prepared

    def _instance(self, offer: Offer, prepared: Dict[str, Any], spec: InstanceSpec, name: str):
        zone = offer.zone
        detail = offer.detail or {}
        machine_type = detail.get("machine_type") or offer.instance_type
        rung = catalog.rung_of(machine_type)  # for offers journalled before they carried disk and NIC types
        disk_type = detail.get("disk_type") or (rung.disk if rung else "pd-balanced")
        nic_type = detail.get("nic_type") or (rung.nic if rung else None)
        gpu = bool(offer.gpu)
        spot = bool(spec.spot or offer.spot)
        user = prepared.get("ssh_user") or self._ssh_user(spec)
        items = [compute_v1.Items(key="ssh-keys", value="%s:%s" % (user, spec.ssh_public_key.strip()))]
        if spec.boot_script is not None:
            key = "user-data" if self.boot_via == "cloud-init" else "startup-script"
            items.append(compute_v1.Items(key=key, value=spec.boot_script.to_shell()))
        catalog.check_metadata({item.key: item.value for item in items})
        scheduling = compute_v1.Scheduling()
        if gpu or spot:  # GPUs cannot live-migrate; Spot VMs must terminate on maintenance
            scheduling.on_host_maintenance = "TERMINATE"
            scheduling.automatic_restart = not spot
        if spot:
            scheduling.provisioning_model = "SPOT"
            scheduling.instance_termination_action = "DELETE"
            scheduling.automatic_restart = False
        labels = self._resource_labels(spec)
        disk = compute_v1.AttachedDisk(
            boot=True, auto_delete=True, initialize_params=compute_v1.AttachedDiskInitializeParams(
                source_image=prepared["image"], labels=labels,
                disk_size_gb=self.options["disk_size_gb"],
                disk_type="zones/%s/diskTypes/%s" % (zone, disk_type)))
        nic = compute_v1.NetworkInterface(
            network="global/networks/%s" % prepared.get("network", self.network),
            access_configs=[compute_v1.AccessConfig(name="External NAT", type_="ONE_TO_ONE_NAT")])
        if nic_type:
            nic.nic_type = nic_type
        instance = compute_v1.Instance(
            name=name, machine_type="zones/%s/machineTypes/%s" % (zone, machine_type), labels=labels,
            tags=compute_v1.Tags(items=[prepared["network_tag"]]), disks=[disk], network_interfaces=[nic],
            metadata=compute_v1.Metadata(items=items), scheduling=scheduling)
        if detail.get("attached") and detail.get("accelerator"):
            instance.guest_accelerators = [compute_v1.AcceleratorConfig(
                accelerator_type="projects/%s/zones/%s/acceleratorTypes/%s" % (
                    self.project, zone, detail["accelerator"]),
                accelerator_count=int(detail.get("accelerator_count") or offer.gpu_count))]
        return instance

    def create(self, offer: Offer, prepared: Dict[str, Any], spec: InstanceSpec) -> str:
        vm = validate_vm_name(spec.vm_name)
        if not offer.zone:
            raise ProviderError(ErrorKind.INVALID_REQUEST, "offer: gcp offers name a zone; got %s" % offer.offer_id)
        name = catalog.instance_name(vm)
        instances = self._client("instances")
        try:
            op = self._call("instances.insert", instances.insert_unary, project=self.project, zone=offer.zone,
                            instance_resource=self._instance(offer, prepared, spec, name), timeout=self.timeout,
                            retry=SENT_ONCE)
        except ProviderError as err:
            if _http_status(err.__cause__) != 409:
                raise
            # The name exists in this zone: ours (a re-run after a lost reply), another
            # controller's (same VM name, another journal id) or a stranger's.
            found = self._call_or_none("instances.get", instances.get, project=self.project, zone=offer.zone,
                                       instance=name, timeout=self.timeout, retry=self.read_retry)
            if found is None or found.labels.get(VM_NAME_TAG) != vm:
                raise ProviderError(ErrorKind.FAILED, "gcp instances.insert: an instance named %r without label "
                                    "%s=%s already exists in %s" % (name, VM_NAME_TAG, vm, offer.zone)) from err
            made_by = found.labels.get(JOURNAL_ID_TAG) or None
            if made_by is not None and made_by != self.journal_id:
                raise ProviderError(ErrorKind.INVALID_REQUEST, "%s exists on gcp in %s, made by another controller "
                                    "(journal %s)" % (vm, offer.zone, made_by)) from err
            if STATUS_MAP.get(found.status) in (Status.STOPPING, Status.STOPPED):
                # A leftover the core has just deleted (or stopped): not an instance to hand back
                # as this create's; the name is free again once it is gone.
                raise ProviderError(ErrorKind.TRANSIENT, "gcp instances.insert: %s in %s is %s; the name is "
                                    "free once it is gone" % (name, offer.zone, found.status)) from err
            return name  # ours, or made before journal ids (adoptable by name)
        self._finish(op, "instances.insert", zone=offer.zone)
        return name

    def observe(self, location: Location, vm_name: str) -> List[Observed]:
        vm = validate_vm_name(vm_name)
        if not location.zone:
            raise ProviderError(ErrorKind.INVALID_REQUEST, "location: gcp locations name a zone; got %s" % location)
        request = compute_v1.ListInstancesRequest(project=self.project, zone=location.zone,
                                                  filter='labels.%s = "%s"' % (VM_NAME_TAG, vm))
        found = self._call("instances.list", self._client("instances").list, request=request,
                           timeout=self.timeout, retry=self.read_retry)
        at = Location(self.name, catalog.region_of(location.zone), location.zone)
        out = []
        for inst in found:
            if inst.labels.get(VM_NAME_TAG) != vm:
                continue
            status = STATUS_MAP.get(inst.status, Status.PENDING)
            nat = next((ac.nat_i_p for nic in inst.network_interfaces for ac in nic.access_configs
                        if ac.nat_i_p), None)
            user = _metadata_user(inst) or self.options.get("ssh_user") or "gpuprov"
            out.append(Observed(
                instance_id=inst.name, status=status,
                reason=("GCP status %s%s" % (inst.status, ": " + inst.status_message if inst.status_message else ""))
                if inst.status != "RUNNING" else None,
                endpoint=SshEndpoint(host=nat, port=22, user=user) if nat else None, location=at,
                journal_id=inst.labels.get(JOURNAL_ID_TAG) or None))
        return out

    def delete(self, location: Location, vm_name: str, instance_ids: List[str]) -> None:
        validate_vm_name(vm_name)
        if not location.zone:
            raise ProviderError(ErrorKind.INVALID_REQUEST, "location: gcp locations name a zone; got %s" % location)
        for instance_id in instance_ids:
            # The delete Operation is not awaited: teardown observes until the instance is gone.
            self._call_or_none("instances.delete", self._client("instances").delete_unary, project=self.project,
                               zone=location.zone, instance=instance_id, timeout=self.timeout, retry=SENT_ONCE)

    def cleanup(self, location: Location, vm_name: str) -> None:
        """Delete this journal's firewall rule of the VM, and the rule of the name used
        before journal ids unless its description names another journal."""
        vm = validate_vm_name(vm_name)
        firewalls = self._client("firewalls")
        own = catalog.firewall_name(vm, self.journal_id)
        self._call_or_none("firewalls.delete", firewalls.delete_unary, project=self.project, firewall=own,
                           timeout=self.timeout, retry=SENT_ONCE)
        legacy = catalog.firewall_name(vm)
        if legacy == own:
            return
        found = self._call_or_none("firewalls.get", firewalls.get, project=self.project, firewall=legacy,
                                   timeout=self.timeout, retry=self.read_retry)
        if found is None:
            return
        made_by = catalog.described_identity(found.description).get(JOURNAL_ID_TAG)
        if made_by is None or made_by == self.journal_id:
            self._call_or_none("firewalls.delete", firewalls.delete_unary, project=self.project, firewall=legacy,
                               timeout=self.timeout, retry=SENT_ONCE)

    can_retag = True

    def retag(self, location: Location, vm_name: str, instance_id: str, tags: Dict[str, str], purge: bool,
              check: bool = False) -> Dict[str, Any]:
        """The user labels of the instance and its boot disk: one setLabels each (the whole map, fenced by the
        labelFingerprint just read) where they differ. Their Operations are not awaited: GCP applies the labels
        when they end, and a failed one leaves labels a later run finds different and sets again."""
        vm = validate_vm_name(vm_name)
        if not location.zone:
            raise ProviderError(ErrorKind.INVALID_REQUEST, "location: gcp locations name a zone; got %s" % location)
        wanted = self._user_labels(tags)
        instances, disks = self._client("instances"), self._client("disks")
        inst = self._call_or_none("instances.get", instances.get, project=self.project, zone=location.zone,
                                  instance=instance_id, timeout=self.timeout, retry=self.read_retry)
        if inst is None or inst.labels.get(VM_NAME_TAG) != vm:
            raise ProviderError(ErrorKind.INVALID_REQUEST, "tags: %s is not an instance of VM %s in %s"
                                % (instance_id, vm, location.zone))
        boot = next((d.source.rsplit("/", 1)[-1] for d in inst.disks if d.boot and d.source), None)
        disk = self._call_or_none("disks.get", disks.get, project=self.project, zone=location.zone, disk=boot,
                                  timeout=self.timeout, retry=self.read_retry) if boot else None
        targets = [("instances", inst, instances.set_labels_unary, "instance", "instances_set_labels_request_resource",
                    compute_v1.InstancesSetLabelsRequest)]
        if disk is not None:
            targets.append(("disks", disk, disks.set_labels_unary, "resource", "zone_set_labels_request_resource",
                            compute_v1.ZoneSetLabelsRequest))
        total: Dict[str, Any] = {"set": {}, "removed": []}
        for kind, resource, set_labels, name_arg, body_arg, body_type in targets:
            labels = dict(resource.labels)
            changes = tag_changes(labels, wanted, purge, keep=lambda name: name.startswith(("gpuprov-", "goog-")))
            total["set"].update(changes["set"])
            total["removed"] = sorted(set(total["removed"]) | set(changes["removed"]))
            if check or not (changes["set"] or changes["removed"]):
                continue
            labels.update(changes["set"])
            for name in changes["removed"]:
                labels.pop(name)
            body = body_type(labels=labels, label_fingerprint=resource.label_fingerprint)
            op = self._call(kind + ".setLabels", set_labels, project=self.project, zone=location.zone,
                            timeout=self.timeout, retry=SENT_ONCE, **{name_arg: resource.name, body_arg: body})
            error = classify_operation(op, "gcp %s.setLabels" % kind) \
                if op.status == compute_v1.Operation.Status.DONE else None
            if error is not None:
                raise error
        return total

    def _user_labels(self, tags: Dict[str, str]) -> Dict[str, str]:
        """The user's tags as GCP labels, lower-cased; InvalidRequest naming a tag that still cannot be one, or
        two tags that would be one label (``Team`` and ``team``: one would silently replace the other)."""
        user: Dict[str, str] = {}
        named: Dict[str, str] = {}
        for key, value in sorted(tags.items()):
            if key.lower() in named:
                raise ProviderError(ErrorKind.INVALID_REQUEST, "tags.%s: %r and %r are the same GCP label %r (GCP "
                                    "lower-cases label names); keep one" % (key, named[key.lower()], key, key.lower()))
            named[key.lower()] = key
            label = {key.lower(): value.lower()}
            try:
                catalog.checked_labels(label)
            except ProviderError:
                raise ProviderError(ErrorKind.INVALID_REQUEST, "tags.%s: %r=%r cannot be a GCP label (a name starts "
                                    "with a letter; name and value at most 63 lowercase letters, digits, '-' and "
                                    "'_')" % (key, key.lower(), value.lower())) from None
            user.update(label)
        return user

    def _labels(self, vm_name: str) -> Dict[str, str]:
        """The identity labels of every resource of ``vm_name`` (VM name, journal id)."""
        return catalog.checked_labels(self.identity_tags(vm_name))

    def _resource_labels(self, spec: InstanceSpec) -> Dict[str, str]:
        """The instance's and its disk's labels: the user's tags lower-cased (GCP labels are), under the
        identity labels; InvalidRequest naming a tag that still cannot be a GCP label."""
        user = {k: v for k, v in spec.tags.items() if not k.lower().startswith(GPUPROV_TAG_PREFIX)}
        return dict(self._user_labels(user), **self._labels(spec.vm_name))

    def sweep_locations(self) -> List[Location]:
        """One location, ANY_REGION: the aggregated list covers every zone (owned.py). Pure."""
        from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.gcp.owned import sweep_locations
        return sweep_locations(self)

    def list_owned(self, location: Location) -> List[Owned]:
        """Labelled instances, and the gpuprov firewall rules at ANY_REGION or global (owned.py)."""
        from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.gcp.owned import list_owned
        return list_owned(self, location)

    def diagnose(self, location: Location, vm_name: str) -> Dict[str, Any]:
        """observe plus Compute Engine's status message, last start/stop times and scheduling (Spot, preemptible)."""
        from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.gcp.diagnose import diagnose
        return diagnose(self, location, vm_name)
