# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The docs site (make docs: docs/site/build.py) builds, and headless Chromium renders it: the index lists the
guides, a page per playbook, a page per cloud, the reference and the changelog; the reference index lists every
module, plugin and role; the vm module's page shows its options table with every documented option, and its
cloud_options points at the clouds' pages instead of carrying each cloud's options; a cloud's page shows each of
its declared options, a playbook's page its variables, the changelog each release. Screenshots are left in
build/docs/screenshots/.

Chromium is driven over the DevTools protocol on a pipe (--remote-debugging-pipe): no driver or package beyond
Debian's chromium. Without chromium the test skips, except under CI (.ci/run installs it), where it fails."""

from __future__ import annotations

import base64
import json
import os
import pathlib
import select
import shutil
import struct
import subprocess
import sys

import pytest
import yaml

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers import registry

# The site is built once, into a folder of this test session's own, and one browser reads it: session fixtures,
# since under pytest-xdist (make test) these tests run on one worker, where tests of other modules may come between
# them (module fixtures would build the site and start a browser again). Not into build/docs: a `make docs` run
# meanwhile (build.py empties its html folder first) would pull the pages from under the browser.
pytestmark = pytest.mark.xdist_group("docs")

REPO = pathlib.Path(__file__).resolve().parents[2]
SCREENSHOTS = REPO / "build" / "docs" / "screenshots"
WINDOW = (1280, 1600)
# A guard against a hung browser, not a timing assertion.
BROWSER_GUARD_S = 120


def find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    if os.environ.get("CI"):
        pytest.fail("chromium is not installed, and CI must run the docs browser test (.ci/run installs it)")
    pytest.skip("chromium is not installed (Debian: apt-get install chromium; .ci/run installs it)")
    return None


class Browser:
    """Headless Chromium, spoken to over the DevTools protocol on fds 3 (commands) and 4 (replies, events)."""

    def __init__(self, binary, log):
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()
        # A profile of its own (next to its log): never the user's, nor one a browser still running holds.
        argv = [binary, "--headless", "--disable-gpu", "--disable-dev-shm-usage", "--remote-debugging-pipe",
                "--no-first-run", "--hide-scrollbars", "--user-data-dir=%s" % log.with_suffix(".profile"),
                "about:blank"]
        if os.geteuid() == 0:
            argv.insert(1, "--no-sandbox")  # Chromium's sandbox refuses to run as root
        # bash (sh may not take fds above 9) puts the pipe ends where --remote-debugging-pipe expects them:
        # fd 3 in, fd 4 out.
        redirect = 'exec "$0" "$@" 3<&%d 4>&%d' % (to_chrome_r, from_chrome_w)
        # Chromium's log goes to a file, not a pipe: a pipe nobody reads while pages load fills up and stops it.
        self._log = log
        with open(log, "wb") as stderr:
            self.proc = subprocess.Popen(["bash", "-c", redirect, *argv], pass_fds=(to_chrome_r, from_chrome_w),
                                         stdout=subprocess.DEVNULL, stderr=stderr)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._buffer = b""
        self._next_id = 0
        self._events = []
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        self.call("Page.enable", session=True)
        self.call("Emulation.setDeviceMetricsOverride", session=True, width=WINDOW[0], height=WINDOW[1],
                  deviceScaleFactor=1, mobile=False)

    def _read_message(self):
        while b"\0" not in self._buffer:
            ready = select.select([self._from_chrome], [], [], BROWSER_GUARD_S)[0]
            chunk = os.read(self._from_chrome, 1 << 20) if ready else b""
            if not chunk:
                raise AssertionError("chromium stopped answering (%s); the last of %d events: %s; its log ends: %s"
                                     % ("still running" if self.proc.poll() is None else "exit %s" % self.proc.returncode,
                                        len(self._events), self._events[-5:], self.log_tail()))
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def call(self, method, session=False, **params):
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = self.session
        os.write(self._to_chrome, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._read_message()
            if reply.get("id") == self._next_id:
                assert "error" not in reply, "%s: %s" % (method, reply["error"])
                return reply["result"]
            self._events.append(reply)

    def open(self, path):
        """Navigate to ``path`` and return once that page has loaded: its load event is the first after the
        main frame navigated to it (a late load event of the blank page the browser started on does not count)."""
        self._events.clear()
        navigation = self.call("Page.navigate", session=True, url=path.as_uri())
        # A navigation that failed (a missing file) loads an error page instead: say so, not wait for ours.
        assert not navigation.get("errorText"), "%s: %s" % (path, navigation["errorText"])
        while not self._loaded(path.as_uri()):
            self._events.append(self._read_message())

    def _loaded(self, url):
        navigated = False
        for event in self._events:
            frame = event.get("params", {}).get("frame", {})
            if event.get("method") == "Page.frameNavigated" and not frame.get("parentId"):
                navigated = frame.get("url", "").split("#")[0] == url
            elif event.get("method") == "Page.loadEventFired" and navigated:
                return True
        return False

    def evaluate(self, expression):
        result = self.call("Runtime.evaluate", session=True, expression=expression, returnByValue=True)
        assert "exceptionDetails" not in result, result["exceptionDetails"]
        return result["result"]["value"]

    def screenshot(self, path):
        data = base64.b64decode(self.call("Page.captureScreenshot", session=True, format="png")["data"])
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        return data

    def log_tail(self):
        return pathlib.Path(self._log).read_bytes()[-2000:].decode(errors="replace")

    def close(self):
        os.close(self._to_chrome)
        os.close(self._from_chrome)
        self.proc.terminate()
        self.proc.wait()


@pytest.fixture(scope="session")
def browser(tmp_path_factory):
    chrome = Browser(find_chromium(), tmp_path_factory.mktemp("chromium") / "chromium.log")
    yield chrome
    chrome.close()


@pytest.fixture(scope="session")
def built(tmp_path_factory):
    """The folder the site was built into (build.py --dest): html/ and the collections/ tree it documented."""
    dest = tmp_path_factory.mktemp("docs")
    result = subprocess.run([sys.executable, str(REPO / "docs" / "site" / "build.py"), "--dest", str(dest)],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    return dest


@pytest.fixture(scope="session")
def site(built):
    return built / "html"


@pytest.fixture(scope="session")
def vm_doc(built):
    result = subprocess.run([str(pathlib.Path(sys.executable).parent / "ansible-doc"), "--json", "gpuprov.cloud.vm"],
                            capture_output=True, text=True, check=False,
                            env=dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(built / "collections")))
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)["gpuprov.cloud.vm"]["doc"]


# What a page shows, measured in the browser after layout: each options table, where it is and how big.
PAGE_FACTS = """(() => {
  const box = (el) => { const r = el.getBoundingClientRect(); return {width: r.width, height: r.height}; };
  const shown = (el) => getComputedStyle(el).display !== 'none' && box(el).height > 0;
  return {
    title: document.title,
    tables: Array.from(document.querySelectorAll('table.ansible-option-table')).map((t) => ({
      section: t.closest('section') ? t.closest('section').id : null,
      rows: t.tBodies[0].rows.length, shown: shown(t), ...box(t),
    })),
    parameters: Array.from(document.querySelectorAll('[id^="parameter-"]')).map((e) => e.id.slice(10)),
    links: Array.from(document.querySelectorAll('a.reference.internal')).map((a) => a.getAttribute('href')),
    styled: getComputedStyle(document.body).fontFamily !== '' && document.styleSheets.length > 1,
  };
})()"""


def png_size(data):
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", data[16:24])


def test_index_lists_guides_and_reference(site, browser):
    browser.open(site / "index.html")
    facts = browser.evaluate(PAGE_FACTS)
    assert facts["title"].startswith("gpuprov.cloud"), facts["title"]
    assert facts["styled"], "the index renders without the theme's stylesheets"
    pages = ["guides/usage.html", "guides/clouds.html", "reference/index.html", "changelog.html"]
    pages += ["guides/%s.html" % page.stem for page in sorted((REPO / "docs").glob("*.md"))]
    for section in ("playbooks", "clouds"):
        pages += ["%s/%s.html" % (section, "index" if page.name == "README.md" else page.stem)
                  for page in sorted((REPO / "docs" / section).glob("*.md"))]
    assert "playbooks/provision.html" in pages and "clouds/aws.html" in pages
    assert "guides/recovery.html" in pages and "guides/awx.html" in pages
    for page in pages:
        assert page in facts["links"], "the index does not link %s: %s" % (page, facts["links"])
    data = browser.screenshot(SCREENSHOTS / "index.png")
    assert png_size(data) == WINDOW


def test_reference_index_lists_every_module_plugin_and_role(site, browser):
    browser.open(site / "reference" / "index.html")
    links = set(browser.evaluate(PAGE_FACTS)["links"])
    pages = {path.stem for path in (REPO / "plugins" / "modules").glob("*.py")}
    expected = {"%s_module.html" % name for name in pages}
    expected |= {"%s_inventory.html" % p.stem for p in (REPO / "plugins" / "inventory").glob("*.py")}
    expected |= {"%s_lookup.html" % p.stem for p in (REPO / "plugins" / "lookup").glob("*.py")}
    expected |= {"%s_role.html" % p.name for p in (REPO / "roles").iterdir() if (p / "meta").is_dir()}
    missing = sorted(expected - {link.split("#")[0] for link in links})
    assert not missing, "the reference index does not link: %s" % missing


def test_vm_module_page_renders_its_options_table(site, browser, vm_doc):
    browser.open(site / "reference" / "vm_module.html")
    facts = browser.evaluate(PAGE_FACTS)
    assert facts["title"].startswith("gpuprov.cloud.vm module"), facts["title"]
    assert facts["styled"]
    (parameters,) = [table for table in facts["tables"] if table["section"] == "parameters"]
    assert parameters["shown"] and parameters["width"] > WINDOW[0] / 2, parameters
    options = vm_doc["options"]
    aliases = {alias for spec in options.values() for alias in spec.get("aliases", [])}
    top_level = {name for name in facts["parameters"] if "/" not in name}
    assert set(options) <= top_level, "options not rendered: %s" % sorted(set(options) - top_level)
    assert top_level <= set(options) | aliases, "rendered, not documented: %s" % sorted(top_level - set(options))
    assert parameters["rows"] >= len(options)
    # cloud_options is one row, pointing at the clouds' pages: no cloud's options on a module's page.
    assert not [name for name in facts["parameters"] if name.startswith("cloud_options/")], facts["parameters"]
    assert "../clouds/index.html#gpuprov-cloud-options" in facts["links"], facts["links"]
    # Each documented option has a row with its own height in the laid-out table.
    assert parameters["height"] > 20 * len(options), parameters
    browser.evaluate("document.getElementById('parameters').scrollIntoView()")
    data = browser.screenshot(SCREENSHOTS / "vm_module.png")
    assert png_size(data) == WINDOW


# What a Markdown page shows: its title, headings (with their anchors), tables and internal links.
MARKDOWN_FACTS = """(() => ({
  title: document.title,
  headings: Array.from(document.querySelectorAll('section[id] > h1, section[id] > h2, section[id] > h3')).map(
    (h) => ({id: h.parentElement.id, text: Array.from(h.childNodes).filter(
      (n) => !(n.classList && n.classList.contains('headerlink'))).map((n) => n.textContent).join('').trim()})),
  tables: Array.from(document.querySelectorAll('table')).map((t) => ({
    rows: t.tBodies[0] ? t.tBodies[0].rows.length : 0, height: t.getBoundingClientRect().height,
    header: Array.from(t.querySelectorAll('thead th')).map((th) => th.textContent.trim()),
    first: Array.from(t.tBodies[0] ? t.tBodies[0].rows : []).map((r) => r.cells[0].textContent.trim()),
  })),
  links: Array.from(document.querySelectorAll('a.reference.internal')).map((a) => a.getAttribute('href')),
  styled: getComputedStyle(document.body).fontFamily !== '' && document.styleSheets.length > 1,
}))()"""


def test_a_cloud_page_shows_each_declared_option(site, browser):
    declared = registry.OPTION_SPECS["aws"]
    browser.open(site / "clouds" / "aws.html")
    facts = browser.evaluate(MARKDOWN_FACTS)
    assert facts["title"].startswith("The aws cloud"), facts["title"]
    assert facts["styled"]
    (options,) = [table for table in facts["tables"] if table["header"][:2] == ["Option", "Type"]]
    assert sorted(options["first"]) == sorted(declared) and options["height"] > 20 * len(declared), options
    sections = {heading["text"] for heading in facts["headings"]}
    assert set(declared) <= sections and {"Credentials", "Options"} <= sections, sections
    # each row links its option's section on the page (Sphinx spells the section's id with hyphens)
    assert {"#%s" % name.replace("_", "-") for name in declared} <= set(facts["links"]), facts["links"]
    assert {"%s" % name.replace("_", "-") for name in declared} <= {heading["id"] for heading in facts["headings"]}
    browser.screenshot(SCREENSHOTS / "cloud_aws.png")
    browser.open(site / "clouds" / "index.html")
    listed = browser.evaluate(MARKDOWN_FACTS)
    assert {"%s.html" % cloud for cloud in registry.OPTION_SPECS} <= set(listed["links"]), listed["links"]


def test_a_playbook_page_shows_its_variables_and_examples(site, browser):
    browser.open(site / "playbooks" / "provision.html")
    facts = browser.evaluate(MARKDOWN_FACTS)
    assert facts["title"].startswith("provision"), facts["title"]
    (variables,) = [table for table in facts["tables"] if table["header"][:1] == ["Variable"]]
    assert {"vm", "gpu", "clouds", "k8s"} <= set(variables["first"]) and variables["height"] > 0, variables
    assert "../clouds/index.html" in facts["links"], facts["links"]
    assert {"Variables", "Examples"} <= {heading["text"] for heading in facts["headings"]}
    browser.screenshot(SCREENSHOTS / "playbook_provision.png")
    browser.open(site / "playbooks" / "index.html")
    listed = set(browser.evaluate(MARKDOWN_FACTS)["links"])
    assert {"%s.html" % path.stem for path in (REPO / "playbooks").glob("*.yml")} <= listed, listed


def test_the_changelog_page_shows_each_release(site, browser):
    browser.open(site / "changelog.html")
    facts = browser.evaluate(MARKDOWN_FACTS)
    assert "Release Notes" in facts["title"], facts["title"]
    releases = yaml.safe_load((REPO / "changelogs" / "changelog.yaml").read_text())["releases"]
    shown = {heading["text"] for heading in facts["headings"]}
    assert {"v%s" % version for version in releases} <= shown, shown
    browser.screenshot(SCREENSHOTS / "changelog.png")
