# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Lambda Cloud's error table: HTTP status plus the ``error.code`` of its envelope
``{"error": {"code", "message", "suggestion"}, "field_errors"?}`` -> ErrorKind and block.

Codes from Lambda's OpenAPI spec (v1.10.0: the ApiError* schemas and where each is
answered). Rows are tried before rest_errors.DEFAULT_RULES, which covers the rest: 401/403 without a
known code -> Credentials, 429/5xx -> Transient with Retry-After, 400/404/422 ->
InvalidRequest, 3xx -> InvalidRequest (no redirects followed).

==================================================  ======  ===================================
code                                                HTTP    kind (block)
==================================================  ======  ===================================
instance-operations/launch/insufficient-capacity    400     Capacity (offer: type x region)
global/quota-exceeded                               400     Quota (cloud: the account's limit)
provider/quota-exceeded                             any     Quota (cloud)
global/account-inactive                             403     Quota (cloud): billing, not the key
global/invalid-address                              403     Quota (cloud): billing address
global/invalid-api-key                              401/403 Credentials (cloud)
global/forbidden                                    403     Credentials (cloud): the key lacks access
global/invalid-parameters                           400     InvalidRequest
global/object-does-not-exist                        400/404 InvalidRequest (delete treats as gone)
global/not-found                                    404     InvalidRequest (a path or key id unknown)
instance-operations/launch/file-system-in-wrong-    400     InvalidRequest
region, .../file-systems-not-supported
ssh-keys/key-in-use                                 400     Transient (cleanup: an instance
firewall-rulesets/firewall-ruleset-in-use           400/409 still holds it; retry once gone)
global/internal-error                               409/5xx Transient ("Try again later": the 409 of
                                                            ruleset create, patch and delete)
global/conflict                                     409     Transient (the instance is mid-change)
global/unknown, provider/* (others)                 5xx     Transient
a 2xx body that is not the documented JSON          2xx     Transient: the outcome is unknown,
                                                            the core observes before repeating
==================================================  ======  ===================================
"""

from __future__ import annotations

import re

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import BlockScope, ErrorKind
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.rest import MALFORMED_BODY, Rule

INSUFFICIENT_CAPACITY = "instance-operations/launch/insufficient-capacity"
QUOTA_EXCEEDED = "global/quota-exceeded"
INVALID_API_KEY = "global/invalid-api-key"
ACCOUNT_INACTIVE = "global/account-inactive"
INVALID_ADDRESS = "global/invalid-address"
INVALID_PARAMETERS = "global/invalid-parameters"
OBJECT_DOES_NOT_EXIST = "global/object-does-not-exist"
FILE_SYSTEM_IN_WRONG_REGION = "instance-operations/launch/file-system-in-wrong-region"
FILE_SYSTEMS_NOT_SUPPORTED = "instance-operations/launch/file-systems-not-supported"
KEY_IN_USE = "ssh-keys/key-in-use"
RULESET_IN_USE = "firewall-rulesets/firewall-ruleset-in-use"
DUPLICATE = "global/duplicate"
UNKNOWN = "global/unknown"
INTERNAL_ERROR = "global/internal-error"
CONFLICT = "global/conflict"
FORBIDDEN = "global/forbidden"
NOT_FOUND = "global/not-found"

RULES = (
    Rule(ErrorKind.TRANSIENT, status=range(200, 300), code=MALFORMED_BODY),
    Rule(ErrorKind.CAPACITY, code=INSUFFICIENT_CAPACITY, block=BlockScope.OFFER),
    Rule(ErrorKind.QUOTA, code=QUOTA_EXCEEDED, block=BlockScope.CLOUD),
    Rule(ErrorKind.QUOTA, code="provider/quota-exceeded", block=BlockScope.CLOUD),
    Rule(ErrorKind.QUOTA, code=ACCOUNT_INACTIVE, block=BlockScope.CLOUD),
    Rule(ErrorKind.QUOTA, code=INVALID_ADDRESS, block=BlockScope.CLOUD),
    Rule(ErrorKind.CREDENTIALS, code=INVALID_API_KEY, block=BlockScope.CLOUD),
    Rule(ErrorKind.CREDENTIALS, code=FORBIDDEN, block=BlockScope.CLOUD),
    Rule(ErrorKind.INVALID_REQUEST, code=INVALID_PARAMETERS),
    Rule(ErrorKind.INVALID_REQUEST, code=OBJECT_DOES_NOT_EXIST),
    Rule(ErrorKind.INVALID_REQUEST, code=NOT_FOUND),
    Rule(ErrorKind.INVALID_REQUEST, code=FILE_SYSTEM_IN_WRONG_REGION),
    Rule(ErrorKind.INVALID_REQUEST, code=FILE_SYSTEMS_NOT_SUPPORTED),
    Rule(ErrorKind.TRANSIENT, code=KEY_IN_USE),
    Rule(ErrorKind.TRANSIENT, code=RULESET_IN_USE),
    Rule(ErrorKind.TRANSIENT, code=UNKNOWN),
    Rule(ErrorKind.TRANSIENT, code=INTERNAL_ERROR),
    Rule(ErrorKind.TRANSIENT, code=CONFLICT),
    Rule(ErrorKind.TRANSIENT, code=re.compile(r"provider/.+")),
)
