# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The REST client's error model: the vendor's error body read into a code and a
message, and a per-cloud table of rules mapping HTTP status plus vendor code to an
ErrorKind (rest.py's RestClient raises what these classify)."""

from __future__ import annotations

import datetime
import email.utils
import json as jsonlib
import re
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    BlockScope, ErrorKind, ProviderError,
)

# The vendor code given to a body that is not the JSON the API documents.
MALFORMED_BODY = "gpuprov/malformed-body"
_EXCERPT_CHARS = 300
# A bare error string that reads as a code ("invalid_client", "global/not-found") is also the code.
_CODE_LIKE = re.compile(r"^[A-Za-z0-9_.:/-]{1,80}$")


class Rule:
    """One row of an error table: which failures it matches, and what they are.

    ``status``: None (any), an int, a collection of ints or a ``range``.
    ``code``: None (any), the vendor's error code exactly, or a compiled regular
    expression that must match the whole code. ``message``: None (any) or a regular
    expression searched case-insensitively in the vendor's message. A row matches
    when all of its given conditions do. ``block`` overrides the kind's default scope.
    """

    def __init__(self, kind: str, status: Any = None, code: Any = None, message: Optional[str] = None,
                 block: Optional[str] = None):
        if kind not in ErrorKind.ALL:
            raise ValueError("unknown error kind %r" % (kind,))
        if block is not None and block not in BlockScope.ALL:
            raise ValueError("unknown block scope %r" % (block,))
        self.kind = kind
        self.block = block
        if isinstance(status, int):
            status = (status,)
        self.status = status if status is None or isinstance(status, range) else frozenset(status)
        self.code = code
        self.message = re.compile(message, re.IGNORECASE) if message is not None else None

    def matches(self, status: Optional[int], code: Optional[str], message: str) -> bool:
        if self.status is not None and status not in self.status:
            return False
        if self.code is not None:
            if code is None:
                return False
            if isinstance(self.code, str) and self.code != code:
                return False
            if not isinstance(self.code, str) and not self.code.fullmatch(code):
                return False
        return self.message is None or bool(self.message.search(message or ""))

    def __repr__(self) -> str:
        return "Rule(%r, status=%r, code=%r, message=%r, block=%r)" % (
            self.kind, self.status, self.code, self.message.pattern if self.message else None, self.block)


DEFAULT_RULES: Tuple[Rule, ...] = (
    Rule(ErrorKind.FAILED, status=range(200, 300), code=MALFORMED_BODY),
    Rule(ErrorKind.INVALID_REQUEST, status=range(300, 400)),
    Rule(ErrorKind.INVALID_REQUEST, status=(400, 404, 422)),
    Rule(ErrorKind.CREDENTIALS, status=(401, 403), block=BlockScope.CLOUD),
    Rule(ErrorKind.QUOTA, status=402, block=BlockScope.CLOUD),
    Rule(ErrorKind.FAILED, status=409),
    Rule(ErrorKind.TRANSIENT, status=(408, 425, 429)),
    Rule(ErrorKind.TRANSIENT, status=range(500, 600)),
    Rule(ErrorKind.FAILED),
)


def classify(rules: Iterable[Rule], status: Optional[int], code: Optional[str],
             message: str) -> Tuple[str, Optional[str]]:
    """``(kind, block)`` of the first row of ``rules`` then DEFAULT_RULES that matches."""
    for rule in tuple(rules) + DEFAULT_RULES:
        if rule.matches(status, code, message):
            return rule.kind, rule.block
    return ErrorKind.FAILED, None  # unreachable: the last default row matches everything


class RestError(ProviderError):
    """A classified REST failure. ``status``/``code`` are None for transport failures;
    ``retry_after`` is the server's requested delay in seconds (None when it gave none)."""

    def __init__(self, kind: str, msg: str, block: Optional[str] = None, status: Optional[int] = None,
                 code: Optional[str] = None, retry_after: Optional[float] = None):
        super().__init__(kind, msg, block, rate_limited=status == 429)
        self.status = status
        self.code = code
        self.retry_after = retry_after

    def to_dict(self) -> Dict[str, Any]:
        data = super().to_dict()
        if self.retry_after is not None:
            data["retry_after"] = self.retry_after
        return data


def parse_retry_after(value: Optional[str], now: Optional[datetime.datetime] = None) -> Optional[float]:
    """Seconds to wait from a ``Retry-After`` value (delta seconds or an HTTP date); None if unreadable."""
    value = (value or "").strip()
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        seconds = None
    if seconds is not None:
        return seconds if 0 <= seconds < float("inf") else None
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.timezone.utc)
    now = now or datetime.datetime.now(datetime.timezone.utc)
    return max(0.0, (when - now).total_seconds())


# -- vendor error bodies -----------------------------------------------------------------

def _excerpt(text: Any) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= _EXCERPT_CHARS else text[:_EXCERPT_CHARS] + "..."


def _described(item: Any) -> str:
    """One error item: a string, {message|msg|detail, loc?}, or anything else as JSON."""
    if isinstance(item, dict):
        text = item.get("message") or item.get("msg") or item.get("detail")
        if text:
            loc = item.get("loc") or item.get("field") or item.get("path")
            if isinstance(loc, (list, tuple)):
                loc = ".".join(str(part) for part in loc)
            return "%s: %s" % (loc, text) if loc else str(text)
        return jsonlib.dumps(item, sort_keys=True)
    return str(item)


def _field_errors(fields: Dict[str, Any]) -> str:
    return "; ".join("%s: %s" % (name, ", ".join(map(str, msgs)) if isinstance(msgs, list) else msgs)
                     for name, msgs in sorted(fields.items()))


def _first_code(items: Sequence[Any]) -> Optional[str]:
    for item in items:
        if isinstance(item, dict):
            code = item.get("code") or (item.get("extensions") or {}).get("code")
            if code:
                return str(code)
    return None


def vendor_error(payload: Any) -> Tuple[Optional[str], str]:
    """``(code, message)`` of a vendor error body (decoded JSON, or text that was not JSON).

    Shapes read: ``{"error": {"code", "message", "suggestion"}}`` (Lambda),
    ``{"error": "..."}`` and OAuth2's ``{"error", "error_description"}``,
    ``{"message", "code" | "error_reason" | "id"}`` (Verda, Hyperstack, DigitalOcean),
    ``{"title", "detail", "errors"}`` (RFC 9457), ``{"detail": str | [{loc, msg}]}``
    (FastAPI), ``{"errors": [str | {message, extensions.code}]}`` (GraphQL), ``field_errors``.
    """
    if payload is None:
        return None, ""
    if isinstance(payload, list):
        return _first_code(payload), _excerpt("; ".join(_described(item) for item in payload))
    if not isinstance(payload, dict):
        return None, _excerpt(payload)
    code: Optional[str] = None
    parts: List[str] = []
    error = payload.get("error")
    if isinstance(error, dict):
        code = error.get("code") or error.get("type")
        parts += [error.get("message"), error.get("suggestion")]
    elif isinstance(error, str):
        if payload.get("error_description"):
            code = error
            parts.append(payload["error_description"])
        else:
            code = error if _CODE_LIKE.match(error) else None
            parts.append(error)
    if code is None:
        code = payload.get("code") or payload.get("error_code") or payload.get("error_reason")
    if code is None and isinstance(payload.get("id"), str) and payload.get("message"):
        code = payload["id"]  # DigitalOcean: {"id": "not_found", "message": ...}
    detail = payload.get("detail")
    if isinstance(detail, list):
        detail = "; ".join(_described(item) for item in detail)
    elif isinstance(detail, dict):
        detail = _described(detail)
    parts += [payload.get("title"), payload.get("message"), detail]
    errors = payload.get("errors")
    if isinstance(errors, list):
        code = code or _first_code(errors)
        parts.append("; ".join(_described(item) for item in errors))
    elif isinstance(errors, dict):
        parts.append(_field_errors(errors))
    if isinstance(payload.get("field_errors"), dict):
        parts.append(_field_errors(payload["field_errors"]))
    texts: List[str] = []
    for part in parts:
        if part and isinstance(part, str) and part not in texts:
            texts.append(part)
    message = "; ".join(texts) if texts else jsonlib.dumps(payload, sort_keys=True)
    return (str(code) if code not in (None, "") else None), _excerpt(message)
