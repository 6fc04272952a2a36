#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: vm
short_description: Get a GPU VM from any cloud, or tear it down
version_added: 0.1.0
description:
  - "Runs the launch (O(state=present)) or teardown (O(state=absent)) machine of one VM on the controller,
    journalling each step before its side effect: a crash, Ctrl-C or killed job loses nothing."
  - "The launch reuses a running VM of the name, else tries the offers of O(clouds) in turn (create or adopt, boot,
    SSH login); capacity, quota (for its region) and failure errors undo the attempt and fail over."
  - On success the host key is pinned and a C(Host <name>) block written to C(<state dir>/ssh_config)
    (C(docs/clouds/local.md) says what differs for V(local)); a progress line at least every 15 s.
requirements:
  - paramiko (for the SSH check, C(requirements/base.txt), in every C(requirements/<cloud>.txt))
  - cryptography (for the SSH keys; ansible-core brings it)
  - psycopg (for a C(postgresql://) O(journal), C(requirements/postgresql.txt))
author:
  - gpuprov.cloud contributors (@gpuprov)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.flow
  - gpuprov.cloud.controller
  - gpuprov.cloud.cloud_options
  - gpuprov.cloud.provider
  - gpuprov.cloud.provider.search
  - gpuprov.cloud.provider.request
  - gpuprov.cloud.provider.tags
  - gpuprov.cloud.group
  - gpuprov.cloud.group.vm_settings
attributes:
  check_mode:
    support: full
    details:
      - Reads the journal, observes the VM and plans the search (RV(plan)); creates nothing, no journal or SSH key
        either.
  diff_mode:
    support: full
    details:
      - The VM's cloud, type, GPU, id, status, endpoint and limits; in check mode, what the first offer makes.
options:
  name:
    description:
      - The VM name (required unless O(from_host_vars=true)), a DNS label (1-63 of V(a-z), V(0-9), V(-)), the journal key
        and the identity (tag C(gpuprov-vm-name) or name C(gpuprov-<name>)) its resources carry.
    type: str
  state:
    description:
      - V(present) provisions (or reuses) the VM; V(absent) tears down all the journal knows of it, stopping a run
        still provisioning it first.
    type: str
    choices: [present, absent]
    default: present
  retry_until_up:
    description: Plan again every 30 s until up.
    type: bool
    default: false
  recreate:
    description:
      - When the journalled VM does not satisfy the request (O(gpu), O(gpu_count), O(spot), cloud or region),
        V(false) fails naming each field, V(true) replaces it.
    type: bool
    default: false
  k8s:
    description:
      - Whether the VM becomes a k3s cluster. Unset means where its cloud can (RV(k8s) says why not); V(true)
        searches only such clouds.
    type: bool
  from_host_vars:
    description:
      - Take the options left unset (O(name) too) from the host's variables (C(docs/playbooks/provision.md)).
    type: bool
    default: false
  purge_tags:
    description:
      - With O(tags) set, remove the VM's other user tags (as amazon.aws does); V(false) only adds and updates.
        A cloud that cannot retag warns.
    type: bool
    default: true
  boot_script:
    description:
      - A script run as the VM boots, where its cloud can; unless O(k8s=false), the k3s role's installer, for
        clouds that can host k3s only. Never logged.
    type: dict
    suboptions:
      script:
        description: The script text, normally starting with C(#!).
        type: str
        required: true
      env:
        description: Environment variables exported before it runs.
        type: dict
        default: {}
  ttl:
    description: Expire the VM this long after it is up (V(8h)).
    type: str
  expires_at:
    description: Expire the VM at this ISO 8601 time.
    type: str
  idle_stop:
    description: Power the VM off after this long idle (V(30m)).
    type: str
  max_spend:
    description: Expire the VM once it cost this many USD (C(docs/limits.md)).
    type: str
  limits_grace:
    description: Time past a deadline before the VM powers off (V(5m)).
    type: str
notes:
  - Runs on the controller only, through its action plugin, never connecting to the target host (C(become),
    C(delegate_to) and the connection do not apply).
seealso:
  - name: Provision playbook
    description: C(ansible-playbook gpuprov.cloud.provision -e vm=...)
    link: https://github.com/gpuprov/cloud
"""

EXAMPLES = r"""
- name: Provision a VM with an H100 on the first cloud that has one, tagged for cost allocation
  gpuprov.cloud.vm:
    name: train1
    gpu: H100
    clouds: [aws, gcp]
    tags:
      team: ml
  register: train1

- name: Reach it with its pinned host key
  ansible.builtin.set_fact:
    ansible_host: "{{ train1.connection.ansible_host }}"
    ansible_port: "{{ train1.connection.ansible_port }}"
    ansible_user: "{{ train1.connection.ansible_user }}"
    ansible_ssh_private_key_file: "{{ train1.connection.ansible_ssh_private_key_file }}"
    ansible_ssh_common_args: "{{ train1.connection.ansible_ssh_common_args }}"

- name: A loopback VM on the local cloud (no credentials needed), gone after 8 hours
  gpuprov.cloud.vm:
    name: demo
    ttl: 8h

- name: Tear it down
  gpuprov.cloud.vm:
    name: train1
    state: absent
"""

RETURN = r"""
state:
  description:
    - The state this run ended in (C(Ready), C(Leaked), C(Done)...); in check mode, the journal's.
  returned: always
  type: str
  sample: Ready
vm:
  description: The VM, its SSH endpoint and pinned host key (C(docs/return-values.md#the-vm-record)).
  returned: success and O(state=present)
  type: dict
connection:
  description:
    - The VM's connection variables (C(ansible_host)..., its pinned host key), to set as facts.
  returned: success and O(state=present)
  type: dict
k8s:
  description: What the k3s stage is to do on the VM (C(docs/return-values.md#the-k3s-plan)).
  returned: success and O(state=present)
  type: dict
tags:
  description: The user tags this run changed on a VM it kept (C(docs/return-values.md#the-tag-change)).
  returned: O(tags) set and an existing VM was kept
  type: dict
smoke:
  description: The command the SSH check ran and its output (C(docs/return-values.md#the-smoke-check)).
  returned: success, O(state=present), not in check mode
  type: dict
ssh_config:
  description: The ssh config file with the VM's C(Host <name>) block.
  returned: success and O(state=present)
  type: str
search:
  description: Where this run's search ended (C(docs/return-values.md#the-search-summary)).
  returned: O(state=present)
  type: dict
plan:
  description:
    - In check mode, the offers to try, in order (none if the VM is kept), with C(rank), C(offer_id), C(cloud),
      C(region), C(zone), C(instance_type), C(gpu), C(gpu_count), C(price_per_hour) as in
      RV(gpuprov.cloud.offers#module:offers).
  returned: check mode and O(state=present)
  type: list
  elements: dict
history:
  description: The offers this run's search tried, in order (C(docs/return-values.md#the-search-history)).
  returned: O(state=present)
  type: list
  elements: dict
events:
  description: The journal events of this run, with notes and timestamps.
  returned: O(state=present)
  type: list
  elements: dict
journal:
  description: Path of the journal used.
  returned: always
  type: str
limits:
  description: The VM's limits, deadline, time left and spend (C(docs/return-values.md#the-limits)).
  returned: success and O(state=present)
  type: dict
leaked:
  description:
    - Locations and instance ids that may still bill after an unfinished teardown; the next run resolves them.
  returned: when a teardown ended Leaked
  type: list
  elements: dict
targets:
  description: What the teardown removed.
  returned: O(state=absent) and something was torn down
  type: list
  elements: dict
"""

from ansible_collections.gpuprov.cloud.plugins.module_utils.controller_only import refuse_outside_controller
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.args import VM_ARGUMENT_SPEC


def main():
    refuse_outside_controller("vm", VM_ARGUMENT_SPEC)


if __name__ == "__main__":
    main()
