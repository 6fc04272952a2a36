# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Hyperstack (NexGen Cloud) adapter, on the shared REST client (the Infrahub API v1; the
official SDK is generated from the same OpenAPI and adds nothing this needs).

Options: ``cloud_options.hyperstack`` (providers/cloud_options/hyperstack.py); the key
falls back to HYPERSTACK_API_KEY and is sent in the ``api_key`` header (not Bearer).

Hyperstack scopes everything to an *environment* (one region): keys and VMs are made in
one, so gpuprov keeps its own ``gpuprov-<region>`` per region.

* plan: ``GET /core/flavors`` (flavors by GPU model and region, with ``stock_available``)
  priced from ``GET /pricebook`` (USD per GPU-hour by model) times the flavor's GPUs. A
  flavor without stock is an unavailable offer saying so; a GPU Hyperstack has no flavor
  of, or more of it than one flavor holds, is InvalidRequest.
* prepare: the environment ``gpuprov-<region>`` is reused or made; the SSH key is reused
  when one with the same material is in it (whatever its name), else imported as
  ``gpuprov-<vm>-<12 hex of sha256(key blob)>``. Nothing else: the VM's security rules
  (TCP ssh_port, open_ports and with k3s_direct the k3s ports, from the allowed CIDRs
  only) travel inline in the create and go with the VM.
* create: one ``POST /core/virtual-machines`` (count 1) named after the VM, labelled
  ``gpuprov-vm-name=<vm>`` and ``gpuprov-journal-id=<id>``, with a public IP and port
  randomization off (the API reports no mapped port: with it on, the SSH port is
  unknowable), the boot script as cloud-init user data.
* observe: ``GET /core/virtual-machines`` of the environment (all pages), filtered here by
  label (or name); the endpoint is ``floating_ip``:ssh_port as ssh_user once the VM is ACTIVE with
  its public IP attached.
* delete: ``DELETE /core/virtual-machines/{id}`` for each given id the listing shows not
  already deleting; unknown = done. "Still being created" is Transient.
* cleanup: deletes the VM's ``gpuprov-<vm>-`` keys that no other VM or journal uses
  (Transient while its own VM still holds them), then the environment when nothing at all
  is left in it: no VM, key, volume, firewall or Kubernetes cluster of anyone.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    ApiLimit, JOURNAL_ID_TAG, VM_NAME_TAG, Capabilities, ErrorKind, InstanceSpec, K3sAccess, Location, Observed, Offer,
    Owned, PowerOffBilling, ProviderError, ResourceRequest, SshEndpoint, Status, tag_changes, validate_vm_name,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.cloud_options.hyperstack import OPTIONS
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.common import check_regions, cidr_list, tcp_ports
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.gpus import canonical_gpu
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.hyperstack import catalog
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.hyperstack.errors import ALREADY_EXIST, RULES
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.options import TypedOptionsProvider
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.rest import (
    MALFORMED_BODY, HeaderToken, PageNumber, RestClient, RestError, classify,
)

K3S_DIRECT_PORTS = (6443, 80, 443)
PAGE_SIZE = 100
ATTACHED = "ATTACHED"


class Pages(PageNumber):
    """Hyperstack's ``page``/``pageSize`` query (the OpenAPI's names: a ``page_size`` query is
    ignored and the server's default size applies). A page shorter than the size the answer
    reports in ``page_size`` (the server may cap ours) is the last; so is one longer than the
    size asked (the server did not page: it sent everything). The listing ends too once the
    ``count`` of the answer came (every listing's total, as the official SDK's list models
    carry it), or at a page that repeats the last (a server that ignores ``page``)."""

    def __init__(self, size: int = PAGE_SIZE):
        super().__init__(param="page", size_param="pageSize", size=size, total_field="count")

    def follow(self, body: Any, url: str, params: Dict[str, Any], page: List[Any],
               fetched: int) -> Optional[Tuple[str, Dict[str, Any]]]:
        reported = body.get("page_size") if isinstance(body, dict) else None
        size = self.size
        if isinstance(reported, int) and not isinstance(reported, bool) and 0 < reported < size:
            size = reported
        if not page or len(page) < size or len(page) > self.size:
            return None
        return url, dict(params, **{self.param: int(params[self.param]) + 1})


def _checked_user_labels(tags: Dict[str, str]) -> None:
    """InvalidRequest naming a tag whose ``name=value`` label Hyperstack would split (it reads a space as
    the start of another label) or read back under another name (the name is what comes before the first '=')."""
    for key, value in sorted(tags.items()):
        if "=" in key:
            raise ProviderError(ErrorKind.INVALID_REQUEST, "tags: %r cannot be a Hyperstack label name (a label is "
                                "<name>=<value>, so a name holds no '=')" % (key,))
        label = "%s=%s" % (key, value)
        if any(c.isspace() for c in label):
            raise ProviderError(ErrorKind.INVALID_REQUEST, "tags.%s: %r cannot be a Hyperstack label (no spaces: "
                                "Hyperstack reads a space as the start of another label)" % (key, label))


class HyperstackProvider(TypedOptionsProvider):
    name = "hyperstack"
    option_spec = OPTIONS
    # 500 requests a minute per source IP, over every endpoint (then 429 for the rest of the minute).
    api_limits = (ApiLimit(500, 60.0, source="https://docs.hyperstack.cloud/docs/api-reference/rate-limits"),)

    def __init__(self, options: Optional[Dict[str, Any]] = None, journal_id: Optional[str] = None):
        super().__init__(options, journal_id=journal_id)
        self._client: Optional[RestClient] = None

    # -- plumbing -------------------------------------------------------------------

    @property
    def api(self) -> RestClient:
        """The REST client, made on first use (capabilities need no key)."""
        if self._client is None:
            self.check_credentials()   # no key: refused here, naming its option and variable
            auth = HeaderToken("api_key", self.options["api_key"] or "", option="api_key")
            self._client = RestClient(self.options["api_url"], auth=auth, name="hyperstack", rules=RULES,
                                      before_send=self.paced,
                                      timeout=(10.0, self.options["request_timeout_s"] or 60.0))
        return self._client

    def _field(self, body: Any, method: str, path: str, field: Optional[str], shape: type) -> Any:
        """``body[field]`` (the body itself for None) of the documented shape. An envelope
        with ``status: false`` is the vendor's refusal; anything else is malformed."""
        if isinstance(body, dict) and body.get("status") is False:
            raise self.api.error_for(400, body, method, path)
        value = body.get(field) if field and isinstance(body, dict) else (body if not field else None)
        if isinstance(value, shape):
            return value
        kind, block = classify(RULES, 200, MALFORMED_BODY, "")
        raise RestError(kind, "hyperstack %s %s: HTTP 200 %s: expected %s, got %.200s" % (
            method, path, MALFORMED_BODY, field or shape.__name__, body), block, status=200, code=MALFORMED_BODY)

    def _list(self, path: str, items: str, **params: Any) -> List[Dict[str, Any]]:
        """Every item of a paged listing (``page``/``pageSize``), dicts only."""
        return [i for i in self.api.paginate(path, items=items, paging=Pages(), params=params) if isinstance(i, dict)]

    def capabilities(self) -> Capabilities:
        return Capabilities(
            kubernetes=True, boot_script=True, spot=False,
            k3s_access=K3sAccess.DIRECT if self.options["k3s_direct"] else K3sAccess.SSH_TUNNEL,
            boot_timeout_s=self.options["boot_timeout_s"], poll_interval_s=self.options["poll_interval_s"],
            python_interpreter=self.options["python_interpreter"] or None,
            # A VM shut off keeps every resource of its flavor reserved and bills in full; only HIBERNATED (through
            # the API) or a delete ends the flavor's billing. The create request has no shutdown field.
            poweroff_billing=PowerOffBilling.CONTINUES,
            poweroff_source="https://infrahub-doc.nexgencloud.com/docs/billing/states-and-billing (SHUTOFF: billing "
                            "continues for all resources; HIBERNATED or DELETED to stop it)")

    # -- plan -----------------------------------------------------------------------

    def _prices(self) -> Dict[str, float]:
        """USD per GPU-hour by upper-cased model name (the pricebook is a bare array)."""
        book = self._field(self.api.get("/pricebook"), "GET", "/pricebook", None, list)
        prices = {}
        for entry in book:
            value = entry.get("value") if isinstance(entry, dict) else None
            if isinstance(entry, dict) and isinstance(entry.get("name"), str) and isinstance(value, (int, float)) \
                    and not isinstance(value, bool):
                prices[entry["name"].upper()] = float(value)
        return prices

    def _flavors(self) -> List[Dict[str, Any]]:
        """Every flavor, its group's gpu and region filled in where the flavor lacks them."""
        groups = self._field(self.api.get("/core/flavors"), "GET", "/core/flavors", "data", list)
        found = []
        for group in groups:
            if not isinstance(group, dict):
                continue
            for flavor in group.get("flavors") or []:
                if isinstance(flavor, dict) and flavor.get("name"):
                    found.append(dict(flavor, gpu=flavor.get("gpu") or group.get("gpu") or "",
                                      region_name=flavor.get("region_name") or group.get("region_name")))
        return found

    def plan(self, request: ResourceRequest) -> List[Offer]:
        validate_vm_name(request.vm_name)
        if request.spot:
            raise ProviderError(ErrorKind.INVALID_REQUEST, "spot: hyperstack offers no spot VMs through this API")
        want = canonical_gpu(request.gpu)
        count = max(int(request.gpu_count or 1), 1)
        flavors = self._flavors()
        # The regions Hyperstack has: those of its flavors (listed whether in stock or not).
        asked = (check_regions("hyperstack", request.regions, {f["region_name"] for f in flavors if f["region_name"]})
                 or list(self.options["regions"] or []))
        prices = self._prices()
        offers, seen_counts = [], []
        for flavor in flavors:
            gpus = flavor.get("gpu_count") if isinstance(flavor.get("gpu_count"), int) else 0
            gpu = catalog.gpu_of(flavor["gpu"]) if gpus else None
            if want is None and gpus:
                continue  # a CPU ask takes CPU flavors
            if want is not None and gpu != want:
                continue
            seen_counts.append(gpus)
            if want is not None and gpus < count:
                continue
            if asked and flavor.get("region_name") not in asked:
                continue
            offers.append(self._offer(flavor, gpu, gpus, prices))
        if want is not None and not seen_counts:
            raise ProviderError(ErrorKind.INVALID_REQUEST, "gpu: hyperstack lists no flavor with %s" % want)
        if want is not None and max(seen_counts) < count:
            raise ProviderError(ErrorKind.INVALID_REQUEST, "gpu_count: hyperstack's %s flavors hold at most %d "
                                "GPUs, %d asked" % (want, max(seen_counts), count))
        offers.sort(key=lambda o: (not o.available, o.price_per_hour if o.price_per_hour is not None else 1e9,
                                   asked.index(o.region) if o.region in asked else 0, o.instance_type, o.region))
        return offers

    def _offer(self, flavor: Dict[str, Any], gpu: Optional[str], gpus: int, prices: Dict[str, float]) -> Offer:
        model = flavor["gpu"]
        per_gpu = prices.get(model.upper()) if model else None
        price = round(per_gpu * gpus, 4) if per_gpu is not None and gpus else None
        region = flavor.get("region_name") or ""
        reason = None
        if flavor.get("stock_available") is not True:
            reason = "hyperstack lists no stock of %s in %s" % (flavor["name"], region)
        return Offer(cloud=self.name, region=region, instance_type=flavor["name"], gpu=gpu, gpu_count=gpus,
                     price_per_hour=price, available=reason is None, unavailable_reason=reason,
                     detail={"flavor_id": flavor.get("id"), "gpu_model": model, "price_per_gpu_hour": per_gpu,
                             "cpu": flavor.get("cpu"), "ram_gb": flavor.get("ram"), "disk_gb": flavor.get("disk"),
                             "ephemeral_gb": flavor.get("ephemeral")})

    # -- prepare ----------------------------------------------------------------------

    def _cidrs(self, spec: InstanceSpec) -> List[str]:
        cidrs = cidr_list(spec.allowed_cidrs or self.options["allowed_cidrs"] or [])
        if not cidrs:
            raise ProviderError(ErrorKind.INVALID_REQUEST, "allowed_cidrs: hyperstack needs the source ranges of "
                                "the VM's security rules (the task's allowed_cidrs or cloud_options.hyperstack."
                                "allowed_cidrs); 0.0.0.0/0 is never assumed")
        return cidrs

    def _ports(self, spec: InstanceSpec) -> List[int]:
        extra = (self.options["ssh_port"],) + (K3S_DIRECT_PORTS if self.options["k3s_direct"] else ())
        return tcp_ports(spec.open_ports, extra)

    def _environment(self, name: str) -> Optional[Dict[str, Any]]:
        # No ``search``: its matching is undocumented, and a miss here would orphan keys.
        for env in self._list("/core/environments", "environments"):
            if env.get("name") == name:
                return env
        return None

    def _ensure_environment(self, region: str) -> str:
        """``gpuprov-<region>``, made when missing (a concurrent maker's 409 is as good)."""
        name = catalog.environment_name(region)
        found = self._environment(name)
        if found is not None:
            if found.get("region") not in (None, region):
                raise ProviderError(ErrorKind.INVALID_REQUEST, "hyperstack environment %s is in %s, not %s; "
                                    "gpuprov keeps one environment per region under that name"
                                    % (name, found.get("region"), region))
            return name
        try:
            self._field(self.api.post("/core/environments", json={"name": name, "region": region}), "POST",
                        "/core/environments", "environment", dict)
        except RestError as err:
            if err.status != 409 and err.code != ALREADY_EXIST:
                raise
        return name

    def _ssh_key(self, vm: str, environment: str, public_key: str) -> str:
        """The name of a key in ``environment`` with this material (importing it when none has)."""
        material = catalog.public_key_material(public_key)
        for key in self._list("/core/keypairs", "keypairs"):
            if catalog.environment_of(key) != environment or not key.get("public_key"):
                continue
            try:
                if catalog.public_key_material(key["public_key"]) == material:
                    return key["name"]
            except ProviderError:
                continue
        name = catalog.key_name(vm, public_key)
        body = {"name": name, "environment_name": environment, "public_key": " ".join(material)}
        try:
            self._field(self.api.post("/core/keypairs", json=body), "POST", "/core/keypairs", "keypair", dict)
        except RestError as err:
            if err.status == 404:
                # The environment went between our listing and the import (another VM's cleanup
                # found it empty): a retried prepare makes it again.
                raise ProviderError(ErrorKind.TRANSIENT, "hyperstack environment %s went while its SSH key was "
                                    "imported (%s); prepare again" % (environment, err.msg)) from err
            if err.status != 409 and err.code != ALREADY_EXIST:
                raise
        return name

    def prepare(self, offer: Offer, spec: InstanceSpec) -> Dict[str, Any]:
        vm = validate_vm_name(spec.vm_name)
        _checked_user_labels(spec.tags)   # a tag Hyperstack would split fails before any call
        cidrs, ports = self._cidrs(spec), self._ports(spec)
        environment = self._ensure_environment(offer.region)
        key = self._ssh_key(vm, environment, spec.ssh_public_key)
        return {"environment_name": environment, "key_name": key, "region": offer.region, "source_ranges": cidrs,
                "ports": ports, "ssh_user": self.options["ssh_user"]}

    # -- create -----------------------------------------------------------------------

    @staticmethod
    def _security_rules(cidrs: List[str], ports: List[int]) -> List[Dict[str, Any]]:
        return [{"direction": "ingress", "protocol": "tcp", "ethertype": "IPv6" if ":" in cidr else "IPv4",
                 "remote_ip_prefix": cidr, "port_range_min": port, "port_range_max": port}
                for port in ports for cidr in cidrs]

    def create(self, offer: Offer, prepared: Dict[str, Any], spec: InstanceSpec) -> str:
        vm = validate_vm_name(spec.vm_name)
        body: Dict[str, Any] = {
            "name": catalog.vm_name(vm), "environment_name": prepared["environment_name"],
            "image_name": self.options["image_name"], "flavor_name": offer.instance_type,
            "key_name": prepared["key_name"], "count": 1, "assign_floating_ip": True,
            "enable_port_randomization": False,
            "security_rules": self._security_rules(prepared["source_ranges"], prepared["ports"]),
            "labels": catalog.labels(self.resource_tags(spec)),   # the user's labels under the identity ones
        }
        if spec.boot_script is not None:
            body["user_data"] = spec.boot_script.to_shell()  # a "#!" script is cloud-init user data as it is
        made = self._field(self.api.post("/core/virtual-machines", json=body), "POST", "/core/virtual-machines",
                           "instances", list)
        if not made or not isinstance(made[0], dict) or made[0].get("id") is None:
            self._field(None, "POST", "/core/virtual-machines", "instances", dict)  # raises: malformed
        return str(made[0]["id"])

    # -- retag ------------------------------------------------------------------------

    can_retag = True

    def retag(self, location: Location, vm_name: str, instance_id: str, tags: Dict[str, str], purge: bool,
              check: bool = False) -> Dict[str, Any]:
        """The VM's user labels (``name=value``): one ``PUT /core/virtual-machines/{id}/label``, which sets
        the VM's whole label list, where they differ. gpuprov's labels and labels without ``=`` (not made by
        the tags option) stay as they are."""
        vm = validate_vm_name(vm_name)
        _checked_user_labels(tags)
        path = "/core/virtual-machines/%s" % instance_id
        found = self.api.get(path, allow_status=(404,)) if str(instance_id).isdigit() else None
        instance = found.get("instance") if isinstance(found, dict) else None
        if not isinstance(instance, dict) or not self._is_vm(instance, vm):
            raise ProviderError(ErrorKind.INVALID_REQUEST, "tags: %s is not a VM of %s" % (instance_id, vm))
        current = catalog.tags_of(instance)
        changes = tag_changes(current, dict(tags), purge, keep=lambda name: name.startswith("gpuprov-"))
        if check or not (changes["set"] or changes["removed"]):
            return changes
        plain = [text for text in (label.get("label") if isinstance(label, dict) else label
                                   for label in instance.get("labels") or [])
                 if isinstance(text, str) and "=" not in text]
        current.update(changes["set"])
        for name in changes["removed"]:
            current.pop(name)
        self.api.put(path + "/label", json={"labels": plain + catalog.labels(current)})
        return changes

    # -- observe ----------------------------------------------------------------------

    def _instances(self, environment: str) -> List[Dict[str, Any]]:
        """The environment's VMs that are not gone. No ``search`` by name: how it matches is
        undocumented, and a VM it missed would be created twice after a crash."""
        params = {"environment": environment, "exact_environment_match": "true"}
        return [i for i in self._list("/core/virtual-machines", "instances", **params)
                if i.get("id") is not None and i.get("status") not in catalog.GONE
                and catalog.environment_of(i) in (None, environment)]

    @staticmethod
    def _is_vm(instance: Dict[str, Any], vm: str) -> bool:
        tags = catalog.tags_of(instance)
        return tags.get(VM_NAME_TAG) == vm if VM_NAME_TAG in tags else instance.get("name") == catalog.vm_name(vm)

    def _vm_instances(self, location: Location, vm: str) -> List[Dict[str, Any]]:
        environment = catalog.environment_name(location.region)
        return [i for i in self._instances(environment) if self._is_vm(i, vm)]

    def _observed(self, instance: Dict[str, Any], location: Location) -> Observed:
        raw = str(instance.get("status") or "").upper()
        status = catalog.STATUSES.get(raw, Status.PENDING)
        endpoint, reason = None, None
        if raw != "ACTIVE":
            reason = "hyperstack status %s" % (raw or "unknown")
            if raw == "ERROR":
                reason = "hyperstack reports the VM in ERROR (it will not become usable on its own)"
        elif instance.get("port_randomization") is True:
            reason = ("hyperstack VM has port randomization on: the API reports no mapped SSH port, so it has no "
                      "known endpoint (gpuprov makes its VMs with it off)")
        elif str(instance.get("vm_state") or "active").lower() != "active":
            reason = "hyperstack vm_state %s" % instance.get("vm_state")
        elif not instance.get("floating_ip") or (instance.get("floating_ip_status") or ATTACHED) != ATTACHED:
            reason = "hyperstack public IP %s" % (instance.get("floating_ip_status") or "not assigned yet")
        else:
            endpoint = SshEndpoint(host=instance["floating_ip"], port=self.options["ssh_port"],
                                   user=self.options["ssh_user"])
        return Observed(instance_id=str(instance["id"]), status=status, reason=reason, endpoint=endpoint,
                        location=Location(self.name, location.region),
                        journal_id=catalog.tags_of(instance).get(JOURNAL_ID_TAG) or None)

    def observe(self, location: Location, vm_name: str) -> List[Observed]:
        vm = validate_vm_name(vm_name)
        return [self._observed(i, location) for i in self._vm_instances(location, vm)]

    def observe_all(self, location: Location) -> Optional[List[Observed]]:
        """Every VM of the region's gpuprov environment, whoever made it (the fleet's poll: one listing)."""
        if not self.journal_id:
            return None
        return [self._observed(i, location) for i in self._instances(catalog.environment_name(location.region))]

    def sweep_locations(self) -> List[Location]:
        """One location, ANY_REGION: the listings cover every environment (owned.py). Pure."""
        from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.hyperstack.owned import sweep_locations
        return sweep_locations(self)

    def list_owned(self, location: Location) -> List[Owned]:
        """Labelled VMs, gpuprov SSH keys and the gpuprov-<region> environments (owned.py)."""
        from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.hyperstack.owned import list_owned
        return list_owned(self, location)

    # -- delete / cleanup -------------------------------------------------------------

    def delete(self, location: Location, vm_name: str, instance_ids: List[str]) -> None:
        validate_vm_name(vm_name)
        wanted = {str(i) for i in instance_ids}
        if not wanted:
            return
        # Delete only what the listing still shows and not already deleting: an unknown id is done.
        environment = catalog.environment_name(location.region)
        alive = sorted(str(i["id"]) for i in self._instances(environment)
                       if str(i["id"]) in wanted and str(i.get("status") or "").upper() != "DELETING")
        for instance_id in alive:
            self.api.delete("/core/virtual-machines/%s" % instance_id, allow_status=(404,))

    def cleanup(self, location: Location, vm_name: str) -> None:
        vm = validate_vm_name(vm_name)
        environment = catalog.environment_name(location.region)
        found = self._environment(environment)
        if found is None:
            return  # nothing of gpuprov's in this region
        instances = self._instances(environment)
        prefix = catalog.key_prefix(vm)
        keys = [k for k in self._list("/core/keypairs", "keypairs") if catalog.environment_of(k) == environment]
        for key in keys:
            name = str(key.get("name", ""))
            if not (name.startswith(prefix) and len(name) == len(prefix) + 12):
                continue
            users = [i for i in instances if (i.get("keypair") or {}).get("name") == name]
            if any(not self._own_vm_instance(i, vm) for i in users):
                continue  # shared with another VM or another journal's VM: not ours to remove
            if users:
                raise ProviderError(ErrorKind.TRANSIENT, "hyperstack ssh key %s is still used by VM(s) %s" % (
                    name, ", ".join(sorted(str(i.get("id")) for i in users))))
            self.api.delete("/core/keypair/%s" % key["id"], allow_status=(404,))
            key["_deleted"] = True
        self._remove_environment_if_empty(found, instances, [k for k in keys if not k.get("_deleted")])

    def _remove_environment_if_empty(self, env: Dict[str, Any], instances: List[Dict[str, Any]],
                                     keys: List[Dict[str, Any]]) -> None:
        """Delete ``env`` when it holds nothing of anyone's: no VM, key, volume, firewall or
        Kubernetes cluster. A listing this key may not read keeps it (an empty environment costs
        nothing; deleting a full one is not ours to risk)."""
        name = env.get("name")
        if instances or keys or env.get("id") is None:
            return
        for path, items in (("/core/volumes", "volumes"), ("/core/firewalls", "firewalls"),
                            ("/core/clusters", "clusters")):
            try:
                if any(catalog.environment_of(x) == name for x in self._list(path, items, environment=name)):
                    return
            except RestError as err:
                if err.status in (403, 404, 405):
                    return
                raise
        try:
            self.api.delete("/core/environments/%s" % env["id"], allow_status=(404,))
        except RestError as err:
            if err.status not in (400, 409):
                raise
            # Something of someone else's arrived since the listings: the environment stays.

    def _own_vm_instance(self, instance: Dict[str, Any], vm: str) -> bool:
        """A VM of this vm name made by this journal (or before journal ids)."""
        made_by = catalog.tags_of(instance).get(JOURNAL_ID_TAG) or None
        return self._is_vm(instance, vm) and (made_by is None or made_by == self.journal_id)
