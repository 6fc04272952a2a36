"""A fake of Verda's (formerly DataCrunch's) public API v1, on the marketplace fake base.

Paths and shapes as Verda's API reference documents them (api.verda.com/v1/docs and its
OpenAPI schema; the adapter's ``api_url`` is ``fake.url + "/v1"``): ``POST /oauth2/token``
(client credentials or refresh token, JSON), then a bearer token on ``/instance-types``,
``/instance-availability`` (``is_spot``; ``isSpot`` the deprecated alias), ``/instances``
(create requires instance_type, image, hostname and location_code, takes ``tags``, and
answers the new id as plain text; ``PUT`` runs an action), ``/ssh-keys`` (``/sshkeys`` the
deprecated alias), ``/scripts`` (paged: ``page``, ``pageSize`` 10 unless asked, at most
100, newest first, ``name`` a partial-match filter; with :attr:`ignore_paging` every page asked
is the first, a full one when there are as many scripts as the size asked) and ``/locations``. Errors are Verda's
``{"code", "message"}`` bodies with its documented statuses: 429 rate_limit_exceeded with
``Retry-After``, 503 service_unavailable for no capacity.

Lifecycle: a new instance reads ``ordered``, then ``provisioning``, then ``running`` with
an ``ip`` once ``boot_polls`` reads have happened; a deleted one reads ``deleting`` for
``boot_polls`` reads, then is gone. Its OS volume goes with it: into the trash (``GET
/volumes/trash``, where Verda keeps it 96 hours) unless the delete named it in ``volume_ids``
with ``delete_permanently``; a delete whose ``volume_ids`` leave it out leaves it detached.
Verda reports only an IP (the port is the image's), so each running instance gets its own loopback address
``127.0.0.N`` with a forwarder on the fake's one ``ssh_port`` to a real sshd (the local
cloud's machinery) that authorises the instance's registered keys.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import socket
import uuid
from typing import Any, Dict, List, Optional, Set

from ansible_collections.gpuprov.cloud.tests.fakes.marketplace import MarketplaceFake, PortForwarder, Reply, route

CLIENT_ID = "fake-client-id"
CLIENT_SECRET = "fake-client-secret"
LOCATIONS = [
    {"code": "FIN-01", "name": "Finland 1", "country_code": "FI"},
    {"code": "FIN-03", "name": "Finland 3", "country_code": "FI"},
    {"code": "ICE-01", "name": "Iceland 1", "country_code": "IS"},
]
ACTIONS = ("boot", "start", "shutdown", "force_shutdown", "delete", "discontinue", "hibernate", "restore",
           "configure_spot", "delete_stuck", "deploy", "transfer")
CREATE_REQUIRED = ("instance_type", "image", "hostname", "location_code")
CREATE_OPTIONAL = ("ssh_key_ids", "startup_script_id", "description", "tags", "os_volume", "volumes",
                   "existing_volumes", "is_spot", "coupon", "contract", "pricing")
TAGS_MAX, TAG_KEY_MAX, TAG_VALUE_MAX = 10, 63, 127
SPOT_POLICIES = ("keep_detached", "move_to_trash", "delete_permanently")
IMAGES = ["ubuntu-24.04-cuda-12.8-open-docker", "ubuntu-24.04-cuda-13.0-open-docker", "ubuntu-22.04-cuda-12.0-docker"]


def _itype(name: str, model: str, gpus: int, gpu_mem: int, cores: int, mem: int, price: str, spot: str,
           supported=None) -> Dict[str, Any]:
    """One entry of GET /instance-types, shaped as the SDK's unit tests show it (prices as strings)."""
    return {
        "id": str(uuid.uuid5(uuid.NAMESPACE_DNS, name)), "instance_type": name, "model": model,
        "name": model, "display_name": "NVIDIA %s" % model if gpus else "CPU Node", "manufacturer":
        "NVIDIA" if gpus else "AMD", "description": "Dedicated Hardware Instance", "p2p": "",
        "price_per_hour": price, "spot_price": spot, "serverless_price": None, "serverless_spot_price": None,
        "currency": "usd", "best_for": ["Gargantuan ML models"] if gpus else ["Running services"],
        "cpu": {"description": "%d CPU" % cores, "number_of_cores": cores},
        "gpu": {"description": "%dx %s" % (gpus, model) if gpus else "", "number_of_gpus": gpus},
        "memory": {"description": "%dGB RAM" % mem, "size_in_gigabytes": mem},
        "gpu_memory": {"description": "%dGB VRAM" % gpu_mem if gpus else "", "size_in_gigabytes": gpu_mem},
        "storage": {"description": "Dynamic"}, "supported_os": list(supported or IMAGES),
        "deploy_warning": None,
    }


DEFAULT_TYPES = [
    _itype("1H100.80S.30V", "H100", 1, 80, 30, 120, "2.19", "0.88"),
    _itype("2H100.80S.60V", "H100", 2, 160, 60, 240, "4.38", "1.76"),
    _itype("1A100.22V", "A100", 1, 80, 22, 120, "1.29", "0.52"),
    _itype("1A100.40S.22V", "A100", 1, 40, 22, 120, "0.72", "0.29"),
    _itype("1V100.6V", "Tesla V100", 1, 16, 6, 23, "0.39", "0.16", supported=["ubuntu-22.04-cuda-12.0-docker"]),
    _itype("1RTXPRO6000.30V", "RTX PRO 6000", 1, 96, 30, 180, "1.39", "0.56"),
    _itype("CPU.4V.16G", "CPU Node", 0, 0, 4, 16, "0.03", "0.01", supported=["ubuntu-24.04"]),
]
DEFAULT_STOCK = {
    "FIN-01": ["1H100.80S.30V", "1A100.22V", "1V100.6V", "CPU.4V.16G"],
    "FIN-03": ["1H100.80S.30V", "2H100.80S.60V", "1RTXPRO6000.30V", "CPU.4V.16G"],
    "ICE-01": [],
}


def _error(status: int, code: str, message: str, headers: Optional[Dict[str, str]] = None) -> Reply:
    return Reply(status, {"code": code, "message": message}, headers=headers)


class VerdaApiFake(MarketplaceFake):
    cloud = "verda"

    def __init__(self, root: str, boot_polls: int = 2):
        super().__init__(root, token="verda-access-" + uuid.uuid4().hex, boot_polls=boot_polls)
        self.types: List[Dict[str, Any]] = [dict(t) for t in DEFAULT_TYPES]
        self.stock: Dict[str, List[str]] = {k: list(v) for k, v in DEFAULT_STOCK.items()}
        self.spot_stock: Dict[str, List[str]] = {k: list(v) for k, v in DEFAULT_STOCK.items()}
        self.instances: Dict[str, Dict[str, Any]] = {}
        self.ssh_keys: Dict[str, Dict[str, Any]] = {}
        self.scripts: Dict[str, Dict[str, Any]] = {}
        self.volumes: Dict[str, Dict[str, Any]] = {}
        self.trash: Dict[str, Dict[str, Any]] = {}   # deleted volumes, not (yet) purged
        self.tokens_issued = 0
        self.refresh_tokens: Set[str] = set()
        self.no_capacity_next = 0      # accepted creates that then read status no_capacity
        self.ssh_port = self._free_port()
        self._forwarders: Dict[str, PortForwarder] = {}
        self._next_address = 2
        self._created = 0

    @property
    def api_url(self) -> str:
        return self.url + "/v1"

    @staticmethod
    def _free_port() -> int:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            return probe.getsockname()[1]

    # -- the vendor's own bodies -------------------------------------------------------
    def public_route(self, req, key: str) -> bool:
        return key == "oauth2.token"

    def auth_error(self, req) -> Reply:
        return _error(401, "unauthorized_request", "Access token is missing or invalid")

    def not_found(self, req) -> Reply:
        return _error(404, "not_found", "Cannot %s %s" % (req.method, req.path))

    def bad_json(self, req, why: str) -> Reply:
        return _error(400, "invalid_request", "Request body is not valid JSON: %s" % why)

    # -- levers for tests --------------------------------------------------------------
    def expire_token(self) -> None:
        """Every issued access token stops working (the adapter must fetch a new one)."""
        with self.lock:
            self.token = "verda-access-" + uuid.uuid4().hex

    def fail_capacity(self) -> None:
        self.fail_next("instances.create", _error(503, "service_unavailable",
                                                  "Not enough resources to deploy a 1 GPU instance type"))

    def fail_funds(self) -> None:
        self.fail_next("instances.create", _error(402, "insufficient_funds",
                                                  "Insufficient funds to deploy this instance"))

    def rate_limit(self, key: str, retry_after: int = 7) -> None:
        self.fail_next(key, _error(429, "rate_limit_exceeded", "Rate limit exceeded",
                                   headers={"Retry-After": str(retry_after)}))

    def server_error(self, key: str) -> None:
        self.fail_next(key, _error(500, "server_error", "Internal server error"))

    def malformed(self, key: str) -> None:
        self.fail_next(key, Reply(200, raw="<html>gateway</html>", headers={"Content-Type": "text/html"}))

    def settle(self, instance_id: str) -> None:
        """Bring an instance to running with its sshd now."""
        with self.lock:
            inst = self.instances[instance_id]
            if inst["status"] == "ordered":
                self._advance(inst)
            inst["_reads"] = self.boot_polls
            self._advance(inst)

    def finish_delete(self, instance_id: str) -> None:
        with self.lock:
            inst = self.instances.get(instance_id)
            if inst is not None and inst["status"] == "deleting":
                self._gone(inst)

    def live_instances(self) -> List[str]:
        with self.lock:
            return sorted(i for i, inst in self.instances.items() if inst["status"] != "deleting")

    def resources(self) -> Set[str]:
        with self.lock:
            return ({"instance:%s" % i for i in self.instances} | {"sshkey:%s" % k for k in self.ssh_keys}
                    | {"script:%s" % s for s in self.scripts} | {"volume:%s" % v for v in self.volumes}
                    | {"trash:%s" % v for v in self.trash})

    def stop(self) -> None:
        super().stop()
        for forwarder in list(self._forwarders.values()):
            forwarder.close()
        self._forwarders.clear()

    # -- lifecycle ---------------------------------------------------------------------
    def _advance(self, inst: Dict[str, Any]) -> None:
        """One read of an instance moves it along its lifecycle."""
        ready = self.tick(inst)
        if inst["status"] == "ordered":
            inst["status"] = "no_capacity" if inst.get("_no_capacity") else "provisioning"
        elif inst["status"] == "provisioning" and ready:
            keys = [self.ssh_keys[k]["key"] for k in inst["ssh_key_ids"] if k in self.ssh_keys]
            _host, port, _user = self.sshd.start(inst["id"], keys)
            address = "127.0.0.%d" % self._next_address
            self._next_address += 1
            self._forwarders[inst["id"]] = PortForwarder(address, self.ssh_port, ("127.0.0.1", port))
            inst["status"], inst["ip"] = "running", address
        elif inst["status"] == "deleting" and ready:
            self._gone(inst)

    def _gone(self, inst: Dict[str, Any]) -> None:
        self.instances.pop(inst["id"], None)
        volume = self.volumes.get(inst["os_volume_id"])
        if volume is None:
            return
        fate = inst.get("_os_volume_fate", "trash")
        if fate == "kept":
            volume.update(status="detached", instance_id=None)
            return
        del self.volumes[inst["os_volume_id"]]
        if fate == "trash":
            self.trash[volume["id"]] = dict(volume, status="deleted", instance_id=None,
                                            deleted_at=datetime.datetime.now(datetime.timezone.utc).isoformat())

    def _stop_machine(self, instance_id: str) -> None:
        forwarder = self._forwarders.pop(instance_id, None)
        if forwarder:
            forwarder.close()
        self.sshd.stop(instance_id)

    # -- auth --------------------------------------------------------------------------
    @route("POST", r"/v1/oauth2/token", key="oauth2.token")
    def issue_token(self, req) -> Reply:
        """GetAccessTokenDto {grant_type, client_id, client_secret} or RefreshAccessTokenPublicApiDto
        {grant_type, refresh_token} (a refresh token this fake issued)."""
        body = req.json
        if not isinstance(body, dict) or body.get("grant_type") not in ("client_credentials", "refresh_token"):
            return _error(400, "invalid_request", "unsupported grant type")
        if body["grant_type"] == "client_credentials":
            problems = self.check_fields(body, ("grant_type", "client_id", "client_secret"))
        else:
            problems = self.check_fields(body, ("grant_type", "refresh_token"), ("client_id", "client_secret"))
        if problems:
            return _error(400, "invalid_request", "; ".join(problems))
        if body["grant_type"] == "client_credentials" and (
                body.get("client_id") != CLIENT_ID or body.get("client_secret") != CLIENT_SECRET):
            return _error(401, "unauthorized_request", "Invalid client id or client secret")
        if body["grant_type"] == "refresh_token" and body["refresh_token"] not in self.refresh_tokens:
            return _error(401, "unauthorized_request", "Invalid refresh token")
        self.tokens_issued += 1
        refresh = "verda-refresh-" + uuid.uuid4().hex
        self.refresh_tokens.add(refresh)
        return Reply(200, {"access_token": self.token, "refresh_token": refresh,
                           "scope": "cloud-api-v1", "token_type": "Bearer", "expires_in": 3600})

    # -- catalog -----------------------------------------------------------------------
    @route("GET", r"/v1/instance-types", key="instance-types.list")
    def list_types(self, req) -> Reply:
        currency = req.arg("currency", "usd")
        if currency not in ("usd", "eur"):
            return _error(400, "invalid_request", "currency must be one of usd, eur")
        return Reply(200, [dict(t, currency=currency) for t in self.types])

    @route("GET", r"/v1/instance-availability", key="instance-availability.list")
    def availability(self, req) -> Reply:
        spot = req.arg("is_spot", req.arg("isSpot", "false"))
        if spot not in ("true", "false"):
            return _error(400, "invalid_request", "is_spot must be true or false")
        stock = self.spot_stock if spot == "true" else self.stock
        wanted = req.arg("location_code", req.arg("locationCode"))
        return Reply(200, [{"location_code": code, "availabilities": list(types)}
                           for code, types in stock.items() if wanted in (None, code)])

    @route("GET", r"/v1/locations", key="locations.list")
    def locations(self, req) -> Reply:
        return Reply(200, LOCATIONS)

    # -- instances ---------------------------------------------------------------------
    @route("GET", r"/v1/instances", key="instances.list")
    def list_instances(self, req) -> Reply:
        wanted = req.arg("status")
        tags = [t.split("=", 1) for t in req.query.get("tag", [])]
        for inst in list(self.instances.values()):
            self._advance(inst)
        return Reply(200, [self.public(i) for i in self.instances.values() if wanted in (None, i["status"])
                           and all(self._tagged(i, tag) for tag in tags)])

    @staticmethod
    def _tagged(inst: Dict[str, Any], tag: List[str]) -> bool:
        return any(t["key"] == tag[0].lower() and (len(tag) == 1 or t["value"] == tag[1]) for t in inst["tags"])

    @route("GET", r"/v1/volumes/trash", key="volumes.trash")
    def list_trash(self, req) -> Reply:
        return Reply(200, [dict(v) for v in self.trash.values()])

    @route("GET", r"/v1/instances/(?P<id>[^/]+)", key="instances.get")
    def get_instance(self, req) -> Reply:
        inst = self.instances.get(req.params["id"])
        if inst is None:
            return _error(404, "not_found", "Invalid instance id")
        self._advance(inst)
        return Reply(200, self.public(inst)) if inst["id"] in self.instances else _error(
            404, "not_found", "Invalid instance id")

    def _create_problems(self, body: Dict[str, Any]) -> List[str]:
        problems = self.check_fields(body, CREATE_REQUIRED, CREATE_OPTIONAL)
        if problems:
            return problems
        itype = next((t for t in self.types if t["instance_type"] == body["instance_type"]), None)
        if itype is None:
            return ["Invalid instance type"]
        if body["image"] not in itype["supported_os"]:
            return ["Operating system is not valid for this instance type"]
        if body["location_code"] not in [loc["code"] for loc in LOCATIONS]:
            return ["Invalid location code"]
        tags = body.get("tags") or []
        if not isinstance(tags, list) or len(tags) > TAGS_MAX or any(
                self.check_fields(t, ("key",), ("value",)) or len(str(t["key"])) > TAG_KEY_MAX
                or len(str(t.get("value") or "")) > TAG_VALUE_MAX for t in tags):
            return ["tags: at most %d of {key (<= %d chars), value (<= %d chars)}" % (TAGS_MAX, TAG_KEY_MAX,
                                                                                      TAG_VALUE_MAX)]
        if len(str(body.get("description") or "")) > 100:
            return ["description must be at most 100 characters"]
        if not all(k in self.ssh_keys for k in body.get("ssh_key_ids") or []):
            return ["Invalid ssh key id"]
        if body.get("startup_script_id") and body["startup_script_id"] not in self.scripts:
            return ["Invalid startup script id"]
        os_volume = body.get("os_volume") or {}
        problems = self.check_fields(os_volume, ("name", "size"), ("on_spot_discontinue", "tags")) if os_volume else []
        if problems:
            return ["os_volume: " + p for p in problems]
        if not isinstance(os_volume.get("size", 50), int) or os_volume.get("size", 50) < 1:
            return ["os_volume.size must be a positive integer"]
        if os_volume.get("on_spot_discontinue", "keep_detached") not in SPOT_POLICIES:
            return ["os_volume.on_spot_discontinue must be one of " + ", ".join(SPOT_POLICIES)]
        return []

    @route("POST", r"/v1/instances", key="instances.create")
    def create_instance(self, req) -> Reply:
        body = req.json
        problems = self._create_problems(body)
        if problems:
            return _error(400, "invalid_request", "; ".join(problems))
        location = body["location_code"]
        spot = bool(body.get("is_spot"))
        if body["instance_type"] not in (self.spot_stock if spot else self.stock).get(location, []):
            return _error(503, "service_unavailable", "Not enough resources to deploy instance type %s in %s"
                          % (body["instance_type"], location))
        itype = next(t for t in self.types if t["instance_type"] == body["instance_type"])
        instance_id, volume_id = str(uuid.uuid4()), str(uuid.uuid4())
        size = (body.get("os_volume") or {}).get("size", 50)
        self.volumes[volume_id] = {"id": volume_id, "name": (body.get("os_volume") or {}).get("name"), "size": size}
        inst = {
            "id": instance_id, "instance_type": body["instance_type"], "hostname": body["hostname"],
            "description": body.get("description") or "", "status": "ordered",
            "tags": [{"id": "tag_" + uuid.uuid4().hex[:22], "key": str(t["key"]).lower(),
                      "value": str(t.get("value") or "")} for t in body.get("tags") or []],
            "os_name": "Ubuntu 24.04", "volume_ids": [volume_id],
            "created_at": datetime.datetime.now(datetime.timezone.utc).isoformat(),
            "price_per_hour": float(itype["spot_price" if spot else "price_per_hour"]),
            "ssh_key_ids": list(body.get("ssh_key_ids") or []), "cpu": itype["cpu"], "gpu": itype["gpu"],
            "memory": itype["memory"], "gpu_memory": itype["gpu_memory"], "storage": itype["storage"],
            "ip": None, "os_volume_id": volume_id, "location": location, "image": body["image"],
            "startup_script_id": body.get("startup_script_id"), "is_spot": spot,
            "contract": body.get("contract") or ("SPOT" if spot else "PAY_AS_YOU_GO"),
            "pricing": body.get("pricing") or "FIXED_PRICE",
        }
        if self.no_capacity_next > 0:
            self.no_capacity_next -= 1
            inst["_no_capacity"] = True
        self.instances[instance_id] = inst
        return Reply(202, raw=instance_id)

    @route("PUT", r"/v1/instances", key="instances.action")
    def action(self, req) -> Reply:
        body = req.json
        problems = self.check_fields(body, ("id", "action"), ("volume_ids", "delete_permanently"))
        if problems:
            return _error(400, "invalid_request", "; ".join(problems))
        ids = body["id"] if isinstance(body["id"], list) else [body["id"]]
        if body["action"] not in ACTIONS:
            return _error(400, "invalid_request", "Invalid action")
        if not ids:
            return _error(400, "invalid_request", "id: expected an instance id or a list of them")
        if len(ids) == 1 and ids[0] not in self.instances:
            return _error(404, "not_found", "Instance not found")  # "single action only"
        if len(ids) == 1 and self.instances[ids[0]]["status"] == "deleting" and body["action"] == "delete":
            return Reply(204)  # already in the requested state
        results = []
        for instance_id in ids:
            inst = self.instances.get(instance_id)
            if inst is None:  # a batch answers 207 with each action's outcome
                results.append({"action": body["action"], "instanceId": instance_id, "status": "error",
                                "error": "Instance not found", "statusCode": 404})
                continue
            if body["action"] in ("delete", "discontinue"):
                if inst["status"] != "deleting":
                    inst["status"], inst["_reads"], inst["ip"] = "deleting", 0, None
                    named = body.get("volume_ids") is None or inst["os_volume_id"] in (body.get("volume_ids") or [])
                    permanently = body.get("delete_permanently") is True and inst["os_volume_id"] in (
                        body.get("volume_ids") or [])
                    inst["_os_volume_fate"] = "purged" if permanently else "trash" if named else "kept"
                    self._stop_machine(instance_id)
            results.append({"action": body["action"], "instanceId": instance_id, "status": "success"})
        return Reply(207 if any(r["status"] == "error" for r in results) else 202, results)

    # -- ssh keys and startup scripts --------------------------------------------------
    def _side_create(self, req, store: Dict[str, Dict[str, Any]], field: str) -> Reply:
        body = req.json
        problems = self.check_fields(body, ("name", field))
        if problems:
            return _error(400, "invalid_request", "; ".join(problems))
        if field == "key" and len(str(body["key"]).split()) < 2:
            return _error(400, "invalid_request", "Invalid public key")
        new_id = str(uuid.uuid4())
        self._created += 1
        store[new_id] = {"id": new_id, "name": body["name"], field: body[field]}
        if field == "key":
            store[new_id].update(fingerprint=_md5_fingerprint(body["key"]), created_by_user_id=None)
        else:  # creation order, which the listing sorts by
            store[new_id]["created_at"] = "2026-06-12T%02d:%02d:%02d.000Z" % (
                self._created // 3600 % 24, self._created // 60 % 60, self._created % 60)
        return Reply(201, raw=new_id)

    def _side_delete(self, req, store: Dict[str, Dict[str, Any]], list_field: str) -> Reply:
        ids = [req.params["id"]] if req.params.get("id") else (req.json or {}).get(list_field)
        if not isinstance(ids, list) or any(i not in store for i in ids):
            return _error(404, "not_found", "Not found")
        for item_id in ids:
            store.pop(item_id)
        return Reply(200)

    @route("GET", r"/v1/(?:ssh-keys|sshkeys)", key="sshkeys.list")
    def list_keys(self, req) -> Reply:
        return Reply(200, [dict(item) for item in self.ssh_keys.values()])

    @route("POST", r"/v1/(?:ssh-keys|sshkeys)", key="sshkeys.create")
    def create_key(self, req) -> Reply:
        return self._side_create(req, self.ssh_keys, "key")

    @route("DELETE", r"/v1/(?:ssh-keys|sshkeys)(?:/(?P<id>[^/]+))?", key="sshkeys.delete")
    def delete_key(self, req) -> Reply:
        return self._side_delete(req, self.ssh_keys, "keys")

    @route("GET", r"/v1/scripts", key="scripts.list")
    def list_scripts(self, req) -> Reply:
        try:
            page, size = int(req.arg("page", "1")), int(req.arg("pageSize", "10"))
        except ValueError:
            return _error(400, "invalid_request", "page and pageSize must be numbers")
        if page < 1 or not 1 <= size <= 100:
            return _error(400, "invalid_request", "page >= 1, 1 <= pageSize <= 100")
        if self.ignore_paging:
            page = 1
        name = req.arg("name") or ""
        found = sorted((s for s in self.scripts.values() if name in s["name"]), key=lambda s: s["created_at"],
                       reverse=req.arg("orderDirection", "desc") == "desc")
        return Reply(200, [dict(s) for s in found[(page - 1) * size:page * size]],
                     headers={"X-Page": str(page), "X-Page-Size": str(size), "X-Total-Count": str(len(found))})

    @route("POST", r"/v1/scripts", key="scripts.create")
    def create_script(self, req) -> Reply:
        return self._side_create(req, self.scripts, "script")

    @route("DELETE", r"/v1/scripts(?:/(?P<id>[^/]+))?", key="scripts.delete")
    def delete_script(self, req) -> Reply:
        return self._side_delete(req, self.scripts, "scripts")


def _md5_fingerprint(public_key: str) -> Optional[str]:
    """``ssh-keygen -E md5`` of a key line, colon-separated; None when it does not parse."""
    try:
        blob = base64.b64decode(public_key.split()[1], validate=True)
    except (IndexError, ValueError):
        return None
    digest = hashlib.md5(blob).hexdigest()  # nosec - the vendor's fingerprint format, not security
    return ":".join(digest[i:i + 2] for i in range(0, len(digest), 2))
