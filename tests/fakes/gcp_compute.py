"""A fake GCP Compute Engine REST API (compute/v1) for tests, on pytest-httpserver.

The real google-cloud-compute client reaches it through its REST transport by
setting ``api_endpoint`` to ``fake.url`` (http://127.0.0.1:port) with anonymous
credentials. Paths, query parameters and JSON bodies are the ones the library
sends (see compute_v1/services/*/transports/rest_base.py); responses follow the
documented resource shapes: Operations (``status`` DONE/RUNNING, failures as
``error.errors[] {code, message, errorDetails}`` + ``httpErrorStatusCode``),
Instances (``labels``, ``status``, zone URLs, ``networkInterfaces[].accessConfigs[].natIP``),
Firewalls (get and list), Images (``getFromFamily``), aggregated instances / machineTypes /
acceleratorTypes lists (``items: {"zones/<z>": {...}}`` with ``NO_RESULTS_ON_PAGE`` warnings), and
error bodies ``{"error": {"code", "message", "errors": [{"message", "domain", "reason"}], "status"}}``.

State: instances and firewalls (and operations), per project. Lists support
``maxResults`` / ``pageToken`` and the filter forms the adapter sends
(``labels.k = "v"``, ``name eq "re"``, ``!=``/``ne``, parenthesised conjunctions, ``OR``).
With ``ignore_paging`` the server ignores ``pageToken``: every list answers its first page
and a ``nextPageToken`` (the same each time, as a server repeating its first answer sends);
after ``IGNORED_PAGES_MAX`` such answers it sends none, so a client that follows tokens
forever ends (with every page's items many times over) instead of hanging the suite.
Levers:

* ``fail_next(calls, status, reason=..., message=...)``: the next request of one of
  ``calls`` (e.g. ``"instances.insert"``) gets that HTTP error.
* ``fail_next_insert(code, ...)``: the next instances.insert is accepted but its
  Operation finishes with that error code (ZONE_RESOURCE_POOL_EXHAUSTED, QUOTA_EXCEEDED
  with a quota metric, ...); no instance is created.
* ``exhaust(zone, machine_type=None)``: every insert there fails with
  ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS (``errorDetails``: ``errorInfo`` with reason
  ``resource_availability``, ``help``, ``localizedMessage``) until ``restock``.
* ``op_mode``: ``"pending"`` (the default, as the real API: inserts, patches and
  deletes answer a RUNNING Operation, ``wait`` answers DONE, with its error if any),
  ``"done"`` (operations finish at once), ``"stuck"`` (``wait`` still answers RUNNING).

instances.insert refuses (HTTP 400 ``invalid``) what the real API refuses, per series
(SERIES_RULES): a boot disk type the series cannot boot from (no ``diskType`` means
pd-standard), a NIC other than gVNIC on A3/A4, a Spot-only type (A3 High below 8 GPUs,
A3 Ultra, A4) asked on demand without a reservation,
``instanceTerminationAction`` outside Spot / flex-start, and metadata past its limits
(key ``[a-zA-Z0-9-_]+`` under 128 bytes, value at most 256 KiB, all under 512 KB).
* ``set_status`` / ``settle``: move an instance (RUNNING gets a natIP).
* ``delete_lag``: deleted instances stay STOPPING for that many reads first
  (``finish_delete`` ends that at once); ``clear_faults`` disarms pending faults.
* ``instances.setLabels`` / ``disks.setLabels`` (the boot disk, named after its instance, gone with
  it) take the whole label map with the ``labelFingerprint`` last read: a stale one is HTTP 412
  ``conditionNotMet``, as GCP answers. The labels (and a new fingerprint) apply when the Operation
  is DONE; ``finish_operations`` ends every RUNNING non-delete Operation at once.
* ``calls`` records every request (key, method, path, args, body).
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import re
import threading
import zlib
from typing import Any, Dict, List, Optional, Tuple

from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

BASE = "https://www.googleapis.com/compute/v1"
PROJECT = "gpuprov-test"
NAME_RE = re.compile(r"^[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?$")
NAME_RULE = "Must be a match of regex '(?:[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?)'"
LABEL_KEY_RE = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
LABEL_VALUE_RE = re.compile(r"^[a-z0-9_-]{0,63}$")
STATUS_TEXT = {400: "BAD REQUEST", 401: "UNAUTHORIZED", 403: "FORBIDDEN", 404: "NOT FOUND",
               409: "CONFLICT", 412: "PRECONDITION FAILED", 429: "TOO MANY REQUESTS",
               500: "INTERNAL SERVER ERROR", 503: "SERVICE UNAVAILABLE"}
CANONICAL = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
             409: "ALREADY_EXISTS", 412: "FAILED_PRECONDITION", 429: "RESOURCE_EXHAUSTED",
             500: "INTERNAL", 503: "UNAVAILABLE"}
DEFAULT_REASON = {400: "invalid", 401: "required", 403: "forbidden", 404: "notFound", 409: "alreadyExists",
                  412: "conditionNotMet", 429: "rateLimitExceeded", 500: "backendError", 503: "backendError"}

# machine type -> (guestCpus, memoryMb, built-in accelerator or None, count)
MACHINE_TYPES = {
    "e2-standard-2": (2, 8192, None, 0), "n1-standard-4": (4, 15360, None, 0),
    "n1-standard-8": (8, 30720, None, 0), "n1-standard-16": (16, 61440, None, 0),
    "n1-standard-32": (32, 122880, None, 0), "n1-standard-64": (64, 245760, None, 0),
    "g2-standard-4": (4, 16384, "nvidia-l4", 1), "g2-standard-24": (24, 98304, "nvidia-l4", 2),
    "g2-standard-48": (48, 196608, "nvidia-l4", 4), "g2-standard-96": (96, 393216, "nvidia-l4", 8),
    "a2-highgpu-1g": (12, 87040, "nvidia-tesla-a100", 1), "a2-highgpu-2g": (24, 174080, "nvidia-tesla-a100", 2),
    "a2-highgpu-4g": (48, 348160, "nvidia-tesla-a100", 4), "a2-highgpu-8g": (96, 696320, "nvidia-tesla-a100", 8),
    "a2-megagpu-16g": (96, 1392640, "nvidia-tesla-a100", 16),
    "a2-ultragpu-1g": (12, 174080, "nvidia-a100-80gb", 1), "a2-ultragpu-2g": (24, 348160, "nvidia-a100-80gb", 2),
    "a2-ultragpu-4g": (48, 696320, "nvidia-a100-80gb", 4), "a2-ultragpu-8g": (96, 1392640, "nvidia-a100-80gb", 8),
    "a3-highgpu-1g": (26, 239616, "nvidia-h100-80gb", 1), "a3-highgpu-2g": (52, 479232, "nvidia-h100-80gb", 2),
    "a3-highgpu-4g": (104, 958464, "nvidia-h100-80gb", 4), "a3-highgpu-8g": (208, 1916928, "nvidia-h100-80gb", 8),
    "a3-megagpu-8g": (208, 1916928, "nvidia-h100-mega-80gb", 8),
    "a3-ultragpu-8g": (224, 2952790, "nvidia-h200-141gb", 8),
    "a4-highgpu-8g": (224, 4063232, "nvidia-b200", 8),
}
ACCELERATORS = {"nvidia-tesla-t4": ("NVIDIA T4", 4), "nvidia-tesla-v100": ("NVIDIA V100", 8),
                "nvidia-l4": ("NVIDIA L4", 8), "nvidia-tesla-a100": ("NVIDIA A100 40GB", 16),
                "nvidia-a100-80gb": ("NVIDIA A100 80GB", 8), "nvidia-h100-80gb": ("NVIDIA H100 80GB", 8),
                "nvidia-h100-mega-80gb": ("NVIDIA H100 80GB MEGA", 8), "nvidia-h200-141gb": ("NVIDIA H200 141GB", 8),
                "nvidia-b200": ("NVIDIA B200", 8)}
_N1 = ["e2-standard-2", "n1-standard-4", "n1-standard-8", "n1-standard-16", "n1-standard-32", "n1-standard-64"]
_G2 = ["g2-standard-4", "g2-standard-24", "g2-standard-48", "g2-standard-96"]
_A2 = ["a2-highgpu-1g", "a2-highgpu-2g", "a2-highgpu-4g", "a2-highgpu-8g"]
_A2U = ["a2-ultragpu-1g", "a2-ultragpu-2g", "a2-ultragpu-4g", "a2-ultragpu-8g"]
_A3 = ["a3-highgpu-1g", "a3-highgpu-2g", "a3-highgpu-4g", "a3-highgpu-8g"]
# zone -> (machine types, accelerator types)
DEFAULT_ZONES = {
    "us-central1-a": (_N1 + _G2 + _A2 + ["a2-megagpu-16g"],
                      ["nvidia-tesla-t4", "nvidia-tesla-v100", "nvidia-l4", "nvidia-tesla-a100"]),
    "us-central1-b": (_N1 + _G2 + _A3 + ["a3-megagpu-8g", "a4-highgpu-8g"],
                      ["nvidia-tesla-t4", "nvidia-l4", "nvidia-h100-80gb", "nvidia-h100-mega-80gb", "nvidia-b200"]),
    "us-central1-c": (_N1 + _A2 + _A2U, ["nvidia-tesla-t4", "nvidia-tesla-a100", "nvidia-a100-80gb"]),
    "us-east4-c": (_N1 + ["a3-highgpu-8g", "a3-megagpu-8g"], ["nvidia-h100-80gb", "nvidia-h100-mega-80gb"]),
    "us-west1-b": (_N1 + _G2, ["nvidia-tesla-t4", "nvidia-l4"]),
    "europe-west4-a": (_N1 + _G2 + ["a3-ultragpu-8g"], ["nvidia-tesla-t4", "nvidia-l4", "nvidia-h200-141gb"]),
    "asia-east1-a": (["e2-standard-2"], []),
}
IMAGE_FAMILIES = {
    ("ubuntu-os-accelerator-images", "ubuntu-accelerator-2204-amd64-with-nvidia-580"):
        "ubuntu-accelerator-2204-amd64-with-nvidia-580-v20261120",
    ("ubuntu-os-accelerator-images", "ubuntu-accelerator-2204-amd64-with-nvidia-550"):
        "ubuntu-accelerator-2204-amd64-with-nvidia-550-v20250213",
    ("ubuntu-os-cloud", "ubuntu-2204-lts"): "ubuntu-2204-jammy-v20261118",
}
TS = "2026-11-30T02:00:00.000-08:00"

_PD = ("pd-standard", "pd-balanced", "pd-ssd")
# Machine-type prefix -> boot disk types it accepts. Persistent Disk only before the third
# generation; A3 (H100) and G2 take no pd-standard; A3 Ultra (H200) and A4 (B200) boot only
# from Hyperdisk Balanced (Google's machine-series docs; SkyPilot's disk-type table, #4705).
# Longest prefix wins.
BOOT_DISK_TYPES = {
    "e2-": _PD, "n1-": _PD, "a2-": _PD, "g2-": ("pd-balanced", "pd-ssd"),
    "a3-": ("pd-balanced", "pd-ssd", "hyperdisk-balanced"),
    "a3-ultragpu-": ("hyperdisk-balanced",), "a4-": ("hyperdisk-balanced",),
}
GVNIC_ONLY = ("a3-", "a4-")                  # the third generation and later: gVNIC, no VirtIO-Net
# Sold only as Spot or flex-start, or from a reservation (Google's consumption options by machine type).
SPOT_ONLY = ("a3-highgpu-1g", "a3-highgpu-2g", "a3-highgpu-4g", "a3-ultragpu-8g", "a4-highgpu-8g")
TERMINABLE = ("SPOT", "FLEX_START")          # provisioning models that take instanceTerminationAction
METADATA_KEY_RE = re.compile(r"^[a-zA-Z0-9_-]+$")
METADATA_VALUE_MAX = 262144                  # bytes, each value
METADATA_TOTAL_MAX = 512 * 1024              # bytes, all keys and values (must stay under)


class _Server(HTTPServer):
    """pytest-httpserver with a short shutdown poll (its default costs 0.5 s a stop)."""

    def thread_target(self) -> None:
        self.server.serve_forever(poll_interval=0.02)


class FakeError(Exception):
    def __init__(self, status: int, message: str, reason: Optional[str] = None):
        super().__init__(message)
        self.status, self.message, self.reason = status, message, reason or DEFAULT_REASON.get(status, "error")


def _label_fingerprint(labels: Dict[str, Any]) -> str:
    """A labelFingerprint: changes whenever the labels do (GCP's is an opaque hash too)."""
    digest = hashlib.sha256(json.dumps(labels, sort_keys=True).encode()).digest()
    return base64.b64encode(digest[:8]).decode()


def error_body(status: int, message: str, reason: str) -> Dict[str, Any]:
    return {"error": {"code": status, "message": message, "status": CANONICAL.get(status, "UNKNOWN"),
                      "errors": [{"message": message, "domain": "global", "reason": reason}]}}


def _get(obj: Any, path: str) -> Any:
    for part in path.split("."):
        if not isinstance(obj, dict):
            return None
        obj = obj.get(part)
    return obj


_TERM = re.compile(r"""^\s*([A-Za-z][\w.-]*)\s*(=|!=|\beq\b|\bne\b|:)\s*("([^"]*)"|'([^']*)'|(\S+))\s*$""")


def parse_filter(text: str):
    """A predicate for the Compute list filter forms; FakeError(400) on anything else."""
    text = (text or "").strip()
    if not text:
        return lambda item: True
    alternatives = re.split(r"\)\s+OR\s+\(", text)
    if len(alternatives) > 1:
        preds = [parse_filter(("(" if i else "") + a + (")" if i < len(alternatives) - 1 else ""))
                 for i, a in enumerate(alternatives)]
        return lambda item: any(p(item) for p in preds)
    if text.startswith("("):
        parts = re.findall(r"\(([^()]*)\)", text)
        if not parts or re.sub(r"\(([^()]*)\)", "", text).strip():
            raise FakeError(400, "Invalid value for field 'filter': '%s'. Invalid list filter expression." % text)
        preds = [parse_filter(p) for p in parts]
        return lambda item: all(p(item) for p in preds)
    match = _TERM.match(text)
    if not match:
        raise FakeError(400, "Invalid value for field 'filter': '%s'. Invalid list filter expression." % text)
    field, op = match.group(1), match.group(2)
    value = next(v for v in match.group(4, 5, 6) if v is not None)

    def pred(item):
        got = _get(item, field)
        if op == ":":
            return got is not None if value == "*" else value in str(got or "")
        if op in ("eq", "ne"):
            hit = got is not None and re.fullmatch(value, str(got)) is not None
            return hit if op == "eq" else not hit
        if isinstance(got, bool):
            hit = str(got).lower() == value.lower()
        else:
            hit = got is not None and str(got) == value
        return hit if op == "=" else not hit
    return pred


IGNORED_PAGES_MAX = 300


class GcpComputeFake:
    """The fake API; ``url`` is the ``api_endpoint`` for the adapter."""

    def __init__(self, project: str = PROJECT, zones: Optional[Dict[str, Tuple[List[str], List[str]]]] = None,
                 page_size: int = 500):
        self.project = project
        self.zones = dict(zones or DEFAULT_ZONES)
        self.page_size = page_size
        self.instances: Dict[Tuple[str, str], Dict[str, Any]] = {}
        self.disks: Dict[Tuple[str, str], Dict[str, Any]] = {}
        self.firewalls: Dict[str, Dict[str, Any]] = {}
        self.operations: Dict[str, Dict[str, Any]] = {}
        self.calls: List[Dict[str, Any]] = []
        self.op_mode = "pending"
        self.delete_lag = 0
        self.ignore_paging = False
        self._ignored_pages = 0
        self._http_faults: List[Tuple[Tuple[str, ...], int, str, str]] = []
        self._insert_faults: List[Dict[str, Any]] = []
        self._exhausted: set = set()
        self._ids = itertools.count(4100000000000000001)
        self._ips = itertools.count(10)
        self._lock = threading.RLock()
        self._routes = self._make_routes()
        self.server = _Server(host="127.0.0.1", port=0)
        self.server.expect_request(re.compile(r"^/compute/v1/.*")).respond_with_handler(self._handle)
        self.server.start()

    # -- levers ----------------------------------------------------------------------

    @property
    def url(self) -> str:
        return "http://127.0.0.1:%d" % self.server.port

    def stop(self) -> None:
        if self.server.is_running():
            self.server.stop()

    def fail_next(self, calls, status: int, reason: Optional[str] = None, message: Optional[str] = None) -> None:
        calls = (calls,) if isinstance(calls, str) else tuple(calls)
        self._http_faults.append((calls, status, reason or DEFAULT_REASON.get(status, "error"),
                                  message or "Injected %d %s" % (status, STATUS_TEXT.get(status, ""))))

    def fail_next_insert(self, code: str, message: Optional[str] = None, http_status: Optional[int] = None,
                         quota_metric: Optional[str] = None, quota_region: Optional[str] = None) -> None:
        self._insert_faults.append({"code": code, "message": message, "http_status": http_status,
                                    "quota_metric": quota_metric, "quota_region": quota_region})

    def clear_faults(self) -> None:
        """Disarm every fail_next / fail_next_insert not consumed yet (exhausted zones stay)."""
        with self._lock:
            self._http_faults.clear()
            self._insert_faults.clear()

    def finish_delete(self, zone: str, name: str) -> None:
        """End a lagging deletion now (the instance is gone, its delete Operation DONE)."""
        with self._lock:
            inst = self.instances.get((zone, name))
            if inst is not None and inst.get("_deleting") is not None:
                del self.instances[(zone, name)]
            for op in self.operations.values():
                if op["operationType"] == "delete" and op["targetLink"].endswith("/instances/" + name):
                    self._finish_op(op)

    def exhaust(self, zone: str, machine_type: Optional[str] = None) -> None:
        self._exhausted.add((zone, machine_type))

    def restock(self) -> None:
        self._exhausted.clear()

    def set_status(self, zone: str, name: str, status: str) -> None:
        with self._lock:
            inst = self.instances[(zone, name)]
            inst["status"] = status
            config = inst["networkInterfaces"][0]["accessConfigs"][0]
            if status == "RUNNING" and "natIP" not in config:
                config["natIP"] = "203.0.113.%d" % next(self._ips)
            elif status in ("TERMINATED", "SUSPENDED"):
                config.pop("natIP", None)  # an ephemeral IP is released when the VM stops

    def settle(self, zone: str, name: str) -> None:
        self.set_status(zone, name, "RUNNING")

    def calls_of(self, key: str) -> List[Dict[str, Any]]:
        return [c for c in self.calls if c["key"] == key]

    # -- plumbing --------------------------------------------------------------------

    def _make_routes(self):
        p, z = r"/compute/v1/projects/(?P<project>[^/]+)", r"/zones/(?P<zone>[^/]+)"
        table = [
            ("GET", p + r"/aggregated/machineTypes", "machineTypes.aggregatedList", self._agg_machine_types),
            ("GET", p + r"/aggregated/acceleratorTypes", "acceleratorTypes.aggregatedList", self._agg_accelerators),
            ("GET", p + r"/aggregated/instances", "instances.aggregatedList", self._agg_instances),
            ("GET", p + z + r"/instances", "instances.list", self._list_instances),
            ("POST", p + z + r"/instances", "instances.insert", self._insert_instance),
            ("GET", p + z + r"/instances/(?P<name>[^/]+)", "instances.get", self._get_instance),
            ("DELETE", p + z + r"/instances/(?P<name>[^/]+)", "instances.delete", self._delete_instance),
            ("POST", p + z + r"/instances/(?P<name>[^/]+)/setLabels", "instances.setLabels", self._set_instance_labels),
            ("GET", p + z + r"/disks/(?P<name>[^/]+)", "disks.get", self._get_disk),
            ("POST", p + z + r"/disks/(?P<name>[^/]+)/setLabels", "disks.setLabels", self._set_disk_labels),
            ("GET", p + z + r"/operations/(?P<op>[^/]+)", "zoneOperations.get", self._get_op),
            ("POST", p + z + r"/operations/(?P<op>[^/]+)/wait", "zoneOperations.wait", self._wait_op),
            ("GET", p + r"/global/operations/(?P<op>[^/]+)", "globalOperations.get", self._get_op),
            ("POST", p + r"/global/operations/(?P<op>[^/]+)/wait", "globalOperations.wait", self._wait_op),
            ("GET", p + r"/global/firewalls", "firewalls.list", self._list_firewalls),
            ("GET", p + r"/global/firewalls/(?P<name>[^/]+)", "firewalls.get", self._get_firewall),
            ("POST", p + r"/global/firewalls", "firewalls.insert", self._insert_firewall),
            ("PATCH", p + r"/global/firewalls/(?P<name>[^/]+)", "firewalls.patch", self._patch_firewall),
            ("DELETE", p + r"/global/firewalls/(?P<name>[^/]+)", "firewalls.delete", self._delete_firewall),
            ("GET", p + r"/global/images/family/(?P<family>[^/]+)", "images.getFromFamily", self._image_family),
        ]
        return [(m, re.compile("^" + rx + "$"), key, fn) for m, rx, key, fn in table]

    def _handle(self, request: Request) -> Response:
        with self._lock:
            route = next(((key, fn, match) for method, rx, key, fn in self._routes
                          for match in [rx.match(request.path)] if method == request.method and match), None)
            if route is None:
                return self._error(FakeError(404, "The requested URL %s was not found on this server." % request.path))
            key, fn, match = route
            body = request.get_json(silent=True) if request.data else None
            args = request.args.to_dict()
            self.calls.append({"key": key, "method": request.method, "path": request.path, "args": args, "body": body})
            for i, (calls, status, reason, message) in enumerate(self._http_faults):
                if key in calls or "*" in calls:
                    del self._http_faults[i]
                    return self._error(FakeError(status, message, reason))
            params = match.groupdict()
            try:
                if key != "images.getFromFamily" and params["project"] != self.project:
                    raise FakeError(404, "The resource 'projects/%s' was not found" % params["project"])
                if "zone" in params and params["zone"] not in self.zones:
                    raise FakeError(404, "The resource 'projects/%s/zones/%s' was not found"
                                    % (params["project"], params["zone"]))
                return self._json(fn(args=args, body=body, **params))
            except FakeError as err:
                return self._error(err)

    @staticmethod
    def _json(payload: Any, status: int = 200) -> Response:
        return Response(json.dumps(payload), status=status, content_type="application/json; charset=UTF-8")

    def _error(self, err: FakeError) -> Response:
        return self._json(error_body(err.status, err.message, err.reason), err.status)

    def _zone_url(self, zone: str) -> str:
        return "%s/projects/%s/zones/%s" % (BASE, self.project, zone)

    def _page(self, items: List[Any], args: Dict[str, str]):
        size = min(int(args.get("maxResults") or self.page_size), 500)
        if self.ignore_paging:
            self._ignored_pages += 1
            return items[:size], (str(size) if self._ignored_pages <= IGNORED_PAGES_MAX else None)
        start = int(args.get("pageToken") or 0)
        nxt = start + size
        return items[start:nxt], (str(nxt) if nxt < len(items) else None)

    def _new_op(self, op_type: str, target: str, zone: Optional[str], error: Optional[Dict[str, Any]] = None,
                http_status: Optional[int] = None) -> Dict[str, Any]:
        """A new Operation: RUNNING (its error, if any, shows once it is DONE), or DONE at
        once in op_mode "done". Deletes stay RUNNING until the deletion ends."""
        name = "operation-%d-%x" % (1764500000000 + len(self.operations), next(self._ids) & 0xfffffff)
        scope = self._zone_url(zone) if zone else "%s/projects/%s/global" % (BASE, self.project)
        op = {"kind": "compute#operation", "id": str(next(self._ids)), "name": name, "operationType": op_type,
              "targetLink": target, "targetId": str(next(self._ids)), "status": "RUNNING",
              "user": "fake@%s.iam.gserviceaccount.com" % self.project, "progress": 0,
              "insertTime": TS, "startTime": TS, "selfLink": "%s/operations/%s" % (scope, name)}
        if zone:
            op["zone"] = self._zone_url(zone)
        if error:
            op["_error"], op["_http_status"] = error, http_status
        self.operations[name] = op
        if self.op_mode == "done" and op_type != "delete":
            self._finish_op(op)
        return self._public(op)

    @staticmethod
    def _finish_op(op: Dict[str, Any]) -> None:
        op.update({"status": "DONE", "progress": 100, "endTime": TS})
        error, http_status = op.pop("_error", None), op.pop("_http_status", None)
        if error:
            op["error"] = {"errors": [error]}
            if http_status:
                op["httpErrorStatusCode"] = http_status
                op["httpErrorMessage"] = STATUS_TEXT.get(http_status, "ERROR")

    # -- catalogue --------------------------------------------------------------------

    def _aggregated(self, what: str, args, make) -> Dict[str, Any]:
        pred = parse_filter(args.get("filter", ""))
        flat = [(zone, item) for zone in sorted(self.zones) for item in make(zone) if pred(item)]
        page, token = self._page(flat, args)
        items: Dict[str, Any] = {}
        for zone in sorted(self.zones):
            listed = [item for z, item in page if z == zone]
            items["zones/" + zone] = {what: listed} if listed else {"warning": {
                "code": "NO_RESULTS_ON_PAGE",
                "message": "There are no results for scope 'zones/%s' on this page." % zone,
                "data": [{"key": "scope", "value": "zones/" + zone}]}}
        out = {"kind": "compute#%sAggregatedList" % what[:-1], "id": "projects/%s/aggregated/%s" % (self.project, what),
               "items": items, "selfLink": "%s/projects/%s/aggregated/%s" % (BASE, self.project, what)}
        if token:
            out["nextPageToken"] = token
        return out

    def _agg_machine_types(self, project, args, body):
        def make(zone):
            out = []
            for name in self.zones[zone][0]:
                cpus, mem, accel, count = MACHINE_TYPES[name]
                item = {"kind": "compute#machineType", "id": str(zlib.crc32(name.encode())), "creationTimestamp": TS,
                        "name": name, "description": "%d vCPUs, %d GB RAM" % (cpus, mem // 1024), "guestCpus": cpus,
                        "memoryMb": mem, "maximumPersistentDisks": 128, "maximumPersistentDisksSizeGb": "263168",
                        "zone": zone, "isSharedCpu": False, "architecture": "X86_64",
                        "selfLink": "%s/machineTypes/%s" % (self._zone_url(zone), name)}
                if accel:
                    item["accelerators"] = [{"guestAcceleratorType": accel, "guestAcceleratorCount": count}]
                out.append(item)
            return out
        return self._aggregated("machineTypes", args, make)

    def _agg_accelerators(self, project, args, body):
        def make(zone):
            return [{"kind": "compute#acceleratorType", "id": str(zlib.crc32(name.encode())), "creationTimestamp": TS,
                     "name": name, "description": ACCELERATORS[name][0], "zone": self._zone_url(zone),
                     "selfLink": "%s/acceleratorTypes/%s" % (self._zone_url(zone), name),
                     "maximumCardsPerInstance": ACCELERATORS[name][1]} for name in self.zones[zone][1]]
        return self._aggregated("acceleratorTypes", args, make)

    def _image_family(self, project, family, args, body):
        image = IMAGE_FAMILIES.get((project, family))
        if not image:
            raise FakeError(404, "The resource 'projects/%s/global/images/family/%s' was not found" % (project, family))
        return {"kind": "compute#image", "id": str(zlib.crc32(image.encode())), "creationTimestamp": TS,
                "name": image, "family": family, "status": "READY", "diskSizeGb": "10", "sourceType": "RAW",
                "architecture": "X86_64", "archiveSizeBytes": "2147483648",
                "selfLink": "%s/projects/%s/global/images/%s" % (BASE, project, image)}

    def _image_exists(self, ref: str) -> bool:
        match = re.search(r"projects/([^/]+)/global/images/(family/)?([^/]+)$", ref or "")
        if not match:
            return False
        project, family, name = match.groups()
        if family:
            return (project, name) in IMAGE_FAMILIES
        return any(p == project and n == name for (p, _family), n in IMAGE_FAMILIES.items())

    # -- instances ---------------------------------------------------------------------

    def _visible(self, inst: Dict[str, Any]) -> bool:
        """Reads of a deleting instance count down its lag; at zero it is gone."""
        if inst.get("_deleting") is None:
            return True
        if inst["_deleting"] <= 0:
            self.instances.pop((inst["_zone"], inst["name"]), None)
            return False
        inst["_deleting"] -= 1
        return True

    @staticmethod
    def _public(inst: Dict[str, Any]) -> Dict[str, Any]:
        return {k: v for k, v in inst.items() if not k.startswith("_")}

    def _list_instances(self, project, zone, args, body):
        pred = parse_filter(args.get("filter", ""))
        found = [self._public(i) for (z, _name), i in sorted(self.instances.items())
                 if z == zone and self._visible(i) and pred(i)]
        page, token = self._page(found, args)
        out = {"kind": "compute#instanceList", "id": "projects/%s/zones/%s/instances" % (project, zone),
               "items": page, "selfLink": "%s/instances" % self._zone_url(zone)}
        if token:
            out["nextPageToken"] = token
        return out

    def _agg_instances(self, project, args, body):
        def make(zone):
            return [self._public(i) for (z, _name), i in sorted(self.instances.items())
                    if z == zone and self._visible(i)]
        return self._aggregated("instances", args, make)

    def _get_instance(self, project, zone, name, args, body):
        inst = self.instances.get((zone, name))
        if inst is None or not self._visible(inst):
            raise FakeError(404, "The resource 'projects/%s/zones/%s/instances/%s' was not found"
                            % (project, zone, name))
        return self._public(inst)

    def _invalid(self, field: str, value: Any, why: str) -> FakeError:
        return FakeError(400, "Invalid value for field '%s': '%s'. %s" % (field, value, why), "invalid")

    def _insert_instance(self, project, zone, args, body):
        body = body or {}
        name = body.get("name", "")
        if not NAME_RE.match(name):
            raise self._invalid("resource.name", name, NAME_RULE)
        mt = (body.get("machineType") or "").rsplit("/", 1)[-1]
        if not re.search(r"zones/%s/machineTypes/" % re.escape(zone), body.get("machineType") or "") \
                or mt not in self.zones[zone][0]:
            raise self._invalid("resource.machineType", body.get("machineType"),
                                "Machine type with name '%s' does not exist in zone '%s'." % (mt, zone))
        for key, value in (body.get("labels") or {}).items():
            if not LABEL_KEY_RE.match(key) or not LABEL_VALUE_RE.match(str(value)):
                raise self._invalid("resource.labels", "%s=%s" % (key, value), "Label key or value is not valid.")
        for tag in (body.get("tags") or {}).get("items") or []:
            if not NAME_RE.match(tag):
                raise self._invalid("resource.tags.items", tag, NAME_RULE)
        disks = body.get("disks") or []
        boot = [d for d in disks if d.get("boot")]
        if len(boot) != 1:
            raise self._invalid("resource.disks", len(boot), "Exactly one boot disk must be specified.")
        source = (boot[0].get("initializeParams") or {}).get("sourceImage")
        if not self._image_exists(source):
            raise FakeError(404, "The resource '%s' was not found" % source, "notFound")
        nics = body.get("networkInterfaces") or []
        if not nics:
            raise self._invalid("resource.networkInterfaces", "[]", "At least one network interface is required.")
        self._check_network(project, nics[0].get("network"))
        accels = body.get("guestAccelerators") or []
        for acc in accels:
            acc_name = (acc.get("acceleratorType") or "").rsplit("/", 1)[-1]
            if acc_name not in self.zones[zone][1]:
                raise self._invalid("resource.guestAccelerators[0].acceleratorType", acc.get("acceleratorType"),
                                    "Accelerator type '%s' does not exist in zone '%s'." % (acc_name, zone))
            if int(acc.get("acceleratorCount") or 0) > ACCELERATORS[acc_name][1]:
                raise self._invalid("resource.guestAccelerators[0].acceleratorCount", acc.get("acceleratorCount"),
                                    "Count exceeds maximumCardsPerInstance.")
        sched = body.get("scheduling") or {}
        if (accels or MACHINE_TYPES[mt][2]) and sched.get("onHostMaintenance") != "TERMINATE":
            raise self._invalid("resource.scheduling.onHostMaintenance", sched.get("onHostMaintenance", "MIGRATE"),
                                "Instances with guest accelerators do not support live migration.")
        if sched.get("provisioningModel") == "SPOT" and sched.get("onHostMaintenance") != "TERMINATE":
            raise self._invalid("resource.scheduling.onHostMaintenance", sched.get("onHostMaintenance", "MIGRATE"),
                                "Spot VMs must terminate on host maintenance.")
        if sched.get("provisioningModel") == "SPOT" and sched.get("automaticRestart"):
            raise self._invalid("resource.scheduling.automaticRestart", "true",
                                "Automatic restart must be false for Spot VMs.")
        keys = [i.get("key") for i in (body.get("metadata") or {}).get("items") or []]
        if len(keys) != len(set(keys)):
            raise self._invalid("resource.metadata", keys, "Duplicate metadata keys.")
        reserved = (body.get("reservationAffinity") or {}).get("consumeReservationType") == "SPECIFIC_RESERVATION"
        self._check_series(mt, zone, boot[0], nics[0], sched, reserved)
        self._check_metadata((body.get("metadata") or {}).get("items") or [])
        if (zone, name) in self.instances:
            raise FakeError(409, "The resource 'projects/%s/zones/%s/instances/%s' already exists"
                            % (project, zone, name), "alreadyExists")
        target = "%s/instances/%s" % (self._zone_url(zone), name)
        fault = self._insert_faults.pop(0) if self._insert_faults else None
        if fault is None and ((zone, mt) in self._exhausted or (zone, None) in self._exhausted):
            fault = {"code": "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS", "http_status": 503}
        if fault:
            status = fault.get("http_status")
            if status is None:  # what GCP reports with these codes; 0 = leave httpErrorStatusCode out
                status = 403 if fault["code"] == "QUOTA_EXCEEDED" else 503
            attachment = ",".join("%s=%s" % (a["acceleratorType"].rsplit("/", 1)[-1], a.get("acceleratorCount", 1))
                                  for a in accels)
            return self._new_op("insert", target, zone, error=self._op_error(fault, zone, mt, attachment),
                                http_status=status)
        inst = json.loads(json.dumps(body))
        inst.update({"kind": "compute#instance", "id": str(next(self._ids)), "creationTimestamp": TS,
                     "status": "PROVISIONING", "zone": self._zone_url(zone), "selfLink": target,
                     "machineType": "%s/machineTypes/%s" % (self._zone_url(zone), mt),
                     "cpuPlatform": "Unknown CPU Platform",
                     "labelFingerprint": _label_fingerprint(body.get("labels") or {}), "fingerprint": "nMeu3Q6Oa0A=",
                     "startRestricted": False,
                     "deletionProtection": False, "_zone": zone})
        for i, nic in enumerate(inst.get("networkInterfaces") or []):
            nic.update({"kind": "compute#networkInterface", "name": "nic%d" % i,
                        "networkIP": "10.128.0.%d" % next(self._ips), "stackType": "IPV4_ONLY",
                        "network": "%s/projects/%s/global/networks/default" % (BASE, project)})
            for ac in nic.get("accessConfigs") or []:
                ac.update({"kind": "compute#accessConfig", "networkTier": "PREMIUM"})
        for i, disk in enumerate(inst.get("disks") or []):
            disk.update({"kind": "compute#attachedDisk", "type": "PERSISTENT", "mode": "READ_WRITE", "index": i,
                         "deviceName": "persistent-disk-%d" % i,
                         "source": "%s/disks/%s" % (self._zone_url(zone), name)})
            # The boot disk as its own resource (disks.get/setLabels), named after the instance; auto-deleted with it.
            params = disk.get("initializeParams") or {}
            self.disks[(zone, name)] = {
                "kind": "compute#disk", "id": str(next(self._ids)), "name": name, "zone": self._zone_url(zone),
                "selfLink": disk["source"], "sizeGb": str(params.get("diskSizeGb") or 10), "status": "READY",
                "sourceImage": params.get("sourceImage"), "labels": dict(params.get("labels") or {}),
                "labelFingerprint": _label_fingerprint(params.get("labels") or {}),
                "users": [target]}
        for acc in inst.get("guestAccelerators") or []:
            acc["acceleratorType"] = "%s/acceleratorTypes/%s" % (
                self._zone_url(zone), acc["acceleratorType"].rsplit("/", 1)[-1])
        self.instances[(zone, name)] = inst
        return self._new_op("insert", target, zone)

    def _check_series(self, mt: str, zone: str, boot: Dict[str, Any], nic: Dict[str, Any],
                      sched: Dict[str, Any], reserved: bool = False) -> None:
        """instances.insert's per-series rules: boot disk type, gVNIC, Spot-only sizes and
        instanceTerminationAction (BOOT_DISK_TYPES, GVNIC_ONLY, SPOT_ONLY, TERMINABLE)."""
        disk_type = (boot.get("initializeParams") or {}).get("diskType") or "pd-standard"
        disk_name = disk_type.rsplit("/", 1)[-1]
        if "/" in disk_type and not re.search(r"(^|/)zones/%s/diskTypes/[^/]+$" % re.escape(zone), disk_type):
            raise self._invalid("resource.disks[0].initializeParams.diskType", disk_type,
                                "Disk type must be in zone '%s'." % zone)
        allowed = BOOT_DISK_TYPES[max((p for p in BOOT_DISK_TYPES if mt.startswith(p)), key=len)]
        if disk_name not in allowed:
            raise self._invalid("resource.disks[0].initializeParams.diskType", disk_type,
                                "%s disk type cannot be used as a boot disk by %s machine type; use one of: %s."
                                % (disk_name, mt, ", ".join(allowed)))
        if mt.startswith(GVNIC_ONLY) and nic.get("nicType") != "GVNIC":
            raise self._invalid("resource.networkInterfaces[0].nicType", nic.get("nicType", "VIRTIO_NET"),
                                "Machine type %s requires the GVNIC network interface." % mt)
        model = sched.get("provisioningModel", "STANDARD")
        if mt in SPOT_ONLY and model not in TERMINABLE and not reserved:
            raise self._invalid("resource.scheduling.provisioningModel", model,
                                "Machine type %s is available only with the SPOT or FLEX_START provisioning model, "
                                "or from a reservation." % mt)
        action = sched.get("instanceTerminationAction")
        if action is not None:
            if action not in ("STOP", "DELETE"):
                raise self._invalid("resource.scheduling.instanceTerminationAction", action,
                                    "Must be one of [STOP, DELETE].")
            if model not in TERMINABLE and not sched.get("maxRunDuration") and not sched.get("terminationTime"):
                raise self._invalid("resource.scheduling.instanceTerminationAction", action,
                                    "Instance termination action can be set only for Spot or flex-start VMs, or "
                                    "with a maximum run duration or termination time.")

    def _check_metadata(self, items: List[Dict[str, Any]]) -> None:
        total = 0
        for item in items:
            key, value = str(item.get("key") or ""), str(item.get("value") or "")
            if not METADATA_KEY_RE.match(key) or len(key.encode()) >= 128:
                raise self._invalid("resource.metadata.items.key", key[:64],
                                    "Must be a match of regex '[a-zA-Z0-9-_]+' and less than 128 bytes.")
            if len(value.encode()) > METADATA_VALUE_MAX:
                raise self._invalid("resource.metadata.items.value", "%s (%d bytes)" % (key, len(value.encode())),
                                    "Metadata values must be at most 262144 bytes.")
            total += len(key.encode()) + len(value.encode())
        if total >= METADATA_TOTAL_MAX:
            raise self._invalid("resource.metadata", "%d bytes" % total,
                                "The total size of all metadata keys and values must be less than 512 KB.")

    def _op_error(self, fault: Dict[str, Any], zone: str, mt: str, attachment: str = "") -> Dict[str, Any]:
        code = fault["code"]
        message = fault.get("message")
        error: Dict[str, Any] = {"code": code}
        if code.startswith("ZONE_RESOURCE_POOL_EXHAUSTED"):
            message = message or ("The zone 'projects/%s/zones/%s' does not have enough resources available to fulfill "
                                  "the request.  '(resource type:compute)'." % (self.project, zone))
            if code.endswith("_WITH_DETAILS"):
                error["errorDetails"] = self._stockout_details(zone, mt, attachment)
        elif code == "QUOTA_EXCEEDED":
            metric = fault.get("quota_metric") or "NVIDIA_L4_GPUS"
            region = fault.get("quota_region") or zone.rsplit("-", 1)[0]
            project_wide = metric.endswith("_ALL_REGIONS")  # GPUS_ALL_REGIONS, CPUS_ALL_REGIONS
            message = message or "Quota '%s' exceeded.  Limit: 0.0 %s." % (
                metric, "globally" if project_wide else "in region %s" % region)
            error["errorDetails"] = [{"quotaInfo": {
                "metricName": "compute.googleapis.com/%s" % metric.lower(),
                "limitName": "%s-per-project%s" % (metric.replace("_", "-"), "" if project_wide else "-region"),
                "dimensions": {"global": "global"} if project_wide else {"region": region},
                "limit": 0}}]
        error["message"] = message or "Operation failed: %s" % code
        return error

    @staticmethod
    def _stockout_details(zone: str, mt: str, attachment: str) -> List[Dict[str, Any]]:
        """errorDetails of a ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS error: errorInfo
        (reason resource_availability, metadatas), help links and a localized message."""
        metadatas = {"zone": zone, "vmType": mt}
        if attachment:
            metadatas["attachment"] = attachment
        what = "A %s VM instance%s" % (mt, " with %s" % attachment if attachment else "")
        return [
            {"errorInfo": {"reason": "resource_availability", "domain": "compute.googleapis.com",
                           "metadatas": metadatas}},
            {"help": {"links": [{"description": "Troubleshooting documentation",
                                 "url": "https://cloud.google.com/compute/docs/resource-error"}]}},
            {"localizedMessage": {"locale": "en-US", "message": (
                "%s is currently unavailable in the %s zone. Alternatively, you can try your request again with a "
                "different VM hardware configuration or at a later time. For more information, see the "
                "troubleshooting documentation." % (what, zone))}},
        ]

    def _delete_instance(self, project, zone, name, args, body):
        inst = self.instances.get((zone, name))
        if inst is None or (inst.get("_deleting") is not None and not self._visible(inst)):
            raise FakeError(404, "The resource 'projects/%s/zones/%s/instances/%s' was not found"
                            % (project, zone, name))
        target = "%s/instances/%s" % (self._zone_url(zone), name)
        if self.delete_lag <= 0:
            del self.instances[(zone, name)]
        elif inst.get("_deleting") is None:
            inst["_deleting"] = self.delete_lag
            inst["status"] = "STOPPING"
        return self._new_op("delete", target, zone)

    def _set_labels(self, resource: Dict[str, Any], kind: str, body, zone: str, name: str):
        """instances/disks.setLabels: the whole label map, fenced by the labelFingerprint the caller read
        (412 conditionNotMet when the labels changed since, or none given). Returns an Operation; the labels
        and the fingerprint change when it is DONE, as GCP applies them."""
        body = body or {}
        if body.get("labelFingerprint") != resource["labelFingerprint"]:
            raise FakeError(412, "Labels fingerprint either invalid or resource labels have changed",
                            "conditionNotMet")
        labels = body.get("labels") or {}
        if len(labels) > 64:
            raise self._invalid("resource.labels", len(labels), "At most 64 labels.")
        for key, value in labels.items():
            if not LABEL_KEY_RE.match(key) or not LABEL_VALUE_RE.match(str(value)):
                raise self._invalid("resource.labels", "%s=%s" % (key, value), "Label key or value is not valid.")
        op = self._new_op("setLabels", "%s/%s/%s" % (self._zone_url(zone), kind, name), zone)
        self.operations[op["name"]]["_labels"] = (resource, dict(labels))
        if self.op_mode == "done":
            self._apply_labels(self.operations[op["name"]])
        return op

    @staticmethod
    def _apply_labels(op: Dict[str, Any]) -> None:
        resource, labels = op.pop("_labels", (None, None))
        if resource is not None:
            resource["labels"] = labels
            resource["labelFingerprint"] = _label_fingerprint(labels)

    def finish_operations(self) -> None:
        """End every RUNNING non-delete Operation now (a setLabels applies its labels)."""
        with self._lock:
            for op in self.operations.values():
                if op["status"] != "DONE" and op["operationType"] != "delete":
                    self._apply_labels(op)
                    self._finish_op(op)

    def _set_instance_labels(self, project, zone, name, args, body):
        inst = self.instances.get((zone, name))
        if inst is None or not self._visible(inst):
            raise FakeError(404, "The resource 'projects/%s/zones/%s/instances/%s' was not found"
                            % (project, zone, name))
        return self._set_labels(inst, "instances", body, zone, name)

    def _disk(self, project, zone, name) -> Dict[str, Any]:
        disk = self.disks.get((zone, name))
        if disk is not None and (zone, name) not in self.instances:
            del self.disks[(zone, name)]   # autoDelete: gone with its instance
            disk = None
        if disk is None:
            raise FakeError(404, "The resource 'projects/%s/zones/%s/disks/%s' was not found" % (project, zone, name))
        return disk

    def _get_disk(self, project, zone, name, args, body):
        return self._public(self._disk(project, zone, name))

    def _set_disk_labels(self, project, zone, name, args, body):
        return self._set_labels(self._disk(project, zone, name), "disks", body, zone, name)

    def _get_op(self, project, op, args, body, zone=None):
        if op not in self.operations:
            raise FakeError(404, "The resource 'projects/%s/%s/operations/%s' was not found"
                            % (project, "zones/" + zone if zone else "global", op))
        return self._public(self.operations[op])

    def _wait_op(self, project, op, args, body, zone=None):
        self._get_op(project, op, args, body, zone)
        found = self.operations[op]
        if found["status"] != "DONE" and self.op_mode != "stuck":
            self._apply_labels(found)
            self._finish_op(found)
        return self._public(found)

    # -- firewalls -----------------------------------------------------------------------

    def _fw_url(self, name: str) -> str:
        return "%s/projects/%s/global/firewalls/%s" % (BASE, self.project, name)

    def _list_firewalls(self, project, args, body):
        pred = parse_filter(args.get("filter", ""))
        page, token = self._page([fw for _name, fw in sorted(self.firewalls.items()) if pred(fw)], args)
        out = {"kind": "compute#firewallList", "id": "projects/%s/global/firewalls" % project, "items": page,
               "selfLink": "%s/projects/%s/global/firewalls" % (BASE, project)}
        if token:
            out["nextPageToken"] = token
        return out

    def _get_firewall(self, project, name, args, body):
        if name not in self.firewalls:
            raise FakeError(404, "The resource 'projects/%s/global/firewalls/%s' was not found" % (project, name))
        return self.firewalls[name]

    @staticmethod
    def _check_network(project: str, network: Optional[str]) -> None:
        """Only the ``default`` network exists (unset means it, as in the API)."""
        name = (network or "global/networks/default").rsplit("/", 1)[-1]
        if name != "default":
            raise FakeError(404, "The resource 'projects/%s/global/networks/%s' was not found" % (project, name),
                            "notFound")

    def _check_firewall(self, fw: Dict[str, Any]) -> None:
        if not NAME_RE.match(fw.get("name") or ""):
            raise self._invalid("resource.name", fw.get("name"), NAME_RULE)
        self._check_network(self.project, fw.get("network"))
        for rule in fw.get("allowed") or []:
            if rule.get("IPProtocol") not in ("tcp", "udp", "icmp", "all"):
                raise self._invalid("resource.allowed[0].IPProtocol", rule.get("IPProtocol"), "Unknown protocol.")

    def _insert_firewall(self, project, args, body):
        fw = json.loads(json.dumps(body or {}))
        self._check_firewall(fw)
        if fw["name"] in self.firewalls:
            raise FakeError(409, "The resource 'projects/%s/global/firewalls/%s' already exists"
                            % (project, fw["name"]), "alreadyExists")
        fw.setdefault("direction", "INGRESS")
        fw.setdefault("priority", 1000)
        if not fw.get("sourceRanges") and not fw.get("sourceTags"):
            fw["sourceRanges"] = ["0.0.0.0/0"]  # the documented default when no source is given
        fw.update({"kind": "compute#firewall", "id": str(next(self._ids)), "creationTimestamp": TS, "disabled": False,
                   "network": "%s/projects/%s/global/networks/default" % (BASE, project),
                   "selfLink": self._fw_url(fw["name"]),
                   "logConfig": {"enable": False}})
        self.firewalls[fw["name"]] = fw
        return self._new_op("insert", self._fw_url(fw["name"]), None)

    def _patch_firewall(self, project, name, args, body):
        if name not in self.firewalls:
            raise FakeError(404, "The resource 'projects/%s/global/firewalls/%s' was not found" % (project, name))
        patch = {k: v for k, v in (body or {}).items() if k not in ("name", "network", "id", "selfLink")}
        merged = dict(self.firewalls[name], **patch)
        self._check_firewall(merged)
        self.firewalls[name] = merged
        return self._new_op("patch", self._fw_url(name), None)

    def _delete_firewall(self, project, name, args, body):
        if name not in self.firewalls:
            raise FakeError(404, "The resource 'projects/%s/global/firewalls/%s' was not found" % (project, name))
        del self.firewalls[name]
        return self._new_op("delete", self._fw_url(name), None)
