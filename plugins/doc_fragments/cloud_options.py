# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Written by scripts/gen-cloud-options-doc.py from the adapters' option declarations
# (plugins/module_utils/providers/cloud_options/); edit those, then run the script.

from __future__ import annotations


class ModuleDocFragment:
    """The O(cloud_options) of the modules that call a cloud: a dict keyed by cloud name, each cloud's
    options documented once, on its own page (docs/clouds/<cloud>.md)."""

    DOCUMENTATION = r"""
options:
  cloud_options:
    description:
    - Options per cloud, keyed by cloud name (V(aws), V(digitalocean), V(docker), V(gcp), V(hyperstack), V(lambda),
      V(local), V(massedcompute), V(nebius), V(primeintellect), V(runpod), V(verda)), as the playbooks' C(gpuprov_cloud_options).
      Each cloud's options and credentials, and how they are checked, are on its own page, C(docs/clouds/<cloud>.md)
      (R(Clouds,gpuprov_cloud_options) on the docs site).
    type: dict
    default: {}
"""
