# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Prime Intellect's error table, tried before the REST client's defaults (rest_errors.py).

Prime's API is FastAPI: errors carry ``detail``, a string, or for a 422 a list of
``{loc, msg, type}``; there is no machine-readable error code. Out of capacity has no
status of its own, so, as SkyPilot's adapter does, it is recognised by the message:

======================================================  =============================
status, message                                         kind (block)
======================================================  =============================
any 4xx/5xx, "insufficient balance/funds", "wallet",    Quota (cloud): the account
"payment", "billing", "credit"                          cannot pay, whatever the offer
any 4xx/5xx, "quota exceeded", "limit exceeded",        Quota (cloud): an account
"too many pods"                                         limit
4xx, "no capacity", "capacity", "out of stock",         Capacity (offer): the offer's
"insufficient", "not available", "unavailable",         provider has none now
"sold out", "no longer available"
5xx, "no capacity", "out of stock", "insufficient       Capacity (offer)
capacity", "sold out"
401, 403                                                Credentials (cloud) [default]
402                                                     Quota (cloud) [default]
400, 404, 422                                           InvalidRequest [default]
408, 425, 429 (Retry-After), 5xx                        Transient [default]
2xx body that is not the documented JSON                Failed [default]
======================================================  =============================

401/403 and 429 are never read by message: an expired key's text may say "not available".
On 5xx only unambiguous capacity words count: "Service Unavailable" is a plain outage.
"""

from __future__ import annotations

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import BlockScope, ErrorKind
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.rest import Rule

_FAILURES = [s for s in range(400, 600) if s not in (401, 403, 408, 425, 429)]
_CLIENT = [s for s in _FAILURES if s < 500]
_SERVER = [s for s in _FAILURES if s >= 500]

BILLING = r"insufficient (balance|funds|credits?)|wallet|payment|billing|out of credits?"
LIMITS = r"quota exceeded|limit exceeded|limit reached|too many (pods|instances)"
CAPACITY_4XX = (r"no capacity|capacity|out of stock|sold out|insufficient|not available|unavailable|"
                r"no longer available|no (gpus?|machines?|nodes?) available")
CAPACITY_5XX = r"no capacity|out of stock|sold out|insufficient capacity|no (gpus?|machines?|nodes?) available"

RULES = (
    Rule(ErrorKind.QUOTA, status=_FAILURES, message=BILLING, block=BlockScope.CLOUD),
    Rule(ErrorKind.QUOTA, status=_FAILURES, message=LIMITS, block=BlockScope.CLOUD),
    Rule(ErrorKind.CAPACITY, status=_CLIENT, message=CAPACITY_4XX, block=BlockScope.OFFER),
    Rule(ErrorKind.CAPACITY, status=_SERVER, message=CAPACITY_5XX, block=BlockScope.OFFER),
)
