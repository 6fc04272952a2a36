# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""DigitalOcean adapter (the ``digitalocean`` cloud): GPU Droplets through the REST API v2,
on the shared REST client (pydo, DigitalOcean's generated SDK, adds nothing the client lacks).

Options: ``cloud_options.digitalocean`` (providers/cloud_options/digitalocean.py); the token
falls back to DIGITALOCEAN_TOKEN (then DIGITALOCEAN_ACCESS_TOKEN, DO_API_TOKEN, DO_API_KEY,
DO_OAUTH_TOKEN) and is sent as ``Authorization: Bearer``. Listings follow ``links.pages.next``
200 items a page.

* plan: ``GET /sizes``: one offer per GPU size x region where DigitalOcean lists it as
  creatable, priced from ``price_hourly`` (USD, whole droplet). A size marked unavailable,
  or a region asked for that the size does not list, is an unavailable offer saying so; a
  GPU DigitalOcean does not have, or more of it than one droplet holds, is InvalidRequest.
  ``-spot`` sizes are left out. A request without a GPU is offered the ``cpu_sizes``.
* prepare: the SSH key is reused when one with the same material exists (DigitalOcean holds
  each key once, whatever its name), else registered as ``gpuprov-<vm>-<12 hex>``; a cloud
  firewall ``gpuprov-<vm>-j<8 hex of sha256(journal id)>`` lets in TCP 22 (the ssh_port, and the
  k3s ports with k3s_direct) from the allowed CIDRs only, and everything out; it applies to
  the droplets carrying its tag ``gpuprov-firewall:<firewall name>`` (made here: a firewall's
  tags must exist), so the droplet is behind it from its first boot with no second call.
* create: one ``POST /droplets`` named after the VM, tagged ``gpuprov-vm-name:<vm>``,
  ``gpuprov-journal-id:<journal id>`` and the firewall's tag, with the boot script as user
  data. A crash after it is adopted through observe (by tag).
* observe: ``GET /droplets?tag_name=gpuprov-vm-name:<vm>`` and ``GET /droplets?name=<vm>&type=gpus``,
  keeping the droplets that carry the VM's tag: DigitalOcean lists "only non-GPU Droplets by
  default" and a tag filter cannot be combined with ``type``, so the tag listing alone may miss a
  GPU droplet and the name listing alone misses a CPU one. The endpoint is the public IPv4
  address:ssh_port as ssh_user once the droplet is active.
* delete: ``DELETE /droplets/<id>`` for each id; unknown (404) = done.
* cleanup: deletes this journal's firewall of the VM and its tag, and the VM's
  ``gpuprov-<vm>-`` keys unless another journal's droplet of the VM is alive (a key only
  matters when a droplet is created: DigitalOcean copies it into the droplet). The identity
  tags stay: deleting a tag untags every resource still carrying it.
"""

from __future__ import annotations

import re
import time
from typing import Any, Dict, List, Optional, Tuple

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    ApiLimit, GPUPROV_TAG_PREFIX, JOURNAL_ID_TAG, Capabilities, ErrorKind, InstanceSpec, K3sAccess, Location, Observed, Offer,
    Owned, PowerOffBilling, ProviderError, ResourceRequest, SshEndpoint, Status, tag_changes, validate_vm_name,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.cloud_options.digitalocean import OPTIONS
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.common import check_regions, cidr_list, tcp_ports
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.digitalocean import catalog
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.digitalocean.errors import (
    KEY_IN_USE, PENDING_EVENT, RULES, retry_after_from_reset,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.gpus import canonical_gpu
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.options import TypedOptionsProvider
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.rest import (
    MALFORMED_BODY, BearerToken, NextLink, RestClient, RestError, classify,
)

K3S_DIRECT_PORTS = (6443, 80, 443)
_USER_TAG_RE = re.compile(r"^[A-Za-z0-9:_-]{1,255}$")   # what DigitalOcean takes as a tag name
USER_DATA_MAX_BYTES = 64 * 1024     # "may not exceed 64 KiB" (droplet create schema)
PER_PAGE = 200                      # the API's maximum page size
LISTING_PAGES = NextLink("links.pages.next", total_field="meta.total")
# Where DigitalOcean's GPU Droplets run (its GPU docs): the regions a sold-out GPU size is
# reported unavailable in when it lists none and the request names none.
GPU_REGIONS = ("nyc2", "tor1", "atl1", "ams3")
# Everything out: a cloud firewall without outbound rules blocks all outbound traffic. "1-65535" is a
# range, valid in the schema; its "0" (and doctl's "all") mean the same, and any of them may be read back.
OUTBOUND_RULES = [{"protocol": proto, "ports": "1-65535", "destinations": {"addresses": ["0.0.0.0/0", "::/0"]}}
                  for proto in ("tcp", "udp")]
_ALL_PORTS = ("0", "all", "1-65535")


# DigitalOcean's request limits per token: 250 a minute and 5,000 an hour (the ratelimit-limit headers).
RATE_LIMIT_PAGE = "https://docs.digitalocean.com/reference/api/intro/#rate-limit"


class DigitalOceanClient(RestClient):
    """The shared REST client, reading DigitalOcean's hourly-limit 429 too: only a burst-limit 429
    carries ``retry-after``; the hourly one says when to come back in ``ratelimit-reset`` alone."""

    def _decode(self, method, url, response, expect, allow_status):
        if response.status_code == 429 and not response.headers.get("Retry-After"):
            wait = retry_after_from_reset(response.headers.get("ratelimit-reset"), time.time())
            if wait is not None:
                response.headers["Retry-After"] = "%d" % round(wait)
        return super()._decode(method, url, response, expect, allow_status)


class DigitalOceanProvider(TypedOptionsProvider):
    name = "digitalocean"
    option_spec = OPTIONS
    # Per token (the ratelimit-limit headers; docs.digitalocean.com/reference/api/intro/, "Rate Limit").
    api_limits = (ApiLimit(250, 60.0, source=RATE_LIMIT_PAGE), ApiLimit(5000, 3600.0, source=RATE_LIMIT_PAGE))

    def __init__(self, options: Optional[Dict[str, Any]] = None, journal_id: Optional[str] = None):
        super().__init__(options, journal_id=journal_id)
        self._client: Optional[RestClient] = None

    # -- plumbing -------------------------------------------------------------------

    @property
    def api(self) -> RestClient:
        """The REST client, made on first use (capabilities and option checks need no token)."""
        if self._client is None:
            self.check_credentials()   # no key: refused here, naming its option and variable
            self._client = DigitalOceanClient(self.options["api_url"], auth=BearerToken(self.options["api_key"] or ""),
                                              name="digitalocean", rules=RULES, before_send=self.paced,
                                              timeout=(10.0, self.options["request_timeout_s"] or 60.0))
        return self._client

    def _list(self, path: str, items: str, **params: Any) -> List[Dict[str, Any]]:
        """Every item of a listing: ``links.pages.next`` followed until ``meta.total`` items came."""
        params["per_page"] = PER_PAGE
        return [i for i in self.api.paginate(path, items=items, params=params, paging=LISTING_PAGES)
                if isinstance(i, dict)]

    def _one(self, body: Any, key: str, method: str, path: str) -> Dict[str, Any]:
        """``body[key]`` (DigitalOcean wraps a single object in its singular name), or a classified
        malformed-body error."""
        found = body.get(key) if isinstance(body, dict) else None
        if isinstance(found, dict) and found.get("id") not in (None, ""):
            return found
        kind, block = classify(RULES, 200, MALFORMED_BODY, "")
        raise RestError(kind, "digitalocean %s %s: HTTP 2xx %s: expected {\"%s\": {\"id\": ...}}, got %.200s" % (
            method, path, MALFORMED_BODY, key, body), block, status=200, code=MALFORMED_BODY)

    def capabilities(self) -> Capabilities:
        return Capabilities(
            kubernetes=True, boot_script=True, spot=False,
            k3s_access=K3sAccess.DIRECT if self.options["k3s_direct"] else K3sAccess.SSH_TUNNEL,
            boot_timeout_s=self.options["boot_timeout_s"], poll_interval_s=self.options["poll_interval_s"],
            python_interpreter=self.options["python_interpreter"] or None,
            # A powered-off Droplet keeps its CPU, RAM, disk and IP reserved and bills; only destroy ends it.
            poweroff_billing=PowerOffBilling.CONTINUES,
            poweroff_source="https://docs.digitalocean.com/reference/doctl/reference/compute/droplet-action/power-off "
                            "(Droplets that are powered off are still billable; destroy it to stop charges)")

    # -- plan -----------------------------------------------------------------------

    def plan(self, request: ResourceRequest) -> List[Offer]:
        validate_vm_name(request.vm_name)
        if request.spot:
            raise ProviderError(ErrorKind.INVALID_REQUEST, "spot: the digitalocean adapter offers on-demand "
                                                           "droplets only")
        want = canonical_gpu(request.gpu)
        count = max(int(request.gpu_count or 1), 1)
        sizes = self._list("/sizes", "sizes")
        # The regions DigitalOcean has: those any size lists (the CPU sizes are in every region), and
        # those its GPU docs name.
        asked = (check_regions("digitalocean", request.regions,
                               {r for size in sizes for r in self._regions(size)} | set(GPU_REGIONS),
                               first=GPU_REGIONS)
                 or list(self.options["regions"] or []))
        cpu_sizes = list(self.options["cpu_sizes"] or [])
        picked: List[Tuple[Dict[str, Any], Optional[str], int, Optional[str]]] = []
        seen_counts = []
        for size in sizes:
            slug = size.get("slug")
            if not isinstance(slug, str) or catalog.is_spot(slug):
                continue
            gpu, gpus, vendor = catalog.gpu_of(size)
            if want is None:
                if gpu is None and slug in cpu_sizes:
                    picked.append((size, None, 0, None))
                continue
            if gpu != want:
                continue
            seen_counts.append(gpus)
            if gpus >= count:
                picked.append((size, gpu, gpus, vendor))
        if want is not None and not picked:
            if not seen_counts:
                raise ProviderError(ErrorKind.INVALID_REQUEST, "gpu: digitalocean lists no size with %s" % want)
            raise ProviderError(ErrorKind.INVALID_REQUEST, "gpu_count: digitalocean's %s sizes hold at most %d "
                                "GPUs, %d asked" % (want, max(seen_counts), count))
        listed_anywhere = sorted({r for size, _g, _n, _v in picked for r in self._regions(size)})
        offers = []
        for size, gpu, gpus, vendor in picked:
            creatable = self._regions(size)
            for region in asked or creatable or listed_anywhere or list(GPU_REGIONS):
                offers.append(self._offer(size, gpu, gpus, vendor, region, creatable))
        offers.sort(key=lambda o: (not o.available, o.price_per_hour if o.price_per_hour is not None else 1e9,
                                   o.instance_type, asked.index(o.region) if o.region in asked else 0, o.region))
        return offers

    @staticmethod
    def _regions(size: Dict[str, Any]) -> List[str]:
        return [r for r in size.get("regions") or [] if isinstance(r, str)]

    def _offer(self, size: Dict[str, Any], gpu: Optional[str], gpus: int, vendor: Optional[str], region: str,
               creatable: List[str]) -> Offer:
        slug = size["slug"]
        price = size.get("price_hourly")
        price = round(float(price), 5) if isinstance(price, (int, float)) and not isinstance(price, bool) else None
        reason = None
        if size.get("available") is False:
            reason = "digitalocean lists %s as unavailable for new droplets" % slug
        elif region not in creatable:
            reason = ("digitalocean lists %s as creatable in no region" % slug if not creatable else
                      "digitalocean lists %s as creatable in %s, not %s" % (slug, ", ".join(creatable), region))
        return Offer(cloud=self.name, region=region, instance_type=slug, gpu=gpu, gpu_count=gpus,
                     price_per_hour=price, available=reason is None, unavailable_reason=reason,
                     detail={"vendor": vendor, "vcpus": size.get("vcpus"), "memory_mb": size.get("memory"),
                             "disk_gb": size.get("disk"), "description": size.get("description"),
                             "image": catalog.default_image(vendor, gpus)})

    # -- prepare ----------------------------------------------------------------------

    def _cidrs(self, spec: InstanceSpec) -> List[str]:
        cidrs = cidr_list(spec.allowed_cidrs or self.options["allowed_cidrs"] or [])
        if not cidrs:
            raise ProviderError(ErrorKind.INVALID_REQUEST, "allowed_cidrs: digitalocean needs the source addresses "
                                "of the VM's firewall (the task's allowed_cidrs or cloud_options.digitalocean."
                                "allowed_cidrs); 0.0.0.0/0 is never assumed")
        return cidrs

    def _ports(self, spec: InstanceSpec) -> List[int]:
        extra = (self.options["ssh_port"],) + (K3S_DIRECT_PORTS if self.options["k3s_direct"] else ())
        return tcp_ports(spec.open_ports, extra)

    def _find_key(self, public_key: str) -> Optional[Dict[str, Any]]:
        material = catalog.public_key_material(public_key)
        fingerprint = catalog.fingerprint(public_key)
        for key in self._list("/account/keys", "ssh_keys"):
            if key.get("fingerprint") == fingerprint:
                return key
            try:
                if key.get("public_key") and catalog.public_key_material(key["public_key"]) == material:
                    return key
            except ProviderError:
                continue
        return None

    def _ssh_key(self, vm: str, public_key: str) -> Dict[str, Any]:
        """A registered key with this material (registering it when none has)."""
        found = self._find_key(public_key)
        if found is not None:
            return found
        body = {"name": catalog.key_name(vm, public_key), "public_key": " ".join(
            catalog.public_key_material(public_key))}
        try:
            return self._one(self.api.post("/account/keys", json=body), "ssh_key", "POST", "/account/keys")
        except RestError as err:
            if err.status != 422 or not re.search(KEY_IN_USE, err.msg, re.I):
                raise
        found = self._find_key(public_key)  # a concurrent prepare registered it first
        if found is None:
            raise ProviderError(ErrorKind.TRANSIENT, "digitalocean says the SSH key is already registered but "
                                                     "does not list it yet")
        return found

    def _inbound(self, cidrs: List[str], ports: List[int]) -> List[Dict[str, Any]]:
        return [{"protocol": "tcp", "ports": str(port), "sources": {"addresses": list(cidrs)}} for port in ports]

    @staticmethod
    def _rules_key(rules: Any, side: str) -> List[Tuple[Any, ...]]:
        out = []
        for rule in rules or []:
            if isinstance(rule, dict):
                target = rule.get(side) if isinstance(rule.get(side), dict) else {}
                ports = "0" if str(rule.get("ports")) in _ALL_PORTS else str(rule.get("ports"))
                out.append((rule.get("protocol"), ports, tuple(sorted(target.get("addresses") or [])),
                            tuple(sorted(target.get("tags") or [])), tuple(sorted(target.get("droplet_ids") or []))))
        return sorted(out)

    def _same(self, found: Dict[str, Any], wanted: Dict[str, Any]) -> bool:
        return (self._rules_key(found.get("inbound_rules"), "sources")
                == self._rules_key(wanted["inbound_rules"], "sources")
                and self._rules_key(found.get("outbound_rules"), "destinations")
                == self._rules_key(wanted["outbound_rules"], "destinations")
                and sorted(found.get("tags") or []) == sorted(wanted["tags"]))

    def _firewall(self, name: str, tag: str, cidrs: List[str], ports: List[int]) -> str:
        """The id of the VM's firewall with exactly these rules, attached to ``tag`` (made or updated)."""
        wanted = {"name": name, "inbound_rules": self._inbound(cidrs, ports), "outbound_rules": OUTBOUND_RULES,
                  "tags": [tag]}
        for found in self._list("/firewalls", "firewalls"):
            if found.get("name") == name and found.get("id"):
                if not self._same(found, wanted):
                    # PUT replaces the whole firewall: keep the droplets attached to it.
                    self.api.put("/firewalls/%s" % found["id"],
                                 json=dict(wanted, droplet_ids=list(found.get("droplet_ids") or [])))
                return str(found["id"])
        # A firewall's tags must exist before it names them.
        self.api.post("/tags", json={"name": tag})
        made = self._one(self.api.post("/firewalls", json=wanted), "firewall", "POST", "/firewalls")
        return str(made["id"])

    def prepare(self, offer: Offer, spec: InstanceSpec) -> Dict[str, Any]:
        vm = validate_vm_name(spec.vm_name)
        self._user_tags(spec.tags)   # a tag DigitalOcean would refuse fails before any call
        cidrs, ports = self._cidrs(spec), self._ports(spec)
        key = self._ssh_key(vm, spec.ssh_public_key)
        name = catalog.firewall_name(vm, self.journal_id)
        tag = catalog.firewall_tag(name)
        firewall = self._firewall(name, tag, cidrs, ports)
        return {"ssh_key_id": key["id"], "ssh_key_fingerprint": key.get("fingerprint"), "firewall_id": firewall,
                "firewall_name": name, "firewall_tag": tag, "region": offer.region, "source_ranges": cidrs,
                "ports": ports, "ssh_user": self.options["ssh_user"]}

    # -- create -----------------------------------------------------------------------

    def _tags(self, vm: str) -> List[str]:
        tags = [catalog.vm_tag(vm)]
        if self.journal_id:
            tags.append(catalog.journal_tag(self.journal_id))
        return tags

    @staticmethod
    def _user_tags(tags: Dict[str, str]) -> List[str]:
        """The user's tags as DigitalOcean tag names, ``name:value``, one per name (the name is what comes
        before the first ':', so a name holding one is refused); InvalidRequest naming one it would refuse."""
        out = []
        for key, value in sorted(tags.items()):
            if ":" in key:
                raise ProviderError(ErrorKind.INVALID_REQUEST, "tags: %r cannot be a DigitalOcean tag name (a tag is "
                                    "<name>:<value>, so a name holds no ':')" % (key,))
            name = "%s:%s" % (key, value) if value else key
            if not _USER_TAG_RE.match(name):
                raise ProviderError(ErrorKind.INVALID_REQUEST, "tags.%s: %r cannot be a DigitalOcean tag (name:value "
                                    "of at most 255 letters, digits, ':', '-' and '_')" % (key, name))
            out.append(name)
        return out

    def _image(self, offer: Offer) -> Any:
        image = self.options["image"] or offer.detail.get("image") or catalog.default_image(
            offer.detail.get("vendor"), offer.gpu_count)
        return int(image) if isinstance(image, str) and image.isdigit() else image

    def create(self, offer: Offer, prepared: Dict[str, Any], spec: InstanceSpec) -> str:
        vm = validate_vm_name(spec.vm_name)
        # gpuprov's own tags (identity, firewall) win: a user tag named like one is not sent beside it.
        user = {k: v for k, v in spec.tags.items() if not k.lower().startswith(GPUPROV_TAG_PREFIX)}
        tags = self._user_tags(user) + self._tags(vm) + (
            [prepared["firewall_tag"]] if prepared.get("firewall_tag") else [])
        body: Dict[str, Any] = {"name": vm, "region": offer.region, "size": offer.instance_type,
                                "image": self._image(offer), "ssh_keys": [prepared["ssh_key_id"]], "tags": tags}
        if spec.boot_script is not None:
            user_data = spec.boot_script.to_shell()  # a "#!" script is run by cloud-init as it is
            if len(user_data.encode("utf-8")) > USER_DATA_MAX_BYTES:
                raise ProviderError(ErrorKind.INVALID_REQUEST, "boot script: %d bytes as user data, digitalocean "
                                    "takes at most 64 KiB" % len(user_data.encode("utf-8")))
            body["user_data"] = user_data
        droplet = self._one(self.api.post("/droplets", json=body), "droplet", "POST", "/droplets")
        return str(droplet["id"])

    # -- observe ----------------------------------------------------------------------

    can_retag = True

    def retag(self, location: Location, vm_name: str, instance_id: str, tags: Dict[str, str], purge: bool,
              check: bool = False) -> Dict[str, Any]:
        """The droplet's user tags (``name:value``, read back from its tags; gpuprov-* tags are its own): a new
        value is untagged from the old name and tagged with the new one, each tag made first (POST /tags
        answers 201 for one that exists), one call per tag."""
        vm = validate_vm_name(vm_name)
        wanted = dict(tags)
        self._user_tags(wanted)
        body = self.api.get("/droplets/%s" % instance_id, allow_status=(404,)) if str(instance_id).isdigit() else None
        droplet = (body or {}).get("droplet") if isinstance(body, dict) else None
        if not isinstance(droplet, dict) or catalog.vm_tag(vm) not in (droplet.get("tags") or []):
            raise ProviderError(ErrorKind.INVALID_REQUEST, "tags: %s is not a droplet of VM %s" % (instance_id, vm))
        names = {}   # user tag name -> the DigitalOcean tag carrying it
        for tag in droplet.get("tags") or []:
            if isinstance(tag, str) and not tag.startswith("gpuprov-"):
                names[tag.split(":", 1)[0]] = tag
        current = {key: tag.split(":", 1)[1] if ":" in tag else "" for key, tag in names.items()}
        changes = tag_changes(current, wanted, purge, keep=lambda name: False)
        if check:
            return changes
        resources = {"resources": [{"resource_id": str(droplet["id"]), "resource_type": "droplet"}]}
        for key in sorted(set(changes["set"]) | set(changes["removed"])):
            if key in names:
                self.api.delete("/tags/%s/resources" % names[key], json=resources, allow_status=(404,))
        for tag in self._user_tags(changes["set"]):
            self.api.post("/tags", json={"name": tag})
            self.api.post("/tags/%s/resources" % tag, json=resources)
        return changes

    def _journal_of(self, droplet: Dict[str, Any]) -> Optional[str]:
        value = catalog.tag_values(droplet.get("tags")).get(JOURNAL_ID_TAG)
        if not value:
            return None
        if self.journal_id and "%s:%s" % (JOURNAL_ID_TAG, value) == catalog.journal_tag(self.journal_id):
            return self.journal_id  # also a journal id too long for a tag (kept as its hash)
        return catalog.decode_tag_value(value)

    def _observed(self, droplet: Dict[str, Any], location: Location) -> Observed:
        raw = droplet.get("status")
        status = catalog.STATUSES.get(raw, Status.PENDING)
        ip = catalog.public_ipv4(droplet)
        endpoint = None
        if raw == "active" and ip:
            endpoint = SshEndpoint(host=ip, port=self.options["ssh_port"], user=self.options["ssh_user"])
        reason = None
        if raw != "active":
            reason = "digitalocean status %s" % raw
        elif ip is None:
            reason = "digitalocean lists no public IPv4 address yet"
        return Observed(instance_id=str(droplet.get("id")), status=status, reason=reason, endpoint=endpoint,
                        location=Location(self.name, catalog.region_of(droplet) or location.region),
                        journal_id=self._journal_of(droplet))

    def _vm_droplets(self, vm: str) -> List[Dict[str, Any]]:
        """Every droplet tagged as the VM, in any region (raw): those the tag filter lists, and the GPU
        droplets named after the VM (the tag filter may leave GPU droplets out; it takes no ``type``)."""
        tag = catalog.vm_tag(vm)
        found: Dict[str, Dict[str, Any]] = {}
        for droplet in self._list("/droplets", "droplets", tag_name=tag) + self._list(
                "/droplets", "droplets", name=vm, type="gpus"):
            if droplet.get("id") is not None and tag in (droplet.get("tags") or []):
                found.setdefault(str(droplet["id"]), droplet)
        return list(found.values())

    def observe(self, location: Location, vm_name: str) -> List[Observed]:
        vm = validate_vm_name(vm_name)
        return [self._observed(d, location) for d in self._vm_droplets(vm)
                if catalog.region_of(d) in (None, location.region)]

    def observe_all(self, location: Location) -> Optional[List[Observed]]:
        """Every droplet of this journal in the region (the fleet's poll): the journal's tag listed, and the
        account's GPU droplets, which the tag filter may leave out (as ``_vm_droplets``)."""
        if not self.journal_id:
            return None
        tag = catalog.journal_tag(self.journal_id)
        found: Dict[str, Dict[str, Any]] = {}
        for droplet in self._list("/droplets", "droplets", tag_name=tag) + self._list(
                "/droplets", "droplets", type="gpus"):
            if droplet.get("id") is not None and tag in (droplet.get("tags") or []):
                found.setdefault(str(droplet["id"]), droplet)
        return [self._observed(d, location) for d in found.values() if catalog.region_of(d) in (None, location.region)]

    def sweep_locations(self) -> List[Location]:
        """One location, ANY_REGION: every listing is account-wide (owned.py). Pure."""
        from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.digitalocean.owned import sweep_locations
        return sweep_locations(self)

    def list_owned(self, location: Location) -> List[Owned]:
        """Tagged droplets, and at ANY_REGION or global the gpuprov firewalls, their tags and SSH keys (owned.py)."""
        from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.digitalocean.owned import list_owned
        return list_owned(self, location)

    # -- delete / cleanup -------------------------------------------------------------

    def delete(self, location: Location, vm_name: str, instance_ids: List[str]) -> None:
        validate_vm_name(vm_name)
        for droplet_id in sorted({str(i) for i in instance_ids}):
            if not droplet_id.isdigit():
                continue  # droplet ids are integers: no droplet has this one
            try:
                self.api.delete("/droplets/%s" % droplet_id, allow_status=(404,))
            except RestError as err:
                if err.status != 422 or not re.search(PENDING_EVENT, err.msg, re.I):
                    raise
                if "destroy is already in progress" not in err.msg.lower():
                    raise  # busy with another action: Transient, the core asks again

    def cleanup(self, location: Location, vm_name: str) -> None:
        vm = validate_vm_name(vm_name)
        name = catalog.firewall_name(vm, self.journal_id)
        for found in self._list("/firewalls", "firewalls"):
            if found.get("name") == name and found.get("id"):
                self.api.delete("/firewalls/%s" % found["id"], allow_status=(404,))
        self.api.delete("/tags/%s" % catalog.firewall_tag(name), allow_status=(404,))
        others = [d for d in self._vm_droplets(vm) if d.get("status") != "archive"
                  and self._journal_of(d) not in (None, self.journal_id)]
        if others:
            return  # another journal's droplet of this VM name came from the same key: leave it
        prefix = catalog.key_prefix(vm)
        for key in self._list("/account/keys", "ssh_keys"):
            key_name = str(key.get("name") or "")
            if key_name.startswith(prefix) and len(key_name) == len(prefix) + 12 and key.get("id") is not None:
                self.api.delete("/account/keys/%s" % key["id"], allow_status=(404,))
