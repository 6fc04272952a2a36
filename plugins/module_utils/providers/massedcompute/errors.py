# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Massed Compute's error table: HTTP status plus the words of the error message ->
ErrorKind and block.

Massed Compute publishes no error schema and no error codes (its OpenAPI spec lists only
2xx answers), so the rows read the status and the message, as brevdev's provider does
("capacity"/"out of stock" -> capacity, "quota"/"limit exceeded" -> quota). 402 is the
vendor's answer to a launch on an account whose billing is not configured, and "Product
does not support the VM Image" its answer to an image the product cannot boot (both from
its launch skill, Massed-Compute/massed-compute-agent-plugin mc-launch-vms). Rows are tried before rest_errors.DEFAULT_RULES, which answers the rest: 401/403
-> Credentials (a read-only key writing included), 400/404/422 -> InvalidRequest,
408/425/5xx -> Transient with Retry-After.

====================================================  =========  ===============================
message (case-insensitive)                            HTTP       kind (block)
====================================================  =========  ===============================
(any)                                                 429        Transient, Retry-After (first:
                                                                 "rate limit exceeded" is not
                                                                 a quota)
capacity, out of stock, sold out, no inventory,       4xx        Capacity (offer: product x
insufficient inventory                                           region)
quota, limit exceeded, limit reached, maximum         4xx        Quota (cloud: the account)
number of instances
billing, balance, insufficient funds, payment         4xx        Quota (cloud: the account)
(any)                                                 402        Quota (cloud): billing not set up
does not support the VM image                         4xx        Unavailable (instance type: this
                                                                 product refuses the image, in
                                                                 every region; nothing was made)
a 2xx body that is not the documented JSON            2xx        Transient: the outcome is
                                                                 unknown, the core observes
                                                                 before repeating
====================================================  =========  ===============================
"""

from __future__ import annotations

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import BlockScope, ErrorKind
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.rest import MALFORMED_BODY, Rule

CLIENT_ERRORS = tuple(s for s in range(400, 500) if s != 429)

CAPACITY_WORDS = r"capacity|out of stock|sold out|no inventory|insufficient inventory"
QUOTA_WORDS = r"quota|limit exceeded|limit reached|maximum number of instances"
BILLING_WORDS = r"billing|balance|insufficient funds|payment"
IMAGE_REFUSED_WORDS = r"does not support the (vm )?image"
# A terminate naming only instances that are gone answers this (vendor MCP e2e log): done.
NO_VALID_VMS = r"no valid vms? found"

RULES = (
    Rule(ErrorKind.TRANSIENT, status=range(200, 300), code=MALFORMED_BODY),
    Rule(ErrorKind.TRANSIENT, status=429),
    Rule(ErrorKind.CAPACITY, status=CLIENT_ERRORS, message=CAPACITY_WORDS, block=BlockScope.OFFER),
    Rule(ErrorKind.QUOTA, status=CLIENT_ERRORS, message=QUOTA_WORDS, block=BlockScope.CLOUD),
    Rule(ErrorKind.QUOTA, status=CLIENT_ERRORS, message=BILLING_WORDS, block=BlockScope.CLOUD),
    Rule(ErrorKind.QUOTA, status=402, block=BlockScope.CLOUD),
    Rule(ErrorKind.UNAVAILABLE, status=CLIENT_ERRORS, message=IMAGE_REFUSED_WORDS, block=BlockScope.INSTANCE_TYPE),
)
