"""A Massed Compute VM API v1 fake (``/api/v1/...``) on the marketplace fake base.

Shapes follow the vendor's OpenAPI spec (brevdev/cloud's copy): ``GET /gpu-inventory``
-> ``{"gpu_inventory": {product: {instance_type, regions_with_capacity_available,
capacity_available}}}``, ``GET /instance`` -> ``{"runningInstances": [...]}``, a launch
answers 202 ``{"response": "<uuid>"}``, SSH keys are ``{"sshKeys": [{id, name, public_key}]}``.
Auth is ``Authorization: Bearer <key>``. Massed Compute publishes no error schema: the
fake's error bodies are ``{"message": ...}`` (plus ``errors`` per field for a bad body),
worded as brevdev's provider expects them ("capacity", "limit exceeded").

* Catalog: ``self.products`` (name -> instance_type), ``self.capacity`` (name -> regions
  with capacity) and ``self.stock`` (name -> capacity_available); :meth:`sell_out`.
* Lifecycle: a launch is ``booting`` (``os_booted`` 0, no ip); after ``boot_polls`` reads it
  is ``rented`` with an ip and a real sshd behind it; a terminate makes it ``terminating``
  and ``boot_polls`` reads later it is gone (sshd stopped).
* SSH: each instance gets its own loopback address (127.0.0.2, .3, ...) with a forwarder on
  ``self.ssh_port`` to its sshd: Massed Compute reports only ``ip`` and ``username``, so the
  port is the adapter's ``ssh_port`` option. ``username`` is the sshd's user.
* Refusals: unknown or missing launch fields, a wrong type of ``imageId``, an unknown image,
  product, region or SSH key name, key names with punctuation other than spaces, a
  product without capacity in the region, more instances than ``quota``, a bad key (401
  "Authentication not correct."), a terminate or restart naming no live instance (400 "No
  valid VMs found"). As the vendor's MCP e2e log records: an unknown uuid in ``GET
  /instance/{uuid}`` is an empty list, and deleting an unknown SSH key id succeeds.
* Errors on demand: :meth:`fail_capacity`, :meth:`fail_quota`, :meth:`fail_billing`,
  :meth:`rate_limit`, :meth:`server_error`, :meth:`bad_auth`, :meth:`invalid`, :meth:`malformed`,
  :meth:`fail_image_unsupported`.
"""

from __future__ import annotations

import re
import socket
import uuid
from typing import Any, Dict, List, Optional

from ansible_collections.gpuprov.cloud.tests.fakes.marketplace import MarketplaceFake, PortForwarder, Reply, route

P = "/api/v1"
REGIONS = {"us-central-1": "Wichita, KS", "us-central-2": "Kansas City, MO", "us-central-3": "Des Moines, IA"}
IMAGES = [{"vm_image_id": 42, "vm_image_name": "Ubuntu Server 22.04 w/ drivers",
           "vm_image_description": "Ubuntu 22.04 with NVIDIA drivers"},
          {"vm_image_id": 7, "vm_image_name": "Art", "vm_image_description": "AI tools for creatives"}]


def _product(name: str, description: str, cents: int, vcpus: int, memory: int, disk: int) -> Dict[str, Any]:
    return {"name": name, "description": description, "price_cents_per_hour": cents,
            "specs": {"vcpu_count": vcpus, "memory_gib": memory, "storage_gb": disk}}


PRODUCTS = {p["name"]: p for p in (
    _product("gpu_1x_l40", "1x L40 (48GB)", 86, 14, 72, 625),
    _product("gpu_2x_l40", "2x L40 (48GB)", 172, 28, 144, 1250),
    _product("gpu_1x_a6000", "1x RTX A6000 (48GB)", 63, 6, 48, 256),
    _product("gpu_4x_h100_nvl_nvlink", "4x H100 NVL NVLink", 1096, 64, 512, 5000),
    _product("gpu_8x_DGX_A100", "8x DGX A100 (80GB)", 1392, 128, 1024, 10000),
    _product("gpu_4x_h200_nvl_nvlink_discount", "4x H200 NVL (141GB) NVLink [Spot]", 78, 14, 72, 625),
    _product("cpu_small_amd_epyc", "CPU-only instance", 12, 4, 16, 250),
)}
CAPACITY = {"gpu_1x_l40": ["us-central-1", "us-central-3"], "gpu_2x_l40": ["us-central-1"],
            "gpu_1x_a6000": ["us-central-3"], "gpu_4x_h100_nvl_nvlink": [], "gpu_8x_DGX_A100": ["us-central-2"],
            "gpu_4x_h200_nvl_nvlink_discount": ["spot-only-1"], "cpu_small_amd_epyc": ["us-central-1"]}
STOCK = {"gpu_1x_l40": 19, "gpu_2x_l40": 4, "gpu_1x_a6000": 2, "gpu_4x_h100_nvl_nvlink": 0, "gpu_8x_DGX_A100": 1,
         "gpu_4x_h200_nvl_nvlink_discount": 19, "cpu_small_amd_epyc": 30}

LAUNCH_REQUIRED = ("imageId", "productName", "regionName")
LAUNCH_OPTIONAL = ("instanceName", "coupon", "command", "sshKeys")
KEY_NAME = re.compile(r"^[A-Za-z0-9 ]+$")   # brevdev: no punctuation other than spaces


def error(status: int, message: str, errors: Optional[Dict[str, List[str]]] = None, headers=None) -> Reply:
    body: Dict[str, Any] = {"message": message}
    if errors:
        body["errors"] = errors
    return Reply(status, body, headers=headers)


class MassedComputeApiFake(MarketplaceFake):
    cloud = "massedcompute"

    def __init__(self, root: str, token: str = "fake-token", boot_polls: int = 2, quota: int = 20):
        self.products = {name: dict(p) for name, p in PRODUCTS.items()}
        self.capacity = {name: list(regions) for name, regions in CAPACITY.items()}
        self.stock = dict(STOCK)
        self.images = [dict(i) for i in IMAGES]
        self.quota = quota
        self.instances: Dict[str, Dict[str, Any]] = {}
        self.ssh_keys: Dict[str, Dict[str, Any]] = {}
        self._forwarders: Dict[str, PortForwarder] = {}
        self._next_address = 2
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        self.ssh_port = probe.getsockname()[1]   # every instance's sshd port (on its own address)
        probe.close()
        super().__init__(root, token=token, boot_polls=boot_polls)
        self.api_url = self.url + P

    # -- auth and error bodies ----------------------------------------------------------
    def auth_error(self, req) -> Reply:
        # the vendor's wording for a missing or invalid key (its MCP e2e log, massed-compute-mcp)
        return error(401, "Authentication not correct.")

    def not_found(self, req) -> Reply:
        return error(404, "Not found: %s %s" % (req.method, req.path))

    def bad_json(self, req, why: str) -> Reply:
        return error(400, "The request body is not valid JSON: %s" % why)

    def _invalid_fields(self, problems: List[str]) -> Reply:
        fields: Dict[str, List[str]] = {}
        for problem in problems:
            name = problem.split("'")[1] if "'" in problem else "body"
            fields.setdefault(name, []).append(problem)
        return error(400, "The given data was invalid.", fields)

    # -- levers -------------------------------------------------------------------------
    def fail_capacity(self, key: str = "instance.launch") -> None:
        self.fail_next(key, error(400, "Out of stock: no capacity available for this product in this region."))

    def fail_quota(self, key: str = "instance.launch") -> None:
        self.fail_next(key, error(403, "Instance limit exceeded for this account."))

    def fail_billing(self, key: str = "instance.launch") -> None:
        self.fail_next(key, error(402, "Billing is not configured: set a recharge amount and threshold."))

    def rate_limit(self, key: str, retry_after: int = 1, times: int = 1) -> None:
        self.fail_next(key, error(429, "Too Many Requests", headers={"Retry-After": str(retry_after)}), times=times)

    def server_error(self, key: str) -> None:
        self.fail_next(key, error(500, "Server Error"))

    def bad_auth(self, key: str) -> None:
        self.fail_next(key, self.auth_error(None))

    def fail_image_unsupported(self, key: str = "instance.launch") -> None:
        self.fail_next(key, error(400, "Product does not support the VM Image"))

    def invalid(self, key: str) -> None:
        self.fail_next(key, error(400, "The given data was invalid."))

    def malformed(self, key: str) -> None:
        self.fail_next(key, Reply(200, raw="<html>upstream proxy</html>"))

    def sell_out(self, product: Optional[str] = None) -> None:
        with self.lock:
            for name in ([product] if product else list(self.capacity)):
                self.capacity[name] = []
                self.stock[name] = 0

    def live(self) -> List[Dict[str, Any]]:
        with self.lock:
            return [self.public(i) for i in self.instances.values()]

    def resources(self) -> set:
        """Every instance and SSH key left on the fake."""
        with self.lock:
            return {"instance:%s" % i for i in self.instances} | {"ssh-key:%s" % k["name"]
                                                                  for k in self.ssh_keys.values()}

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

    # -- lifecycle ----------------------------------------------------------------------
    def _advance(self, record: Dict[str, Any]) -> None:
        if record["status"] == "booting" and self.tick(record):
            keys = [k["public_key"] for k in self.ssh_keys.values() if k["name"] in record["_keys"]]
            host, port, user = self.sshd.start(record["uuid"], keys)
            address = "127.0.0.%d" % self._next_address
            self._next_address += 1
            self._forwarders[record["uuid"]] = PortForwarder(address, self.ssh_port, (host, port))
            record.update(status="rented", os_booted=1, ip=address, username=user)
        elif record["status"] == "terminating" and self.tick(record):
            self._gone(record["uuid"])

    def _gone(self, instance_id: str) -> None:
        record = self.instances.pop(instance_id, None)
        forwarder = self._forwarders.pop(instance_id, None)
        if forwarder:
            forwarder.close()
        self.sshd.stop(instance_id)
        if record:
            self.stock[record["product"]["name"]] = self.stock.get(record["product"]["name"], 0) + 1

    # -- catalog --------------------------------------------------------------------------
    @route("GET", P + r"/gpu-inventory", key="gpu-inventory")
    def inventory(self, req) -> Reply:
        return Reply(200, {"gpu_inventory": {name: {
            "instance_type": dict(kind),
            "regions_with_capacity_available": [{"name": r, "description": REGIONS.get(r, r)}
                                                for r in self.capacity.get(name, [])],
            "capacity_available": self.stock.get(name, 0)} for name, kind in self.products.items()}})

    @route("GET", P + r"/images", key="images")
    def list_images(self, req) -> Reply:
        return Reply(200, {"images": [dict(i) for i in self.images]})

    @route("POST", P + r"/account/token/validation", key="token.validation")
    def validate_token(self, req) -> Reply:
        return Reply(200, {"message": "Valid Token"})

    # -- instances ------------------------------------------------------------------------
    @route("GET", P + r"/instance", key="instance.list")
    def list_instances(self, req) -> Reply:
        for record in list(self.instances.values()):
            self._advance(record)
        return Reply(200, {"runningInstances": [self.public(r) for r in self.instances.values()]})

    @route("GET", P + r"/instance/(?P<uuid>[^/]+)", key="instance.get")
    def get_instance(self, req) -> Reply:
        record = self.instances.get(req.params["uuid"])
        if record is not None:
            self._advance(record)
        record = self.instances.get(req.params["uuid"])
        # an unknown uuid is an empty list, not an error (the vendor's MCP e2e log)
        return Reply(200, {"runningInstances": [self.public(record)] if record is not None else []})

    @route("POST", P + r"/instance/launch", key="instance.launch")
    def launch(self, req) -> Reply:
        body = req.json
        problems = self.check_fields(body, LAUNCH_REQUIRED, LAUNCH_OPTIONAL)
        if problems:
            return self._invalid_fields(problems)
        if not isinstance(body["imageId"], int) or isinstance(body["imageId"], bool):
            return self._invalid_fields(["field 'imageId': must be an integer"])
        keys = body.get("sshKeys") or []
        if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
            return self._invalid_fields(["field 'sshKeys': a list of SSH key names"])
        product, region = body["productName"], body["regionName"]
        if body["imageId"] not in {i["vm_image_id"] for i in self.images}:
            return error(400, "Image %s does not exist." % body["imageId"])
        if product not in self.products:
            return error(400, "Product %s does not exist." % product)
        if region != "any" and region not in REGIONS:
            return error(400, "Region %s does not exist." % region)
        missing = [k for k in keys if k not in {s["name"] for s in self.ssh_keys.values()}]
        if missing:
            return error(400, "SSH key %s not found." % missing[0])
        regions = self.capacity.get(product, [])
        if self.stock.get(product, 0) <= 0 or not regions or (region != "any" and region not in regions):
            return error(400, "Out of stock: no capacity available for %s in %s." % (product, region))
        if len(self.instances) >= self.quota:
            return error(403, "Instance limit exceeded for this account.")
        self.stock[product] -= 1
        instance_id = str(uuid.uuid4())
        kind = self.products[product]
        image = next(i for i in self.images if i["vm_image_id"] == body["imageId"])
        placed = regions[0] if region == "any" else region
        self.instances[instance_id] = {
            "uuid": instance_id, "name": body.get("instanceName") or "", "ip": "", "username": "Ubuntu",
            "password": uuid.uuid4().hex[:12], "status": "booting", "os_booted": 0,
            "command_startup": body.get("command") or "", "created": "2026-01-01T00:00:00.000Z", "active": 1,
            "image": {"id": image["vm_image_id"], "name": image["vm_image_name"],
                      "description": image["vm_image_description"]},
            "product": {"name": product, "description": kind["description"], "gpu_count": int(
                product.split("_")[1].rstrip("x")) if product.startswith("gpu_") else 0,
                "vcpu": kind["specs"]["vcpu_count"], "ram": kind["specs"]["memory_gib"],
                "storage": kind["specs"]["storage_gb"], "price_hr": "%.2f" % (kind["price_cents_per_hour"] / 100.0),
                "final_price_hr": "%.2f" % (kind["price_cents_per_hour"] / 100.0)},
            "region": {"name": placed, "description": REGIONS.get(placed, placed)},
            "_keys": list(keys),
        }
        return Reply(202, {"response": instance_id})

    def _summary(self, record: Dict[str, Any], status: str) -> Dict[str, Any]:
        kind = self.products.get(record["product"]["name"], {})
        return {"id": record["uuid"], "name": record["name"], "ip": record["ip"], "status": status,
                "ssh_key_names": list(record["_keys"]), "file_system_names": [], "region": dict(record["region"]),
                "instance_type": dict(kind), "jupyter_token": "", "jupyter_url": ""}

    def _uuids(self, req) -> Any:
        body = req.json
        problems = self.check_fields(body, ("instanceUuids",))
        if problems:
            return self._invalid_fields(problems)
        ids = body["instanceUuids"]
        if not isinstance(ids, list) or not ids:
            return self._invalid_fields(["field 'instanceUuids': a non-empty list"])
        known = [i for i in ids if i in self.instances]
        if not known:   # the vendor's answer when none of the uuids is a live instance
            return error(400, "No valid VMs found")
        return known

    @route("POST", P + r"/instance/terminate", key="instance.terminate")
    def terminate(self, req) -> Reply:
        ids = self._uuids(req)
        if isinstance(ids, Reply):
            return ids
        for instance_id in ids:
            record = self.instances[instance_id]
            if record["status"] != "terminating":
                record.update(status="terminating", _reads=0)
        return Reply(202, {"response": {"data": {"terminated_instances": [
            self._summary(self.instances[i], "terminated") for i in ids]}}})

    @route("POST", P + r"/instance/restart", key="instance.restart")
    def restart(self, req) -> Reply:
        ids = self._uuids(req)
        if isinstance(ids, Reply):
            return ids
        return Reply(202, {"response": [self._summary(self.instances[i], "booting") for i in ids]})

    # -- ssh keys -------------------------------------------------------------------------
    @route("GET", P + r"/ssh-keys", key="ssh-keys.list")
    def list_keys(self, req) -> Reply:
        return Reply(200, {"sshKeys": [dict(k) for k in self.ssh_keys.values()]})

    @route("POST", P + r"/ssh-keys", key="ssh-keys.add")
    def add_key(self, req) -> Reply:
        body = req.json
        problems = self.check_fields(body, ("name", "publicKey"))
        if problems:
            return self._invalid_fields(problems)
        if not KEY_NAME.match(body["name"]):
            return self._invalid_fields(["field 'name': SSH key names cannot contain punctuation other than spaces"])
        if body["name"] in {k["name"] for k in self.ssh_keys.values()}:
            return self._invalid_fields(["field 'name': an SSH key named %s already exists" % body["name"]])
        if len(str(body["publicKey"]).split()) < 2:
            return self._invalid_fields(["field 'publicKey': not an OpenSSH public key"])
        key = {"id": str(uuid.uuid4()), "name": body["name"], "public_key": body["publicKey"]}
        self.ssh_keys[key["id"]] = key
        return Reply(200, {"sshKey": {"id": key["id"], "name": key["name"]}})

    @route("DELETE", P + r"/ssh-keys/(?P<id>[^/]+)", key="ssh-keys.delete")
    def delete_key(self, req) -> Reply:
        # an unknown id is a silent success (the vendor's MCP e2e log, MCDEV-468)
        self.ssh_keys.pop(req.params["id"], None)
        return Reply(200, {"result": {}})
