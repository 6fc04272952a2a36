# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Nebius's error table: a gRPC status code, refined by the ``nebius.common.v1.ServiceError``
details the API attaches (``grpc-status-details-bin``; the SDK parses them into
``RequestError.status.service_errors``), to an ErrorKind and block scope.

The first row that matches wins:

=====================  ==============================  ===========================================
gRPC code              ServiceError detail / message   kind (block)
=====================  ==============================  ===========================================
RESOURCE_EXHAUSTED     not_enough_resources            Capacity (offer): no hosts for the preset
RESOURCE_EXHAUSTED     quota_failure                   Quota (region): the project's quota
RESOURCE_EXHAUSTED     too_many_requests               Transient: rate limited
RESOURCE_EXHAUSTED     message "quota"                 Quota (region) (dstack's text match)
RESOURCE_EXHAUSTED     message "not enough resources"  Capacity (offer)
RESOURCE_EXHAUSTED     (anything else)                 Transient: the SDK itself retries it as a
                                                       rate limit
UNAUTHENTICATED        any                             Credentials (cloud)
PERMISSION_DENIED      any                             Credentials (cloud)
INVALID_ARGUMENT       any (bad_request violations)    InvalidRequest
OUT_OF_RANGE           any                             InvalidRequest
NOT_FOUND              any                             InvalidRequest (delete and observe treat
                                                       their own NOT_FOUND as gone)
ALREADY_EXISTS         any                             InvalidRequest (the name is another's)
UNIMPLEMENTED          any                             InvalidRequest
FAILED_PRECONDITION    bad_resource_state /            Transient: a resource still in use or
                       resource_conflict /             changing (a security group held by a
                       operation_conflict              deleting VM)
FAILED_PRECONDITION    (anything else)                 Failed (offer)
ABORTED                any                             Transient
UNAVAILABLE            any                             Transient
DEADLINE_EXCEEDED      any                             Transient (outcome unknown: the core
                                                       observes before repeating)
INTERNAL, UNKNOWN,     any                             Transient
CANCELLED, DATA_LOSS
(no gRPC status)       SDK/transport error, timeout    Transient
a reply without the    (create's operation without     Transient: outcome unknown
field the call needs   a resource_id)
=====================  ==============================  ===========================================

A finished Operation (``common.v1.Operation.status``, a google.rpc.Status whose details are
ServiceErrors; nebius/api common/v1/operation.proto: only OK, CANCELLED, PERMISSION_DENIED,
RESOURCE_EXHAUSTED, FAILED_PRECONDITION, ABORTED and INTERNAL) has its own table,
``OPERATION_RULES``: the operation is over, so nothing in it is Transient (retrying the call
cannot help the instance it left behind):

=====================  ==============================  ===========================================
operation status code  ServiceError detail / message   kind (block)
=====================  ==============================  ===========================================
RESOURCE_EXHAUSTED     not_enough_resources            Capacity (offer)
RESOURCE_EXHAUSTED     quota_failure                   Quota (region)
RESOURCE_EXHAUSTED     too_many_requests               Failed (offer): throttled inside, not full
RESOURCE_EXHAUSTED     message "quota"                 Quota (region)
RESOURCE_EXHAUSTED     (anything else)                 Capacity (offer): "Resource exhausted" is
                                                       how a create without hosts ends
PERMISSION_DENIED      any                             Credentials (cloud)
CANCELLED, ABORTED,    any                             Failed (offer)
FAILED_PRECONDITION,
INTERNAL, other
=====================  ==============================  ===========================================
"""

from __future__ import annotations

import re
from typing import Any, List, Optional, Tuple

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    BlockScope, ErrorKind, ProviderError,
)

K = ErrorKind
ANY = None

# (gRPC status code name, ServiceError detail field or ANY, message regex or ANY, kind, block)
RULES: Tuple[Tuple[Optional[str], Optional[str], Any, str, Optional[str]], ...] = (
    ("RESOURCE_EXHAUSTED", "not_enough_resources", ANY, K.CAPACITY, BlockScope.OFFER),
    ("RESOURCE_EXHAUSTED", "quota_failure", ANY, K.QUOTA, BlockScope.REGION),
    ("RESOURCE_EXHAUSTED", "too_many_requests", ANY, K.TRANSIENT, None),
    ("RESOURCE_EXHAUSTED", ANY, re.compile(r"quota", re.I), K.QUOTA, BlockScope.REGION),
    ("RESOURCE_EXHAUSTED", ANY, re.compile(r"not enough resources|capacity", re.I), K.CAPACITY, BlockScope.OFFER),
    ("RESOURCE_EXHAUSTED", ANY, ANY, K.TRANSIENT, None),
    ("UNAUTHENTICATED", ANY, ANY, K.CREDENTIALS, BlockScope.CLOUD),
    ("PERMISSION_DENIED", ANY, ANY, K.CREDENTIALS, BlockScope.CLOUD),
    ("INVALID_ARGUMENT", ANY, ANY, K.INVALID_REQUEST, None),
    ("OUT_OF_RANGE", ANY, ANY, K.INVALID_REQUEST, None),
    ("NOT_FOUND", ANY, ANY, K.INVALID_REQUEST, None),
    ("ALREADY_EXISTS", ANY, ANY, K.INVALID_REQUEST, None),
    ("UNIMPLEMENTED", ANY, ANY, K.INVALID_REQUEST, None),
    ("FAILED_PRECONDITION", "bad_resource_state", ANY, K.TRANSIENT, None),
    ("FAILED_PRECONDITION", "resource_conflict", ANY, K.TRANSIENT, None),
    ("FAILED_PRECONDITION", "operation_conflict", ANY, K.TRANSIENT, None),
    ("FAILED_PRECONDITION", ANY, ANY, K.FAILED, BlockScope.OFFER),
    ("ABORTED", ANY, ANY, K.TRANSIENT, None),
    ("UNAVAILABLE", ANY, ANY, K.TRANSIENT, None),
    ("DEADLINE_EXCEEDED", ANY, ANY, K.TRANSIENT, None),
    (ANY, ANY, ANY, K.TRANSIENT, None),
)


# The same shape, for the status of a finished Operation (see the second table above).
OPERATION_RULES: Tuple[Tuple[Optional[str], Optional[str], Any, str, Optional[str]], ...] = (
    ("RESOURCE_EXHAUSTED", "not_enough_resources", ANY, K.CAPACITY, BlockScope.OFFER),
    ("RESOURCE_EXHAUSTED", "quota_failure", ANY, K.QUOTA, BlockScope.REGION),
    ("RESOURCE_EXHAUSTED", "too_many_requests", ANY, K.FAILED, BlockScope.OFFER),
    ("RESOURCE_EXHAUSTED", ANY, re.compile(r"quota", re.I), K.QUOTA, BlockScope.REGION),
    ("RESOURCE_EXHAUSTED", ANY, ANY, K.CAPACITY, BlockScope.OFFER),
    ("PERMISSION_DENIED", ANY, ANY, K.CREDENTIALS, BlockScope.CLOUD),
    (ANY, ANY, ANY, K.FAILED, BlockScope.OFFER),
)


class NebiusError(ProviderError):
    """A classified Nebius failure that keeps the gRPC code and the ServiceError codes."""

    def __init__(self, kind: str, msg: str, block: Optional[str] = None, code: Optional[str] = None,
                 details: Optional[List[str]] = None):
        # gRPC's RESOURCE_EXHAUSTED with too_many_requests: Nebius's rate limit on this account.
        super().__init__(kind, msg, block, rate_limited="too_many_requests" in (details or []) and kind == "Transient")
        self.code = code
        self.details = list(details or [])


def classify(code: Optional[str], details: List[str], message: str,
             rules: Tuple[Tuple[Optional[str], Optional[str], Any, str, Optional[str]], ...] = RULES
             ) -> Tuple[str, Optional[str]]:
    """(kind, block) of a failure with gRPC ``code`` name, ServiceError detail fields and message,
    by the first row of ``rules`` (a call's ``RULES``, or a finished operation's ``OPERATION_RULES``)."""
    for rule_code, detail, pattern, kind, block in rules:
        if rule_code is not None and rule_code != code:
            continue
        if detail is not None and detail not in details:
            continue
        if pattern is not None and not pattern.search(message or ""):
            continue
        return kind, block
    return K.TRANSIENT, None


def from_exception(exc: BaseException, what: str) -> NebiusError:
    """The classified error of an exception the SDK raised while calling ``what``."""
    status = getattr(exc, "status", None)
    code_obj = getattr(status, "code", None)
    if code_obj is None or not hasattr(code_obj, "name"):
        kind, block = K.TRANSIENT, None
        return NebiusError(kind, "nebius %s: %s: %s" % (what, type(exc).__name__, _short(str(exc))), block)
    code = code_obj.name
    errors = list(getattr(status, "service_errors", None) or [])
    details = [e.details.field for e in errors if getattr(e, "details", None) is not None]
    message = getattr(status, "message", None) or ""
    # The full text (with each ServiceError's own summary) is what the SDK renders; keep it short.
    text = str(status)
    kind, block = classify(code, details, message + " " + text)
    return NebiusError(kind, "nebius %s: %s" % (what, _short(text)), block, code=code,
                       details=[e.code for e in errors])


def from_operation(operation: Any, what: str) -> Optional[NebiusError]:
    """The classified failure of a finished Operation (``OPERATION_RULES``), None while it runs
    (no status yet) or when it succeeded."""
    status = getattr(operation, "status", None)
    code_obj = getattr(status, "code", None)
    if status is None or code_obj is None or getattr(code_obj, "name", "OK") == "OK":
        return None
    errors = list(getattr(status, "service_errors", None) or [])
    details = [e.details.field for e in errors if getattr(e, "details", None) is not None]
    text = str(status)
    kind, block = classify(code_obj.name, details, (getattr(status, "message", None) or "") + " " + text,
                           OPERATION_RULES)
    msg = "nebius %s: operation %s failed: %s" % (what, getattr(operation, "id", "") or "?", _short(text))
    return NebiusError(kind, msg, block, code=code_obj.name, details=[e.code for e in errors])


def malformed(what: str, problem: str) -> NebiusError:
    return NebiusError(K.TRANSIENT, "nebius %s: %s (outcome unknown)" % (what, problem))


def _short(text: str, limit: int = 600) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "..."
