#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: k3s_validate
short_description: Validate a VM's k3s (internal, k3s role)
version_added: 0.1.0
description:
  - From the controller, with the kubeconfig written by M(gpuprov.cloud.k3s_kubeconfig), checks that the API
    answers C(/readyz), the node is Ready, CoreDNS is available, C(nvidia.com/gpu) is allocatable when
    O(gpu_expected), and the API certificate's SANs cover every host of O(hosts) and the kubeconfig server's
    host.
  - In V(SshTunnel) access the checks go through an SSH forward made as C(gpuprov.cloud.tunnel) makes it (the
    collection's ssh config, pinned host key), on a free local port; in V(Direct) access straight to the server.
  - While C(nvidia.com/gpu) is not allocatable on a VM that expects it, the C(gpu) check says why, from the NVIDIA
    device plugin the installer deploys (DaemonSet C(kube-system/nvidia-device-plugin-daemonset)) - no DaemonSet,
    no pod (its nodeSelector matches no node), or its pod's state (for example C(CrashLoopBackOff), restarts, last
    exit code) and the first and last errors its log has (klog C(E) lines), so a timed-out validation names the
    cause.
  - Polls until every check passes or O(timeout) seconds have passed. With O(fail_on_missing_sans=false), a
    certificate that lacks a host is returned (RV(missing_sans)) instead of failing, so the installer can be
    re-run with the SAN.
  - Runs on the controller through its action plugin. Never reports a change.
requirements:
  - cryptography (to read the names in the API server's certificate; ansible-core brings it)
author:
  - gpuprov.cloud contributors (@gpuprov)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.flow
  - gpuprov.cloud.controller
attributes:
  check_mode:
    support: full
    details: Only reads.
options:
  name:
    description: The VM name (the C(Host) of the collection's ssh config in V(SshTunnel) access).
    type: str
    required: true
  kubeconfig:
    description: The kubeconfig to validate with.
    type: path
    required: true
  access:
    description: How the user reaches the API.
    type: str
    choices: [Direct, SshTunnel]
    default: Direct
  hosts:
    description: Hosts the API certificate must cover (the VM's public host, extra names).
    type: list
    elements: str
    default: []
  gpu_expected:
    description: Require C(nvidia.com/gpu) allocatable.
    type: bool
    default: false
  timeout:
    description: Seconds to keep checking.
    type: int
    default: 300
  interval:
    description: Seconds between checks.
    type: int
    default: 3
  ssh_config:
    description: The ssh config with the VM's C(Host) block; default C(<state dir>/ssh_config).
    type: path
  remote_port:
    description: The API port on the VM.
    type: int
    default: 6443
  fail_on_missing_sans:
    description: Fail when the certificate lacks a host of O(hosts) (otherwise return it in RV(missing_sans)).
    type: bool
    default: true
"""

EXAMPLES = r"""
- name: Validate through an SSH tunnel
  gpuprov.cloud.k3s_validate:
    name: train1
    kubeconfig: ~/.kube/gpuprov-train1.yaml
    access: SshTunnel
    hosts: [203.0.113.7]
    gpu_expected: true
"""

RETURN = r"""
ok:
  description: Whether every check passed.
  returned: when the API was reached
  type: bool
checks:
  description:
    - Each check (api, san, node_ready, coredns, gpu) with C(ok) and C(detail).
    - The C(gpu) check's C(detail) adds the NVIDIA device plugin's state when no GPU is allocatable and one is
      expected.
  returned: when the API was reached
  type: dict
missing_sans:
  description: Hosts the API certificate does not cover.
  returned: when the API was reached
  type: list
  elements: str
certificate_sans:
  description: The SANs of the API certificate.
  returned: when the API was reached
  type: list
  elements: str
nodes:
  description: Node names.
  returned: when the API was reached
  type: list
  elements: str
path:
  description: The access path used, in words.
  returned: always
  type: str
"""

from ansible_collections.gpuprov.cloud.plugins.module_utils.controller_only import refuse_outside_controller
from ansible_collections.gpuprov.cloud.plugins.module_utils.cluster.args import K3S_VALIDATE_ARGUMENT_SPEC


def main():
    refuse_outside_controller("k3s_validate", K3S_VALIDATE_ARGUMENT_SPEC)


if __name__ == "__main__":
    main()
