"""What a guest power-off does to billing (issue 27): every cloud's Capabilities says it, docs/limits.md's billing
table says the same (one row per cloud, the same verdict and setting), and expiry/billing.py says it for people."""

from __future__ import annotations

import pathlib
import re

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.expiry import billing
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers import registry
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import Capabilities, PowerOffBilling

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "limits.md"
SECTION = "## What a guest power-off does to billing"


def _capabilities(cloud):
    caps = billing.capabilities_of(cloud)
    if caps is None:
        pytest.skip("the %s adapter cannot be built here (its SDK is not installed)" % cloud)
    return caps


def _table():
    """{cloud: (verdict, verdict without the setting or None, the setting cell)} from the doc's billing table."""
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index(SECTION):]
    end = section.find("\n## ", len(SECTION))
    section = section if end == -1 else section[:end]
    rows = {}
    lines = [line for line in section.splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    assert header[:2] == ["Cloud", "Verdict"], header
    setting_column = next(i for i, name in enumerate(header) if name.startswith("What the adapter sets"))
    for line in lines[2:]:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        assert len(cells) == len(header), line
        names = re.findall(r"`([a-z]+)`", cells[0])
        assert len(names) == 1, "the row names no cloud (its registry name in backticks): %s" % cells[0]
        assert names[0] not in rows, "two rows for %s" % names[0]
        verdict = re.match(r"`(\w+)`", cells[1])
        unset = re.search(r"without the setting `(\w+)`", cells[1])
        assert verdict, "no verdict in the %s row: %s" % (names[0], cells[1])
        rows[names[0]] = (verdict.group(1), unset.group(1) if unset else None, cells[setting_column])
    return rows


def test_the_doc_has_one_row_per_cloud():
    assert sorted(_table()) == registry.known_clouds()


@pytest.mark.parametrize("cloud", registry.known_clouds())
def test_the_doc_says_what_the_capability_says(cloud):
    caps = _capabilities(cloud)
    verdict, unset, setting_cell = _table()[cloud]
    assert verdict in PowerOffBilling.ALL and (unset is None or unset in PowerOffBilling.ALL)
    assert (verdict, unset) == (caps.poweroff_billing, caps.poweroff_billing_unset), (
        "docs/limits.md says %s (without the setting: %s) for %s, its adapter %s (%s)"
        % (verdict, unset, cloud, caps.poweroff_billing, caps.poweroff_billing_unset))
    if caps.poweroff_setting:
        assert "`%s`" % caps.poweroff_setting in setting_cell, "the doc does not name %s's setting" % cloud
    else:
        assert setting_cell.startswith(("nothing", "not applicable")), setting_cell


def test_the_known_verdicts():
    # What the vendors say (docs/limits.md has the sources); a change here is a change to that table.
    said = {cloud: _capabilities(cloud).poweroff_billing for cloud in registry.known_clouds()}
    assert said == {
        "aws": "ends", "gcp": "ends_compute", "nebius": "ends_compute", "lambda": "continues",
        "digitalocean": "continues", "hyperstack": "continues", "runpod": "unknown", "primeintellect": "unknown",
        "massedcompute": "unknown", "verda": "unknown", "docker": "free", "local": "free"}
    assert _capabilities("aws").poweroff_billing_of(False) == "ends_compute"
    assert _capabilities("nebius").poweroff_billing_of(False) == "continues"
    assert _capabilities("gcp").poweroff_billing_of(False) == "ends_compute"   # no setting: the same either way


# -- the sentence ---------------------------------------------------------------------------

def caps_of(verdict, setting=None, unset=None):
    return Capabilities(poweroff_billing=verdict, poweroff_setting=setting, poweroff_billing_unset=unset,
                        poweroff_source="a test")


def test_a_poweroff_that_ends_billing_names_the_setting_behind_it():
    caps = caps_of("ends", "InstanceInitiatedShutdownBehavior=terminate", "ends_compute")
    assert billing.poweroff_sentence("aws", caps) == (
        "a guest power-off ends the billing of a VM on aws: the instance is terminated "
        "(the adapter set InstanceInitiatedShutdownBehavior=terminate)")
    assert billing.poweroff_sentence("aws", caps, shutdown_set=False) == (
        "a guest power-off stops a VM on aws (the VM was made without InstanceInitiatedShutdownBehavior=terminate): "
        "its instance and GPUs no longer bill, but its disks and IP addresses bill until gpuprov.cloud.reap (or down) "
        "removes them")


def test_every_verdict_has_its_sentence():
    assert billing.poweroff_sentence("gcp", caps_of("ends_compute")) == (
        "a guest power-off stops a VM on gcp: its instance and GPUs no longer bill, but its disks and IP addresses "
        "bill until gpuprov.cloud.reap (or down) removes them")
    assert billing.poweroff_sentence("digitalocean", caps_of("continues")) == (
        "a powered-off VM still bills on digitalocean: only gpuprov.cloud.reap (or down) ends its billing")
    assert billing.poweroff_sentence("runpod", caps_of("unknown")) == (
        "runpod does not say whether a powered-off VM still bills: take it as billing until gpuprov.cloud.reap "
        "(or down) removes it")
    assert billing.poweroff_sentence("docker", caps_of("free")) == (
        "nothing bills on docker: a powered-off VM costs nothing, and gpuprov.cloud.reap (or down) removes what "
        "remains")
    nebius = caps_of("ends_compute", "recovery_policy=FAIL", "continues")
    assert billing.poweroff_sentence("nebius", nebius, shutdown_set=False) == (
        "a powered-off VM still bills on nebius (the VM was made without recovery_policy=FAIL): only "
        "gpuprov.cloud.reap (or down) ends its billing")


def test_an_adapter_that_says_nothing_known_reads_as_unknown():
    assert billing.poweroff_billing("x", Capabilities()) == PowerOffBilling.UNKNOWN      # not answered (None)
    assert billing.poweroff_billing("x", caps_of("probably")) == PowerOffBilling.UNKNOWN
    assert billing.poweroff_billing("no-such-cloud") == PowerOffBilling.UNKNOWN         # no adapter to ask
    assert billing.poweroff_sentence("no-such-cloud").startswith("no-such-cloud does not say")


@pytest.mark.parametrize("cloud", registry.known_clouds())
def test_every_cloud_gets_its_sentence_from_the_registry_without_credentials(cloud):
    caps = _capabilities(cloud)
    assert billing.poweroff_billing(cloud) == caps.poweroff_billing
    assert billing.poweroff_sentence(cloud) == billing.poweroff_sentence(cloud, caps)
    assert cloud in billing.poweroff_sentence(cloud)


# The README's short table groups the clouds by verdict; each row's words say the verdict.
README = DOC.parents[1] / "README.md"
README_WORDS = {PowerOffBilling.ENDS: "ends the bill", PowerOffBilling.ENDS_COMPUTE: "stops the VM",
                PowerOffBilling.CONTINUES: "still bills", PowerOffBilling.UNKNOWN: "not said by the vendor",
                PowerOffBilling.FREE: "free"}


def test_the_readme_table_groups_every_cloud_under_the_words_of_its_verdict():
    section = README.read_text().split("## Limits and expiry", 1)[1].split("\n## ", 1)[0]
    seen = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 2 or not cells[0].startswith("`"):
            continue
        clouds = re.findall(r"`(\w+)`", cells[0])
        verdicts = {billing.poweroff_billing(cloud, _capabilities(cloud)) for cloud in clouds}
        assert len(verdicts) == 1, (clouds, verdicts)
        assert README_WORDS[verdicts.pop()] in cells[1], line
        seen += clouds
    assert sorted(seen) == sorted(registry.ADAPTERS)
