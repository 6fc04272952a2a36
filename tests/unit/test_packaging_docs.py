# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The docs site's guides (docs/site/build.py): the README splits into a usage guide and a clouds guide, and
Markdown links become site pages (guides) or repository links (other files); a link to nothing is an error.
tests/integration/test_docs_site.py builds the whole site and renders it in a browser."""

from __future__ import annotations

import importlib.util
import pathlib

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
