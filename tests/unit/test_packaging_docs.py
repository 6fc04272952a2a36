# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The docs site's guides (docs/site/build.py): the README splits into a usage guide and a clouds guide, and
Markdown links become site pages (guides) or repository links (other files); a link to nothing is an error.
tests/integration/test_docs_site.py builds the whole site and renders it in a browser."""

from __future__ import annotations

import importlib.util
import pathlib
import re

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
SPEC = importlib.util.spec_from_file_location("docs_site_build", REPO / "docs" / "site" / "build.py")
build = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(build)


def rewrite(text, source):
    return build.MARKDOWN_LINK.sub(lambda match: build.site_link(match, source), text)


@pytest.mark.parametrize("text, source, expected", [
    ("see [AWX](docs/awx.md).", "README.md", "see [AWX](awx.md)."),
    ("[r](docs/recovery.md#the-model)", "README.md", "[r](recovery.md#the-model)"),
    ("[back](../README.md)", "docs/awx.md", "[back](usage.md)"),
    ("[vm](plugins/modules/vm.py)", "README.md",
     "[vm](https://github.com/gpuprov/cloud/blob/main/plugins/modules/vm.py)"),
    ("[web](https://example.org/x) and [here](#clouds)", "README.md",
     "[web](https://example.org/x) and [here](#clouds)"),
])
def test_links_become_site_pages_or_repository_links(text, source, expected):
    assert rewrite(text, REPO / source) == expected


def test_a_link_to_a_missing_file_names_the_page_and_the_target():
    with pytest.raises(build.BuildError, match=r"docs/awx\.md links to nowhere\.md"):
        rewrite("[x](nowhere.md)", REPO / "docs" / "awx.md")


def test_readme_splits_into_usage_and_clouds():
    readme = "# T\n\nintro\n\n## Clouds\n\ntable\n\n### Adding a cloud\n\nhow\n\n## Next\n\nmore\n"
    usage, clouds = build.split_readme(readme)
    assert usage == "# T\n\nintro\n\n## Next\n\nmore\n"
    assert clouds == "# Clouds\n\ntable\n\n## Adding a cloud\n\nhow\n\n"


def test_readme_without_a_clouds_section_is_an_error():
    with pytest.raises(build.BuildError, match="no '## Clouds' section"):
        build.split_readme("# T\n\n## Other\n")


@pytest.mark.parametrize("text, source, expected", [
    ("[aws](docs/clouds/aws.md)", "README.md", "[aws](../clouds/aws.md)"),
    ("[clouds](docs/clouds/README.md#x)", "README.md", "[clouds](../clouds/index.md#x)"),
    ("[list](README.md)", "docs/clouds/aws.md", "[list](index.md)"),
    ("[o](../clouds/README.md)", "docs/playbooks/down.md", "[o](../clouds/index.md)"),
    ("[s](../sweep.md)", "docs/playbooks/sweep.md", "[s](../guides/sweep.md)"),
    ("[p](playbooks/provision.md)", "docs/awx.md", "[p](../playbooks/provision.md)"),
    ("[c](CHANGELOG.md)", "README.md", "[c](../changelog.md)"),
])
def test_links_to_playbook_cloud_and_changelog_pages_become_their_site_pages(text, source, expected):
    assert rewrite(text, REPO / source) == expected


def test_each_section_has_its_index_first_and_the_clouds_index_its_label(tmp_path):
    assert build.write_section(tmp_path, "playbooks")[0] == "index"
    clouds = build.write_section(tmp_path, "clouds")
    assert clouds[0] == "index" and "aws" in clouds
    assert (tmp_path / "clouds" / "index.md").read_text().startswith("(%s)=\n" % build.CLOUDS_LABEL)
    assert "](index.md)" in (tmp_path / "clouds" / "aws.md").read_text()   # README.md, on the site


def test_the_index_links_every_section_the_reference_and_the_changelog(tmp_path):
    build.write_index(tmp_path, ["usage"], {"playbooks": ["index", "down"], "clouds": ["index", "aws"]})
    index = (tmp_path / "index.rst").read_text()
    for caption, page in (("Guides", "guides/usage"), ("Playbooks", "playbooks/down"), ("Cloud options", "clouds/aws"),
                          ("Reference", "reference/index"), ("Changelog", "changelog")):
        assert ":caption: %s\n\n" % caption in index and "   %s\n" % page in index


# -- a page per playbook, naming every variable it reads ----------------------------------------------

# Names a playbook's templates use that are not the user's: Ansible's own, and what the k3s role sets.
NOT_VARIABLES = {"inventory_hostname", "hostvars", "groups", "ansible_play_hosts", "ansible_check_mode", "item",
                 "omit", "lookup", "query", "dict", "none", "true", "false", "range", "k3s_boot_script"}


class _AnyName(dict):
    """Filters and tests by any name (Ansible's and the collection's), for parsing templates only."""

    def __contains__(self, key):
        return True

    def get(self, key, default=None):
        return dict.get(self, key) or (lambda *args, **kwargs: None)


def host_vars_read():
    """The variables a vm task with ``from_host_vars: true`` reads (tasks/host_vars.py)."""
    from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks import host_vars

    options = host_vars.SHORT_NAMED + host_vars.PREFIXED_ONLY
    return (set(host_vars.SHORT_NAMED) | {"gpuprov_%s" % option for option in options}
            | {host_vars.RECORD_VAR, host_vars.BOOT_SCRIPT_VAR})


def playbook_variables(path):
    """The variables a playbook reads that nothing in it sets: what a user gives with -e or in the inventory
    (a vm task with from_host_vars reads those of host_vars_read)."""
    import jinja2
    import jinja2.meta
    import yaml

    env = jinja2.Environment()
    env.filters, env.tests = _AnyName(env.filters), _AnyName(env.tests)
    templates, defined, read = [], set(), set()

    def walk(node):
        if isinstance(node, dict):
            if node.get("from_host_vars") is True:
                read.update(host_vars_read())
            for key, value in node.items():
                if key in ("when", "that", "changed_when", "failed_when", "until"):
                    templates.extend("{{ %s }}" % v for v in (value if isinstance(value, list) else [value])
                                     if isinstance(v, str))
                    continue
                if key == "register":
                    defined.add(value)
                elif key in ("vars", "ansible.builtin.set_fact") and isinstance(value, dict):
                    defined.update(value)
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)
        elif isinstance(node, str) and ("{{" in node or "{%" in node):
            templates.append(node)

    walk(yaml.safe_load(path.read_text()))
    used = set(read)
    for template in templates:
        used |= jinja2.meta.find_undeclared_variables(env.parse(template))
    return {name for name in used - defined - NOT_VARIABLES if not name.startswith("_")}


def documented_variables(page):
    """The variables a playbook page's variables table names (its columns "Variable" and "Per VM")."""
    names, columns = set(), None
    for line in page.split("## Variables")[1].split("\n## ")[0].splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")] if line.startswith("|") else None
        if cells and columns is None:
            columns = [i for i, cell in enumerate(cells) if cell in ("Variable", "Per VM")]
        elif cells and not set(cells[0]) <= set("-"):
            for i in columns:
                names.update(re.findall(r"`([a-z_][a-z0-9_]*)`", cells[i]))
    return names


PLAYBOOKS = sorted(path.stem for path in (REPO / "playbooks").glob("*.yml"))


def test_the_variable_reader_finds_what_a_playbook_reads():
    found = playbook_variables(REPO / "playbooks" / "down.yml")
    assert {"vm", "name", "gpuprov", "gpuprov_cloud_options", "gpuprov_journal"} == found
    # provision's vm task reads its options through from_host_vars, not a template
    assert {"ttl", "gpuprov_ttl", "gpuprov_tags", "gpuprov"} <= playbook_variables(REPO / "playbooks" / "provision.yml")


@pytest.mark.parametrize("playbook", PLAYBOOKS)
def test_every_playbook_has_a_page_naming_each_variable_it_reads(playbook):
    page_path = REPO / "docs" / "playbooks" / ("%s.md" % playbook)
    assert page_path.exists(), "docs/playbooks/%s.md is missing" % playbook
    page = page_path.read_text()
    assert page.startswith("# %s\n" % playbook) and "## Variables" in page and "## Examples" in page
    assert "ansible-playbook gpuprov.cloud.%s" % playbook in page.split("## Examples")[1]
    documented = documented_variables(page)
    variables = playbook_variables(REPO / "playbooks" / ("%s.yml" % playbook))
    # `name` is the reserved fallback of `vm`, which each page says in vm's row
    missing = sorted(variables - documented - {"name"})
    assert not missing, "docs/playbooks/%s.md does not document %s" % (playbook, missing)
    stale = sorted(documented - variables)
    assert not stale, "docs/playbooks/%s.md documents what the playbook does not read: %s" % (playbook, stale)
    readme = (REPO / "docs" / "playbooks" / "README.md").read_text()
    assert "[%s](%s.md)" % (playbook, playbook) in readme
