"""A fake of Prime Intellect's REST API v1 (https://api.primeintellect.ai), on the
marketplace base: the documented paths, request bodies and response shapes of the
availability, pods and SSH key endpoints (docs.primeintellect.ai api-reference, the
official ``prime`` CLI's ``prime_cli/api``), FastAPI's error bodies (``detail`` a string,
or for 422 a list of ``{loc, msg, type}``), and a real sshd behind every ACTIVE pod.

Lifecycle: a pod is PROVISIONING (``sshConnection`` null, ``ip`` ``[null]``) until it has
been read ``boot_polls`` times, then ACTIVE with installation FINISHED, its sshd started
with every key of the account (the fake's reading of "the account's keys go into new
pods": unverified whether Prime injects all keys or the primary one), and
``sshConnection`` ``"<user>@127.0.0.1 -p <port>"``. DELETE makes it DELETING (so the next read
shows); the read after shows it TERMINATED and the one after that finds it gone.

Paging: ``/availability/gpus`` by ``page``/``page_size`` with ``totalCount``, pods and SSH keys by
``offset``/``limit`` with ``total_count``. With :attr:`ignore_paging` every page asked is the first
(``page`` 1, ``offset`` 0), the totals still the totals: a page is full when the listing holds at
least the size asked, which is how Prime says another may follow.

Pod names: the rule of Prime's CLI (``prime pods create``: letters, digits and dashes, at least one
letter; the API documents none), refused with a FastAPI 422 on ``pod.name``. ``make_named_pod``
puts a pod of any name in the account, as one made when the API took it.
"""

from __future__ import annotations

import copy
import datetime
import uuid
from typing import Any, Dict, List, Optional

from ansible_collections.gpuprov.cloud.tests.fakes.marketplace import MarketplaceFake, Reply, route

IMAGES = ["ubuntu_22_cuda_12", "cuda_12_1_pytorch_2_2", "cuda_11_8_pytorch_2_1", "stable_diffusion", "flux"]


def _resource(default: Optional[int]) -> Dict[str, Any]:
    return {"minCount": None, "defaultCount": default, "maxCount": None, "pricePerUnit": None, "step": None,
            "defaultIncludedInPrice": None, "additionalInfo": None}


# An item's ``region`` (the availability filter ``regions`` takes these names) by its country.
REGIONS = {"US": "united_states", "CA": "canada", "FI": "europe_north", "RO": "europe_east"}


def offer(cloud_id: str, gpu_type: str, provider: str, data_center: str, country: str, price: Optional[float],
          gpu_count: int = 1, stock: str = "Available", socket: str = "PCIe", security: str = "secure_cloud",
          spot: bool = False, images: Optional[List[str]] = None, gpu_memory: int = 80) -> Dict[str, Any]:
    """One availability item, every documented field present (as the CLI's test data shows them)."""
    return {
        "cloudId": cloud_id, "gpuType": gpu_type, "socket": socket, "provider": provider,
        "region": REGIONS.get(country, "europe_west"), "dataCenter": data_center, "country": country,
        "gpuCount": gpu_count, "gpuMemory": gpu_memory, "disk": _resource(100), "sharedDisk": _resource(None),
        "vcpu": _resource(16 * gpu_count), "memory": _resource(120 * gpu_count),
        "internetSpeed": None, "interconnect": None, "interconnectType": None, "provisioningTime": None,
        "stockStatus": stock, "security": security,
        "prices": {"onDemand": price, "communityPrice": None, "isVariable": None, "currency": "USD"},
        "images": list(IMAGES if images is None else images), "isSpot": spot, "prepaidTime": None,
    }


DEFAULT_OFFERS = [
    offer("NVIDIA H100 PCIe", "H100_80GB", "runpod", "US-KS-2", "US", 2.69, stock="Low"),
    offer("n3-H100x1", "H100_80GB", "hyperstack", "CANADA-1", "CA", 1.90),
    offer("H100_80GB_SPOT", "H100_80GB", "primecompute", "US-TX-1", "US", 1.10, stock="Medium", spot=True),
    offer("8xH100-SXM5", "H100_80GB", "primecompute", "US-TX-1", "US", 18.00, gpu_count=8, socket="SXM5",
          stock="High"),
    offer("1A100.22V", "A100_80GB", "datacrunch", "FIN-01", "FI", 1.29, stock="Unavailable"),
    offer("NVIDIA GeForce RTX 4090", "RTX4090_24GB", "runpod", "EU-RO-1", "RO", 0.69, stock="High",
          security="community_cloud", gpu_memory=24),
    offer("cpu-8-32", "CPU_NODE", "primecompute", "US-TX-1", "US", 0.12, stock="High", gpu_memory=0),
]

_POD_REQUIRED = ("cloudId", "gpuType", "socket", "gpuCount")
_POD_OPTIONAL = ("name", "diskSize", "vcpus", "memory", "maxPrice", "image", "customTemplateId", "dataCenterId",
                 "country", "security", "envVars", "jupyterPassword", "autoRestart")
_BODY_OPTIONAL = ("disks", "team", "team_member_ids", "shared_with_team")


def pod_name_allowed(name: Any) -> bool:
    """The pod name rule of Prime's CLI (prime_cli/commands/pods.py): letters, numbers and dashes only,
    at least one letter."""
    return (isinstance(name, str) and bool(name) and any(c.isalpha() for c in name)
            and all(c.isalnum() or c == "-" for c in name))


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _invalid(problems: List[str], where: List[str]) -> Reply:
    """FastAPI's 422: ``detail`` a list of ``{loc, msg, type}``."""
    detail = []
    for problem in problems:
        field = problem.split("'")[1] if "'" in problem else ""
        kind = "missing" if problem.startswith("missing") else "extra_forbidden"
        detail.append({"loc": ["body"] + where + ([field] if field else []), "msg": problem, "type": kind})
    return Reply(422, {"detail": detail})


class PrimeIntellectApiFake(MarketplaceFake):
    cloud = "primeintellect"

    def __init__(self, root: str, token: str = "fake-token", boot_polls: int = 2,
                 offers: Optional[List[Dict[str, Any]]] = None):
        super().__init__(root, token=token, boot_polls=boot_polls)
        self.offers = copy.deepcopy(DEFAULT_OFFERS if offers is None else offers)
        self.pods: Dict[str, Dict[str, Any]] = {}
        self.keys: Dict[str, Dict[str, Any]] = {}
        self.user_id = "user-" + uuid.uuid4().hex[:8]

    # -- the vendor's auth and error bodies -------------------------------------------
    def authorized(self, req) -> bool:
        return req.headers.get("Authorization") == "Bearer %s" % self.token

    def auth_error(self, req) -> Reply:
        if not req.headers.get("Authorization"):
            return Reply(403, {"detail": "Not authenticated"})   # FastAPI's HTTPBearer, no header
        return Reply(401, {"detail": "API key unauthorized"})

    def not_found(self, req) -> Reply:
        return Reply(404, {"detail": "Not Found"})

    def bad_json(self, req, why: str) -> Reply:
        return Reply(422, {"detail": [{"loc": ["body"], "msg": "JSON decode error: %s" % why,
                                       "type": "json_invalid"}]})

    # -- levers ------------------------------------------------------------------------
    def fail_capacity(self, times: int = 1) -> None:
        self.fail_next("pods.create", Reply(400, {"detail": "No capacity available for this configuration, "
                                                            "please try another offer"}), times)

    def fail_billing(self, times: int = 1) -> None:
        self.fail_next("pods.create", Reply(402, {"detail": "Insufficient balance in wallet"}), times)

    def rate_limit(self, key: str = "pods.create", retry_after: int = 7, times: int = 1) -> None:
        self.fail_next(key, Reply(429, {"detail": "Too Many Requests"}, headers={"Retry-After": str(retry_after)}),
                       times)

    def server_error(self, key: str, times: int = 1) -> None:
        self.fail_next(key, Reply(500, {"detail": "Internal Server Error"}), times)

    def malformed(self, key: str, times: int = 1) -> None:
        self.fail_next(key, Reply(200, raw="<html>upstream proxy error</html>"), times)

    def resources(self) -> set:
        with self.lock:
            return ({"pod:%s:%s" % (i, p["name"]) for i, p in self.pods.items()}
                    | {"ssh_key:%s:%s" % (i, k["name"]) for i, k in self.keys.items()})

    def make_named_pod(self, name: str, item: Optional[Dict[str, Any]] = None) -> str:
        """A booting pod named ``name`` whatever the name rule (one made before gpuprov followed it)."""
        with self.lock:
            return self._new_pod(name, item or self.offers[0])["id"]

    def make_unreachable_pod(self, name: str) -> str:
        """An ACTIVE pod whose connection details never arrive (``sshConnection`` ``[null]``)."""
        with self.lock:
            pod = self._new_pod(name, self.offers[0])
            pod.update(status="ACTIVE", installationStatus="FINISHED", installationProgress=100,
                       sshConnection=[None], ip=[None], _unreachable=True)
            return pod["id"]

    def settle(self, pod_id: str) -> None:
        """Boot a pod now (as if read enough times)."""
        with self.lock:
            pod = self.pods.get(pod_id)
            if pod and pod["status"] in ("PROVISIONING", "PENDING"):
                pod["_reads"] = self.boot_polls
                self._advance(pod)

    def settle_deleted(self, pod_id: str) -> None:
        with self.lock:
            if pod_id in self.pods and self.pods[pod_id]["status"] in ("DELETING", "TERMINATED"):
                del self.pods[pod_id]

    # -- pods lifecycle ------------------------------------------------------------------
    def _new_pod(self, name: Optional[str], item: Dict[str, Any]) -> Dict[str, Any]:
        pod_id = uuid.uuid4().hex
        pod = {
            "id": pod_id, "userId": self.user_id, "teamId": None, "walletId": "wallet-1", "name": name,
            "type": "HOSTED", "providerType": item["provider"], "status": "PROVISIONING",
            "installationStatus": "PENDING", "installationFailure": None, "installationProgress": 0,
            "createdAt": _now(), "updatedAt": _now(), "gpuName": item["gpuType"], "gpuCount": item["gpuCount"],
            "jupyterPassword": None, "socket": item["socket"], "priceHr": item["prices"]["onDemand"],
            "stoppedPriceHr": 0.005, "provisioningPriceHr": 0, "environmentType": "ubuntu_22_cuda_12",
            "customTemplateId": None, "primePortMapping": [], "sshConnection": None, "ip": [None],
            "resources": {"memory": "120", "disk": "100", "vcpus": "16"}, "attachedResources": [],
            "isSpot": bool(item.get("isSpot")), "autoRestart": False,
            "_keys": [k["publicKey"] for k in self.keys.values()],
        }
        self.pods[pod_id] = pod
        return pod

    def _advance(self, pod: Dict[str, Any]) -> None:
        """One read of a pod: booting -> ACTIVE after boot_polls reads; DELETING -> TERMINATED -> gone."""
        if pod["status"] == "TERMINATED":
            self.pods.pop(pod["id"], None)
            return
        if pod["status"] == "DELETING":
            if pod.get("_deleting_seen"):
                pod["status"] = "TERMINATED"
            pod["_deleting_seen"] = True
            return
        if pod["status"] in ("PROVISIONING", "PENDING") and self.tick(pod):
            host, port, user = self.sshd.start(pod["id"], pod["_keys"])
            pod.update(status="ACTIVE", installationStatus="FINISHED", installationProgress=100, ip=host,
                       sshConnection="%s@%s -p %d" % (user, host, port), updatedAt=_now(),
                       primePortMapping=[{"internal": "22", "external": str(port), "protocol": "TCP",
                                          "usedBy": "SSH", "description": ""}])
        elif pod["status"] == "PROVISIONING":
            pod["status"] = "PENDING"

    def _read_pods(self) -> List[Dict[str, Any]]:
        for pod in list(self.pods.values()):
            self._advance(pod)
        return [self.public(p) for p in self.pods.values()]

    # -- routes: availability --------------------------------------------------------------
    @route("GET", r"/api/v1/availability/gpus/?", key="availability.gpus")
    def availability(self, req) -> Reply:
        try:
            page, size = int(req.arg("page", "1")), int(req.arg("page_size", "100"))
            count = req.arg("gpu_count")
            count = int(count) if count not in (None, "") else None
        except ValueError:
            return Reply(422, {"detail": [{"loc": ["query", "page"], "msg": "Input should be a valid integer",
                                           "type": "int_parsing"}]})
        if page < 1 or not 1 <= size <= 100:
            return Reply(422, {"detail": [{"loc": ["query", "page_size"], "msg": "page >= 1, 1 <= page_size <= 100",
                                           "type": "less_than_equal"}]})
        regions = req.query.get("regions") or []
        items = [o for o in self.offers
                 if (not regions or o["region"] in regions)
                 and (req.arg("gpu_type") in (None, o["gpuType"]))
                 and (count is None or o["gpuCount"] == count)
                 and (req.arg("security") in (None, o["security"]))
                 and (req.arg("socket") in (None, o["socket"]))]
        if self.ignore_paging:
            page = 1
        return Reply(200, {"items": items[(page - 1) * size:page * size], "totalCount": len(items)})

    # -- routes: pods ------------------------------------------------------------------------
    def _window(self, req) -> Optional[tuple]:
        try:
            offset, limit = int(req.arg("offset", "0")), int(req.arg("limit", "100"))
        except ValueError:
            return None
        if offset >= 0 and limit >= 0 and self.ignore_paging:
            return 0, limit
        return (offset, limit) if offset >= 0 and limit >= 0 else None

    @route("GET", r"/api/v1/pods/?", key="pods.list")
    def list_pods(self, req) -> Reply:
        window = self._window(req)
        if window is None:
            return Reply(422, {"detail": [{"loc": ["query", "offset"], "msg": "Input should be a valid integer",
                                           "type": "int_parsing"}]})
        pods = self._read_pods()
        offset, limit = window
        return Reply(200, {"total_count": len(pods), "offset": offset, "limit": limit,
                           "data": pods[offset:offset + limit]})

    @route("GET", r"/api/v1/pods/status/?", key="pods.status")
    def pods_status(self, req) -> Reply:
        wanted = set(req.query.get("pod_ids", []))
        data = []
        for pod in self._read_pods():
            if pod["id"] in wanted:
                data.append({k: pod[k] for k in ("status", "sshConnection", "ip", "installationFailure",
                                                 "installationProgress", "primePortMapping", "priceHr")}
                            | {"podId": pod["id"], "providerType": pod["providerType"]})
        return Reply(200, {"data": data})

    @route("GET", r"/api/v1/pods/(?P<id>[^/]+)", key="pods.get")
    def get_pod(self, req) -> Reply:
        pod = self.pods.get(req.params["id"])
        if pod is None:
            return Reply(404, {"detail": "Pod not found"})
        self._advance(pod)
        pod = self.pods.get(req.params["id"])
        return Reply(200, self.public(pod)) if pod else Reply(404, {"detail": "Pod not found"})

    @route("POST", r"/api/v1/pods/?", key="pods.create")
    def create_pod(self, req) -> Reply:
        body = req.json
        problems = self.check_fields(body, required=("pod", "provider"), optional=_BODY_OPTIONAL)
        if problems:
            return _invalid(problems, [])
        problems = self.check_fields(body["pod"], required=_POD_REQUIRED, optional=_POD_OPTIONAL)
        if problems:
            return _invalid(problems, ["pod"])
        problems = self.check_fields(body["provider"], required=("type",))
        if problems:
            return _invalid(problems, ["provider"])
        if body.get("team") is not None:
            problems = self.check_fields(body["team"], required=("teamId",))
            if problems:
                return _invalid(problems, ["team"])
        pod = body["pod"]
        if pod.get("name") is not None and not pod_name_allowed(pod["name"]):
            return Reply(422, {"detail": [{"loc": ["body", "pod", "name"], "msg": "Value error, name may hold only "
                                           "letters, numbers and dashes and must contain at least 1 letter",
                                           "type": "value_error"}]})
        if not isinstance(pod["gpuCount"], int) or isinstance(pod["gpuCount"], bool):
            return Reply(422, {"detail": [{"loc": ["body", "pod", "gpuCount"], "msg": "Input should be a valid "
                                           "integer", "type": "int_type"}]})
        item = next((o for o in self.offers
                     if o["cloudId"] == pod["cloudId"] and o["gpuType"] == pod["gpuType"]
                     and o["provider"] == body["provider"]["type"] and o["gpuCount"] == pod["gpuCount"]
                     and pod.get("dataCenterId") in (None, o["dataCenter"])), None)
        if item is None:
            return Reply(400, {"detail": "Offer not available: no %s x%s with cloudId %r at %s"
                               % (pod["gpuType"], pod["gpuCount"], pod["cloudId"], pod.get("dataCenterId"))})
        if item["stockStatus"] == "Unavailable":
            return Reply(400, {"detail": "No capacity available for %s at %s" % (item["cloudId"], item["dataCenter"])})
        if pod.get("image") and item["images"] and pod["image"] not in item["images"]:
            return Reply(400, {"detail": "Image %s is not supported by this provider" % pod["image"]})
        made = self._new_pod(pod.get("name"), item)
        return Reply(200, self.public(made))

    @route("DELETE", r"/api/v1/pods/(?P<id>[^/]+)", key="pods.delete")
    def delete_pod(self, req) -> Reply:
        pod = self.pods.get(req.params["id"])
        if pod is None or pod["status"] == "TERMINATED":
            return Reply(404, {"detail": "Pod not found"})
        if pod["status"] != "DELETING":
            pod["status"] = "DELETING"
            self.sshd.stop(pod["id"])
        return Reply(200, {"status": "DELETING"})

    # -- routes: SSH keys --------------------------------------------------------------------
    @route("GET", r"/api/v1/ssh_keys/?", key="ssh_keys.list")
    def list_keys(self, req) -> Reply:
        window = self._window(req)
        if window is None:
            return Reply(422, {"detail": [{"loc": ["query", "offset"], "msg": "Input should be a valid integer",
                                           "type": "int_parsing"}]})
        offset, limit = window
        keys = list(self.keys.values())
        return Reply(200, {"total_count": len(keys), "offset": offset, "limit": limit,
                           "data": keys[offset:offset + limit]})

    @route("POST", r"/api/v1/ssh_keys/?", key="ssh_keys.create")
    def create_key(self, req) -> Reply:
        body = req.json
        problems = self.check_fields(body, required=("name", "publicKey"))
        if problems:
            return _invalid(problems, [])
        parts = str(body["publicKey"]).split()
        if len(parts) < 2 or not parts[0].startswith(("ssh-", "ecdsa-")):
            return Reply(400, {"detail": "Invalid SSH public key"})
        if any(k["publicKey"].split()[:2] == parts[:2] for k in self.keys.values()):
            return Reply(400, {"detail": "SSH key already exists"})
        key_id = uuid.uuid4().hex
        self.keys[key_id] = {"id": key_id, "userId": self.user_id, "name": body["name"],
                             "publicKey": body["publicKey"], "isPrimary": not self.keys, "isUserKey": True}
        return Reply(200, self.keys[key_id])

    @route("DELETE", r"/api/v1/ssh_keys/(?P<id>[^/]+)", key="ssh_keys.delete")
    def delete_key(self, req) -> Reply:
        if self.keys.pop(req.params["id"], None) is None:
            return Reply(404, {"detail": "SSH key not found"})
        return Reply(200, {"status": "deleted"})
