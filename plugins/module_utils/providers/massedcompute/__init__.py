# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Massed Compute adapter (the ``massedcompute`` cloud), on the shared REST client:
Massed Compute publishes an OpenAPI spec but no Python SDK.

Options: ``cloud_options.massedcompute`` (providers/cloud_options/massedcompute.py); the
key falls back to MASSED_COMPUTE_API_KEY and is sent as ``Authorization: Bearer``.

* plan: ``GET /gpu-inventory``: one offer per product x region with capacity, priced from
  ``price_cents_per_hour`` (whole instance, US cents). A product without capacity is an
  unavailable offer saying so (in region ``any`` when the request names none); spot
  ("[Spot]") products are not offered; a GPU Massed Compute does not list, or more of it
  than one product holds, is InvalidRequest.
* prepare: the SSH key is reused when one with the same material exists (whatever its
  name), else registered as ``gpuprov <vm words> <12 hex of sha256(key blob)> j<8 hex of
  sha256(journal id)>`` (key names take no punctuation but spaces); the image id comes from
  the ``image_id`` option or ``GET /images`` by ``image_name``. Massed Compute has no
  firewall API: nothing restricts the VM's ports.
* create: one ``POST /instance/launch`` named ``<vm>_<journal id>`` (no tags exist: the
  name carries the identity), with the key name and the boot script as the startup
  ``command``. A crash after it is adopted through observe (by name).
* observe: ``GET /instance`` filtered here by name; the endpoint is ``ip``:ssh_port as
  ssh_user (or the reported ``username``) once the instance is rented with its OS booted.
* delete: ``POST /instance/terminate`` for the listed ids the listing still shows alive (one
  gone meanwhile answers 404 or "No valid VMs found": done).
* cleanup: deletes the VM's keys this journal registered (or that carry no journal mark).
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    Capabilities, ErrorKind, InstanceSpec, K3sAccess, Location, Observed, Offer, Owned, PowerOffBilling, ProviderError,
    ResourceRequest, SshEndpoint, Status, validate_vm_name,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.cloud_options.massedcompute import OPTIONS
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.common import check_regions
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.gpus import canonical_gpu
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.massedcompute import catalog
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.massedcompute.errors import NO_VALID_VMS, RULES
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.options import TypedOptionsProvider
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.rest import (
    MALFORMED_BODY, BearerToken, RestClient, RestError, classify,
)

ANY_REGION = "any"   # the launch's regionName that lets Massed Compute choose


def _without_passwords(body: Any) -> Any:
    """``body`` with every ``password`` value hidden: an instance carries its login password in
    clear, and an error message quoting a body ends up in the journal."""
    if isinstance(body, dict):
        return {k: "***" if k == "password" else _without_passwords(v) for k, v in body.items()}
    if isinstance(body, list):
        return [_without_passwords(v) for v in body]
    return body


class MassedComputeProvider(TypedOptionsProvider):
    name = "massedcompute"
    option_spec = OPTIONS

    def __init__(self, options: Optional[Dict[str, Any]] = None, journal_id: Optional[str] = None):
        super().__init__(options, journal_id=journal_id)
        self._client: Optional[RestClient] = None

    # -- plumbing -------------------------------------------------------------------

    @property
    def api(self) -> RestClient:
        """The REST client, made on first use (capabilities and option checks need no key)."""
        if self._client is None:
            self.check_credentials()   # no key: refused here, naming its option and variable
            self._client = RestClient(self.options["api_url"], auth=BearerToken(self.options["api_key"] or ""),
                                      name="massedcompute", rules=RULES,
                                      timeout=(10.0, self.options["request_timeout_s"] or 60.0))
        return self._client

    @staticmethod
    def _field(body: Any, method: str, path: str, field: str, shape: type) -> Any:
        """``body[field]`` of the documented shape, or a classified malformed-body error
        (a null list reads as empty)."""
        value = body.get(field) if isinstance(body, dict) else None
        if value is None and shape is list and isinstance(body, dict) and field in body:
            return []
        if isinstance(value, shape):
            return value
        kind, block = classify(RULES, 200, MALFORMED_BODY, "")
        raise RestError(kind, "massedcompute %s %s: HTTP 200 %s: expected {%r: %s}, got %.200s" % (
            method, path, MALFORMED_BODY, field, shape.__name__, _without_passwords(body)), block, status=200,
            code=MALFORMED_BODY)

    def _get(self, path: str, field: str, shape: type = list) -> Any:
        return self._field(self.api.get(path), "GET", path, field, shape)

    def _instances(self) -> List[Dict[str, Any]]:
        return [i for i in self._get("/instance", "runningInstances") if isinstance(i, dict) and i.get("uuid")]

    def capabilities(self) -> Capabilities:
        # Real VMs (k3s runs); no firewall API, so the k3s API is reached through SSH.
        return Capabilities(
            kubernetes=True, boot_script=True, spot=False, k3s_access=K3sAccess.SSH_TUNNEL,
            boot_timeout_s=self.options["boot_timeout_s"], poll_interval_s=self.options["poll_interval_s"],
            python_interpreter=self.options["python_interpreter"] or None,
            # The vendor bills each "active" VM per minute and does not say whether a powered-off one is active.
            poweroff_billing=PowerOffBilling.UNKNOWN,
            poweroff_source="https://vm-docs.massedcompute.com/docs/billing/overview (active VMs charged per minute; "
                            "a powered-off VM not addressed)")

    # -- plan -----------------------------------------------------------------------

    def plan(self, request: ResourceRequest) -> List[Offer]:
        validate_vm_name(request.vm_name)
        if request.spot:
            raise ProviderError(ErrorKind.INVALID_REQUEST, "spot: massedcompute launches on-demand instances only")
        want = canonical_gpu(request.gpu)
        count = max(int(request.gpu_count or 1), 1)
        inventory = self._get("/gpu-inventory", "gpu_inventory", dict)
        # Massed Compute documents no list of its regions: the ones it has are those this answer names
        # for any product (not only the one asked for; a region out of every product now is missing), and
        # "any", its launch's own. An answer naming none cannot tell (check_regions).
        known = {r["name"] if isinstance(r, dict) else r for product in inventory.values() if isinstance(product, dict)
                 for r in product.get("regions_with_capacity_available") or []
                 if (isinstance(r, dict) and isinstance(r.get("name"), str)) or isinstance(r, str)}
        asked = (check_regions("massedcompute's inventory", request.regions, known | {ANY_REGION} if known else known)
                 or list(self.options["regions"] or []))
        offers, seen_counts = [], []
        for product in inventory.values():
            kind = product.get("instance_type") if isinstance(product, dict) else None
            if not isinstance(kind, dict) or not kind.get("name"):
                continue
            if catalog.is_spot(kind["name"], kind.get("description")):
                continue
            gpu, gpus = catalog.gpu_of(kind["name"], kind.get("description"))
            if (gpus > 0 if want is None else gpu != want):
                continue  # a CPU-only ask never gets a (dearer) GPU product
            seen_counts.append(gpus)
            if want is not None and gpus < count:
                continue
            capacity = self._capacity(product)
            for region in asked or capacity or [ANY_REGION]:
                offers.append(self._offer(kind, gpu, gpus, region, capacity, product.get("capacity_available")))
        if want is None and not offers:
            raise ProviderError(ErrorKind.INVALID_REQUEST, "gpu: massedcompute lists no CPU-only product; name a GPU")
        if want is not None and not offers:
            if not seen_counts:
                raise ProviderError(ErrorKind.INVALID_REQUEST, "gpu: massedcompute lists no product with %s" % want)
            raise ProviderError(ErrorKind.INVALID_REQUEST, "gpu_count: massedcompute's %s products hold at most %d "
                                "GPUs, %d asked" % (want, max(seen_counts), count))
        offers.sort(key=lambda o: (not o.available, o.price_per_hour if o.price_per_hour is not None else 1e9,
                                   o.instance_type, asked.index(o.region) if o.region in asked else 0, o.region))
        return offers

    @staticmethod
    def _capacity(product: Dict[str, Any]) -> List[str]:
        """The regions with capacity (none when ``capacity_available`` says 0)."""
        if product.get("capacity_available") == 0:
            return []
        return [r["name"] if isinstance(r, dict) else r for r in product.get("regions_with_capacity_available") or []
                if (isinstance(r, dict) and r.get("name")) or (isinstance(r, str) and r)]

    def _offer(self, kind: Dict[str, Any], gpu: Optional[str], gpus: int, region: str, capacity: List[str],
               stock: Any) -> Offer:
        cents = kind.get("price_cents_per_hour")
        price = round(cents / 100.0, 4) if isinstance(cents, (int, float)) and not isinstance(cents, bool) else None
        reason = None
        if not capacity:
            reason = "massedcompute lists no capacity for %s in any region" % kind["name"]
        elif region != ANY_REGION and region not in capacity:
            reason = "massedcompute lists no capacity for %s in %s (it has capacity in %s)" % (
                kind["name"], region, ", ".join(capacity))
        return Offer(cloud=self.name, region=region, instance_type=kind["name"], gpu=gpu, gpu_count=gpus,
                     price_per_hour=price, available=reason is None, unavailable_reason=reason,
                     detail={"description": kind.get("description"), "specs": kind.get("specs") or {},
                             "capacity_available": stock})

    # -- prepare ----------------------------------------------------------------------

    def _ssh_key(self, vm: str, public_key: str) -> str:
        """The name of a registered key with this material (registering it when none has)."""
        material = catalog.public_key_material(public_key)
        for key in self._get("/ssh-keys", "sshKeys"):
            if isinstance(key, dict) and key.get("name") and key.get("public_key"):
                try:
                    if catalog.public_key_material(key["public_key"]) == material:
                        return key["name"]
                except ProviderError:
                    continue
        name = catalog.key_name(vm, public_key, self.journal_id)
        made = self._field(self.api.post("/ssh-keys", json={"name": name, "publicKey": " ".join(material)}),
                           "POST", "/ssh-keys", "sshKey", dict)
        return made.get("name") or name

    def _image_id(self) -> int:
        if self.options["image_id"]:
            return int(self.options["image_id"])
        wanted = (self.options["image_name"] or "").strip().lower()
        images = [i for i in self._get("/images", "images") if isinstance(i, dict)]
        for image in images:
            if str(image.get("vm_image_name") or "").strip().lower() == wanted and image.get("vm_image_id"):
                return int(image["vm_image_id"])
        raise ProviderError(ErrorKind.INVALID_REQUEST, "image_name: massedcompute lists no image %r (it has %s)" % (
            self.options["image_name"], ", ".join(sorted(repr(i.get("vm_image_name")) for i in images)) or "none"))

    def prepare(self, offer: Offer, spec: InstanceSpec) -> Dict[str, Any]:
        vm = validate_vm_name(spec.vm_name)
        key = self._ssh_key(vm, spec.ssh_public_key)
        return {"ssh_key_name": key, "image_id": self._image_id(), "region": offer.region,
                "firewall": None, "ssh_user": self.options["ssh_user"]}

    # -- create -----------------------------------------------------------------------

    def create(self, offer: Offer, prepared: Dict[str, Any], spec: InstanceSpec) -> str:
        vm = validate_vm_name(spec.vm_name)
        body: Dict[str, Any] = {
            "imageId": int(prepared["image_id"]), "productName": offer.instance_type,
            "regionName": offer.region or ANY_REGION, "instanceName": catalog.instance_name(vm, self.journal_id),
            "sshKeys": [prepared["ssh_key_name"]],
        }
        if spec.boot_script is not None:
            body["command"] = catalog.boot_command(spec.boot_script)
        launched = self.api.post("/instance/launch", json=body)
        instance_id = launched.get("response") if isinstance(launched, dict) else None
        if not isinstance(instance_id, str) or not instance_id:
            self._field(None, "POST", "/instance/launch", "response", str)  # raises: malformed (Transient)
        return instance_id

    # -- observe ----------------------------------------------------------------------

    def _observed(self, instance: Dict[str, Any], status: str, reason: Optional[str], location: Location,
                  journal_id: Optional[str]) -> Observed:
        user = self.options["ssh_user"] or str(instance.get("username") or "").strip().lower() or None
        endpoint = None
        if status == Status.RUNNING and instance.get("ip") and user:
            endpoint = SshEndpoint(host=str(instance["ip"]), port=self.options["ssh_port"], user=user)
        region = catalog.region_of(instance)
        return Observed(instance_id=str(instance["uuid"]), status=status, reason=reason, endpoint=endpoint,
                        location=Location(self.name, region or location.region), journal_id=journal_id)

    def _vm_instances(self, location: Location, vm: str) -> List[Observed]:
        found = []
        for instance in self._instances():
            ours, journal_id = catalog.instance_identity(instance.get("name"), vm)
            region = catalog.region_of(instance)
            if not ours or (region and location.region not in (ANY_REGION, region)):
                continue
            status, reason = catalog.status_of(instance)
            if status is None:
                continue  # terminated: gone
            found.append(self._observed(instance, status, reason, location, journal_id))
        return found

    def observe(self, location: Location, vm_name: str) -> List[Observed]:
        return self._vm_instances(location, validate_vm_name(vm_name))

    def sweep_locations(self) -> List[Location]:
        """One location, ANY_REGION: the listings are account-wide (owned.py). Pure."""
        from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.massedcompute.owned import (
            sweep_locations,
        )
        return sweep_locations(self)

    def list_owned(self, location: Location) -> List[Owned]:
        """Instances named <vm>_<journal id>, and at ANY_REGION or global the gpuprov SSH keys (owned.py)."""
        from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.massedcompute.owned import (
            list_owned,
        )
        return list_owned(self, location)

    # -- delete / cleanup -------------------------------------------------------------

    def delete(self, location: Location, vm_name: str, instance_ids: List[str]) -> None:
        validate_vm_name(vm_name)
        wanted = {str(i) for i in instance_ids}
        if not wanted:
            return
        # Terminate only what the listing still shows alive: an unknown or gone id is done.
        alive = sorted(str(i["uuid"]) for i in self._instances() if str(i["uuid"]) in wanted
                       and catalog.status_of(i)[0] not in (None, Status.TERMINATING))
        if alive:
            # Gone between the listing and the terminate: a 404, or "No valid VMs found".
            try:
                self.api.post("/instance/terminate", json={"instanceUuids": alive}, allow_status=(404,))
            except RestError as err:
                if not (err.status and 400 <= err.status < 500 and re.search(NO_VALID_VMS, err.msg, re.I)):
                    raise

    def cleanup(self, location: Location, vm_name: str) -> None:
        vm = validate_vm_name(vm_name)
        mine = catalog.journal_mark(self.journal_id) or None
        for key in self._get("/ssh-keys", "sshKeys"):
            if not isinstance(key, dict) or not key.get("id"):
                continue
            ours, mark = catalog.key_owner(key.get("name"), vm)
            if ours and mark in (None, mine):
                self.api.delete("/ssh-keys/%s" % key["id"], allow_status=(404,))
