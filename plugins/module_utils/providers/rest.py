# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The REST client the marketplace adapters share (on ``requests``).

One :class:`RestClient` per adapter: a ``requests.Session`` with connect and read
timeouts, JSON in and out, and every failure raised as a classified
:class:`RestError` (a ``ProviderError``). It makes exactly the calls it is asked
for: it never waits between calls and never retries (the one exception: after a
401 it asks a refreshable auth such as :class:`ClientCredentialsToken` for a new
token and resends once, which the server cannot have acted on). Backoff belongs to
the core, which reads ``RestError.retry_after``.

Classification: the HTTP status, the vendor's error code and message go through
the adapter's rules (``rules=``), then :data:`DEFAULT_RULES`; the first
:class:`Rule` that matches decides the kind and the block scope:

=======================================  ============================================
status (and vendor code)                 kind (block)
=======================================  ============================================
2xx whose body is not the JSON           Failed (code ``MALFORMED_BODY``; an adapter
the API documents                        row on that code overrides it)
3xx                                      InvalidRequest: redirects are not followed
                                         (a redirect would carry the key elsewhere,
                                         and turns a POST into a GET); the message
                                         names the new address for ``api_url``
400, 404, 422                            InvalidRequest
401, 403                                 Credentials (cloud)
402 (payment required)                   Quota (cloud): the account, not the offer
409                                      Failed; adapters whose 409 means "busy" or
                                         "exists" add their own row
408, 425, 429, 5xx                       Transient, with ``retry_after`` from a
                                         ``Retry-After`` header (seconds or HTTP date)
any other status                         Failed
=======================================  ============================================

Transport failures: timeouts, refused or reset connections, proxy errors and TLS
handshakes cut short are Transient. A TLS certificate that does not verify is
Credentials (cloud): the endpoint's identity is what is wrong (a stale ``api_url``,
an intercepting proxy without its CA in ``REQUESTS_CA_BUNDLE`` / ``verify``), no
retry fixes it, and the key must not go to that endpoint. A malformed URL or an
unsendable header (a key with a newline) is InvalidRequest.

Secrets: the auth header is set per request (never on the session, never logged);
every message, repr and log line is scrubbed of the auth's secrets (plain, repr-
escaped and URL-quoted), and errors are raised outside ``except`` blocks so no
``requests`` exception (which holds the prepared request and its headers) is
chained to them.
"""

from __future__ import annotations

import json as jsonlib
import logging
import ssl
import time
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Tuple, Union
from urllib.parse import parse_qsl, quote, urljoin, urlsplit

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    BlockScope, ErrorKind, ProviderError,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.paging import DEFAULT_MAX_PAGES, Listing
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.rest_auth import (
    REDACTED, BasicAuth, BearerToken, HeaderToken, secret_value,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.rest_errors import (
    DEFAULT_RULES, MALFORMED_BODY, Rule, RestError, _EXCERPT_CHARS, _excerpt, classify, parse_retry_after, vendor_error,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.requirements import missing_package

# The error model lives in rest_errors.py and the static auths in rest_auth.py; adapters import them from here
# with the client.
__all__ = ("DEFAULT_RULES", "MALFORMED_BODY", "Rule", "RestError", "classify", "parse_retry_after",
           "vendor_error", "RestClient", "BearerToken", "HeaderToken", "BasicAuth", "ClientCredentialsToken",
           "TOKEN_RULES", "NextLink", "Cursor", "PageNumber")

try:
    import requests
    HAS_REQUESTS = True
    REQUESTS_IMPORT_ERROR = None
except ImportError as _exc:  # ansible-test sanity imports module_utils without third-party packages
    requests = None
    HAS_REQUESTS = False
    REQUESTS_IMPORT_ERROR = _exc

_LOG = logging.getLogger(__name__)

DEFAULT_TIMEOUT = (10.0, 60.0)      # (connect, read) seconds
DEFAULT_USER_AGENT = "gpuprov.cloud (+https://github.com/gpuprov/cloud)"
_REDACTED = REDACTED

Timeout = Union[float, Tuple[float, float]]


_MISSING = object()


def _dig(body: Any, dotted: str, missing: Any = None) -> Any:
    """``body["a"]["b"]`` for ``"a.b"``; ``missing`` where a level is absent."""
    for key in dotted.split("."):
        if not isinstance(body, dict) or key not in body:
            return missing
        body = body[key]
    return body


# -- auth (the static kinds: rest_auth.py) ------------------------------------------------

# The token endpoint answers a bad client id or secret with 400 or 401 (RFC 6749 5.2):
# either way the credentials are wrong, never the request.
TOKEN_RULES = (
    Rule(ErrorKind.TRANSIENT, status=(408, 425, 429)),
    Rule(ErrorKind.CREDENTIALS, status=range(400, 500), block=BlockScope.CLOUD),
)


class ClientCredentialsToken:
    """OAuth2 client-credentials access tokens (Verda), usable as a RestClient's auth.

    The token is fetched on first use with ``grant_type=client_credentials`` and the
    client id and secret in the body (JSON, or a form with ``body_format="form"``),
    kept until ``refresh_margin_s`` before its ``expires_in`` (or until a 401 when the
    endpoint gives no lifetime), then fetched again. A new client-credentials grant
    replaces the refresh-token grant: it needs nothing more and cannot go stale.
    """

    refreshable = True

    def __init__(self, token_url: str, client_id: str, client_secret: str, scope: Optional[str] = None,
                 body_format: str = "json", timeout: Timeout = DEFAULT_TIMEOUT, verify: Union[bool, str] = True,
                 user_agent: str = DEFAULT_USER_AGENT, refresh_margin_s: float = 60.0, name: str = "oauth2"):
        if body_format not in ("json", "form"):
            raise ValueError("body_format: expected 'json' or 'form', got %r" % (body_format,))
        self._client_id = secret_value(client_id, "client_id")
        self._client_secret = secret_value(client_secret, "client_secret")
        self._scope = scope
        self._body_format = body_format
        self._refresh_margin_s = float(refresh_margin_s)
        self._access_token: Optional[str] = None
        self._expires_at: Optional[float] = None
        self._client = RestClient(token_url, name="%s token" % name, rules=TOKEN_RULES, timeout=timeout,
                                  verify=verify, user_agent=user_agent,
                                  redact=(self._client_id, self._client_secret))

    def _fresh(self) -> bool:
        return self._access_token is not None and (self._expires_at is None or time.monotonic() < self._expires_at)

    def _fetch(self) -> None:
        grant = {"grant_type": "client_credentials", "client_id": self._client_id,
                 "client_secret": self._client_secret}
        if self._scope:
            grant["scope"] = self._scope
        if self._body_format == "json":
            body = self._client.post("", json=grant)
        else:
            body = self._client.post("", form=grant)
        token = body.get("access_token") if isinstance(body, dict) else None
        if not isinstance(token, str) or not token.strip():
            raise RestError(ErrorKind.CREDENTIALS, "%s: the token response has no access_token" % self._client.name,
                            BlockScope.CLOUD, status=200)
        try:
            lifetime = float(body.get("expires_in"))
        except (TypeError, ValueError):
            lifetime = None
        self._access_token = token.strip()
        self._expires_at = None if lifetime is None else time.monotonic() + lifetime - self._refresh_margin_s

    def headers(self) -> Dict[str, str]:
        if not self._fresh():
            self._fetch()
        return {"Authorization": "Bearer %s" % self._access_token}

    def invalidate(self) -> None:
        """Forget the token (the API refused it): the next request fetches a new one."""
        self._access_token = None
        self._expires_at = None

    def secrets(self) -> Tuple[str, ...]:
        return tuple(s for s in (self._client_id, self._client_secret, self._access_token) if s)

    def close(self) -> None:
        self._client.close()

    def __repr__(self) -> str:
        return "ClientCredentialsToken(%r, client_id=%s)" % (self._client.base_url, _REDACTED)


# -- pagination --------------------------------------------------------------------------
# Each paging says how to ask for the first page (start), which page follows (follow), and how
# many items the API reports in all (total, from ``total_field`` where it has one). When the
# listing ends is paging.Listing's rule, the same for every paginator.

class _Paging:
    total_field: Optional[str] = None

    def total(self, body: Any) -> Any:
        """The count of all the listing's items the body reports (None where it reports none)."""
        return _dig(body, self.total_field) if self.total_field else None


class NextLink(_Paging):
    """Follow a link in the body (DigitalOcean: ``links.pages.next``); the link carries the query."""

    def __init__(self, field: str = "links.pages.next", total_field: Optional[str] = None):
        self.field = field
        self.total_field = total_field

    def start(self, params: Dict[str, Any]) -> Dict[str, Any]:
        return params

    def follow(self, body: Any, url: str, params: Dict[str, Any], page: List[Any],
               fetched: int) -> Optional[Tuple[str, Dict[str, Any]]]:
        link = _dig(body, self.field)
        return (urljoin(url, link), {}) if isinstance(link, str) and link else None


class Cursor(_Paging):
    """Send the body's ``field`` back as the ``param`` query parameter until it is empty."""

    def __init__(self, field: str, param: str, total_field: Optional[str] = None):
        self.field = field
        self.param = param
        self.total_field = total_field

    def start(self, params: Dict[str, Any]) -> Dict[str, Any]:
        return params

    def follow(self, body: Any, url: str, params: Dict[str, Any], page: List[Any],
               fetched: int) -> Optional[Tuple[str, Dict[str, Any]]]:
        cursor = _dig(body, self.field)
        if cursor in (None, "", False):
            return None
        return url, dict(params, **{self.param: cursor})

    def __repr__(self) -> str:
        return "Cursor(%r, %r)" % (self.field, self.param)


class PageNumber(_Paging):
    """``?page=N`` from ``first``; stops at an empty or short page, or when ``total_field`` items came."""

    def __init__(self, param: str = "page", size_param: Optional[str] = None, size: Optional[int] = None,
                 first: int = 1, total_field: Optional[str] = None):
        self.param = param
        self.size_param = size_param
        self.size = size
        self.first = first
        self.total_field = total_field

    def start(self, params: Dict[str, Any]) -> Dict[str, Any]:
        params = dict(params, **{self.param: self.first})
        if self.size_param and self.size:
            params[self.size_param] = self.size
        return params

    def follow(self, body: Any, url: str, params: Dict[str, Any], page: List[Any],
               fetched: int) -> Optional[Tuple[str, Dict[str, Any]]]:
        if not page or (self.size and len(page) < self.size):
            return None
        total = _dig(body, self.total_field) if self.total_field else None
        if isinstance(total, int) and fetched >= total:
            return None
        return url, dict(params, **{self.param: int(params[self.param]) + 1})


# -- the client --------------------------------------------------------------------------

def _no_netrc(prepared):
    """requests falls back to ~/.netrc credentials when a request has no auth; ours is in the headers."""
    return prepared


def _cert_not_verified(exc: BaseException) -> bool:
    """Whether a requests SSLError comes from certificate verification (not a cut handshake)."""
    pending, seen = [exc], set()
    for _step in range(16):  # bounded walk of args / reason / cause chains
        if not pending:
            break
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, ssl.SSLCertVerificationError):
            return True
        pending += [a for a in getattr(current, "args", ()) if isinstance(a, BaseException)]
        pending += [c for c in (getattr(current, "reason", None), current.__cause__, current.__context__)
                    if isinstance(c, BaseException)]
    return "CERTIFICATE_VERIFY_FAILED" in str(exc)


class RestClient:
    """JSON over HTTP for one adapter: ``get``/``post``/``put``/``patch``/``delete`` return the
    decoded body (None for 204 or an empty body) or raise a classified RestError.

    ``base_url``: the vendor's API root (the adapter's ``api_url`` option); paths are joined
    to it. ``auth``: BearerToken, HeaderToken, BasicAuth, ClientCredentialsToken or None.
    ``name``: the cloud, first word of every message. ``rules``: the cloud's error table,
    tried before DEFAULT_RULES. ``timeout``: seconds, or ``(connect, read)``. ``verify``:
    TLS verification (False, or a CA bundle path). ``headers``: sent with every request.
    ``redact``: more strings never to show (the auth's secrets always are). ``before_send``: called
    before every request (the adapter's ``Provider.paced``); it may raise to make the step wait.
    """

    def __init__(self, base_url: str, auth: Any = None, name: str = "api", rules: Iterable[Rule] = (),
                 timeout: Timeout = DEFAULT_TIMEOUT, user_agent: str = DEFAULT_USER_AGENT,
                 verify: Union[bool, str] = True, headers: Optional[Dict[str, str]] = None,
                 redact: Iterable[str] = (), before_send: Optional[Callable[[], None]] = None):
        if not HAS_REQUESTS:
            raise ProviderError(ErrorKind.INVALID_REQUEST, "%s: the REST client requires requests. %s (%s)"
                                % (name, missing_package("requests", name), REQUESTS_IMPORT_ERROR))
        parts = urlsplit(base_url if isinstance(base_url, str) else "")
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ProviderError(ErrorKind.INVALID_REQUEST,
                                "%s: api_url: expected an http(s) URL, got %r" % (name, base_url))
        if parts.username or parts.password or parts.query or parts.fragment:
            # Not echoed: whatever sits there may be a key.
            raise ProviderError(ErrorKind.INVALID_REQUEST, "%s: api_url: credentials, a query or a fragment in the "
                                "URL are not supported; give the key as api_key" % name)
        self.base_url = base_url
        self.name = name
        self.rules = tuple(rules)
        self._before_send = before_send   # Provider.paced: the fleet's pacing, before every request
        self.timeout = _timeouts(timeout)
        self._auth = auth
        self._redact = tuple(s for s in redact if s)
        self._origin = (parts.scheme, parts.netloc.lower())
        self._session = requests.Session()
        self._session.verify = verify
        self._session.headers.update({"User-Agent": user_agent, "Accept": "application/json"})
        self._session.headers.update(headers or {})

    # -- public calls ----------------------------------------------------------------
    def get(self, path: str, params: Optional[Dict[str, Any]] = None, **kwargs) -> Any:
        return self.request("GET", path, params=params, **kwargs)

    def post(self, path: str, json: Any = None, **kwargs) -> Any:
        return self.request("POST", path, json=json, **kwargs)

    def put(self, path: str, json: Any = None, **kwargs) -> Any:
        return self.request("PUT", path, json=json, **kwargs)

    def patch(self, path: str, json: Any = None, **kwargs) -> Any:
        return self.request("PATCH", path, json=json, **kwargs)

    def delete(self, path: str, json: Any = None, **kwargs) -> Any:
        return self.request("DELETE", path, json=json, **kwargs)

    def request(self, method: str, path: str, params: Optional[Dict[str, Any]] = None, json: Any = None,
                form: Optional[Dict[str, Any]] = None, headers: Optional[Dict[str, str]] = None,
                expect: str = "json", allow_status: Iterable[int] = ()) -> Any:
        """One call. ``expect="text"`` returns a 2xx body as text (Verda answers some POSTs with a
        bare id). A status in ``allow_status`` returns None instead of raising (a 404 on a delete
        of something already gone)."""
        if expect not in ("json", "text"):
            raise ValueError("expect: 'json' or 'text', got %r" % (expect,))
        url = self._resolve(path)
        response = self._send(method, url, params, json, form, headers)
        if response.status_code == 401 and getattr(self._auth, "refreshable", False):
            self._auth.invalidate()
            response = self._send(method, url, params, json, form, headers)
        return self._decode(method, url, response, expect, frozenset(allow_status))

    def paginate(self, path: str, items: Optional[str] = None, paging: Any = None,
                 params: Optional[Dict[str, Any]] = None, headers: Optional[Dict[str, str]] = None,
                 max_pages: int = DEFAULT_MAX_PAGES) -> Iterator[Any]:
        """Yield the items of every page of a GET listing, with no pause between pages, each
        item once.

        ``items``: where the list sits in each body (dotted, e.g. ``"droplets"``; None when
        the body is the list). ``paging``: NextLink (default), Cursor or PageNumber (or any
        object with their ``start``/``follow`` and, optionally, ``total``). The listing ends
        by paging.Listing's rule: no next page, the total the API reports reached, or a page
        (or next page) that repeats one already fetched, the server ignoring the page query
        (Failed if its total has not come). More than ``max_pages`` pages is Failed; a next
        link to another host is refused (it would carry the key there).
        """
        paging = paging or NextLink()
        url, query = self._resolve(path), paging.start(dict(params or {}))
        listing = Listing("%s GET %s" % (self.name, urlsplit(url).path), max_pages=max_pages,
                          first=_page_key(url, query),
                          error=lambda message: RestError(ErrorKind.FAILED, self._scrub(message)))
        total = getattr(paging, "total", None)
        for _page_number in range(max_pages):  # bounded: listing.more fails past the last page allowed
            body = self.request("GET", url, params=query, headers=headers)
            page = _dig(body, items, _MISSING) if items else body
            if page is None:
                page = []  # an explicit null list is an empty page; a missing one is malformed
            if not isinstance(page, list):
                raise self._error("GET", url, 200, "expected a list at %r, got %s"
                                  % (items or "the body", jsonlib.dumps(body)[:_EXCERPT_CHARS]), code=MALFORMED_BODY)
            yield from listing.add(page)
            following = paging.follow(body, url, query, page, listing.count)
            if following is not None:
                url, query = self._resolve(following[0]), following[1]
            if not listing.more(None if following is None else _page_key(url, query),
                                total=total(body) if callable(total) else None):
                return

    def error_for(self, status: Optional[int], payload: Any, method: str = "GET", path: str = "",
                  retry_after: Optional[float] = None) -> RestError:
        """The classified error for a status and a decoded error body: for APIs that report
        errors inside a 2xx (GraphQL's ``errors``)."""
        return self._error(method, self._resolve(path), status, payload, retry_after=retry_after)

    def close(self) -> None:
        self._session.close()
        if hasattr(self._auth, "close"):
            self._auth.close()

    def __enter__(self) -> "RestClient":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def __repr__(self) -> str:
        return self._scrub("RestClient(name=%r, base_url=%r, auth=%r)" % (self.name, self.base_url, self._auth))

    # -- internals -------------------------------------------------------------------
    def _secrets(self) -> Tuple[str, ...]:
        found = tuple(self._auth.secrets()) if self._auth is not None else ()
        return tuple(sorted({s for s in found + self._redact if s}, key=len, reverse=True))

    def _scrub(self, text: str) -> str:
        for secret in self._secrets():
            for form in (secret, repr(secret)[1:-1], quote(secret, safe="")):
                text = text.replace(form, _REDACTED)
        return text

    def _resolve(self, path: str) -> str:
        """``path`` joined to the base URL, or an absolute URL on the base URL's own origin."""
        parts = urlsplit(path)
        if not parts.scheme:
            return self.base_url.rstrip("/") + "/" + path.lstrip("/") if path else self.base_url
        if (parts.scheme, parts.netloc.lower()) != self._origin:
            raise RestError(ErrorKind.FAILED, self._scrub(
                "%s: refusing to send the key to %s://%s (not the api_url's host)"
                % (self.name, parts.scheme, parts.netloc)))
        return path

    def _send(self, method: str, url: str, params: Any, body: Any, form: Any, headers: Any):
        if self._before_send is not None:
            self._before_send()
        call_headers = dict(headers or {})
        if self._auth is not None:
            call_headers.update(self._auth.headers())
        path = urlsplit(url).path
        failure = None
        try:
            response = self._session.request(method, url, params=params, json=body, data=form,
                                             headers=call_headers, timeout=self.timeout, allow_redirects=False,
                                             auth=_no_netrc)
        except requests.exceptions.RequestException as exc:
            failure = self._transport_error(method, path, exc)
        if failure is not None:
            # Raised here, outside the except block: the requests exception (which holds
            # the prepared request and its auth header) is not chained to it.
            _LOG.debug("%s", failure.msg)
            raise failure
        _LOG.debug("%s %s %s -> HTTP %s", self.name, method, path, response.status_code)
        return response

    def _transport_error(self, method: str, path: str, exc: BaseException) -> RestError:
        rexc = requests.exceptions
        where = "%s %s %s" % (self.name, method, path)
        if isinstance(exc, rexc.SSLError) and _cert_not_verified(exc):
            kind, block = ErrorKind.CREDENTIALS, BlockScope.CLOUD
            why = ("the TLS certificate does not verify (%s); check api_url, or give the proxy's CA "
                   "(REQUESTS_CA_BUNDLE)" % _excerpt(exc))
        elif isinstance(exc, rexc.Timeout):
            kind, block = ErrorKind.TRANSIENT, None
            why = "timed out (connect %gs, read %gs): %s" % (self.timeout + (_excerpt(exc),))
        elif isinstance(exc, rexc.InvalidHeader):
            # Its text quotes the header value, which may be the key itself.
            kind, block = ErrorKind.INVALID_REQUEST, None
            why = "a request header cannot be sent (a key with spaces or a newline inside?)"
        elif isinstance(exc, (rexc.InvalidURL, rexc.MissingSchema, rexc.InvalidSchema, rexc.URLRequired)):
            kind, block = ErrorKind.INVALID_REQUEST, None
            why = "bad URL: %s" % _excerpt(exc)
        elif isinstance(exc, (rexc.ConnectionError, rexc.ChunkedEncodingError, rexc.ContentDecodingError)):
            kind, block = ErrorKind.TRANSIENT, None
            why = "%s: %s" % (type(exc).__name__, _excerpt(exc))
        else:
            kind, block = ErrorKind.FAILED, None
            why = "%s: %s" % (type(exc).__name__, _excerpt(exc))
        return RestError(kind, self._scrub("%s: %s" % (where, why)), block)

    def _decode(self, method: str, url: str, response: Any, expect: str, allow_status: frozenset) -> Any:
        status = response.status_code
        content = response.content or b""
        if status in allow_status:
            return None
        if 200 <= status < 300:
            if status == 204 or not content.strip():
                return None
            if expect == "text":
                return content.decode(response.encoding or "utf-8", "replace")
            try:
                return jsonlib.loads(content)
            except ValueError:
                pass
            # Raised outside the except block: the decode error holds the whole body.
            raise self._error(method, url, status, _excerpt(content.decode("utf-8", "replace")), code=MALFORMED_BODY)
        try:
            payload = jsonlib.loads(content) if content.strip() else None
        except ValueError:
            payload = content.decode("utf-8", "replace")
        if 300 <= status < 400:
            target = urlsplit(response.headers.get("Location") or "")
            payload = "moved to %s://%s%s; set api_url to the new address" % (target.scheme, target.netloc,
                                                                              target.path)
        retry_after = parse_retry_after(response.headers.get("Retry-After"))
        raise self._error(method, url, status, payload, retry_after=retry_after)

    def _error(self, method: str, url: str, status: Optional[int], payload: Any, code: Optional[str] = None,
               retry_after: Optional[float] = None) -> RestError:
        vendor_code, message = vendor_error(payload)
        code = code or vendor_code
        kind, block = classify(self.rules, status, code, message)
        if kind != ErrorKind.TRANSIENT:
            retry_after = None
        text = "%s %s %s: HTTP %s%s: %s" % (self.name, method, urlsplit(url).path, status,
                                            (" " + code) if code else "", message or "(empty body)")
        if retry_after is not None:
            text += " (retry after %gs)" % retry_after
        return RestError(kind, self._scrub(text), block, status=status, code=code, retry_after=retry_after)


def _page_key(url: str, query: Dict[str, Any]) -> Tuple[str, Tuple[Tuple[str, str], ...]]:
    """A page's identity: its URL without the query, and the query (the URL's and ``query``'s
    parameters together, as requests sends them), sorted."""
    parts = urlsplit(url)
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    for name, value in (query or {}).items():
        for one in (value if isinstance(value, (list, tuple)) else [value]):
            if one is not None:
                pairs.append((str(name), str(one)))
    return parts._replace(query="", fragment="").geturl(), tuple(sorted(pairs))


def _timeouts(timeout: Timeout) -> Tuple[float, float]:
    pair = timeout if isinstance(timeout, (tuple, list)) else (timeout, timeout)
    try:
        connect, read = (float(t) for t in pair)
    except (TypeError, ValueError):
        connect = read = -1.0
    if connect <= 0 or read <= 0:
        raise ProviderError(ErrorKind.INVALID_REQUEST,
                            "timeout: expected seconds > 0 or a (connect, read) pair, got %r" % (timeout,))
    return connect, read
