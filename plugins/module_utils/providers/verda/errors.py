# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Verda's error table: the HTTP status, the body's ``code`` and its ``message`` -> ErrorKind.

Verda answers every failure with ``{"code": ..., "message": ...}`` (HTTP >= 400). Its API
reference (api.verda.com/v1/docs, "Errors") lists the codes with their statuses:
invalid_request 400, unauthorized_request 401, insufficient_funds 402, forbidden_action
403, not_found 404, rate_limit_exceeded 429 (with ``Retry-After``), server_error 500 and
service_unavailable 503, "Not enough resources at the moment, try again later or use a
different resource": that is out of capacity (``POST /v1/instances`` documents its 503 as
"The requested instance type has no capacity in the selected location"), as is a message
"not enough resources" (brevdev/cloud) or "no capacity" under any code. An instance the API
accepted can also end in status ``no_capacity``, which ``observe`` reports as Failed. Rows
are tried in order, then rest.DEFAULT_RULES (3xx/400/404/422 InvalidRequest, 401/403
Credentials, 402 Quota, 408/425/429/5xx Transient with Retry-After, a malformed 2xx body
Failed). A 429 is never read by its message: "Rate limit exceeded" is no account quota.
"""

from __future__ import annotations

import re

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import BlockScope, ErrorKind
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.rest import Rule

# Messages of a delete whose instance is already gone (dstack's Verda backend): success.
GONE_MESSAGE = re.compile(r"invalid instance id|can't discontinue a discontinued instance|instance not found",
                          re.IGNORECASE)

RULES = (
    # Throttled (rate_limit_exceeded): wait Retry-After and ask again, whatever the message says.
    Rule(ErrorKind.TRANSIENT, status=429),
    Rule(ErrorKind.TRANSIENT, code="rate_limit_exceeded"),
    # Out of stock, whatever the status and code: the next offer may have it.
    Rule(ErrorKind.CAPACITY, status=range(400, 600), message=r"not enough resources|no capacity"),
    Rule(ErrorKind.CAPACITY, code="service_unavailable"),
    # The image cannot run on this instance type (A6000 and V100 refuse newer images):
    # another type may take it, nothing was made.
    Rule(ErrorKind.UNAVAILABLE, status=range(400, 500), message=r"operating system is not valid"),
    # Verda refuses to delete an instance while it is still provisioning: ask again later.
    Rule(ErrorKind.TRANSIENT, status=range(400, 500), message=r"provisioning instance"),
    # The account's balance: no offer of this cloud can be paid for.
    Rule(ErrorKind.QUOTA, code="insufficient_funds", block=BlockScope.CLOUD),
    Rule(ErrorKind.QUOTA, status=range(400, 500), message=r"quota|limit exceeded"),
    # A bad or expired token (the client already fetched a new one once after a 401).
    Rule(ErrorKind.CREDENTIALS, code="unauthorized_request", block=BlockScope.CLOUD),
    # An action the account or the instance's state does not allow: this offer fails,
    # the next one may not (never abort the whole search on it).
    Rule(ErrorKind.FAILED, code="forbidden_action"),
    Rule(ErrorKind.INVALID_REQUEST, code="invalid_request"),
    Rule(ErrorKind.INVALID_REQUEST, code="not_found"),
    Rule(ErrorKind.TRANSIENT, code="server_error"),
)
