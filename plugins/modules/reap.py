#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: reap
short_description: Tear down the VMs past their limits
version_added: 0.1.0
description:
  - For every VM whose limits are journalled (the O(gpuprov.cloud.vm#module:ttl), C(expires_at), C(idle_stop) and
    C(max_spend) options), asks its cloud what its instance is doing and decides as C(docs/limits.md) tabulates
    it; each VM past its deadline (the earlier of its expiry and its spend cap reached), or stopped by its own
    watchdog, is to be reaped.
  - A dry run unless O(delete=true), like the orphan sweep; with it each VM to reap is torn down exactly as C(down)
    tears it down (M(gpuprov.cloud.vm) with O(gpuprov.cloud.vm#module:state=absent)), under the name's journal
    lease and through the teardown machine, so a reap killed half-way is resumed by the next C(reap) or C(down).
  - A VM past its deadline that its cloud shows stopped (on V(docker), exited) stopped itself; it is reaped as
    C(expired (stopped itself)), never counted as a leak.
  - A VM whose teardown (a C(down) or reap) was killed half-way, or ended leaving resources that may bill, is reaped
    whatever its deadline by resuming or retrying that teardown; one torn down already whose rows the journal
    still lists is cleared from it.
requirements:
  - boto3 (C(requirements/aws.txt)), for VMs on V(aws)
  - google-cloud-compute (C(requirements/gcp.txt)), for VMs on V(gcp)
  - docker (C(requirements/docker.txt)), for VMs on V(docker)
  - requests (C(requirements/<cloud>.txt)), for VMs on the REST clouds
  - nebius (C(requirements/nebius.txt)), for VMs on V(nebius)
  - psycopg (for a C(postgresql://) O(journal), C(requirements/postgresql.txt))
author:
  - gpuprov.cloud contributors (@gpuprov)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.flow
  - gpuprov.cloud.controller
  - gpuprov.cloud.cloud_options
  - gpuprov.cloud.group
  - gpuprov.cloud.group.cloud_ignored
  - gpuprov.cloud.group.vm_settings
attributes:
  check_mode:
    support: full
    details:
      - Reads the journal and the clouds and reports in RV(would_remove) what O(delete=true) would remove; nothing
        is torn down or written.
  diff_mode:
    support: none
options:
  delete:
    description: Tear down the VMs to reap; V(false) only reports them (RV(would_remove)).
    type: bool
    default: false
  name:
    description: Only the VMs of this name, or whose name matches it as a shell pattern (V(train*)).
    type: str
  ssh_key:
    description: As M(gpuprov.cloud.vm) takes it; a teardown logs in nowhere, so it may stay unset.
    type: path
notes:
  - Runs on the controller through its action plugin, printing a line per VM it reaps.
  - A cloud that cannot be asked leaves its VM taken as running, so a VM past its deadline is reaped all the same.
  - V(local) VMs run no boot script, so they have no watchdog; for them C(reap) is the only enforcer.
  - Schedule it (cron, an AWX schedule of the C(gpuprov reap) job template) so that limits hold while nobody runs
    a playbook; C(docs/limits.md) says what each cloud bills for a VM that powered itself off.
seealso:
  - module: gpuprov.cloud.vm
  - module: gpuprov.cloud.orphans
"""

EXAMPLES = r"""
- name: What would be reaped
  gpuprov.cloud.reap:
  register: reap

- name: Show it
  ansible.builtin.debug:
    var: reap.lines

- name: Reap every VM past its deadline
  gpuprov.cloud.reap:
    delete: true
"""

RETURN = r"""
removed:
  description:
    - The VMs torn down, each with C(name), C(cloud), C(region), C(instance_id), C(reason), C(saved_per_hour) (USD;
      0 for one that no longer bills, null where unknown), C(expired) (it stopped itself), C(billing) (with
      C(expired), what its power-off did to its bill, from its cloud's documentation), C(targets) and
      C(cleared) (V(true) when it was torn down already, by a C(down) or reap killed before it cleared the journal,
      and only the journal's rows of it were removed; its line then says CLEARED).
  returned: always
  type: list
  elements: dict
would_remove:
  description: The VMs to reap, as in RV(removed) without C(targets) (a dry run, or check mode).
  returned: always
  type: list
  elements: dict
not_removed:
  description: The VMs whose teardown did not finish, each with an C(error) (the task then fails).
  returned: always
  type: list
  elements: dict
warned:
  description: The VMs within the hour of their deadline, as in RV(would_remove).
  returned: always
  type: list
  elements: dict
kept:
  description: The other VMs with limits, as in RV(would_remove), each with why it is kept.
  returned: always
  type: list
  elements: dict
saved_per_hour:
  description: The summed USD per hour of RV(removed).
  returned: always
  type: float
  sample: 4.2
would_save_per_hour:
  description: The summed USD per hour of RV(would_remove).
  returned: always
  type: float
  sample: 4.2
lines:
  description: One line per VM reaped, to reap or not torn down, for people.
  returned: always
  type: list
  elements: str
  sample:
    - "WOULD REAP train1 (aws/us-east-1 i-0abc): past its expiry, 5m ago (at 2026-05-01T18:00:00Z); saves $4.2/h"
journal:
  description: The journal read.
  returned: always
  type: str
"""

from ansible_collections.gpuprov.cloud.plugins.module_utils.controller_only import refuse_outside_controller
from ansible_collections.gpuprov.cloud.plugins.module_utils.expiry.reap import REAP_ARGUMENT_SPEC


def main():
    refuse_outside_controller("reap", REAP_ARGUMENT_SPEC)


if __name__ == "__main__":
    main()
