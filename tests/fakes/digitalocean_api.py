"""A DigitalOcean API v2 fake (``/v2/...``) on the marketplace fake base.

Shapes follow DigitalOcean's OpenAPI spec (digitalocean/openapi): a single object comes
back under its singular name (``{"droplet": ...}``), a collection under its plural with
``links.pages`` {first, prev, next, last} and ``meta.total`` (``per_page`` up to 200, 20 by
default; with :attr:`ignore_paging` the server ignores the page query: every page gets the
first page's items, ``meta.total`` still the total, and a ``next`` link to the page after
the one asked); every error is ``{"id", "message"}`` with ``id`` mirroring the status
(``unauthorized``, ``not_found``, ``unprocessable_entity``, ``too_many_requests``...), but a
bad tag name on ``POST /tags`` is the ``{"error", "messages", "root_causes"}`` shape.

* Catalog: ``GET /sizes`` from ``self.sizes`` (each with ``regions``, ``available``,
  ``price_hourly``, ``gpu_info``); :meth:`sell_out` empties one.
* Lifecycle: a created droplet is ``new`` without a public address; after ``boot_polls``
  reads it is ``active`` with a public IPv4 address and a real sshd behind it; ``DELETE``
  removes it at once (204), as DigitalOcean does.
* SSH: every droplet gets its own loopback address (127.0.0.2, .3, ...) and a forwarder on
  ``self.ssh_port`` there to its sshd: DigitalOcean reports only an address, so the port is
  the same for all (the adapter's ``ssh_port`` option) and the address tells them apart.
* Listing droplets: ``tag_name`` cannot be combined with ``name`` or ``type``; "by default, only
  non-GPU Droplets are returned" unless ``type=gpus`` (then only GPU ones). Whether a tag filter
  lists GPU droplets the spec leaves open: ``tag_name_lists_gpus`` (default False, the literal
  reading) chooses.
* Refusals (422 unprocessable_entity unless said): unknown or missing fields, a bad token
  (401 "Unable to authenticate you."), an unknown size, region or image, a size not
  creatable in the region ("Size is not available in this region."), more droplets than
  ``droplet_limit`` ("creating this/these droplet(s) will exceed your droplet limit"), SSH
  key ids that do not exist ("... are invalid key identifiers for Droplet creation."), a
  key registered twice ("SSH Key is already in use on your account"), tag names outside
  ``[A-Za-z0-9_:-]{1,255}``, a firewall naming a tag that does not exist, user data over
  64 KiB.
* Tagging: ``POST`` / ``DELETE /tags/{tag}/resources`` with ``{"resources": [{"resource_id":
  "<id as a string>", "resource_type": "droplet"}]}`` tag and untag (204); the tag must exist
  first (404 otherwise: ``POST /tags`` makes it, and answers 201 for one that exists).
* Errors on demand: :meth:`fail_capacity`, :meth:`fail_quota`, :meth:`rate_limit` (the burst
  limit: ``retry-after``; or the hourly limit: only ``ratelimit-reset``, a Unix time),
  :meth:`server_error`, :meth:`bad_auth`, :meth:`invalid`, :meth:`malformed`.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import re
import socket
import struct
import time
import uuid
from typing import Any, Dict, List, Optional, Tuple
from urllib.parse import urlencode

from ansible_collections.gpuprov.cloud.tests.fakes.marketplace import MarketplaceFake, PortForwarder, Reply, route

P = "/v2"
REGIONS = {"nyc1": "New York 1", "nyc2": "New York 2", "nyc3": "New York 3", "sfo3": "San Francisco 3",
           "ams3": "Amsterdam 3", "fra1": "Frankfurt 1", "lon1": "London 1", "tor1": "Toronto 1",
           "atl1": "Atlanta 1", "sgp1": "Singapore 1"}
CPU_REGIONS = ["ams3", "fra1", "lon1", "nyc1", "nyc3", "sfo3", "sgp1", "tor1"]
IMAGES = {"gpu-h100x1-base": "AI/ML Ready H100x1", "gpu-h100x8-base": "AI/ML Ready H100x8",
          "gpu-amd-base": "AI/ML Ready AMD", "ubuntu-24-04-x64": "24.04 (LTS) x64",
          "ubuntu-22-04-x64": "22.04 (LTS) x64"}
USER_DATA_MAX = 64 * 1024
TAG_RE = re.compile(r"^[a-zA-Z0-9_\-:]{1,255}$")
RESOURCE_TYPES = ("droplet", "database", "image", "volume", "volume_snapshot")   # what tags may name
NAME_RE = re.compile(r"^[a-zA-Z0-9]?[a-z0-9A-Z.\-]*[a-z0-9A-Z]$")
FIREWALL_NAME_RE = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9.-]+$")

CREATE_REQUIRED = ("name", "size", "image")
CREATE_OPTIONAL = ("region", "ssh_keys", "backups", "backup_policy", "ipv6", "monitoring", "tags", "user_data",
                   "private_networking", "volumes", "vpc_uuid", "with_droplet_agent", "public_networking")
FIREWALL_FIELDS = ("name", "inbound_rules", "outbound_rules", "droplet_ids", "tags")
TARGET_FIELDS = ("addresses", "droplet_ids", "load_balancer_uids", "kubernetes_ids", "tags")


def _size(slug: str, hourly: float, vcpus: int, memory_gb: int, disk: int, regions: List[str],
          gpu: Optional[tuple] = None, description: str = "GPU") -> Dict[str, Any]:
    size = {"slug": slug, "memory": memory_gb * 1024, "vcpus": vcpus, "disk": disk, "transfer": 10.0,
            "price_monthly": round(hourly * 672, 2), "price_hourly": hourly, "regions": list(regions),
            "available": True, "description": description,
            "disk_info": [{"type": "local", "size": {"amount": disk, "unit": "gib"}}]}
    if gpu:
        count, model, vram = gpu
        size["gpu_info"] = {"count": count, "model": model, "vram": {"amount": vram, "unit": "gib"}}
    return size


SIZES = [
    _size("s-2vcpu-4gb", 0.03571, 2, 4, 80, CPU_REGIONS, description="Basic"),
    _size("s-4vcpu-8gb", 0.07143, 4, 8, 160, CPU_REGIONS, description="Basic"),
    _size("c-8", 0.25, 8, 16, 100, CPU_REGIONS, description="CPU-Optimized"),
    _size("gpu-4000adax1-20gb", 0.76, 8, 32, 500, ["tor1", "nyc2", "atl1"], (1, "nvidia_rtx_4000_ada", 20)),
    _size("gpu-6000adax1-48gb", 1.57, 8, 64, 500, ["tor1", "nyc2"], (1, "nvidia_rtx_6000_ada", 48)),
    _size("gpu-l40sx1-48gb", 1.57, 8, 64, 500, ["tor1", "nyc2"], (1, "nvidia_l40s", 48)),
    _size("gpu-h100x1-80gb", 3.39, 20, 240, 720, ["nyc2", "tor1", "atl1"], (1, "nvidia_h100", 80)),
    _size("gpu-h100x8-640gb", 23.92, 160, 1920, 2046, ["nyc2", "tor1"], (8, "nvidia_h100", 80)),
    _size("gpu-h200x1-141gb", 3.44, 24, 240, 720, ["atl1"], (1, "nvidia_h200", 141)),
    _size("gpu-h200x8-1128gb", 27.52, 192, 1920, 2046, [], (8, "nvidia_h200", 141)),
    _size("gpu-mi300x1-192gb", 1.99, 20, 240, 720, ["atl1"], (1, "amd_mi300x", 192)),
    _size("gpu-mi300x8-1536gb", 15.92, 160, 1920, 2046, ["atl1"], (8, "amd_mi300x", 192)),
    _size("gpu-b300x1-288gb-spot", 2.99, 24, 256, 720, ["atl1"], (1, "nvidia_b300", 288)),
]


def public_key(comment: str, seed: bytes = b"gpuprov-conformance") -> str:
    """A well-formed ed25519 public key line (DigitalOcean refuses a key whose blob does not decode)."""
    blob = struct.pack(">I", 11) + b"ssh-ed25519" + struct.pack(">I", 32) + hashlib.sha256(seed).digest()
    return "ssh-ed25519 %s %s" % (base64.b64encode(blob).decode("ascii"), comment)


def error(status: int, ident: str, message: str, headers=None) -> Reply:
    return Reply(status, {"id": ident, "message": message, "request_id": str(uuid.uuid4())}, headers=headers)


def unprocessable(message: str) -> Reply:
    return error(422, "unprocessable_entity", message)


def _fingerprint(public_key: str) -> Optional[str]:
    parts = (public_key or "").split()
    if len(parts) < 2 or not parts[0].startswith(("ssh-", "ecdsa-")):
        return None
    try:
        blob = base64.b64decode(parts[1].encode("ascii"), validate=True)
    except (ValueError, UnicodeEncodeError):
        return None
    digest = hashlib.md5(blob).hexdigest()
    return ":".join(digest[i:i + 2] for i in range(0, 32, 2))


class DigitalOceanApiFake(MarketplaceFake):
    cloud = "digitalocean"

    def __init__(self, root: str, token: str = "fake-token", boot_polls: int = 2, droplet_limit: int = 25):
        self.sizes = [dict(s, regions=list(s["regions"])) for s in SIZES]
        self.droplet_limit = droplet_limit
        self.tag_name_lists_gpus = False
        self.droplets: Dict[int, Dict[str, Any]] = {}
        self.ssh_keys: Dict[int, Dict[str, Any]] = {}
        self.firewalls: Dict[str, Dict[str, Any]] = {}
        self.tags: Dict[str, Dict[str, Any]] = {}
        self._ids = itertools.count(310000001)
        self._key_ids = itertools.count(41000001)
        self._forwarders: Dict[int, PortForwarder] = {}
        self._next_address = 2
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        self.ssh_port = probe.getsockname()[1]   # every droplet's sshd port (on its own address)
        probe.close()
        super().__init__(root, token=token, boot_polls=boot_polls)
        self.api_url = self.url + P

    # -- auth and the vendor's error bodies ---------------------------------------------
    def auth_error(self, req) -> Reply:
        return error(401, "unauthorized", "Unable to authenticate you.")

    def not_found(self, req) -> Reply:
        return error(404, "not_found", "The resource you were accessing could not be found.")

    def bad_json(self, req, why: str) -> Reply:
        return error(400, "bad_request", "error parsing request body")

    # -- levers -----------------------------------------------------------------------
    def fail_capacity(self, key: str = "droplets.create") -> None:
        self.fail_next(key, unprocessable("Size is not available in this region."))

    def fail_quota(self, key: str = "droplets.create") -> None:
        self.fail_next(key, unprocessable("creating this/these droplet(s) will exceed your droplet limit"))

    def rate_limit(self, key: str, retry_after: Optional[int] = 1, times: int = 1, reset_in: int = 1) -> None:
        """A 429: the burst limit's (``retry-after``), or with ``retry_after=None`` the hourly limit's,
        which says only when the oldest request expires (``ratelimit-reset``, ``reset_in`` s ahead)."""
        headers = {"ratelimit-limit": "5000", "ratelimit-remaining": "0",
                   "ratelimit-reset": str(int(time.time()) + reset_in)}
        if retry_after is not None:
            headers["retry-after"] = str(retry_after)
        self.fail_next(key, error(429, "too_many_requests", "API Rate limit exceeded.", headers=headers), times=times)

    def server_error(self, key: str) -> None:
        self.fail_next(key, error(500, "server_error", "Unexpected server-side error"))

    def bad_auth(self, key: str) -> None:
        self.fail_next(key, self.auth_error(None))

    def invalid(self, key: str) -> None:
        self.fail_next(key, unprocessable("You specified an invalid size for Droplet creation."))

    def malformed(self, key: str) -> None:
        self.fail_next(key, Reply(200, raw="<html>upstream proxy</html>"))

    def sell_out(self, slug: Optional[str] = None) -> None:
        """No region can create the size (one, or every GPU size)."""
        with self.lock:
            for size in self.sizes:
                if (slug is None and size.get("gpu_info")) or size["slug"] == slug:
                    size["regions"] = []

    def live(self) -> List[Dict[str, Any]]:
        with self.lock:
            return [self._view(d) for d in self.droplets.values()]

    def resources(self) -> set:
        """Droplets, SSH keys, firewalls and the firewalls' tags (the identity tags a droplet made stay in
        a DigitalOcean account once it is gone, as free labels: not resources)."""
        with self.lock:
            return ({"droplet:%s" % i for i in self.droplets}
                    | {"ssh-key:%s" % k["name"] for k in self.ssh_keys.values()}
                    | {"firewall:%s" % f["name"] for f in self.firewalls.values()}
                    | {"tag:%s" % t for t in self.tags if t.startswith("gpuprov-firewall:")})

    def finish(self, droplet_id: Any) -> None:
        """Push a droplet to the end of its boot."""
        with self.lock:
            record = self.droplets.get(int(droplet_id))
            if record is not None:
                record["_reads"] = self.boot_polls
                self._advance(record)

    def stop(self) -> None:
        for forwarder in list(self._forwarders.values()):
            forwarder.close()
        super().stop()

    # -- pagination -------------------------------------------------------------------
    def _page(self, req, plural: str, items: List[Any], keep=()) -> Reply:
        try:
            per_page = min(max(int(req.arg("per_page", "20")), 1), 200)
            page = max(int(req.arg("page", "1")), 1)
        except ValueError:
            return error(400, "bad_request", "page and per_page must be integers")
        last = max((len(items) + per_page - 1) // per_page, 1)
        body: Dict[str, Any] = {plural: items[(page - 1) * per_page:page * per_page], "links": {},
                                "meta": {"total": len(items)}}

        def link(number: int) -> str:
            query = [(k, req.arg(k)) for k in keep if req.arg(k) is not None]
            return "%s%s?%s" % (self.url, req.path, urlencode(query + [("page", number), ("per_page", per_page)]))
        pages = {}
        if page > 1:
            pages.update(first=link(1), prev=link(page - 1))
        if self.ignore_paging:
            body[plural] = items[:per_page]
            pages.update(next=link(page + 1))
        elif page < last:
            pages.update(next=link(page + 1), last=link(last))
        if pages:
            body["links"]["pages"] = pages
        return Reply(200, body)

    # -- catalog ------------------------------------------------------------------------
    @route("GET", P + r"/sizes", key="sizes.list")
    def list_sizes(self, req) -> Reply:
        return self._page(req, "sizes", [dict(s) for s in self.sizes])

    @route("GET", P + r"/account", key="account.get")
    def account(self, req) -> Reply:
        return Reply(200, {"account": {"droplet_limit": self.droplet_limit, "email": "fake@example.com",
                                       "uuid": "b6fr89dbf6d9156cace5f3c78dc9851d957381ef", "status": "active",
                                       "email_verified": True, "floating_ip_limit": 3, "volume_limit": 100}})

    # -- lifecycle ---------------------------------------------------------------------
    def _advance(self, record: Dict[str, Any]) -> None:
        if record["status"] == "new" and self.tick(record):
            keys = [k["public_key"] for k in self.ssh_keys.values() if k["id"] in record["_key_ids"]]
            host, port, _user = self.sshd.start(str(record["id"]), keys)
            address = "127.0.0.%d" % self._next_address
            self._next_address += 1
            self._forwarders[record["id"]] = PortForwarder(address, self.ssh_port, (host, port))
            record["status"] = "active"
            record["networks"]["v4"].append({"ip_address": address, "netmask": "255.255.240.0",
                                             "gateway": "127.0.0.1", "type": "public"})

    def _gone(self, droplet_id: int) -> None:
        self.droplets.pop(droplet_id, None)
        forwarder = self._forwarders.pop(droplet_id, None)
        if forwarder:
            forwarder.close()
        self.sshd.stop(str(droplet_id))
        for firewall in self.firewalls.values():
            if droplet_id in firewall["droplet_ids"]:
                firewall["droplet_ids"].remove(droplet_id)

    def _view(self, record: Dict[str, Any]) -> Dict[str, Any]:
        view = self.public(record)
        view["networks"] = {"v4": [dict(n) for n in record["networks"]["v4"]], "v6": []}
        view["tags"] = list(record["tags"])
        return view

    # -- droplets -----------------------------------------------------------------------
    @route("GET", P + r"/droplets", key="droplets.list")
    def list_droplets(self, req) -> Reply:
        tag, name, kind = req.arg("tag_name"), req.arg("name"), req.arg("type")
        if tag is not None and (name is not None or kind is not None):
            return unprocessable("tag_name cannot be combined with name or type")
        if kind not in (None, "droplets", "gpus"):
            return unprocessable("type must be one of droplets, gpus")
        found = []
        for record in list(self.droplets.values()):
            if tag is not None:
                if tag not in record["tags"] or (record.get("gpu_info") and not self.tag_name_lists_gpus):
                    continue
            elif bool(record.get("gpu_info")) != (kind == "gpus"):
                continue
            if name is not None and record["name"].lower() != name.lower():
                continue
            self._advance(record)   # one read of each droplet listed
            found.append(self._view(record))
        return self._page(req, "droplets", found, keep=("tag_name", "name", "type"))

    @route("GET", P + r"/droplets/(?P<id>[^/]+)", key="droplets.get")
    def get_droplet(self, req) -> Reply:
        record = self.droplets.get(int(req.params["id"])) if req.params["id"].isdigit() else None
        if record is None:
            return self.not_found(req)
        self._advance(record)
        return Reply(200, {"droplet": self._view(record)})

    @route("DELETE", P + r"/droplets/(?P<id>[^/]+)", key="droplets.delete")
    def delete_droplet(self, req) -> Reply:
        droplet_id = int(req.params["id"]) if req.params["id"].isdigit() else None
        if droplet_id not in self.droplets:
            return self.not_found(req)
        self._gone(droplet_id)
        return Reply(204)

    def _create_problems(self, body: Dict[str, Any]) -> Optional[Reply]:
        problems = self.check_fields(body, CREATE_REQUIRED, CREATE_OPTIONAL)
        if problems:
            return unprocessable("; ".join(problems))
        if not isinstance(body["name"], str) or len(body["name"]) > 255 or not NAME_RE.match(body["name"]):
            return unprocessable("Name is invalid: only letters, numbers, '.' and '-' are allowed")
        tags = body.get("tags") or []
        if not isinstance(tags, list) or any(not isinstance(t, str) or not TAG_RE.match(t) for t in tags):
            return unprocessable("tag names may contain letters, numbers, colons, dashes and underscores, and "
                                 "have at most 255 characters")
        if len((body.get("user_data") or "").encode()) > USER_DATA_MAX:
            return unprocessable("user_data may not exceed 64 KiB")
        return None

    @route("POST", P + r"/droplets", key="droplets.create")
    def create_droplet(self, req) -> Reply:
        body = req.json
        refused = self._create_problems(body)
        if refused:
            return refused
        size = next((s for s in self.sizes if s["slug"] == body["size"]), None)
        if size is None:
            return unprocessable("You specified an invalid size for Droplet creation.")
        region = body.get("region")
        if region is not None and region not in REGIONS:
            return unprocessable("You specified an invalid region for Droplet creation.")
        if body["image"] not in IMAGES:
            return unprocessable("You specified an invalid image for Droplet creation.")
        known = {k["id"]: k for k in self.ssh_keys.values()}
        known.update({k["fingerprint"]: k for k in self.ssh_keys.values()})
        wrong = [str(k) for k in body.get("ssh_keys") or [] if k not in known]
        if wrong:
            return unprocessable("%s are invalid key identifiers for Droplet creation." % ", ".join(wrong))
        region = region or (size["regions"][0] if size["regions"] else "nyc1")
        if region not in size["regions"] or not size["available"]:
            return unprocessable("Size is not available in this region.")
        if len(self.droplets) >= self.droplet_limit:
            return unprocessable("creating this/these droplet(s) will exceed your droplet limit")
        droplet_id = next(self._ids)
        for tag in body.get("tags") or []:
            self.tags.setdefault(tag, {"name": tag})
        record = {
            "id": droplet_id, "name": body["name"], "memory": size["memory"], "vcpus": size["vcpus"],
            "disk": size["disk"], "disk_info": size["disk_info"], "locked": False, "status": "new",
            "kernel": None, "created_at": "2026-01-01T00:00:00Z", "features": ["droplet_agent"], "backup_ids": [],
            "next_backup_window": None, "snapshot_ids": [], "volume_ids": [],
            "image": {"slug": body["image"], "name": IMAGES[body["image"]], "distribution": "Ubuntu",
                      "public": True, "type": "base"},
            "size": dict(size), "size_slug": size["slug"],
            "networks": {"v4": [{"ip_address": "10.116.0.%d" % (droplet_id % 250 + 2), "netmask": "255.255.240.0",
                                 "gateway": None, "type": "private"}], "v6": []},
            "region": {"slug": region, "name": REGIONS[region], "available": True, "features": [],
                       "sizes": [s["slug"] for s in self.sizes if region in s["regions"]]},
            "tags": list(body.get("tags") or []), "vpc_uuid": str(uuid.uuid4()),
            "_key_ids": [known[k]["id"] for k in body.get("ssh_keys") or []], "_user_data": body.get("user_data"),
        }
        if size.get("gpu_info"):
            record["gpu_info"] = dict(size["gpu_info"])
        self.droplets[droplet_id] = record
        return Reply(202, {"droplet": self._view(record), "links": {"actions": [
            {"id": droplet_id + 7, "rel": "create", "href": "%s/actions/%d" % (self.api_url, droplet_id + 7)}]}})

    # -- ssh keys -----------------------------------------------------------------------
    @route("GET", P + r"/account/keys", key="ssh-keys.list")
    def list_keys(self, req) -> Reply:
        return self._page(req, "ssh_keys", [dict(k) for k in self.ssh_keys.values()])

    @route("POST", P + r"/account/keys", key="ssh-keys.create")
    def add_key(self, req) -> Reply:
        body = req.json
        problems = self.check_fields(body, ("name", "public_key"))
        if problems:
            return unprocessable("; ".join(problems))
        fingerprint = _fingerprint(body["public_key"])
        if fingerprint is None:
            return unprocessable("Key invalid, type not supported")
        if any(k["fingerprint"] == fingerprint for k in self.ssh_keys.values()):
            return unprocessable("SSH Key is already in use on your account")
        key = {"id": next(self._key_ids), "fingerprint": fingerprint, "public_key": body["public_key"],
               "name": body["name"]}
        self.ssh_keys[key["id"]] = key
        return Reply(201, {"ssh_key": dict(key)})

    @route("DELETE", P + r"/account/keys/(?P<id>[^/]+)", key="ssh-keys.delete")
    def delete_key(self, req) -> Reply:
        ident = req.params["id"]
        key = next((k for k in self.ssh_keys.values() if str(k["id"]) == ident or k["fingerprint"] == ident), None)
        if key is None:
            return self.not_found(req)
        del self.ssh_keys[key["id"]]
        return Reply(204)

    # -- tags ---------------------------------------------------------------------------
    @route("POST", P + r"/tags", key="tags.create")
    def create_tag(self, req) -> Reply:
        body = req.json
        problems = self.check_fields(body, ("name",))
        if problems:
            return unprocessable("; ".join(problems))
        if not isinstance(body["name"], str) or not TAG_RE.match(body["name"]):
            cause = 'Error validating resource tag: "tag-name \\"%s\\" contains invalid characters"' % body["name"]
            return Reply(400, {"error": cause, "messages": None,
                               "root_causes": ["rpc error: code = InvalidArgument desc = " + cause]})
        self.tags.setdefault(body["name"], {"name": body["name"]})
        return Reply(201, {"tag": self._tag_view(body["name"])})

    @route("GET", P + r"/tags", key="tags.list")
    def list_tags(self, req) -> Reply:
        return self._page(req, "tags", [self._tag_view(name) for name in sorted(self.tags)])

    @route("GET", P + r"/tags/(?P<name>[^/]+)", key="tags.get")
    def get_tag(self, req) -> Reply:
        if req.params["name"] not in self.tags:
            return self.not_found(req)
        return Reply(200, {"tag": self._tag_view(req.params["name"])})

    @route("DELETE", P + r"/tags/(?P<name>[^/]+)", key="tags.delete")
    def delete_tag(self, req) -> Reply:
        name = req.params["name"]
        if name not in self.tags:
            return self.not_found(req)
        del self.tags[name]
        for record in self.droplets.values():   # deleting a tag untags whatever carries it
            if name in record["tags"]:
                record["tags"].remove(name)
        for firewall in self.firewalls.values():
            if name in firewall["tags"]:
                firewall["tags"].remove(name)
        return Reply(204)

    def _tagged(self, req) -> Tuple[Optional[Reply], List[Dict[str, Any]]]:
        """The droplets a ``/tags/{tag}/resources`` body names, or the refusal: the tag must exist (404), the
        body holds ``resources`` of ``{resource_id (string), resource_type}``; only droplets exist here."""
        if req.params["name"] not in self.tags:
            return self.not_found(req), []
        body = req.json
        problems = self.check_fields(body, ("resources",))
        if problems or not isinstance(body["resources"], list) or not body["resources"]:
            return unprocessable("; ".join(problems) or "resources must be a non-empty array"), []
        found = []
        for item in body["resources"]:
            if not isinstance(item, dict) or item.get("resource_type") not in RESOURCE_TYPES \
                    or not isinstance(item.get("resource_id"), str):
                return unprocessable("resources: each needs a resource_id string and a resource_type of %s"
                                     % ", ".join(RESOURCE_TYPES)), []
            record = self.droplets.get(int(item["resource_id"])) if item["resource_id"].isdigit() else None
            if item["resource_type"] != "droplet" or record is None:
                return self.not_found(req), []
            found.append(record)
        return None, found

    @route("POST", P + r"/tags/(?P<name>[^/]+)/resources", key="tags.tag-resources")
    def tag_resources(self, req) -> Reply:
        refused, droplets = self._tagged(req)
        if refused:
            return refused
        for record in droplets:
            if req.params["name"] not in record["tags"]:
                record["tags"].append(req.params["name"])
        return Reply(204)

    @route("DELETE", P + r"/tags/(?P<name>[^/]+)/resources", key="tags.untag-resources")
    def untag_resources(self, req) -> Reply:
        refused, droplets = self._tagged(req)
        if refused:
            return refused
        for record in droplets:
            if req.params["name"] in record["tags"]:
                record["tags"].remove(req.params["name"])
        return Reply(204)

    def _tag_view(self, name: str) -> Dict[str, Any]:
        tagged = [d for d in self.droplets.values() if name in d["tags"]]
        return {"name": name, "resources": {"count": len(tagged), "droplets": {"count": len(tagged)},
                                            "images": {"count": 0}, "volumes": {"count": 0},
                                            "volume_snapshots": {"count": 0}, "databases": {"count": 0}}}

    # -- firewalls ----------------------------------------------------------------------
    def _firewall_problems(self, body: Any) -> Optional[Reply]:
        problems = self.check_fields(body, ("name",), FIREWALL_FIELDS[1:])
        if problems:
            return error(400, "bad_request", "; ".join(problems))
        if not isinstance(body["name"], str) or not FIREWALL_NAME_RE.match(body["name"]):
            return unprocessable("name must begin with a letter or digit, followed by letters, digits, '.' or '-'")
        if not body.get("inbound_rules") and not body.get("outbound_rules"):
            return unprocessable("must specify at least one inbound or outbound rule")
        for side, target in (("inbound_rules", "sources"), ("outbound_rules", "destinations")):
            for rule in body.get(side) or []:
                problems = self.check_fields(rule, ("protocol", target), ("ports",))
                if problems:
                    return error(400, "bad_request", "%s: %s" % (side, "; ".join(problems)))
                if rule["protocol"] not in ("tcp", "udp", "icmp"):
                    return unprocessable("protocol must be one of tcp, udp, icmp")
                if rule["protocol"] != "icmp" and not re.match(r"^(\d+(-\d+)?|all|0)$", str(rule.get("ports"))):
                    return unprocessable("ports must be a port, a range or 0")
                problems = self.check_fields(rule[target], (), TARGET_FIELDS)
                if problems:
                    return error(400, "bad_request", "%s.%s: %s" % (side, target, "; ".join(problems)))
        missing = [t for t in body.get("tags") or [] if t not in self.tags]
        if missing:
            return unprocessable("tag(s) %s not found" % ", ".join(missing))
        return None

    def _firewall_view(self, firewall: Dict[str, Any]) -> Dict[str, Any]:
        view = dict(firewall)
        view["droplet_ids"] = list(firewall["droplet_ids"])
        view["tags"] = list(firewall["tags"])
        return view

    @route("GET", P + r"/firewalls", key="firewalls.list")
    def list_firewalls(self, req) -> Reply:
        return self._page(req, "firewalls", [self._firewall_view(f) for f in self.firewalls.values()])

    @route("POST", P + r"/firewalls", key="firewalls.create")
    def create_firewall(self, req) -> Reply:
        body = req.json
        refused = self._firewall_problems(body)
        if refused:
            return refused
        firewall = {"id": str(uuid.uuid4()), "status": "succeeded", "created_at": "2026-01-01T00:00:00Z",
                    "pending_changes": [], "name": body["name"], "inbound_rules": list(body.get("inbound_rules") or []),
                    "outbound_rules": list(body.get("outbound_rules") or []),
                    "droplet_ids": list(body.get("droplet_ids") or []), "tags": list(body.get("tags") or [])}
        self.firewalls[firewall["id"]] = firewall
        return Reply(202, {"firewall": self._firewall_view(firewall)})

    @route("GET", P + r"/firewalls/(?P<id>[^/]+)", key="firewalls.get")
    def get_firewall(self, req) -> Reply:
        firewall = self.firewalls.get(req.params["id"])
        return Reply(200, {"firewall": self._firewall_view(firewall)}) if firewall else self.not_found(req)

    @route("PUT", P + r"/firewalls/(?P<id>[^/]+)", key="firewalls.update")
    def update_firewall(self, req) -> Reply:
        firewall = self.firewalls.get(req.params["id"])
        if firewall is None:
            return self.not_found(req)
        body = req.json
        refused = self._firewall_problems(body)
        if refused:
            return refused
        # PUT replaces the firewall: what is not given is reset
        firewall.update(name=body["name"], inbound_rules=list(body.get("inbound_rules") or []),
                        outbound_rules=list(body.get("outbound_rules") or []),
                        droplet_ids=list(body.get("droplet_ids") or []), tags=list(body.get("tags") or []))
        return Reply(200, {"firewall": self._firewall_view(firewall)})

    @route("DELETE", P + r"/firewalls/(?P<id>[^/]+)", key="firewalls.delete")
    def delete_firewall(self, req) -> Reply:
        if self.firewalls.pop(req.params["id"], None) is None:
            return self.not_found(req)
        return Reply(204)

    def firewall_of(self, droplet_id: Any) -> List[Dict[str, Any]]:
        """The firewalls that apply to a droplet (by id or by one of its tags)."""
        with self.lock:
            record = self.droplets.get(int(droplet_id))
            if record is None:
                return []
            return [self._firewall_view(f) for f in self.firewalls.values()
                    if record["id"] in f["droplet_ids"] or set(f["tags"]) & set(record["tags"])]
