"""A fake of RunPod's REST API v2 (``https://api.runpod.io/v2``), from the v2 OpenAPI spec
(runpod/docs api-reference-v2/openapi.json): the GPU catalog with stock, pods, and the
account's SSH keys.

* Paths under ``/v2``; ``fake.url + "/v2"`` is the adapter's ``api_url``.
* Auth: ``Authorization: Bearer <token>``; otherwise 401 problem JSON.
* Errors are RFC 9457 problem JSON (``title``, ``status``, ``detail``, ``errors``) sent as
  ``application/problem+json``. Unknown or missing fields of a pod create are 422 with
  ``errors`` listing each violation (mounts, flags and data center ids included); a GPU
  type the catalog lacks, or a data center id it does not know, is 400; no stock where the
  pod must go is 400 with RunPod's capacity text.
* Lifecycle: a pod is PROVISIONING, then STARTING on its first read, RUNNING on the
  ``boot_polls``-th read (or at once with :meth:`settle`). Once RUNNING, a real sshd
  authorising the keys in the pod's env ``PUBLIC_KEY`` (or, with ``startSsh`` and no
  ``PUBLIC_KEY``, the account's keys) backs it, reported as ``ssh.direct`` and as the
  runtime mapping of private 22/tcp when ``22/tcp`` is in ``ports``. DELETE removes the
  pod at once (``GET`` is then 404 and the list omits it), as RunPod documents.
* Error levers: :meth:`fail_capacity`, :meth:`fail_balance`, :meth:`fail_pool_access`,
  :meth:`rate_limit`, :meth:`server_error`, :meth:`malformed`, :meth:`fail_problem`.
"""

from __future__ import annotations

import copy
import random
import re
import string
from typing import Any, Dict, List, Optional

from ansible_collections.gpuprov.cloud.tests.fakes.marketplace import MarketplaceFake, Reply, route

CAPACITY_DETAIL = ("There are no longer any instances available with the requested specifications. "
                   "Please refresh and try again.")
LEVELS = ("NONE", "LOW", "MEDIUM", "HIGH")

POD_FIELDS = ("name", "image", "gpu", "cpu", "cloud", "dataCenterIds", "globalNetworking", "mounts",
              "startJupyter", "startSsh", "templateId", "args", "disk", "env", "ports", "registry")
GPU_FIELDS = ("id", "count", "allowedCudaVersions", "minCudaVersion")
CATALOG_PARAMS = ("include", "product", "count", "cloud", "countryCodes", "cudaVersions", "minCudaVersion")
_PORT = re.compile(r"^\d{1,5}/(tcp|http)$")
_KEY = re.compile(r"^(ssh|ecdsa|sk)-[^\s]+ [^\s]+([ \t][^\n\r]*)?$")
_CUDA = re.compile(r"^\d+\.\d+$")


def _gpu(gpu_id, name, memory, secure, community, max_secure=8, max_community=4, pool=None):
    return {"id": gpu_id, "name": name, "pool": pool, "manufacturer": "NVIDIA", "memory": memory,
            "secure": True, "community": True, "price": {"secure": secure, "community": community},
            "maxCount": {"secure": max_secure, "community": max_community}}


def default_catalog() -> List[Dict[str, Any]]:
    return [
        _gpu("NVIDIA GeForce RTX 4090", "RTX 4090", 24, 0.69, 0.34, pool="ADA_24"),
        _gpu("NVIDIA L4", "L4", 24, 0.43, 0.28, pool="AMPERE_24"),
        _gpu("NVIDIA H100 80GB HBM3", "H100 SXM", 80, 2.69, 2.39, pool="ADA_80_PRO"),
        _gpu("NVIDIA H100 PCIe", "H100 PCIe", 80, 2.39, 1.99, max_secure=4, pool="ADA_80_PRO"),
        _gpu("NVIDIA RTX A2000", "RTX A2000", 6, 0.12, 0.08),  # no canonical name: never offered
    ]


def default_stock() -> Dict[str, Dict[str, str]]:
    """GPU type id -> data center id -> stock level (for pods, any count up to maxCount)."""
    return {
        "NVIDIA GeForce RTX 4090": {"US-TX-3": "HIGH", "EU-RO-1": "LOW"},
        "NVIDIA L4": {"US-TX-3": "MEDIUM", "EU-RO-1": "NONE"},
        "NVIDIA H100 80GB HBM3": {"US-TX-3": "NONE", "EU-RO-1": "MEDIUM"},
        "NVIDIA H100 PCIe": {"US-KS-2": "LOW"},
        "NVIDIA RTX A2000": {"US-TX-3": "HIGH"},
    }


def problem(status: int, detail: str, errors: Optional[List[str]] = None,
            headers: Optional[Dict[str, str]] = None) -> Reply:
    """RunPod's RFC 9457 error body."""
    titles = {400: "Bad Request", 401: "Unauthorized", 402: "Payment Required", 403: "Forbidden",
              404: "Not Found", 409: "Conflict", 422: "Unprocessable Entity", 429: "Too Many Requests",
              500: "Internal Server Error", 502: "Bad Gateway", 503: "Service Unavailable"}
    body = {"title": titles.get(status, "Error"), "status": status, "detail": detail}
    if errors:
        body["errors"] = list(errors)
    return Reply(status, body, headers=dict({"Content-Type": "application/problem+json"}, **(headers or {})))


class RunpodApiFake(MarketplaceFake):
    cloud = "runpod"

    def __init__(self, root: str, token: str = "fake-token", boot_polls: int = 2):
        super().__init__(root, token=token, boot_polls=boot_polls)
        self.gpus = default_catalog()
        self.stock = default_stock()
        self.pods: Dict[str, Dict[str, Any]] = {}
        self.account_keys: List[str] = []
        self.api_url = self.url + "/v2"

    # -- vendor bodies -------------------------------------------------------------------
    def auth_error(self, req) -> Reply:
        header = req.headers.get("Authorization")
        return problem(401, "missing bearer token" if not header else "invalid bearer token")

    def not_found(self, req) -> Reply:
        return problem(404, "resource not found")

    def bad_json(self, req, why: str) -> Reply:
        return problem(400, "request body is not valid JSON: %s" % why)

    # -- catalog ---------------------------------------------------------------------------
    @route("GET", r"/v2/catalog/gpus", key="catalog.gpus")
    def list_gpus(self, req) -> Reply:
        unknown = sorted(set(req.query) - set(CATALOG_PARAMS))
        if unknown:
            return problem(422, "Request validation failed.", ["query: unknown parameter %r" % u for u in unknown])
        include, product = req.arg("include"), req.arg("product")
        if include is not None and include != "AVAILABILITY":
            return problem(422, "Request validation failed.", ["include: must be one of [AVAILABILITY]"])
        if (include is None) != (product is None):
            return problem(400, "product is required with include=AVAILABILITY, and valid only with it")
        if include is None and any(req.arg(p) is not None for p in ("count", "cloud", "minCudaVersion")):
            return problem(400, "count, cloud and minCudaVersion are valid only with include=AVAILABILITY")
        if product is not None and product not in ("POD", "CLUSTER", "SERVERLESS"):
            return problem(422, "Request validation failed.", ["product: must be one of [POD CLUSTER SERVERLESS]"])
        try:
            count = int(req.arg("count", "1"))
        except ValueError:
            count = 0
        if count < 1:
            return problem(422, "Request validation failed.", ["count: must be an integer >= 1"])
        tier = req.arg("cloud", "SECURE")
        if tier not in ("SECURE", "COMMUNITY"):
            return problem(422, "Request validation failed.", ["cloud: must be one of [SECURE COMMUNITY]"])
        out = []
        for gpu in self.gpus:
            item = copy.deepcopy(gpu)
            if include:
                fits = gpu[tier.lower()] and count <= gpu["maxCount"][tier.lower()]
                centers = [{"id": dc, "name": dc, "availability": level if fits else "NONE"}
                           for dc, level in sorted(self.stock.get(gpu["id"], {}).items())]
                best = max((LEVELS.index(c["availability"]) for c in centers), default=0)
                item["availability"] = LEVELS[best]
                if best:  # omitted entirely when unavailable everywhere
                    item["dataCenters"] = centers
            out.append(item)
        return Reply(200, {"gpus": out})

    # -- pods ------------------------------------------------------------------------------
    def _validate(self, body: Any) -> List[str]:
        problems = self.check_fields(body, required=("name",), optional=POD_FIELDS)
        if not isinstance(body, dict):
            return problems
        problems = ["$: " + p for p in problems]
        if not body.get("image") and not body.get("templateId"):
            problems.append("$: missing field 'image' (required unless templateId is set)")
        gpu = body.get("gpu")
        if (gpu is None) == (body.get("cpu") is None):
            problems.append("$: exactly one of 'gpu' or 'cpu' must be set")
        if gpu is not None:
            problems += ["gpu: " + p for p in self.check_fields(gpu, required=("id",), optional=GPU_FIELDS)]
            if isinstance(gpu, dict) and not (isinstance(gpu.get("count", 1), int) and gpu.get("count", 1) >= 1):
                problems.append("gpu.count: must be an integer >= 1")
            if isinstance(gpu, dict) and gpu.get("minCudaVersion") is not None \
                    and not _CUDA.match(str(gpu["minCudaVersion"])):
                problems.append("gpu.minCudaVersion: must match ^\\d+\\.\\d+$")
        env = body.get("env", {})
        if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
            problems.append("env: must be an object of strings")
        ports = body.get("ports", [])
        if not isinstance(ports, list) or not all(isinstance(p, str) and _PORT.match(p) for p in ports):
            problems.append("ports: each entry must be '<port>/<tcp|http>'")
        if body.get("cloud", "SECURE") not in ("SECURE", "COMMUNITY"):
            problems.append("cloud: must be one of [SECURE COMMUNITY]")
        if "disk" in body and not (isinstance(body["disk"], int) and body["disk"] >= 1):
            problems.append("disk: must be an integer >= 1")
        if isinstance(body.get("name"), str) and not body["name"]:
            problems.append("name: must be at least 1 character")
        centers = body.get("dataCenterIds", [])
        if not isinstance(centers, list) or not all(isinstance(c, str) for c in centers):
            problems.append("dataCenterIds: must be an array of strings")
        for flag in ("startSsh", "startJupyter", "globalNetworking"):
            if flag in body and not isinstance(body[flag], bool):
                problems.append("%s: must be a boolean" % flag)
        problems += self._validate_mounts(body.get("mounts"))
        return problems

    def _validate_mounts(self, mounts: Any) -> List[str]:
        """Mounts (additionalProperties false): persistent {size >= 10, path} or network [{volumeId, path}] (<= 1)."""
        if mounts is None:
            return []
        problems = ["mounts: " + p for p in self.check_fields(mounts, optional=("persistent", "network"))]
        if problems:
            return problems
        persistent = mounts.get("persistent")
        if persistent is not None:
            problems += ["mounts.persistent: " + p for p in self.check_fields(persistent, ("size", "path"))]
            if isinstance(persistent, dict) and not (isinstance(persistent.get("size"), int)
                                                     and persistent["size"] >= 10):
                problems.append("mounts.persistent.size: must be an integer >= 10")
        network = mounts.get("network")
        if network is not None and not (isinstance(network, list) and len(network) <= 1 and not any(
                self.check_fields(n, ("volumeId", "path")) for n in network)):
            problems.append("mounts.network: at most one {volumeId, path}")
        if persistent is not None and network is not None:
            problems.append("mounts: persistent and network are exclusive")
        return problems

    def _place(self, body: Dict[str, Any]):
        """(data center, None) or (None, the 400 reply)."""
        gpu = body["gpu"]
        known = {g["id"]: g for g in self.gpus}
        if gpu["id"] not in known:
            return None, problem(400, "gpu.id: unknown GPU type %r" % gpu["id"])
        tier = body.get("cloud", "SECURE").lower()
        if gpu.get("count", 1) > known[gpu["id"]]["maxCount"][tier]:
            return None, problem(400, "gpu.count: at most %d x %s in the %s cloud" % (
                known[gpu["id"]]["maxCount"][tier], gpu["id"], tier.upper()))
        stock = self.stock.get(gpu["id"], {})
        every_dc = {dc for levels in self.stock.values() for dc in levels}
        wanted = body.get("dataCenterIds") or sorted(stock)
        for dc in wanted:
            if dc not in every_dc:
                return None, problem(400, "dataCenterIds: unknown data center %r" % dc)
        for dc in wanted:
            if stock.get(dc, "NONE") != "NONE":
                return dc, None
        return None, problem(400, CAPACITY_DETAIL)

    @route("POST", r"/v2/pods", key="pods.create")
    def create_pod(self, req) -> Reply:
        body = req.json
        problems = self._validate(body)
        if problems:
            return problem(422, "Request validation failed.", problems)
        if body.get("cpu") is not None:
            return problem(400, "CPU pods are not modelled by this fake")
        dc, refusal = self._place(body)
        if refusal is not None:
            return refusal
        pod_id = "".join(random.choice(string.ascii_lowercase + string.digits) for _position in range(14))
        gpu = dict(body["gpu"], count=body["gpu"].get("count", 1))
        gpu.pop("minCudaVersion", None)
        gpu.pop("allowedCudaVersions", None)
        unit = next(g for g in self.gpus if g["id"] == gpu["id"])["price"][body.get("cloud", "SECURE").lower()]
        pod = {
            "id": pod_id, "name": body["name"], "image": body.get("image"), "args": body.get("args", ""),
            "disk": body.get("disk", 50), "ports": list(body.get("ports", [])), "env": dict(body.get("env", {})),
            "registry": body.get("registry"), "status": "PROVISIONING", "actions": ["terminate"],
            "mounts": body.get("mounts", {}), "gpu": gpu, "cloud": body.get("cloud", "SECURE"),
            "dataCenterId": dc, "cudaVersion": "12.8",
            "ssh": {"proxy": {"host": "ssh.runpod.io", "port": 22, "username": "%s-64411eb2" % pod_id,
                              "command": "ssh %s-64411eb2@ssh.runpod.io" % pod_id}, "direct": None},
            "template": None, "cost": round(unit * gpu["count"], 4), "locked": False,
            "globalNetworking": {"enabled": bool(body.get("globalNetworking"))}, "runtime": None,
            "createdAt": "2026-11-30T12:00:00Z", "startedAt": None,
            "_start_ssh": bool(body.get("startSsh")),
        }
        self.pods[pod_id] = pod
        return Reply(201, self.public(pod))

    def _advance(self, pod: Dict[str, Any]) -> None:
        """One read of a booting pod: PROVISIONING -> STARTING -> RUNNING (after boot_polls reads)."""
        if pod["status"] in ("PROVISIONING", "STARTING"):
            if self.tick(pod):
                self._run(pod)
            else:
                pod["status"] = "STARTING"

    def _run(self, pod: Dict[str, Any]) -> None:
        keys = pod["env"].get("PUBLIC_KEY")
        if keys is None and pod["_start_ssh"]:
            keys = "\n".join(self.account_keys)
        pod.update(status="RUNNING", actions=["stop", "restart", "terminate"], startedAt="2026-11-30T12:02:00Z")
        runtime = {"uptime": 1, "ports": []}
        if "22/tcp" in pod["ports"]:
            host, port, user = self.sshd.start(pod["id"], (keys or "").splitlines())
            pod["ssh"]["direct"] = {"host": host, "port": port, "username": user,
                                    "command": "ssh %s@%s -p %d" % (user, host, port)}
            runtime["ports"].append({"private": 22, "public": port, "type": "tcp", "ip": host})
        pod["runtime"] = runtime

    @route("GET", r"/v2/pods", key="pods.list")
    def list_pods(self, req) -> Reply:
        if set(req.query) - {"includeClusterPods"}:
            return problem(422, "Request validation failed.", ["query: unknown parameter"])
        clusters = req.arg("includeClusterPods") == "true"
        out = []
        for pod in list(self.pods.values()):
            if pod.get("_cluster") and not clusters:
                continue
            self._advance(pod)
            out.append(self.public(pod))
        return Reply(200, {"pods": out})

    @route("GET", r"/v2/pods/(?P<id>[^/]+)", key="pods.get")
    def get_pod(self, req) -> Reply:
        pod = self.pods.get(req.params["id"])
        if pod is None:
            return problem(404, "The requested Pod does not exist.")
        self._advance(pod)
        return Reply(200, self.public(pod))

    @route("DELETE", r"/v2/pods/(?P<id>[^/]+)", key="pods.delete")
    def delete_pod(self, req) -> Reply:
        pod = self.pods.get(req.params["id"])
        if pod is None:
            return problem(404, "The requested Pod does not exist.")
        if pod.get("_cluster"):
            return problem(409, "Pod belongs to a cluster and cannot be terminated via the pod endpoints.")
        del self.pods[pod["id"]]
        self.sshd.stop(pod["id"])
        return Reply(204)

    # -- account SSH keys (a full-replacement list) ---------------------------------------
    @route("GET", r"/v2/account/ssh-keys", key="ssh_keys.get")
    def get_keys(self, req) -> Reply:
        return Reply(200, {"keys": list(self.account_keys)})

    @route("PUT", r"/v2/account/ssh-keys", key="ssh_keys.put")
    def put_keys(self, req) -> Reply:
        body = req.json
        problems = self.check_fields(body, required=("keys",))
        if not problems and not (isinstance(body["keys"], list)
                                 and all(isinstance(k, str) and _KEY.match(k) for k in body["keys"])):
            problems.append("keys: each entry must be an authorized_keys line")
        if problems:
            return problem(422, "Request validation failed.", ["$: " + p for p in problems])
        self.account_keys = list(body["keys"])
        return Reply(200, {"keys": list(self.account_keys)})

    # -- levers for tests -------------------------------------------------------------------
    def settle(self, pod_id: str) -> None:
        """Bring a booting pod to RUNNING at once (its sshd started)."""
        with self.lock:
            pod = self.pods.get(pod_id)
            if pod is not None and pod["status"] in ("PROVISIONING", "STARTING"):
                self._run(pod)

    def set_stock(self, gpu_id: str, dc: str, level: str) -> None:
        with self.lock:
            self.stock.setdefault(gpu_id, {})[dc] = level

    def fail_problem(self, key: str, status: int, detail: str, times: int = 1, **kwargs) -> None:
        self.fail_next(key, problem(status, detail, **kwargs), times=times)

    def fail_capacity(self, times: int = 1) -> None:
        self.fail_problem("pods.create", 400, CAPACITY_DETAIL, times=times)

    def fail_balance(self, times: int = 1) -> None:
        self.fail_problem("pods.create", 402, "Insufficient balance to deploy this pod.", times=times)

    def fail_pool_access(self, times: int = 1) -> None:
        self.fail_problem("pods.create", 403, "Your account cannot access the requested GPU pool.", times=times)

    def rate_limit(self, key: str, retry_after: int = 12, times: int = 1) -> None:
        self.fail_problem(key, 429, "rate limit exceeded for the minute window", times=times,
                          headers={"Retry-After": str(retry_after)})

    def server_error(self, key: str, status: int = 503, times: int = 1) -> None:
        self.fail_problem(key, status, "upstream unavailable", times=times)

    def malformed(self, key: str, times: int = 1) -> None:
        """A 2xx whose body is not JSON (a proxy's HTML page)."""
        self.fail_next(key, Reply(200, raw="<html>gateway</html>", headers={"Content-Type": "text/html"}),
                       times=times)

    def live_pod_ids(self) -> List[str]:
        with self.lock:
            return sorted(self.pods)
