"""What the modules return matches their RETURN documentation, on real runs: the vm
module on the local cloud (real sshd) and on AWS (moto's EC2, with a stand-in for the
SSH login, which cannot reach a fake cloud's address), and the instance, instance_info,
offers and orphans modules on the local cloud. Every documented ``returned: always`` key is
there, every value has its documented type, and no top-level key is undocumented.

A record that a RETURN value names by its section of docs/return-values.md
(``C(docs/return-values.md#the-vm-record)``) is checked against that section's table: each
field it lists is there, with the type it gives."""

from __future__ import annotations

import base64
import hashlib
import importlib
import pathlib
import re

import pytest
import yaml

from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks import primitives
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks import service as vm_service
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks import sweep
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.service import VmService

# Keys Ansible itself gives every task result: documented by Ansible, not by each module.
COMMON_KEYS = {"changed", "failed", "msg", "diff", "warnings", "invocation", "skipped"}
TYPES = {"str": str, "int": int, "float": (int, float), "bool": bool, "dict": dict, "list": list}

VM = {"name": "retspec", "state": "present", "clouds": ["local"], "gpu": None, "gpu_count": 1, "regions": [],
      "spot": False, "retry_until_up": False, "boot_timeout": None, "ssh_timeout": 60, "teardown_timeout": 60,
      "journal": None, "ssh_key": None, "ssh_user": None, "cloud_options": {}, "k8s": None, "boot_script": None}


RECORDS_PAGE = pathlib.Path(__file__).resolve().parents[2] / "docs" / "return-values.md"
RECORD_LINK = re.compile(r"docs/return-values\.md#([a-z0-9-]+)")
RECORD_ROW = re.compile(r"^\| `(\w+)` \| (\w+(?: of \w+)?) \| (.*) \| (.*) \|$")


def anchor(heading: str) -> str:
    """A heading's anchor, as GitHub and myst-parser make it."""
    return re.sub(r"[^a-z0-9 -]", "", heading.lower()).replace(" ", "-")


def records():
    """{anchor: the fields of that section's table of docs/return-values.md, as RETURN ``contains``}."""
    found = {}
    for section in RECORDS_PAGE.read_text().split("\n## ")[1:]:
        heading, _sep, body = section.partition("\n")
        fields = {}
        for line in body.splitlines():
            row = RECORD_ROW.match(line)
            assert row or not line.startswith("| `"), "docs/return-values.md: a row that does not read: %r" % line
            if row:
                kind, _of, elements = row.group(2).partition(" of ")
                fields[row.group(1)] = dict({"type": kind, "returned": "always", "description": row.group(3)},
                                            **({"elements": elements} if elements else {}))
        assert fields, "docs/return-values.md: section %r has no table" % heading
        found[anchor(heading)] = fields
    return found


def with_records(spec, pages):
    """``spec`` with each value that names a section of docs/return-values.md given its fields as ``contains``."""
    for doc in spec.values():
        text = " ".join(doc["description"]) if isinstance(doc["description"], list) else doc["description"]
        link = RECORD_LINK.search(text)
        if link:
            assert "contains" not in doc, "documented twice: %s" % text
            doc["contains"] = pages[link.group(1)]
        elif "contains" in doc:
            with_records(doc["contains"], pages)
    return spec


def return_spec(module: str):
    """The module's RETURN, with the records it names on docs/return-values.md."""
    return with_records(yaml.safe_load(importlib.import_module("ansible_collections.gpuprov.cloud.plugins.modules.%s"
                                                               % module).RETURN), records())


def mismatches(spec, result, where="", top=True):
    """Every way ``result`` differs from the RETURN ``spec`` (its ``contains``), as phrases."""
    out = []
    for key, doc in spec.items():
        if doc.get("returned") == "always" and key not in result:
            out.append("%s%s: documented as returned always, missing" % (where, key))
    for key, value in result.items():
        if key not in spec:
            if not (top and key in COMMON_KEYS):
                out.append("%s%s: returned but not documented" % (where, key))
            continue
        out.extend(_value_mismatches(spec[key], value, where + key))
    return out


def _value_mismatches(doc, value, where):
    if value is None or doc.get("type") in (None, "raw"):
        return []
    if not isinstance(value, TYPES[doc["type"]]) or (doc["type"] in ("int", "float") and isinstance(value, bool)):
        return ["%s: documented as %s, returned %s %r" % (where, doc["type"], type(value).__name__, value)]
    contains = doc.get("contains")
    if not contains:
        return []
    if doc["type"] == "dict":
        return mismatches(contains, value, where + ".", top=False)
    out = []
    for index, element in enumerate(value):
        out.extend(mismatches(contains, element, "%s[%d]." % (where, index), top=False))
    return out


def assert_matches(module, result):
    assert not result.get("failed"), result
    assert mismatches(return_spec(module), result) == [], result


def test_the_checker_finds_each_kind_of_mismatch():
    spec = {"a": {"type": "str", "returned": "always"},
            "b": {"type": "dict", "returned": "success", "contains": {"n": {"type": "int", "returned": "always"}}}}
    assert mismatches(spec, {"a": "x", "b": {"n": 1}, "changed": True}) == []
    assert mismatches(spec, {"b": {"n": True}, "extra": 1}) == [
        "a: documented as returned always, missing", "b.n: documented as int, returned bool True",
        "extra: returned but not documented"]


@pytest.fixture
def home(home):
    """conftest.py's home; at the end this file's VM is taken down."""
    yield home
    if (home / "journal.sqlite").exists():   # never leave an sshd behind
        VmService(dict(VM, state="absent")).run()


def test_vm_on_the_local_cloud_returns_what_its_documentation_says(home):
    checked = VmService(dict(VM)).run(check_mode=True, diff=True)
    assert_matches("vm", checked)
    # The plan's offers have the fields its description names, as the offers module documents them.
    named = set(re.findall(r"C\((\w+)\)", " ".join(return_spec("vm")["plan"]["description"])))
    offers_doc = return_spec("offers")["offers"]["contains"]
    assert checked["plan"] and all(set(row) == named for row in checked["plan"]), checked["plan"]
    assert named <= set(offers_doc)
    assert [m for row in checked["plan"] for m in mismatches({k: offers_doc[k] for k in named}, row, "plan.", False)] == []
    up = VmService(dict(VM)).run(diff=True)
    assert_matches("vm", up)
    # The host key fingerprint is what the documentation says: SHA256:<base64>, its type apart.
    assert re.match(r"^SHA256:[A-Za-z0-9+/]{43}$", up["vm"]["host_key_fingerprint"]), up["vm"]
    assert up["vm"]["host_key_type"].startswith(("ssh-", "ecdsa-"))
    # A successful search's history carries the offer the VM came up on.
    assert [(h["offer"], h["outcome"]) for h in up["history"]] == [("local:local:sshd", "Ready")]
    assert_matches("vm", VmService(dict(VM)).run(check_mode=True))
    reused = VmService(dict(VM)).run()
    assert_matches("vm", reused)
    assert reused["history"] == [] and reused["vm"]["host_key_fingerprint"] == up["vm"]["host_key_fingerprint"]
    assert_matches("vm", VmService(dict(VM, state="absent")).run(check_mode=True))
    assert_matches("vm", VmService(dict(VM, state="absent")).run())


def test_instance_instance_info_and_offers_on_the_local_cloud(home):
    params = {"name": "retspec", "cloud": "local", "state": "present", "cloud_options": {}, "gpu_count": 1}
    assert_matches("offers", primitives.offers({"clouds": ["local"], "cloud_options": {}, "gpu_count": 1}))
    assert_matches("instance", primitives.instance(dict(params), check_mode=True))
    assert_matches("instance", primitives.instance(dict(params)))
    try:
        assert_matches("instance", primitives.instance(dict(params)))
        assert_matches("instance_info", primitives.instance_info({"name": "retspec", "cloud": "local"}))
        assert_matches("instance", primitives.instance(dict(params, state="absent"), check_mode=True))
    finally:
        gone = primitives.instance(dict(params, state="absent"))
    assert_matches("instance", gone)


# -- AWS (moto) ---------------------------------------------------------------------------------------

class PinningSsh:
    """Stands in for vm.ssh.SshChecker against a fake cloud: pins a host key for the alias as the
    real check does, and returns what the real one returns (``<type> SHA256:<base64>``)."""

    def __init__(self, files, command="true"):
        self.files = files
        self.command = command
        self.outputs = {}

    def __call__(self, endpoint, alias):
        del endpoint
        self.outputs[alias] = "Linux fake 6.8.0 x86_64 GNU/Linux"
        key = base64.b64encode(b"\0\0\0\x0bssh-ed25519" + hashlib.sha256(alias.encode()).digest()).decode()
        self.files.pin(alias, "ssh-ed25519", key)
        digest = base64.b64encode(hashlib.sha256(base64.b64decode(key)).digest()).decode().rstrip("=")
        return "ssh-ed25519 SHA256:" + digest


def test_vm_on_aws_returns_its_zone_gpu_and_what_its_documentation_says(home, monkeypatch):
    pytest.importorskip("boto3")
    pytest.importorskip("moto")
    from ansible_collections.gpuprov.cloud.tests.fakes import moto_ec2 as aws_fake

    fake = aws_fake.shared_server()
    creds = fake.new_account()
    monkeypatch.setattr(vm_service.ssh, "SshChecker", PinningSsh)
    aws = dict(creds, endpoint_url=fake.endpoint_url, regions=["us-east-1"], allowed_cidrs=["198.51.100.7/32"],
               ami_name_filter="Deep Learning AMI Ubuntu Linux*", controller_ip_url="", poll_interval_s=0.1)
    params = dict(VM, clouds=["aws"], gpu="T4", cloud_options={"aws": aws})
    try:
        up = VmService(dict(params)).run(diff=True)
        assert_matches("vm", up)
        vm = up["vm"]
        assert (vm["cloud"], vm["gpu"], vm["gpu_count"]) == ("aws", "T4", 1)
        assert vm["zone"] and vm["zone"].startswith("us-east-1"), vm
        assert up["diff"]["after"]["zone"] == vm["zone"]
        assert up["history"][-1]["outcome"] == "Ready"
    finally:
        down = VmService(dict(params, state="absent")).run()
    assert_matches("vm", down)
    fake.clear(account=creds["aws_access_key_id"])


def test_orphans_on_the_local_cloud_returns_what_its_documentation_says(home):
    params = {"name": "retspec", "cloud": "local", "state": "present", "cloud_options": {}, "gpu_count": 1}
    sweeping = {"state": "present", "clouds": ["local"], "cloud": None, "regions": [], "include_foreign": False,
                "include_legacy": False, "journal": None, "journal_password": None, "teardown_timeout": None,
                "cloud_options": {}}
    assert_matches("orphans", sweep.run_task(dict(sweeping), check_mode=True))
    made = primitives.instance(dict(params))
    try:
        found = sweep.run_task(dict(sweeping), check_mode=True)
        assert_matches("orphans", found)
        assert [(r["id"], r["category"]) for r in found["resources"] if r["kind"] == "instance"] == [
            (made["instance"]["instance_id"], "owned")], found["resources"]
    finally:
        primitives.instance(dict(params, state="absent"))


def test_each_record_a_module_names_is_a_section_of_the_page_and_each_section_is_named():
    pages = records()
    named = set()
    for path in sorted((RECORDS_PAGE.parents[1] / "plugins" / "modules").glob("*.py")):
        module = importlib.import_module("ansible_collections.gpuprov.cloud.plugins.modules.%s" % path.stem)
        named.update(RECORD_LINK.findall(module.RETURN))
    assert named == set(pages), (sorted(named), sorted(pages))
