#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: orphans
short_description: Find or remove what no journal row owns
version_added: 0.1.0
description:
  - Lists every resource that carries gpuprov's identity (tag or label C(gpuprov-vm-name), or the name
    C(gpuprov-<name>)) on O(clouds) and O(regions), instances and side resources (security groups, firewall rules,
    SSH keys...), and joins each with the journal.
  - "Each is V(orphan) (this journal's id, and no row owns it: none for its VM name, a teardown that ended
    C(Done), or an C(Aborted) or C(Exhausted) run naming no location on its cloud), V(owned) (a run of the name is
    in progress, or a Ready, Leaked or kept VM or instance task of the name is on that cloud, since a cleanup acts
    by name and some side resources are global; M(gpuprov.cloud.vm) and C(down) handle it), V(foreign) (another
    journal's id, another controller's) or V(legacy) (no journal id, made before there were any)."
  - O(state=absent) removes the orphans (and, when asked, the foreign or legacy ones) through the teardown machine
    of M(gpuprov.cloud.vm), one per VM name, journalled under C(sweep:<name>) (C(sweep:<journal id>:<name>) for
    another journal's), never a VM's key; an interrupted sweep is resumed first by the next one. It holds the VM
    row's lease meanwhile, so a provision of the name waits, and stops if a run of the name comes to own the
    location (RV(not_removed)).
  - Reports what it found and removed by cloud, region and id, with hourly prices and each category's cost per
    hour; what is reported removed was checked by a second listing.
requirements:
  - psycopg (for a C(postgresql://) O(journal), C(requirements/postgresql.txt))
author:
  - gpuprov.cloud contributors (@gpuprov)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.flow
  - gpuprov.cloud.controller
  - gpuprov.cloud.cloud_options
  - gpuprov.cloud.provider
  - gpuprov.cloud.group
  - gpuprov.cloud.group.cloud_ignored
  - gpuprov.cloud.group.vm_settings_ignored
attributes:
  check_mode:
    support: full
    details:
      - Lists and classifies as a real run does, and reports in RV(would_remove) what O(state=absent) would
        remove; nothing is removed, resumed or written (no journal made).
options:
  state:
    description:
      - V(present) only reports; V(absent) removes the orphans (and what O(include_foreign) and O(include_legacy)
        add).
    type: str
    choices: [present, absent]
    default: present
  clouds:
    description:
      - The clouds to look on; unset means V(local) and every cloud with credentials here, found without a call
        (in O(cloud_options), the environment or the SDK's own, such as C(~/.aws/credentials), Application Default
        Credentials or the Docker socket).
    type: list
    elements: str
  cloud:
    description: One cloud to look on, when O(clouds) is unset.
    type: str
  regions:
    description:
      - Only these regions; empty means every region each cloud's catalog knows (or its one all-region listing).
    type: list
    elements: str
    default: []
  include_foreign:
    description:
      - With O(state=absent), also remove other journals' resources, acting as their journal; only for a journal
        gone for good.
    type: bool
    default: false
  include_legacy:
    description:
      - With O(state=absent), also remove the resources without a journal id that no row of this journal owns.
    type: bool
    default: false
  journal:
    description:
      - The journal (as M(gpuprov.cloud.vm) takes it; a path gets C(~) and C($VAR) expanded, a C(postgresql://)
        DSN is taken as written), whose id decides what is an orphan and what is foreign, and where
        O(state=absent) journals its teardowns.
    type: str
  journal_password:
    description:
      - Password of a PostgreSQL journal, as M(gpuprov.cloud.vm) takes it. Never logged or shown.
    type: str
  teardown_timeout:
    description:
      - Seconds a VM name's instances may take to be gone before its teardown is C(Leaked) (in RV(not_removed),
        retried by the next run); unset means 600.
    type: int
  lease_ttl:
    description:
      - The journal lease on a VM name while O(state=absent) tears its resources down (a run of the name is refused
        meanwhile), as M(gpuprov.cloud.vm) takes it.
    type: int
notes:
  - Runs on the controller through its action plugin, printing a line per teardown step.
  - A cloud's C(cleanup) removes the side resources of a name that carry the journal's id or none, so removing an
    orphan also removes legacy side resources of the name at that location.
  - Clouds without tags mark names with a hash of the journal id (another journal's show as C(j<8 hex>));
    O(include_foreign) removes their instances but may leave their side resources (in RV(not_removed)).
  - A cloud that cannot be listed (no answer, refused credentials, no listing) is named in RV(errors) and a
    warning; the others are swept.
seealso:
  - module: gpuprov.cloud.vm
  - module: gpuprov.cloud.journal_info
"""

EXAMPLES = r"""
- name: What would be removed (every cloud with credentials here)
  gpuprov.cloud.orphans:
  register: sweep

- name: Show it with the cost per hour
  ansible.builtin.debug:
    var: sweep.table

- name: Remove the orphans on AWS in two regions
  gpuprov.cloud.orphans:
    clouds: [aws]
    regions: [us-east-1, us-west-2]
    state: absent

- name: Also remove what a retired controller's journal left
  gpuprov.cloud.orphans:
    clouds: [gcp]
    state: absent
    include_foreign: true
    cloud_options:
      gcp:
        project: my-project
"""

RETURN = r"""
resources:
  description:
    - Every resource found, orphans first, then foreign, legacy and owned, each with its category, why, and the
      action taken (C(docs/return-values.md#the-swept-resource)).
  returned: always
  type: list
  elements: dict
orphans:
  description: The resources of RV(resources) whose category is V(orphan).
  returned: always
  type: list
  elements: dict
foreign:
  description: The resources of RV(resources) whose category is V(foreign).
  returned: always
  type: list
  elements: dict
legacy:
  description: The resources of RV(resources) whose category is V(legacy).
  returned: always
  type: list
  elements: dict
owned:
  description: The resources of RV(resources) whose category is V(owned).
  returned: always
  type: list
  elements: dict
would_remove:
  description: What O(state=absent) removes (in check mode and with O(state=present)), or is removing.
  returned: always
  type: list
  elements: dict
removed:
  description: The resources whose teardown ended C(Done), by cloud, region and id (as in RV(resources)).
  returned: always
  type: list
  elements: dict
not_removed:
  description:
    - The resources chosen for removal whose teardown did not end C(Done), each with an C(error) saying why (the task
      then fails).
  returned: always
  type: list
  elements: dict
resumed:
  description: The journal keys of sweep teardowns an interrupted sweep had left, resumed by this run.
  returned: always
  type: list
  elements: str
  sample: ["sweep:train1"]
cost_per_hour:
  description:
    - The summed hourly price in US dollars of the instances found, per category (C(orphan), C(foreign),
      C(legacy), C(owned)) and in all (C(total)). Instances whose cloud reports no price count as 0 (the table
      says how many).
  returned: always
  type: dict
  sample: {orphan: 2.49, foreign: 0, legacy: 0, owned: 1.1, total: 3.59}
removed_cost_per_hour:
  description: The summed hourly price of the instances removed.
  returned: always
  type: float
clouds:
  description: The clouds looked on.
  returned: always
  type: list
  elements: str
regions:
  description: The regions looked in (empty means all).
  returned: always
  type: list
  elements: str
journal:
  description: The journal joined with (as it may be shown, without a password).
  returned: always
  type: str
journal_id:
  description: Its id; null when there is no journal yet (then every journal id found is foreign).
  returned: always
  type: str
errors:
  description: The listings that failed, each with C(cloud), C(region), C(kind) and C(msg).
  returned: always
  type: list
  elements: dict
callouts:
  description: One line per orphan, naming its cloud, region, kind, id, VM name, hourly price and why it is one.
  returned: always
  type: list
  elements: str
  sample: ["ORPHAN local/local instance local-0123456789ab of VM lost (0 $/h): this journal has no row for lost"]
table:
  description: A printable table (category, cloud/region, kind, id, VM, status, price, action), the total per
    hour of each category, and the listings that failed.
  returned: always
  type: list
  elements: str
"""

from ansible_collections.gpuprov.cloud.plugins.module_utils.controller_only import refuse_outside_controller
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.sweep import ORPHANS_ARGUMENT_SPEC


def main():
    refuse_outside_controller("orphans", ORPHANS_ARGUMENT_SPEC)


if __name__ == "__main__":
    main()
