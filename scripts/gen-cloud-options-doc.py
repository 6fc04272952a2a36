#!/usr/bin/env python
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Write the documentation of ``cloud_options`` from the adapters' option declarations
(plugins/module_utils/providers/cloud_options/<cloud>.py, listed in the registry), so that it
cannot drift from what the adapters accept. Each cloud's options are documented once:

* docs/clouds/<cloud>.md: one page per cloud (its credentials, what it does with the user's tags,
  then each option with its type, default, choices, aliases, environment variables and description;
  ``CREDENTIALS``, ``TAGS`` and ``OPTIONS`` of its declaration), and docs/clouds/README.md,
  the list of clouds; the docs site (docs/site/build.py) shows them as its Clouds pages;
* plugins/doc_fragments/cloud_options.py: the O(cloud_options) of the modules, a dict whose
  description points at those pages (a module's page stays about what the module does).

    scripts/gen-cloud-options-doc.py           rewrite them
    scripts/gen-cloud-options-doc.py --check   exit 1 when one is out of date
"""

from __future__ import annotations

import importlib
import pathlib
import re
import sys

import yaml

REPO = pathlib.Path(__file__).resolve().parents[1]
FRAGMENT = REPO / "plugins" / "doc_fragments" / "cloud_options.py"
PAGES = REPO / "docs" / "clouds"
MU = "ansible_collections.gpuprov.cloud.plugins.module_utils."
# The docs site's label of the clouds' index page (docs/site/build.py puts it there).
SITE_LABEL = "gpuprov_cloud_options"
GENERATED = ("<!-- Written by scripts/gen-cloud-options-doc.py from plugins/module_utils/providers/cloud_options/%s: "
             "edit that, then run the script. -->")

HEADER = '''# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Written by scripts/gen-cloud-options-doc.py from the adapters' option declarations
# (plugins/module_utils/providers/cloud_options/); edit those, then run the script.

from __future__ import annotations


class ModuleDocFragment:
    """The O(cloud_options) of the modules that call a cloud: a dict keyed by cloud name, each cloud's
    options documented once, on its own page (docs/clouds/<cloud>.md)."""

    DOCUMENTATION = r"""
'''
FOOTER = '''"""
'''

# What every module, and the clouds' index page, says of cloud_options.
USAGE = [
    "Each cloud takes only the options listed for it; an unknown cloud or option, or a value of the wrong type, "
    "fails the task before anything runs, naming it (for example C(cloud_options.aws.regoins)).",
    "Credentials (the options marked never logged) are hidden wherever they would show. The other options are "
    "journalled with the VM, so that a later teardown reaches it where it was made.",
    "An option left unset is read from the environment where its description names a variable (as AWX's "
    "credential types and the vendors' command line tools set them).",
]


def _collection_path() -> None:
    """Make ``ansible_collections.gpuprov.cloud`` importable (in place, or through build/collections)."""
    try:
        importlib.import_module(MU + "providers.registry")
        return
    except ImportError:
        pass
    root = REPO.parents[2] if REPO.parent.parent.name == "ansible_collections" else REPO / "build" / "collections"
    sys.path.insert(0, str(root))


def _declarations():
    """{cloud: (its options module, its declared options)}, as the registry lists them."""
    _collection_path()
    registry = importlib.import_module(MU + "providers.registry")
    options = importlib.import_module(MU + "providers.options")
    clouds = {}
    for cloud in sorted(registry.OPTION_SPECS):
        # The options module is named after the adapter's package ("lambda" is lambda_cloud).
        package = registry.ADAPTERS[cloud][0]
        declaring = importlib.import_module(MU + "providers.cloud_options." + package)
        clouds[cloud] = (declaring, registry.OPTION_SPECS[cloud])
    return clouds, options


# -- the doc fragment ---------------------------------------------------------------------------

def render_fragment(clouds) -> str:
    """The fragment's text: O(cloud_options) as a dict, pointing at the pages of each cloud."""
    names = sorted(clouds)
    description = [
        "Options per cloud, keyed by cloud name (%s), as the playbooks' C(gpuprov_cloud_options). Each cloud's "
        "options and credentials, and how they are checked, are on its own page, C(docs/clouds/<cloud>.md) "
        "(R(Clouds,%s) on the docs site)."
        % (", ".join("V(%s)" % name for name in names), SITE_LABEL),
    ]
    doc = {"options": {"cloud_options": {"description": description, "type": "dict", "default": {}}}}
    text = yaml.safe_dump(doc, sort_keys=False, default_flow_style=False, width=104, allow_unicode=True)
    return HEADER + text + FOOTER


# -- the pages ----------------------------------------------------------------------------------

_MARKUP = re.compile(r"\b(RV|[CVEOMIBU])\(([^)]*)\)|\bL\(([^,)]*),\s*([^)]*)\)")
_SPECIAL = re.compile(r"([\\*<>\[\]`_|])")


def _code(text: str) -> str:
    ticks = "``" if "`" in text else "`"
    pad = " " if ticks == "``" else ""
    return "%s%s%s%s%s" % (ticks, pad, text, pad, ticks)


def markdown(text: str) -> str:
    """Ansible's markup (C(), V(), E(), O(), M(), RV(), I(), B(), U(), L()) as Markdown; the plain text
    between escaped where Markdown would read it as markup."""
    out, last = [], 0
    for match in _MARKUP.finditer(text):
        out.append(_SPECIAL.sub(r"\\\1", text[last:match.start()]))
        code, inner, label, url = match.groups()
        if label is not None:
            out.append("[%s](%s)" % (_SPECIAL.sub(r"\\\1", label), url.strip()))
        elif code == "I":
            out.append("*%s*" % _SPECIAL.sub(r"\\\1", inner))
        elif code == "B":
            out.append("**%s**" % _SPECIAL.sub(r"\\\1", inner))
        elif code == "U":
            out.append("<%s>" % inner)
        else:
            out.append(_code(inner))
        last = match.end()
    out.append(_SPECIAL.sub(r"\\\1", text[last:]))
    return "".join(out)


def value_text(value) -> str:
    """A default or a choice as a task would write it (YAML)."""
    return yaml.safe_dump(value, default_flow_style=True, width=1000).strip().removesuffix("\n...").strip()


def type_text(declared) -> str:
    kind = declared.get("type", "str")
    return "list of %s" % declared["elements"] if kind == "list" and declared.get("elements") else kind


def _set_text(cloud, group, spec, options) -> str:
    """One set of credential options: ``cloud_options.aws.a`` and ``b`` (or ``A`` and ``B``)."""
    names = [_code("cloud_options.%s.%s" % (cloud, group[0]))] + [_code(name) for name in group[1:]]
    text = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    variables = [options.environment_names(spec[name]) for name in group]
    if all(variables):
        if len(group) == 1:
            shown = " or ".join(_code(v) for v in variables[0])
        else:
            shown = " and ".join(_code(v[0]) for v in variables)
        text += " (or %s)" % shown
    return text


def _credentials_text(cloud, declaring, options) -> str:
    """The Credentials section, from the cloud's declaration (``CREDENTIALS``)."""
    declared = getattr(declaring, "CREDENTIALS", None)
    if declared is None:
        return "None: this cloud needs no credentials."
    ways = [_set_text(cloud, group, declared.spec, options) for group in declared.sets]
    ways += [_code(name) for name in declared.environment] + [markdown(text) for text in declared.also]
    if not declared.checked:
        return ("None are required. Where the adapter looks for its engine: %s%s." % (
            "; or ".join(ways), "".join("; or %s" % _code(path) for path in declared.files)))
    lines = ["Set %s." % "; or ".join(ways)]
    if declared.files:
        lines.append("When none of those is set, the SDK's files count too: %s."
                     % ", ".join(_code(path) for path in declared.files))
    for name in declared.required:
        lines.append("Required besides: %s." % _set_text(cloud, (name,), declared.spec, options))
    lines.append("Without them, a task fails on this cloud at once, with a message that names them.")
    return " ".join(lines)


def option_facts(declared, options) -> list:
    """What a page says of an option beside its description, one fact a line."""
    facts = ["Type: %s." % _code(type_text(declared))]
    if declared.get("required"):
        facts.append("Required.")
    if declared.get("default") is not None:
        facts.append("Default: %s." % _code(value_text(declared["default"])))
    if declared.get("choices"):
        facts.append("Choices: %s." % ", ".join(_code(value_text(c)) for c in declared["choices"]))
    if declared.get("aliases"):
        facts.append("Aliases: %s." % ", ".join(_code(a) for a in declared["aliases"]))
    if declared.get("minimum") is not None:
        facts.append("At least %s." % declared["minimum"])
    if declared.get("maximum") is not None:
        facts.append("At most %s." % declared["maximum"])
    names = options.environment_names(declared)
    if names:
        facts.append("When not set, read from %s." % ", else ".join(_code(n) for n in names))
    if declared.get("no_log"):
        facts.append("Never logged.")
    return facts


def render_page(cloud, declaring, spec, options) -> str:
    """docs/clouds/<cloud>.md."""
    lines = [GENERATED % (pathlib.Path(declaring.__file__).name), "",
             "# The %s cloud" % cloud, "",
             markdown(declaring.DESCRIPTION), "",
             "Its options go in %s of any module of the collection that calls a cloud, or in the playbooks' "
             "variable `gpuprov_cloud_options` (a dict keyed by cloud name); the [list of clouds](README.md) says "
             "how they are checked." % _code("cloud_options.%s" % cloud), "",
             "## Credentials", "", _credentials_text(cloud, declaring, options), "",
             "## Tags", "", markdown(declaring.TAGS) + " (The user's tags are the `tags` option of `vm` and "
             "`instance`; gpuprov's identity tags always win.)", "",
             "## Options", "",
             "| Option | Type | Default | Environment |", "|---|---|---|---|"]
    for name in sorted(spec):
        declared = spec[name]
        default = declared.get("default")
        lines.append("| [%s](#%s) | %s%s | %s | %s |" % (
            _code(name), name, _code(type_text(declared)), ", never logged" if declared.get("no_log") else "",
            _code(value_text(default)) if default is not None else "",
            ", ".join(_code(v) for v in options.environment_names(declared))))
    for name in sorted(spec):
        declared = spec[name]
        lines += ["", "### %s" % name, "", markdown(declared["description"]), ""]
        lines += ["- %s" % fact for fact in option_facts(declared, options)]
    return "\n".join(lines) + "\n"


def render_index(clouds) -> str:
    """docs/clouds/README.md: the clouds, and how their options are given and checked."""
    lines = [GENERATED % "*.py", "", "# Cloud options", "",
             "Every module of the collection that calls a cloud takes `cloud_options`, a dict keyed by cloud name, "
             "the same for every module (the playbooks' variable `gpuprov_cloud_options`), for example:", "",
             "```yaml", "cloud_options:", "  gcp:", "    project: my-project", "  aws:",
             "    regions: [us-east-1, eu-west-1]", "```", ""]
    lines += ["- %s" % markdown(text) for text in USAGE]
    lines += ["", "Each cloud's page lists its options:", "", "| Cloud | What a VM is | Options |", "|---|---|---|"]
    for cloud in sorted(clouds):
        declaring, spec = clouds[cloud]
        lines.append("| [%s](%s.md) | %s | %d |" % (_code(cloud), cloud, markdown(declaring.DESCRIPTION), len(spec)))
    return "\n".join(lines) + "\n"


def render() -> dict:
    """{path: text} of every file this script writes."""
    clouds, options = _declarations()
    files = {FRAGMENT: render_fragment(clouds), PAGES / "README.md": render_index(clouds)}
    for cloud, (declaring, spec) in clouds.items():
        files[PAGES / ("%s.md" % cloud)] = render_page(cloud, declaring, spec, options)
    return files


def main(argv) -> int:
    files = render()
    stale = sorted(str(path.relative_to(REPO)) for path, text in files.items()
                   if not path.exists() or path.read_text() != text)
    known = {path for path in files if path.parent == PAGES}
    extra = sorted(str(p.relative_to(REPO)) for p in PAGES.glob("*.md") if p not in known) if PAGES.is_dir() else []
    if "--check" in argv:
        if stale or extra:
            sys.stderr.write("out of date: %s: run scripts/gen-cloud-options-doc.py\n" % ", ".join(stale + extra))
            return 1
        return 0
    PAGES.mkdir(parents=True, exist_ok=True)
    for path in extra:
        (REPO / path).unlink()
    for path, text in files.items():
        path.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
