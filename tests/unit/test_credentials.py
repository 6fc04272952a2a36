"""Credentials, declared once per cloud (providers/cloud_options/<cloud>.py ``CREDENTIALS``):
the message of a missing one names the options and the environment variables that provide
it, every adapter's ``check_credentials`` tells without a call, the AWS one resolves boto3's
chain locally (the moto fake answers any call it would make), and ``verify_credentials``
asks AWS once, read-only."""

from __future__ import annotations

import socket

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers import registry
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.aws import AwsProvider
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.aws import credentials as aws_credentials
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.aws.errors import classify_error
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    BlockScope, ErrorKind, ProviderError, ResourceRequest,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.options import (
    declared_credentials, environment_names,
)
from ansible_collections.gpuprov.cloud.tests.fakes import moto_ec2 as fake

moto_ec2 = fake.moto_ec2

# The marketplace clouds: REST APIs whose credential is an API key (verda: an OAuth2 client id and secret).
MARKETPLACE = {"lambda": ("api_key",), "runpod": ("api_key",), "primeintellect": ("api_key",),
               "massedcompute": ("api_key",), "hyperstack": ("api_key",), "digitalocean": ("api_key",),
               "verda": ("client_id", "client_secret")}
AWS_VARIABLES = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN",
                 "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                 "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN")


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def no_aws_credentials(moto_ec2, monkeypatch, tmp_path):
    """Nothing boto3 could find: no key variables, empty shared files, no metadata service."""
    for name in AWS_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    return tmp_path


def _variables(cloud: str, option: str):
    return environment_names(registry.OPTION_SPECS[cloud][option])


# -- the declarations and their messages --------------------------------------------------------

def test_every_cloud_that_needs_credentials_declares_them():
    needing = {cloud for cloud in registry.known_clouds() if cloud not in ("local",)}
    assert {cloud for cloud in needing if declared_credentials(cloud) is None} == set()
    assert declared_credentials("local") is None


@pytest.mark.parametrize("cloud", sorted(MARKETPLACE))
def test_each_marketplace_cloud_refuses_without_its_key_naming_the_option_and_the_variable(cloud, monkeypatch):
    options = MARKETPLACE[cloud]
    for option in options:
        for variable in _variables(cloud, option):
            monkeypatch.delenv(variable, raising=False)
    provider = registry.get_provider(cloud, {"api_url": "http://127.0.0.1:%d" % _closed_port()})
    for refused in (provider.check_credentials, lambda: provider.plan(ResourceRequest(vm_name="x", gpu="H100"))):
        with pytest.raises(ProviderError) as info:   # a call to the closed port would be Transient
            refused()
        assert info.value.kind == ErrorKind.CREDENTIALS and info.value.block_scope == BlockScope.CLOUD
        msg = info.value.msg
        assert msg.startswith("%s: no credentials: set " % cloud), msg
        for option in options:
            assert "cloud_options.%s.%s" % (cloud, options[0]) in msg and option in msg, msg
            assert all(variable in msg for variable in _variables(cloud, option)), msg


@pytest.mark.parametrize("cloud", sorted(MARKETPLACE))
def test_a_marketplace_key_in_its_variable_passes_the_check(cloud, monkeypatch):
    for option in MARKETPLACE[cloud]:
        monkeypatch.setenv(_variables(cloud, option)[0], "not-a-real-key")
    registry.get_provider(cloud, {}).check_credentials()


def test_half_a_credential_pair_names_the_missing_half(monkeypatch):
    monkeypatch.delenv("VERDA_CLIENT_SECRET", raising=False)
    with pytest.raises(ProviderError) as info:
        registry.get_provider("verda", {"client_id": "id-only"}).check_credentials()
    assert info.value.msg == ("verda: incomplete credentials: client_id set without client_secret; set "
                              "cloud_options.verda.client_secret (or VERDA_CLIENT_SECRET)")
    assert "id-only" not in info.value.msg


def test_a_required_option_is_named_before_the_credentials(monkeypatch):
    monkeypatch.delenv("NEBIUS_PROJECT_ID", raising=False)
    with pytest.raises(ProviderError) as info:
        registry.get_provider("nebius", {"iam_token": "t"}).check_credentials()
    assert info.value.msg == "nebius: no project_id: set cloud_options.nebius.project_id (or NEBIUS_PROJECT_ID)"


def test_the_sweep_and_the_check_read_the_same_declaration():
    declared = declared_credentials("lambda")
    nothing = {"environ": {}, "exists": lambda path: False}
    assert not declared.found({}, **nothing) and declared.missing({}, **nothing) == declared.message()
    assert declared.found({}, environ={"LAMBDA_API_KEY": "k"}, exists=lambda path: False)
    assert declared.missing({}, environ={"LAMBDA_API_KEY": "k"}, exists=lambda path: False) is None


def test_docker_is_never_refused_by_its_declaration(monkeypatch):
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    assert not declared_credentials("docker").checked   # a guess for the sweep: the engine itself answers


# -- aws: boto3's chain, resolved here without a call --------------------------------------------

def test_aws_without_credentials_is_refused_before_any_call(no_aws_credentials, moto_ec2):
    before = len(moto_ec2.calls())
    provider = AwsProvider({"endpoint_url": moto_ec2.endpoint_url})
    with pytest.raises(ProviderError) as info:
        provider.check_credentials()
    assert info.value.kind == ErrorKind.CREDENTIALS and info.value.block_scope == BlockScope.CLOUD
    assert info.value.msg == declared_credentials("aws").message()
    for name in ("cloud_options.aws.aws_access_key_id", "aws_secret_access_key", "AWS_ACCESS_KEY_ID",
                 "AWS_SECRET_ACCESS_KEY", "cloud_options.aws.profile", "AWS_PROFILE", "~/.aws/credentials"):
        assert name in info.value.msg
    assert len(moto_ec2.calls()) == before


def test_aws_credentials_from_the_shared_file_pass_without_a_call(no_aws_credentials, moto_ec2):
    (no_aws_credentials / "credentials").write_text("[default]\naws_access_key_id = AKIDEXAMPLE\n"
                                                    "aws_secret_access_key = not-a-secret\n")
    before = len(moto_ec2.calls())
    AwsProvider({"endpoint_url": moto_ec2.endpoint_url}).check_credentials()
    assert len(moto_ec2.calls()) == before


def test_aws_options_and_their_variables(no_aws_credentials, monkeypatch):
    AwsProvider({"aws_access_key_id": "AKID", "aws_secret_access_key": "s"}).check_credentials()
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKID")
    with pytest.raises(ProviderError) as info:
        AwsProvider({}).check_credentials()
    assert info.value.msg.startswith("aws: incomplete credentials: aws_access_key_id set without "
                                     "aws_secret_access_key")
    assert "AKID" not in info.value.msg


def test_an_aws_profile_that_does_not_exist_is_named(no_aws_credentials):
    with pytest.raises(ProviderError) as info:
        AwsProvider({"profile": "gpuprov-no-such-profile"}).check_credentials()
    assert info.value.kind == ErrorKind.CREDENTIALS
    assert "gpuprov-no-such-profile" in info.value.msg and "AWS_PROFILE" in info.value.msg


def test_aws_sources_only_a_call_could_read_are_not_refused(no_aws_credentials):
    """A container role or an instance role answers only over HTTP: the check lets the real call tell."""
    assert aws_credentials.missing({}, environ={"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "/v2/creds"}) is None
    assert aws_credentials.missing({}, environ={}, ec2=lambda: True) is None
    assert aws_credentials.missing({}, environ={"AWS_EC2_METADATA_DISABLED": "true"}, ec2=lambda: True)
    (no_aws_credentials / "config").write_text("[default]\ncredential_process = /bin/false\n")
    assert aws_credentials.missing({}, environ={"AWS_EC2_METADATA_DISABLED": "true"}) is None   # never run


def test_ec2_is_told_by_its_dmi():
    files = {"/sys/devices/virtual/dmi/id/sys_vendor": "Amazon EC2"}
    assert aws_credentials.on_ec2(lambda path: files.get(path, ""))
    assert not aws_credentials.on_ec2(lambda path: "QEMU" if path.endswith("sys_vendor") else "")


def test_boto3_finding_none_later_names_the_options_too():
    from botocore import exceptions as bce
    err = classify_error(bce.NoCredentialsError())
    assert err.kind == ErrorKind.CREDENTIALS and err.msg == declared_credentials("aws").message()


# -- aws: the one read-only call of a preview ---------------------------------------------------

def test_aws_verify_is_one_get_caller_identity(moto_ec2):
    account = moto_ec2.new_account()
    AwsProvider(dict(account, endpoint_url=moto_ec2.endpoint_url)).verify_credentials()
    assert [c["action"] for c in moto_ec2.calls(account=account["aws_access_key_id"])] == ["GetCallerIdentity"]


def test_aws_verify_refused_is_credentials(moto_ec2):
    account = moto_ec2.new_account()
    moto_ec2.inject("GetCallerIdentity", code="InvalidClientTokenId", status=403,
                    message="The security token included in the request is invalid.",
                    account=account["aws_access_key_id"])
    with pytest.raises(ProviderError) as info:
        AwsProvider(dict(account, endpoint_url=moto_ec2.endpoint_url)).verify_credentials()
    assert info.value.kind == ErrorKind.CREDENTIALS and info.value.block_scope == BlockScope.CLOUD
    assert len(moto_ec2.calls("GetCallerIdentity", account["aws_access_key_id"])) == 1   # no SDK retry


def test_aws_verify_of_an_unreachable_endpoint_is_transient(moto_ec2):
    account = moto_ec2.new_account()
    with pytest.raises(ProviderError) as info:
        AwsProvider(dict(account, endpoint_url="http://127.0.0.1:%d" % _closed_port())).verify_credentials()
    assert info.value.kind == ErrorKind.TRANSIENT


# -- offers, check mode and provision tell the same truth -----------------------------------------

SEARCH = {"name": "creds", "state": "present", "clouds": ["aws", "gcp", "lambda"], "gpu": "H100", "gpu_count": 1,
          "regions": [], "spot": False, "retry_until_up": False, "boot_timeout": None, "ssh_timeout": 60,
          "teardown_timeout": 60, "journal": None, "ssh_key": None, "ssh_user": None, "cloud_options": {},
          "k8s": None, "boot_script": None}


@pytest.fixture
def bare_controller(no_aws_credentials, moto_ec2, monkeypatch, tmp_path):
    """No credentials for aws, gcp (nor a project) or lambda, and a state directory of its own."""
    for name in ("GCP_PROJECT", "GCE_PROJECT", "GCP_SERVICE_ACCOUNT_FILE", "GCE_CREDENTIALS_FILE_PATH",
                 "GOOGLE_APPLICATION_CREDENTIALS", "LAMBDA_API_KEY", "GPUPROV_JOURNAL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path / "gcloud"))   # no gcloud ADC file
    monkeypatch.setenv("GPUPROV_HOME", str(tmp_path / "state"))
    return moto_ec2


def _reasons():
    return [declared_credentials("aws").message(),
            "gcp: no project: set cloud_options.gcp.project (or one of GCP_PROJECT, GCE_PROJECT)",
            declared_credentials("lambda").message()]


def test_offers_check_mode_and_provision_agree_without_credentials(bare_controller):
    from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks import primitives
    from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.service import VmService

    before = len(bare_controller.calls())
    offers = primitives.offers({"clouds": SEARCH["clouds"], "gpu": "H100"})
    check = VmService(dict(SEARCH)).run(check_mode=True)
    run = VmService(dict(SEARCH)).run()

    aws_msg, gcp_msg, lambda_msg = _reasons()
    # offers: the aws ladder is listed, every offer unavailable with the reason; each cloud's error names it.
    assert offers["failed"] and offers["changed"] is False
    aws = [r for r in offers["offers"] if r["cloud"] == "aws"]
    assert aws and all(not r["available"] and r["unavailable_reason"] == aws_msg and r["rank"] is None for r in aws)
    assert [(e["cloud"], e["kind"], e["primitive"], e["msg"]) for e in offers["errors"]] == [
        ("aws", "Credentials", "credentials", aws_msg), ("gcp", "Credentials", "credentials", gcp_msg),
        ("lambda", "Credentials", "credentials", lambda_msg)]
    # check mode: nothing to try, for the same reasons.
    assert check["failed"] and check["changed"] is False and check["plan"] == []
    assert check["msg"] == "creds: no offer to try: " + "; ".join(_reasons())
    # provision: Aborted at once with them, nothing changed, three events, no retry.
    assert run["failed"] and run["changed"] is False and run["state"] == "Aborted"
    assert run["msg"] == "creds: Aborted: " + "; ".join(_reasons())
    assert [e["event"] for e in run["events"]] == ["begin", "transition", "transition"]
    assert len(bare_controller.calls()) == before    # not one call to the (fake) cloud


def test_refused_aws_credentials_agree_too(moto_ec2, monkeypatch, tmp_path):
    """Keys boto3 finds but AWS refuses: offers and check mode ask once (GetCallerIdentity), the launch is
    refused by its first call (prepare's DescribeInstanceTypeOfferings) and leaves AWS with nothing to undo."""
    from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks import primitives
    from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.service import VmService

    monkeypatch.setenv("GPUPROV_HOME", str(tmp_path / "state"))
    monkeypatch.delenv("GPUPROV_JOURNAL", raising=False)
    account = moto_ec2.new_account()
    akid = account["aws_access_key_id"]
    refused = "The security token included in the request is invalid."
    moto_ec2.inject("GetCallerIdentity", code="InvalidClientTokenId", status=403, message=refused, times=None,
                    account=akid)
    moto_ec2.inject("DescribeInstanceTypeOfferings", code="AuthFailure", status=401, message=refused, times=None,
                    account=akid)
    aws = dict(account, endpoint_url=moto_ec2.endpoint_url, allowed_cidrs=["203.0.113.7/32"], regions=["us-east-1"])
    params = dict(SEARCH, clouds=["aws"], cloud_options={"aws": aws})

    offers = primitives.offers({"clouds": ["aws"], "gpu": "H100", "cloud_options": {"aws": aws}})
    check = VmService(dict(params)).run(check_mode=True)
    previewed = [c["action"] for c in moto_ec2.calls(account=akid)]
    run = VmService(dict(params)).run()

    (error,) = offers["errors"]
    assert error["kind"] == "Credentials" and error["primitive"] == "credentials" and refused in error["msg"]
    assert offers["offers"] and all(r["unavailable_reason"] == error["msg"] for r in offers["offers"])
    assert check["failed"] and check["msg"] == "creds: no offer to try: aws (skipped): " + error["msg"]
    assert previewed == ["GetCallerIdentity", "GetCallerIdentity"]      # one read-only call per preview
    assert run["failed"] and run["changed"] is False and run["state"] == "Aborted", run
    assert refused in run["msg"]
    # One refused call, no retry, no compensation (it made nothing), every other aws offer blocked with it.
    assert [c["action"] for c in moto_ec2.calls(account=akid)][len(previewed):] == ["DescribeInstanceTypeOfferings"]
    assert not [e for e in run["events"] if e["event"] == "retry" or "Compensating" in (e["to"] or "")]
