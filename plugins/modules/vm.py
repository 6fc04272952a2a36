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
  - Runs the launch machine (O(state=present)) or the teardown machine (O(state=absent)) for one VM name on
    the controller. Every transition is written to a SQLite journal before the next side effect, so a crash,
    Ctrl-C or killed AWX job loses nothing and the next run resumes or reconciles.
  - The launch reconciles first (reuses a running VM of this name, or compensates a leaked or stale one),
    plans offers across O(clouds), then for each offer prepares, creates (adopting an instance that already
    carries the VM identity instead of creating a second one), waits for boot and verifies a real SSH login.
    Capacity, quota and failure errors compensate (tear down what the attempt made) and fail over to the next
    offer; quota blocks the whole region.
  - On success the VM's host key is pinned, journalled with the VM, and written to the collection's own
    C(known_hosts), and a C(Host <name>) block is written to C(<state dir>/ssh_config); add
    C(Include <state dir>/ssh_config) to C(~/.ssh/config) once to use C(ssh <name>). Both files are generated
    from the journal before each use, so a controller with an empty state directory (a new AWX job) reaches,
    checks and tears down every VM of the journal.
  - The SSH key is chosen as O(ssh_key) says; a run holding another key than the VM was made with fails, naming
    both fingerprints, before it touches the VM. O(state=absent) needs no key.
  - Prints live progress lines (state, offer n of m, why an offer was skipped, elapsed), and a C(still <state>)
    line at least every 15 seconds while a wait repeats the same status.
  - This module runs through its action plugin on the controller; it never connects to the target host.
requirements:
  - paramiko (for the SSH check of every VM it launches; C(requirements/base.txt) and every
    C(requirements/<cloud>.txt) of the collection)
  - cryptography (for the collection's SSH key and the V(local) cloud's host keys; ansible-core brings it)
  - psycopg (for a C(postgresql://) O(journal); C(requirements/postgresql.txt) of the collection)
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
  - ansible.builtin.action_common_attributes.conn
attributes:
  become:
    support: none
  check_mode:
    support: full
    details:
      - Reads the journal, observes the journalled VM and plans the search, all read-only, and says what it would
        do; RV(plan) lists the offers it would try, in order. A VM that is up and matches the request is returned
        as a real run returns it (RV(vm), RV(connection)), so the rest of a play can use it.
      - It creates nothing on the controller either, neither a journal (an absent one reads as empty) nor an SSH key.
  diff_mode:
    support: full
    details:
      - The VM record before and after (cloud, region, zone, instance type, GPU, GPU count, instance id, status
        and SSH endpoint); in check mode, the record the first offer would make.
  connection:
    support: none
  delegation:
    support: none
options:
  name:
    description:
      - The VM name, a DNS label (1-63 characters of V(a-z), V(0-9) and V(-)). It is the journal key and the
        identity (tag C(gpuprov-vm-name) or name C(gpuprov-<name>)) every cloud resource of the VM carries.
    type: str
    required: true
  state:
    description:
      - V(present) provisions (or reuses) the VM; V(absent) tears down everything the journal knows of it.
      - V(absent) while another run is still provisioning the same name (for example a search with
        O(retry_until_up)) asks that run, through the journal, to stop at its next step, waits until it has
        stopped and compensated, then tears down whatever remains. It never reports success while a VM of
        this name can still appear.
    type: str
    choices: [present, absent]
    default: present
  retry_until_up:
    description:
      - When every offer is exhausted, plan again after 30 seconds instead of failing, until the VM is up or
        the task is interrupted.
    type: bool
    default: false
  recreate:
    description:
      - What to do when the journal already has a VM of this name that does not satisfy the request (another
        O(gpu) or O(gpu_count), a cloud not in O(clouds), a region not in O(regions), another O(spot)).
      - V(false) fails, naming each differing field, and leaves the VM as it is.
      - V(true) tears the old VM down first, then provisions one that matches. A VM that matches is always
        kept, so leaving V(true) in a playbook does not replace the VM on every run.
    type: bool
    default: false
  k8s:
    description:
      - Whether the VM is meant to become a k3s cluster (the C(gpuprov.cloud.k3s) role does that after this task).
      - Unset means on where the VM's cloud can host k3s and skipped with a note elsewhere (RV(k8s.note)).
      - V(true) searches only clouds that can host k3s, and fails before anything is created when none of
        O(clouds) can (the V(local) cloud cannot; V(docker) can with its C(privileged) option).
      - V(false) never installs k3s.
    type: bool
  purge_tags:
    description:
      - With O(tags) set and the VM already there, whether its tags that are not in O(tags) are removed, as
        amazon.aws does. gpuprov's own tags (C(gpuprov-*), C(Name) on AWS) and the cloud's reserved ones are never
        removed. V(false) only adds and updates.
      - With O(tags) unset, the tags of an existing VM are left as they are.
      - Whether a cloud can change the tags of an existing VM is on its page (C(docs/clouds/<cloud>.md)); where it
        cannot, a warning says so and the VM keeps its tags (O(recreate) does not replace a VM for its tags).
    type: bool
    default: true
  boot_script:
    description:
      - A script (with environment) run while the VM boots, on clouds whose capabilities include a boot script;
        each adapter renders it natively (cloud-init, startup script, container start). The k3s role passes its
        installer here so k3s installs during boot. Never logged.
      - Unless O(k8s=false), the script is taken to be the k3s installer and is given only to clouds that can
        host k3s.
    type: dict
    suboptions:
      script:
        description: The script text, normally starting with a C(#!) line.
        type: str
        required: true
      env:
        description: Environment variables exported before the script runs.
        type: dict
        default: {}
notes:
  - Runs on the controller only. The VM's connection variables are returned in RV(connection) so a play can
    C(ansible.builtin.set_fact) them and reach the VM with its pinned host key.
  - A teardown that cannot finish ends in state C(Leaked), listed by the status playbook; the next run of
    C(present) or C(absent) for the name starts by resolving it.
  - Everything needed to reach a VM lives in the journal (endpoint, pinned host key, key fingerprint); the
    state directory only caches what is generated from it, except the V(local) cloud's instance records (its
    page, C(docs/clouds/local.md), says what that means for controllers sharing a journal).
seealso:
  - name: Provision playbook
    description: C(ansible-playbook gpuprov.cloud.provision -e vm=... -e gpu=...)
    link: https://github.com/gpuprov/cloud
"""

EXAMPLES = r"""
- name: Provision a VM with an H100 on the first cloud that has one
  gpuprov.cloud.vm:
    name: train1
    gpu: H100
    clouds: [aws, gcp]
  register: train1

- name: Reach it with its pinned host key
  ansible.builtin.set_fact:
    ansible_host: "{{ train1.connection.ansible_host }}"
    ansible_port: "{{ train1.connection.ansible_port }}"
    ansible_user: "{{ train1.connection.ansible_user }}"
    ansible_ssh_private_key_file: "{{ train1.connection.ansible_ssh_private_key_file }}"
    ansible_ssh_common_args: "{{ train1.connection.ansible_ssh_common_args }}"

- name: Tagged for cost allocation on every resource (identity tags are added and always win)
  gpuprov.cloud.vm:
    name: train2
    gpu: A100
    clouds: [aws, gcp]
    tags:
      team: ml
      cost-center: 42

- name: A loopback VM on the local cloud (no credentials needed)
  gpuprov.cloud.vm:
    name: demo

- name: Tear it down
  gpuprov.cloud.vm:
    name: train1
    state: absent
"""

RETURN = r"""
state:
  description:
    - The terminal state this run reached (C(Ready), C(Aborted), C(Exhausted), C(Leaked), C(Done)...).
    - In check mode, the state the journal holds for the VM (C(absent) when it has none).
  returned: always
  type: str
  sample: Ready
vm:
  description: The VM, when O(state=present) succeeded.
  returned: success and O(state=present)
  type: dict
  contains:
    name: {description: VM name., type: str, returned: always, sample: train1}
    cloud: {description: Cloud it runs on., type: str, returned: always, sample: aws}
    region: {description: Region., type: str, returned: always, sample: us-east-1}
    zone: {description: "The zone it runs in, where the cloud has zones; null elsewhere.", type: str, returned: always,
           sample: us-east-1a}
    instance_id: {description: The cloud's instance id., type: str, returned: always, sample: i-0abc}
    instance_type: {description: Instance type., type: str, returned: always, sample: p5.48xlarge}
    gpu: {description: "GPU model; null for a VM without a GPU.", type: str, returned: always, sample: H100}
    gpu_count: {description: "GPU count; 0 for a VM without a GPU.", type: int, returned: always, sample: 8}
    ssh_host: {description: SSH host., type: str, returned: always, sample: 203.0.113.7}
    ssh_port: {description: SSH port., type: int, returned: always, sample: 22}
    ssh_user: {description: SSH user., type: str, returned: always, sample: ubuntu}
    host_key_alias: {description: Name of the pinned host key in the collection's known_hosts., type: str, returned: always}
    host_key_fingerprint:
      description: "SHA256 fingerprint of the pinned host key, as C(ssh-keygen -l) prints it, without the key type."
      type: str
      returned: always
      sample: "SHA256:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU"
    host_key_type: {description: Type of the pinned host key., type: str, returned: always, sample: ssh-ed25519}
    status: {description: VM status., type: str, returned: always, sample: running}
    reused: {description: Whether an already running VM was reused., type: bool, returned: always}
    price_per_hour: {description: "The offer's hourly price in US dollars, where the cloud reports one.", type: float,
                     returned: always, sample: 2.49}
connection:
  description: Connection variables for the VM (host, port, user, key, pinned host key options).
  returned: success and O(state=present)
  type: dict
  sample:
    ansible_host: 127.0.0.1
    ansible_port: 40211
    ansible_user: root
    ansible_ssh_private_key_file: /home/me/.local/state/gpuprov/id_ed25519
    ansible_ssh_common_args: -o UserKnownHostsFile=... -o HostKeyAlias=gpuprov-demo-0a1b2c3d4e5f -o StrictHostKeyChecking=yes
k8s:
  description: What the k3s stage should do on this VM, from its cloud's capabilities.
  returned: success and O(state=present)
  type: dict
  contains:
    enabled: {description: Whether k3s is to be installed., type: bool, returned: always}
    access: {description: "How the API is reached: C(Direct) or C(SshTunnel).", type: str, returned: always}
    boot_script: {description: "Whether O(boot_script) was delivered at boot by this cloud.", type: bool, returned: always}
    note: {description: "Why k3s is skipped, when it is.", type: str, returned: always}
tags:
  description:
    - The user tags this run changed on a VM it kept (O(tags) set, on a cloud that can change them); in check mode,
      those it would change.
  returned: O(tags) set and an existing VM was kept
  type: dict
  contains:
    set: {description: The tags set or given a new value., type: dict, returned: always, sample: {team: ml}}
    removed: {description: "The tags removed (O(purge_tags)).", type: list, elements: str, returned: always}
smoke:
  description:
    - The smoke command this run ran on the VM in the SSH session that verified its login (pinned host key, the
      controller key), and what it printed. Its presence says the login has just passed, so a play needs no wait
      of its own before using the VM.
  returned: success, O(state=present), not in check mode
  type: dict
  contains:
    command: {description: The command run., type: str, returned: always, sample: uname -a}
    stdout: {description: "What it printed, stripped.", type: str, returned: always,
             sample: "Linux gpu1 6.8.0-1015-aws #16-Ubuntu SMP x86_64 GNU/Linux"}
ssh_config:
  description: The ssh config file holding a C(Host <name>) block for the VM.
  returned: success and O(state=present)
  type: str
search:
  description:
    - Where this run's search ended, for people; null when the VM was reused without a search.
  returned: O(state=present)
  type: dict
  contains:
    offer: {description: "The place of the offer taken (or last tried) in the search, from 1.", type: int, sample: 2}
    of: {description: The number of offers the search could try., type: int, sample: 5}
    offer_id: {description: That offer's id., type: str, sample: "runpod:US-TX-3:NVIDIA H100 80GB HBM3"}
    price_per_hour: {description: "Its hourly price in US dollars, where known.", type: float}
    skipped:
      description: "Each offer or cloud skipped before it, as C(<offer> (<outcome>): <why>)."
      type: list
      elements: str
plan:
  description:
    - In check mode, the offers the search would try, in order (empty when the VM is kept).
    - Each with C(rank) (its place in the search, from 1), C(offer_id), C(cloud), C(region), C(zone),
      C(instance_type), C(gpu), C(gpu_count) and C(price_per_hour), as M(gpuprov.cloud.offers) returns them in
      its RV(gpuprov.cloud.offers#module:offers).
  returned: check mode and O(state=present)
  type: list
  elements: dict
history:
  description:
    - The offers this run's search tried, in order, each with its outcome and classified error; the offer the VM
      came up on is the last one, with outcome C(Ready). Empty when a running VM was reused without a search.
  returned: O(state=present)
  type: list
  elements: dict
  contains:
    offer: {description: "The offer's id (or the cloud's name, when the whole cloud was skipped).", type: str,
            sample: "aws:us-east-1:g4dn.xlarge"}
    outcome: {description: "C(Ready), C(skipped), C(unavailable) or the error's kind (C(Capacity), C(Quota)...).",
              type: str, sample: Ready}
    error: {description: "The classified error (C(kind), C(msg), C(block)); null for C(Ready).", type: dict}
events:
  description: The journal events of this run (transitions, polls, retries) with notes and timestamps.
  returned: O(state=present)
  type: list
  elements: dict
journal:
  description: Path of the journal used.
  returned: always
  type: str
leaked:
  description: Locations and instance ids that may still exist (and bill) after a failed teardown.
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
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm.args import VM_ARGUMENT_SPEC


def main():
    refuse_outside_controller("vm", VM_ARGUMENT_SPEC)


if __name__ == "__main__":
    main()
