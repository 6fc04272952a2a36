#!/usr/bin/env python
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Write plugins/doc_fragments/cloud_options.py from the adapters' option declarations
(plugins/module_utils/providers/cloud_options/<cloud>.py, listed in the registry), so the
documentation of ``cloud_options`` cannot drift from what the adapters accept.

    scripts/gen-cloud-options-doc.py           rewrite the fragment
    scripts/gen-cloud-options-doc.py --check   exit 1 when the fragment is out of date
"""

from __future__ import annotations

import importlib
import pathlib
import sys

import yaml

REPO = pathlib.Path(__file__).resolve().parents[1]
FRAGMENT = REPO / "plugins" / "doc_fragments" / "cloud_options.py"
MU = "ansible_collections.gpuprov.cloud.plugins.module_utils."

HEADER = '''# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Written by scripts/gen-cloud-options-doc.py from the adapters' option declarations
# (plugins/module_utils/providers/cloud_options/); edit those, then run the script.

from __future__ import annotations


class ModuleDocFragment:
    """The O(cloud_options) of every module of the collection: each cloud's adapter options."""

    DOCUMENTATION = r"""
'''
FOOTER = '''"""
'''

INTRO = [
    "Adapter options per cloud, keyed by cloud name: the same dict for every module of the collection (play "
    "variable C(gpuprov_cloud_options) in its playbooks).",
    "Each cloud takes only the options listed for it; an unknown option or a value of the wrong type fails the "
    "task, naming it.",
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


def _option_doc(declared, environment_names):
    description = [declared["description"]]
    if declared.get("minimum") is not None:
        description.append("At least %s." % declared["minimum"])
    if declared.get("no_log"):
        description.append("Never logged.")
    names = environment_names(declared)
    if names:
        description.append("When not set, read from %s." % ", else ".join("E(%s)" % n for n in names))
    doc = {"description": description if len(description) > 1 else description[0],
           "type": declared.get("type", "str")}
    for key in ("elements", "aliases", "choices", "required"):
        if declared.get(key):
            doc[key] = declared[key]
    if declared.get("default") is not None:
        doc["default"] = declared["default"]
    return doc


def render() -> str:
    """The fragment's text, from the declarations the registry lists."""
    _collection_path()
    registry = importlib.import_module(MU + "providers.registry")
    options = importlib.import_module(MU + "providers.options")
    clouds = {}
    for cloud in sorted(registry.OPTION_SPECS):
        # The options module is named after the adapter's package ("lambda" is lambda_cloud).
        package = registry.ADAPTERS[cloud][0]
        declaring = importlib.import_module(MU + "providers.cloud_options." + package)
        spec = registry.OPTION_SPECS[cloud]
        clouds[cloud] = {
            "description": declaring.DESCRIPTION,
            "type": "dict",
            "suboptions": {name: _option_doc(spec[name], options.environment_names) for name in sorted(spec)},
        }
    doc = {"options": {"cloud_options": {"description": INTRO, "type": "dict", "default": {}, "suboptions": clouds}}}
    text = yaml.safe_dump(doc, sort_keys=False, default_flow_style=False, width=104, allow_unicode=True)
    return HEADER + text + FOOTER


def main(argv) -> int:
    text = render()
    if "--check" in argv:
        if not FRAGMENT.exists() or FRAGMENT.read_text() != text:
            sys.stderr.write("%s is out of date: run scripts/gen-cloud-options-doc.py\n" % FRAGMENT.relative_to(REPO))
            return 1
        return 0
    FRAGMENT.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
