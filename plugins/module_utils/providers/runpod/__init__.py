# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""RunPod adapter, on RunPod's REST API v2 (``https://api.runpod.io/v2``) and the shared
REST client. No SDK: runpod-python speaks GraphQL and REST v1, and v2 needs nothing
beyond JSON over HTTPS with a bearer key.

Options: ``cloud_options.runpod`` (providers/cloud_options/runpod.py); the key falls back
to ``RUNPOD_API_KEY``.

* ``plan``: ``GET /v2/catalog/gpus?include=AVAILABILITY&product=POD&count=N&cloud=...``.
  One offer per GPU type x data center: region = the data center id, price = the
  per-GPU list price x count, unavailable (with the reason) where the stock level is
  NONE. A GPU type in stock nowhere gives one unavailable offer in region ``any``.
* ``prepare``: registers the controller's key with the account (``GET`` then ``PUT
  /v2/account/ssh-keys``, the list being a full replacement) as the line
  ``<type> <blob> gpuprov-<vm>-<fingerprint>``, unless a line with the same key material
  is registered already (it is then reused, whatever its comment). The key also goes
  into the pod's environment as ``PUBLIC_KEY`` (the convention RunPod's images start
  sshd from; ``startSsh`` fills it from the account's keys only when the request does
  not set it), so the login never depends on the account list: that PUT has no
  concurrency control, and another writer's PUT in between could drop our line. RunPod
  has no firewall API: pod ports are public, and ``allowed_cidrs`` cannot be enforced.
* ``create``: one ``POST /v2/pods`` named after the VM, its identity in the env
  (``GPUPROV_VM_NAME``, ``GPUPROV_JOURNAL_ID``: pods have no tags), ``ports``
  holding ``22/tcp`` plus the spec's other ports, placed in the offer's data center.
* ``observe``: ``GET /v2/pods``, filtered on the name and the env's VM name; the
  endpoint is ``ssh.direct`` (or the runtime mapping of private 22/tcp) once RUNNING.
* ``delete``: ``DELETE /v2/pods/{id}`` (404 = already gone). ``cleanup``: removes the
  account's key lines named ``gpuprov-<vm>-<12 hex>`` (one PUT of the rest, none when
  there is none), unless a pod of that name made by another journal is alive. Registered
  keys reach only pods created afterwards, so a running pod keeps its login.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    Capabilities, ErrorKind, InstanceSpec, Location, Observed, Offer, Owned, PowerOffBilling, ProviderError, ResourceRequest,
    Status, validate_vm_name,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.cloud_options.runpod import OPTIONS
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.common import check_regions, tcp_ports
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.gpus import canonical_gpu
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.options import TypedOptionsProvider
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.rest import (
    MALFORMED_BODY, BearerToken, RestClient, RestError,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.runpod import catalog
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.runpod.errors import CREATE_RULES, RULES

STATUS_MAP = {
    "PROVISIONING": Status.PENDING, "STARTING": Status.PENDING, "RUNNING": Status.RUNNING,
    "EXITED": Status.STOPPED, "ERROR": Status.FAILED,
}
# Permanently deleted: reported as gone.
GONE = "TERMINATED"
ANY_REGION = "any"
CUDA_VERSION = re.compile(r"^\d+\.\d+$")
KEYS_PATH = "account/ssh-keys"


class RunpodProvider(TypedOptionsProvider):
    name = "runpod"
    option_spec = OPTIONS

    def __init__(self, options: Optional[Dict[str, Any]] = None, journal_id: Optional[str] = None):
        super().__init__(options, journal_id=journal_id)
        cuda = self.options["min_cuda_version"]
        if cuda is not None and not CUDA_VERSION.match(str(cuda)):
            # gpu.minCudaVersion of the create body takes major.minor only (the catalog also a bare major).
            raise ProviderError(ErrorKind.INVALID_REQUEST, "cloud_options.runpod.min_cuda_version: expected "
                                "major.minor (for example 12.4), got %r" % (cuda,))
        self._clients: Dict[str, RestClient] = {}

    def _client(self, table: str) -> RestClient:
        """The REST client with the ``table`` rules, made on first use: building the adapter
        (capabilities, option checks, a fresh adapter from journalled options, which hold no
        key) needs no key; the first call without one is Credentials."""
        if table not in self._clients:
            self.check_credentials()   # no key: refused here, naming its option and variable
            auth = BearerToken(self.options["api_key"], option="api_key")
            rules = CREATE_RULES if table == "create" else RULES
            self._clients[table] = RestClient(self.options["api_url"], auth=auth, name=self.name, rules=rules)
        return self._clients[table]

    @property
    def api(self) -> RestClient:
        return self._client("read")

    @property
    def create_api(self) -> RestClient:
        """The same API with the create table: placement failures belong to the offer."""
        return self._client("create")

    def capabilities(self) -> Capabilities:
        # Pods are containers: no k3s, and no boot script (the container start command would
        # replace the image's own, which starts sshd); the core runs scripts over SSH instead.
        return Capabilities(kubernetes=False, boot_script=False, spot=False, k3s_access=None,
                            boot_timeout_s=self.options["boot_timeout_s"],
                            poll_interval_s=self.options["poll_interval_s"],
                            # What RunPod does when a pod's PID 1 ends (restart it, or leave it EXITED) is not
                            # documented; a stopped pod still bills its volume disk until it is terminated.
                            poweroff_billing=PowerOffBilling.UNKNOWN,
                            poweroff_source="https://docs.runpod.io/get-started/billing-information (running pods bill "
                                            "by the minute, stopped pods their volume storage; an exited container "
                                            "not addressed)")

    # -- plan ------------------------------------------------------------------------

    def _malformed(self, where: str, what: str) -> RestError:
        return RestError(ErrorKind.FAILED, "runpod %s: %s" % (where, what), status=200, code=MALFORMED_BODY)

    def plan(self, request: ResourceRequest) -> List[Offer]:
        gpu = canonical_gpu(request.gpu)
        if gpu is None:
            raise ProviderError(ErrorKind.INVALID_REQUEST, "gpu: the runpod cloud provisions GPU pods; name a gpu")
        if request.spot:
            raise ProviderError(ErrorKind.INVALID_REQUEST, "spot: RunPod's REST API v2 has no interruptible pods")
        count = int(request.gpu_count or 1)
        tier = self.options["cloud_type"]
        params = {"include": "AVAILABILITY", "product": "POD", "count": count, "cloud": tier}
        if self.options["min_cuda_version"]:
            params["minCudaVersion"] = self.options["min_cuda_version"]
        body = self.api.get("catalog/gpus", params=params)
        gpus = body.get("gpus") if isinstance(body, dict) else None
        if not isinstance(gpus, list):
            raise self._malformed("GET /v2/catalog/gpus", "expected {\"gpus\": [...]}")
        # The data centers RunPod has: every one this answer lists for any GPU type (not only the one
        # asked for, so a data center out of it now still counts), rather than one more call to
        # GET /v2/catalog/datacenters; an answer naming none cannot tell (check_regions).
        known = {dc.get("id") for gpu_type in gpus if isinstance(gpu_type, dict)
                 for dc in gpu_type.get("dataCenters") or [] if isinstance(dc, dict) and dc.get("id")}
        regions = (check_regions("runpod's GPU catalog", request.regions, known, its="its data centers")
                   or [r for r in self.options["regions"] or [] if r])
        offers: List[Offer] = []
        ceilings = []
        for gpu_type in gpus:
            if not isinstance(gpu_type, dict) or catalog.canonical(gpu_type.get("id")) != gpu:
                continue
            key = tier.lower()
            ceiling = (gpu_type.get("maxCount") or {}).get(key) or 0
            if not gpu_type.get(key) or not ceiling:
                continue  # not sold in this tier
            ceilings.append((ceiling, gpu_type["id"]))
            if count > ceiling:
                continue
            offers.extend(self._offers(gpu_type, gpu, count, tier, regions))
        if not offers:
            if ceilings:
                raise ProviderError(ErrorKind.INVALID_REQUEST, "gpu_count: RunPod's %s cloud has at most %s" % (
                    tier, ", ".join("%d x %s" % c for c in sorted(ceilings, reverse=True))))
            raise ProviderError(ErrorKind.INVALID_REQUEST, "gpu: RunPod's %s cloud has no %s pods" % (tier, gpu))
        return sorted(offers, key=lambda o: (not o.available, o.price_per_hour is None, o.price_per_hour or 0.0,
                                             catalog.AVAILABILITY_RANK.get(o.detail["availability"], 9),
                                             o.region, o.instance_type))

    def _offers(self, gpu_type: Dict[str, Any], gpu: str, count: int, tier: str, regions: List[str]) -> List[Offer]:
        """One offer per data center of one GPU type (or per asked-for region without stock)."""
        unit = (gpu_type.get("price") or {}).get(tier.lower())
        price = round(float(unit) * count, 6) if isinstance(unit, (int, float)) else None
        stock = {dc.get("id"): dc.get("availability") or "NONE"
                 for dc in gpu_type.get("dataCenters") or [] if isinstance(dc, dict) and dc.get("id")}
        wanted = regions or sorted(stock) or [ANY_REGION]
        offers = []
        for region in wanted:
            level = stock.get(region, "NONE")
            where = "any data center" if region == ANY_REGION else region
            offers.append(Offer(
                cloud=self.name, region=region, instance_type=catalog.instance_type(gpu_type["id"], count),
                gpu=gpu, gpu_count=count, price_per_hour=price, available=level != "NONE",
                unavailable_reason=None if level != "NONE" else (
                    "RunPod reports no stock of %s x%d in %s (%s cloud, availability NONE)"
                    % (gpu_type["id"], count, where, tier)),
                detail={"gpu_type_id": gpu_type["id"], "gpu_count": count, "cloud_type": tier,
                        "availability": level}))
        return offers

    # -- prepare / create --------------------------------------------------------------

    def _account_keys(self) -> List[str]:
        body = self.api.get(KEYS_PATH)
        keys = body.get("keys") if isinstance(body, dict) else None
        if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
            raise self._malformed("GET /v2/account/ssh-keys", "expected {\"keys\": [\"<type> <key> ...\"]}")
        return keys

    def prepare(self, offer: Offer, spec: InstanceSpec) -> Dict[str, Any]:
        vm = validate_vm_name(spec.vm_name)
        key = catalog.key_line(vm, spec.ssh_public_key)
        ports = ["%d/tcp" % port for port in tcp_ports(spec.open_ports)]
        keys = self._account_keys()
        wanted = catalog.material(key["line"])
        registered = any(catalog.material(line) == wanted for line in keys)
        if not registered:
            self.api.put(KEYS_PATH, json={"keys": keys + [key["line"]]})
        return {"ssh_key_name": key["name"], "public_key": key["line"], "ports": ports}

    def _pod_body(self, offer: Offer, prepared: Dict[str, Any], spec: InstanceSpec) -> Dict[str, Any]:
        detail = offer.detail or {}
        gpu = {"id": detail.get("gpu_type_id"), "count": int(detail.get("gpu_count") or offer.gpu_count or 1)}
        if not gpu["id"]:
            raise ProviderError(ErrorKind.INVALID_REQUEST, "offer: %s names no RunPod GPU type" % offer.offer_id)
        if self.options["min_cuda_version"]:
            gpu["minCudaVersion"] = self.options["min_cuda_version"]
        env = {catalog.PUBLIC_KEY_ENV: prepared.get("public_key") or catalog.key_line(
            spec.vm_name, spec.ssh_public_key)["line"], catalog.VM_NAME_ENV: spec.vm_name}
        if self.journal_id:
            env[catalog.JOURNAL_ID_ENV] = self.journal_id
        body = {
            "name": spec.vm_name, "image": self.options["image"], "gpu": gpu,
            "cloud": detail.get("cloud_type") or self.options["cloud_type"],
            "disk": self.options["container_disk_gb"],
            "ports": list(prepared.get("ports") or ["%d/tcp" % p for p in tcp_ports(spec.open_ports)]),
            "env": env, "startSsh": True,
        }
        if offer.region and offer.region != ANY_REGION:
            body["dataCenterIds"] = [offer.region]
        if self.options["volume_gb"]:
            body["mounts"] = {"persistent": {"size": self.options["volume_gb"], "path": self.options["volume_path"]}}
        return body

    def create(self, offer: Offer, prepared: Dict[str, Any], spec: InstanceSpec) -> str:
        validate_vm_name(spec.vm_name)
        pod = self.create_api.post("pods", json=self._pod_body(offer, prepared, spec))
        pod_id = pod.get("id") if isinstance(pod, dict) else None
        if not isinstance(pod_id, str) or not pod_id:
            # The pod may exist: observe finds it by name, and the core adopts or deletes it.
            raise self._malformed("POST /v2/pods", "the reply names no pod id")
        return pod_id

    # -- observe / delete / cleanup ------------------------------------------------------

    def _pods(self, vm: Optional[str]) -> List[Dict[str, Any]]:
        """The account's pods of VM ``vm`` (None: of every gpuprov VM): named as the VM, with its name in the env."""
        body = self.api.get("pods")
        pods = body.get("pods") if isinstance(body, dict) else None
        if not isinstance(pods, list):
            raise self._malformed("GET /v2/pods", "expected {\"pods\": [...]}")
        return [pod for pod in pods if isinstance(pod, dict) and pod.get("name") and (vm is None or pod["name"] == vm)
                and isinstance(pod.get("env"), dict) and pod["env"].get(catalog.VM_NAME_ENV) == pod["name"]]

    def observe(self, location: Location, vm_name: str) -> List[Observed]:
        return self._observed_at(location, self._pods(validate_vm_name(vm_name)))

    def observe_all(self, location: Location) -> Optional[List[Observed]]:
        """Every gpuprov pod of the account at ``location`` (the fleet's poll: one listing)."""
        if not self.journal_id:
            return None
        return self._observed_at(location, self._pods(None))

    def _observed_at(self, location: Location, pods: List[Dict[str, Any]]) -> List[Observed]:
        out = []
        for pod in pods:
            placed = pod.get("dataCenterId")
            if location.region != ANY_REGION and placed and placed != location.region:
                continue  # another attempt's pod, observed at its own location
            vendor_status = pod.get("status")
            if vendor_status == GONE or not isinstance(pod.get("id"), str):
                continue
            status = STATUS_MAP.get(vendor_status, Status.PENDING)
            endpoint = catalog.ssh_endpoint(pod) if status == Status.RUNNING else None
            reason = None
            if status != Status.RUNNING:
                reason = "RunPod status %s" % vendor_status
            elif endpoint is None:
                reason = "RUNNING, no public mapping of 22/tcp yet"
            out.append(Observed(instance_id=pod["id"], status=status, reason=reason, endpoint=endpoint,
                                location=Location(self.name, placed or location.region),
                                journal_id=pod["env"].get(catalog.JOURNAL_ID_ENV) or None))
        return out

    def delete(self, location: Location, vm_name: str, instance_ids: List[str]) -> None:
        validate_vm_name(vm_name)
        for pod_id in instance_ids:
            self.api.delete("pods/%s" % pod_id, allow_status=(404,))

    def cleanup(self, location: Location, vm_name: str) -> None:
        vm = validate_vm_name(vm_name)
        keys = self._account_keys()
        kept = [line for line in keys if catalog.key_vm(line) != vm]
        if len(kept) == len(keys):
            return
        # A pod of this name made by another journal (another controller) still counts on its
        # key line (a re-create there registers nothing new): not ours to remove.
        if any(pod.get("status") != GONE and (pod["env"].get(catalog.JOURNAL_ID_ENV) or None) not in (
                None, self.journal_id) for pod in self._pods(vm)):
            return
        self.api.put(KEYS_PATH, json={"keys": kept})

    def sweep_locations(self) -> List[Location]:
        """One location, ANY_REGION: the pod listing is account-wide (owned.py). Pure."""
        from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.runpod.owned import sweep_locations
        return sweep_locations(self)

    def list_owned(self, location: Location) -> List[Owned]:
        """Pods whose env carries a gpuprov VM name (owned.py)."""
        from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.runpod.owned import list_owned
        return list_owned(self, location)

    def diagnose(self, location: Location, vm_name: str) -> Dict[str, Any]:
        """observe plus RunPod's own fields (status, data center, cost, image, CUDA) per pod."""
        vm = validate_vm_name(vm_name)
        pods = {pod.get("id"): pod for pod in self._pods(vm)}
        found = self.observe(location, vm)
        instances, findings = [], []
        for seen in found:
            pod = pods.get(seen.instance_id) or {}
            vendor = {k: pod.get(k) for k in ("status", "dataCenterId", "cost", "image", "cudaVersion", "gpu",
                                              "cloud", "createdAt", "startedAt", "actions")}
            instances.append(dict(seen.to_dict(), vendor=vendor))
            if pod.get("status") in ("EXITED", "ERROR"):
                findings.append("pod %s is %s (container stopped); it bills its storage until deleted"
                                % (seen.instance_id, pod["status"]))
        findings.append("RunPod pods have no firewall: their public ports are open to every address")
        return {"instances": instances, "findings": findings}
