#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: journal_info
short_description: List the VMs in the gpuprov journal with their state and last transitions
version_added: 0.1.0
description:
  - Reads the SQLite journal written by M(gpuprov.cloud.vm) and returns every VM name with its machine state,
    its status, its endpoint and its last transitions. VMs whose teardown failed (C(Leaked)) are called out
    with the resources that may still bill.
  - Never creates or changes the journal.
author:
  - gpuprov.cloud contributors (@gpuprov)
extends_documentation_fragment:
  - gpuprov.cloud.cloud_options
  - gpuprov.cloud.group
  - gpuprov.cloud.group.cloud_ignored
  - gpuprov.cloud.group.vm_settings_ignored
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  platform:
    platforms: posix
options:
  journal:
    description:
      - The journal, a path (SQLite) or a C(postgresql://) DSN; defaults to E(GPUPROV_JOURNAL), else the state
        directory's C(journal.sqlite).
    type: path
  journal_password:
    description:
      - Password of a PostgreSQL journal, when the DSN does not carry one and libpq's environment (E(PGPASSWORD),
        E(PGPASSFILE)) does not give it. Never logged, journalled or shown.
    type: str
  cloud_options:
    description: Shared by the module_defaults group; ignored by this module, which reads only the journal.
  name:
    description: Only this VM.
    type: str
  last:
    description: How many of the latest transitions to return per VM.
    type: int
    default: 3
notes:
  - "Run it where the journal is, normally the controller (C(delegate_to: localhost))."
"""

EXAMPLES = r"""
- name: Read the journal
  gpuprov.cloud.journal_info:
  register: gpuprov_status

- name: Show the table
  ansible.builtin.debug:
    var: gpuprov_status.table
"""

RETURN = r"""
journal:
  description: The journal read.
  returned: always
  type: str
vms:
  description: One entry per journalled VM name.
  returned: always
  type: list
  elements: dict
  contains:
    name: {description: VM name., type: str, returned: always}
    machine: {description: The machine that last ran (launch or teardown)., type: str, returned: always}
    state: {description: Its state label., type: str, returned: always, sample: Ready}
    status: {description: "Projection status: running, leaked, gone or none.", type: str, returned: always}
    leaked: {description: Whether its teardown failed., type: bool, returned: always}
    targets: {description: Locations and ids that may still exist when leaked., type: list, returned: always}
    last_transitions: {description: Latest transitions with time and note., type: list, returned: always}
    price_per_hour: {description: "Hourly price in US dollars of a Ready VM, where its cloud reports one.",
                     type: float, returned: always, sample: 2.49}
    search:
      description: "How the VM's last search went: C(offer) (n) of C(of) (m), its C(offer_id) and
        C(price_per_hour), and C(skipped), why each earlier offer or cloud was skipped; null without a search."
      type: dict
      returned: always
leaked:
  description: Names of leaked VMs.
  returned: always
  type: list
  elements: str
table:
  description: A printable table of the VMs followed by their last transitions.
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journal import JournalError
from ansible_collections.gpuprov.cloud.plugins.module_utils.provider_args import group_argument_spec
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm.status import read_status


def main():
    module = AnsibleModule(
        argument_spec=group_argument_spec(name=dict(type="str"), last=dict(type="int", default=3)),
        supports_check_mode=True,
    )
    try:
        result = read_status(module.params["journal"], module.params["name"], module.params["last"],
                             module.params["journal_password"])
    except JournalError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
