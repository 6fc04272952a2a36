# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
name: k3s_capable
short_description: The clouds, of those named, that can host k3s with their options
version_added: 0.1.0
description:
  - Asks each cloud's adapter for its capabilities (no cloud call) and returns the names of the clouds that can
    host k3s with the given options, in order. The provision playbook uses it to hand the k3s installer to
    M(gpuprov.cloud.vm) as the boot script only where it can run (the V(docker) cloud only with C(privileged)).
author:
  - gpuprov.cloud contributors (@gpuprov)
options:
  _terms:
    description: Cloud names.
    type: list
    elements: str
    required: true
  cloud_options:
    description: Per-cloud adapter options, keyed by cloud name, as M(gpuprov.cloud.vm) takes them.
    type: dict
    default: {}
"""

EXAMPLES = r"""
- name: Which clouds can host k3s
  ansible.builtin.debug:
    msg: "{{ lookup('gpuprov.cloud.k3s_capable', 'docker', 'local', cloud_options={'docker': {'privileged': true}}) }}"
"""

RETURN = r"""
_raw:
  description: The names of the clouds that can host k3s.
  type: list
  elements: str
"""

from ansible.plugins.lookup import LookupBase

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers import registry
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import ProviderError


class LookupModule(LookupBase):

    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        options = self.get_option("cloud_options") or {}
        capable = []
        for term in terms:
            names = term if isinstance(term, list) else str(term).split(",")
            for cloud in (str(n).strip() for n in names):
                try:
                    caps = registry.get_provider(cloud, dict(options.get(cloud) or {})).capabilities()
                except (ProviderError, ImportError):
                    continue  # an unknown or unusable cloud hosts nothing; the vm task says why
                if caps.kubernetes and cloud not in capable:
                    capable.append(cloud)
        return [capable]
