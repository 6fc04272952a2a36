"""A Lambda Cloud API v1 fake (``/api/v1/...``) on the marketplace fake base.

Shapes follow Lambda's OpenAPI spec: every answer is ``{"data": ...}``, every error
``{"error": {"code", "message", "suggestion"}}`` (plus ``field_errors`` for a bad
body); auth is ``Authorization: Bearer <key>`` or basic auth with the key as user.

* Catalog: ``GET /instance-types`` from ``self.types`` (name -> instance_type) and
  ``self.capacity`` (name -> regions with capacity); :meth:`sell_out` empties one.
* Lifecycle: a launch is ``booting``; after ``boot_polls`` reads it is ``active`` with an
  ``ip`` and a real sshd behind it; a terminate makes it ``terminating``, and
  ``boot_polls`` reads later it is gone (sshd stopped, detached from its rulesets).
* SSH: every instance gets its own loopback address (127.0.0.2, .3, ...) and a forwarder
  on ``self.ssh_port`` there to its sshd: Lambda reports only an ``ip``, so the port is
  the same for all (the adapter's ``ssh_port`` option) and the address tells them apart.
* Refusals: unknown or missing fields (global/invalid-parameters with field_errors), a
  tag or image Lambda's launch schema refuses (a tag key twice included), a rule without a description or with a
  source that is not an IPv4 network, a bad key (global/invalid-api-key), an SSH key or
  ruleset that does not exist, a ruleset of another region, a region without capacity
  (insufficient-capacity), more instances than ``quota`` (global/quota-exceeded),
  deleting a key or ruleset in use, a ruleset name taken (409 global/internal-error, the
  spec's only 409 there). Optional instance fields (ip, hostname, ...) are absent until
  known, not null.
* Errors on demand: :meth:`fail_capacity`, :meth:`fail_quota`, :meth:`rate_limit`,
  :meth:`server_error`, :meth:`bad_auth`, :meth:`invalid`, :meth:`malformed`.
"""

from __future__ import annotations

import base64
import ipaddress
import re
import socket
import uuid
from typing import Any, Dict, List, Optional

from ansible_collections.gpuprov.cloud.tests.fakes.marketplace import MarketplaceFake, PortForwarder, Reply, route

P = "/api/v1"
REGIONS = {"us-east-1": "Virginia, USA", "us-west-1": "California, USA", "us-south-1": "Texas, USA",
           "europe-central-1": "Germany"}


def _type(name: str, cents: int, description: str, gpus: int, vcpus: int, memory: int, disk: int) -> Dict[str, Any]:
    return {"name": name, "description": "%dx %s" % (gpus, description), "gpu_description": description,
            "price_cents_per_hour": cents, "specs": {"vcpus": vcpus, "memory_gib": memory, "storage_gib": disk,
                                                     "gpus": gpus}}


TYPES = {t["name"]: t for t in (
    _type("gpu_1x_a10", 75, "A10 (24 GB PCIe)", 1, 30, 200, 1400),
    _type("gpu_1x_a100", 129, "A100 (40 GB PCIe)", 1, 30, 200, 512),
    _type("gpu_8x_a100_80gb_sxm4", 1432, "A100 (80 GB SXM4)", 8, 240, 1800, 19500),
    _type("gpu_1x_h100_pcie", 249, "H100 (80 GB PCIe)", 1, 26, 200, 1000),
    _type("gpu_8x_h100_sxm5", 2392, "H100 (80 GB SXM5)", 8, 208, 1800, 22500),
    _type("gpu_1x_gh200", 149, "GH200 (96 GB)", 1, 64, 432, 4000),
    _type("gpu_8x_v100", 440, "Tesla V100 (16 GB)", 8, 88, 448, 5800),
)}
CAPACITY = {"gpu_1x_a10": ["us-east-1", "us-west-1"], "gpu_1x_a100": ["us-west-1"], "gpu_8x_a100_80gb_sxm4": [],
            "gpu_1x_h100_pcie": ["us-east-1"], "gpu_8x_h100_sxm5": [], "gpu_1x_gh200": ["us-east-1"],
            "gpu_8x_v100": ["us-south-1"]}

ACTIONS = ("migrate", "rebuild", "restart", "cold_reboot", "terminate")
LAUNCH_REQUIRED = ("region_name", "instance_type_name", "ssh_key_names")
LAUNCH_OPTIONAL = ("file_system_names", "file_system_mounts", "hostname", "name", "image", "user_data", "tags",
                   "firewall_rulesets")
TAG_KEY = re.compile(r"^[a-z][a-z0-9-:]+$")   # RequestedTagEntry.key (max 55); value max 128
# Instance fields the spec does not require: absent until known, never null.
OPTIONAL_INSTANCE_FIELDS = ("name", "ip", "private_ip", "hostname", "jupyter_token", "jupyter_url")


def error(status: int, code: str, message: str, suggestion: Optional[str] = None, fields=None,
          headers=None) -> Reply:
    body: Dict[str, Any] = {"error": {"code": code, "message": message}}
    if suggestion:
        body["error"]["suggestion"] = suggestion
    if fields:
        body["field_errors"] = fields
    return Reply(status, body, headers=headers)


def _ipv4_network(value: Any) -> bool:
    try:
        return isinstance(value, str) and ipaddress.ip_network(value, strict=False).version == 4
    except ValueError:
        return False


def _region(name: str) -> Dict[str, str]:
    return {"name": name, "description": REGIONS.get(name, name)}


class LambdaApiFake(MarketplaceFake):
    cloud = "lambda"

    def __init__(self, root: str, token: str = "fake-token", boot_polls: int = 2, quota: int = 20):
        self.types = {name: dict(t) for name, t in TYPES.items()}
        self.capacity = {name: list(regions) for name, regions in CAPACITY.items()}
        self.quota = quota
        self.instances: Dict[str, Dict[str, Any]] = {}
        self.ssh_keys: Dict[str, Dict[str, Any]] = {}
        self.rulesets: Dict[str, Dict[str, Any]] = {}
        self.global_rules = [{"protocol": "icmp", "source_network": "0.0.0.0/0", "description": "ping"}]
        self._forwarders: Dict[str, PortForwarder] = {}
        self._next_address = 2
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        self.ssh_port = probe.getsockname()[1]   # every instance's sshd port (on its own address)
        probe.close()
        super().__init__(root, token=token, boot_polls=boot_polls)
        self.api_url = self.url + P

    # -- auth and the vendor's error bodies ---------------------------------------------
    def authorized(self, req) -> bool:
        header = req.headers.get("Authorization") or ""
        if header == "Bearer %s" % self.token:
            return True
        if header.startswith("Basic "):
            try:
                return base64.b64decode(header[6:]).decode() == "%s:" % self.token
            except ValueError:
                return False
        return False

    def auth_error(self, req) -> Reply:
        return error(401, "global/invalid-api-key", "API key was invalid, expired, or deleted.",
                     "Check your API key or create a new one, then try again.")

    def not_found(self, req) -> Reply:
        return error(404, "global/object-does-not-exist", "Not found: %s %s" % (req.method, req.path))

    def bad_json(self, req, why: str) -> Reply:
        return error(400, "global/invalid-parameters", "Invalid request body: %s" % why)

    def _invalid_fields(self, problems: List[str]) -> Reply:
        fields = {}
        for problem in problems:
            name = problem.split("'")[1] if "'" in problem else "body"
            fields.setdefault(name, []).append(problem)
        return error(400, "global/invalid-parameters", "Invalid request data.", fields=fields)

    # -- levers -----------------------------------------------------------------------
    def fail_capacity(self, key: str = "instances.launch") -> None:
        self.fail_next(key, error(400, "instance-operations/launch/insufficient-capacity",
                                  "Not enough capacity to fulfill launch request.",
                                  "Choose an instance type with more availability, or try again later."))

    def fail_quota(self, key: str = "instances.launch") -> None:
        self.fail_next(key, error(400, "global/quota-exceeded", "Quota exceeded.",
                                  "Contact Support to increase your quota."))

    def rate_limit(self, key: str, retry_after: int = 1, times: int = 1) -> None:
        self.fail_next(key, Reply(429, {"error": {"code": "global/rate-limited", "message": "Too many requests."}},
                                  headers={"Retry-After": str(retry_after)}), times=times)

    def server_error(self, key: str) -> None:
        self.fail_next(key, error(500, "global/unknown", "An unknown error occurred."))

    def bad_auth(self, key: str) -> None:
        self.fail_next(key, self.auth_error(None))

    def invalid(self, key: str) -> None:
        self.fail_next(key, error(400, "global/invalid-parameters", "Invalid request data."))

    def malformed(self, key: str) -> None:
        self.fail_next(key, Reply(200, raw="<html>upstream proxy</html>"))

    def sell_out(self, type_name: Optional[str] = None) -> None:
        """No capacity anywhere (for one type, or all)."""
        with self.lock:
            for name in ([type_name] if type_name else list(self.capacity)):
                self.capacity[name] = []

    @staticmethod
    def public(record: Dict[str, Any]) -> Dict[str, Any]:
        view = MarketplaceFake.public(record)
        for name in OPTIONAL_INSTANCE_FIELDS:
            if view.get(name) is None:
                view.pop(name, None)
        return view

    def live(self) -> List[Dict[str, Any]]:
        with self.lock:
            return [self.public(i) for i in self.instances.values()]

    def resources(self) -> set:
        with self.lock:
            return ({"instance:%s" % i for i in self.instances} | {"ssh-key:%s" % k["name"]
                                                                   for k in self.ssh_keys.values()}
                    | {"ruleset:%s/%s" % (r["region"]["name"], r["name"]) for r in self.rulesets.values()})

    def finish(self, instance_id: str) -> None:
        """Push an instance to the end of its current phase (booted, or gone)."""
        with self.lock:
            record = self.instances.get(instance_id)
            if record is not None:
                record["_reads"] = self.boot_polls
                self._advance(record)

    def stop(self) -> None:
        for forwarder in list(self._forwarders.values()):
            forwarder.close()
        super().stop()

    # -- lifecycle ---------------------------------------------------------------------
    def _advance(self, record: Dict[str, Any]) -> None:
        if record["status"] == "booting" and self.tick(record):
            key = next((k for k in self.ssh_keys.values() if k["name"] in record["ssh_key_names"]), None)
            host, port, _user = self.sshd.start(record["id"], [key["public_key"]] if key else [])
            address = "127.0.0.%d" % self._next_address
            self._next_address += 1
            self._forwarders[record["id"]] = PortForwarder(address, self.ssh_port, (host, port))
            record.update(status="active", ip=address, private_ip="10.0.%d.%d" % divmod(self._next_address, 256),
                          hostname=address.replace(".", "-"), jupyter_url="https://jupyter-%s.lambdaspaces.com"
                          % record["id"])
        elif record["status"] == "terminating" and self.tick(record):
            self._gone(record["id"])

    def _gone(self, instance_id: str) -> None:
        self.instances.pop(instance_id, None)
        forwarder = self._forwarders.pop(instance_id, None)
        if forwarder:
            forwarder.close()
        self.sshd.stop(instance_id)
        for ruleset in self.rulesets.values():
            if instance_id in ruleset["instance_ids"]:
                ruleset["instance_ids"].remove(instance_id)

    # -- catalog ------------------------------------------------------------------------
    @route("GET", P + r"/instance-types", key="instance-types.list")
    def list_types(self, req) -> Reply:
        return Reply(200, {"data": {name: {"instance_type": kind, "regions_with_capacity_available":
                                           [_region(r) for r in self.capacity.get(name, [])]}
                                    for name, kind in self.types.items()}})

    # -- instances ----------------------------------------------------------------------
    @route("GET", P + r"/instances", key="instances.list")
    def list_instances(self, req) -> Reply:
        for record in list(self.instances.values()):
            self._advance(record)
        return Reply(200, {"data": [self.public(r) for r in self.instances.values()]})

    @route("GET", P + r"/instances/(?P<id>[^/]+)", key="instances.get")
    def get_instance(self, req) -> Reply:
        record = self.instances.get(req.params["id"])
        if record is not None:
            self._advance(record)
        record = self.instances.get(req.params["id"])
        if record is None:
            return error(404, "global/object-does-not-exist", "Specified instance does not exist.")
        return Reply(200, {"data": self.public(record)})

    @route("POST", P + r"/instance-operations/launch", key="instances.launch")
    def launch(self, req) -> Reply:
        body = req.json
        problems = self.check_fields(body, LAUNCH_REQUIRED, LAUNCH_OPTIONAL)
        if problems:
            return self._invalid_fields(problems)
        keys, region, kind = body["ssh_key_names"], body["region_name"], body["instance_type_name"]
        if not isinstance(keys, list) or len(keys) != 1:
            return self._invalid_fields(["field 'ssh_key_names': exactly one SSH key must be specified"])
        if len(body.get("name") or "") > 64:
            return self._invalid_fields(["field 'name': must be 64 characters or fewer"])
        if len((body.get("user_data") or "").encode()) > 1024 * 1024:
            return self._invalid_fields(["field 'user_data': cannot exceed 1MB"])
        seen_keys = set()
        for tag in body.get("tags") or []:
            if self.check_fields(tag, ("key", "value")):
                return self._invalid_fields(["field 'tags': each tag is {key, value}"])
            if tag["key"] in seen_keys:   # a tag is a key and its one value
                return self._invalid_fields(["field 'tags': duplicate key %r" % (tag["key"],)])
            seen_keys.add(tag["key"])
            if not (isinstance(tag["key"], str) and TAG_KEY.match(tag["key"]) and len(tag["key"]) <= 55
                    and isinstance(tag["value"], str) and len(tag["value"]) <= 128):
                return self._invalid_fields(["field 'tags': key %r must match ^[a-z][a-z0-9-:]+$ (at most 55), "
                                             "value at most 128 characters" % (tag["key"],)])
        image = body.get("image")
        if image is not None and not (isinstance(image, dict) and len(image) == 1 and (
                isinstance(image.get("id"), str) or isinstance(image.get("family"), str))):
            return self._invalid_fields(["field 'image': either {id} or {family}"])
        if region not in REGIONS:
            return self._invalid_fields(["field 'region_name': unknown region %s" % region])
        if kind not in self.types:
            return error(404, "global/object-does-not-exist", "Instance type %s does not exist." % kind)
        if keys[0] not in {k["name"] for k in self.ssh_keys.values()}:
            return error(404, "global/object-does-not-exist", "SSH key %s does not exist." % keys[0])
        ruleset_ids = [r.get("id") for r in body.get("firewall_rulesets") or [] if isinstance(r, dict)]
        for ruleset_id in ruleset_ids:
            found = self.rulesets.get(ruleset_id)
            if found is None:
                return error(404, "global/object-does-not-exist", "Firewall ruleset %s does not exist." % ruleset_id)
            if found["region"]["name"] != region:
                return self._invalid_fields(["field 'firewall_rulesets': ruleset %s is not in %s"
                                             % (ruleset_id, region)])
        if region not in self.capacity.get(kind, []):
            return error(400, "instance-operations/launch/insufficient-capacity",
                         "Not enough capacity to fulfill launch request.",
                         "Choose an instance type with more availability, or try again later.")
        if len(self.instances) >= self.quota:
            return error(400, "global/quota-exceeded", "Quota exceeded.", "Contact Support to increase your quota.")
        instance_id = uuid.uuid4().hex
        self.instances[instance_id] = {
            "id": instance_id, "name": body.get("name"), "ip": None, "private_ip": None, "status": "booting",
            "ssh_key_names": list(keys), "file_system_names": list(body.get("file_system_names") or []),
            "file_system_mounts": [], "region": _region(region), "instance_type": dict(self.types[kind]),
            "hostname": body.get("hostname"), "jupyter_token": uuid.uuid4().hex, "jupyter_url": None,
            "actions": {a: {"available": True} for a in ACTIONS},
            "tags": [dict(t) for t in body.get("tags") or []],
            "firewall_rulesets": [{"id": r} for r in ruleset_ids], "_user_data": body.get("user_data"),
        }
        for ruleset_id in ruleset_ids:
            self.rulesets[ruleset_id]["instance_ids"].append(instance_id)
        return Reply(200, {"data": {"instance_ids": [instance_id]}})

    @route("POST", P + r"/instance-operations/terminate", key="instances.terminate")
    def terminate(self, req) -> Reply:
        body = req.json
        problems = self.check_fields(body, ("instance_ids",))
        if problems:
            return self._invalid_fields(problems)
        ids = body["instance_ids"]
        missing = [i for i in ids if i not in self.instances]
        if missing:
            return error(404, "global/object-does-not-exist", "Specified instance does not exist.")
        for instance_id in ids:
            record = self.instances[instance_id]
            if record["status"] != "terminating":
                record.update(status="terminating", _reads=0)
        return Reply(200, {"data": {"terminated_instances": [self.public(self.instances[i]) for i in ids]}})

    # -- ssh keys -----------------------------------------------------------------------
    @route("GET", P + r"/ssh-keys", key="ssh-keys.list")
    def list_keys(self, req) -> Reply:
        return Reply(200, {"data": [dict(k) for k in self.ssh_keys.values()]})

    @route("POST", P + r"/ssh-keys", key="ssh-keys.add")
    def add_key(self, req) -> Reply:
        body = req.json
        problems = self.check_fields(body, ("name",), ("public_key",))
        if problems:
            return self._invalid_fields(problems)
        if len(body["name"]) > 64 or len(body.get("public_key") or "") > 4096:
            return self._invalid_fields(["field 'name': at most 64 characters; public_key at most 4096"])
        if body["name"] in {k["name"] for k in self.ssh_keys.values()}:
            return self._invalid_fields(["field 'name': an SSH key named %s already exists" % body["name"]])
        if not body.get("public_key"):
            return self._invalid_fields(["field 'public_key': the fake does not generate key pairs"])
        key = {"id": uuid.uuid4().hex, "name": body["name"], "public_key": body["public_key"]}
        self.ssh_keys[key["id"]] = key
        return Reply(200, {"data": dict(key)})

    @route("DELETE", P + r"/ssh-keys/(?P<id>[^/]+)", key="ssh-keys.delete")
    def delete_key(self, req) -> Reply:
        key = self.ssh_keys.get(req.params["id"])
        if key is None:
            return error(404, "global/not-found", "The requested resource was not found.")
        if any(key["name"] in i["ssh_key_names"] for i in self.instances.values()):
            return error(400, "ssh-keys/key-in-use", "SSH key is in use by one or more instances.")
        del self.ssh_keys[key["id"]]
        return Reply(200, {"data": {}})

    # -- firewall rulesets ----------------------------------------------------------------
    def _check_rules(self, rules: Any) -> List[str]:
        if not isinstance(rules, list):
            return ["field 'rules': a list of rules"]
        problems = []
        for rule in rules:
            # FirewallRule: protocol, source_network and description required; port_range too
            # except for icmp.
            problems += self.check_fields(rule, ("protocol", "source_network", "description"), ("port_range",))
            if not isinstance(rule, dict):
                continue
            if rule.get("protocol") not in (None, "tcp", "udp", "icmp", "all"):
                problems.append("field 'protocol': one of tcp, udp, icmp, all")
            if rule.get("protocol") in ("tcp", "udp", "all") and not (
                    isinstance(rule.get("port_range"), list) and len(rule["port_range"]) == 2):
                problems.append("field 'port_range': [low, high] for tcp, udp and all")
            if not _ipv4_network(rule.get("source_network")):
                problems.append("field 'source_network': an IPv4 network in CIDR notation")
            if isinstance(rule.get("description"), str) and len(rule["description"]) > 128:
                problems.append("field 'description': at most 128 characters")
        return problems

    @route("GET", P + r"/firewall-rulesets", key="firewall-rulesets.list")
    def list_rulesets(self, req) -> Reply:
        return Reply(200, {"data": [self._ruleset_view(r) for r in self.rulesets.values()]})

    @route("GET", P + r"/firewall-rulesets/global", key="firewall-rulesets.global")
    def global_ruleset(self, req) -> Reply:
        return Reply(200, {"data": {"id": "global", "name": "Global", "rules": [dict(r) for r in self.global_rules]}})

    @route("POST", P + r"/firewall-rulesets", key="firewall-rulesets.create")
    def create_ruleset(self, req) -> Reply:
        body = req.json
        problems = self.check_fields(body, ("name", "region", "rules")) or self._check_rules(body["rules"])
        if problems:
            return self._invalid_fields(problems)
        if len(body["name"]) > 64:
            return self._invalid_fields(["field 'name': at most 64 characters"])
        if body["region"] not in REGIONS:
            return self._invalid_fields(["field 'region': unknown region %s" % body["region"]])
        if any(r["name"] == body["name"] for r in self.rulesets.values()):
            # The spec's only 409 here: global/internal-error, "Try again later".
            return error(409, "global/internal-error", "An internal server error occurred.",
                         "Try again later. Contact Support if the problem persists.")
        ruleset = {"id": uuid.uuid4().hex, "name": body["name"], "region": _region(body["region"]),
                   "rules": list(body.get("rules") or []), "created": "2026-01-01T00:00:00Z", "instance_ids": []}
        self.rulesets[ruleset["id"]] = ruleset
        return Reply(200, {"data": self._ruleset_view(ruleset)})

    @route("GET", P + r"/firewall-rulesets/(?P<id>[^/]+)", key="firewall-rulesets.get")
    def get_ruleset(self, req) -> Reply:
        ruleset = self.rulesets.get(req.params["id"])
        if ruleset is None:
            return error(404, "global/object-does-not-exist", "Firewall ruleset does not exist.")
        return Reply(200, {"data": self._ruleset_view(ruleset)})

    @route("PATCH", P + r"/firewall-rulesets/(?P<id>[^/]+)", key="firewall-rulesets.update")
    def update_ruleset(self, req) -> Reply:
        ruleset = self.rulesets.get(req.params["id"])
        if ruleset is None:
            return error(404, "global/object-does-not-exist", "Firewall ruleset does not exist.")
        body = req.json
        problems = self.check_fields(body, (), ("name", "rules")) or self._check_rules(body.get("rules", []))
        if not problems and len(body.get("name") or "") > 64:
            problems = ["field 'name': at most 64 characters"]
        if problems:
            return self._invalid_fields(problems)
        ruleset.update({k: v for k, v in body.items() if k in ("name", "rules")})
        return Reply(200, {"data": self._ruleset_view(ruleset)})

    @route("DELETE", P + r"/firewall-rulesets/(?P<id>[^/]+)", key="firewall-rulesets.delete")
    def delete_ruleset(self, req) -> Reply:
        ruleset = self.rulesets.get(req.params["id"])
        if ruleset is None:
            return error(404, "global/object-does-not-exist", "Firewall ruleset does not exist.")
        if ruleset["instance_ids"]:
            return error(400, "firewall-rulesets/firewall-ruleset-in-use",
                         "Firewall ruleset is in use by one or more instances.",
                         "Terminate all instances that are using the ruleset before deleting it.")
        del self.rulesets[ruleset["id"]]
        return Reply(200, {"data": {}})

    @staticmethod
    def _ruleset_view(ruleset: Dict[str, Any]) -> Dict[str, Any]:
        view = dict(ruleset)
        view["rules"] = [dict(r) for r in ruleset["rules"]]
        view["instance_ids"] = list(ruleset["instance_ids"])
        return view
