"""Verda's error table, row by row: status + code + message -> ErrorKind and block scope,
then the whole path through the REST client against the fake (Retry-After, malformed
bodies, the token endpoint)."""

from __future__ import annotations

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import BlockScope, ErrorKind
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.rest import classify
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.verda.errors import GONE_MESSAGE, RULES

K, B = ErrorKind, BlockScope

ROWS = [
    # (status, code, message) -> (kind, block)
    ((400, "invalid_request", "Not enough resources available for 8H100.80S.176V"), (K.CAPACITY, None)),
    ((503, "service_unavailable", "not enough resources in FIN-01"), (K.CAPACITY, None)),
    ((400, "invalid_request", "No capacity for the selected instance type"), (K.CAPACITY, None)),
    ((400, "invalid_request", "Operating system is not valid for this instance type"), (K.UNAVAILABLE, None)),
    ((400, "forbidden_action", "Can't discontinue a provisioning instance"), (K.TRANSIENT, None)),
    ((402, "insufficient_funds", "Insufficient funds"), (K.QUOTA, B.CLOUD)),
    ((400, "insufficient_funds", "Your balance is too low"), (K.QUOTA, B.CLOUD)),
    ((400, "invalid_request", "Instance quota reached for this project"), (K.QUOTA, None)),
    ((403, "forbidden_action", "GPU limit exceeded"), (K.QUOTA, None)),
    ((401, "unauthorized_request", "Access token is missing or invalid"), (K.CREDENTIALS, B.CLOUD)),
    ((400, "unauthorized_request", "Invalid client credentials"), (K.CREDENTIALS, B.CLOUD)),
    ((403, "forbidden_action", "This action is forbidden"), (K.FAILED, None)),
    ((400, "invalid_request", "Invalid instance type"), (K.INVALID_REQUEST, None)),
    ((404, "not_found", "Invalid instance id"), (K.INVALID_REQUEST, None)),
    ((500, "server_error", "Internal server error"), (K.TRANSIENT, None)),
    # The API reference: service_unavailable (503) is "Not enough resources at the moment".
    ((503, "service_unavailable", "No capacity available"), (K.CAPACITY, None)),
    ((503, "service_unavailable", "Service unavailable"), (K.CAPACITY, None)),
    ((429, None, "Too many requests"), (K.TRANSIENT, None)),
    # rate_limit_exceeded is throttling, not an account quota, whatever the message says.
    ((429, "rate_limit_exceeded", "Rate limit exceeded"), (K.TRANSIENT, None)),
    ((429, None, "Endpoint limit exceeded, project quota 500 requests per minute"), (K.TRANSIENT, None)),
    ((503, None, "<html>Service Unavailable</html>"), (K.TRANSIENT, None)),
    ((502, None, "<html>Bad gateway</html>"), (K.TRANSIENT, None)),
    ((200, "gpuprov/malformed-body", "<html>"), (K.FAILED, None)),
    ((401, None, ""), (K.CREDENTIALS, B.CLOUD)),
    ((403, None, "Forbidden"), (K.CREDENTIALS, B.CLOUD)),
    ((422, None, "Unprocessable"), (K.INVALID_REQUEST, None)),
    ((418, None, "teapot"), (K.FAILED, None)),
]


@pytest.mark.parametrize("failure,expected", ROWS, ids=["%s-%s-%s" % (r[0][0], r[0][1], r[1][0]) for r in ROWS])
def test_each_row(failure, expected):
    assert classify(RULES, *failure) == expected


@pytest.mark.parametrize("message,gone", [
    ("Invalid instance id", True), ("Can't discontinue a discontinued instance", True),
    ("Instance not found", True), ("Can't discontinue a provisioning instance", False), ("Invalid action", False),
])
def test_delete_messages_that_mean_gone(message, gone):
    assert bool(GONE_MESSAGE.search(message)) is gone
