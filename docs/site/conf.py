# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Sphinx configuration of the collection's docs site (docs/site/build.py writes the sources; make docs).

The build is offline: no intersphinx inventories are fetched. References that antsibull-docs writes to
Ansible's own documentation (other collections' plugins, ANSIBLE_* settings, a few reference pages) resolve to links to
docs.ansible.com; any other unresolved reference, ours included, stays a warning, which fails the build."""

import re

from docutils import nodes

project = 'gpuprov.cloud'
copyright = 'gpuprov.cloud contributors'  # pylint: disable=redefined-builtin
title = 'gpuprov.cloud'
html_title = 'gpuprov.cloud'
html_short_title = 'gpuprov.cloud'

extensions = ['sphinx_antsibull_ext', 'myst_parser']
source_suffix = {'.rst': 'restructuredtext', '.md': 'markdown'}
myst_heading_anchors = 4

pygments_style = 'ansible'
highlight_language = 'YAML+Jinja'

html_theme = 'sphinx_ansible_theme'
html_show_sphinx = False
html_theme_options = {
    'topbar_links': {'Source': 'https://github.com/gpuprov/cloud', 'Issues': 'https://github.com/gpuprov/cloud/issues'},
    'show_rtd_ethical_ads': False,
    'documentation_home_url': 'https://github.com/gpuprov/cloud',
}
display_version = False
html_use_smartypants = True
html_use_modindex = False
html_use_index = False
html_copy_source = False

default_role = 'any'
nitpicky = True

ANSIBLE_DOCS = 'https://docs.ansible.com/projects/ansible/latest/'
ANSIBLE_DOCS_LABELS = {
    'action_plugins': 'plugins/action.html',
    'common_return_values': 'reference_appendices/common_return_values.html',
    'ansible_configuration_settings': 'reference_appendices/config.html',
    'playbooks_variables': 'playbook_guide/playbooks_variables.html',
    'module_defaults': 'playbook_guide/playbooks_module_defaults.html',
    'check_mode_dry': 'playbook_guide/playbooks_checkmode.html',
}
OTHER_COLLECTION_PLUGIN = re.compile(r'ansible_collections\.(\w+)\.(\w+)\.(\w+)_([a-z]+)(?:__.*)?')


def ansible_docs_reference(app, env, node, contnode):  # pylint: disable=unused-argument
    """Link a reference to Ansible's own documentation (or another collection's plugin) to docs.ansible.com."""
    target = node.get('reftarget', '')
    page = ANSIBLE_DOCS_LABELS.get(target)
    if node.get('reftype') == 'envvar' and target.startswith('ANSIBLE_'):
        page = 'reference_appendices/config.html#envvar-' + target
    match = OTHER_COLLECTION_PLUGIN.fullmatch(target)
    if match and (match.group(1), match.group(2)) != ('gpuprov', 'cloud'):
        page = 'collections/%s/%s/%s_%s.html' % match.groups()
    if page is None:
        return None
    link = nodes.reference('', '', internal=False, refuri=ANSIBLE_DOCS + page)
    link += contnode
    return link


def setup(app):
    app.connect('missing-reference', ansible_docs_reference)
