# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Validation of a k3s cluster through the access path the user will use: the API
reached with the written kubeconfig (directly, or through an SSH forward), node
Ready, CoreDNS available, ``nvidia.com/gpu`` allocatable where a GPU is expected
(and, while it is not, what the NVIDIA device plugin's pod is doing and the error
it logged), and the API certificate's SANs covering the public host.

The checks on API objects are pure functions (unit-tested); ``ApiClient`` is a
small TLS client with the kubeconfig's CA and client certificate (standard
library only)."""

from __future__ import annotations

import base64
import contextlib
import http.client
import ipaddress
import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import tempfile
import time
from typing import Any, Dict, Iterable, List, Optional, Tuple
from urllib.parse import quote, urlparse


# --- pure checks -----------------------------------------------------------------------

def node_ready(nodes: Dict[str, Any]) -> Tuple[bool, str]:
    items = (nodes or {}).get("items") or []
    if not items:
        return False, "no nodes registered yet"
    not_ready = []
    for node in items:
        conditions = {c.get("type"): c for c in (node.get("status") or {}).get("conditions") or []}
        if (conditions.get("Ready") or {}).get("status") != "True":
            not_ready.append("%s (%s)" % (node["metadata"]["name"], (conditions.get("Ready") or {}).get("reason")
                                          or "no Ready condition"))
    if not_ready:
        return False, "node not Ready: %s" % ", ".join(not_ready)
    return True, "%d node(s) Ready" % len(items)


def coredns_available(deployment: Optional[Dict[str, Any]], pods: Optional[Dict[str, Any]]) -> Tuple[bool, str]:
    """The coredns deployment reports an available replica, or (without a deployment)
    a kube-dns pod is Running and Ready."""
    if deployment:
        status = deployment.get("status") or {}
        conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
        if (status.get("availableReplicas") or 0) >= 1 or conditions.get("Available") == "True":
            return True, "CoreDNS available (%s replica(s))" % (status.get("availableReplicas") or 1)
    for pod in (pods or {}).get("items") or []:
        labels = (pod.get("metadata") or {}).get("labels") or {}
        if labels.get("k8s-app") != "kube-dns":
            continue
        status = pod.get("status") or {}
        conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
        if status.get("phase") == "Running" and conditions.get("Ready") == "True":
            return True, "CoreDNS pod %s Ready" % pod["metadata"].get("name")
    return False, "CoreDNS not available yet"


def gpu_allocatable(nodes: Dict[str, Any]) -> Tuple[int, str]:
    total = 0
    for node in (nodes or {}).get("items") or []:
        value = ((node.get("status") or {}).get("allocatable") or {}).get("nvidia.com/gpu")
        try:
            total += int(value or 0)
        except (TypeError, ValueError):
            pass
    return total, "nvidia.com/gpu allocatable: %d" % total


# --- the NVIDIA device plugin, when no GPU is allocatable -----------------------------

# What the installer deploys on GPU VMs (the manifest in roles/k3s/files/k3s-install.sh, NVIDIA's static one).
PLUGIN_NAMESPACE = "kube-system"
PLUGIN_DAEMONSET = "nvidia-device-plugin-daemonset"
PLUGIN_POD_SELECTOR = "name=nvidia-device-plugin-ds"
PLUGIN_CONTAINER = "nvidia-device-plugin-ctr"
# klog's line header: Lmmdd hh:mm:ss.uuuuuu threadid file:line] msg (L: I, W, E or F)
KLOG_LINE = re.compile(r"^([IWEF])\d{4} \d{2}:\d{2}:\d{2}\.\d+\s+\d+\s+[^\]]*\]\s?(.*)$")
ERROR_WORDS = re.compile(r"(?i)\berror\b|\bfail")


def log_errors(text: Optional[str]) -> List[str]:
    """The errors a device plugin log reports: the messages of its klog E and F lines; for a log without
    klog headers, the lines that say error or fail."""
    errors, plain = [], []
    for line in (text or "").splitlines():
        line = line.strip()
        if not line:
            continue
        found = KLOG_LINE.match(line)
        if found:
            if found.group(1) in ("E", "F") and found.group(2).strip():
                errors.append(found.group(2).strip())
        elif ERROR_WORDS.search(line):
            plain.append(line)
    return errors or plain


def _clip(message: str, width: int = 120) -> str:
    """A long error, by its end: Go wraps causes as "outer: inner: cause", so the end says why."""
    return message if len(message) <= width else "..." + message[-(width - 3):]


def _container_words(pod: Dict[str, Any]) -> str:
    status = pod.get("status") or {}
    statuses = status.get("containerStatuses") or []
    mine = next((c for c in statuses if c.get("name") == PLUGIN_CONTAINER), statuses[0] if statuses else None)
    if mine is None:
        return (status.get("phase") or "Pending") + (", %s" % status["reason"] if status.get("reason") else "")
    state = mine.get("state") or {}
    if "waiting" in state:
        words = (state["waiting"] or {}).get("reason") or "waiting"
    elif "terminated" in state:
        words = "terminated (%s)" % ((state["terminated"] or {}).get("reason") or "exit %s"
                                     % (state["terminated"] or {}).get("exitCode"))
    elif mine.get("ready"):
        words = "Running"
    else:
        words = "Running, not ready"
    restarts = mine.get("restartCount") or 0
    if restarts:
        words += ", %d restart%s" % (restarts, "" if restarts == 1 else "s")
    last = (mine.get("lastState") or {}).get("terminated") or {}
    if last.get("exitCode") is not None:
        words += ", last exit code %s" % last["exitCode"]
    return words


def device_plugin_reason(daemonset: Optional[Dict[str, Any]], pods: List[Dict[str, Any]],
                         logs: Dict[str, str]) -> str:
    """Why the NVIDIA device plugin serves no GPU, from its DaemonSet (None when there is none), its pods
    and their logs (pod name -> text)."""
    if daemonset is None:
        return ("no NVIDIA device plugin: %s has no DaemonSet %s (the installer deploys it when it configures the "
                "GPU: k3s_gpu auto on a VM with a GPU, or true)" % (PLUGIN_NAMESPACE, PLUGIN_DAEMONSET))
    if not pods:
        template = ((daemonset.get("spec") or {}).get("template") or {}).get("spec") or {}
        selector = ", ".join("%s=%s" % kv for kv in sorted((template.get("nodeSelector") or {}).items()))
        desired = (daemonset.get("status") or {}).get("desiredNumberScheduled")
        return ("the NVIDIA device plugin DaemonSet %s/%s has no pod (%s scheduled%s)"
                % (PLUGIN_NAMESPACE, PLUGIN_DAEMONSET, desired if desired is not None else "none",
                   "; its nodeSelector %s matches no node" % selector if selector else ""))
    parts = []
    for pod in pods[:3]:
        name = (pod.get("metadata") or {}).get("name") or "?"
        part = "device plugin pod %s: %s" % (name, _container_words(pod))
        if name in logs:
            errors = log_errors(logs[name])
            if errors:
                logged = [errors[0]] if len(errors) == 1 or errors[0] == errors[-1] else [errors[0], errors[-1]]
                part += "; it logged: %s" % " ... ".join("'%s'" % _clip(e) for e in logged)
            else:
                part += "; its log has no error"
        parts.append(part)
    return "; ".join(parts)


def device_plugin_diagnosis(client: "ApiClient") -> str:
    """``device_plugin_reason`` from the API: the DaemonSet, its pods and each pod's log (the previous
    container's when the current one has none, as after a crash)."""
    try:
        daemonset = client.get_json("/apis/apps/v1/namespaces/%s/daemonsets/%s" % (PLUGIN_NAMESPACE, PLUGIN_DAEMONSET),
                                    allow_missing=True)
        listed = client.get_json("/api/v1/namespaces/%s/pods?labelSelector=%s"
                                 % (PLUGIN_NAMESPACE, quote(PLUGIN_POD_SELECTOR, safe="")))
        pods = [p for p in (listed or {}).get("items") or [] if isinstance(p, dict)]
        logs = {}
        for pod in pods[:3]:
            name = (pod.get("metadata") or {}).get("name")
            if not name:
                continue
            path = "/api/v1/namespaces/%s/pods/%s/log?container=%s&tailLines=50" % (
                PLUGIN_NAMESPACE, quote(name, safe=""), PLUGIN_CONTAINER)
            status, body = client.get(path)
            text = body if isinstance(body, str) else (json.dumps(body) if status == 200 else "")
            if status != 200 or not text.strip():
                status, body = client.get(path + "&previous=true")
                text = body if isinstance(body, str) else (json.dumps(body) if status == 200 else "")
            if status == 200:
                logs[name] = text
    except ApiError as exc:
        return "the NVIDIA device plugin could not be inspected: %s" % exc
    return device_plugin_reason(daemonset, pods, logs)


def _normal_ip(value: str):
    try:
        return ipaddress.ip_address(value.strip("[]"))
    except ValueError:
        return None


def san_covers(sans: Iterable[Tuple[str, str]], host: str) -> bool:
    """Whether a certificate's subjectAltName entries (as ``ssl.getpeercert()`` gives them)
    cover ``host`` (an IP address or a DNS name; ``*.`` wildcards cover one label)."""
    ip = _normal_ip(host)
    for kind, value in sans:
        if ip is not None:
            if kind == "IP Address" and _normal_ip(value) == ip:
                return True
            continue
        if kind != "DNS":
            continue
        want, have = host.lower().rstrip("."), value.lower().rstrip(".")
        if want == have:
            return True
        if have.startswith("*.") and "." in want and want.split(".", 1)[1] == have[2:]:
            return True
    return False


def missing_sans(sans: Iterable[Tuple[str, str]], hosts: Iterable[str]) -> List[str]:
    sans = list(sans)
    return [h for h in hosts if h and not san_covers(sans, h)]


# --- the TLS client --------------------------------------------------------------------

class ApiError(Exception):
    """The API could not be reached or answered unexpectedly."""


class ApiClient:
    """GET requests to a k3s API with the kubeconfig's CA and client certificate.

    ``connect_to`` (host, port) overrides where the TCP connection goes (an SSH
    forward) while TLS still verifies the kubeconfig server's host name."""

    def __init__(self, kubeconfig: Dict[str, Any], context: Optional[str] = None,
                 connect_to: Optional[Tuple[str, int]] = None, timeout: float = 10.0):
        name = context or kubeconfig.get("current-context")
        ctx = next((c["context"] for c in kubeconfig.get("contexts") or [] if c.get("name") == name), None)
        if ctx is None:
            raise ApiError("kubeconfig has no context %r" % name)
        cluster = next(c["cluster"] for c in kubeconfig["clusters"] if c["name"] == ctx["cluster"])
        user = next(u["user"] for u in kubeconfig["users"] if u["name"] == ctx["user"])
        url = urlparse(cluster["server"])
        self.server = cluster["server"]
        self.host = url.hostname
        self.port = url.port or 443
        self.connect_to = connect_to or (self.host, self.port)
        self.timeout = timeout
        self._dir = tempfile.mkdtemp(prefix="gpuprov-k3s-validate-")
        os.chmod(self._dir, 0o700)
        self.context = ssl.create_default_context(cadata=base64.b64decode(
            cluster["certificate-authority-data"]).decode())
        if user.get("client-certificate-data"):
            cert = os.path.join(self._dir, "client.crt")
            key = os.path.join(self._dir, "client.key")
            for path, field in ((cert, "client-certificate-data"), (key, "client-key-data")):
                with open(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600), "wb") as handle:
                    handle.write(base64.b64decode(user[field]))
            self.context.load_cert_chain(cert, key)
        self.token = user.get("token")
        self.peer_sans: List[Tuple[str, str]] = []

    def close(self) -> None:
        shutil.rmtree(self._dir, ignore_errors=True)

    def get(self, path: str) -> Tuple[int, Any]:
        try:
            sock = socket.create_connection(self.connect_to, timeout=self.timeout)
        except OSError as exc:
            host, port = self.connect_to
            raise ApiError("cannot connect to %s:%d: %s" % (host, port, exc.strerror or exc)) from exc
        try:
            try:
                tls = self.context.wrap_socket(sock, server_hostname=self.host)
            except ssl.SSLCertVerificationError as exc:
                raise ApiError("TLS verification of %s failed: %s" % (self.server, exc.verify_message or exc)) from exc
            except (ssl.SSLError, OSError) as exc:
                raise ApiError("TLS handshake with %s failed: %s" % (self.server, exc)) from exc
            self.peer_sans = list((tls.getpeercert() or {}).get("subjectAltName") or [])
            conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
            conn.sock = tls
            headers = {"Accept": "application/json", "Host": "%s:%d" % (self.host, self.port)}
            if self.token:
                headers["Authorization"] = "Bearer %s" % self.token
            try:
                conn.request("GET", path, headers=headers)
                response = conn.getresponse()
                body = response.read()
            except (http.client.HTTPException, OSError) as exc:
                raise ApiError("GET %s via %s: %s" % (path, self.server, exc)) from exc
            finally:
                conn.close()
        finally:
            sock.close()
        text = body.decode("utf-8", "replace")
        try:
            return response.status, json.loads(text)
        except ValueError:
            return response.status, text

    def get_json(self, path: str, allow_missing: bool = False) -> Optional[Dict[str, Any]]:
        status, body = self.get(path)
        if status == 404 and allow_missing:
            return None
        if status != 200 or not isinstance(body, dict):
            raise ApiError("GET %s: HTTP %d %s" % (path, status, str(body)[:200]))
        return body


def server_certificate_sans(host: str, port: int, server_name: str, timeout: float = 10.0) -> List[Tuple[str, str]]:
    """The SANs of the certificate served at host:port (not verified: for reporting)."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with socket.create_connection((host, port), timeout=timeout) as sock:
        with context.wrap_socket(sock, server_hostname=server_name) as tls:
            der = tls.getpeercert(binary_form=True)
    try:
        from cryptography import x509
    except ImportError:
        return []
    cert = x509.load_der_x509_certificate(der)
    try:
        ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return []
    return ([("DNS", v) for v in ext.get_values_for_type(x509.DNSName)]
            + [("IP Address", str(v)) for v in ext.get_values_for_type(x509.IPAddress)])


# --- SSH forward -----------------------------------------------------------------------

def free_port() -> int:
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class SshForward:
    """``ssh -N -L 127.0.0.1:<local>:127.0.0.1:<remote> <name>`` with the collection's
    ssh config (pinned host key via HostKeyAlias), up until ``close()``."""

    def __init__(self, ssh_config: str, name: str, remote_port: int = 6443, local_port: int = 0,
                 timeout: float = 30.0, ssh: str = "ssh"):
        self.local_port = local_port or free_port()
        self.command = [ssh, "-F", ssh_config, "-N", "-o", "BatchMode=yes", "-o", "ExitOnForwardFailure=yes",
                        "-o", "ServerAliveInterval=15", "-L",
                        "127.0.0.1:%d:127.0.0.1:%d" % (self.local_port, remote_port), name]
        self.timeout = timeout
        self.proc: Optional[subprocess.Popen] = None

    def open(self) -> int:
        self.proc = subprocess.Popen(self.command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE)
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                err = self.proc.stderr.read().decode("utf-8", "replace").strip() if self.proc.stderr else ""
                what = " ".join(self.command[-3:])
                raise ApiError("the SSH forward (%s) exited with %s: %s" % (what, self.proc.returncode, err))
            try:
                socket.create_connection(("127.0.0.1", self.local_port), timeout=1).close()
                return self.local_port
            except OSError:
                time.sleep(0.2)
        self.close()
        raise ApiError("the SSH forward to 127.0.0.1:%d did not come up within %.0f s" % (self.local_port, self.timeout))

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc is not None and self.proc.stderr:
            self.proc.stderr.close()
        self.proc = None

    def __enter__(self) -> "SshForward":
        self.open()
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# --- the whole validation --------------------------------------------------------------

def validate_once(client: ApiClient, gpu_expected: bool, hosts: List[str]) -> Dict[str, Any]:
    """One pass of every check; ``ok`` when all pass. Raises ApiError when the API cannot be reached."""
    checks: Dict[str, Dict[str, Any]] = {}
    status, body = client.get("/readyz")
    checks["api"] = {"ok": status == 200, "detail": "readyz HTTP %d via %s" % (status, client.server)}
    missing = missing_sans(client.peer_sans, hosts)
    checks["san"] = {"ok": not missing, "detail": ("certificate covers %s" % ", ".join(hosts)) if not missing
                     else "certificate does not cover %s" % ", ".join(missing)}
    nodes = client.get_json("/api/v1/nodes")
    ok, detail = node_ready(nodes)
    checks["node_ready"] = {"ok": ok, "detail": detail}
    deployment = client.get_json("/apis/apps/v1/namespaces/kube-system/deployments/coredns", allow_missing=True)
    pods = None
    if deployment is None:
        pods = client.get_json("/api/v1/namespaces/kube-system/pods?labelSelector=k8s-app%3Dkube-dns")
    ok, detail = coredns_available(deployment, pods)
    checks["coredns"] = {"ok": ok, "detail": detail}
    count, detail = gpu_allocatable(nodes)
    if gpu_expected and count < 1:
        detail += "; " + device_plugin_diagnosis(client)
    checks["gpu"] = {"ok": count >= 1 or not gpu_expected,
                     "detail": detail + ("" if gpu_expected else " (no GPU expected)"), "count": count}
    return {"ok": all(c["ok"] for c in checks.values()), "checks": checks, "missing_sans": missing,
            "certificate_sans": [v for _k, v in client.peer_sans],
            "nodes": [n["metadata"]["name"] for n in (nodes or {}).get("items") or []]}
