# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Verda (formerly DataCrunch) adapter, on the shared REST client.

Options: ``cloud_options.verda`` (providers/cloud_options/verda.py). Auth is OAuth2
client credentials: ``client_id`` / ``client_secret`` (or VERDA_CLIENT_ID /
VERDA_CLIENT_SECRET, as Verda's SDK examples read them) are traded at
``<api_url>/oauth2/token`` for a bearer token, fetched again when it expires or the
API refuses it (rest.ClientCredentialsToken).

Calls (api.verda.com/v1, as its API reference documents them; the Python SDK still uses
the deprecated ``/sshkeys`` and ``isSpot`` spellings):

* plan: ``GET /instance-types?currency=usd`` x ``GET /instance-availability?is_spot=``
  (every location at once): a type listed in a location is an available offer, a
  type not listed there an unavailable one with the reason. Prices are the type's
  ``price_per_hour`` (or ``spot_price``), USD per hour for the whole instance.
* prepare: the VM's own SSH key (``GET``/``POST /ssh-keys``; reused when this VM's name
  for it is already registered with the same material) and, when the spec has a boot
  script, a startup script (``GET /scripts``, paged by ``page``/``pageSize``, and
  ``POST /scripts``), named ``gpuprov-<vm>-<12 hex>-j<8 hex of sha256 of the journal id>``:
  the key's 12 hex are its fingerprint's (sha256 of the key blob), the script's its text's.
* create: one ``POST /instances`` (hostname = the VM name, description and ``tags`` = the
  identity, ``startup_script_id``); Verda answers the new id as plain text.
* observe: ``GET /instances``, kept by hostname, location and an identity description.
* delete: ``PUT /instances {"id": [id], "action": "delete"}`` per id, after one ``GET
  /instances`` for each instance's ``os_volume_id``. With ``os_volume_on_delete:
  delete_permanently`` (the default) the body adds ``"volume_ids": [os_volume_id],
  "delete_permanently": true``, so the OS volume is deleted with the instance; without
  them (``move_to_trash``, or an instance no longer listed) Verda moves it to the trash,
  where it stays 96 hours.
* cleanup: ``DELETE /ssh-keys/{id}`` and ``DELETE /scripts/{id}`` of this VM's and this
  journal's names.

Identity: the hostname is the VM name, the tags are ``gpuprov-vm-name`` and
``gpuprov-journal-id``, and the description reads ``gpuprov-vm-name=<vm>
gpuprov-journal-id=<id>`` (the journal id alone when both exceed Verda's 100 characters;
instances made before tags carry only the description). An instance of that hostname
with neither is someone else's and never observed.

Firewall: Verda has no firewall API; an instance's public address has every port
open. ``allowed_cidrs`` is not enforced on this cloud (the docs say so), and the k3s
API is reached through an SSH tunnel rather than opened to the world.
"""

from __future__ import annotations

import json
import re
from typing import Any, Dict, List, Optional

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    Capabilities, ErrorKind, InstanceSpec, K3sAccess, Location, Observed, Offer, Owned, PowerOffBilling, ProviderError,
    ResourceRequest, SshEndpoint, Status, validate_vm_name,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.cloud_options.verda import (
    DEFAULT_IMAGE, OPTIONS,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.common import check_regions
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.gpus import canonical_gpu
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.options import TypedOptionsProvider
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.rest import (
    MALFORMED_BODY, ClientCredentialsToken, PageNumber, RestClient, RestError,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.verda import catalog
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.verda.errors import GONE_MESSAGE, RULES

# Verda instance status -> normalised status; statuses absent here read as Pending.
# ``discontinued`` and ``notfound`` are gone (omitted); ``error``, ``no_capacity`` and
# ``installation_failed`` never come up (Failed, so the core deletes and fails over).
STATUS_MAP = {
    "new": Status.PENDING, "ordered": Status.PENDING, "validating": Status.PENDING,
    "provisioning": Status.PENDING, "pending": Status.PENDING, "restoring": Status.PENDING,
    "unknown": Status.PENDING,
    "running": Status.RUNNING,
    "starting_hibernation": Status.STOPPING,
    "offline": Status.STOPPED, "hibernating": Status.STOPPED,
    "deleting": Status.TERMINATING,
    "error": Status.FAILED, "no_capacity": Status.FAILED, "installation_failed": Status.FAILED,
}
GONE_STATUSES = ("discontinued", "notfound")
SSH_KEYS = "ssh-keys"   # /sshkeys is the deprecated alias
SCRIPTS = "scripts"
# GET /scripts pages (pageSize 10 unless asked, 100 at most), newest first.
SCRIPT_PAGING = PageNumber(param="page", size_param="pageSize", size=100)
# Verda's own fields that diagnose shows.
VENDOR_FIELDS = ("status", "instance_type", "location", "ip", "image", "is_spot", "price_per_hour",
                 "startup_script_id", "os_volume_id", "created_at")
FAILED_REASONS = {
    "no_capacity": "Verda accepted the instance but has no capacity for it (status no_capacity)",
    "error": "Verda reports the instance in status error",
    "installation_failed": "Verda could not install the instance's image (status installation_failed)",
}


_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


def _key_blob(key: Any) -> Optional[str]:
    """``<type> <base64>`` of an OpenSSH public key (the comment does not make a key another)."""
    parts = key.split() if isinstance(key, str) else []
    return " ".join(parts[:2]) if len(parts) >= 2 else None


class VerdaProvider(TypedOptionsProvider):
    name = "verda"
    option_spec = OPTIONS

    def __init__(self, options: Optional[Dict[str, Any]] = None, journal_id: Optional[str] = None):
        super().__init__(options, journal_id=journal_id)
        self._client: Optional[RestClient] = None

    # -- plumbing -------------------------------------------------------------------

    def _api(self) -> RestClient:
        """The REST client, built on first use (a missing credential is Credentials then)."""
        if self._client is None:
            self.check_credentials()   # no key: refused here, naming its option and variable
            base = (self.options["api_url"] or "").rstrip("/")
            token = ClientCredentialsToken(base + "/oauth2/token", self.options["client_id"],
                                           self.options["client_secret"], name=self.name)
            self._client = RestClient(base, auth=token, name=self.name, rules=RULES)
        return self._client

    def _list(self, path: str, params: Optional[Dict[str, Any]] = None) -> List[Dict[str, Any]]:
        """A listing whose body is a JSON list of objects: every page of ``/scripts``, the
        one page of the others (they take no paging parameters)."""
        if path == SCRIPTS:
            items = list(self._api().paginate(path, params=params, paging=SCRIPT_PAGING))
        else:
            items = list(self._api().paginate(path, params=params, max_pages=1))
        bad = [item for item in items if not isinstance(item, dict)]
        if bad:
            raise self._malformed("GET", path, "expected a list of objects, got an item %.80r" % (bad[0],))
        return items

    def _malformed(self, method: str, path: str, what: str) -> RestError:
        return RestError(ErrorKind.FAILED, "%s %s %s: %s" % (self.name, method, path, what), status=200,
                         code=MALFORMED_BODY)

    def _post_id(self, path: str, body: Dict[str, Any]) -> str:
        """POST that answers the new resource's id as plain text (or, the Go SDK warns, JSON)."""
        text = (self._api().post(path, json=body, expect="text") or "").strip()
        if text.startswith(("{", '"')):
            try:
                decoded = json.loads(text)
            except ValueError:
                decoded = None
            text = str(decoded.get("id") or "") if isinstance(decoded, dict) else str(decoded or "")
        if not text or any(c.isspace() for c in text) or len(text) > 128:
            raise self._malformed("POST", path, "expected the new id as text, got %r" % (text[:80],))
        return text

    # -- contract -------------------------------------------------------------------

    def capabilities(self) -> Capabilities:
        return Capabilities(kubernetes=True, boot_script=True, spot=True, k3s_access=K3sAccess.SSH_TUNNEL,
                            boot_timeout_s=self.options["boot_timeout_s"],
                            poll_interval_s=self.options["poll_interval_s"],
                            # The API has an offline status and shutdown/hibernate actions, but no vendor page says
                            # what an offline instance bills; the create request has no shutdown field.
                            poweroff_billing=PowerOffBilling.UNKNOWN,
                            poweroff_source="verda SDK 1.25 (InstanceStatus.OFFLINE, Actions.SHUTDOWN; only retained "
                                            "volumes are said to bill); https://docs.verda.com/welcome-to-verda/"
                                            "pricing-and-billing says nothing of stopped instances")

    def _image(self, instance_type: Dict[str, Any]) -> Dict[str, Any]:
        """The image for a type, and why it cannot run there (None when it can)."""
        supported = [s for s in instance_type.get("supported_os") or [] if isinstance(s, str)]
        chosen = self.options["image"]
        if chosen:
            # An image type the type does not list cannot run there; an image id (a UUID) is not listed.
            refused = supported and chosen not in supported and not _UUID.match(chosen)
            return {"image": chosen, "refused": "image %s is not among the images %s supports (%s)" % (
                chosen, instance_type.get("instance_type"), ", ".join(supported)) if refused else None}
        if not supported or DEFAULT_IMAGE in supported:
            return {"image": DEFAULT_IMAGE, "refused": None}
        return {"image": supported[0], "refused": None}

    def plan(self, request: ResourceRequest) -> List[Offer]:
        gpu = canonical_gpu(request.gpu)
        count = request.gpu_count if gpu else 0
        if gpu and (not isinstance(count, int) or isinstance(count, bool) or count < 1):
            raise ProviderError(ErrorKind.INVALID_REQUEST, "gpu_count: expected a positive integer, got %r" % (count,))
        spot = bool(request.spot)
        types = self._list("instance-types", {"currency": "usd"})
        stock = self._list("instance-availability", {"is_spot": "true" if spot else "false"})
        available: Dict[str, set] = {}
        for location in stock:
            code, listed = location.get("location_code"), location.get("availabilities")
            if not isinstance(code, str) or not isinstance(listed, list):
                raise self._malformed("GET", "instance-availability", "expected {location_code, availabilities}")
            available.setdefault(code, set()).update(x for x in listed if isinstance(x, str))

        mine = [t for t in types if catalog.gpu_of(t) == gpu and (gpu or catalog.gpu_count(t) == 0)
                and isinstance(t.get("instance_type"), str)]
        if gpu and not mine:
            sold = sorted({g for g in (catalog.gpu_of(t) for t in types) if g})
            raise ProviderError(ErrorKind.INVALID_REQUEST, "gpu: Verda offers no %s; Verda GPUs: %s"
                                % (gpu, ", ".join(sold) or "none listed"))
        fits = [t for t in mine if catalog.gpu_count(t) >= count]
        if not fits:
            raise ProviderError(ErrorKind.INVALID_REQUEST, "gpu_count: Verda sells at most %d x %s in one instance, "
                                "asked for %d" % (max(catalog.gpu_count(t) for t in mine), gpu, count))
        least = min(catalog.gpu_count(t) for t in fits)
        chosen = [t for t in fits if catalog.gpu_count(t) == least]

        regions = (self._known_locations(request.regions, available)
                   or [r for r in (self.options["regions"] or sorted(available)) if r])
        offers = []
        for rank, region in enumerate(regions):
            for itype in chosen:
                name = itype["instance_type"]
                currency = str(itype.get("currency") or "usd").lower()
                amount = catalog.price(itype.get("spot_price") if spot else itype.get("price_per_hour"))
                if spot and amount is None:
                    continue  # no spot price: Verda sells this type on demand only
                image = self._image(itype)
                reason = image["refused"]
                if reason is None and name not in available.get(region, ()):
                    reason = "Verda lists no %s%s capacity in %s now" % ("spot " if spot else "", name, region)
                offers.append(Offer(
                    cloud=self.name, region=region, instance_type=name, gpu=gpu, gpu_count=catalog.gpu_count(itype),
                    price_per_hour=amount if currency == "usd" else None, spot=spot, available=reason is None,
                    unavailable_reason=reason,
                    detail={"image": image["image"], "rank": rank, "currency": currency}))
        offers.sort(key=lambda o: (not o.available, o.price_per_hour is None, o.price_per_hour or 0.0,
                                   o.detail["rank"], o.instance_type))
        return offers

    def _known_locations(self, requested: List[str], available: Dict[str, set]) -> List[str]:
        """The requested locations Verda has (catalog.LOCATIONS, those the availability answer names, and
        where the request names none of them, GET /locations: Verda's own list), or InvalidRequest."""
        known = set(catalog.LOCATIONS) | set(available)
        if requested and not known & set(requested):
            known |= {loc.get("code") for loc in self._list("locations") if isinstance(loc.get("code"), str)}
        return check_regions("verda", requested, known, first=sorted(available))

    def _ssh_user(self) -> str:
        return self.options["ssh_user"] or "root"

    def prepare(self, offer: Offer, spec: InstanceSpec) -> Dict[str, Any]:
        vm = validate_vm_name(spec.vm_name)
        public_key = (spec.ssh_public_key or "").strip()
        blob = _key_blob(public_key)
        if blob is None:
            raise ProviderError(ErrorKind.INVALID_REQUEST, "ssh_public_key: expected an OpenSSH public key "
                                "('<type> <base64> [comment]')")
        # This VM's own key, even when the material is registered under another name: Verda
        # takes one public key under several names (dstack registers it once per instance), and
        # a key shared with another VM would go with that VM's cleanup while this one needs it.
        key_name = catalog.key_name(vm, public_key, self.journal_id)
        registered = next((k for k in self._list(SSH_KEYS)
                           if k.get("name") == key_name and _key_blob(k.get("key")) == blob), None)
        if registered is not None:
            key_id = str(registered.get("id"))
        else:
            key_id = self._post_id(SSH_KEYS, {"name": key_name, "key": public_key})
        script_id = None
        if spec.boot_script is not None:
            text = spec.boot_script.to_shell()
            name = catalog.side_name(vm, text, self.journal_id)
            found = next((s for s in self._list(SCRIPTS) if s.get("name") == name and s.get("script") == text),
                         None)
            script_id = str(found.get("id")) if found else self._post_id(SCRIPTS, {"name": name, "script": text})
        return {"ssh_key_id": key_id, "startup_script_id": script_id, "ssh_user": self._ssh_user()}

    def create(self, offer: Offer, prepared: Dict[str, Any], spec: InstanceSpec) -> str:
        vm = validate_vm_name(spec.vm_name)
        body = {
            "instance_type": offer.instance_type,
            "image": (offer.detail or {}).get("image") or self.options["image"] or DEFAULT_IMAGE,
            "hostname": vm,
            "description": catalog.description(vm, self.journal_id),
            "tags": catalog.identity_tags(vm, self.journal_id),
            "location_code": offer.region,
            "ssh_key_ids": [prepared["ssh_key_id"]],
            "os_volume": {"name": "gpuprov-%s-os" % vm, "size": self.options["os_volume_size_gb"]},
            "is_spot": bool(spec.spot or offer.spot),
        }
        if body["is_spot"]:
            # A spot instance Verda discontinues keeps its OS volume detached (and billed) by
            # default; nobody would delete it: it goes with the instance.
            body["os_volume"]["on_spot_discontinue"] = "delete_permanently"
        if prepared.get("startup_script_id"):
            body["startup_script_id"] = prepared["startup_script_id"]
        return self._post_id("instances", body)

    def observe(self, location: Location, vm_name: str) -> List[Observed]:
        return [seen for seen, _inst in self._observed(location, vm_name)]

    def diagnose(self, location: Location, vm_name: str) -> Dict[str, Any]:
        """Observe, plus Verda's own fields of each instance and what they say."""
        instances, findings = [], []
        for seen, inst in self._observed(location, vm_name):
            vendor = {k: inst.get(k) for k in VENDOR_FIELDS}
            instances.append(dict(seen.to_dict(), vendor=vendor))
            if inst.get("status") in FAILED_REASONS:
                findings.append("%s: %s" % (seen.instance_id, FAILED_REASONS[inst["status"]]))
            elif inst.get("status") == "running" and not inst.get("ip"):
                findings.append("%s: running without a public ip yet" % seen.instance_id)
        return {"instances": instances, "findings": findings}

    def _observed(self, location: Location, vm_name: str):
        vm = validate_vm_name(vm_name)
        found = []
        for inst in self._list("instances"):
            if not catalog.ours(inst, vm):
                continue
            if location.region and inst.get("location") not in (None, location.region):
                continue
            raw = str(inst.get("status") or "unknown")
            if raw in GONE_STATUSES:
                continue
            status = STATUS_MAP.get(raw, Status.PENDING)
            reason = FAILED_REASONS.get(raw) if status == Status.FAILED else (
                None if raw in STATUS_MAP else "Verda status %r" % raw)
            endpoint = None
            if status == Status.RUNNING and inst.get("ip"):
                endpoint = SshEndpoint(host=str(inst["ip"]), port=self.options["ssh_port"], user=self._ssh_user())
            found.append((Observed(
                instance_id=str(inst.get("id")), status=status, reason=reason, endpoint=endpoint,
                location=Location(self.name, str(inst.get("location") or location.region)),
                journal_id=catalog.instance_journal(inst)), inst))
        return found

    def sweep_locations(self) -> List[Location]:
        """One location, ANY_REGION: every listing is account-wide (owned.py). Pure."""
        from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.verda.owned import sweep_locations
        return sweep_locations(self)

    def list_owned(self, location: Location) -> List[Owned]:
        """Instances with gpuprov's description, and at ANY_REGION or global the gpuprov keys and scripts (owned.py)."""
        from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.verda.owned import list_owned
        return list_owned(self, location)

    def _delete_one(self, instance_id: str, listed: Optional[Dict[str, Any]]) -> None:
        body = {"id": [instance_id], "action": "delete"}
        listed = listed or {}
        # An instance already deleting had its volume named when its delete was sent: resent as it is.
        if (listed.get("os_volume_id") and listed.get("status") != "deleting"
                and self.options["os_volume_on_delete"] == "delete_permanently"):
            body.update(volume_ids=[str(listed["os_volume_id"])], delete_permanently=True)
        try:
            results = self._api().put("instances", json=body)
        except RestError as err:
            if err.status == 404 or err.code == "not_found" or GONE_MESSAGE.search(err.msg):
                return  # already gone
            raise
        # 202/207: one result per instance; a 207 carries the ones that failed.
        for result in results if isinstance(results, list) else []:
            if isinstance(result, dict) and str(result.get("status", "")).lower() == "error":
                message = str(result.get("error") or "")
                if GONE_MESSAGE.search(message) or result.get("statusCode") == 404:
                    continue
                status = result.get("statusCode") if isinstance(result.get("statusCode"), int) else 400
                raise self._api().error_for(status, {"message": message}, method="PUT", path="instances")

    def delete(self, location: Location, vm_name: str, instance_ids: List[str]) -> None:
        validate_vm_name(vm_name)
        wanted = [str(i) for i in instance_ids if i]
        if not wanted:
            return
        # The OS volume of each (deleted with it, not trashed, unless the options say so); one listing for all.
        listed = {str(inst.get("id")): inst for inst in self._list("instances")}
        # One call per id: Verda refuses a whole batch for one unknown id ("Invalid instance id").
        for instance_id in wanted:
            self._delete_one(instance_id, listed.get(instance_id))

    def cleanup(self, location: Location, vm_name: str) -> None:
        vm = validate_vm_name(vm_name)
        for path in (SSH_KEYS, SCRIPTS):
            for item in self._list(path):
                if catalog.cleanable(item.get("name"), vm, self.journal_id):
                    self._api().delete("%s/%s" % (path, item.get("id")), allow_status=(404,))
