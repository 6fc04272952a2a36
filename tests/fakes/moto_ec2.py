"""A fake AWS (EC2 + SSM) for tests: moto's server on 127.0.0.1, plus two levers.

* **Accounts.** A request signed with a 12-digit access key id lands in the moto
  account of that number, so every test (or conformance harness) can have a fresh,
  isolated account on one shared server: ``fake.new_account()``.
* **Error injection.** ``fake.inject("RunInstances", code="InsufficientInstanceCapacity")``
  makes the server answer matching requests with the EC2 error document (or any
  canned body) instead of passing them to moto. The adapter's botocore client parses
  a real HTTP error response, so its retry configuration and error parsing are the
  real ones. ``fake.calls(...)`` tells how many requests of an action arrived (and with
  which ``NextToken``).
* **A server that ignores paging.** ``fake.ignore_paging(account)``: that account's
  ``Describe*`` requests reach moto without their ``NextToken``, and every answer carries the
  same ``nextToken``, as a server repeating its first answer would.

* **Unique tag keys.** A ``TagSpecification`` or ``CreateTags`` naming one tag key twice is
  refused with ``InvalidParameterValue``, as EC2 refuses it (tag keys are unique per resource);
  moto would keep the last.
* **Shutdown behaviour.** Each logged ``RunInstances`` keeps the ``InstanceInitiatedShutdownBehavior``
  it carried (``""`` when it carried none: EC2's default, stop), and a value outside EC2's
  ``ShutdownBehavior`` enum (stop, terminate) is refused with ``InvalidParameterValue``.

Use the ``moto_ec2`` session fixture (import it into a test module or conftest), or
``shared_server()`` where no fixture is at hand (conformance harnesses).
"""

from __future__ import annotations

import atexit
import io
import json
import os
import random
import re
import threading
from typing import Any, Dict, List, Optional
from urllib.parse import parse_qs, parse_qsl, urlencode

import pytest

_AKID_RE = re.compile(r"Credential=([A-Za-z0-9]+)/")
_EC2_ERROR = (
    '<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error><Code>%s</Code>'
    "<Message>%s</Message></Error></Errors><RequestID>%s</RequestID></Response>"
)
_EC2_NS = "http://ec2.amazonaws.com/doc/2016-11-15/"

FAKE_SECRET = "testing"


def ec2_body(action: str, inner: str) -> str:
    """A successful EC2 query-protocol response document for ``action``."""
    return '<?xml version="1.0" encoding="UTF-8"?>\n<%sResponse xmlns="%s"><requestId>fake</requestId>%s</%sResponse>' % (
        action, _EC2_NS, inner, action)


class _Rule:
    def __init__(self, account, action, status, code, message, body, times):
        self.account, self.action = account, action
        self.status, self.code, self.message, self.body = status, code, message, body
        self.times = times  # None = until cleared


_TAG_KEY_FIELD = re.compile(r"^(?P<list>(?:TagSpecification\.\d+\.)?)Tag\.\d+\.Key$")


def _duplicate_tag_key(form: Dict[str, List[str]]) -> Optional[str]:
    """A tag key named twice in one tag list of a query-protocol request (``TagSpecification.N.Tag.M.Key``,
    ``Tag.N.Key``), else None."""
    seen: Dict[str, set] = {}
    for field, values in sorted(form.items()):
        found = _TAG_KEY_FIELD.match(field)
        if found:
            keys = seen.setdefault(found.group("list"), set())
            for key in values:
                if key in keys:
                    return key
                keys.add(key)
    return None


class _Middleware:
    """WSGI wrapper around moto's app: account routing, call log, injected answers."""

    def __init__(self, app):
        self.app = app
        self.lock = threading.Lock()
        self.rules: List[_Rule] = []
        self.log: List[Dict[str, str]] = []
        self.ignoring_paging: set = set()   # accounts whose Describe* paging is ignored

    def __call__(self, environ, start_response):
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        environ["wsgi.input"] = io.BytesIO(body)
        match = _AKID_RE.search(environ.get("HTTP_AUTHORIZATION", ""))
        akid = match.group(1) if match else ""
        account = akid if (len(akid) == 12 and akid.isdigit()) else "123456789012"
        if account != "123456789012":
            environ["HTTP_X_MOTO_ACCOUNT_ID"] = account
        target = environ.get("HTTP_X_AMZ_TARGET", "")
        form: Dict[str, List[str]] = {}
        if target:  # JSON protocol (SSM): "AmazonSSM.GetParameter"
            action = target.rsplit(".", 1)[-1]
        else:
            form = parse_qs(body.decode("utf-8", "replace")) if body else {}
            query = parse_qs(environ.get("QUERY_STRING", ""))
            action = (form.get("Action") or query.get("Action") or [""])[0]
        entry = {"account": account, "action": action, "next_token": (form.get("NextToken") or [""])[0]}
        if action == "RunInstances":
            entry["shutdown_behavior"] = (form.get("InstanceInitiatedShutdownBehavior") or [""])[0]
        with self.lock:
            self.log.append(entry)
            rule = self._take(account, action)
            ignoring = not target and action.startswith("Describe") and account in self.ignoring_paging
        duplicate = None if target else _duplicate_tag_key(form)
        if duplicate is not None:
            payload = (_EC2_ERROR % ("InvalidParameterValue", "Duplicate tag key '%s' specified" % duplicate,
                                     "fake-%d" % len(self.log))).encode("utf-8")
            start_response("400 Bad Request", [("Content-Type", "text/xml"), ("Content-Length", str(len(payload)))])
            return [payload]
        if entry.get("shutdown_behavior") not in (None, "", "stop", "terminate"):
            payload = (_EC2_ERROR % ("InvalidParameterValue", "Value (%s) for parameter instanceInitiatedShutdownBehavior is "
                                     "invalid" % entry["shutdown_behavior"], "fake-%d" % len(self.log))).encode("utf-8")
            start_response("400 Bad Request", [("Content-Type", "text/xml"), ("Content-Length", str(len(payload)))])
            return [payload]
        if rule is None and ignoring:
            return self._first_page_again(environ, start_response, body)
        if rule is None:
            return self.app(environ, start_response)
        if rule.body is not None:
            payload, ctype = rule.body, ("application/x-amz-json-1.1" if target else "text/xml")
        elif target:
            payload, ctype = json.dumps({"__type": rule.code, "message": rule.message}), "application/x-amz-json-1.1"
        else:
            payload, ctype = _EC2_ERROR % (rule.code, rule.message, "fake-%d" % len(self.log)), "text/xml"
        data = payload.encode("utf-8")
        start_response("%d %s" % (rule.status, "Injected"), [
            ("Content-Type", ctype), ("Content-Length", str(len(data)))])
        return [data]

    def _first_page_again(self, environ, start_response, body: bytes):
        """moto's answer to the request without its NextToken, with a nextToken added."""
        kept = [(k, v) for k, v in parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True)
                if k != "NextToken"]
        data = urlencode(kept).encode("utf-8")
        environ["wsgi.input"], environ["CONTENT_LENGTH"] = io.BytesIO(data), str(len(data))
        answered: Dict[str, Any] = {}

        def capture(status, headers, exc_info=None):
            answered.update(status=status, headers=headers)
            return lambda chunk: None

        reply = b"".join(self.app(environ, capture))
        if answered["status"].startswith("200"):
            reply = re.sub(rb"<nextToken>[^<]*</nextToken>", b"", reply)
            reply = re.sub(rb"(</\w+Response>\s*)$", rb"<nextToken>ignored-paging-2</nextToken>\1", reply, count=1)
        headers = [(k, v) for k, v in answered["headers"] if k.lower() != "content-length"]
        start_response(answered["status"], headers + [("Content-Length", str(len(reply)))])
        return [reply]

    def _take(self, account, action) -> Optional[_Rule]:
        for rule in self.rules:
            if rule.action == action and rule.account in (None, account):
                if rule.times is not None:
                    rule.times -= 1
                    if rule.times <= 0:
                        self.rules.remove(rule)
                return rule
        return None


class MotoEc2:
    """moto's ThreadedMotoServer on 127.0.0.1 and a free port, behind _Middleware."""

    def __init__(self):
        from moto.server import ThreadedMotoServer

        fake = self

        class _Server(ThreadedMotoServer):
            def _server_entry(self) -> None:  # same as moto's, with our WSGI wrapper
                from werkzeug.serving import make_server
                from moto.moto_server.werkzeug_app import (
                    DomainDispatcherApplication, MotoRequestHandler, create_backend_app)
                fake.middleware = _Middleware(DomainDispatcherApplication(create_backend_app))

                class _Quiet(MotoRequestHandler):
                    def log_request(self, *args, **kwargs):  # no access log on stderr
                        pass

                self._server = make_server(self._ip_address, self._port, fake.middleware, True,
                                           request_handler=_Quiet)
                self._server_ready_event.set()
                self._server.serve_forever()

        self.middleware: Optional[_Middleware] = None
        self._server = _Server(ip_address="127.0.0.1", port=0, verbose=False)
        self.endpoint_url = ""
        self._accounts_seen = set()

    def start(self) -> "MotoEc2":
        self._server.start()
        host, port = self._server.get_host_and_port()
        self.endpoint_url = "http://%s:%d" % (host, port)
        return self

    def stop(self) -> None:
        self._server.stop()

    # -- accounts -------------------------------------------------------------------
    def new_account(self) -> Dict[str, str]:
        """Credentials of a fresh, empty moto account (12-digit access key id)."""
        account = "%012d" % (10 ** 11 + len(self._accounts_seen) * 7919 + random.randrange(7919))
        self._accounts_seen.add(account)
        return {"aws_access_key_id": account, "aws_secret_access_key": FAKE_SECRET}

    def client(self, service: str, region: str, creds: Optional[Dict[str, str]] = None):
        """A boto3 client on the fake (for arranging and inspecting state in tests)."""
        import boto3

        creds = creds or {"aws_access_key_id": "testing", "aws_secret_access_key": FAKE_SECRET}
        return boto3.session.Session(**creds).client(service, region_name=region, endpoint_url=self.endpoint_url)

    # -- injection --------------------------------------------------------------------
    def inject(self, action: str, code: str = "", status: int = 400, message: str = "injected by the fake",
               body: Optional[str] = None, times: Optional[int] = 1, account: Optional[str] = None) -> None:
        """Answer the next ``times`` (None = all, until cleared) requests of ``action``
        (in ``account``, or any) with an error ``code``/``status`` or a canned ``body``."""
        with self.middleware.lock:
            self.middleware.rules.append(_Rule(account, action, status, code, message, body, times))

    def clear(self, account: Optional[str] = None) -> None:
        with self.middleware.lock:
            self.middleware.rules[:] = [r for r in self.middleware.rules
                                        if account is not None and r.account != account]

    def ignore_paging(self, account: str) -> None:
        """From now on ``account``'s Describe* paging is ignored (see the module's docstring)."""
        with self.middleware.lock:
            self.middleware.ignoring_paging.add(account)

    def calls(self, action: Optional[str] = None, account: Optional[str] = None) -> List[Dict[str, str]]:
        with self.middleware.lock:
            return [c for c in self.middleware.log
                    if (action is None or c["action"] == action) and (account is None or c["account"] == account)]


_SHARED: Dict[str, Any] = {}
_SHARED_LOCK = threading.Lock()


def shared_server() -> MotoEc2:
    """The process-wide fake, started on first use and stopped at exit."""
    with _SHARED_LOCK:
        if "server" not in _SHARED:
            _SHARED["server"] = MotoEc2().start()
            atexit.register(_SHARED["server"].stop)
        return _SHARED["server"]


FAKE_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": FAKE_SECRET,
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",   # never ask 169.254.169.254 for credentials
    "AWS_CONFIG_FILE": os.devnull,          # never read the developer's ~/.aws
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
}


@pytest.fixture(scope="session")
def moto_ec2():
    """The shared fake with fake credentials in the environment (no real AWS reachable)."""
    patch = pytest.MonkeyPatch()
    for key, value in FAKE_ENV.items():
        patch.setenv(key, value)
    for key in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_EC2"):
        patch.delenv(key, raising=False)
    try:
        yield shared_server()
    finally:
        patch.undo()
