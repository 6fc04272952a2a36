# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment:
    # Attributes shared by the tasks that run on the controller through their action plugin
    # (vm, vm_stage, k3s_kubeconfig, k3s_validate). Use it together with
    # ansible.builtin.action_common_attributes and its .flow variant, which describe them.
    DOCUMENTATION = r"""
attributes:
  action:
    support: full
  async:
    support: none
  bypass_host_loop:
    support: none
  diff_mode:
    support: none
  platform:
    platforms: posix
"""

    # The modules whose action plugin runs their task in Ansible's process when the task runs on the
    # controller with its own Python, and runs the module anywhere else (offers, instance, instance_info).
    IN_PROCESS_ON_CONTROLLER = r"""
attributes:
  action:
    support: full
  async:
    support: full
  bypass_host_loop:
    support: none
notes:
  - "On the controller with its own Python (C(hosts: localhost) or C(delegate_to: localhost), the usual case), the
    action plugin runs the task in Ansible's process without shipping the module, with the same options and
    result; anywhere else (another host, C(become), C(environment), C(async), another interpreter) the module runs
    as any module does."
"""
