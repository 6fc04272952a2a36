# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Build the collection's HTML docs site offline (make docs):

    python docs/site/build.py [--dest build/docs]

1. antsibull-docs writes the reference of every module, plugin and role (as ansible-doc reads them from
   this checkout) to <dest>/rst/reference;
2. the guides are the Markdown the repository already has: README.md (split into "Usage" and its "Clouds"
   section) and every docs/*.md page;
3. a page per playbook (docs/playbooks/*.md), a page per cloud with its options (docs/clouds/*.md, which
   scripts/gen-cloud-options-doc.py writes from the adapters' declarations; their README.md is each section's
   index page), and the changelog (CHANGELOG.md);
4. Sphinx (conf.py beside this file; myst-parser reads the Markdown) writes <dest>/html, index.html first.

Warnings fail the build, and so does a plugin or role whose documentation antsibull-docs cannot parse.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import re
import shutil
import subprocess
import sys
import time

import yaml

SITE = pathlib.Path(__file__).resolve().parent
REPO = SITE.parents[1]
COLLECTION = "gpuprov.cloud"
# Guides in this order first, then any other docs/*.md page by name.
GUIDE_ORDER = ["usage", "clouds", "recovery", "awx"]
CLOUDS_HEADING = "## Clouds"
# Folders of docs/ that are sections of the site: docs/<folder>/*.md, README.md as the section's index page.
SECTIONS = {"playbooks": "Playbooks", "clouds": "Cloud options"}
# The label of the clouds' index page, which the modules' documentation of cloud_options refers to
# (scripts/gen-cloud-options-doc.py: SITE_LABEL).
CLOUDS_LABEL = "gpuprov_cloud_options"


class BuildError(Exception):
    pass


def tool(name: str) -> str:
    """The tool from the running interpreter's venv (requirements-dev.txt), else from PATH."""
    here = pathlib.Path(sys.executable).parent / name
    if here.exists():
        return str(here)
    found = shutil.which(name)
    if not found:
        raise BuildError("%s is not installed: pip install -r requirements-dev.txt (make venv)" % name)
    return found


def run(argv, env=None):
    result = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise BuildError("%s failed (exit %d):\n%s%s" % (" ".join(argv[:3]), result.returncode,
                                                         result.stdout[-6000:], result.stderr[-6000:]))
    return result


def collection_env(dest: pathlib.Path) -> dict:
    """Environment in which ansible-doc finds this checkout, and only it, as gpuprov.cloud."""
    root = dest / "collections"
    link = root / "ansible_collections" / "gpuprov" / "cloud"
    link.parent.mkdir(parents=True, exist_ok=True)
    if not (link.is_symlink() and link.resolve() == REPO):
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(REPO, target_is_directory=True)
    env = dict(os.environ)
    env.update(ANSIBLE_COLLECTIONS_PATH=str(root), ANSIBLE_COLLECTIONS_SCAN_SYS_PATH="false",
               PYTHONPATH=str(root), ANSIBLE_NOCOLOR="1",
               # antsibull-docs runs ansible and ansible-doc: the ones beside this interpreter.
               PATH=os.pathsep.join([str(pathlib.Path(sys.executable).parent), env.get("PATH", "")]))
    return env


def write_reference(rst: pathlib.Path, env: dict) -> None:
    reference = rst / "reference"
    reference.mkdir(parents=True, exist_ok=True)
    # antsibull-docs writes only into a folder no one else can write to.
    os.chmod(rst, 0o700)
    os.chmod(reference, 0o700)
    run([tool("antsibull-docs"), "--config-file", str(SITE / "antsibull-docs.cfg"), "collection",
         "--use-current", "--squash-hierarchy", "--fail-on-error", "--cleanup", "everything",
         "--dest-dir", str(reference), COLLECTION], env=env)


def split_readme(text: str) -> tuple[str, str]:
    """README.md as the usage guide without its Clouds section, and that section as a page of its own
    (its headings raised a level, so it starts with a title)."""
    lines = text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.rstrip() == CLOUDS_HEADING), None)
    if start is None:
        raise BuildError("README.md has no %r section for the clouds guide" % CLOUDS_HEADING)
    end = next((i for i in range(start + 1, len(lines)) if re.match(r"## ", lines[i])), len(lines))
    usage = "".join(lines[:start] + lines[end:])
    clouds = "".join(line[1:] if line.startswith("##") else line for line in lines[start:end])
    return usage, clouds


MARKDOWN_LINK = re.compile(r"(\]\()([^)\s#]+)(#[^)\s]*)?(\))")


def site_page(path: pathlib.Path):
    """Where a Markdown file of the repository is on the site (relative to its root), or None."""
    if path == REPO / "README.md":
        return "guides/usage.md"
    if path == REPO / "CHANGELOG.md":
        return "changelog.md"
    if path.suffix != ".md" or not path.exists():
        return None
    if path.parent == REPO / "docs":
        return "guides/" + path.name
    if path.parent.parent == REPO / "docs" and path.parent.name in SECTIONS:
        return "%s/%s" % (path.parent.name, "index.md" if path.name == "README.md" else path.name)
    return None


def site_link(match: re.Match, source: pathlib.Path) -> str:
    """A Markdown link as the site needs it: a guide, playbook or cloud page becomes its page on the site, another
    file of the repository a link to it in the repository; web and in-page links stay as they are."""
    target = match.group(2)
    if re.match(r"[a-z][a-z0-9+.-]*:", target):
        return match.group(0)
    path = (source.parent / target).resolve()
    here = site_page(source.resolve()) or "guides/usage.md"
    there = site_page(path)
    if there is not None:
        page = os.path.relpath(there, os.path.dirname(here))
    elif path.is_relative_to(REPO) and path.exists():
        galaxy = yaml.safe_load((REPO / "galaxy.yml").read_text())
        page = "%s/blob/main/%s" % (galaxy["repository"], path.relative_to(REPO).as_posix())
    else:
        raise BuildError("%s links to %s, which is not in the repository" % (source.relative_to(REPO), target))
    return match.group(1) + page + (match.group(3) or "") + match.group(4)


def write_guides(rst: pathlib.Path) -> list[str]:
    guides = rst / "guides"
    if guides.exists():
        shutil.rmtree(guides)
    guides.mkdir()
    readme = (REPO / "README.md").read_text()
    usage, clouds = split_readme(readme)
    # The README's title names the collection, which the site's index already does.
    pages = {"usage": re.sub(r"\A# .*", "# Using gpuprov.cloud", usage), "clouds": clouds}
    for page in sorted((REPO / "docs").glob("*.md")):
        pages[page.stem] = page.read_text()
    sources = {"usage": REPO / "README.md", "clouds": REPO / "README.md"}
    for name, text in pages.items():
        source = sources.get(name, REPO / "docs" / (name + ".md"))
        (guides / (name + ".md")).write_text(MARKDOWN_LINK.sub(lambda m, s=source: site_link(m, s), text))
    return sorted(pages, key=lambda n: (GUIDE_ORDER.index(n) if n in GUIDE_ORDER else len(GUIDE_ORDER), n))


def write_section(rst: pathlib.Path, folder: str) -> list[str]:
    """docs/<folder>/*.md as the pages of a section of the site (README.md its index page); their names, the
    index first."""
    out = rst / folder
    if out.exists():
        shutil.rmtree(out)
    out.mkdir()
    sources = sorted((REPO / "docs" / folder).glob("*.md"))
    if not any(source.name == "README.md" for source in sources):
        raise BuildError("docs/%s has no README.md for the section's index page" % folder)
    names = []
    for source in sources:
        name = "index" if source.name == "README.md" else source.stem
        text = MARKDOWN_LINK.sub(lambda m, s=source: site_link(m, s), source.read_text())
        if folder == "clouds" and name == "index":
            text = "(%s)=\n\n%s" % (CLOUDS_LABEL, text)
        (out / (name + ".md")).write_text(text)
        names.append(name)
    return sorted(names, key=lambda n: (n != "index", n))


def write_changelog(rst: pathlib.Path) -> None:
    """CHANGELOG.md (antsibull-changelog writes it from changelogs/changelog.yaml) as the changelog page."""
    text = (REPO / "CHANGELOG.md").read_text()
    (rst / "changelog.md").write_text(MARKDOWN_LINK.sub(lambda m: site_link(m, REPO / "CHANGELOG.md"), text))


def toctree(caption: str, pages: list[str]) -> str:
    return ".. toctree::\n   :maxdepth: 1\n   :caption: %s\n\n%s\n" % (caption, "".join("   %s\n" % p for p in pages))


def write_index(rst: pathlib.Path, guides: list[str], sections: dict = None) -> None:
    galaxy = yaml.safe_load((REPO / "galaxy.yml").read_text())
    heading = "gpuprov.cloud %s" % galaxy["version"]
    trees = toctree("Guides", ["guides/%s" % name for name in guides])
    for folder, names in (sections or {}).items():
        trees += toctree(SECTIONS[folder], ["%s/%s" % (folder, name) for name in names])
    trees += toctree("Reference", ["reference/index"]) + toctree("Changelog", ["changelog"])
    (rst / "index.rst").write_text(
        "%s\n%s\n\n%s\n\n"
        "Install: ``ansible-galaxy collection install gpuprov.cloud``. Source and issues: %s\n\n%s"
        % (heading, "=" * len(heading), " ".join(galaxy["description"].split()), galaxy["repository"], trees))


def build(dest: pathlib.Path) -> pathlib.Path:
    dest = dest.resolve()
    rst = dest / "rst"
    html = dest / "html"
    env = collection_env(dest)
    write_reference(rst, env)
    guides = write_guides(rst)
    sections = {folder: write_section(rst, folder) for folder in SECTIONS}
    write_changelog(rst)
    write_index(rst, guides, sections)
    if html.exists():
        shutil.rmtree(html)
    run([tool("sphinx-build"), "-b", "html", "-j", "auto", "-q", "-W", "--keep-going", "-c", str(SITE),
         "-d", str(dest / "doctrees"), str(rst), str(html)], env=env)
    return html / "index.html"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dest", default=str(REPO / "build" / "docs"), help="output folder (default build/docs)")
    args = parser.parse_args(argv)
    started = time.monotonic()
    try:
        index = build(pathlib.Path(args.dest))
    except BuildError as exc:
        print("docs: %s" % exc, file=sys.stderr)
        return 1
    print("docs: %s (%.0f s)" % (index, time.monotonic() - started))
    return 0


if __name__ == "__main__":
    sys.exit(main())
