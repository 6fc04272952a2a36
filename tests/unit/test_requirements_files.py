# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection's pip requirements: one file per cloud (requirements/<cloud>.txt, each with the base every
cloud needs), one for a PostgreSQL journal, requirements.txt with all of them; module_utils/requirements.py's
table agrees with the files, its message names the exact command with the installed collection's path and
the file that holds the missing package; and each module's ansible-doc REQUIREMENTS lists what it needs."""

from __future__ import annotations

import json
import os
import pathlib
import re
import shlex
import subprocess
import sys

import pytest
import yaml

from ansible_collections.gpuprov.cloud.plugins.module_utils import requirements
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.registry import ADAPTERS

REPO = pathlib.Path(__file__).resolve().parents[2]
FILES = REPO / "requirements"
COLLECTIONS = REPO / "build" / "collections"
BIN = pathlib.Path(sys.executable).parent
REST_CLOUDS = ("lambda", "runpod", "primeintellect", "verda", "massedcompute", "hyperstack", "digitalocean")


def requirement_lines(path, seen=None):
    """The requirement lines of a pip file, its ``-r`` includes followed (relative to the including file)."""
    path = os.path.abspath(path)
    seen = set() if seen is None else seen
    if path in seen:
        return []
    seen.add(path)
    lines = []
    with open(path, encoding="utf-8") as handle:
        for raw in handle:
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            if line.startswith("-r "):
                lines += requirement_lines(os.path.join(os.path.dirname(path), line[3:].strip()), seen)
            else:
                lines.append(line)
    return lines


def requirement_names(path):
    """The package names (lower case, no extras or versions) a pip file installs."""
    return {re.split(r"[\[<>=!~ ;]", line, maxsplit=1)[0].lower() for line in requirement_lines(path)}


def test_every_cloud_has_its_file_with_the_base():
    base = set(requirement_lines(FILES / "base.txt"))
    assert {"paramiko>=3.4", "cryptography>=41"} <= base
    for cloud in ADAPTERS:
        path = FILES / ("%s.txt" % cloud)
        assert path.is_file(), "no requirements/%s.txt" % cloud
        assert base <= set(requirement_lines(path)), cloud


@pytest.mark.parametrize("cloud, package", [("aws", "boto3"), ("gcp", "google-cloud-compute"), ("docker", "docker"),
                                            ("nebius", "nebius")] + [(cloud, "requests") for cloud in REST_CLOUDS])
def test_a_clouds_file_holds_its_package_and_no_other_clouds(cloud, package):
    names = requirement_names(FILES / ("%s.txt" % cloud))
    assert names == {"paramiko", "cryptography", package}, names


def test_local_needs_only_the_base():
    assert requirement_names(FILES / "local.txt") == {"paramiko", "cryptography"}


def test_requirements_txt_is_every_file_each_package_once():
    lines = requirement_lines(REPO / "requirements.txt")
    assert len(lines) == len(set(lines)), lines   # ansible-builder's introspection would repeat each duplicate
    union = set()
    for path in FILES.glob("*.txt"):
        union |= set(requirement_lines(path))
    assert set(lines) == union
    # What ansible-builder's introspection reads for an execution environment.
    meta = yaml.safe_load((REPO / "meta" / "execution-environment.yml").read_text())
    assert meta["dependencies"]["python"] == "requirements.txt"
    assert "ansible-core" not in requirement_names(REPO / "requirements.txt")   # the user's own, not ours


def test_the_helpers_table_matches_the_files():
    for package, (requirement, stem) in requirements.PACKAGES.items():
        files = [FILES / ("%s.txt" % c) for c in REST_CLOUDS] if stem is None else [FILES / ("%s.txt" % stem)]
        for path in files:
            assert requirement in requirement_lines(path), (package, path.name)
    assert set(requirements.CLOUD_FILES) == set(ADAPTERS)
    named = set()
    for path in [REPO / "requirements.txt"] + sorted(FILES.glob("*.txt")):
        named |= requirement_names(path)
    assert named == set(requirements.PACKAGES)


@pytest.mark.parametrize("package, cloud, stem", [
    ("boto3", "aws", "aws"), ("botocore", None, "aws"), ("google.cloud", None, "gcp"), ("docker", None, "docker"),
    ("requests", "verda token", "verda"), ("requests", "lambda", "lambda"), ("nebius", None, "nebius"),
    ("psycopg", None, "postgresql"), ("paramiko", None, "base"), ("paramiko", "aws", "aws"),
])
def test_the_message_names_the_exact_command_with_the_installed_path(package, cloud, stem):
    msg = requirements.missing_package(package, cloud)
    command = requirements.install_command(package, cloud)
    assert msg.endswith(": " + command), msg
    assert sys.executable in msg
    words = shlex.split(command)
    assert words[:5] == [sys.executable, "-m", "pip", "install", "-r"], command
    path = pathlib.Path(words[5])
    # The collection this very module was imported from, by its own path, and a file that has the package.
    assert path.is_absolute() and path == pathlib.Path(requirements.COLLECTION_ROOT, "requirements", stem + ".txt")
    assert requirements.pip_name(package) in requirement_names(path)


def test_requests_without_a_known_cloud_names_requirements_txt():
    command = requirements.install_command("requests")
    assert command.endswith(os.path.join(requirements.COLLECTION_ROOT, "requirements.txt")), command


def test_without_the_collections_files_on_disk_the_command_installs_the_package(monkeypatch, tmp_path):
    """A module shipped to another host runs from a zip: no file to name, so the requirement itself."""
    monkeypatch.setattr(requirements, "COLLECTION_ROOT", str(tmp_path / "payload.zip" / "gpuprov" / "cloud"))
    assert requirements.install_command("psycopg") == "%s -m pip install 'psycopg[binary]>=3.1'" % sys.executable
    assert requirements.install_command("boto3", "aws").endswith(" -m pip install 'boto3>=1.34'")


def test_a_missing_module_of_the_collection_is_a_broken_install_not_a_requirement():
    error = ImportError("No module named 'x'", name="ansible_collections.gpuprov.cloud.plugins.module_utils.x")
    msg = requirements.missing_import(error)
    assert "reinstall" in msg and "pip install" not in msg
    assert requirements.missing_import(ImportError("No module named 'boto3'", name="boto3"), "aws") == \
        requirements.missing_package("boto3", "aws")


# What each module and plugin needs beyond the standard library and ansible-core (python itself aside).
SDKS = {"boto3", "google-cloud-compute", "docker", "requests", "nebius"}
NEEDS = {
    ("module", "vm"): SDKS | {"paramiko", "cryptography", "psycopg"},
    ("module", "offers"): SDKS,
    ("module", "instance"): SDKS | {"cryptography", "psycopg"},
    ("module", "instance_info"): SDKS,
    ("module", "health_info"): SDKS | {"paramiko", "psycopg"},
    ("module", "orphans"): SDKS | {"psycopg"},
    ("module", "reap"): SDKS | {"psycopg"},
    ("module", "journal_info"): {"psycopg"},
    ("module", "vm_stage"): {"psycopg"},
    ("module", "ssh_files"): {"psycopg"},
    ("module", "k3s_validate"): {"cryptography"},
    ("module", "k3s_probe"): set(),
    ("module", "k3s_kubeconfig"): set(),
    ("inventory", "journal"): {"psycopg"},
}


@pytest.fixture(scope="module")
def shown():
    """{(kind, name): its REQUIREMENTS} as ansible-doc shows them, doc fragments merged."""
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(COLLECTIONS), ANSIBLE_NOCOLOR="1")
    found = {}
    for kind in sorted({needed[0] for needed in NEEDS}):
        names = ["gpuprov.cloud.%s" % name for k, name in NEEDS if k == kind]
        proc = subprocess.run([str(BIN / "ansible-doc"), "--json", "-t", kind] + names, env=env,
                              capture_output=True, text=True, timeout=120, check=False)
        assert proc.returncode == 0, proc.stderr
        for full, entry in json.loads(proc.stdout).items():
            found[(kind, full.split(".")[-1])] = entry["doc"].get("requirements", [])
    return found


@pytest.mark.parametrize("kind, name", sorted(NEEDS), ids=lambda value: value)
def test_ansible_doc_requirements_list_what_the_plugin_needs(shown, kind, name):
    entries = shown[(kind, name)]
    listed = {entry.split()[0] for entry in entries}
    assert listed - {"python"} == NEEDS[(kind, name)], listed
    for entry in entries:
        if entry.split()[0] in requirements.PACKAGES:
            # Each says which requirements file installs it (cryptography: that ansible-core has it already).
            assert "requirements/" in entry or "ansible-core brings it" in entry, entry


def test_every_module_is_in_the_table():
    modules = {("module", p.stem) for p in (REPO / "plugins" / "modules").glob("*.py")}
    assert modules <= set(NEEDS), sorted(modules - set(NEEDS))


def test_the_ssh_check_without_paramiko_names_the_command(monkeypatch, tmp_path):
    from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import ssh   # pylint: disable=import-outside-toplevel
    monkeypatch.setattr(ssh, "HAS_PARAMIKO", False)
    with pytest.raises(RuntimeError) as info:
        ssh.SshChecker(ssh.ControllerFiles(str(tmp_path), str(tmp_path / "id_ed25519")))
    assert str(info.value) == "the SSH check needs paramiko. " + requirements.missing_package("paramiko")
    assert requirements.install_command("paramiko").endswith("/requirements/base.txt")


def test_an_adapter_whose_import_fails_names_its_clouds_file(monkeypatch):
    from ansible_collections.gpuprov.cloud.plugins.module_utils.providers import registry  # pylint: disable=C0415
    from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import ProviderError  # pylint: disable=C0415

    # The adapter's module imports a package that is not installed.
    monkeypatch.setitem(registry.ADAPTERS, "runpod", ("absent_vendor_sdk.client", "RunpodProvider"))
    with pytest.raises(ProviderError) as info:
        registry.get_provider("runpod", {})
    assert info.value.msg.startswith("clouds: the runpod adapter cannot load (No module named 'absent_vendor_sdk'). "
                                     "absent_vendor_sdk is not installed"), info.value.msg
    assert info.value.msg.endswith(requirements.install_command("requests", "runpod")), info.value.msg
