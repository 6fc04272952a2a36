"""AWS error classification: every row of the table, as a pure function and through
the adapter's primitives with botocore's Stubber (for codes moto cannot produce)."""

from __future__ import annotations

import boto3
import pytest
from botocore import exceptions as bce
from botocore.stub import Stubber

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers import aws
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.aws import errors as aws_errors
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.aws.errors import (
    CODE_TABLE, classify_code, classify_error,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    BlockScope, ErrorKind, InstanceSpec, Location, Offer, ProviderError,
)

C, Q, U, F, INV, T, K = (ErrorKind.CAPACITY, ErrorKind.QUOTA, ErrorKind.UNAVAILABLE, ErrorKind.FAILED,
                         ErrorKind.INVALID_REQUEST, ErrorKind.TRANSIENT, ErrorKind.CREDENTIALS)

# (code, HTTP status, kind, effective block scope). Statuses are what EC2 sends:
# capacity and server codes come as 5xx, client codes as 4xx.
ROWS = [
    ("InsufficientInstanceCapacity", 500, C, BlockScope.OFFER),
    ("InsufficientHostCapacity", 500, C, BlockScope.OFFER),
    ("InsufficientReservedInstanceCapacity", 500, C, BlockScope.OFFER),
    ("InsufficientAddressCapacity", 500, C, BlockScope.OFFER),
    ("InsufficientFreeAddressesInSubnet", 400, C, BlockScope.OFFER),
    ("InsufficientCapacity", 500, C, BlockScope.OFFER),
    ("InsufficientVolumeCapacity", 500, C, BlockScope.OFFER),
    ("SpotMaxPriceTooLow", 400, C, BlockScope.OFFER),
    ("capacity-not-available", 400, C, BlockScope.OFFER),
    ("capacity-oversubscribed", 400, C, BlockScope.OFFER),
    ("price-too-low", 400, C, BlockScope.OFFER),
    ("Unsupported", 400, C, BlockScope.INSTANCE_TYPE),
    ("InstanceLimitExceeded", 400, Q, BlockScope.REGION),
    ("VcpuLimitExceeded", 400, Q, BlockScope.REGION),
    ("MaxSpotInstanceCountExceeded", 400, Q, BlockScope.REGION),
    ("SecurityGroupLimitExceeded", 400, Q, BlockScope.REGION),
    ("RulesPerSecurityGroupLimitExceeded", 400, Q, BlockScope.REGION),
    ("VolumeLimitExceeded", 400, Q, BlockScope.REGION),
    ("InvalidParameterCombination", 400, F, BlockScope.OFFER),
    ("IdempotentParameterMismatch", 400, F, BlockScope.OFFER),
    ("InvalidParameterValue", 400, INV, None),
    ("InvalidParameter", 400, INV, None),
    ("MissingParameter", 400, INV, None),
    ("UnknownParameter", 400, INV, None),
    ("InvalidUserData.Malformed", 400, INV, None),
    ("ValidationError", 400, INV, None),
    ("ValidationException", 400, INV, None),
    ("InvalidGroup.NotFound", 400, T, None),
    ("InvalidSubnetID.NotFound", 400, T, None),
    ("DependencyViolation", 400, T, None),
    ("IncorrectState", 400, T, None),
    ("AuthFailure", 401, K, BlockScope.CLOUD),
    ("UnauthorizedOperation", 403, K, BlockScope.CLOUD),
    ("ExpiredToken", 400, K, BlockScope.CLOUD),
    ("ExpiredTokenException", 400, K, BlockScope.CLOUD),
    ("RequestExpired", 400, K, BlockScope.CLOUD),
    ("InvalidClientTokenId", 403, K, BlockScope.CLOUD),
    ("SignatureDoesNotMatch", 403, K, BlockScope.CLOUD),
    ("UnrecognizedClientException", 400, K, BlockScope.CLOUD),
    ("AccessDenied", 403, K, BlockScope.CLOUD),
    ("AccessDeniedException", 400, K, BlockScope.CLOUD),
    ("OptInRequired", 401, K, BlockScope.CLOUD),
    ("PendingVerification", 401, K, BlockScope.CLOUD),
    ("Blocked", 403, K, BlockScope.CLOUD),
    ("RequestLimitExceeded", 503, T, None),
    ("Throttling", 400, T, None),
    ("ThrottlingException", 400, T, None),
    ("TooManyRequestsException", 429, T, None),
    ("InternalError", 500, T, None),
    ("InternalFailure", 500, T, None),
    ("ServerInternal", 500, T, None),
    ("ServiceUnavailable", 503, T, None),
    ("Unavailable", 503, T, None),
    ("RequestTimeout", 400, T, None),
    ("RequestTimeoutException", 408, T, None),
    # prefixes
    ("InvalidAMIID.NotFound", 400, INV, None),
    ("InvalidAMIID.Malformed", 400, INV, None),
    ("InvalidAMIID.Unavailable", 400, INV, None),
    ("InvalidKeyPair.NotFound", 400, INV, None),
    ("InvalidBlockDeviceMapping", 400, INV, None),
    # unknown: Failed, unless the server says it is its own trouble (5xx)
    ("SomethingNobodyDocumented", 400, F, BlockScope.OFFER),
    ("SomethingNobodyDocumented", 503, T, None),
]


def client_error(code, status=400, message="boom", operation="RunInstances"):
    return bce.ClientError({"Error": {"Code": code, "Message": message},
                            "ResponseMetadata": {"HTTPStatusCode": status}}, operation)


def test_every_table_code_has_a_row():
    assert set(CODE_TABLE) <= {row[0] for row in ROWS}


@pytest.mark.parametrize("code,status,kind,block", ROWS)
def test_classify_client_error(code, status, kind, block):
    err = classify_error(client_error(code, status, "details here"))
    assert isinstance(err, ProviderError)
    assert (err.kind, err.block_scope) == (kind, block)
    assert code in err.msg and "details here" in err.msg and "RunInstances" in err.msg


@pytest.mark.parametrize("code,status,kind,block", ROWS)
def test_classify_code_matches_exception_path(code, status, kind, block):
    assert classify_code(code, "m", status).kind == kind


@pytest.mark.parametrize("exc,kind", [
    (bce.EndpointConnectionError(endpoint_url="https://ec2.us-east-1.amazonaws.com"), T),
    (bce.ConnectTimeoutError(endpoint_url="https://ec2.us-east-1.amazonaws.com"), T),
    (bce.ReadTimeoutError(endpoint_url="https://ec2.us-east-1.amazonaws.com"), T),
    (bce.ConnectionClosedError(endpoint_url="https://ec2.us-east-1.amazonaws.com"), T),
    (ConnectionResetError("reset by peer"), T),
    (bce.NoCredentialsError(), K),
    (bce.PartialCredentialsError(provider="env", cred_var="AWS_SECRET_ACCESS_KEY"), K),
    (bce.ProfileNotFound(profile="nope"), K),
    (bce.CredentialRetrievalError(provider="sso", error_msg="expired"), K),
    (bce.ParamValidationError(report="InstanceType: wrong type"), INV),
    (ValueError("something else"), F),
])
def test_classify_sdk_exceptions(exc, kind):
    assert classify_error(exc).kind == kind


def test_provider_error_passes_through():
    original = ProviderError(ErrorKind.QUOTA, "already classified")
    assert classify_error(original) is original


def test_error_code_helper():
    assert aws_errors.error_code(client_error("AuthFailure")) == "AuthFailure"
    assert aws_errors.error_code(ValueError("x")) == ""


# -- through the adapter, with Stubber -------------------------------------------------

SPEC = InstanceSpec(vm_name="stubbed", ssh_public_key="ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIStub test")
OFFER = Offer(cloud="aws", region="us-east-1", instance_type="g4dn.xlarge", gpu="T4", gpu_count=1)
PREPARED = {"region": "us-east-1", "image_id": "ami-12345678", "security_group_id": "sg-12345678",
            "subnets": [{"subnet_id": "subnet-aaaa1111", "zone": "us-east-1a"},
                        {"subnet_id": "subnet-bbbb2222", "zone": "us-east-1b"}]}
RUN_REPLY = {"Instances": [{"InstanceId": "i-0123456789abcdef0"}], "ReservationId": "r-1", "OwnerId": "1"}


_SESSION = boto3.session.Session(aws_access_key_id="testing", aws_secret_access_key="testing")


@pytest.fixture
def stubbed():
    """A provider whose EC2 clients are botocore Stubbers (no HTTP at all)."""
    provider = aws.AwsProvider({"aws_access_key_id": "testing", "aws_secret_access_key": "testing"})
    stubs = {}
    for fail_fast in (True, False):
        client = _SESSION.client("ec2", region_name="us-east-1")  # one session: its model cache is shared
        provider._clients[("ec2", "us-east-1", fail_fast)] = client
        stubs[fail_fast] = Stubber(client)
        stubs[fail_fast].activate()
    yield provider, stubs[True], stubs[False]
    for stub in stubs.values():
        stub.deactivate()


@pytest.mark.parametrize("code,status,kind,block", ROWS)
def test_create_raises_the_row_kind(stubbed, code, status, kind, block):
    provider, fast, _reads = stubbed
    zone_error = code in aws_errors.ZONE_CAPACITY_CODES
    for _subnet in PREPARED["subnets"] if zone_error else PREPARED["subnets"][:1]:
        fast.add_client_error("run_instances", service_error_code=code, service_message="stubbed",
                              http_status_code=status)
    with pytest.raises(ProviderError) as info:
        provider.create(OFFER, PREPARED, SPEC)
    assert (info.value.kind, info.value.block_scope) == (kind, block)
    fast.assert_no_pending_responses()
    if zone_error:
        assert "us-east-1a, us-east-1b" in info.value.msg


@pytest.mark.parametrize("code", ["Unsupported", "InsufficientInstanceCapacity", "InsufficientHostCapacity",
                                  "InsufficientVolumeCapacity"])
def test_create_moves_to_the_next_zone_only_for_zone_errors(stubbed, code):
    provider, fast, _reads = stubbed
    fast.add_client_error("run_instances", service_error_code=code, http_status_code=500)
    fast.add_response("run_instances", RUN_REPLY, {
        "ImageId": "ami-12345678", "InstanceType": "g4dn.xlarge", "MinCount": 1, "MaxCount": 1,
        "UserData": aws.render_user_data(SPEC, "ubuntu", "ubuntu"), "SecurityGroupIds": ["sg-12345678"],
        "TagSpecifications": [{"ResourceType": r, "Tags": [
            # The Name first (gpuprov's default, or the user's own Name tag), then gpuprov's identity, each once.
            {"Key": "Name", "Value": "stubbed"}, {"Key": "gpuprov-vm-name", "Value": "stubbed"},
            {"Key": "gpuprov-ssh-user", "Value": "ubuntu"}]} for r in ("instance", "volume")],
        "SubnetId": "subnet-bbbb2222",
        "ClientToken": aws.client_token("stubbed", PREPARED, "subnet-bbbb2222", "g4dn.xlarge", False),
    })
    assert provider.create(OFFER, PREPARED, SPEC) == "i-0123456789abcdef0"
    fast.assert_no_pending_responses()


def test_create_quota_is_not_retried_in_other_zones(stubbed):
    provider, fast, _reads = stubbed
    fast.add_client_error("run_instances", service_error_code="VcpuLimitExceeded", http_status_code=400)
    with pytest.raises(ProviderError) as info:
        provider.create(OFFER, PREPARED, SPEC)
    assert info.value.kind == ErrorKind.QUOTA and info.value.block_scope == BlockScope.REGION
    fast.assert_no_pending_responses()  # one request: the second subnet was never tried


@pytest.mark.parametrize("code", ["InvalidInstanceID.NotFound", "InvalidInstanceID.Malformed"])
def test_delete_treats_unknown_ids_as_success(stubbed, code):
    provider, fast, reads = stubbed
    reads.add_response("describe_instances", {"Reservations": []})
    fast.add_client_error("terminate_instances", service_error_code=code)
    provider.delete(Location("aws", "us-east-1"), "stubbed", ["i-0000000000000dead"])
    reads.assert_no_pending_responses()
    fast.assert_no_pending_responses()


def test_delete_other_errors_are_classified(stubbed):
    provider, fast, reads = stubbed
    reads.add_response("describe_instances", {"Reservations": []})
    fast.add_client_error("terminate_instances", service_error_code="UnauthorizedOperation", http_status_code=403)
    with pytest.raises(ProviderError) as info:
        provider.delete(Location("aws", "us-east-1"), "stubbed", ["i-0000000000000dead"])
    assert info.value.kind == ErrorKind.CREDENTIALS


def test_cleanup_dependency_violation_is_transient(stubbed):
    """moto deletes a security group even while an ENI uses it; real EC2 says
    DependencyViolation for a while after the instance terminated."""
    provider, fast, reads = stubbed
    reads.add_response("describe_instances", {"Reservations": []})
    reads.add_response("describe_security_groups", {"SecurityGroups": [{"GroupId": "sg-12345678"}]})
    fast.add_client_error("delete_security_group", service_error_code="DependencyViolation",
                          service_message="resource sg-12345678 has a dependent object")
    with pytest.raises(ProviderError) as info:
        provider.cleanup(Location("aws", "us-east-1"), "stubbed")
    assert info.value.kind == ErrorKind.TRANSIENT
    reads.assert_no_pending_responses()
    fast.assert_no_pending_responses()


def test_cleanup_group_already_gone_is_success(stubbed):
    provider, fast, reads = stubbed
    reads.add_response("describe_instances", {"Reservations": []})
    reads.add_response("describe_security_groups", {"SecurityGroups": [{"GroupId": "sg-12345678"}]})
    fast.add_client_error("delete_security_group", service_error_code="InvalidGroup.NotFound")
    provider.cleanup(Location("aws", "us-east-1"), "stubbed")
    reads.assert_no_pending_responses()
    fast.assert_no_pending_responses()
