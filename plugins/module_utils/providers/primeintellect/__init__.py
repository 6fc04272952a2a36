# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``primeintellect`` cloud: Prime Intellect's GPU marketplace, REST API v1 (no SDK:
the official ``prime`` CLI is a thin wrapper over the same endpoints).

* plan: ``GET /api/v1/availability/gpus`` (paginated ``page``/``page_size``, ``items`` and
  ``totalCount``; the unpaginated ``/api/v1/availability/`` of older docs is legacy), one
  offer per item (underlying provider x data center x configuration), priced per pod.
* prepare: the SSH key, ``POST /api/v1/ssh_keys/`` (reused when its material is already
  registered). Prime puts the account's keys into new pods; it has no firewall API (the
  underlying provider decides which ports are open), so ``allowed_cidrs`` has no effect.
* create: one ``POST /api/v1/pods/``; the pod is named ``<vm>-j<journal id>`` (catalog.py: inside the
  name rule of Prime's CLI). Pods and keys named ``<vm>.<journal id>``, as gpuprov named them before,
  are still observed, deleted, cleaned up and swept.
* observe: ``GET /api/v1/pods/`` (``offset``/``limit``), filtered by name; the SSH user, host
  and port come from ``sshConnection`` (``ip`` only when the string has no host).
* delete: ``DELETE /api/v1/pods/{id}`` (a pod already gone is success); cleanup deletes this
  VM's key (``DELETE /api/v1/ssh_keys/{id}``).
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Tuple
from urllib.parse import quote

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    Capabilities, ErrorKind, InstanceSpec, Location, Observed, Offer, Owned, PowerOffBilling, ProviderError, ResourceRequest,
    validate_vm_name,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.cloud_options.primeintellect import OPTIONS
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.common import check_regions
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.gpus import canonical_gpu
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.options import TypedOptionsProvider
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.primeintellect import catalog
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.primeintellect.errors import RULES
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.rest import (
    MALFORMED_BODY, BearerToken, PageNumber, RestClient, RestError,
)

API_PREFIX = "/api/v1"
AVAILABILITY = "/api/v1/availability/gpus"
PODS = "/api/v1/pods/"
SSH_KEYS = "/api/v1/ssh_keys/"
PAGE_SIZE = 100
# A delete refused because the pod is already gone.
POD_GONE = re.compile(r"pod (?:\S+ )?(?:was )?not found|already (?:terminated|deleted)", re.IGNORECASE)
# The pod fields diagnose shows as the vendor's own view.
VENDOR_FIELDS = ("providerType", "status", "installationStatus", "installationProgress", "installationFailure",
                 "priceHr", "gpuName", "gpuCount", "sshConnection", "ip")


class OffsetLimit:
    """``?offset=&limit=`` paging (pods, SSH keys): stops at a short page or once the
    body's total (``total_count``, or ``totalCount`` as the CLI's key model reads it) came."""

    def __init__(self, limit: int = PAGE_SIZE):
        self.limit = limit

    def start(self, params: Dict[str, Any]) -> Dict[str, Any]:
        return dict(params, offset=0, limit=self.limit)

    @staticmethod
    def total(body: Any) -> Any:
        return body.get("total_count", body.get("totalCount")) if isinstance(body, dict) else None

    def follow(self, body: Any, url: str, params: Dict[str, Any], page: List[Any],
               fetched: int) -> Optional[Tuple[str, Dict[str, Any]]]:
        total = self.total(body)
        if len(page) < self.limit or (isinstance(total, int) and fetched >= total):
            return None
        return url, dict(params, offset=int(params["offset"]) + len(page))


def base_url(api_url: str) -> str:
    """``api_url`` without a trailing ``/`` and ``/api/v1``, as Prime's CLI takes its base URL (the paths
    here carry ``/api/v1``)."""
    url = api_url.rstrip("/") if isinstance(api_url, str) else api_url
    return url[:-len(API_PREFIX)] if isinstance(url, str) and url.endswith(API_PREFIX) else url


def _malformed(what: str) -> RestError:
    return RestError(ErrorKind.FAILED, "primeintellect: %s" % what, status=200, code=MALFORMED_BODY)


class PrimeIntellectProvider(TypedOptionsProvider):
    name = "primeintellect"
    # plan takes an offer to answer a region given as its data center (US-KS-2), its country (US) or
    # Prime's region (united_states), in any case: a later run judges a VM's regions the same way.
    regions_fold = True

    def offer_places(self, offer: Offer) -> List[str]:
        detail = offer.detail or {}
        return [str(p) for p in dict.fromkeys((offer.region, detail.get("data_center"), detail.get("country"),
                                               detail.get("prime_region"))) if p]

    option_spec = OPTIONS

    def __init__(self, options: Optional[Dict[str, Any]] = None, journal_id: Optional[str] = None):
        super().__init__(options, journal_id=journal_id)
        self._client: Optional[RestClient] = None

    @property
    def client(self) -> RestClient:
        """The REST client, made on first use: building the adapter (capabilities, option
        checks) needs no key; the first API call without one is Credentials."""
        if self._client is None:
            self.check_credentials()   # no key: refused here, naming its option and variable
            self._client = RestClient(base_url(self.options["api_url"]),
                                      auth=BearerToken(self.options["api_key"] or ""), name=self.name, rules=RULES)
        return self._client

    def capabilities(self) -> Capabilities:
        # A pod is a container on some providers (runpod, ...) and a VM on others, and
        # nothing in an offer or a pod says which: k3s is never assumed. Prime has no
        # user data or start command (only an image and envVars): no boot script runs.
        return Capabilities(kubernetes=False, boot_script=False, spot=True, k3s_access=None,
                            boot_timeout_s=self.options["boot_timeout_s"],
                            poll_interval_s=self.options["poll_interval_s"],
                            # A pod reports a stoppedPriceHr, but no vendor page says what a power-off from inside
                            # does (nor what the create's autoRestart restarts).
                            poweroff_billing=PowerOffBilling.UNKNOWN,
                            poweroff_source="https://docs.primeintellect.ai/api-reference/pods/create-pod (stoppedPriceHr, "
                                            "autoRestart undocumented); no page on a guest power-off")

    # -- plan -----------------------------------------------------------------------

    def plan(self, request: ResourceRequest) -> List[Offer]:
        gpu = canonical_gpu(request.gpu)
        count = int(request.gpu_count if request.gpu_count is not None else 1) if gpu else 1
        types = catalog.vendor_types(gpu)
        if not types:
            raise ProviderError(ErrorKind.INVALID_REQUEST, "gpu: primeintellect offers no %s; its GPUs: %s"
                                % (gpu, ", ".join(sorted(set(catalog.GPU_TYPES.values())))))
        if not 1 <= count <= catalog.MAX_GPUS_PER_POD:
            raise ProviderError(ErrorKind.INVALID_REQUEST, "gpu_count: a primeintellect pod has 1 to %d GPUs, got %d"
                                % (catalog.MAX_GPUS_PER_POD, count))
        params: Dict[str, Any] = {}
        if gpu:
            params["gpu_count"] = count
        if len(types) == 1:
            params["gpu_type"] = types[0]
        if self.options["security"] != "any":
            params["security"] = self.options["security"]
        paging = PageNumber(param="page", size_param="page_size", size=PAGE_SIZE, total_field="totalCount")
        items = list(self.client.paginate(AVAILABILITY, items="items", paging=paging, params=params))
        # Prime Intellect documents no list of its locations: the ones it has are the data centers,
        # countries and regions of this answer (the offers it lists now of the GPU type and count asked;
        # a location without one is missing). An answer with no offer at all cannot tell (check_regions).
        known = {str(item.get(field)) for item in items if isinstance(item, dict)
                 for field in ("dataCenter", "country", "region") if item.get(field)}
        asked = check_regions("primeintellect's availability", request.regions, known, fold=True,
                              its="the data centers, countries and regions it lists %s in" % (
                                  "%d x %s" % (count, gpu) if gpu else "CPU nodes"))
        wanted_regions = {r.lower() for r in (asked or self.options["regions"] or []) if r}
        providers = {p.lower() for p in self.options["providers"] or [] if p}
        offers = []
        for item in items:
            if not isinstance(item, dict) or item.get("gpuType") not in types:
                continue
            if gpu and item.get("gpuCount") != count:
                continue
            if bool(item.get("isSpot")) != bool(request.spot):
                continue
            # A data center (US-KS-2), a country (US) or Prime's region (united_states, canada, ...).
            if wanted_regions and not {str(item.get(field) or "").lower()
                                       for field in ("dataCenter", "country", "region")} & wanted_regions:
                continue
            if providers and str(item.get("provider") or "").lower() not in providers:
                continue
            offer = catalog.offer_from(item, self.options["image"])
            if offer is not None:
                offers.append(offer)
        return catalog.ordered(offers)

    # -- prepare / cleanup: the SSH key ---------------------------------------------

    def _keys(self) -> List[Dict[str, Any]]:
        return [k for k in self.client.paginate(SSH_KEYS, items="data", paging=OffsetLimit()) if isinstance(k, dict)]

    def prepare(self, offer: Offer, spec: InstanceSpec) -> Dict[str, Any]:
        vm = validate_vm_name(spec.vm_name)
        public_key = spec.ssh_public_key.strip()
        name = catalog.key_name(vm, public_key, self.journal_id)
        for key in self._keys():
            if catalog.same_key(key.get("publicKey"), public_key):
                return {"ssh_key_id": str(key.get("id")), "ssh_key_name": key.get("name")}
        made = self.client.post(SSH_KEYS, json={"name": name, "publicKey": public_key})
        if not isinstance(made, dict) or not made.get("id"):
            raise _malformed("POST %s returned no key id" % SSH_KEYS)
        return {"ssh_key_id": str(made["id"]), "ssh_key_name": made.get("name") or name}

    def cleanup(self, location: Location, vm_name: str) -> None:
        """Delete the keys named for this VM by this journal, or by no journal (made before
        journal ids); a key of another journal, or the user's own key, stays."""
        vm = validate_vm_name(vm_name)
        for key in self._keys():
            ours, journal_id = catalog.key_owner(key.get("name"), vm)
            if ours and key.get("id") and journal_id in (None, self.journal_id):
                self.client.delete(SSH_KEYS + quote(str(key["id"]), safe=""), allow_status=(404,))

    # -- create / observe / delete --------------------------------------------------

    def create(self, offer: Offer, prepared: Dict[str, Any], spec: InstanceSpec) -> str:
        vm = validate_vm_name(spec.vm_name)
        detail = offer.detail
        pod: Dict[str, Any] = {
            "name": catalog.pod_name(vm, self.journal_id),
            "cloudId": detail["cloud_id"], "gpuType": detail["gpu_type"], "socket": detail.get("socket") or "PCIe",
            "gpuCount": detail["gpu_count"], "image": detail.get("image") or self.options["image"],
        }
        for field, value in (("dataCenterId", detail.get("data_center")), ("country", detail.get("country")),
                             ("security", detail.get("security")), ("diskSize", self.options["disk_size_gb"])):
            if value:
                pod[field] = value
        body: Dict[str, Any] = {"pod": pod, "provider": {"type": detail["provider"]}}
        if self.options["team_id"]:
            body["team"] = {"teamId": self.options["team_id"]}
        made = self.client.post(PODS, json=body)
        if not isinstance(made, dict) or not made.get("id"):
            raise _malformed("POST %s returned no pod id" % PODS)
        return str(made["id"])

    def _pods(self) -> List[Dict[str, Any]]:
        return [p for p in self.client.paginate(PODS, items="data", paging=OffsetLimit()) if isinstance(p, dict)]

    def observe(self, location: Location, vm_name: str) -> List[Observed]:
        vm = validate_vm_name(vm_name)
        found = []
        for pod in self._pods():
            ours, journal_id = catalog.pod_identity(pod.get("name"), vm)
            if not ours or not pod.get("id"):
                continue
            status, reason = catalog.pod_status(pod)
            if status is None:
                continue
            found.append(Observed(instance_id=str(pod["id"]), status=status, reason=reason,
                                  endpoint=catalog.ssh_endpoint(pod), location=location, journal_id=journal_id))
        return found

    def delete(self, location: Location, vm_name: str, instance_ids: List[str]) -> None:
        """``DELETE /api/v1/pods/{id}`` per id; a pod Prime no longer knows is deleted: a 404,
        or any 4xx whose ``detail`` says it is not found or already terminated."""
        validate_vm_name(vm_name)
        for instance_id in instance_ids:
            try:
                self.client.delete(PODS.rstrip("/") + "/" + quote(str(instance_id), safe=""), allow_status=(404, 410))
            except RestError as err:
                if not (err.status and 400 <= err.status < 500 and POD_GONE.search(err.msg)):
                    raise

    def sweep_locations(self) -> List[Location]:
        """One location, ANY_REGION: pods and keys are listed account-wide (owned.py). Pure."""
        from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.primeintellect.owned import (
            sweep_locations,
        )
        return sweep_locations(self)

    def list_owned(self, location: Location) -> List[Owned]:
        """Pods named <vm>-j<journal id> (or <vm>.<journal id>), and at ANY_REGION or global the gpuprov SSH
        keys (owned.py)."""
        from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.primeintellect.owned import (
            list_owned,
        )
        return list_owned(self, location)

    def diagnose(self, location: Location, vm_name: str) -> Dict[str, Any]:
        """observe plus Prime's own fields: provider, status, installation progress and failure."""
        vm = validate_vm_name(vm_name)
        instances, findings = [], []
        for pod in self._pods():
            ours, journal_id = catalog.pod_identity(pod.get("name"), vm)
            status, reason = catalog.pod_status(pod)
            if not ours or status is None:
                continue
            seen = Observed(instance_id=str(pod.get("id")), status=status, reason=reason,
                            endpoint=catalog.ssh_endpoint(pod), location=location, journal_id=journal_id).to_dict()
            seen["vendor"] = {k: pod.get(k) for k in VENDOR_FIELDS}
            if pod.get("installationFailure"):
                findings.append("pod %s: installation failed: %s" % (pod.get("id"), pod["installationFailure"]))
            instances.append(seen)
        return {"instances": instances, "findings": findings}
