# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Hyperstack's error table: HTTP status plus the ``error_reason`` and ``message`` of its
envelope ``{"status": false, "message", "error_reason"}`` -> ErrorKind and block.

The documented reasons (docs.hyperstack.cloud/docs/api-reference/errors) are categories
only: bad_request 400, unauthorized 401, forbidden 403, not_found 404, not_allowed 405,
already_exist 409, server_error 500; legacy 5xx bodies are ``{"message": "Internal
Server Error"}`` without a reason. There is no machine-readable capacity or quota code,
so those rows read the message. Rows are tried before rest_errors.DEFAULT_RULES (401/403
Credentials, 429/5xx Transient with Retry-After, 400/404/422 InvalidRequest).

==================================================  ======  ===================================
message (reason)                                    HTTP    kind (block)
==================================================  ======  ===================================
out of stock / insufficient or no capacity, stock   4xx     Capacity (offer: flavor x region)
or resources / flavor not available
insufficient balance or credit, payment, billing    any     Quota (cloud: the account)
quota / limit reached or exceeded / maximum number  4xx     Quota (region: an environment's VM
of VMs                                                      quota, or the account's GPUs)
"is currently being created and cannot be deleted   4xx     Transient (delete: retry once the
yet"                                                        VM has finished creating)
in use / has resources (a key or environment)       4xx     Transient (cleanup: retry once gone)
unauthorized (reason) / any                         401     Credentials (cloud)
forbidden                                           403     Credentials (cloud)
not_allowed                                         405     InvalidRequest
already_exist                                       409     InvalidRequest (a name taken)
406 (a query value refused)                         406     InvalidRequest
server_error / legacy body                          5xx     Transient
a 2xx body that is not the documented JSON          2xx     Transient: the outcome is unknown,
                                                            the core observes before repeating
==================================================  ======  ===================================
"""

from __future__ import annotations

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import BlockScope, ErrorKind
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.rest import MALFORMED_BODY, Rule

BAD_REQUEST = "bad_request"
UNAUTHORIZED = "unauthorized"
FORBIDDEN = "forbidden"
NOT_FOUND = "not_found"
NOT_ALLOWED = "not_allowed"
ALREADY_EXIST = "already_exist"
SERVER_ERROR = "server_error"

# The vendor's texts have no stable code: these patterns read its messages.
CAPACITY_TEXT = (r"out of stock|no stock|insufficient (capacity|stock|resources|gpus?)|not enough "
                 r"(capacity|stock|resources|gpus?)|no (available )?(capacity|hosts?|resources) available"
                 r"|flavor .*(is )?(not|no longer|currently un)available")
BALANCE_TEXT = r"insufficient (balance|credit|funds)|payment|billing|top ?up"
QUOTA_TEXT = r"quota|limit (reached|exceeded)|exceeds? .*limit|maximum number"
STILL_CREATING_TEXT = r"currently being created|cannot be deleted yet|creation process is finished"
IN_USE_TEXT = r"in use|is being used|still (has|contains)|not empty|has (resources|virtual machines|keypairs)"

RULES = (
    Rule(ErrorKind.TRANSIENT, status=range(200, 300), code=MALFORMED_BODY),
    Rule(ErrorKind.QUOTA, status=range(400, 500), message=BALANCE_TEXT, block=BlockScope.CLOUD),
    Rule(ErrorKind.TRANSIENT, status=range(400, 500), message=STILL_CREATING_TEXT),
    Rule(ErrorKind.QUOTA, status=range(400, 500), message=QUOTA_TEXT, block=BlockScope.REGION),
    Rule(ErrorKind.CAPACITY, status=range(400, 500), message=CAPACITY_TEXT, block=BlockScope.OFFER),
    Rule(ErrorKind.TRANSIENT, status=(400, 409), message=IN_USE_TEXT),
    Rule(ErrorKind.CREDENTIALS, status=(401, 403), block=BlockScope.CLOUD),
    Rule(ErrorKind.INVALID_REQUEST, status=(405, 406, 409)),
)
