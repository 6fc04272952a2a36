# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""GCP Compute error classification for the gcp adapter.

Errors reach us two ways: as an HTTP error on a call (JSON ``error.errors[].reason``,
e.g. ``quotaExceeded``, ``invalid``, ``forbidden``), or inside a completed zone
Operation (``error.errors[].code``, e.g. ``ZONE_RESOURCE_POOL_EXHAUSTED``, with
``httpErrorStatusCode``). Both are normalised to ``(status, items, message)`` and
fed to :func:`classify`, a pure function with one rule a row:

=====================================================  ===========================
code / reason (any item) or HTTP status                kind (block)
=====================================================  ===========================
RESOURCE_NOT_FOUND (operation) or 404 naming a         InvalidRequest (names it)
missing network, subnetwork, image or firewall
ZONE_RESOURCE_POOL_EXHAUSTED[_WITH_DETAILS],           Capacity (offer)
errorInfo.reason resource_availability,
RESOURCE_NOT_AVAILABLE, insufficientCapacity,
UNSUPPORTED_OPERATION, RESOURCE_NOT_FOUND (anything
else: SkyPilot sees it as a zone stockout),
message "does not have enough resources available"
QUOTA_EXCEEDED / quotaExceeded, a project-wide metric  Quota (cloud)
(GPUS_ALL_REGIONS, CPUS_ALL_REGIONS: ``*_ALL_REGIONS``)
QUOTA_EXCEEDED / quotaExceeded, any other metric       Quota (region)
rateLimitExceeded, userRateLimitExceeded,              Transient
RESOURCE_OPERATION_RATE_EXCEEDED, RESOURCE_NOT_READY,
backendError, internalError
IAM_PERMISSION_DENIED, forbidden, accessNotConfigured,  Credentials
SERVICE_DISABLED, authError, unauthorized
invalid, INVALID_FIELD_VALUE, badRequest,              InvalidRequest
invalidParameter, VPC_NOT_FOUND, SUBNET_NOT_FOUND_FOR_VPC
401, 403                                               Credentials
400                                                    InvalidRequest
404 "projects/<p>' was not found"                      InvalidRequest (project)
404                                                    Unavailable (offer)
408, 412, 429, 5xx, timeouts, connection errors        Transient
409                                                    Failed
anything else                                          Failed
=====================================================  ===========================

Rows are tried top to bottom, so a 403 ``quotaExceeded`` is Quota, a 403
``rateLimitExceeded`` Transient and a 503 ``ZONE_RESOURCE_POOL_EXHAUSTED`` Capacity.
"""

from __future__ import annotations

import re
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    BlockScope, ErrorKind, ProviderError,
)

CAPACITY_CODES = frozenset((
    "ZONE_RESOURCE_POOL_EXHAUSTED", "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS",
    "RESOURCE_NOT_AVAILABLE", "resourceNotAvailable", "insufficientCapacity",
    "UNSUPPORTED_OPERATION", "RESOURCE_NOT_FOUND",
))
CAPACITY_MESSAGES = ("does not have enough resources available", "is currently unavailable in the")
QUOTA_CODES = frozenset(("QUOTA_EXCEEDED", "quotaExceeded"))
TRANSIENT_CODES = frozenset((
    "rateLimitExceeded", "userRateLimitExceeded", "RESOURCE_OPERATION_RATE_EXCEEDED",
    "RESOURCE_NOT_READY", "resourceNotReady", "backendError", "internalError",
))
# Of TRANSIENT_CODES, those that say "this project asks too often": the fleet holds its calls (fleet/gate.py).
RATE_CODES = frozenset(("rateLimitExceeded", "userRateLimitExceeded", "RESOURCE_OPERATION_RATE_EXCEEDED"))
CREDENTIAL_CODES = frozenset((
    "IAM_PERMISSION_DENIED", "forbidden", "accessNotConfigured", "SERVICE_DISABLED",
    "authError", "unauthorized", "ACCESS_TOKEN_SCOPE_INSUFFICIENT", "PERMISSION_DENIED",
))
INVALID_CODES = frozenset((
    "invalid", "INVALID_FIELD_VALUE", "badRequest", "invalidParameter",
    "VPC_NOT_FOUND", "SUBNET_NOT_FOUND_FOR_VPC", "INVALID_USAGE",
))
# Exception class names (anywhere in the MRO) that mean "try again" or "bad credentials"
# when no HTTP status came back.
TRANSIENT_EXCEPTIONS = frozenset((
    "TimeoutError", "ConnectionError", "RetryError", "TransportError", "Timeout", "DeadlineExceeded",
))
CREDENTIAL_EXCEPTIONS = frozenset(("DefaultCredentialsError", "RefreshError", "MalformedError"))

_PROJECT_NOT_FOUND = re.compile(r"'projects/[^/'\s]+' was not found")
# Quotas that count the whole project, whichever region asks (GPUS_ALL_REGIONS, CPUS_ALL_REGIONS).
_PROJECT_WIDE_QUOTA = re.compile(r"\w[_-]all[_-]regions", re.I)
# A missing piece of our own configuration, by the path in "The resource '<path>' was not found":
# the field to fix. Anything else not found (an accelerator type, the instance) is the zone's.
_MISSING_CONFIG = (
    (re.compile(r"'[^'\s]*?(projects/[^'\s]*/(?:global/networks|regions/[^/'\s]+/subnetworks)/[^'\s]*)'"),
     "network"),
    (re.compile(r"'[^'\s]*?(projects/[^'\s]*/global/images/[^'\s]*)'"), "image_family"),
    (re.compile(r"'[^'\s]*?(projects/[^'\s]*/global/firewalls/[^'\s]*)'"), "firewall"),
)
RESOURCE_AVAILABILITY = "resource_availability"  # errorInfo.reason of a zone stockout (any case)


def classify(status: Optional[int], items: Iterable[Mapping[str, Any]], message: str = "",
             where: str = "gcp") -> ProviderError:
    """Map an HTTP status, the error items (``reason`` or ``code``, ``message``, optional
    ``quota_metric`` / ``quota_limit`` and ``error_reason`` from ``errorDetails``) and the top
    message to a ProviderError."""
    items = [dict(i) for i in items]
    codes = {str(i.get("code") or i.get("reason") or "") for i in items} | {
        str(i.get("reason") or "") for i in items}
    codes.discard("")
    detail = " ".join(str(i.get("message") or "") for i in items if i.get("message")).strip()
    text = (detail + " " + (message or "")).strip()
    if detail and message and message not in detail and detail not in message:
        detail = "%s (%s)" % (detail, message)
    summary = "%s: %s%s" % (where, ("%s: " % ",".join(sorted(codes))) if codes else "",
                            detail or message or "HTTP %s" % status)

    def err(kind, block=None):
        return ProviderError(kind, summary, block, rate_limited=bool(codes & RATE_CODES) or status == 429)

    if "RESOURCE_NOT_FOUND" in codes or "notFound" in codes or status == 404:
        for pattern, field in _MISSING_CONFIG:
            missing = pattern.search(text)
            if missing:
                return ProviderError(ErrorKind.INVALID_REQUEST, "%s: %s does not exist (%s)"
                                     % (field, missing.group(1), summary))
    reasons = {str(i.get("error_reason") or "").lower() for i in items}
    if codes & CAPACITY_CODES or RESOURCE_AVAILABILITY in reasons or any(m in text for m in CAPACITY_MESSAGES):
        return err(ErrorKind.CAPACITY)
    if codes & QUOTA_CODES:
        metrics = " ".join(str(i.get(k) or "") for i in items for k in ("quota_metric", "quota_limit"))
        if _PROJECT_WIDE_QUOTA.search(metrics + " " + text):
            return err(ErrorKind.QUOTA, BlockScope.CLOUD)
        return err(ErrorKind.QUOTA, BlockScope.REGION)
    if codes & TRANSIENT_CODES:
        return err(ErrorKind.TRANSIENT)
    if codes & CREDENTIAL_CODES:
        return err(ErrorKind.CREDENTIALS)
    if codes & INVALID_CODES:
        return err(ErrorKind.INVALID_REQUEST)
    if status in (401, 403):
        return err(ErrorKind.CREDENTIALS)
    if status == 400:
        return err(ErrorKind.INVALID_REQUEST)
    if status == 404:
        if _PROJECT_NOT_FOUND.search(text):
            return ProviderError(ErrorKind.INVALID_REQUEST, "project: " + summary)
        return err(ErrorKind.UNAVAILABLE)
    if status in (408, 412, 429) or (isinstance(status, int) and 500 <= status <= 599):
        return err(ErrorKind.TRANSIENT)
    return err(ErrorKind.FAILED)


def _item_from_obj(obj: Any) -> Dict[str, Any]:
    """An ``error.errors[]`` entry (dict from an HTTP body or an Operation's proto) as a dict."""
    if isinstance(obj, Mapping):
        item = dict(obj)
        details = item.pop("errorDetails", None) or item.pop("error_details", None) or []
    else:
        item = {"code": getattr(obj, "code", ""), "message": getattr(obj, "message", "")}
        details = list(getattr(obj, "error_details", None) or [])
    for detail in details:
        if isinstance(detail, Mapping):
            quota, info = detail.get("quotaInfo"), detail.get("errorInfo")
        else:
            quota, info = getattr(detail, "quota_info", None), getattr(detail, "error_info", None)
        if quota:
            if isinstance(quota, Mapping):
                item["quota_metric"], item["quota_limit"] = quota.get("metricName"), quota.get("limitName")
            else:
                item["quota_metric"], item["quota_limit"] = quota.metric_name, quota.limit_name
        if info:
            item["error_reason"] = info.get("reason") if isinstance(info, Mapping) else info.reason
    return item


def from_operation(op: Any) -> Optional[Tuple[Optional[int], List[Dict[str, Any]], str]]:
    """``(status, items, message)`` of a finished Operation that failed, else None."""
    errors = list(getattr(getattr(op, "error", None), "errors", None) or [])
    if not errors:
        return None
    status = getattr(op, "http_error_status_code", None) or None
    return status, [_item_from_obj(e) for e in errors], getattr(op, "http_error_message", "") or ""


def from_exception(exc: BaseException) -> Tuple[Optional[int], List[Dict[str, Any]], str]:
    """``(status, items, message)`` of a google.api_core GoogleAPICallError (duck-typed)."""
    status = getattr(exc, "code", None)
    status = status if isinstance(status, int) else None
    items = [_item_from_obj(e) for e in (getattr(exc, "errors", None) or [])]
    reason = getattr(exc, "reason", None)
    if isinstance(reason, str) and reason:
        items.append({"reason": reason})
    return status, items, str(getattr(exc, "message", None) or exc)


def classify_exception(exc: BaseException, where: str = "gcp") -> ProviderError:
    """Any exception out of the SDK as a ProviderError."""
    if isinstance(exc, ProviderError):
        return exc
    names = {cls.__name__ for cls in type(exc).__mro__}
    if "GoogleAPICallError" in names and isinstance(getattr(exc, "code", None), int):
        status, items, message = from_exception(exc)
        return classify(status, items, message, where)
    if names & CREDENTIAL_EXCEPTIONS:
        return ProviderError(ErrorKind.CREDENTIALS, "%s: %s" % (where, exc))
    if names & TRANSIENT_EXCEPTIONS or isinstance(exc, OSError):
        return ProviderError(ErrorKind.TRANSIENT, "%s: %s: %s" % (where, type(exc).__name__, exc))
    return ProviderError(ErrorKind.FAILED, "%s: %s: %s" % (where, type(exc).__name__, exc))


def classify_operation(op: Any, where: str = "gcp") -> Optional[ProviderError]:
    """The ProviderError of a finished, failed Operation, or None when it succeeded."""
    parsed = from_operation(op)
    return classify(*parsed, where=where) if parsed else None
