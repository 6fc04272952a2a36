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
  - Lists every resource that carries gpuprov's identity (the tag or label C(gpuprov-vm-name), or the name
    C(gpuprov-<name>) where a cloud has no tags) on O(clouds) and O(regions) (instances, and the side resources the
    adapters make, such as security groups, firewall rules and registered SSH keys), and joins each with the journal.
  - "Each resource is one of: V(orphan) (it carries this journal's id and no journal row owns it: no row for its
    VM name, a teardown that ended C(Done), or an C(Aborted) or C(Exhausted) run that names no location on its
    cloud); V(owned) (a row owns it: a run of the name is in progress, or a Ready, Leaked or kept VM of the name
    is on that cloud, since a cloud's cleanup acts by name and some side resources are global;
    M(gpuprov.cloud.vm) and C(down) handle it); V(foreign) (another journal's id: another controller's); or
    V(legacy) (no journal id: made before journal ids existed)."
  - O(state=present) only reports. O(state=absent) removes the orphans (and, when asked, the foreign or legacy
    resources) through the teardown machine of M(gpuprov.cloud.vm), one per VM name, journalled under the key
    C(sweep:<name>) (C(sweep:<journal id>:<name>) for another journal's resources), which is never a VM's key. A
    sweep that was interrupted (Ctrl-C, a killed job) is resumed by the next O(state=absent) run before it does
    anything else.
  - While it removes a VM name's orphans it holds the lease of that VM's journal row, when there is one, so a
    provision of the same name waits for it; and before each step it checks that no run of the name has come to
    own the location meanwhile (it then stops, and reports the resources in RV(not_removed)).
  - Reports what it found and removed by cloud, region and id, with the hourly price where the cloud's listing
    reports one, and the total cost per hour of each category. What a removal reports as removed was checked by a
    second listing; what is still listed after its teardown is in RV(not_removed).
requirements:
  - psycopg (for a C(postgresql://) O(journal); C(requirements/postgresql.txt) of the collection)
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
      - Lists and classifies exactly as a real run does, and reports in RV(would_remove) what O(state=absent) would
        remove; nothing is removed, resumed or written, and the journal is not created when it does not exist.
options:
  state:
    description:
      - V(present) reports and changes nothing. V(absent) removes the orphans (and what O(include_foreign) and
        O(include_legacy) add).
    type: str
    choices: [present, absent]
    default: present
  clouds:
    description:
      - The clouds to look on. Unset means every cloud that has credentials on this controller, without calling
        it (a credential option in O(cloud_options) or its environment variable, or the SDK's own credential
        files, such as C(~/.aws/credentials), Application Default Credentials or the Docker socket), and always
        V(local).
    type: list
    elements: str
  cloud:
    description: One cloud to look on, when O(clouds) is unset.
    type: str
  regions:
    description:
      - Only these regions. Empty means every region each cloud's catalog knows (or, where one listing covers
        every region, that listing).
    type: list
    elements: str
    default: []
  include_foreign:
    description:
      - With O(state=absent), also remove the resources of other journals (other controllers), acting as their
        journal. Only when that journal is known to be gone for good.
    type: bool
    default: false
  include_legacy:
    description:
      - With O(state=absent), also remove the resources that carry no journal id and that no row of this journal
        owns.
    type: bool
    default: false
  journal:
    description:
      - Where the journal is (an SQLite path or a C(postgresql://) DSN); defaults to E(GPUPROV_JOURNAL), else the
        state directory's C(journal.sqlite). Its id decides what is an orphan and what is foreign; O(state=absent)
        journals its teardowns there.
    type: path
  journal_password:
    description:
      - Password of a PostgreSQL journal, when the DSN does not carry one and libpq's environment does not give it.
        Never logged, journalled or shown.
    type: str
  teardown_timeout:
    description:
      - Seconds a VM name's instances may take to be gone before its teardown is declared C(Leaked) (reported in
        RV(not_removed); the next O(state=absent) run retries it). Unset means 600.
    type: int
  lease_ttl:
    description:
      - Seconds the journal lease on a VM name lasts while O(state=absent) tears its resources down (renewed every
        third of it); a VM run of that name is refused meanwhile. From 10 to 3600. Unset means
        E(GPUPROV_LEASE_TTL), else 120. See M(gpuprov.cloud.vm) for the trade-off.
    type: int
notes:
  - Runs on the controller through its action plugin, where the journal and the cloud credentials are, and prints
    a line per teardown step as it goes.
  - The cloud's C(cleanup) removes the side resources of a VM name that carry the journal's id or none, so removing
    an orphan also removes legacy side resources of the same name at that location.
  - Instances made by M(gpuprov.cloud.instance) with O(state=present) have no journal row and are therefore
    orphans of its journal; remove them with M(gpuprov.cloud.instance) or sweep only after they are done.
  - Clouds without tags mark names with a hash of the journal id; another journal's resources there show as
    C(j<8 hex>), and O(include_foreign) removes their instances but may leave their side resources (reported in
    RV(not_removed)).
  - A cloud that cannot be listed (no answer, refused credentials, an adapter without a listing) is named in
    RV(errors) and a warning; the others are swept.
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
  description: Every resource found, orphans first, then foreign, legacy and owned.
  returned: always
  type: list
  elements: dict
  contains:
    category: {description: "V(orphan), V(foreign), V(legacy) or V(owned).", type: str, returned: always,
               sample: orphan}
    why: {description: Why it is in its category., type: str, returned: always,
          sample: this journal has no row for train1}
    kind:
      description: "V(instance), V(security_group), V(firewall), V(ssh_key), V(environment) or V(other)."
      type: str
      returned: always
      sample: instance
    id: {description: The cloud's id of the resource., type: str, returned: always, sample: i-0abc}
    cloud: {description: Cloud., type: str, returned: always, sample: aws}
    region: {description: Region., type: str, returned: always, sample: us-east-1}
    zone: {description: "Zone, where the cloud has one.", type: str, returned: always, sample: us-east-1a}
    vm_name: {description: The VM name it carries., type: str, returned: always, sample: train1}
    journal_id: {description: "The journal id it carries; null for legacy.", type: str, returned: always}
    status: {description: "An instance's normalised status; null for side resources.", type: str,
             returned: always, sample: Running}
    price_per_hour: {description: "Hourly price in US dollars where the listing reports one, else null.",
                     type: float, returned: always, sample: 2.49}
    name: {description: "The cloud's display name, where it has one.", type: str, returned: always}
    action:
      description: "V(keep), V(would remove), V(removed) or V(failed)."
      type: str
      returned: always
      sample: would remove
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
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm.sweep import ORPHANS_ARGUMENT_SPEC


def main():
    refuse_outside_controller("orphans", ORPHANS_ARGUMENT_SPEC)


if __name__ == "__main__":
    main()
