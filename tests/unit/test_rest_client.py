"""The shared REST client (providers/rest.py) against a real local HTTP server:
every default table row, custom rows, Retry-After, malformed bodies, timeouts, TLS,
pagination and its cap, OAuth2 client-credentials tokens, and secrets that never
show in a message, a repr or a log record."""

from __future__ import annotations

import datetime
import email.utils
import http.server
import inspect
import json
import logging
import os
import re
import socket
import subprocess
import sys
import textwrap
import threading
import traceback

import pytest
from pytest_httpserver import HTTPServer
from werkzeug.wrappers import Response

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers import rest
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    BlockScope, ErrorKind, ProviderError,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.rest import (
    MALFORMED_BODY, BasicAuth, BearerToken, ClientCredentialsToken, Cursor, HeaderToken, NextLink, PageNumber,
    RestClient, RestError, Rule, parse_retry_after, vendor_error,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.requirements import install_command

K = ErrorKind
SECRET = "sk-live-7f3a9c1e5b2d4680aa11"
CLIENT_SECRET = "cs-0b9e8d7c6a5f4e3d2c1b"


def make_client(server, auth=None, **kwargs):
    kwargs.setdefault("timeout", (2.0, 5.0))
    return RestClient(server.url_for("/v1"), auth=auth if auth is not None else BearerToken(SECRET),
                      name="testcloud", **kwargs)


def raised(call) -> RestError:
    with pytest.raises(RestError) as info:
        call()
    return info.value


def assert_clean(exc: BaseException, *secrets):
    """No secret in the message, repr, dict form or formatted traceback; nothing chained."""
    texts = [str(exc), repr(exc), json.dumps(exc.to_dict()), "".join(traceback.format_exception(exc))]
    for secret in secrets or (SECRET,):
        for text in texts:
            assert secret not in text
    assert exc.__cause__ is None and exc.__context__ is None


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# -- JSON in and out -----------------------------------------------------------------------

def test_get_decodes_json_and_sends_auth_user_agent_and_params(httpserver):
    httpserver.expect_request("/v1/instances", method="GET", query_string="region=us-east-1",
                              headers={"Authorization": "Bearer " + SECRET, "Accept": "application/json"}
                              ).respond_with_json({"data": [{"id": "i-1"}]})
    with make_client(httpserver, user_agent="gpuprov-test/1") as client:
        assert client.get("/instances", params={"region": "us-east-1"}) == {"data": [{"id": "i-1"}]}
    request = httpserver.log[0][0]
    assert request.headers["User-Agent"] == "gpuprov-test/1"


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE"])
def test_json_bodies_go_out_and_come_back(httpserver, method):
    body = {"name": "gpuprov-train1", "ids": [1, 2]}
    httpserver.expect_request("/v1/things", method=method, json=body).respond_with_json({"ok": method})
    client = make_client(httpserver)
    assert getattr(client, method.lower())("things", json=body) == {"ok": method}


def test_no_content_and_empty_bodies_are_none(httpserver):
    httpserver.expect_request("/v1/gone", method="DELETE").respond_with_data("", status=204)
    httpserver.expect_request("/v1/empty").respond_with_data("", status=200)
    client = make_client(httpserver)
    assert client.delete("/gone") is None
    assert client.get("/empty") is None


def test_text_bodies_on_request(httpserver):
    httpserver.expect_request("/v1/sshkeys", method="POST").respond_with_data("a1b2-c3", content_type="text/plain")
    assert make_client(httpserver).post("/sshkeys", json={"name": "k"}, expect="text") == "a1b2-c3"


def test_allowed_status_returns_none(httpserver):
    httpserver.expect_request("/v1/instances/9", method="DELETE").respond_with_json(
        {"id": "not_found", "message": "The resource you requested could not be found."}, status=404)
    assert make_client(httpserver).delete("/instances/9", allow_status=(404,)) is None


def test_paths_keep_a_trailing_slash(httpserver):
    httpserver.expect_request("/v1/pods/").respond_with_json([])
    assert make_client(httpserver).get("/pods/") == []


# -- the default table, row by row -----------------------------------------------------------

@pytest.mark.parametrize("status, kind, block", [
    (400, K.INVALID_REQUEST, None),
    (404, K.INVALID_REQUEST, None),
    (422, K.INVALID_REQUEST, None),
    (401, K.CREDENTIALS, BlockScope.CLOUD),
    (403, K.CREDENTIALS, BlockScope.CLOUD),
    (402, K.QUOTA, BlockScope.CLOUD),
    (409, K.FAILED, BlockScope.OFFER),
    (408, K.TRANSIENT, None),
    (425, K.TRANSIENT, None),
    (429, K.TRANSIENT, None),
    (500, K.TRANSIENT, None),
    (502, K.TRANSIENT, None),
    (503, K.TRANSIENT, None),
    (504, K.TRANSIENT, None),
    (418, K.FAILED, BlockScope.OFFER),
    (410, K.FAILED, BlockScope.OFFER),
])
def test_default_table(httpserver, status, kind, block):
    httpserver.expect_request("/v1/x").respond_with_json({"message": "vendor says no"}, status=status)
    err = raised(lambda: make_client(httpserver).get("/x"))
    assert (err.kind, err.block_scope, err.status) == (kind, block, status)
    assert err.msg == "testcloud GET /v1/x: HTTP %d: vendor says no" % status
    assert err.fatal == (kind in K.FATAL)


def test_redirects_are_not_followed(httpserver):
    httpserver.expect_request("/v1/x").respond_with_data(
        "", status=301, headers={"Location": "https://cloud.example.com/api/v1/x?token=abc"})
    err = raised(lambda: make_client(httpserver).get("/x"))
    assert err.kind == K.INVALID_REQUEST and err.status == 301
    assert "moved to https://cloud.example.com/api/v1/x" in err.msg and "api_url" in err.msg
    assert "token=abc" not in err.msg
    assert len(httpserver.log) == 1


def test_malformed_success_body_row(httpserver):
    httpserver.expect_request("/v1/x").respond_with_data("<html><body>Maintenance</body></html>",
                                                         content_type="text/html")
    err = raised(lambda: make_client(httpserver).get("/x"))
    assert (err.kind, err.code, err.status) == (K.FAILED, MALFORMED_BODY, 200)
    assert "Maintenance" in err.msg


# -- vendor error bodies ------------------------------------------------------------------

@pytest.mark.parametrize("body, code, fragments", [
    ({"error": {"code": "global/invalid-parameters", "message": "Bad region", "suggestion": "Use us-east-1"},
      "field_errors": {"region_name": ["unknown"]}},
     "global/invalid-parameters", ["Bad region", "Use us-east-1", "region_name: unknown"]),
    ({"error": "pod not found"}, None, ["pod not found"]),
    ({"error": "invalid_client", "error_description": "Client authentication failed"},
     "invalid_client", ["Client authentication failed"]),
    ({"code": "insufficient_funds", "message": "Not enough credit"}, "insufficient_funds", ["Not enough credit"]),
    ({"status": False, "message": "Flavor out of stock", "error_reason": "OUT_OF_STOCK"},
     "OUT_OF_STOCK", ["Flavor out of stock"]),
    ({"id": "unprocessable_entity", "message": "Size is not available in this region.", "request_id": "r1"},
     "unprocessable_entity", ["Size is not available in this region."]),
    ({"title": "Unprocessable Entity", "status": 422, "detail": "request violates the contract",
      "errors": ["gpuTypeIds: required"]}, None, ["Unprocessable Entity", "violates the contract", "gpuTypeIds"]),
    ({"detail": [{"loc": ["body", "gpuType"], "msg": "field required", "type": "missing"}]},
     None, ["body.gpuType: field required"]),
    ({"detail": "API key unauthorized"}, None, ["API key unauthorized"]),
    ({"errors": [{"message": "There are no longer any instances available", "extensions": {"code": "NO_STOCK"}}]},
     "NO_STOCK", ["no longer any instances"]),
    ({"unexpected": {"shape": 1}}, None, ['{"unexpected": {"shape": 1}}']),
    ([{"message": "first"}, "second"], None, ["first; second"]),
])
def test_vendor_error_shapes(httpserver, body, code, fragments):
    assert vendor_error(body)[0] == code
    httpserver.expect_request("/v1/x").respond_with_json(body, status=400)
    err = raised(lambda: make_client(httpserver).get("/x"))
    assert err.code == code
    for fragment in fragments:
        assert fragment in err.msg


def test_non_json_error_bodies_are_excerpted(httpserver):
    page = "<html><head><title>502 Bad Gateway</title></head><body>" + "x" * 2000 + "</body></html>"
    httpserver.expect_request("/v1/x").respond_with_data(page, status=502, content_type="text/html")
    err = raised(lambda: make_client(httpserver).get("/x"))
    assert err.kind == K.TRANSIENT and "502 Bad Gateway" in err.msg
    assert len(err.msg) < 450 and err.msg.endswith("...")


def test_error_for_classifies_errors_inside_a_success(httpserver):
    client = make_client(httpserver, rules=[Rule(K.CAPACITY, code="NO_STOCK")])
    err = client.error_for(200, {"errors": [{"message": "no pods", "extensions": {"code": "NO_STOCK"}}]},
                           "POST", "/graphql")
    assert (err.kind, err.code) == (K.CAPACITY, "NO_STOCK")
    assert err.msg.startswith("testcloud POST /v1/graphql: HTTP 200 NO_STOCK")


# -- custom tables -----------------------------------------------------------------------

LAMBDA_LIKE = (
    Rule(K.CAPACITY, code="instance-operations/launch/insufficient-capacity"),
    Rule(K.QUOTA, code="global/quota-exceeded", block=BlockScope.REGION),
    Rule(K.TRANSIENT, code=re.compile(r"provider/.+")),
    Rule(K.CAPACITY, status=422, message=r"size is not available"),
    Rule(K.TRANSIENT, status=409),
    Rule(K.UNAVAILABLE, status=range(460, 470)),
    Rule(K.TRANSIENT, code=MALFORMED_BODY),
)


@pytest.mark.parametrize("status, body, kind, block", [
    (400, {"error": {"code": "instance-operations/launch/insufficient-capacity", "message": "Not enough capacity"}},
     K.CAPACITY, BlockScope.OFFER),
    (400, {"error": {"code": "global/quota-exceeded", "message": "Quota exceeded"}}, K.QUOTA, BlockScope.REGION),
    (400, {"error": {"code": "provider/internal-unavailable", "message": "upstream"}}, K.TRANSIENT, None),
    (422, {"id": "unprocessable_entity", "message": "Size is not available in this region."},
     K.CAPACITY, BlockScope.OFFER),
    (422, {"id": "unprocessable_entity", "message": "name is too long"}, K.INVALID_REQUEST, None),
    (409, {"message": "key is being deleted"}, K.TRANSIENT, None),
    (463, {"message": "odd vendor status"}, K.UNAVAILABLE, BlockScope.OFFER),
    (400, {"error": {"code": "global/invalid-parameters", "message": "bad"}}, K.INVALID_REQUEST, None),
    (401, {"error": {"code": "global/invalid-api-key", "message": "bad key"}}, K.CREDENTIALS, BlockScope.CLOUD),
])
def test_custom_rows_come_before_the_defaults(httpserver, status, body, kind, block):
    httpserver.expect_request("/v1/launch").respond_with_json(body, status=status)
    err = raised(lambda: make_client(httpserver, rules=LAMBDA_LIKE).post("/launch", json={}))
    assert (err.kind, err.block_scope) == (kind, block)


def test_custom_row_for_a_malformed_body(httpserver):
    httpserver.expect_request("/v1/x").respond_with_data('{"data": [', content_type="application/json")
    assert raised(lambda: make_client(httpserver).get("/x")).kind == K.FAILED
    err = raised(lambda: make_client(httpserver, rules=LAMBDA_LIKE).get("/x"))
    assert (err.kind, err.code) == (K.TRANSIENT, MALFORMED_BODY)


def test_rules_refuse_unknown_kinds_and_scopes():
    with pytest.raises(ValueError):
        Rule("Oops", status=400)
    with pytest.raises(ValueError):
        Rule(K.QUOTA, status=400, block="planet")


def test_classify_is_first_match():
    rules = [Rule(K.QUOTA, status=403, message="limit"), Rule(K.CAPACITY, status=(403, 404))]
    assert rest.classify(rules, 403, None, "Instance LIMIT reached") == (K.QUOTA, None)
    assert rest.classify(rules, 403, None, "nope") == (K.CAPACITY, None)
    assert rest.classify(rules, 401, None, "") == (K.CREDENTIALS, BlockScope.CLOUD)


# -- Retry-After ---------------------------------------------------------------------------

def test_retry_after_seconds_on_429(httpserver):
    httpserver.expect_request("/v1/x").respond_with_json({"message": "slow down"}, status=429,
                                                         headers={"Retry-After": "30"})
    err = raised(lambda: make_client(httpserver).get("/x"))
    assert (err.kind, err.retry_after) == (K.TRANSIENT, 30.0)
    assert err.to_dict() == {"kind": K.TRANSIENT, "msg": err.msg, "block": None, "retry_after": 30.0}
    assert "(retry after 30s)" in err.msg


def test_retry_after_http_date_on_503(httpserver):
    when = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=120)
    httpserver.expect_request("/v1/x").respond_with_data(
        "Service Unavailable", status=503, headers={"Retry-After": email.utils.format_datetime(when, usegmt=True)})
    err = raised(lambda: make_client(httpserver).get("/x"))
    assert err.kind == K.TRANSIENT
    assert 60 < err.retry_after <= 120


@pytest.mark.parametrize("status, header, expected", [
    (503, None, None),
    (429, "soon", None),
    (429, "-5", None),
    (400, "30", None),  # only a Transient error carries a delay
])
def test_retry_after_absent_or_unusable(httpserver, status, header, expected):
    headers = {"Retry-After": header} if header else {}
    httpserver.expect_request("/v1/x").respond_with_json({"message": "m"}, status=status, headers=headers)
    err = raised(lambda: make_client(httpserver).get("/x"))
    assert err.retry_after is expected
    assert "retry_after" not in err.to_dict()


def test_parse_retry_after():
    now = datetime.datetime(2026, 5, 1, 12, 0, 0, tzinfo=datetime.timezone.utc)
    assert parse_retry_after("120", now) == 120.0
    assert parse_retry_after(" 0 ", now) == 0.0
    assert parse_retry_after("Fri, 01 May 2026 12:01:30 GMT", now) == 90.0
    assert parse_retry_after("Fri, 01 May 2026 11:00:00 GMT", now) == 0.0  # already past
    assert parse_retry_after("", now) is None
    assert parse_retry_after(None, now) is None
    assert parse_retry_after("nan", now) is None
    assert parse_retry_after("tomorrow", now) is None


# -- transport failures --------------------------------------------------------------------

def test_read_timeout_is_transient(httpserver):
    release = threading.Event()

    def stall(_request):
        release.wait(10)
        return Response("{}", content_type="application/json")

    httpserver.expect_request("/v1/slow").respond_with_handler(stall)
    try:
        err = raised(lambda: make_client(httpserver, timeout=(2.0, 0.05)).get("/slow"))
    finally:
        release.set()
    assert err.kind == K.TRANSIENT and err.status is None
    assert "timed out" in err.msg
    assert_clean(err)


def test_connection_refused_is_transient():
    client = RestClient("http://127.0.0.1:%d/v1" % free_port(), auth=BearerToken(SECRET), name="testcloud",
                        timeout=(2.0, 2.0))
    err = raised(lambda: client.get("/x"))
    assert err.kind == K.TRANSIENT and "ConnectionError" in err.msg
    assert_clean(err)


@pytest.fixture(name="tls_server")
def fixture_tls_server(tmp_path):
    """An HTTPS server with a self-signed certificate for localhost."""
    import ssl
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(cert_path), str(key_path))
    server = HTTPServer(host="localhost", ssl_context=context)
    server.start()
    server.expect_request("/v1/x").respond_with_json({"ok": True})
    try:
        yield server, str(cert_path)
    finally:
        server.clear()
        server.stop()


def test_untrusted_certificate_is_credentials(tls_server, monkeypatch):
    server, cert_path = tls_server
    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)
    err = raised(lambda: make_client(server).get("/x"))
    assert (err.kind, err.block_scope) == (K.CREDENTIALS, BlockScope.CLOUD)
    assert "certificate" in err.msg and "REQUESTS_CA_BUNDLE" in err.msg
    assert_clean(err)
    assert make_client(server, verify=cert_path).get("/x") == {"ok": True}


def test_bad_base_url_and_timeouts_are_invalid_requests():
    for url in ("", "ftp://host/x", "cloud.example.com/v1", None):
        with pytest.raises(ProviderError) as info:
            RestClient(url, name="testcloud")
        assert info.value.kind == K.INVALID_REQUEST and "api_url" in info.value.msg
    for url in ("https://user:%s@cloud.example.com/v1", "https://cloud.example.com/v1?key=%s",
                "https://cloud.example.com/v1#%s"):
        with pytest.raises(ProviderError) as info:
            RestClient(url % SECRET, name="testcloud")
        assert info.value.kind == K.INVALID_REQUEST and SECRET not in str(info.value)
    for timeout in (0, -1, (5, 0), "soon", (1, 2, 3)):
        with pytest.raises(ProviderError) as info:
            RestClient("https://cloud.example.com/v1", timeout=timeout)
        assert info.value.kind == K.INVALID_REQUEST


def test_empty_keys_are_credentials_errors():
    for make in (lambda: BearerToken("  "), lambda: HeaderToken("api_key", ""), lambda: BasicAuth(None),
                 lambda: ClientCredentialsToken("https://cloud.example.com/oauth2/token", "id", "")):
        with pytest.raises(ProviderError) as info:
            make()
        assert info.value.kind == K.CREDENTIALS


# -- secrets ----------------------------------------------------------------------------

def _echo_headers(status, as_json=True):
    def handler(request):
        seen = dict(request.headers.items())
        if as_json:
            return Response(json.dumps({"message": "you sent %r" % (seen,)}), status=status,
                            content_type="application/json")
        return Response("headers: %r" % (seen,), status=status, content_type="text/plain")
    return handler


@pytest.mark.parametrize("auth, header", [
    (BearerToken(SECRET), "Authorization"),
    (HeaderToken("X-Api-Key", SECRET), "X-Api-Key"),
    (BasicAuth(SECRET), "Authorization"),
])
def test_secrets_never_show(httpserver, caplog, auth, header):
    caplog.set_level(logging.DEBUG)
    secrets = (SECRET,) + tuple(s for s in auth.secrets() if s != SECRET)
    httpserver.expect_request("/v1/denied").respond_with_handler(_echo_headers(401))
    httpserver.expect_request("/v1/garbled").respond_with_handler(_echo_headers(200, as_json=False))
    httpserver.expect_request("/v1/quoted").respond_with_json({"message": "bad key %r" % (SECRET + "\n",)}, 400)
    client = make_client(httpserver, auth=auth)
    errors = [raised(lambda: client.get("/denied")), raised(lambda: client.get("/garbled")),
              raised(lambda: client.get("/quoted"))]
    assert all(req.headers[header] == auth.headers()[header] for req, _response in httpserver.log)
    assert [e.kind for e in errors] == [K.CREDENTIALS, K.FAILED, K.INVALID_REQUEST]
    assert "***" in errors[0].msg and "***" in errors[1].msg
    refused = RestClient("http://127.0.0.1:%d/v1" % free_port(), auth=auth, name="testcloud")
    errors.append(raised(lambda: refused.get("/x")))
    for err in errors:
        assert_clean(err, *secrets)
    for text in (repr(client), repr(auth), repr(refused), str(vars(client).get("_session").headers)):
        for secret in secrets:
            assert secret not in text
    assert caplog.records
    for record in caplog.records:
        for secret in secrets:
            assert secret not in record.getMessage()


def test_a_header_key_with_an_underscore_reaches_the_server():
    """Hyperstack's ``api_key`` header, seen by a server that keeps underscore headers (werkzeug's does not)."""
    seen = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # pylint: disable=invalid-name
            seen.append(self.headers.get("api_key"))
            body = b'{"status": true}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.handle_request, daemon=True)
    thread.start()
    try:
        client = RestClient("http://127.0.0.1:%d/v1" % server.server_address[1], auth=HeaderToken("api_key", SECRET),
                            name="hyperstack", timeout=(2.0, 5.0))
        assert client.get("/core/environments") == {"status": True}
    finally:
        thread.join(10)
        server.server_close()
    assert seen == [SECRET]


def test_a_key_with_a_newline_inside_is_refused_without_quoting_it(httpserver):
    bad = SECRET[:8] + "\n" + SECRET[8:]
    err = raised(lambda: make_client(httpserver, auth=BearerToken(bad)).get("/x"))
    assert err.kind == K.INVALID_REQUEST
    assert_clean(err, SECRET[:8], SECRET[8:])
    assert not httpserver.log


def test_surrounding_whitespace_is_trimmed_from_keys(httpserver):
    httpserver.expect_request("/v1/x", headers={"Authorization": "Bearer " + SECRET}).respond_with_json({})
    assert make_client(httpserver, auth=BearerToken(SECRET + "\n")).get("/x") == {}


# -- pagination -------------------------------------------------------------------------

def _numbered_pages(server, path, pages, next_of):
    """Serve ``pages`` (lists of items) by ``?page=N``; ``next_of(n)`` is the next link or None."""
    def handler(request):
        number = int(request.args.get("page", "1"))
        body = {"things": pages[number - 1], "links": {"pages": {}}, "meta": {"total": sum(map(len, pages))}}
        link = next_of(number)
        if link:
            body["links"]["pages"]["next"] = link
        return Response(json.dumps(body), content_type="application/json")
    server.expect_request("/v1" + path).respond_with_handler(handler)


def test_next_links_are_followed(httpserver):
    pages = [[1, 2], [3, 4], [5]]
    _numbered_pages(httpserver, "/droplets", pages, lambda n: (
        httpserver.url_for("/v1/droplets") + "?page=%d&per_page=2&tag_name=t" % (n + 1)) if n < 3 else None)
    got = list(make_client(httpserver).paginate("/droplets", items="things", paging=NextLink("links.pages.next"),
                                                params={"per_page": 2, "tag_name": "t"}))
    assert got == [1, 2, 3, 4, 5]
    assert [dict(req.args) for req, _response in httpserver.log] == [
        {"per_page": "2", "tag_name": "t"}, {"page": "2", "per_page": "2", "tag_name": "t"},
        {"page": "3", "per_page": "2", "tag_name": "t"}]


def test_relative_next_links(httpserver):
    _numbered_pages(httpserver, "/droplets", [[1], [2]], lambda n: "/v1/droplets?page=2" if n == 1 else None)
    assert list(make_client(httpserver).paginate("/droplets", items="things")) == [1, 2]


def test_cursor_pagination(httpserver):
    def handler(request):
        cursor = request.args.get("cursor")
        body = {"data": {"items": ["a", "b"], "next_cursor": "c2"}} if cursor is None else \
            {"data": {"items": ["c"], "next_cursor": None}}
        return Response(json.dumps(body), content_type="application/json")
    httpserver.expect_request("/v1/keys").respond_with_handler(handler)
    got = list(make_client(httpserver).paginate("/keys", items="data.items",
                                                paging=Cursor("data.next_cursor", "cursor"), params={"limit": 2}))
    assert got == ["a", "b", "c"]
    assert [dict(req.args) for req, _response in httpserver.log] == [{"limit": "2"}, {"limit": "2", "cursor": "c2"}]


def test_page_numbers_stop_at_a_short_page(httpserver):
    _numbered_pages(httpserver, "/gpus", [[1, 2], [3, 4], [5]], lambda n: None)
    paging = PageNumber("page", size_param="page_size", size=2)
    assert list(make_client(httpserver).paginate("/gpus", items="things", paging=paging)) == [1, 2, 3, 4, 5]
    assert [req.args["page"] for req, _response in httpserver.log] == ["1", "2", "3"]
    assert all(req.args["page_size"] == "2" for req, _response in httpserver.log)


def test_page_numbers_stop_at_the_total(httpserver):
    _numbered_pages(httpserver, "/gpus", [[1, 2], [3, 4], []], lambda n: None)
    paging = PageNumber("page", size_param="page_size", size=2, total_field="meta.total")
    assert list(make_client(httpserver).paginate("/gpus", items="things", paging=paging)) == [1, 2, 3, 4]
    assert len(httpserver.log) == 2


def test_page_numbers_over_bare_lists(httpserver):
    def handler(request):
        page = int(request.args["page"])
        return Response(json.dumps([page] if page <= 2 else []), content_type="application/json")
    httpserver.expect_request("/v1/pods/").respond_with_handler(handler)
    assert list(make_client(httpserver).paginate("/pods/", paging=PageNumber())) == [1, 2]
    assert len(httpserver.log) == 3


def test_page_cap_is_a_classified_error(httpserver):
    _numbered_pages(httpserver, "/droplets", [[n] for n in range(1, 50)],
                    lambda n: httpserver.url_for("/v1/droplets") + "?page=%d" % (n + 1))
    got = []
    with pytest.raises(RestError) as info:
        for item in make_client(httpserver).paginate("/droplets", items="things", max_pages=3):
            got.append(item)
    assert info.value.kind == K.FAILED and "more than 3 pages" in info.value.msg
    assert got == [1, 2, 3] and len(httpserver.log) == 3


def test_a_next_link_that_repeats_ends_the_listing(httpserver):
    _numbered_pages(httpserver, "/droplets", [[1], [2]], lambda n: "/v1/droplets?page=2")
    assert list(make_client(httpserver).paginate("/droplets", items="things")) == [1, 2]
    assert len(httpserver.log) == 2


def test_a_next_link_back_to_the_first_page_ends_the_listing(httpserver):
    _numbered_pages(httpserver, "/droplets", [[1], [2]], lambda n: "/v1/droplets?page=%d" % (n % 2 + 1))
    paging = NextLink()
    assert list(make_client(httpserver).paginate("/droplets", items="things", paging=paging,
                                                 params={"page": 1})) == [1, 2]
    assert [req.args["page"] for req, _response in httpserver.log] == ["1", "2"]


def _ignoring_paging(server, path, body):
    """A server that answers every page of ``path`` with ``body`` (it ignores the page query)."""
    server.expect_request("/v1" + path).respond_with_json(body)


def test_page_numbers_end_at_the_total_when_the_server_ignores_the_page(httpserver):
    # Issue 24: Hyperstack answered every page=N with the same item, count 1, page_size 1.
    _ignoring_paging(httpserver, "/vms", {"instances": [{"id": 7}], "count": 1, "page_size": 1})
    paging = PageNumber("page", size_param="pageSize", size=1, total_field="count")
    assert list(make_client(httpserver).paginate("/vms", items="instances", paging=paging)) == [{"id": 7}]
    assert len(httpserver.log) == 1


def test_next_links_end_at_the_total_when_the_server_ignores_the_page(httpserver):
    def handler(request):
        number = int(request.args.get("page", "1"))
        return Response(json.dumps({"things": [1, 2], "meta": {"total": 2},
                                    "links": {"pages": {"next": "/v1/droplets?page=%d" % (number + 1)}}}),
                        content_type="application/json")
    httpserver.expect_request("/v1/droplets").respond_with_handler(handler)
    paging = NextLink(total_field="meta.total")
    assert list(make_client(httpserver).paginate("/droplets", items="things", paging=paging)) == [1, 2]
    assert len(httpserver.log) == 1


def test_a_repeated_page_without_a_total_is_the_whole_listing(httpserver):
    _ignoring_paging(httpserver, "/scripts", [{"id": "a"}, {"id": "b"}])
    paging = PageNumber("page", size_param="pageSize", size=2)
    assert list(make_client(httpserver).paginate("/scripts", paging=paging)) == [{"id": "a"}, {"id": "b"}]
    assert [req.args["page"] for req, _response in httpserver.log] == ["1", "2"]


def test_a_repeated_page_before_the_total_came_is_failed(httpserver):
    _ignoring_paging(httpserver, "/pods", {"data": [1, 2], "total_count": 5})
    paging = PageNumber("offset", size_param="limit", size=2, total_field="total_count")
    got = []
    with pytest.raises(RestError) as info:
        for item in make_client(httpserver).paginate("/pods", items="data", paging=paging):
            got.append(item)
    assert info.value.kind == K.FAILED
    assert "does not page" in info.value.msg and "2 of the 5 items" in info.value.msg, info.value.msg
    assert got == [1, 2] and len(httpserver.log) == 2


def test_a_repeated_next_link_before_the_total_came_is_failed(httpserver):
    _numbered_pages(httpserver, "/droplets", [[1], [2], [3]], lambda n: "/v1/droplets?page=2")
    with pytest.raises(RestError) as info:
        list(make_client(httpserver).paginate("/droplets", items="things", paging=NextLink(total_field="meta.total")))
    assert info.value.kind == K.FAILED and "2 of the 3 items" in info.value.msg, info.value.msg
    assert len(httpserver.log) == 2


def test_items_a_page_repeats_are_listed_once(httpserver):
    _numbered_pages(httpserver, "/gpus", [[1, 2], [2, 3], [3]], lambda n: None)
    paging = PageNumber("page", size_param="page_size", size=2, total_field="meta.total")
    assert list(make_client(httpserver).paginate("/gpus", items="things", paging=paging)) == [1, 2, 3]
    assert len(httpserver.log) == 3


def test_a_cursor_that_repeats_ends_the_listing(httpserver):
    def handler(request):
        items = ["b"] if request.args.get("cursor") else ["a"]
        return Response(json.dumps({"data": {"items": items, "next_cursor": "c2"}}), content_type="application/json")
    httpserver.expect_request("/v1/keys").respond_with_handler(handler)
    got = list(make_client(httpserver).paginate("/keys", items="data.items", paging=Cursor("data.next_cursor", "cursor")))
    assert got == ["a", "b"] and len(httpserver.log) == 2


def test_a_cursor_ends_at_the_total(httpserver):
    httpserver.expect_request("/v1/keys").respond_with_json({"data": {"items": ["a"], "next_cursor": "c2", "total": 1}})
    paging = Cursor("data.next_cursor", "cursor", total_field="data.total")
    assert list(make_client(httpserver).paginate("/keys", items="data.items", paging=paging)) == ["a"]
    assert len(httpserver.log) == 1


def test_the_page_cap_holds_while_the_total_has_not_come(httpserver):
    _numbered_pages(httpserver, "/droplets", [[n] for n in range(1, 50)],
                    lambda n: httpserver.url_for("/v1/droplets") + "?page=%d" % (n + 1))
    with pytest.raises(RestError) as info:
        list(make_client(httpserver).paginate("/droplets", items="things", paging=NextLink(total_field="meta.total"),
                                              max_pages=3))
    assert info.value.kind == K.FAILED and "more than 3 pages" in info.value.msg
    assert len(httpserver.log) == 3


def test_a_next_link_to_another_host_is_refused(httpserver):
    elsewhere = HTTPServer(host="127.0.0.1")
    elsewhere.start()
    try:
        elsewhere.expect_request("/v1/droplets").respond_with_json({"things": []})
        _numbered_pages(httpserver, "/droplets", [[1]], lambda n: elsewhere.url_for("/v1/droplets?page=2"))
        with pytest.raises(RestError) as info:
            list(make_client(httpserver).paginate("/droplets", items="things"))
        assert info.value.kind == K.FAILED and "refusing to send the key" in info.value.msg
        assert not elsewhere.log
    finally:
        elsewhere.clear()
        elsewhere.stop()


@pytest.mark.parametrize("body", [{"nothing": "here"}, {"things": "not a list"}, ["a bare list"]])
def test_a_page_without_its_list_is_malformed(httpserver, body):
    httpserver.expect_request("/v1/droplets").respond_with_json(body)
    with pytest.raises(RestError) as info:
        list(make_client(httpserver).paginate("/droplets", items="things"))
    assert (info.value.kind, info.value.code) == (K.FAILED, MALFORMED_BODY)


def test_a_null_list_is_an_empty_page(httpserver):
    httpserver.expect_request("/v1/droplets").respond_with_json({"things": None})
    assert list(make_client(httpserver).paginate("/droplets", items="things")) == []


# -- OAuth2 client credentials -------------------------------------------------------------

class TokenServer:
    """A token endpoint issuing tok-1, tok-2, ... and an API accepting the tokens in ``valid``."""

    def __init__(self, server, expires_in=3600):
        self.server = server
        self.expires_in = expires_in
        self.issued = []
        self.valid = set()
        self.token_requests = []
        server.expect_request("/oauth2/token", method="POST").respond_with_handler(self.token)
        server.expect_request("/v1/instances").respond_with_handler(self.api)

    def token(self, request):
        self.token_requests.append(request.get_json(silent=True) or dict(request.form))
        token = "tok-%d-%s" % (len(self.issued) + 1, "x" * 24)
        self.issued.append(token)
        self.valid.add(token)
        body = {"access_token": token, "token_type": "Bearer", "refresh_token": "r", "scope": "cloud-api-v1"}
        if self.expires_in is not None:
            body["expires_in"] = self.expires_in
        return Response(json.dumps(body), content_type="application/json")

    def api(self, request):
        token = request.headers.get("Authorization", "").replace("Bearer ", "")
        if token not in self.valid:
            return Response(json.dumps({"code": "unauthorized_request", "message": "Invalid token %s" % token}),
                            status=401, content_type="application/json")
        return Response(json.dumps([{"id": "i-1"}]), content_type="application/json")

    def api_calls(self):
        return sum(1 for req, _response in self.server.log if req.path == "/v1/instances")

    def client(self, **kwargs):
        auth = ClientCredentialsToken(self.server.url_for("/oauth2/token"), "client-1", CLIENT_SECRET,
                                      timeout=(2.0, 5.0), name="verda", **kwargs)
        return RestClient(self.server.url_for("/v1"), auth=auth, name="verda", timeout=(2.0, 5.0))


def test_token_is_fetched_once_and_cached(httpserver):
    tokens = TokenServer(httpserver)
    client = tokens.client()
    assert client.get("/instances") == [{"id": "i-1"}]
    assert client.get("/instances") == [{"id": "i-1"}]
    assert len(tokens.issued) == 1
    assert tokens.token_requests == [{"grant_type": "client_credentials", "client_id": "client-1",
                                      "client_secret": CLIENT_SECRET}]


def test_token_without_a_lifetime_is_kept_until_refused(httpserver):
    tokens = TokenServer(httpserver, expires_in=None)
    client = tokens.client()
    client.get("/instances")
    client.get("/instances")
    assert len(tokens.issued) == 1


def test_token_is_refreshed_when_it_expires(httpserver):
    tokens = TokenServer(httpserver, expires_in=30)  # inside the 60 s margin: stale at once
    client = tokens.client()
    client.get("/instances")
    client.get("/instances")
    assert len(tokens.issued) == 2 and tokens.api_calls() == 2


def test_token_is_refreshed_once_on_a_401(httpserver):
    tokens = TokenServer(httpserver)
    client = tokens.client()
    client.get("/instances")
    tokens.valid.clear()  # revoked behind our back
    assert client.get("/instances") == [{"id": "i-1"}]
    assert len(tokens.issued) == 2 and tokens.api_calls() == 3


def test_a_token_refused_twice_is_a_credentials_error(httpserver, caplog):
    caplog.set_level(logging.DEBUG)
    tokens = TokenServer(httpserver)
    tokens.valid = type("Never", (set,), {"__contains__": lambda self, item: False})()
    client = tokens.client()
    err = raised(lambda: client.get("/instances"))
    assert (err.kind, err.code) == (K.CREDENTIALS, "unauthorized_request")
    assert len(tokens.issued) == 2 and tokens.api_calls() == 2
    assert_clean(err, CLIENT_SECRET, *tokens.issued)
    for record in caplog.records:
        for secret in (CLIENT_SECRET,) + tuple(tokens.issued):
            assert secret not in record.getMessage()
    for text in (repr(client), repr(client._auth)):  # pylint: disable=protected-access
        assert CLIENT_SECRET not in text and all(t not in text for t in tokens.issued)


def test_form_encoded_token_requests(httpserver):
    tokens = TokenServer(httpserver)
    tokens.client(body_format="form", scope="cloud-api-v1").get("/instances")
    assert tokens.token_requests == [{"grant_type": "client_credentials", "client_id": "client-1",
                                      "client_secret": CLIENT_SECRET, "scope": "cloud-api-v1"}]


@pytest.mark.parametrize("status, body", [
    (401, {"code": "unauthorized_request", "message": "Invalid client secret %s" % CLIENT_SECRET}),
    (400, {"error": "invalid_client", "error_description": "unknown client"}),
    (200, {"token_type": "Bearer"}),
    (200, ["not", "a", "token"]),
])
def test_token_endpoint_failures_are_credentials(httpserver, status, body):
    httpserver.expect_request("/oauth2/token").respond_with_json(body, status=status)
    auth = ClientCredentialsToken(httpserver.url_for("/oauth2/token"), "client-1", CLIENT_SECRET, name="verda")
    err = raised(lambda: RestClient(httpserver.url_for("/v1"), auth=auth, name="verda").get("/instances"))
    assert (err.kind, err.block_scope) == (K.CREDENTIALS, BlockScope.CLOUD)
    assert err.msg.startswith("verda token")
    assert_clean(err, CLIENT_SECRET)
    assert all(req.path == "/oauth2/token" for req, _response in httpserver.log)


def test_token_endpoint_rate_limit_is_transient(httpserver):
    httpserver.expect_request("/oauth2/token").respond_with_json({"message": "slow"}, status=429,
                                                                 headers={"Retry-After": "5"})
    auth = ClientCredentialsToken(httpserver.url_for("/oauth2/token"), "client-1", CLIENT_SECRET, name="verda")
    err = raised(lambda: RestClient(httpserver.url_for("/v1"), auth=auth, name="verda").get("/instances"))
    assert (err.kind, err.retry_after) == (K.TRANSIENT, 5.0)


# -- the module itself -------------------------------------------------------------------

def test_the_client_never_waits_or_loops():
    source = inspect.getsource(rest)
    assert "sleep" not in source
    assert not re.search(r"while\s+(True|1)\b", source)


def test_imports_and_refuses_without_requests():
    script = textwrap.dedent("""
        import sys

        class Block:
            def find_spec(self, name, path=None, target=None):
                if name == "requests" or name.startswith("requests."):
                    raise ImportError("blocked for the test: " + name)
                return None

        sys.meta_path.insert(0, Block())
        from ansible_collections.gpuprov.cloud.plugins.module_utils.providers import rest
        assert rest.HAS_REQUESTS is False
        try:
            rest.RestClient("https://cloud.example.com/v1", name="lambda")
        except rest.ProviderError as err:
            print(err.kind)
            print(err.msg)
        else:
            raise SystemExit("constructed without requests")
    """)
    done = subprocess.run([sys.executable, "-c", script], env=dict(os.environ), capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    kind, msg = done.stdout.strip().split("\n", 1)
    assert kind == K.INVALID_REQUEST
    assert "requires requests" in msg and install_command("requests", "lambda") in msg
