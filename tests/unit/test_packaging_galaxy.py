# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection tarball (ansible-galaxy collection build) is what a user installs: it carries the collection
and what a user runs from it, its metadata links the docs, issues and homepage, and dev-only files stay out."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import tarfile

import pytest
import yaml

REPO = pathlib.Path(__file__).resolve().parents[2]
URL = "https://github.com/gpuprov/cloud"

SHIPPED = [
    "README.md", "CHANGELOG.md", "COPYING", "meta/runtime.yml", "requirements.txt", "bindep.txt",
    # what a user installs with pip, per cloud (docs/install.md), and what every cloud's file includes
    "requirements/base.txt", "requirements/local.txt", "requirements/aws.txt", "requirements/postgresql.txt",
    "docs/install.md",
    "plugins/modules/vm.py", "plugins/action/vm.py", "plugins/inventory/journal.py",
    "roles/k3s/meta/argument_specs.yml", "playbooks/provision.yml", "playbooks/down.yml",
    "docs/recovery.md", "docs/awx.md", "changelogs/changelog.yaml", "changelogs/config.yaml",
    "extensions/awx/execution-environment.yml",
    # The docker cloud's default base image is on no registry: a user builds it with this script.
    "scripts/build-base-image.sh",
]
DEV_ONLY = [
    "Makefile", ".ansible-lint", "requirements-dev.txt", "tests/tools/", "docs/site/", ".ci/", "bench/",
    ".venv/", "build/", ".gitignore", "changelogs/.gitignore", "changelogs/.plugin-cache.yaml",
    "scripts/gen-cloud-options-doc.py",
    # the checkout's own config for the commands the README shows after make demo
    "ansible.cfg",
]


@pytest.fixture(scope="module")
def tarball(tmp_path_factory):
    out = tmp_path_factory.mktemp("dist")
    galaxy = pathlib.Path(sys.executable).parent / "ansible-galaxy"
    result = subprocess.run([str(galaxy), "collection", "build", "--output-path", str(out), str(REPO)],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    (path,) = out.glob("gpuprov-cloud-*.tar.gz")
    with tarfile.open(path) as tar:
        names = set(tar.getnames())
        files = json.load(tar.extractfile("FILES.json"))
        manifest = json.load(tar.extractfile("MANIFEST.json"))
        licence = tar.extractfile("COPYING").read().decode() if "COPYING" in names else ""
    return names, files, manifest, licence


def test_shipped_files_are_in_the_tarball(tarball):
    names, files = tarball[:2]
    listed = {entry["name"] for entry in files["files"]}
    missing = [path for path in SHIPPED if path not in names or path not in listed]
    assert not missing, "missing from the tarball: %s" % missing


@pytest.mark.parametrize("path", DEV_ONLY)
def test_dev_only_path_is_left_out(tarball, path):
    names = tarball[0]
    found = sorted(name for name in names if name == path.rstrip("/") or name.startswith(path))
    assert not found, "dev-only %s is in the tarball: %s" % (path, found[:5])


def test_manifest_links_docs_issues_homepage_and_repository(tarball):
    info = tarball[2]["collection_info"]
    assert info["repository"] == URL
    assert info["homepage"] == URL
    assert info["issues"] == URL + "/issues"
    assert info["documentation"] == URL + "/tree/main/docs"


def test_galaxy_yml_declares_the_links():
    meta = yaml.safe_load((REPO / "galaxy.yml").read_text())
    for key in ("documentation", "issues", "homepage", "repository"):
        assert meta[key].startswith(URL), key


def test_the_tarball_carries_the_licence_galaxy_yml_names(tarball):
    meta = yaml.safe_load((REPO / "galaxy.yml").read_text())
    assert meta["license"] == ["GPL-3.0-or-later"]
    licence = tarball[3]
    assert licence.lstrip().startswith("GNU GENERAL PUBLIC LICENSE") and "Version 3, 29 June 2007" in licence
    assert (REPO / "COPYING").read_text() == licence


def test_every_requirements_file_is_shipped(tarball):
    names = tarball[0]
    files = sorted("requirements/%s" % path.name for path in (REPO / "requirements").glob("*.txt"))
    assert len(files) > 12 and not [path for path in files if path not in names]
