"""The AWX files under extensions/awx: credential types inject exactly the variables the adapters read,
job templates name real playbooks and ask only for variables those playbooks use, and the EE definition
brings in the collection."""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys

import pytest
import yaml

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers import options as shared
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.registry import OPTION_SPECS

REPO = pathlib.Path(__file__).resolve().parents[2]
BIN = pathlib.Path(sys.executable).parent
AWX = REPO / "extensions" / "awx"
CREDENTIAL_TYPES = sorted((AWX / "credential_types").glob("*.yml"))
JOB_TEMPLATES = sorted((AWX / "job_templates").glob("*.json"))
# Clouds whose credentials AWX's built-in types already inject (Amazon Web Services, Google Compute Engine)
# and clouds that need none.
BUILT_IN_OR_NONE = {"aws", "gcp", "local", "docker"}
# Field types and question types AWX accepts.
FIELD_TYPES = {"string", "boolean"}
QUESTION_TYPES = {"text", "textarea", "password", "integer", "float", "multiplechoice", "multiselect"}


def _load(path: pathlib.Path):
    with open(path, encoding="utf-8") as handle:
        return json.load(handle) if path.suffix == ".json" else yaml.safe_load(handle)


def _cloud_of(path: pathlib.Path) -> str:
    return {"lambda_cloud": "lambda"}.get(path.stem, path.stem)


def test_every_cloud_with_an_api_key_has_a_credential_type():
    shipped = {_cloud_of(p) for p in CREDENTIAL_TYPES}
    assert set(OPTION_SPECS) - BUILT_IN_OR_NONE <= shipped
    assert {"journal", "ssh_key"} <= shipped


@pytest.mark.parametrize("path", CREDENTIAL_TYPES, ids=lambda p: p.stem)
def test_credential_type_is_well_formed(path):
    doc = _load(path)
    assert set(doc) == {"name", "description", "kind", "inputs", "injectors"}
    assert doc["kind"] == "cloud" and doc["name"].startswith("gpuprov ")
    fields = {f["id"]: f for f in doc["inputs"]["fields"]}
    assert all(f["type"] in FIELD_TYPES and f["label"] for f in fields.values())
    assert set(doc["inputs"]["required"]) <= set(fields)
    # Every injected value is one of the type's own inputs (or the file injector's name).
    for value in doc["injectors"].get("env", {}).values():
        names = set(re.findall(r"{{\s*([\w.]+)", value))
        assert names and names <= set(fields) | {"tower.filename"}, value
    for variable in doc["injectors"].get("env", {}):
        assert not variable.startswith("ANSIBLE_"), "AWX refuses to inject %s" % variable


@pytest.mark.parametrize("path", [p for p in CREDENTIAL_TYPES if _cloud_of(p) in OPTION_SPECS],
                         ids=lambda p: p.stem)
def test_cloud_credential_type_injects_what_the_adapter_reads(path):
    doc = _load(path)
    spec = OPTION_SPECS[_cloud_of(path)]
    # environment variable -> the option it stands in for
    read = {name: option for option, declared in spec.items() for name in shared.environment_names(declared)}
    fields = {f["id"]: f for f in doc["inputs"]["fields"]}
    for variable, value in doc["injectors"]["env"].items():
        assert variable in read, "%s: the adapter reads none of %s" % (variable, sorted(read))
        field = re.search(r"{{\s*(\w+)", value).group(1)
        # A secret option is a secret input (AWX then hides it in the job's environment).
        assert bool(fields[field].get("secret")) == bool(spec[read[variable]].get("no_log")), variable


def test_ssh_key_and_journal_credential_types():
    key = _load(AWX / "credential_types" / "ssh_key.yml")
    assert key["injectors"]["env"] == {"GPUPROV_SSH_KEY_FILE": "{{ tower.filename }}"}
    assert "{{ ssh_key_data }}" in key["injectors"]["file"]["template"]
    journal = _load(AWX / "credential_types" / "journal.yml")
    assert set(journal["injectors"]["env"]) == {"GPUPROV_JOURNAL", "PGPASSWORD"}
    secret = [f["id"] for f in journal["inputs"]["fields"] if f.get("secret")]
    assert secret == ["password"]


@pytest.mark.parametrize("path", JOB_TEMPLATES, ids=lambda p: p.stem)
def test_job_template_asks_only_for_what_its_playbook_reads(path):
    doc = _load(path)
    playbook = REPO / doc["playbook"]
    assert playbook.is_file(), doc["playbook"]
    source = playbook.read_text()
    assert doc["survey_enabled"] and doc["survey_spec"]["spec"]
    for question in doc["survey_spec"]["spec"]:
        assert question["type"] in QUESTION_TYPES, question
        assert re.search(r"\b%s\b" % question["variable"], source), question["variable"]
        if question["type"] in ("multiplechoice", "multiselect"):
            assert question["choices"] and question.get("default", question["choices"][0]) in question["choices"]
        if question["type"] == "text" and not question["required"]:
            # An empty default would be passed on as an empty variable; unanswered must mean unset.
            assert "default" not in question, question["variable"]


def test_provision_survey_offers_every_cloud_an_awx_job_can_use():
    spec = {q["variable"]: q for q in _load(AWX / "job_templates" / "provision.json")["survey_spec"]["spec"]}
    assert set(spec["clouds"]["choices"]) == set(OPTION_SPECS) - {"local"}


def test_the_sweep_template_is_a_dry_run_unless_asked():
    spec = {q["variable"]: q for q in _load(AWX / "job_templates" / "sweep.json")["survey_spec"]["spec"]}
    assert spec["delete"]["default"] == "false" and spec["delete"]["choices"] == ["false", "true"]
    assert not spec["delete"]["required"]
    provision = {q["variable"]: q for q in _load(AWX / "job_templates" / "provision.json")["survey_spec"]["spec"]}
    assert spec["clouds"]["choices"] == provision["clouds"]["choices"]
    # Every variable the playbook's header says it takes is asked.
    assert set(spec) == {"delete", "clouds", "regions", "include_foreign", "include_legacy"}


def test_ee_definition_takes_the_published_collection_at_this_version():
    """It needs no file beside it (the old one took ../../build/ee/gpuprov-cloud.tar.gz, a checkout's)."""
    ee = _load(AWX / "execution-environment.yml")
    assert ee["version"] == 3
    version = _load(REPO / "galaxy.yml")["version"]
    assert ee["dependencies"]["galaxy"]["collections"] == [{"name": "gpuprov.cloud", "version": version}]
    assert "additional_build_files" not in ee
    meta = _load(REPO / "meta" / "execution-environment.yml")
    for entry in ("python", "system"):
        assert (REPO / meta["dependencies"][entry]).is_file()


def test_ee_context_builds_from_the_installed_collection(tmp_path):
    """ansible-builder create, run elsewhere on the EE file of a collection installed from its tarball, makes a
    context whose Galaxy requirements name the collection at this version (offline: create fetches nothing)."""
    dist, collections, context = tmp_path / "dist", tmp_path / "collections", tmp_path / "context"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "ANSIBLE_COLLECTIONS_PATH")}
    env["ANSIBLE_COLLECTIONS_PATH"] = str(collections)
    built = subprocess.run([str(BIN / "ansible-galaxy"), "collection", "build", "--output-path", str(dist), str(REPO)],
                           env=env, capture_output=True, text=True, timeout=300, check=False)
    assert built.returncode == 0, built.stderr
    (tarball,) = dist.glob("gpuprov-cloud-*.tar.gz")
    installed = subprocess.run([str(BIN / "ansible-galaxy"), "collection", "install", "--offline", "-p",
                                str(collections), str(tarball)], env=env, capture_output=True, text=True,
                               timeout=300, check=False)
    assert installed.returncode == 0, installed.stderr
    definition = collections / "ansible_collections" / "gpuprov" / "cloud" / "extensions" / "awx" / \
        "execution-environment.yml"
    created = subprocess.run([str(BIN / "ansible-builder"), "create", "-f", str(definition), "--context", str(context)],
                             cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert created.returncode == 0, created.stdout + created.stderr
    galaxy = _load(context / "_build" / "requirements.yml")
    version = _load(REPO / "galaxy.yml")["version"]
    assert galaxy["collections"] == [{"name": "gpuprov.cloud", "version": version}], galaxy
