# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Lambda Cloud adapter (the ``lambda`` cloud; the package is ``lambda_cloud`` because
``lambda`` is a Python keyword), on the shared REST client: no SDK, Lambda publishes
none that the REST API does not already cover.

Options: ``cloud_options.lambda`` (providers/cloud_options/lambda_cloud.py); the key
falls back to LAMBDA_API_KEY and is sent as ``Authorization: Bearer``.

* plan: ``GET /instance-types``: one offer per instance type x region with capacity,
  priced from ``price_cents_per_hour`` (whole instance, US cents). A type without
  capacity in a region searched is an unavailable offer saying so; a GPU Lambda does
  not have, or more of it than one instance holds, is InvalidRequest.
* prepare: the SSH key is reused when one with the same material exists (whatever its
  name), else registered as ``gpuprov-<vm>-<12 hex of sha256(key blob)>``; a firewall
  ruleset ``gpuprov-<vm>-j<8 hex of sha256(journal id)>`` in the offer's region lets in
  TCP 22 (the ssh_port, and the k3s ports with k3s_direct) from the allowed CIDRs only
  (their IPv4 ones: a rule's source is an IPv4 network, and instances have only IPv4).
  Lambda applies no firewall in us-south-1 (firewall_unsupported_regions): no ruleset.
* create: one ``POST /instance-operations/launch`` named after the VM, tagged
  gpuprov-vm-name and gpuprov-journal-id (and the user's tags, which must fit Lambda's
  tag rules: prepare refuses one that does not, before any call), with the ruleset and
  the boot script as cloud-init user data. A crash after it is adopted through observe
  (by name and tag).
* observe: ``GET /instances`` filtered here (the API has no filter); the endpoint is
  ``ip``:ssh_port as ssh_user once the instance is active with an ip.
* delete: terminates the listed ids the listing still shows alive; unknown = done.
* cleanup: deletes this journal's ruleset of the VM and the VM's ``gpuprov-<vm>-`` keys
  that no other journal's instance uses; Transient while the VM's own instance holds them.
"""

from __future__ import annotations

import ipaddress
from typing import Any, Dict, List, Optional

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    JOURNAL_ID_TAG, VM_NAME_TAG, BlockScope, Capabilities, ErrorKind, InstanceSpec, K3sAccess, Location, Observed,
    Offer, Owned, PowerOffBilling, ProviderError, ResourceRequest, SshEndpoint, Status, validate_vm_name,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.cloud_options.lambda_cloud import OPTIONS
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.common import check_regions, cidr_list, tcp_ports
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.gpus import canonical_gpu
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.lambda_cloud import catalog
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.lambda_cloud.errors import (
    OBJECT_DOES_NOT_EXIST, RULES,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.options import TypedOptionsProvider
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.rest import (
    MALFORMED_BODY, BearerToken, RestClient, RestError, classify,
)

K3S_DIRECT_PORTS = (6443, 80, 443)
USER_DATA_MAX_BYTES = 1024 * 1024   # "cannot exceed 1MB" (launch request schema)


class LambdaProvider(TypedOptionsProvider):
    name = "lambda"
    option_spec = OPTIONS

    def __init__(self, options: Optional[Dict[str, Any]] = None, journal_id: Optional[str] = None):
        super().__init__(options, journal_id=journal_id)
        if self.options["image_family"] and self.options["image_id"]:
            raise ProviderError(ErrorKind.INVALID_REQUEST, "cloud_options.lambda: image_family and image_id are "
                                                           "mutually exclusive")
        self._client: Optional[RestClient] = None

    # -- plumbing -------------------------------------------------------------------

    @property
    def api(self) -> RestClient:
        """The REST client, made on first use (capabilities need no key)."""
        if self._client is None:
            self.check_credentials()   # no key: refused here, naming its option and variable
            self._client = RestClient(self.options["api_url"], auth=BearerToken(self.options["api_key"] or ""),
                                      name="lambda", rules=RULES,
                                      timeout=(10.0, self.options["request_timeout_s"] or 60.0))
        return self._client

    def _data(self, body: Any, method: str, path: str, shape: type) -> Any:
        """The ``data`` of Lambda's envelope, or a classified malformed-body error."""
        data = body.get("data") if isinstance(body, dict) else None
        if isinstance(data, shape):
            return data
        kind, block = classify(RULES, 200, MALFORMED_BODY, "")
        raise RestError(kind, "lambda %s %s: HTTP 200 %s: expected {\"data\": %s}, got %.200s" % (
            method, path, MALFORMED_BODY, shape.__name__, body), block, status=200, code=MALFORMED_BODY)

    def _get(self, path: str, shape: type = list) -> Any:
        return self._data(self.api.get(path), "GET", path, shape)

    def _instances(self) -> List[Dict[str, Any]]:
        return [i for i in self._get("/instances") if isinstance(i, dict)]

    def capabilities(self) -> Capabilities:
        return Capabilities(
            kubernetes=True, boot_script=True, spot=False,
            k3s_access=K3sAccess.DIRECT if self.options["k3s_direct"] else K3sAccess.SSH_TUNNEL,
            boot_timeout_s=self.options["boot_timeout_s"], poll_interval_s=self.options["poll_interval_s"],
            python_interpreter=self.options["python_interpreter"] or None,
            # There is no stopped state: an instance bills from launch until it is terminated.
            poweroff_billing=PowerOffBilling.CONTINUES,
            poweroff_source="https://docs.lambda.ai/public-cloud/billing (billing ends the moment you terminate the "
                            "instance; billed regardless if actively used)")

    # -- plan -----------------------------------------------------------------------

    def plan(self, request: ResourceRequest) -> List[Offer]:
        validate_vm_name(request.vm_name)
        if request.spot:
            raise ProviderError(ErrorKind.INVALID_REQUEST, "spot: lambda has no spot instances")
        want = canonical_gpu(request.gpu)
        count = max(int(request.gpu_count or 1), 1)
        listing = self._get("/instance-types", dict)
        with_capacity = sorted({r for entry in listing.values() if isinstance(entry, dict)
                                for r in self._capacity(entry)})
        # The regions Lambda has: its documented PublicRegionCode enum, and any other the answer lists
        # capacity in (a region with none free now stays a known region: its offers are unavailable).
        asked = (check_regions("lambda", request.regions, set(catalog.KNOWN_REGIONS) | set(with_capacity),
                               first=with_capacity)
                 or list(self.options["regions"] or []))
        offers, seen_counts = [], []
        for entry in listing.values():
            kind = entry.get("instance_type") if isinstance(entry, dict) else None
            if not isinstance(kind, dict) or not kind.get("name"):
                continue
            gpu, gpus = catalog.gpu_of(kind["name"], kind.get("gpu_description"), kind.get("specs"))
            if want is not None and gpu != want:
                continue
            seen_counts.append(gpus)
            if want is not None and gpus < count:
                continue
            capacity = self._capacity(entry)
            regions = asked or capacity or with_capacity or list(catalog.KNOWN_REGIONS)
            for region in regions:
                offers.append(self._offer(kind, gpu, gpus, region, capacity))
        if want is not None and not offers:
            if not seen_counts:
                raise ProviderError(ErrorKind.INVALID_REQUEST, "gpu: lambda lists no instance type with %s" % want)
            raise ProviderError(ErrorKind.INVALID_REQUEST, "gpu_count: lambda's %s instance types hold at most %d "
                                "GPUs, %d asked" % (want, max(seen_counts), count))
        offers.sort(key=lambda o: (not o.available, o.price_per_hour if o.price_per_hour is not None else 1e9,
                                   o.instance_type, asked.index(o.region) if o.region in asked else 0, o.region))
        return offers

    @staticmethod
    def _capacity(entry: Dict[str, Any]) -> List[str]:
        return [r["name"] if isinstance(r, dict) else r for r in entry.get("regions_with_capacity_available") or []
                if (isinstance(r, dict) and r.get("name")) or isinstance(r, str)]

    def _offer(self, kind: Dict[str, Any], gpu: Optional[str], gpus: int, region: str,
               capacity: List[str]) -> Offer:
        cents = kind.get("price_cents_per_hour")
        price = round(cents / 100.0, 4) if isinstance(cents, (int, float)) and not isinstance(cents, bool) else None
        reason = None
        if region not in capacity:
            reason = ("lambda lists no capacity for %s in any region" % kind["name"] if not capacity else
                      "lambda lists no capacity for %s in %s (it has capacity in %s)" % (
                          kind["name"], region, ", ".join(capacity)))
        return Offer(cloud=self.name, region=region, instance_type=kind["name"], gpu=gpu, gpu_count=gpus,
                     price_per_hour=price, available=reason is None, unavailable_reason=reason,
                     detail={"gpu_description": kind.get("gpu_description"), "specs": kind.get("specs") or {}})

    # -- prepare ----------------------------------------------------------------------

    def _cidrs(self, spec: InstanceSpec) -> List[str]:
        given = cidr_list(spec.allowed_cidrs or self.options["allowed_cidrs"] or [])
        # A rule's source_network is an IPv4 network (format ipv4network) and instances have
        # only a public IPv4 address: IPv6 ranges could never reach one, so they are left out.
        cidrs = [c for c in given if ipaddress.ip_network(c).version == 4]
        if not cidrs:
            raise ProviderError(ErrorKind.INVALID_REQUEST, "allowed_cidrs: lambda needs the IPv4 source ranges of "
                                "the VM's firewall ruleset (the task's allowed_cidrs or cloud_options.lambda."
                                "allowed_cidrs)%s; 0.0.0.0/0 is never assumed" % (
                                    ", got only IPv6 (%s)" % ", ".join(given) if given else ""))
        return cidrs

    def _ports(self, spec: InstanceSpec) -> List[int]:
        extra = (self.options["ssh_port"],) + (K3S_DIRECT_PORTS if self.options["k3s_direct"] else ())
        return tcp_ports(spec.open_ports, extra)

    def _registered(self, material) -> Optional[str]:
        """The name of a registered key with this material, or None."""
        for key in self._get("/ssh-keys"):
            if isinstance(key, dict) and key.get("public_key") and key.get("name"):
                try:
                    if catalog.public_key_material(key["public_key"]) == material:
                        return key["name"]
                except ProviderError:
                    continue
        return None

    def _ssh_key(self, vm: str, public_key: str) -> str:
        """The name of a registered key with this material (registering it when none has)."""
        material = catalog.public_key_material(public_key)
        found = self._registered(material)
        if found:
            return found
        name = catalog.key_name(vm, public_key)
        try:
            made = self._data(self.api.post("/ssh-keys", json={"name": name, "public_key": " ".join(material)}),
                              "POST", "/ssh-keys", dict)
        except RestError as err:
            # A concurrent prepare may have registered the same material meanwhile: Lambda's
            # spec gives a taken name no code of its own (400 invalid-parameters), so look again.
            found = self._registered(material) if err.status in (400, 409) else None
            if not found:
                raise
            return found
        return made.get("name") or name

    def _rules(self, vm: str, cidrs: List[str], ports: List[int]) -> List[Dict[str, Any]]:
        return [{"protocol": "tcp", "port_range": [port, port], "source_network": cidr,
                 "description": "gpuprov %s tcp/%d" % (vm, port)} for port in ports for cidr in cidrs]

    @staticmethod
    def _same_rules(found: Any, wanted: List[Dict[str, Any]]) -> bool:
        def key(rule):
            return (rule.get("protocol"), tuple(rule.get("port_range") or ()), rule.get("source_network"))
        return isinstance(found, list) and sorted(key(r) for r in found if isinstance(r, dict)) == sorted(
            key(r) for r in wanted)

    def _ruleset(self, vm: str, region: str, rules: List[Dict[str, Any]]) -> Optional[str]:
        """The id of the VM's ruleset in ``region`` with exactly ``rules`` (made or patched)."""
        name = catalog.ruleset_name(vm, self.journal_id)
        for found in self._get("/firewall-rulesets"):
            if isinstance(found, dict) and found.get("name") == name and catalog.region_of(found) == region:
                if not self._same_rules(found.get("rules"), rules):
                    self.api.patch("/firewall-rulesets/%s" % found["id"], json={"rules": rules})
                return found["id"]
        made = self._data(self.api.post("/firewall-rulesets", json={"name": name, "region": region, "rules": rules}),
                          "POST", "/firewall-rulesets", dict)
        if not made.get("id"):
            self._data(None, "POST", "/firewall-rulesets", dict)  # raises: no id is a malformed answer
        return made["id"]

    def prepare(self, offer: Offer, spec: InstanceSpec) -> Dict[str, Any]:
        vm = validate_vm_name(spec.vm_name)
        catalog.check_tags(self.resource_tags(spec))  # a tag Lambda would refuse fails before any call
        cidrs, ports = self._cidrs(spec), self._ports(spec)
        key = self._ssh_key(vm, spec.ssh_public_key)
        firewall = offer.region not in (self.options["firewall_unsupported_regions"] or [])
        ruleset = self._ruleset(vm, offer.region, self._rules(vm, cidrs, ports)) if firewall else None
        return {"ssh_key_name": key, "firewall_ruleset_id": ruleset, "region": offer.region,
                "source_ranges": cidrs if firewall else [], "ports": ports if firewall else [],
                "ssh_user": self.options["ssh_user"]}

    # -- create -----------------------------------------------------------------------

    def create(self, offer: Offer, prepared: Dict[str, Any], spec: InstanceSpec) -> str:
        vm = validate_vm_name(spec.vm_name)
        tags = catalog.check_tags(self.resource_tags(spec))
        body: Dict[str, Any] = {
            "region_name": offer.region, "instance_type_name": offer.instance_type,
            "ssh_key_names": [prepared["ssh_key_name"]], "name": vm,
            "tags": [{"key": k, "value": v} for k, v in sorted(tags.items())],
        }
        if prepared.get("firewall_ruleset_id"):
            body["firewall_rulesets"] = [{"id": prepared["firewall_ruleset_id"]}]
        if self.options["image_family"]:
            body["image"] = {"family": self.options["image_family"]}
        elif self.options["image_id"]:
            body["image"] = {"id": self.options["image_id"]}
        if spec.boot_script is not None:
            user_data = spec.boot_script.to_shell()  # a "#!" script is cloud-init user data as it is
            if len(user_data.encode("utf-8")) > USER_DATA_MAX_BYTES:
                raise ProviderError(ErrorKind.INVALID_REQUEST, "boot script: %d bytes as user data, lambda takes "
                                    "at most 1 MB" % len(user_data.encode("utf-8")))
            body["user_data"] = user_data
        launched = self._data(self.api.post("/instance-operations/launch", json=body), "POST",
                              "/instance-operations/launch", dict)
        ids = launched.get("instance_ids")
        if not isinstance(ids, list):
            self._data(None, "POST", "/instance-operations/launch", dict)  # raises: malformed
        if not ids:
            # The launch was accepted but nothing came up: the vendor's way of saying no capacity.
            raise ProviderError(ErrorKind.CAPACITY, "lambda launch of %s in %s returned no instance id"
                                % (offer.instance_type, offer.region), BlockScope.OFFER)
        return str(ids[0])

    # -- observe ----------------------------------------------------------------------

    @staticmethod
    def _is_vm(instance: Dict[str, Any], vm: str) -> bool:
        tags = catalog.tags_of(instance)
        return tags.get(VM_NAME_TAG) == vm if VM_NAME_TAG in tags else instance.get("name") == vm

    def _observed(self, instance: Dict[str, Any], location: Location) -> Observed:
        raw = instance.get("status")
        status = catalog.STATUSES.get(raw, Status.PENDING)
        ip = instance.get("ip")
        endpoint = None
        if raw == "active" and ip:
            endpoint = SshEndpoint(host=ip, port=self.options["ssh_port"], user=self.options["ssh_user"])
        reason = None if raw == "active" else "lambda status %s" % raw
        if raw == "unhealthy":
            reason = "lambda reports the instance unhealthy (it will not become usable on its own)"
        return Observed(instance_id=str(instance.get("id")), status=status, reason=reason, endpoint=endpoint,
                        location=Location(self.name, catalog.region_of(instance) or location.region),
                        journal_id=catalog.tags_of(instance).get(JOURNAL_ID_TAG) or None)

    def _vm_instances(self, location: Location, vm: str) -> List[Dict[str, Any]]:
        """The listing's instances of ``vm`` at ``location`` that are not gone (raw)."""
        return [i for i in self._instances() if i.get("status") != catalog.GONE and i.get("id")
                and self._is_vm(i, vm) and catalog.region_of(i) in (None, location.region)]

    def observe(self, location: Location, vm_name: str) -> List[Observed]:
        vm = validate_vm_name(vm_name)
        return [self._observed(i, location) for i in self._vm_instances(location, vm)]

    def observe_all(self, location: Location) -> Optional[List[Observed]]:
        """Every instance of the account in the region that is not gone (the fleet's poll: one listing)."""
        if not self.journal_id:
            return None
        return [self._observed(i, location) for i in self._instances() if i.get("status") != catalog.GONE
                and i.get("id") and catalog.region_of(i) in (None, location.region)]

    def diagnose(self, location: Location, vm_name: str) -> Dict[str, Any]:
        """observe plus Lambda's own fields (status, type, rulesets, actions) and findings."""
        from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.lambda_cloud.diagnose import diagnose
        return diagnose(self, location, validate_vm_name(vm_name))

    def sweep_locations(self) -> List[Location]:
        """One location, ANY_REGION: every listing is account-wide (owned.py). Pure."""
        from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.lambda_cloud.owned import sweep_locations
        return sweep_locations(self)

    def list_owned(self, location: Location) -> List[Owned]:
        """Tagged instances, gpuprov rulesets and, at ANY_REGION or global, gpuprov SSH keys (owned.py)."""
        from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.lambda_cloud.owned import list_owned
        return list_owned(self, location)

    # -- delete / cleanup -------------------------------------------------------------

    def delete(self, location: Location, vm_name: str, instance_ids: List[str]) -> None:
        validate_vm_name(vm_name)
        wanted = {str(i) for i in instance_ids}
        if not wanted:
            return
        # Terminate only what the listing still shows alive: an unknown or gone id is done.
        alive = sorted(str(i["id"]) for i in self._instances()
                       if str(i.get("id")) in wanted and i.get("status") not in ("terminating", catalog.GONE))
        if not alive:
            return
        try:
            self.api.post("/instance-operations/terminate", json={"instance_ids": alive})
        except RestError as err:
            if err.code != OBJECT_DOES_NOT_EXIST and err.status != 404:
                raise  # 404: gone between the listing and the terminate

    def cleanup(self, location: Location, vm_name: str) -> None:
        vm = validate_vm_name(vm_name)
        instances = [i for i in self._instances() if i.get("status") != catalog.GONE]
        name = catalog.ruleset_name(vm, self.journal_id)
        for found in self._get("/firewall-rulesets"):
            if isinstance(found, dict) and found.get("name") == name and catalog.region_of(found) == location.region:
                # In use by an instance still terminating: Lambda answers ruleset-in-use (Transient).
                self.api.delete("/firewall-rulesets/%s" % found["id"], allow_status=(404,))
        prefix = catalog.key_prefix(vm)
        for key in self._get("/ssh-keys"):
            if not (isinstance(key, dict) and str(key.get("name", "")).startswith(prefix)
                    and len(key["name"]) == len(prefix) + 12):
                continue
            users = [i for i in instances if key["name"] in (i.get("ssh_key_names") or [])]
            if any(not self._own_vm_instance(i, vm) for i in users):
                continue  # shared with another VM or another journal's instance: not ours to remove
            if users:
                raise ProviderError(ErrorKind.TRANSIENT, "lambda ssh key %s is still used by instance(s) %s" % (
                    key["name"], ", ".join(sorted(str(i.get("id")) for i in users))))
            self.api.delete("/ssh-keys/%s" % key["id"], allow_status=(404,))

    def _own_vm_instance(self, instance: Dict[str, Any], vm: str) -> bool:
        """An instance of this VM made by this journal (or before journal ids)."""
        made_by = catalog.tags_of(instance).get(JOURNAL_ID_TAG) or None
        return self._is_vm(instance, vm) and (made_by is None or made_by == self.journal_id)
