"""A Hyperstack Infrahub API v1 fake (``/v1/...``) on the marketplace fake base.

Shapes follow the official SDK's models (generated from Hyperstack's OpenAPI): answers
carry ``{"status": true, "message", <payload>}`` (the pricebook is a bare array), errors
``{"status": false, "message", "error_reason"}``; auth is the ``api_key`` header.

* Catalog: ``GET /core/flavors`` groups ``self.flavors`` by GPU model and region, each
  with ``stock_available`` (:meth:`sell_out` clears it); ``GET /pricebook`` prices one GPU
  of a model per hour.
* Environments: keys and VMs live in one (``environment_name``); one that still holds a
  VM, key, volume, firewall or Kubernetes cluster (:meth:`add_volume`, :meth:`add_cluster`)
  is refused deletion.
* Lifecycle: a create is ``CREATING``; after ``boot_polls`` reads it is ``ACTIVE`` with
  ``vm_state`` active and an ATTACHED ``floating_ip`` with a real sshd behind it; a delete
  makes it ``DELETING`` and ``boot_polls`` reads later it is gone. With
  :attr:`refuse_delete_while_creating`, deleting a VM still CREATING is refused the way
  Hyperstack words it.
* SSH: every VM gets its own loopback address (127.0.0.N) and a forwarder there on
  ``self.ssh_port`` to its sshd when port randomization is off; with it on (Hyperstack's
  default) the forwarder listens on another port the API does not report.
* Labels: ``PUT /core/virtual-machines/{id}/label`` sets the VM's whole label list (``[""]``
  clears it; a space inside one starts another label, as Hyperstack documents).
* Refusals: unknown or missing fields, a bad key, a name over 50 characters, an unknown
  environment, key, flavor (in that region) or image, a security rule without its
  fields, a flavor without stock (out of stock), more VMs than ``quota``, a key name taken
  in its environment, deleting a key a VM uses.
* Errors on demand: :meth:`fail_capacity`, :meth:`fail_quota`, :meth:`rate_limit`,
  :meth:`server_error`, :meth:`bad_auth`, :meth:`invalid`, :meth:`malformed`.
* Paging: listings page by ``page``/``pageSize`` with ``count`` (all the items), ``page`` and
  ``page_size``. With :attr:`ignore_paging` the server ignores the page query, as the one of
  issue 24 did: every ``page=N`` gets the first page, ``count`` still the total, and a
  ``page_size`` that says the page is full (the number of items it sent).
"""

from __future__ import annotations

import itertools
import socket
from typing import Any, Dict, List, Optional

from ansible_collections.gpuprov.cloud.tests.fakes.marketplace import MarketplaceFake, PortForwarder, Reply, route

P = "/v1"
REGIONS = ("CANADA-1", "NORWAY-1", "US-1")
IMAGES = ("Ubuntu Server 22.04 LTS R535 CUDA 12.2", "Ubuntu Server 24.04 LTS R570 CUDA 12.8")


def _flavor(name: str, region: str, gpu: str, gpus: int, cpu: int, ram: float, stock: bool = True,
            disk: int = 100, ephemeral: int = 750) -> Dict[str, Any]:
    return {"id": abs(hash((name, region))) % 100000, "name": name, "display_name": None, "region_name": region,
            "cpu": cpu, "ram": ram, "disk": disk, "ephemeral": ephemeral if gpus else 0, "gpu": gpu,
            "gpu_count": gpus, "stock_available": stock, "labels": [], "features": {},
            "created_at": "2025-01-01T00:00:00"}


FLAVORS = (
    _flavor("n3-A100x1", "CANADA-1", "A100-80G-PCIe", 1, 28, 120),
    _flavor("n3-A100x8", "CANADA-1", "A100-80G-PCIe", 8, 252, 1440, stock=False),
    _flavor("n3-H100x1", "CANADA-1", "H100-80G-PCIe", 1, 28, 180),
    _flavor("n3-L40x1", "CANADA-1", "L40", 1, 28, 58),
    _flavor("n1-cpu-small", "CANADA-1", "", 0, 4, 4),
    _flavor("n3-RTX-A6000x1", "NORWAY-1", "RTX-A6000", 1, 28, 58),
    _flavor("n3-A100x1", "NORWAY-1", "A100-80G-PCIe", 1, 28, 120, stock=False),
    _flavor("n3-H100x1", "US-1", "H100-80G-PCIe", 1, 28, 180, stock=False),
    _flavor("n3-H100-SXM5x8", "US-1", "H100-80G-SXM5", 8, 192, 1800),
)
PRICES = {"A100-80G-PCIe": 1.35, "H100-80G-PCIe": 1.90, "H100-80G-SXM5": 2.40, "L40": 1.00, "RTX-A6000": 0.50,
          "Storage per GB": 0.000096, "Public IP": 0.00672}

CREATE_REQUIRED = ("name", "environment_name", "flavor_name", "key_name", "count")
CREATE_OPTIONAL = ("image_name", "assign_floating_ip", "enable_port_randomization", "security_rules", "user_data",
                   "labels", "callback_url", "create_bootable_volume", "volume_name", "flavor", "profile")
RULE_REQUIRED = ("direction", "ethertype", "protocol", "remote_ip_prefix")
RULE_OPTIONAL = ("port_range_min", "port_range_max")


def error(status: int, reason: Optional[str], message: str, headers=None) -> Reply:
    body: Dict[str, Any] = {"status": False, "message": message}
    if reason:
        body["error_reason"] = reason
    return Reply(status, body, headers=headers)


def ok(message: str, **payload: Any) -> Reply:
    return Reply(200, dict(status=True, message=message, **payload))


class HyperstackApiFake(MarketplaceFake):
    cloud = "hyperstack"

    def __init__(self, root: str, token: str = "fake-token", boot_polls: int = 2, quota: int = 20):
        self.flavors = [dict(f) for f in FLAVORS]
        self.prices = dict(PRICES)
        self.quota = quota
        self.refuse_delete_while_creating = False
        self.default_page_size = 20     # a listing's page without ``pageSize``
        self.max_page_size = 100
        self.environments: Dict[int, Dict[str, Any]] = {}
        self.keypairs: Dict[int, Dict[str, Any]] = {}
        self.instances: Dict[int, Dict[str, Any]] = {}
        self.volumes: Dict[int, Dict[str, Any]] = {}
        self.firewalls: Dict[int, Dict[str, Any]] = {}
        self.clusters: Dict[int, Dict[str, Any]] = {}
        self._ids = itertools.count(1001)
        self._forwarders: Dict[int, PortForwarder] = {}
        self._next_address = 2
        self.ssh_port = self._free_port()   # every VM's SSH port (on its own address)
        super().__init__(root, token=token, boot_polls=boot_polls)
        self.api_url = self.url + P

    @staticmethod
    def _free_port() -> int:
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        probe.close()
        return port

    # -- auth and the vendor's error bodies ---------------------------------------------
    def authorized(self, req) -> bool:
        return req.headers.get("api_key") == self.token

    def auth_error(self, req) -> Reply:
        return error(401, "unauthorized", "Invalid API key or access token")

    def not_found(self, req) -> Reply:
        return error(404, "not_found", "Not found: %s %s" % (req.method, req.path))

    def bad_json(self, req, why: str) -> Reply:
        return error(400, "bad_request", "Invalid JSON body: %s" % why)

    @staticmethod
    def _invalid(problems: List[str]) -> Reply:
        return error(400, "bad_request", "; ".join(problems))

    # -- levers -----------------------------------------------------------------------
    def fail_capacity(self, key: str = "vms.create") -> None:
        self.fail_next(key, error(400, "bad_request", "The requested flavor is out of stock in this region. "
                                                      "Please try another flavor or region."))

    def fail_quota(self, key: str = "vms.create") -> None:
        self.fail_next(key, error(400, "bad_request", "VM quota exceeded: the environment has reached its limit "
                                                      "of virtual machines"))

    def rate_limit(self, key: str, retry_after: Optional[int] = None, times: int = 1) -> None:
        headers = {"Retry-After": str(retry_after)} if retry_after is not None else None
        self.fail_next(key, Reply(429, {"message": "Too Many Requests"}, headers=headers), times=times)

    def server_error(self, key: str) -> None:
        self.fail_next(key, Reply(500, {"message": "Internal Server Error"}))   # the legacy 5xx body

    def bad_auth(self, key: str) -> None:
        self.fail_next(key, self.auth_error(None))

    def invalid(self, key: str) -> None:
        self.fail_next(key, error(400, "bad_request", "Invalid request body"))

    def malformed(self, key: str) -> None:
        self.fail_next(key, Reply(200, raw="<html>upstream proxy</html>"))

    def sell_out(self, flavor: Optional[str] = None, region: Optional[str] = None) -> None:
        with self.lock:
            for entry in self.flavors:
                if flavor in (None, entry["name"]) and region in (None, entry["region_name"]):
                    entry["stock_available"] = False

    def add_volume(self, environment: str, name: str = "someone-elses-data") -> int:
        """A volume of someone else's in ``environment`` (it keeps the environment alive)."""
        with self.lock:
            env = self._env_by_name(environment)
            volume_id = next(self._ids)
            self.volumes[volume_id] = {"id": volume_id, "name": name, "environment": self._env_ref(env),
                                       "size": 10, "status": "available", "volume_type": "Cloud-SSD",
                                       "bootable": False, "attachments": []}
            return volume_id

    def add_cluster(self, environment: str, name: str = "someone-elses-k8s") -> int:
        """A Kubernetes cluster of someone else's in ``environment`` (``environment_name``, as
        the clusters API names it): it keeps the environment alive."""
        with self.lock:
            cluster_id = next(self._ids)
            self.clusters[cluster_id] = {"id": cluster_id, "name": name, "environment_name": environment,
                                         "status": "ACTIVE", "kubernetes_version": "1.30", "node_groups": [],
                                         "nodes": []}
            return cluster_id

    def live(self) -> List[Dict[str, Any]]:
        with self.lock:
            return [self.public(i) for i in self.instances.values()]

    def resources(self) -> set:
        with self.lock:
            return ({"environment:%s" % e["name"] for e in self.environments.values()}
                    | {"keypair:%s/%s" % (k["environment"]["name"], k["name"]) for k in self.keypairs.values()}
                    | {"vm:%s" % i for i in self.instances}
                    | {"volume:%s" % v["name"] for v in self.volumes.values()}
                    | {"firewall:%s" % f["name"] for f in self.firewalls.values()}
                    | {"cluster:%s" % c["name"] for c in self.clusters.values()})

    def finish(self, instance_id: Any) -> None:
        """Push a VM to the end of its current phase (booted, or gone)."""
        with self.lock:
            record = self.instances.get(int(instance_id)) if str(instance_id).isdigit() else None
            if record is not None:
                record["_reads"] = self.boot_polls
                self._advance(record)

    def stop(self) -> None:
        for forwarder in list(self._forwarders.values()):
            forwarder.close()
        super().stop()

    # -- helpers ------------------------------------------------------------------------
    def _env_by_name(self, name: Any) -> Optional[Dict[str, Any]]:
        return next((e for e in self.environments.values() if e["name"] == name), None)

    @staticmethod
    def _env_ref(env: Dict[str, Any]) -> Dict[str, Any]:
        return {"id": env["id"], "name": env["name"], "region": env["region"], "org_id": 1, "features": {}}

    def _paged(self, req, key: str, items: List[Dict[str, Any]]) -> Reply:
        """``page``/``pageSize`` as the OpenAPI names them: any other query (``page_size``) is
        ignored, as a server ignores what it does not read, so the default size applies; a
        size over :attr:`max_page_size` is capped and the answer's ``page_size`` says so."""
        try:
            page = int(req.arg("page", "1"))
            size = int(req.arg("pageSize", str(self.default_page_size)))
        except ValueError:
            return error(400, "bad_request", "page and pageSize must be integers")
        if page < 1 or size < 1:
            return error(400, "bad_request", "page >= 1 and pageSize >= 1")
        size = min(size, self.max_page_size)
        search = (req.arg("search") or "").lower()
        if search:
            items = [i for i in items if search in str(i.get("name", "")).lower() or search == str(i.get("id"))]
        if self.ignore_paging:
            chunk = items[:size]
            return ok("Success", **{key: chunk, "count": len(items), "page": 1, "page_size": len(chunk)})
        chunk = items[(page - 1) * size:page * size]
        return ok("Success", **{key: chunk, "count": len(items), "page": page, "page_size": size})

    # -- lifecycle ---------------------------------------------------------------------
    def _advance(self, record: Dict[str, Any]) -> None:
        if record["status"] == "CREATING" and self.tick(record):
            key = next((k for k in self.keypairs.values() if k["name"] == record["keypair"]["name"]
                        and k["environment"]["name"] == record["environment"]["name"]), None)
            host, port, _user = self.sshd.start(str(record["id"]), [key["public_key"]] if key else [])
            address = "127.0.0.%d" % self._next_address
            self._next_address += 1
            public_port = self._free_port() if record["port_randomization"] else self.ssh_port
            self._forwarders[record["id"]] = PortForwarder(address, public_port, (host, port))
            record.update(status="ACTIVE", vm_state="active", power_state="RUNNING", floating_ip=address,
                          floating_ip_status="ATTACHED", fixed_ip="10.0.0.%d" % (self._next_address % 250))
            if record["port_randomization"]:
                record["port_randomization_status"] = "ACTIVE"
        elif record["status"] == "DELETING" and self.tick(record):
            self._gone(record["id"])

    def _gone(self, instance_id: int) -> None:
        self.instances.pop(instance_id, None)
        forwarder = self._forwarders.pop(instance_id, None)
        if forwarder:
            forwarder.close()
        self.sshd.stop(str(instance_id))

    # -- catalog ------------------------------------------------------------------------
    @route("GET", P + r"/core/flavors", key="flavors.list")
    def list_flavors(self, req) -> Reply:
        region = req.arg("region")
        groups: Dict[Any, Dict[str, Any]] = {}
        for entry in self.flavors:
            if region and entry["region_name"] != region:
                continue
            group = groups.setdefault((entry["gpu"], entry["region_name"]),
                                      {"gpu": entry["gpu"], "region_name": entry["region_name"], "flavors": []})
            group["flavors"].append(dict(entry))
        return ok("Success", data=list(groups.values()))

    @route("GET", P + r"/pricebook", key="pricebook.get")
    def pricebook(self, req) -> Reply:
        return Reply(200, [{"id": n, "name": name, "value": value, "original_value": value, "discount_applied": False,
                            "start_time": None, "end_time": None}
                           for n, (name, value) in enumerate(sorted(self.prices.items()), 1)])

    # -- environments --------------------------------------------------------------------
    @route("GET", P + r"/core/environments", key="environments.list")
    def list_environments(self, req) -> Reply:
        return self._paged(req, "environments", [dict(e) for e in self.environments.values()])

    @route("POST", P + r"/core/environments", key="environments.create")
    def create_environment(self, req) -> Reply:
        body = req.json
        problems = self.check_fields(body, ("name", "region"))
        if problems:
            return self._invalid(problems)
        if not isinstance(body["name"], str) or not 1 <= len(body["name"]) <= 50:
            return self._invalid(["name: a string with a maximum length of 50 characters"])
        if body["region"] not in REGIONS:
            return self._invalid(["region: %s is not a region (%s)" % (body["region"], ", ".join(REGIONS))])
        if self._env_by_name(body["name"]):
            return error(409, "already_exist", "Environment with name %s already exists" % body["name"])
        env_id = next(self._ids)
        env = {"id": env_id, "name": body["name"], "region": body["region"], "features": {"network_optimised": False},
               "created_at": "2026-01-01T00:00:00"}
        self.environments[env_id] = env
        return ok("Environment created successfully", environment=dict(env))

    @route("DELETE", P + r"/core/environments/(?P<id>\d+)", key="environments.delete")
    def delete_environment(self, req) -> Reply:
        env = self.environments.get(int(req.params["id"]))
        if env is None:
            return error(404, "not_found", "Environment not found")
        holders = [x for group in (self.instances, self.keypairs, self.volumes, self.firewalls)
                   for x in group.values() if x["environment"]["name"] == env["name"]]
        holders += [c for c in self.clusters.values() if c["environment_name"] == env["name"]]
        if holders:
            return error(400, "bad_request", "Environment %s still has resources (virtual machines, keypairs, "
                                             "volumes or firewalls); delete them first" % env["name"])
        del self.environments[env["id"]]
        return ok("Environment deleted successfully")

    # -- keypairs ------------------------------------------------------------------------
    @route("GET", P + r"/core/keypairs", key="keypairs.list")
    def list_keypairs(self, req) -> Reply:
        return self._paged(req, "keypairs", [dict(k) for k in self.keypairs.values()])

    @route("POST", P + r"/core/keypairs", key="keypairs.import")
    def import_keypair(self, req) -> Reply:
        body = req.json
        problems = self.check_fields(body, ("name", "environment_name", "public_key"))
        if problems:
            return self._invalid(problems)
        if not isinstance(body["name"], str) or not 1 <= len(body["name"]) <= 50:
            return self._invalid(["name: a string with a maximum length of 50 characters"])
        env = self._env_by_name(body["environment_name"])
        if env is None:
            return error(404, "not_found", "Environment %s not found" % body["environment_name"])
        if any(k["name"] == body["name"] and k["environment"]["name"] == env["name"] for k in self.keypairs.values()):
            return error(409, "already_exist", "Keypair with name %s already exists" % body["name"])
        if len(body["public_key"].split()) < 2:
            return self._invalid(["public_key: not an OpenSSH public key"])
        key_id = next(self._ids)
        key = {"id": key_id, "name": body["name"], "environment": self._env_ref(env),
               "public_key": body["public_key"], "fingerprint": "SHA256:fake%d" % key_id,
               "created_at": "2026-01-01T00:00:00"}
        self.keypairs[key_id] = key
        return ok("Keypair imported successfully", keypair=dict(key))

    @route("DELETE", P + r"/core/keypair/(?P<id>\d+)", key="keypairs.delete")
    def delete_keypair(self, req) -> Reply:
        key = self.keypairs.get(int(req.params["id"]))
        if key is None:
            return error(404, "not_found", "Keypair not found")
        if any(i["keypair"]["name"] == key["name"] and i["environment"]["name"] == key["environment"]["name"]
               for i in self.instances.values()):
            return error(400, "bad_request", "Keypair %s is in use by a virtual machine" % key["name"])
        del self.keypairs[key["id"]]
        return ok("Keypair deleted successfully")

    # -- volumes and firewalls (only listed: someone else's keep an environment) ----------
    @staticmethod
    def _in_environment(req, entries: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
        wanted = req.arg("environment")
        return [dict(e) for e in entries if not wanted or (e.get("environment") or {}).get("name", e.get(
            "environment_name")) == wanted]

    @route("GET", P + r"/core/volumes", key="volumes.list")
    def list_volumes(self, req) -> Reply:
        return self._paged(req, "volumes", self._in_environment(req, list(self.volumes.values())))

    @route("GET", P + r"/core/firewalls", key="firewalls.list")
    def list_firewalls(self, req) -> Reply:
        return self._paged(req, "firewalls", self._in_environment(req, list(self.firewalls.values())))

    @route("GET", P + r"/core/clusters", key="clusters.list")
    def list_clusters(self, req) -> Reply:
        """``{clusters}`` (ClusterListResponse carries no page fields), by ``environment``."""
        return ok("Success", clusters=self._in_environment(req, list(self.clusters.values())))

    # -- virtual machines ----------------------------------------------------------------
    @route("GET", P + r"/core/virtual-machines", key="vms.list")
    def list_vms(self, req) -> Reply:
        for record in list(self.instances.values()):
            self._advance(record)
        wanted = req.arg("environment")
        exact = (req.arg("exact_environment_match") or "false").lower() == "true"
        found = [self.public(r) for r in self.instances.values()
                 if not wanted or (r["environment"]["name"] == wanted if exact else wanted in r["environment"]["name"])]
        return self._paged(req, "instances", found)

    @route("GET", P + r"/core/virtual-machines/(?P<id>\d+)", key="vms.get")
    def get_vm(self, req) -> Reply:
        record = self.instances.get(int(req.params["id"]))
        if record is not None:
            self._advance(record)
        record = self.instances.get(int(req.params["id"]))
        if record is None:
            return error(404, "not_found", "Virtual machine not found")
        return ok("Success", instance=self.public(record))

    def _check_create(self, body: Any) -> Optional[Reply]:
        problems = self.check_fields(body, CREATE_REQUIRED, CREATE_OPTIONAL)
        if problems:
            return self._invalid(problems)
        if len(body["name"]) > 50:
            return self._invalid(["name: a string with a maximum length of 50 characters"])
        if body["count"] != 1 and not (isinstance(body["count"], int) and 1 <= body["count"] <= 20):
            return self._invalid(["count: 1 to 20 virtual machines per call"])
        for rule in body.get("security_rules") or []:
            problems += self.check_fields(rule, RULE_REQUIRED, RULE_OPTIONAL)
            if isinstance(rule, dict) and rule.get("protocol") not in ("tcp", "udp", "icmp", "any", None):
                problems.append("protocol: %s is not a permitted protocol" % rule.get("protocol"))
        labels = body.get("labels")
        if labels is not None and not (isinstance(labels, list) and all(isinstance(x, str) for x in labels)):
            problems.append("labels: a list of strings")
        if body.get("image_name") not in IMAGES:
            problems.append("image_name: %s is not an image of this region" % body.get("image_name"))
        return self._invalid(problems) if problems else None

    @route("POST", P + r"/core/virtual-machines", key="vms.create")
    def create_vm(self, req) -> Reply:
        body = req.json
        refused = self._check_create(body)
        if refused:
            return refused
        env = self._env_by_name(body["environment_name"])
        if env is None:
            return error(404, "not_found", "Environment %s not found" % body["environment_name"])
        flavor = next((f for f in self.flavors if f["name"] == body["flavor_name"]
                       and f["region_name"] == env["region"]), None)
        if flavor is None:
            return error(404, "not_found", "Flavor %s not found in %s" % (body["flavor_name"], env["region"]))
        if not any(k["name"] == body["key_name"] and k["environment"]["name"] == env["name"]
                   for k in self.keypairs.values()):
            return error(404, "not_found", "Keypair %s not found in environment %s" % (body["key_name"], env["name"]))
        if not flavor["stock_available"]:
            return error(400, "bad_request", "The requested flavor %s is out of stock in %s." % (
                flavor["name"], env["region"]))
        if len(self.instances) >= self.quota:
            return error(400, "bad_request", "VM quota exceeded: the environment has reached its limit of %d "
                                             "virtual machines" % self.quota)
        public_ip = bool(body.get("assign_floating_ip"))
        randomized = public_ip and body.get("enable_port_randomization", True) is not False
        instance_id = next(self._ids)
        record = {
            "id": instance_id, "name": body["name"], "status": "CREATING", "vm_state": "building",
            "power_state": "NOSTATE", "fixed_ip": None, "floating_ip": None,
            "floating_ip_status": "ATTACHING" if public_ip else "NOT_ATTACHED", "requires_public_ip": public_ip,
            "port_randomization": randomized, "port_randomization_status": "PENDING" if randomized else None,
            "environment": self._env_ref(env), "image": {"name": body["image_name"]},
            "flavor": {k: flavor[k] for k in ("id", "name", "cpu", "ram", "disk", "ephemeral", "gpu", "gpu_count")},
            "keypair": {"name": body["key_name"]}, "labels": list(body.get("labels") or []),
            "security_rules": [dict(rule, id=next(self._ids), status="SUCCESS")
                               for rule in body.get("security_rules") or []],
            "volume_attachments": [], "locked": False, "os": body["image_name"], "contract_id": None,
            "callback_url": body.get("callback_url"), "created_at": "2026-01-01T00:00:00", "features": {},
            "_user_data": body.get("user_data"),
        }
        self.instances[instance_id] = record
        return ok("Virtual machine(s) created successfully", instances=[self.public(record)])

    @route("PUT", P + r"/core/virtual-machines/(?P<id>\d+)/label", key="vms.label")
    def label_vm(self, req) -> Reply:
        """The VM's whole label list becomes ``labels`` (``[""]`` clears it); a space in one separates labels."""
        body = req.json
        problems = self.check_fields(body, ("labels",))
        if not problems and not (isinstance(body["labels"], list) and all(isinstance(x, str) for x in body["labels"])):
            problems.append("labels: a list of strings")
        if problems:
            return self._invalid(problems)
        record = self.instances.get(int(req.params["id"]))
        if record is None:
            return error(404, "not_found", "Virtual machine not found")
        record["labels"] = [part for label in body["labels"] for part in label.split() if part]
        return ok("labels for VM: %s is set to: %s" % (record["name"], record["labels"]))

    @route("DELETE", P + r"/core/virtual-machines/(?P<id>\d+)", key="vms.delete")
    def delete_vm(self, req) -> Reply:
        record = self.instances.get(int(req.params["id"]))
        if record is None:
            return error(404, "not_found", "Virtual machine not found")
        if self.refuse_delete_while_creating and record["status"] == "CREATING":
            return error(400, "bad_request", "VM %s is currently being created and cannot be deleted yet. Please "
                                             "wait until the creation process is finished before attempting "
                                             "deletion." % record["name"])
        if record["status"] != "DELETING":
            record.update(status="DELETING", vm_state="deleting", _reads=0)
        return ok("Virtual machine deleted successfully")
