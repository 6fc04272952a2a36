# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Build the collection's HTML docs site offline (make docs):

    python docs/site/build.py [--dest build/docs]

1. antsibull-docs writes the reference of every module, plugin and role (as ansible-doc reads them from
   this checkout) to <dest>/rst/reference;
2. the guides are the Markdown the repository already has: README.md (split into "Usage" and its "Clouds"
   section) and every docs/*.md page;
3. Sphinx (conf.py beside this file; myst-parser reads the Markdown) writes <dest>/html, index.html first.

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


def site_link(match: re.Match, source: pathlib.Path) -> str:
    """A Markdown link as the site needs it: a guide page becomes its sibling page on the site, another file of
    the repository a link to it in the repository; web and in-page links stay as they are."""
    target = match.group(2)
    if re.match(r"[a-z][a-z0-9+.-]*:", target):
        return match.group(0)
    path = (source.parent / target).resolve()
    if path == REPO / "README.md":
        page = "usage.md"
    elif path.suffix == ".md" and path.parent == REPO / "docs" and path.exists():
        page = path.name
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


def write_index(rst: pathlib.Path, guides: list[str]) -> None:
    galaxy = yaml.safe_load((REPO / "galaxy.yml").read_text())
    heading = "gpuprov.cloud %s" % galaxy["version"]
    guide_lines = "".join("   guides/%s\n" % name for name in guides)
    (rst / "index.rst").write_text(
        "%s\n%s\n\n%s\n\n"
        "Install: ``ansible-galaxy collection install gpuprov.cloud``. Source and issues: %s\n\n"
        ".. toctree::\n   :maxdepth: 1\n   :caption: Guides\n\n%s\n"
        ".. toctree::\n   :maxdepth: 1\n   :caption: Reference\n\n   reference/index\n"
        % (heading, "=" * len(heading), " ".join(galaxy["description"].split()), galaxy["repository"],
           guide_lines))


def build(dest: pathlib.Path) -> pathlib.Path:
    dest = dest.resolve()
    rst = dest / "rst"
    html = dest / "html"
    env = collection_env(dest)
    write_reference(rst, env)
    write_index(rst, write_guides(rst))
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
