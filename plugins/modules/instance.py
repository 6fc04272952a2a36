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
  - Calls the cloud adapter's primitives for one VM name on one offer, idempotently.
  - O(state=present) picks the offer named by O(region), O(zone) and O(instance_type) among those the cloud plans
    for the request (or the first one it plans), prepares it (side resources such as a security group or a
    firewall rule, made only when missing), observes the VM name there and creates an instance only when none is
    live. A second run reports no change. Before it creates, and again with the new instance's id, it records
    the location in the journal under the key C(instance:<cloud>:<name>), so M(gpuprov.cloud.orphans) (the sweep)
    and C(status -e orphans=true) count the instance as owned, never as an orphan; while an orphan sweep is
    removing resources of the same name, the task fails naming the sweep and creates nothing.
  - O(state=absent) runs the teardown machine of M(gpuprov.cloud.vm) at the location, on the journal, under the
    key C(instance:<cloud>:<name>), which is never a VM's key. It journals the instances it finds before deleting
    them, waits for them to be gone (see O(wait)) and removes the side resources. A run that was interrupted (Ctrl-C, a
    killed job) is resumed by the next one, and a teardown that ended C(Leaked) is retried by the next one, at
    its locations as well as the task's. While one runs, another task on the same name and cloud fails instead
    of interleaving with it.
  - Every resource carries the VM identity (tag or label C(gpuprov-vm-name), or the name C(gpuprov-<name>)) and
    the id of the journal (tag or label C(gpuprov-journal-id)). O(state=present) never adopts, and O(state=absent)
    never deletes, an instance that carries another journal's id (another controller's); absent reports it in a
    warning and leaves it alone. Instances made before journal ids existed carry none and count as this journal's.
  - This module does not wait for a new instance to boot and never logs in; M(gpuprov.cloud.instance_info) tells
    when it is running, and M(gpuprov.cloud.vm) does the whole launch with failover, SSH check and journal.
requirements:
  - cryptography (for the collection's SSH key and the V(local) cloud's host keys; ansible-core brings it)
  - psycopg (for a C(postgresql://) O(journal); C(requirements/postgresql.txt) of the collection)
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
      - Plans and observes only (no prepare, create, delete or cleanup, no SSH key generated, no journal created
        or written) and predicts C(changed) from whether a live instance of the VM name exists.
  diff_mode:
    support: full
    details:
      - The instance record before and after (cloud, region, zone, instance type, GPU, GPU count, instance id,
        status and SSH endpoint); in check mode, the record the offer would make, its id not known yet.
  platform:
    platforms: posix
options:
  name:
    description:
      - The VM name, a DNS label (1-63 characters of V(a-z), V(0-9) and V(-)); the identity every resource carries.
    type: str
    required: true
  state:
    description:
      - V(present) makes sure one live instance exists; V(absent) makes sure none does and the side resources are gone.
    type: str
    choices: [present, absent]
    default: present
  region:
    description:
      - The offer's region (and, with O(state=absent), the location to clean up). Unset takes the first offer the
        cloud plans for the request.
    type: str
  zone:
    description:
      - The offer's zone where the cloud has zones. For clouds whose offers are regional, pins the instance there.
    type: str
  instance_type:
    description:
      - The offer's instance (machine) type; it must be one the cloud plans for O(gpu) and O(gpu_count).
    type: str
  ssh_public_key:
    description:
      - The OpenSSH public key line to authorise on the instance. Unset uses the public half of O(ssh_key).
    type: str
  ssh_key:
    description:
      - Private key whose public half is authorised on the instance. Unset uses the collection's own ed25519 key,
        C(<state dir>/id_ed25519), generated (0600) on first use.
    type: path
  ssh_user:
    description: Login user where the cloud does not dictate one (the image default otherwise).
    type: str
  journal:
    description:
      - Path of the SQLite journal, the one M(gpuprov.cloud.vm) uses by default. Its id is the identity the
        instances carry besides the VM name, and O(state=absent) runs its teardown on it. Defaults to
        E(GPUPROV_JOURNAL), else C(<state dir>/journal.sqlite).
    type: path
  allowed_cidrs:
    description:
      - Source addresses allowed to reach the instance. Empty means the cloud's own default (its
        C(allowed_cidrs) option, or the controller's address on V(aws)); never V(0.0.0.0/0) unless given.
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
      - With O(state=absent), wait until the instances are gone, then remove the side resources.
      - V(false) requests the deletion and returns (RV(state=DeletionRequested)), cleaning up only if the instances
        are already gone. A later run cleans up; with O(wait=true) it resumes the wait instead of deleting again.
    type: bool
    default: true
  wait_timeout:
    description:
      - Seconds the teardown may wait for the instances to be gone. When they are still there after it, the task
        fails with RV(state=Leaked) and RV(leaked) naming them; the next O(state=absent) run retries.
    type: int
    default: 600
  lease_ttl:
    description:
      - Seconds the journal lease on this name and cloud lasts, renewed every third of it while O(state=absent)
        tears down; another instance task there is refused meanwhile. From 10 to 3600. Unset means
        E(GPUPROV_LEASE_TTL), else 120. See M(gpuprov.cloud.vm) for the trade-off.
      - O(state=present) holds it, unrenewed, while it prepares and creates; keep it above the time the cloud takes
        for those, or a teardown of the same name may start before the create returns.
    type: int
notes:
  - A failed C(create) leaves what C(prepare) made (for example the security group); the next run reuses it, and
    O(state=absent) removes it.
  - Instances made by this module are not written to the VM records of M(gpuprov.cloud.vm) (its inventory and
    status), only identified with its journal. A VM name used with both, on the same journal, is one identity, so
    each sees (and may remove) the other's instances.
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
  description: The live instance of the VM name (the one created, or the one found); null in check mode when none exists.
  returned: O(state=present)
  type: dict
  contains:
    instance_id: {description: The cloud's instance id., type: str, returned: always, sample: i-0abc}
    status:
      description: Normalised status (Pending, Running, Stopping, Stopped, Terminating, Failed).
      type: str
      returned: always
      sample: Running
    reason: {description: "Why, where the cloud says (a failed or stopped instance).", type: str, returned: always}
    usable: {description: Running with an SSH endpoint., type: bool, returned: always}
    cloud: {description: Cloud., type: str, returned: always, sample: aws}
    region: {description: Region., type: str, returned: always, sample: us-east-1}
    zone: {description: "Zone, where known.", type: str, returned: always, sample: us-east-1a}
    ssh_host: {description: SSH host once there is one., type: str, returned: always, sample: 203.0.113.7}
    ssh_port: {description: SSH port., type: int, returned: always, sample: 22}
    ssh_user: {description: SSH user., type: str, returned: always, sample: ubuntu}
instances:
  description: Every instance of the VM name observed at the location (same fields as RV(instance)).
  returned: success
  type: list
  elements: dict
offer:
  description: The offer used (as RV(gpuprov.cloud.offers#module:offers) returns them).
  returned: O(state=present)
  type: dict
prepared:
  description:
    - What C(prepare) returned (image, network, security group or firewall rule, ...).
    - Null in check mode, and when the instance already existed (nothing is prepared for it).
  returned: O(state=present)
  type: dict
location:
  description: The location acted on (C(cloud), C(region), C(zone)).
  returned: success
  type: dict
deleted:
  description: Instance ids whose deletion was requested (or would be, in check mode).
  returned: O(state=absent)
  type: list
  elements: str
cleaned_up:
  description: Whether the side resources were removed.
  returned: O(state=absent)
  type: bool
state:
  description:
    - Where the teardown ended. C(Done) (gone, side resources removed), C(DeletionRequested) (O(wait=false) and
      the instances are still leaving) or C(Leaked) (still there after O(wait_timeout), or the cloud refused; the
      task failed).
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
from ansible_collections.gpuprov.cloud.plugins.module_utils.primitive_tasks import INSTANCE, finish


def main():
    module = JournalModule(argument_spec=INSTANCE.argument_spec, supports_check_mode=True)
    finish(module, INSTANCE)


if __name__ == "__main__":
    main()
