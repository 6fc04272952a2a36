# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""AWS error classification: botocore exceptions and EC2 error codes -> ProviderError.

Pure functions over the error code (``response['Error']['Code']``), the HTTP
status and the exception class; the table follows docs/cloud-apis.md section 9
(AWS EC2 API error-code reference, SkyPilot and dstack). botocore is optional here
so that the module imports without it (``ansible-test sanity``).
"""

from __future__ import annotations

from typing import Optional

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    BlockScope, ErrorKind, ProviderError,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.cloud_options.aws import CREDENTIALS

try:
    from botocore import exceptions as _bce
except ImportError:  # pragma: no cover - exercised by sanity imports only
    _bce = None

# Capacity in one availability zone: create tries the next subnet (zone) of the
# offer before giving up, and the core then blocks the offer.
ZONE_CAPACITY_CODES = frozenset((
    "InsufficientInstanceCapacity", "InsufficientHostCapacity", "InsufficientReservedInstanceCapacity",
    "InsufficientAddressCapacity", "InsufficientFreeAddressesInSubnet", "InsufficientCapacity",
    "InsufficientVolumeCapacity",  # HTTP 500: no room for the EBS volume type in this zone
    "Unsupported",  # "...type X is not supported in your requested Availability Zone (Y)"
))

# code -> (kind, block scope override or None). Exact codes; prefixes are below.
CODE_TABLE = {
    # Out of stock. Spot: bid below the market price, and the spot-request status
    # codes some APIs surface, are capacity for this offer too.
    "InsufficientInstanceCapacity": (ErrorKind.CAPACITY, None),
    "InsufficientHostCapacity": (ErrorKind.CAPACITY, None),
    "InsufficientReservedInstanceCapacity": (ErrorKind.CAPACITY, None),
    "InsufficientAddressCapacity": (ErrorKind.CAPACITY, None),
    "InsufficientFreeAddressesInSubnet": (ErrorKind.CAPACITY, None),
    "InsufficientCapacity": (ErrorKind.CAPACITY, None),
    "InsufficientVolumeCapacity": (ErrorKind.CAPACITY, None),
    "SpotMaxPriceTooLow": (ErrorKind.CAPACITY, None),
    "capacity-not-available": (ErrorKind.CAPACITY, None),
    "capacity-oversubscribed": (ErrorKind.CAPACITY, None),
    "price-too-low": (ErrorKind.CAPACITY, None),
    # The type is not supported where we asked (prepare only picks zones that list
    # the type, so this means the type is unusable in this region): block the type in
    # the region. Capacity rather than Unavailable because prepare already made the
    # security group, which the core's compensation removes.
    "Unsupported": (ErrorKind.CAPACITY, BlockScope.INSTANCE_TYPE),
    # Account limits: regional, never retried blindly (SkyPilot: terminal for the region).
    "InstanceLimitExceeded": (ErrorKind.QUOTA, BlockScope.REGION),
    "VcpuLimitExceeded": (ErrorKind.QUOTA, BlockScope.REGION),
    "MaxSpotInstanceCountExceeded": (ErrorKind.QUOTA, BlockScope.REGION),
    "SecurityGroupLimitExceeded": (ErrorKind.QUOTA, BlockScope.REGION),
    "RulesPerSecurityGroupLimitExceeded": (ErrorKind.QUOTA, BlockScope.REGION),
    "VolumeLimitExceeded": (ErrorKind.QUOTA, BlockScope.REGION),
    # Type/feature combinations (spot on a type that has none, EFA, placement...):
    # specific to this offer, so compensate and move on rather than abort the search.
    "InvalidParameterCombination": (ErrorKind.FAILED, None),
    # Same ClientToken, different parameters: this attempt is unusable.
    "IdempotentParameterMismatch": (ErrorKind.FAILED, None),
    # Our request is wrong (a bug or a bad option such as ami_id): abort.
    "InvalidParameterValue": (ErrorKind.INVALID_REQUEST, None),
    "InvalidParameter": (ErrorKind.INVALID_REQUEST, None),
    "MissingParameter": (ErrorKind.INVALID_REQUEST, None),
    "UnknownParameter": (ErrorKind.INVALID_REQUEST, None),
    "InvalidUserData.Malformed": (ErrorKind.INVALID_REQUEST, None),
    "ValidationError": (ErrorKind.INVALID_REQUEST, None),
    "ValidationException": (ErrorKind.INVALID_REQUEST, None),
    # Resources prepare just made, not yet visible to RunInstances (EC2 is eventually
    # consistent): retry. If they are really gone the retry budget runs out and the
    # core compensates; the next attempt prepares them again.
    "InvalidGroup.NotFound": (ErrorKind.TRANSIENT, None),
    "InvalidSubnetID.NotFound": (ErrorKind.TRANSIENT, None),
    # An instance or ENI still holds the security group (cleanup before the
    # instance is fully gone).
    "DependencyViolation": (ErrorKind.TRANSIENT, None),
    "IncorrectState": (ErrorKind.TRANSIENT, None),
    # Credentials and account state: abort everything on AWS.
    "AuthFailure": (ErrorKind.CREDENTIALS, BlockScope.CLOUD),
    "UnauthorizedOperation": (ErrorKind.CREDENTIALS, BlockScope.CLOUD),
    "ExpiredToken": (ErrorKind.CREDENTIALS, BlockScope.CLOUD),
    "ExpiredTokenException": (ErrorKind.CREDENTIALS, BlockScope.CLOUD),
    "RequestExpired": (ErrorKind.CREDENTIALS, BlockScope.CLOUD),
    "InvalidClientTokenId": (ErrorKind.CREDENTIALS, BlockScope.CLOUD),
    "SignatureDoesNotMatch": (ErrorKind.CREDENTIALS, BlockScope.CLOUD),
    "UnrecognizedClientException": (ErrorKind.CREDENTIALS, BlockScope.CLOUD),
    "AccessDenied": (ErrorKind.CREDENTIALS, BlockScope.CLOUD),
    "AccessDeniedException": (ErrorKind.CREDENTIALS, BlockScope.CLOUD),
    "OptInRequired": (ErrorKind.CREDENTIALS, BlockScope.CLOUD),
    "PendingVerification": (ErrorKind.CREDENTIALS, BlockScope.CLOUD),
    "Blocked": (ErrorKind.CREDENTIALS, BlockScope.CLOUD),
    # Throttling and server trouble: retry with the core's backoff.
    "RequestLimitExceeded": (ErrorKind.TRANSIENT, None),
    "Throttling": (ErrorKind.TRANSIENT, None),
    "ThrottlingException": (ErrorKind.TRANSIENT, None),
    "TooManyRequestsException": (ErrorKind.TRANSIENT, None),
    "InternalError": (ErrorKind.TRANSIENT, None),
    "InternalFailure": (ErrorKind.TRANSIENT, None),
    "ServerInternal": (ErrorKind.TRANSIENT, None),
    "ServiceUnavailable": (ErrorKind.TRANSIENT, None),
    "Unavailable": (ErrorKind.TRANSIENT, None),
    "RequestTimeout": (ErrorKind.TRANSIENT, None),
    "RequestTimeoutException": (ErrorKind.TRANSIENT, None),
}

# "InvalidAMIID.NotFound", ".Malformed", ".Unavailable"...: the image option is wrong.
PREFIX_TABLE = (
    ("InvalidAMIID.", ErrorKind.INVALID_REQUEST, None),
    ("InvalidKeyPair.", ErrorKind.INVALID_REQUEST, None),
    ("InvalidBlockDeviceMapping", ErrorKind.INVALID_REQUEST, None),
)

# The codes of EC2's request throttling (per account and region, docs.aws.amazon.com/ec2/latest/devguide/
# ec2-api-throttling.html) and of the other AWS APIs the adapter calls: the fleet holds its calls (fleet/gate.py).
THROTTLE_CODES = frozenset(("RequestLimitExceeded", "Throttling", "ThrottlingException", "TooManyRequestsException"))

# Codes that mean "that instance does not exist": success for delete.
GONE_CODES = frozenset(("InvalidInstanceID.NotFound", "InvalidInstanceID.Malformed"))


def classify_code(code: str, message: str = "", http_status: Optional[int] = None,
                  operation: str = "") -> ProviderError:
    """Classify one AWS error code (and its HTTP status) as a ProviderError."""
    where = (" (%s)" % operation) if operation else ""
    text = "%s%s: %s" % (code or "error", where, message or "no message")
    if code in CODE_TABLE:
        kind, block = CODE_TABLE[code]
        return ProviderError(kind, text, block, rate_limited=code in THROTTLE_CODES)
    for prefix, kind, block in PREFIX_TABLE:
        if code.startswith(prefix):
            return ProviderError(kind, text, block)
    if http_status is not None and http_status >= 500:
        # An unknown server-side error is the server's trouble, not the offer's.
        return ProviderError(ErrorKind.TRANSIENT, text)
    return ProviderError(ErrorKind.FAILED, text)


def error_code(exc: BaseException) -> str:
    """The AWS error code of a botocore ClientError ('' for anything else)."""
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        return str((response.get("Error") or {}).get("Code") or "")
    return ""


def classify_error(exc: BaseException) -> ProviderError:
    """Classify any exception raised while talking to AWS."""
    if isinstance(exc, ProviderError):
        return exc
    if _bce is not None:
        if isinstance(exc, _bce.ClientError):
            response = exc.response or {}
            error = response.get("Error") or {}
            status = (response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
            return classify_code(str(error.get("Code") or ""), str(error.get("Message") or ""),
                                 status, getattr(exc, "operation_name", "") or "")
        if isinstance(exc, _bce.NoCredentialsError):
            return ProviderError(ErrorKind.CREDENTIALS, CREDENTIALS.message(), BlockScope.CLOUD)
        if isinstance(exc, (_bce.PartialCredentialsError, _bce.ProfileNotFound,
                            _bce.NoAuthTokenError, _bce.CredentialRetrievalError,
                            _bce.UnauthorizedSSOTokenError, _bce.TokenRetrievalError)):
            return ProviderError(ErrorKind.CREDENTIALS, "AWS credentials: %s" % exc, BlockScope.CLOUD)
        if isinstance(exc, _bce.ParamValidationError):
            return ProviderError(ErrorKind.INVALID_REQUEST, "AWS request rejected by the SDK: %s" % exc)
        if isinstance(exc, (_bce.EndpointConnectionError, _bce.ConnectionClosedError, _bce.ReadTimeoutError,
                            _bce.ConnectTimeoutError, _bce.ConnectionError, _bce.HTTPClientError)):
            return ProviderError(ErrorKind.TRANSIENT, "AWS connection: %s" % exc)
    if isinstance(exc, (ConnectionError, TimeoutError)):
        return ProviderError(ErrorKind.TRANSIENT, "AWS connection: %s" % exc)
    return ProviderError(ErrorKind.FAILED, "AWS: %s: %s" % (type(exc).__name__, exc))
