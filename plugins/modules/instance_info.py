#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: instance_info
short_description: Find the cloud instances of a VM name
version_added: 0.1.0
description:
  - Calls the cloud adapter's C(observe) primitive for one VM name and returns every instance that carries its
    identity (tag or label C(gpuprov-vm-name), or the name C(gpuprov-<name>)), with normalised status and SSH
    endpoint.
  - Looks at O(region) (and O(zone)) when given, else at every location of the offers the cloud plans for the
    request (O(gpu), O(gpu_count), O(regions)).
  - Reads only; never changes anything.
author:
  - gpuprov.cloud contributors (@gpuprov)
extends_documentation_fragment:
  - gpuprov.cloud.cloud_options
  - gpuprov.cloud.provider
  - gpuprov.cloud.provider.modules
  - gpuprov.cloud.provider.request
  - gpuprov.cloud.group
  - gpuprov.cloud.group.vm_settings_ignored
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.flow
  - gpuprov.cloud.controller.in_process_on_controller
attributes:
  check_mode:
    support: full
    details: Observing changes nothing; the module does the same in check mode.
  diff_mode:
    support: none
  platform:
    platforms: posix
options:
  name:
    description: The VM name (a DNS label).
    type: str
    required: true
  region:
    description: Region to look in. Unset looks at every location the cloud plans for the request.
    type: str
  zone:
    description: Zone to look in, where the cloud has zones.
    type: str
seealso:
  - module: gpuprov.cloud.instance
  - module: gpuprov.cloud.journal_info
"""

EXAMPLES = r"""
- name: Instances of demo on the local cloud
  gpuprov.cloud.instance_info:
    name: demo
  delegate_to: localhost
  register: demo

- name: Wait for train1 in us-east-1 to run with an SSH endpoint
  gpuprov.cloud.instance_info:
    name: train1
    cloud: aws
    region: us-east-1
  delegate_to: localhost
  register: train1
  until: train1.running
  retries: 60
  delay: 10
"""

RETURN = r"""
instances:
  description: Every instance of the VM name found (C(docs/return-values.md#the-instance-record)).
  returned: success
  type: list
  elements: dict
exists:
  description: Whether a live (not failed, not terminating) instance exists.
  returned: success
  type: bool
running:
  description: Whether an instance is Running with an SSH endpoint.
  returned: success
  type: bool
locations:
  description: The locations looked at (C(cloud), C(region), C(zone)).
  returned: success
  type: list
  elements: dict
error:
  description: The classified error (C(kind), C(msg), C(block), C(primitive), C(location)) when the task failed on one.
  returned: failure
  type: dict
"""

from ansible_collections.gpuprov.cloud.plugins.module_utils.journal_module import JournalModule
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.primitive_tasks import INSTANCE_INFO, finish


def main():
    module = JournalModule(argument_spec=INSTANCE_INFO.argument_spec, supports_check_mode=True)
    finish(module, INSTANCE_INFO)


if __name__ == "__main__":
    main()
