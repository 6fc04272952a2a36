# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""DigitalOcean's error table: HTTP status plus the ``id`` and ``message`` of its error
body ``{"id", "message", "request_id"?}`` -> ErrorKind and block.

DigitalOcean's ``id`` only mirrors the status (``unprocessable_entity`` for every 422), so
the droplet-create refusals are told apart by their message text, as DigitalOcean's own
clients (Terraform, doctl) print it. Rows are tried before rest_errors.DEFAULT_RULES,
which covers the rest: 401/403 -> Credentials (cloud: a bad or expired token, or a scoped
token without the scope), 429/5xx -> Transient with Retry-After (DigitalOcean sends
``retry-after`` with a burst-limit 429), 400/404/422 -> InvalidRequest, 3xx -> InvalidRequest.

===============================================================  ======  ==========================
message (case-insensitive search)                                HTTP    kind (block)
===============================================================  ======  ==========================
"Size is not available in this region."                          422     Capacity (offer)
"This size is unavailable" / "size is unavailable"               422     Capacity (offer)
"Region is not available" (creates paused in a region)           422     Capacity (region)
"... will exceed your droplet limit"                             422     Quota (cloud: the
                                                                         account's droplet limit)
"This size is currently restricted ... additional payment"       422     Quota (cloud): billing
"... are invalid key identifiers for Droplet creation."          422     Failed (offer): the next
                                                                         offer prepares afresh
"... already has a pending event" / "destroy is already in       422     Transient: an action on
progress"                                                                the droplet is running
id ``too_many_requests``                                         429     Transient: retry-after (the
                                                                         burst limit), else the
                                                                         ``ratelimit-reset`` time (the
                                                                         hourly limit sends only that)
id ``server_error`` and any 5xx                                  5xx     Transient
a 2xx body that is not the documented JSON                       2xx     Transient: the outcome is
                                                                         unknown, the core observes
===============================================================  ======  ==========================
"""

from __future__ import annotations

import math
from typing import Optional

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import BlockScope, ErrorKind
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.rest import MALFORMED_BODY, Rule

UNPROCESSABLE = "unprocessable_entity"
NOT_FOUND = "not_found"

SIZE_NOT_IN_REGION = r"size is not available in this region"
SIZE_UNAVAILABLE = r"size is unavailable"
REGION_UNAVAILABLE = r"region is not available"
DROPLET_LIMIT = r"exceed your droplet limit"
SIZE_RESTRICTED = r"size is currently restricted|additional payment to unlock"
INVALID_KEYS = r"invalid key identifiers"
PENDING_EVENT = r"already has a pending event|destroy is already in progress"
KEY_IN_USE = r"ssh key is already in use"

RULES = (
    Rule(ErrorKind.TRANSIENT, status=range(200, 300), code=MALFORMED_BODY),
    Rule(ErrorKind.CAPACITY, status=422, message=SIZE_NOT_IN_REGION, block=BlockScope.OFFER),
    Rule(ErrorKind.CAPACITY, status=422, message=SIZE_UNAVAILABLE, block=BlockScope.OFFER),
    Rule(ErrorKind.CAPACITY, status=422, message=REGION_UNAVAILABLE, block=BlockScope.REGION),
    Rule(ErrorKind.QUOTA, status=422, message=DROPLET_LIMIT, block=BlockScope.CLOUD),
    Rule(ErrorKind.QUOTA, status=422, message=SIZE_RESTRICTED, block=BlockScope.CLOUD),
    Rule(ErrorKind.FAILED, status=422, message=INVALID_KEYS, block=BlockScope.OFFER),
    Rule(ErrorKind.TRANSIENT, status=422, message=PENDING_EVENT),
)

# The hourly limit's window: a ratelimit-reset further ahead than this is not believed.
RATE_LIMIT_WINDOW_S = 3600.0


def retry_after_from_reset(value: Optional[str], now: float) -> Optional[float]:
    """Seconds to wait from DigitalOcean's ``ratelimit-reset`` header (the Unix time its oldest
    counted request expires): at least 1 s, at most the hour the limit spans; None if unreadable."""
    try:
        reset = float((value or "").strip())
    except ValueError:
        return None
    if not math.isfinite(reset):   # "nan", "inf"
        return None
    return min(max(reset - now, 1.0), RATE_LIMIT_WINDOW_S)
