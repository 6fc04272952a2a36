# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The changelog is kept with antsibull-changelog: its fragments lint clean, every fragment is folded into a
release of changelogs/changelog.yaml, and CHANGELOG.md is what antsibull-changelog generates from it."""

from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys

import pytest
import yaml

REPO = pathlib.Path(__file__).resolve().parents[2]
CHANGELOGS = REPO / "changelogs"
FOLD_IN = "antsibull-changelog release --update-existing && antsibull-changelog generate"


def antsibull_changelog() -> str:
    # The venv's copy (requirements-dev.txt), beside the interpreter running the tests.
    tool = pathlib.Path(sys.executable).parent / "antsibull-changelog"
    if not tool.exists():
        found = shutil.which("antsibull-changelog")
        if not found:
            pytest.fail("antsibull-changelog is not installed (requirements-dev.txt; make venv installs it)")
        return found
    return str(tool)


def run(args, cwd):
    return subprocess.run([antsibull_changelog(), *args], cwd=cwd, capture_output=True, text=True, check=False)


def test_fragments_lint_clean():
    result = run(["lint"], REPO)
    assert result.returncode == 0 and not result.stdout.strip(), result.stdout + result.stderr


def test_changelog_yaml_lints_strictly():
    result = run(["lint-changelog-yaml", "--strict", str(CHANGELOGS / "changelog.yaml")], REPO)
    assert result.returncode == 0 and not result.stdout.strip(), result.stdout + result.stderr


def test_config_writes_markdown_changelog_and_keeps_fragments():
    config = yaml.safe_load((CHANGELOGS / "config.yaml").read_text())
    assert config["output"] == [{"file": "CHANGELOG.md", "format": "md"}]
    assert config["keep_fragments"] is True


def test_every_fragment_is_in_a_release():
    releases = yaml.safe_load((CHANGELOGS / "changelog.yaml").read_text())["releases"]
    released = {name for release in releases.values() for name in release.get("fragments", [])}
    fragments = {path.name for path in (CHANGELOGS / "fragments").iterdir() if path.suffix in (".yml", ".yaml")}
    assert fragments, "changelogs/fragments holds no fragment"
    missing = sorted(fragments - released)
    assert not missing, "fragments not in changelogs/changelog.yaml: %s; fold them in with: %s" % (missing, FOLD_IN)


def test_changelog_md_is_generated_from_changelog_yaml(tmp_path):
    # Generate in a copy, so the run leaves no plugin cache or rewritten file in the tree.
    shutil.copy(REPO / "galaxy.yml", tmp_path / "galaxy.yml")
    shutil.copytree(CHANGELOGS, tmp_path / "changelogs")
    out = tmp_path / "CHANGELOG.generated.md"
    result = run(["generate", "--output", str(out), "--output-format", "md"], tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    current = (REPO / "CHANGELOG.md").read_text()
    assert current == out.read_text(), "CHANGELOG.md is not what changelogs/ generates; run: " + FOLD_IN
    assert "## v0\\.1\\.0" in current
