#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: k3s_kubeconfig
short_description: Write a VM's kubeconfig (internal, k3s role)
version_added: 0.1.0
description:
  - Turns the VM's C(/etc/rancher/k3s/k3s.yaml) (read with M(ansible.builtin.slurp)) into a kubeconfig whose
    cluster, user and context are all named O(name) and whose server is O(server), the address the user will use
    (the public host in C(Direct) access, C(https://127.0.0.1:<port>) through C(gpuprov.cloud.tunnel) in
    C(SshTunnel) access), and writes it with mode 0600 to C(<dir>/gpuprov-<name>.yaml).
  - With O(merge), also merges it into O(merge_path) (entries of the same name replaced), with PyYAML.
  - Runs on the controller through its action plugin; reports a change only when a file's content changed.
author:
  - gpuprov.cloud contributors (@gpuprov)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.flow
  - gpuprov.cloud.controller
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
    details:
      - The kubeconfig file before and after, and the merged file with O(merge); client keys, certificates,
        tokens and passwords are masked.
options:
  name:
    description: The VM name; the kubeconfig's cluster, user and context name.
    type: str
    required: true
  k3s_yaml:
    description: The content of the VM's C(k3s.yaml). Never logged.
    type: str
    required: true
  server:
    description: The API URL the user will use.
    type: str
    required: true
  dir:
    description: Folder of the kubeconfig file (created 0700 when missing).
    type: path
    default: ~/.kube
  merge:
    description: Also merge the VM's entries into O(merge_path).
    type: bool
    default: false
  merge_path:
    description: The kubeconfig to merge into.
    type: path
    default: ~/.kube/config
  set_current_context:
    description: Make the VM's context the current one of O(merge_path) (otherwise only when it has none).
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Read the VM's k3s.yaml
  ansible.builtin.slurp:
    src: /etc/rancher/k3s/k3s.yaml
  register: k3s_yaml

- name: Write ~/.kube/gpuprov-train1.yaml
  gpuprov.cloud.k3s_kubeconfig:
    name: train1
    k3s_yaml: "{{ k3s_yaml.content | b64decode }}"
    server: https://127.0.0.1:6443
"""

RETURN = r"""
path:
  description: The kubeconfig written.
  returned: success
  type: str
  sample: /home/me/.kube/gpuprov-train1.yaml
context:
  description: Its context name.
  returned: success
  type: str
server:
  description: Its server URL.
  returned: success
  type: str
merged:
  description: Whether O(merge_path) was changed.
  returned: success
  type: bool
"""

from ansible_collections.gpuprov.cloud.plugins.module_utils.controller_only import refuse_outside_controller
from ansible_collections.gpuprov.cloud.plugins.module_utils.cluster.args import K3S_KUBECONFIG_ARGUMENT_SPEC


def main():
    refuse_outside_controller("k3s_kubeconfig", K3S_KUBECONFIG_ARGUMENT_SPEC)


if __name__ == "__main__":
    main()
