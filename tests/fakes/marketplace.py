"""The base of the marketplace clouds' API fakes (Lambda, RunPod, Prime Intellect, Verda...).

Each fake is a real HTTP server on a loopback port that answers the vendor's documented
paths with the vendor's documented shapes, so the adapters' own ``requests`` code runs
unchanged. A subclass declares its routes with :func:`route`, checks auth the vendor's
way and answers errors with the vendor's error bodies; this base provides the server,
routing, one lock around all state, fault injection per route, a call log, field checks,
boot pacing and a real ``sshd`` behind every running instance (the ``local`` cloud's
machinery), so a launch through ``ansible-playbook`` logs in for real.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple
from urllib.parse import parse_qs, urlsplit

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    InstanceSpec, Location, Offer,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.local import LocalProvider


class BadJson(ValueError):
    """The request body is not the JSON the route expects."""


class Reply:
    """One HTTP answer: ``body`` is sent as JSON, ``raw`` as-is (text/plain unless a
    Content-Type header says otherwise)."""

    def __init__(self, status: int = 200, body: Any = None, headers: Optional[Dict[str, str]] = None,
                 raw: Any = None):
        self.status = status
        self.body = body
        self.headers = dict(headers or {})
        self.raw = raw

    def encode(self) -> Tuple[bytes, Dict[str, str]]:
        headers = dict(self.headers)
        if self.raw is not None:
            data = self.raw.encode() if isinstance(self.raw, str) else bytes(self.raw)
            headers.setdefault("Content-Type", "text/plain; charset=utf-8")
        elif self.body is None:
            data = b""
        else:
            data = json.dumps(self.body).encode()
            headers.setdefault("Content-Type", "application/json")
        return data, headers

    def __repr__(self) -> str:
        return "Reply(%d, %r)" % (self.status, self.body if self.raw is None else self.raw)


class Request:
    """What a handler sees: ``params`` are the route's named groups, ``query`` a dict of
    lists, ``headers`` as sent (case-insensitive lookups), ``json`` the parsed body."""

    def __init__(self, method: str, path: str, query: Dict[str, List[str]], headers: Any, body: bytes,
                 params: Dict[str, str]):
        self.method, self.path, self.query, self.headers, self.body = method, path, query, headers, body
        self.params = params

    @property
    def json(self) -> Any:
        if not self.body:
            return None
        try:
            return json.loads(self.body.decode())
        except (UnicodeDecodeError, ValueError) as exc:
            raise BadJson(str(exc)) from exc

    def arg(self, name: str, default: Optional[str] = None) -> Optional[str]:
        """The first value of a query parameter."""
        values = self.query.get(name)
        return values[0] if values else default


def route(method: str, pattern: str, key: str) -> Callable:
    """Declare a handler for ``method`` on paths matching ``pattern`` (anchored), under
    the call key ``key`` (used by fail_next and calls_of)."""
    def mark(fn: Callable) -> Callable:
        fn._route = (method.upper(), re.compile("^%s$" % pattern), key)
        return fn
    return mark


class SshdPool:
    """Real sshd processes standing in for instances: one per instance id, each on its own
    127.0.0.1 port, authorising the given public keys for the current user."""

    def __init__(self, root: str):
        self.provider = LocalProvider({"root": root})
        self.running: Dict[str, Tuple[str, str]] = {}   # fake instance id -> (local vm name, local id)
        self._lock = threading.Lock()

    @staticmethod
    def _vm_name(instance_id: str) -> str:
        # A DNS label for the local cloud, stable per instance id.
        return "mk-" + hashlib.sha256(instance_id.encode()).hexdigest()[:16]

    def start(self, instance_id: str, public_keys: Iterable[str]) -> Tuple[str, int, str]:
        """Start (once) the sshd of ``instance_id``; return (host, port, user)."""
        with self._lock:
            if instance_id not in self.running:
                vm = self._vm_name(instance_id)
                keys = "\n".join(k.strip() for k in public_keys if k and k.strip()) or "# no key registered"
                spec = InstanceSpec(vm_name=vm, ssh_public_key=keys)
                offer = Offer(cloud="local", region="local", instance_type="sshd")
                self.provider.prepare(offer, spec)
                self.running[instance_id] = (vm, self.provider.create(offer, {}, spec))
            return self.endpoint(instance_id)

    def endpoint(self, instance_id: str) -> Tuple[str, int, str]:
        vm, local_id = self.running[instance_id]
        for seen in self.provider.observe(Location("local", "local"), vm):
            if seen.instance_id == local_id and seen.endpoint:
                return seen.endpoint.host, seen.endpoint.port, seen.endpoint.user
        raise RuntimeError("the sshd of fake instance %s is not running" % instance_id)

    def stop(self, instance_id: str) -> None:
        with self._lock:
            found = self.running.pop(instance_id, None)
        if found:
            vm, local_id = found
            self.provider.delete(Location("local", "local"), vm, [local_id])

    def stop_all(self) -> None:
        for instance_id in list(self.running):
            self.stop(instance_id)


class PortForwarder:
    """TCP from (address, port) to an sshd elsewhere on loopback, for as long as it runs.

    Clouds that report only an IP (Lambda, Verda) log in on one fixed port: each fake
    instance gets its own 127.0.0.N on the fake's one port, forwarded to its real sshd.
    A connection made before that sshd listens is closed (as a booting VM's port is), and
    the next one is tried afresh."""

    def __init__(self, address: str, port: int, target: Tuple[str, int]):
        self.target = target
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind((address, port))
        self.listener.listen(16)
        self.open: List[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        for _conn in iter(int, 1):  # until the listener is closed
            try:
                client, _peer = self.listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=10)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            self.open += [client, upstream]
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(src, dst), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            for chunk in iter(lambda: src.recv(65536), b""):
                dst.sendall(chunk)
        except OSError:
            pass
        for end in (src, dst):
            try:
                end.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self) -> None:
        try:
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept()
        except OSError:
            pass
        for sock in [self.listener] + self.open:
            try:
                sock.close()
            except OSError:
                pass


class MarketplaceFake:
    """A vendor API on a loopback port. Subclasses set ``cloud``, override ``authorized``
    and ``auth_error`` (and ``not_found`` / ``bad_json`` for the vendor's bodies), and
    declare routes with :func:`route`.

    ``ignore_paging``: the server ignores the paging query of its paged listings (issue 24):
    each fake with one answers every page asked as its first page, with the listing's total
    where the vendor reports one; each says how it still signals a next page."""

    cloud = "marketplace"
    ignore_paging = False
    # Boot pacing by time instead of by reads (None: by reads): a record advances on the first read made
    # ``boot_after_s`` seconds or more after its first read. A listing reads every record it lists, so pacing by
    # reads boots a fleet's VMs after fewer polls each than one VM alone; by time it does not (bench/api_calls.py).
    boot_after_s: Optional[float] = None

    def __init__(self, root: str, token: str = "fake-token", boot_polls: int = 2):
        self.root = root
        self.token = token
        self.boot_polls = boot_polls
        self.lock = threading.RLock()
        self.calls: List[Tuple[str, str, str, Dict[str, List[str]], Any]] = []
        self.faults: Dict[str, List[Reply]] = {}
        self.sshd = SshdPool(os.path.join(root, "sshd"))
        # Routes in declaration order (base classes first): the first whose pattern matches wins.
        self._routes = []
        for cls in reversed(type(self).__mro__):
            for name, member in vars(cls).items():
                if hasattr(member, "_route"):
                    self._routes.append(member._route + (getattr(self, name),))
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet: pytest shows the fake's calls on failure
                pass

            def _serve(self):
                fake._serve(self)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, name="%s-fake" % self.cloud, daemon=True)
        self._thread.start()

    # -- what subclasses override ------------------------------------------------------
    def authorized(self, req: Request) -> bool:
        return req.headers.get("Authorization") == "Bearer %s" % self.token

    def auth_error(self, req: Request) -> Reply:
        return Reply(401, {"error": "unauthorized"})

    def not_found(self, req: Request) -> Reply:
        return Reply(404, {"error": "no route for %s %s" % (req.method, req.path)})

    def bad_json(self, req: Request, why: str) -> Reply:
        return Reply(400, {"error": "the body is not JSON: %s" % why})

    def public_route(self, req: Request, key: str) -> bool:
        """Routes served without the API key (an OAuth token endpoint)."""
        return False

    # -- levers for tests --------------------------------------------------------------
    def fail_next(self, key: str, reply: Reply, times: int = 1) -> None:
        """The next ``times`` calls of route ``key`` answer ``reply``; the handler does not run."""
        with self.lock:
            self.faults.setdefault(key, []).extend([reply] * times)

    def clear_faults(self) -> None:
        with self.lock:
            self.faults.clear()

    def calls_of(self, key: str) -> List[Tuple[str, str, str, Dict[str, List[str]], Any]]:
        with self.lock:
            return [call for call in self.calls if call[0] == key]

    def tick(self, record: Dict[str, Any]) -> bool:
        """Count one read of ``record``; True once it has been read ``boot_polls`` times (or, with ``boot_after_s``
        set, once that many seconds have passed since its first read; a subclass's ``finish`` then pushes nothing)."""
        record["_reads"] = record.get("_reads", 0) + 1
        if self.boot_after_s is not None:
            first = record.setdefault("_first_read", time.monotonic())
            return time.monotonic() - first >= self.boot_after_s
        return record["_reads"] >= self.boot_polls

    @staticmethod
    def public(record: Dict[str, Any]) -> Dict[str, Any]:
        """``record`` without the fake's private (``_``-prefixed) keys."""
        return {k: v for k, v in record.items() if not k.startswith("_")}

    @staticmethod
    def check_fields(body: Any, required: Iterable[str] = (), optional: Iterable[str] = ()) -> List[str]:
        """Problems with a JSON object body: missing required and unknown fields."""
        if not isinstance(body, dict):
            return ["the body must be a JSON object"]
        required, known = list(required), set(required) | set(optional)
        problems = ["missing field '%s'" % name for name in required if body.get(name) is None]
        problems += ["unknown field '%s'" % name for name in sorted(body) if name not in known]
        return problems

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.sshd.stop_all()

    # -- the server --------------------------------------------------------------------
    def _match(self, method: str, path: str):
        for verb, pattern, key, handler in self._routes:
            found = pattern.match(path) if verb == method else None
            if found:
                return key, handler, found.groupdict()
        return None, None, {}

    def _serve(self, http: BaseHTTPRequestHandler) -> None:
        parts = urlsplit(http.path)
        length = int(http.headers.get("Content-Length") or 0)
        body = http.rfile.read(length) if length else b""
        key, handler, params = self._match(http.command, parts.path)
        req = Request(http.command, parts.path, parse_qs(parts.query, keep_blank_values=True), http.headers,
                      body, params)
        with self.lock:
            try:
                parsed = req.json
            except BadJson:
                parsed = body.decode(errors="replace")
            self.calls.append((key or "", req.method, req.path, req.query, parsed))
            if handler is None:
                reply = self.not_found(req)
            elif not self.public_route(req, key) and not self.authorized(req):
                reply = self.auth_error(req)
            elif self.faults.get(key):
                reply = self.faults[key].pop(0)
            else:
                try:
                    reply = handler(req)
                except BadJson as exc:
                    reply = self.bad_json(req, str(exc))
        data, headers = reply.encode()
        http.send_response(reply.status)
        for name, value in headers.items():
            http.send_header(name, value)
        http.send_header("Content-Length", str(len(data)))
        http.end_headers()
        if http.command != "HEAD":
            http.wfile.write(data)
