"""Adapter options declared once per cloud (providers/cloud_options/<cloud>.py): typed by
Ansible's validator when an adapter is built, credentials as no_log options with the
environment fallbacks of the vendors' tools and AWX, the modules' cloud_options suboptions,
the generated documentation, and the module_defaults group every member accepts."""

from __future__ import annotations

import pathlib
import runpy
import sys

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils import controller_only
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks import provider_args
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers import options as shared
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers import registry
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import ErrorKind, ProviderError
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm.context import journalled_options

REPO = pathlib.Path(__file__).resolve().parents[2]
CLOUDS = sorted(registry.OPTION_SPECS)
# The least each cloud needs to be built (gcp: a project; the rest: nothing).
# The marketplace adapters build without credentials (their client is made on the first call).
MINIMAL = {"aws": {}, "gcp": {"project": "p"}, "docker": {}, "local": {}, "lambda": {}, "runpod": {},
           "primeintellect": {}, "verda": {}, "massedcompute": {}, "hyperstack": {}, "digitalocean": {},
           "nebius": {}}
CREDENTIAL_ENV = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN",
                  "AWS_PROFILE", "AWS_ENDPOINT_URL", "GCP_PROJECT", "GCE_PROJECT", "GCP_SERVICE_ACCOUNT_FILE",
                  "GCE_CREDENTIALS_FILE_PATH", "DOCKER_HOST", "LAMBDA_API_KEY", "RUNPOD_API_KEY", "PRIME_API_KEY",
                  "VERDA_CLIENT_ID", "VERDA_CLIENT_SECRET", "MASSED_COMPUTE_API_KEY", "HYPERSTACK_API_KEY",
                  "DIGITALOCEAN_TOKEN", "DIGITALOCEAN_ACCESS_TOKEN", "DO_API_TOKEN", "DO_API_KEY", "NEBIUS_IAM_TOKEN",
                  "NEBIUS_PROJECT_ID")


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch):
    for name in CREDENTIAL_ENV:
        monkeypatch.delenv(name, raising=False)


def build(cloud, **options):
    return registry.get_provider(cloud, dict(MINIMAL[cloud], **options))


def invalid(cloud, **options) -> str:
    with pytest.raises(ProviderError) as info:
        build(cloud, **options)
    assert info.value.kind == ErrorKind.INVALID_REQUEST
    return info.value.msg


# -- typed when the adapter is built ----------------------------------------------------------

def test_every_registered_cloud_declares_its_options():
    assert set(registry.OPTION_SPECS) == set(registry.ADAPTERS)
    for cloud in CLOUDS:
        adapter = build(cloud)
        assert adapter.option_spec is registry.OPTION_SPECS[cloud]
        assert set(adapter.options) == set(registry.OPTION_SPECS[cloud])   # every option, typed, nothing else
        for name, declared in registry.OPTION_SPECS[cloud].items():
            assert declared.get("description"), "%s.%s has no description" % (cloud, name)


@pytest.mark.parametrize("cloud", CLOUDS)
def test_an_unknown_option_fails_naming_it_and_the_valid_ones(cloud):
    msg = invalid(cloud, regoins=["x"])
    assert msg.startswith("cloud_options.%s: unknown option 'regoins'; valid options: " % cloud)
    assert all(name in msg for name in registry.OPTION_SPECS[cloud])


def test_several_unknown_options_are_all_named():
    assert invalid("local", rooot="/x", sshdd="/y").startswith(
        "cloud_options.local: unknown options 'rooot', 'sshdd'; valid options: python_interpreter, root, sshd, user")


def test_options_that_are_not_a_dict_fail_clearly():
    with pytest.raises(ProviderError) as info:
        registry.get_provider("local", "root=/tmp")
    assert info.value.msg == "cloud_options.local: expected a dict of adapter options, got str"


@pytest.mark.parametrize("cloud,option,given,typed", [
    ("docker", "privileged", "false", False),
    ("docker", "privileged", "yes", True),
    ("docker", "init", "no", False),
    ("docker", "ssh_port", "2222", 2222),
    ("docker", "timeout", "30", 30.0),
    ("aws", "k3s_direct", "true", True),
    ("aws", "regions", "us-east-1,eu-west-1", ["us-east-1", "eu-west-1"]),
    ("aws", "region", "us-east-1", ["us-east-1"]),            # the alias amazon.aws users know
    ("aws", "allowed_cidrs", "198.51.100.7/32", ["198.51.100.7/32"]),
    ("gcp", "k3s_direct", "off", False),
    ("gcp", "disk_size_gb", "200", 200),
    ("gcp", "read_retry_s", 0, 0.0),
])
def test_values_are_typed_as_ansible_types_them(cloud, option, given, typed):
    adapter = build(cloud, **{option: given})
    name = "regions" if option == "region" else option
    assert adapter.options[name] == typed and type(adapter.options[name]) is type(typed)


def test_defaults_come_from_the_declaration():
    docker = build("docker")
    assert (docker.privileged, docker.init, docker.timeout, docker.publish_host) == (False, True, 60.0, "127.0.0.1")
    gcp = build("gcp")
    assert (gcp.k3s_direct, gcp.boot_via, gcp.options["disk_size_gb"]) == (True, "cloud-init", 100)
    aws = build("aws")
    assert aws.capabilities().boot_timeout_s == 900.0 and aws.options["k3s_direct"] is False


@pytest.mark.parametrize("cloud,options,field", [
    ("docker", {"privileged": "maybe"}, "privileged"),
    ("docker", {"ssh_port": "twenty-two"}, "ssh_port"),
    ("gcp", {"boot_script_via": "floppy"}, "boot_script_via"),
    ("gcp", {"operation_timeout_s": -1}, "operation_timeout_s"),
    ("gcp", {"disk_size_gb": 5}, "disk_size_gb"),
    ("aws", {"boot_timeout_s": "soon"}, "boot_timeout_s"),
    ("aws", {"ami_owners": {"a": 1}}, "ami_owners"),
])
def test_a_wrong_value_names_the_field(cloud, options, field):
    assert invalid(cloud, **options).startswith("cloud_options.%s.%s: " % (cloud, field))


def test_a_wrong_value_of_a_credential_never_shows_it():
    spec = dict(pin=dict(type="str", no_log=True, choices=["1234"], description="A pin."))
    with pytest.raises(ProviderError) as info:
        shared.typed_options("vault", spec, {"pin": "s3cr3t-pin"})
    assert info.value.msg.startswith("cloud_options.vault.pin: ")
    assert "s3cr3t-pin" not in info.value.msg and "********" in info.value.msg


def test_a_number_outside_its_bounds_names_the_field_and_the_bound():
    spec = dict(wait_s=shared.seconds(5, "A wait.", maximum=10))
    assert shared.typed_options("demo", spec, {"wait_s": 10})["wait_s"] == 10
    for value, bound in ((11, "<= 10"), (-1, ">= 0")):
        with pytest.raises(ProviderError) as info:
            shared.typed_options("demo", spec, {"wait_s": value})
        assert info.value.msg == "cloud_options.demo.wait_s: expected a number %s, got %r" % (bound, float(value))


def test_typed_options_type_again_to_the_same():
    """A typed dict built again (a fresh adapter after a crash, the journalled options) is unchanged."""
    for cloud in CLOUDS:
        first = build(cloud, **({"privileged": "true"} if cloud == "docker" else {}))
        again = type(first)(dict(first.options))
        assert again.options == first.options


# -- credentials --------------------------------------------------------------------------------

def test_secret_options_are_the_no_log_ones():
    assert build("aws").secret_options == ("aws_access_key_id", "aws_secret_access_key", "aws_session_token")
    assert build("gcp").secret_options == ("credentials_file",)
    assert build("docker").secret_options == () and build("local").secret_options == ()
    for cloud in CLOUDS:
        spec = registry.OPTION_SPECS[cloud]
        assert build(cloud).secret_options == tuple(sorted(n for n, d in spec.items() if d.get("no_log")))


def test_credentials_are_never_journalled():
    adapter = build("aws", aws_access_key_id="AKIAEXAMPLE", aws_secret_access_key="sekrit", profile="ops")
    journalled = journalled_options(adapter, adapter.options)
    assert "AKIAEXAMPLE" not in journalled.values() and "sekrit" not in journalled.values()
    assert journalled["profile"] == "ops" and journalled["regions"] is None


@pytest.mark.parametrize("variable,option", [
    ("AWS_ACCESS_KEY_ID", "aws_access_key_id"), ("AWS_SECRET_ACCESS_KEY", "aws_secret_access_key"),
    ("AWS_SESSION_TOKEN", "aws_session_token"), ("AWS_SECURITY_TOKEN", "aws_session_token"),
    ("AWS_PROFILE", "profile"), ("AWS_ENDPOINT_URL", "endpoint_url"),
])
def test_aws_reads_what_the_cli_and_awx_set(monkeypatch, variable, option):
    monkeypatch.setenv(variable, "from-env")
    assert build("aws").options[option] == "from-env"
    assert build("aws", **{option: "given"}).options[option] == "given"   # the option wins over the environment


@pytest.mark.parametrize("variable,option", [
    ("GCP_PROJECT", "project"), ("GCE_PROJECT", "project"),
    ("GCP_SERVICE_ACCOUNT_FILE", "credentials_file"), ("GCE_CREDENTIALS_FILE_PATH", "credentials_file"),
])
def test_gcp_reads_what_awx_sets(monkeypatch, variable, option):
    monkeypatch.setenv(variable, "/from/env")
    given = {} if option == "project" else {"project": "p"}
    assert registry.get_provider("gcp", given).options[option] == "/from/env"


def test_gcp_prefers_the_gcp_variables_to_the_gce_ones(monkeypatch):
    monkeypatch.setenv("GCE_PROJECT", "old")
    monkeypatch.setenv("GCP_PROJECT", "new")
    assert registry.get_provider("gcp", {}).project == "new"


def test_docker_reads_docker_host(monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:1")
    assert build("docker").docker_host == "tcp://127.0.0.1:1"


def test_aws_profile_wins_over_keys_from_the_environment(monkeypatch):
    boto3 = pytest.importorskip("boto3")
    made = []
    monkeypatch.setattr(boto3.session, "Session", lambda **kw: made.append(kw) or object())
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAENV")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "env-secret")
    adapter = build("aws", profile="ops")
    adapter._session = None
    try:
        adapter._client("ec2", "us-east-1")
    except AttributeError:
        pass   # the stub session makes no client; the arguments it got are what counts
    assert made == [{"profile_name": "ops"}]


# -- the shared options of REST adapters ------------------------------------------------------

def test_rest_adapters_share_api_url_and_api_key(monkeypatch):
    spec = dict(api_url=shared.api_url("https://api.example.com/v1"), api_key=shared.api_key("EXAMPLE_API_KEY"))
    assert shared.secret_option_names(spec) == ("api_key",)
    monkeypatch.setenv("EXAMPLE_API_KEY", "k-123")
    typed = shared.typed_options("example", spec, {})
    assert typed == {"api_url": "https://api.example.com/v1", "api_key": "k-123"}
    assert shared.typed_options("example", spec, {"api_url": "http://127.0.0.1:8080", "api_key": "k"}) == {
        "api_url": "http://127.0.0.1:8080", "api_key": "k"}
    assert "fallback" not in shared.api_key()
    assert shared.argument_spec(spec)["api_key"] == {"type": "str", "no_log": True,
                                                     "fallback": shared.from_environment("EXAMPLE_API_KEY")}


# -- the modules' argument spec and documentation ----------------------------------------------

def test_cloud_options_suboptions_are_the_declarations():
    # Declared (and documented) as a dict; validated with each cloud's declared options as its suboptions.
    assert provider_args.GROUP_SPEC["cloud_options"] == {"type": "dict", "default": {}}
    suboptions = provider_args.validation_spec(provider_args.GROUP_SPEC)["cloud_options"]["options"]
    assert set(suboptions) == set(CLOUDS)
    for cloud in CLOUDS:
        assert suboptions[cloud] == {"type": "dict", "options": shared.argument_spec(registry.OPTION_SPECS[cloud])}
        for declared in suboptions[cloud]["options"].values():
            assert not set(declared) & set(shared.DOC_KEYS)


def _generator():
    return runpy.run_path(str(REPO / "scripts" / "gen-cloud-options-doc.py"))


def test_the_generated_fragment_and_pages_are_up_to_date():
    generator = _generator()
    files = generator["render"]()
    assert REPO / "plugins" / "doc_fragments" / "cloud_options.py" in files
    assert {path.name for path in files if path.parent == REPO / "docs" / "clouds"} == (
        {"README.md"} | {"%s.md" % cloud for cloud in CLOUDS})
    for path, text in files.items():
        assert path.read_text() == text, "run scripts/gen-cloud-options-doc.py (%s)" % path.relative_to(REPO)
    assert sorted(p.name for p in (REPO / "docs" / "clouds").iterdir()) == sorted(
        path.name for path in files if path.parent == REPO / "docs" / "clouds")
    assert generator["main"](["--check"]) == 0


def test_the_fragment_documents_cloud_options_as_a_dict_pointing_at_each_cloud_s_page():
    import yaml
    namespace = runpy.run_path(str(REPO / "plugins" / "doc_fragments" / "cloud_options.py"))
    documented = yaml.safe_load(namespace["ModuleDocFragment"].DOCUMENTATION)["options"]["cloud_options"]
    assert documented["type"] == "dict" and documented["default"] == {} and "suboptions" not in documented
    text = " ".join(documented["description"])
    assert "docs/clouds/<cloud>.md" in text and all("V(%s)" % cloud in text for cloud in CLOUDS)


def _sections(page):
    """{option: its section's text} of a cloud's page (a ``### <option>`` heading each)."""
    parts = page.split("\n### ")[1:]
    return {part.split("\n", 1)[0]: part.split("\n", 1)[1] for part in parts}


def test_each_cloud_s_page_documents_each_option_as_declared():
    generator = _generator()
    for cloud in CLOUDS:
        page = (REPO / "docs" / "clouds" / ("%s.md" % cloud)).read_text()
        spec = registry.OPTION_SPECS[cloud]
        sections = _sections(page)
        assert set(sections) == set(spec), cloud
        assert page.startswith("<!-- Written by scripts/gen-cloud-options-doc.py") and "## Credentials" in page
        # what the cloud does with the user's tags (the modules' tags option), declared beside its options
        declaring = __import__(registry._PREFIX + "cloud_options." + registry.ADAPTERS[cloud][0], fromlist=["TAGS"])
        assert generator["markdown"](declaring.TAGS) in page.split("## Tags")[1].split("## Options")[0], cloud
        for name, declared in spec.items():
            doc = sections[name]
            assert "Type: `%s`." % generator["type_text"](declared) in doc, (cloud, name)
            if declared.get("default") is not None:
                assert "Default: `%s`." % generator["value_text"](declared["default"]) in doc, (cloud, name)
            else:
                assert "\n- Default:" not in doc
            for choice in declared.get("choices") or ():
                assert "`%s`" % generator["value_text"](choice) in doc.split("Choices: ")[1].split("\n")[0]
            for alias in declared.get("aliases") or ():
                assert "`%s`" % alias in doc.split("Aliases: ")[1].split("\n")[0]
            for variable in shared.environment_names(declared):
                assert "`%s`" % variable in doc.split("When not set, read from ")[1].split("\n")[0]
            assert ("Never logged." in doc) == bool(declared.get("no_log")), (cloud, name)
            assert generator["markdown"](declared["description"]) in doc
            # the summary table links the option's section
            assert "| [`%s`](#%s) |" % (name, name) in page


def test_ansible_markup_becomes_markdown():
    markdown = _generator()["markdown"]
    assert markdown("Unset: E(LAMBDA_API_KEY); V(0.0.0.0/0) only when C(allowed_cidrs) says so.") == (
        "Unset: `LAMBDA_API_KEY`; `0.0.0.0/0` only when `allowed_cidrs` says so.")
    assert markdown("I(not) B(this) U(https://x.example) L(docs,https://d.example) a*b <c>") == (
        "*not* **this** <https://x.example> [docs](https://d.example) a\\*b \\<c\\>")
    assert markdown("C(a `tick`)") == "`` a `tick` ``"


def test_each_cloud_s_page_says_how_to_give_it_credentials():
    aws = (REPO / "docs" / "clouds" / "aws.md").read_text()
    credentials = aws.split("## Credentials")[1].split("## Options")[0]
    for name in ("`cloud_options.aws.aws_access_key_id`", "`AWS_ACCESS_KEY_ID`", "`cloud_options.aws.profile`",
                 "`AWS_PROFILE`", "`~/.aws/credentials`"):
        assert name in credentials
    gcp = (REPO / "docs" / "clouds" / "gcp.md").read_text().split("## Options")[0]
    assert "Required besides: `cloud_options.gcp.project` (or `GCP_PROJECT` or `GCE_PROJECT`)." in gcp
    assert "needs no credentials" in (REPO / "docs" / "clouds" / "local.md").read_text()
    assert "None are required" in (REPO / "docs" / "clouds" / "docker.md").read_text()


# -- the module_defaults group ----------------------------------------------------------------

MEMBERS = ("vm", "offers", "instance", "instance_info", "journal_info", "health_info", "orphans", "reap", "vm_stage",
           "ssh_files")


def _module_spec(monkeypatch, name):
    """The argument spec a module's main() builds (its AnsibleModule is stopped right there)."""
    module = __import__("ansible_collections.gpuprov.cloud.plugins.modules.%s" % name, fromlist=["main"])
    seen = {}

    class Stop(Exception):
        pass

    def capture(argument_spec, **kwargs):
        seen.update(argument_spec)
        raise Stop()

    # Modules run by an action plugin build theirs in controller_only.
    monkeypatch.setattr(module if hasattr(module, "JournalModule") else controller_only, "JournalModule", capture)
    with pytest.raises(Stop):
        module.main()
    return seen


def test_the_group_is_the_documented_members():
    import yaml
    runtime = yaml.safe_load((REPO / "meta" / "runtime.yml").read_text())
    assert tuple(runtime["action_groups"]["gpuprov"]) == MEMBERS


@pytest.mark.parametrize("member", MEMBERS)
def test_every_member_accepts_every_shared_option(monkeypatch, member):
    spec = _module_spec(monkeypatch, member)
    for name, shared_spec in provider_args.GROUP_SPEC.items():
        assert spec.get(name) == shared_spec, "%s: %s differs from the group's" % (member, name)


def test_a_member_cannot_redefine_a_shared_option():
    with pytest.raises(ValueError):
        provider_args.group_argument_spec(journal=dict(type="str"))


@pytest.mark.parametrize("given,clouds,cloud", [
    ({}, ["local"], "local"),
    ({"cloud": "aws"}, ["aws"], "aws"),
    ({"clouds": ["gcp", "aws"]}, ["gcp", "aws"], "gcp"),
    ({"clouds": ["gcp", "aws"], "cloud": "aws"}, ["gcp", "aws"], "aws"),
    ({"clouds": [], "cloud": None}, ["local"], "local"),
])
def test_clouds_and_cloud_reconciled(given, clouds, cloud):
    params = provider_args.reconcile_clouds(dict(given))
    assert (params["clouds"], params["cloud"]) == (clouds, cloud)


def test_options_for_leaves_unset_suboptions_to_the_adapter():
    given = {"local": {"root": "/r", "sshd": None}, "aws": None}
    assert provider_args.options_for("local", given, ["local"], registry.ADAPTERS) == {"root": "/r"}
    assert provider_args.options_for("aws", given, ["aws"], registry.ADAPTERS) == {}


if __name__ == "__main__":
    sys.exit(pytest.main([__file__]))
