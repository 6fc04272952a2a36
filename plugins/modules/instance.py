#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: instance
short_description: Ensure one cloud instance of a VM, or none
version_added: 0.1.0
description:
  - Calls the cloud adapter's primitives for one VM name on one offer, idempotently, without waiting for boot or
    logging in (M(gpuprov.cloud.instance_info) tells when it runs; M(gpuprov.cloud.vm) does the whole launch).
  - O(state=present) picks the offer named by O(region), O(zone) and O(instance_type) among those the cloud plans
    (or the first one), prepares it (side resources such as a security group, made only when missing) and creates
    an instance unless one of the VM name is live; a second run changes nothing. Before it creates, and again with
    the new id, it records the location in the journal under the key C(instance:<cloud>:<name>), so the sweep
    (M(gpuprov.cloud.orphans)) counts the instance as owned; it fails, creating nothing, while a sweep is removing
    resources of the name.
  - O(state=absent) runs the teardown machine of M(gpuprov.cloud.vm) at the location, journalled under that key
    (never a VM's); it journals the instances it finds, deletes them, waits for them to be gone (O(wait)) and
    removes the side resources. An interrupted or C(Leaked) teardown is resumed by the next run; another task on
    the same name and cloud fails meanwhile.
  - Every resource carries the VM identity (C(gpuprov-vm-name), or the name C(gpuprov-<name>)) and the journal's
    id (C(gpuprov-journal-id)); another journal's instance is never adopted nor deleted, only warned about, and
    one without a journal id counts as this journal's.
requirements:
  - cryptography (for the SSH keys; ansible-core brings it)
  - psycopg (for a C(postgresql://) O(journal), C(requirements/postgresql.txt))
author:
  - gpuprov.cloud contributors (@gpuprov)
extends_documentation_fragment:
  - gpuprov.cloud.cloud_options
  - gpuprov.cloud.provider
  - gpuprov.cloud.provider.modules
  - gpuprov.cloud.provider.request
  - gpuprov.cloud.provider.tags
  - gpuprov.cloud.group
  - gpuprov.cloud.group.vm_settings_ignored
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.flow
  - gpuprov.cloud.controller.in_process_on_controller
attributes:
  check_mode:
    support: full
    details:
      - Plans and observes only (nothing prepared, created, deleted or written, no SSH key made) and predicts
        C(changed) from whether a live instance of the VM name exists.
  diff_mode:
    support: full
    details:
      - Cloud, region, zone, instance type, GPU and count, instance id, status and SSH endpoint, before and after;
        in check mode, what the offer would make (no id yet).
  platform:
    platforms: posix
options:
  name:
    description:
      - The VM name, a DNS label (1-63 of V(a-z), V(0-9), V(-)), the identity every resource carries.
    type: str
    required: true
  state:
    description:
      - V(present) makes sure one live instance exists; V(absent) that none does, nor its side resources.
    type: str
    choices: [present, absent]
    default: present
  region:
    description:
      - The offer's region (with O(state=absent), the location to clean up); unset takes the first offer planned.
    type: str
  zone:
    description:
      - The offer's zone, where the cloud has zones (on a cloud with regional offers, it pins the instance).
    type: str
  instance_type:
    description:
      - The offer's instance type, one the cloud plans for O(gpu) and O(gpu_count).
    type: str
  ssh_public_key:
    description:
      - The OpenSSH public key line to authorise on the instance; unset means that of O(ssh_key).
    type: str
  ssh_key:
    description:
      - Private key whose public half is authorised; unset means C(<state dir>/id_ed25519), made on first use.
    type: path
  ssh_user:
    description: Login user where the cloud does not dictate one (the image default otherwise).
    type: str
  journal:
    description:
      - The journal (a path, C(~) and C($VAR) expanded, or a DSN taken as written), whose id the instances carry
        and where the location and the teardown are journalled. Unset means E(GPUPROV_JOURNAL), else C(<state
        dir>/journal.sqlite).
    type: str
  journal_password:
    description: Password of a PostgreSQL journal, as M(gpuprov.cloud.vm) takes it. Never logged or shown.
    type: str
  allowed_cidrs:
    description:
      - Source addresses allowed in; empty means the cloud's default (its C(allowed_cidrs) option, or the
        controller's address on V(aws)), never V(0.0.0.0/0) unless given.
    type: list
    elements: str
    default: []
  open_ports:
    description: TCP ports to open to O(allowed_cidrs) besides V(22).
    type: list
    elements: int
    default: []
  wait:
    description:
      - With O(state=absent), wait until the instances are gone, then remove the side resources. V(false) requests
        the deletion and returns (RV(state=DeletionRequested)); a later run cleans up, with O(wait=true) waiting
        rather than deleting again.
    type: bool
    default: true
  wait_timeout:
    description:
      - Seconds the teardown waits for the instances to be gone; after it, the task fails with RV(state=Leaked)
        (RV(leaked) names them), and the next O(state=absent) run retries.
    type: int
    default: 600
  lease_ttl:
    description:
      - The journal lease on the name and cloud, as M(gpuprov.cloud.vm) takes it. O(state=present) holds it
        unrenewed while it prepares and creates; keep it above the time those take, or a teardown of the name may
        start before the create returns.
    type: int
notes:
  - A failed C(create) leaves what C(prepare) made; the next run reuses it, and O(state=absent) removes it.
  - Its instances are not VM records of M(gpuprov.cloud.vm) (its inventory and status), only of its journal; a VM
    name used with both, on one journal, is one identity, so each sees (and may remove) the other's instances.
seealso:
  - module: gpuprov.cloud.offers
  - module: gpuprov.cloud.instance_info
  - module: gpuprov.cloud.vm
"""

EXAMPLES = r"""
- name: One instance of train1 on the first L4 offer GCP plans in us-central1
  gpuprov.cloud.instance:
    name: train1
    cloud: gcp
    gpu: L4
    regions: [us-central1]
    cloud_options:
      gcp:
        project: my-project
        allowed_cidrs: [203.0.113.7/32]
  delegate_to: localhost
  register: train1

- name: Wait until it runs with an SSH endpoint
  gpuprov.cloud.instance_info:
    name: train1
    cloud: gcp
    region: "{{ train1.location.region }}"
    zone: "{{ train1.location.zone }}"
    cloud_options:
      gcp:
        project: my-project
  delegate_to: localhost
  register: info
  until: info.running
  retries: 60
  delay: 10

- name: A given AWS type in a given region
  gpuprov.cloud.instance:
    name: infer1
    cloud: aws
    gpu: A10G
    region: us-east-1
    instance_type: g5.xlarge
  delegate_to: localhost

- name: Remove it and its security group
  gpuprov.cloud.instance:
    name: infer1
    cloud: aws
    region: us-east-1
    state: absent
  delegate_to: localhost
"""

RETURN = r"""
instance:
  description:
    - The live instance of the VM name, created or found (C(docs/return-values.md#the-instance-record)); null in
      check mode without one.
  returned: O(state=present)
  type: dict
instances:
  description: Every instance of the VM name observed at the location (C(docs/return-values.md#the-instance-record)).
  returned: success
  type: list
  elements: dict
offer:
  description: The offer used, as RV(gpuprov.cloud.offers#module:offers) returns them.
  returned: O(state=present)
  type: dict
prepared:
  description:
    - What C(prepare) returned (image, network, security group or firewall rule...); null in check mode and when
      the instance already existed.
  returned: O(state=present)
  type: dict
location:
  description: The location acted on (C(cloud), C(region), C(zone)).
  returned: success
  type: dict
deleted:
  description: Instance ids whose deletion was (in check mode, would be) requested.
  returned: O(state=absent)
  type: list
  elements: str
cleaned_up:
  description: Whether the side resources were removed.
  returned: O(state=absent)
  type: bool
state:
  description:
    - Where the teardown ended, C(Done) (all gone), C(DeletionRequested) (O(wait=false), the instances still
      leaving) or C(Leaked) (still there after O(wait_timeout), or the cloud refused; the task failed).
  returned: O(state=absent), not in check mode
  type: str
  sample: Done
journal:
  description: Path of the journal the teardown ran on.
  returned: O(state=absent), not in check mode
  type: str
leaked:
  description: Locations (C(location)) and instance ids (C(instance_ids)) that may still exist, and bill.
  returned: when the teardown ended C(Leaked)
  type: list
  elements: dict
error:
  description: The classified error (C(kind), C(msg), C(block), C(primitive), C(location)) when the task failed on one.
  returned: failure
  type: dict
"""

from ansible_collections.gpuprov.cloud.plugins.module_utils.journal_module import JournalModule
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.primitive_tasks import INSTANCE, finish


def main():
    module = JournalModule(argument_spec=INSTANCE.argument_spec, supports_check_mode=True)
    finish(module, INSTANCE)


if __name__ == "__main__":
    main()
