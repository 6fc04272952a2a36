"""The modules' pages as ansible-doc shows them (issue 25): every short description fits ``ansible-doc -l``, the
modules that only the collection's roles and playbooks call say so in it, and a module's page stays about what
the module does (each cloud's options are on the cloud's page, docs/clouds/<cloud>.md, and the records some
values hold on docs/return-values.md), at most 400 lines."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
COLLECTIONS = REPO / "build" / "collections"
BIN = pathlib.Path(sys.executable).parent
MODULES = sorted(path.stem for path in (REPO / "plugins" / "modules").glob("*.py"))
# The modules only the collection's own roles and playbooks call.
INTERNAL = {"k3s_kubeconfig": "k3s role", "k3s_probe": "k3s role", "k3s_validate": "k3s role",
            "vm_stage": "k3s role", "ssh_files": "tunnel playbook"}
# What fits beside the names in ansible-doc -l (it cuts a longer one short with "...").
SHORT_DESCRIPTION_MAX = 45
PAGE_MAX_LINES = 400


def ansible_doc(*args):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(COLLECTIONS), ANSIBLE_NOCOLOR="1")
    proc = subprocess.run([str(BIN / "ansible-doc"), *args], env=env, capture_output=True, text=True, timeout=300,
                          check=False)
    assert proc.returncode == 0 and "WARNING" not in proc.stderr, proc.stderr
    return proc.stdout


@pytest.fixture(scope="module")
def documented():
    docs = json.loads(ansible_doc("--json", "-t", "module", *("gpuprov.cloud.%s" % m for m in MODULES)))
    return {name: docs["gpuprov.cloud.%s" % name]["doc"] for name in MODULES}


@pytest.mark.parametrize("module", MODULES)
def test_the_short_description_fits_the_list_and_says_when_the_module_is_internal(module, documented):
    short = documented[module]["short_description"]
    assert len(short) <= SHORT_DESCRIPTION_MAX, "%s: %d characters: %r" % (module, len(short), short)
    if module in INTERNAL:
        assert short.endswith("(internal, %s)" % INTERNAL[module]), short
    else:
        assert "internal" not in short, short


def test_the_list_shows_every_short_description_whole(documented):
    listed = ansible_doc("-l", "gpuprov.cloud")
    for module in MODULES:
        assert documented[module]["short_description"] in listed, listed


def test_only_the_modules_that_call_a_cloud_carry_cloud_options_and_none_carries_a_cloud_s_options(documented):
    for module, doc in documented.items():
        option = doc.get("options", {}).get("cloud_options")
        if option is None:
            continue
        assert "suboptions" not in option, module
        text = " ".join(option["description"] if isinstance(option["description"], list) else [option["description"]])
        assert "docs/clouds/<cloud>.md" in text, (module, text)
        if module in ("journal_info", "ssh_files", "vm_stage"):
            assert "ignored by this module" in text, (module, text)


@pytest.mark.parametrize("module", MODULES)
def test_a_module_page_is_at_most_400_lines(module):
    lines = len(ansible_doc("gpuprov.cloud.%s" % module).splitlines())
    assert lines <= PAGE_MAX_LINES, "%s: %d lines" % (module, lines)
