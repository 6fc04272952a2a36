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
