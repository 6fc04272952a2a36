#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: journal_info
short_description: List the VMs of the journal and their state
version_added: 0.1.0
description:
  - Reads the SQLite journal written by M(gpuprov.cloud.vm) and returns the VMs with their machine state,
    their status, their endpoint and their last transitions. VMs whose teardown failed (C(Leaked)) are called out
    with the resources that may still bill.
  - A big journal is paged, so the result stays small and the table readable at 10,000 VMs. O(limit) VMs are
    returned (the first by name), each with its O(last) transitions; O(name) narrows them to one VM or a
    pattern. The summary counts every matching VM by state, and the leaked list names every leaked one, shown or
    not.
  - Never creates or changes the journal.
requirements:
  - python >= 3.11
  - psycopg (for a C(postgresql://) O(journal), C(requirements/postgresql.txt))
author:
  - gpuprov.cloud contributors (@gpuprov)
extends_documentation_fragment:
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
      - The journal, a path (SQLite; C(~) and C($VAR) expanded) or a C(postgresql://) DSN (taken as written);
        defaults to E(GPUPROV_JOURNAL), else the state directory's C(journal.sqlite).
    type: str
  journal_password:
    description:
      - Password of a PostgreSQL journal, when the DSN does not carry one and libpq's environment (E(PGPASSWORD),
        E(PGPASSFILE)) does not give it. Never logged, journalled or shown.
    type: str
  name:
    description:
      - Only this VM, or the VMs whose names match this shell-style pattern (C(train*), C(gpu-?)).
    type: str
  last:
    description:
      - How many of the latest transitions to return per VM (polls are not counted); C(0) returns none.
    type: int
    default: 3
  limit:
    description:
      - How many VMs to return, the first by name; C(0) returns every matching VM.
      - The summary, RV(total) and RV(leaked) count every matching VM, whatever the limit.
    type: int
    default: 100
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

- name: The training VMs only, each with its last 10 transitions
  gpuprov.cloud.journal_info:
    name: "train*"
    last: 10
  register: gpuprov_training

- name: Every VM of a big journal, without transitions
  gpuprov.cloud.journal_info:
    limit: 0
    last: 0
  register: gpuprov_everything
"""

RETURN = r"""
journal:
  description: The journal read.
  returned: always
  type: str
vms:
  description: One entry per journalled VM name that matches O(name), the first O(limit) by name.
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
    stage: {description: "The VM's last stage: C(Ready) once provisioned, then the k3s stage the gpuprov.cloud.k3s
      role journals (C(k3s:Validating), C(k3s:Ready), C(k3s:Failed), ...) on a VM made a k3s cluster.", type: str,
      returned: always, sample: "k3s:Ready"}
    price_per_hour: {description: "Hourly price in US dollars of a Ready VM, where its cloud reports one.",
                     type: float, returned: always, sample: 2.49}
    search:
      description: "How the VM's last search went (C(docs/return-values.md#the-search-summary)); null without one."
      type: dict
      returned: always
leaked:
  description: Names of every leaked VM that matches O(name), also those beyond O(limit).
  returned: always
  type: list
  elements: str
total:
  description: How many journalled VMs match O(name), also those beyond O(limit).
  returned: always
  type: int
  sample: 10000
summary:
  description: How many matching VMs are in each state (the state without its offer), also those beyond O(limit).
  returned: always
  type: dict
  sample: {"Ready": 9997, "Leaked": 3}
table:
  description:
    - A printable table of the VMs followed by their last transitions, then one line per state with its count,
      the number of matching VMs, and, when O(limit) left some out, how to see them.
  returned: always
  type: list
  elements: str
"""

from ansible_collections.gpuprov.cloud.plugins.module_utils.journal_module import JournalModule
from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journal import JournalError
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.provider_args import group_argument_spec
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.status import DEFAULT_LIMIT, read_status


def main():
    module = JournalModule(
        argument_spec=group_argument_spec(name=dict(type="str"), last=dict(type="int", default=3),
                                          limit=dict(type="int", default=DEFAULT_LIMIT)),
        supports_check_mode=True,
    )
    try:
        result = read_status(module.params["journal"], module.params["name"], module.params["last"],
                             module.params["journal_password"], limit=module.params["limit"])
    except (JournalError, ValueError) as exc:
        module.fail_json(msg=str(exc))
    for warning in result.pop("warnings", []):   # the VMs near or past their deadline (expiry/report.py)
        module.warn(warning)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
