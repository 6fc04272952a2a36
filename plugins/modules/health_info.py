#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: health_info
short_description: Check the journal against clouds, SSH, k3s
version_added: 0.1.0
description:
  - For every VM in the journal written by M(gpuprov.cloud.vm) (or only O(name)), reads the journal's state and
    compares it with the cloud's own view of the VM (the adapter's C(diagnose), its instances with the vendor's
    state, reasons and findings), then logs in over SSH with the collection's key and the VM's pinned host key,
    and asks k3s C(/readyz) through the access path the user has (directly, or through an SSH tunnel as
    C(gpuprov.cloud.tunnel) makes it) with the VM's recorded kubeconfig.
  - The cloud is reached as the VM's own runs reach it, with the options journalled for the VM, O(cloud_options)
    bringing the credentials.
  - "Disagreements (RV(disagreements)), each with the fix: V(instance_gone) (the journal says Ready, the instance is
    gone), V(instance_not_running) (Ready, but the instance is stopped or failed), V(expired) (Ready, but the
    instance stopped or went by its limits, C(docs/limits.md): no leak; C(gpuprov.cloud.reap) removes the rest, and
    a VM within the hour of its deadline or past it is a warning), V(untracked_instance) (an
    instance of this journal runs while the journal says Done, Aborted, or has no row), V(extra_instance) (a second
    instance beside the VM's), V(other_journal) (an instance of this name made by another controller),
    V(leaked) (the journal says Leaked), V(interrupted) (a run stopped mid-way and nobody works on it),
    V(endpoint_changed) (the cloud's SSH address is not the journalled one), V(ssh_failed) (Ready, but the SSH
    login fails), V(host_key_mismatch) and V(k3s_not_ready) (the journal says k3s Ready, C(/readyz) does not)."
  - A VM a live run is working on is not judged (what the run has not committed yet is no disagreement).
  - What cannot be checked (a cloud that does not answer, missing credentials, no pinned host key, no
    kubeconfig) is listed in RV(unknown), never guessed.
  - Runs on the controller through its action plugin, read-only; never reports a change. The SSH login is
    checked against the host key the journal pinned (a VM pinned nowhere is in RV(unknown)), so a new controller
    checks every VM; outside check mode the ssh config and C(known_hosts) are first generated from the journal, as
    M(gpuprov.cloud.vm) does. A disagreement does not fail the task; RV(healthy) says whether there is one.
requirements:
  - paramiko (for the SSH login check, C(requirements/base.txt), in every C(requirements/<cloud>.txt))
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
    details: >-
      Check mode runs the same checks, with the host keys the journal pinned, and writes nothing, not even the
      known_hosts and ssh config files generated from the journal.
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
      - Only this VM. A name the journal has no row for is looked for on O(clouds).
    type: str
  clouds:
    description:
      - Where to look for a VM whose journal names no location (O(name) without a row, or a run that ended before
        reaching a cloud); each cloud's locations as it plans them for a CPU-only request. Unset means O(cloud),
        and with neither, such a VM is not looked for (and listed in RV(unknown)).
      - VMs whose journal names their locations are looked for there only.
    type: list
    elements: str
  cloud:
    description: One cloud to look on, when O(clouds) is unset.
    type: str
  ssh_key:
    description:
      - The private key to log in with. When unset, E(GPUPROV_SSH_KEY_FILE), else the task's
        C(ansible_ssh_private_key_file) (an AWX Machine credential), else the collection's own key in the state
        directory, as for M(gpuprov.cloud.vm).
      - A VM the journal says was made for another key is not logged in to; RV(unknown) says which key it needs.
    type: path
  ssh_timeout:
    description:
      - Seconds for each step of the SSH login check (connect, handshake, login, command); unset means 10.
    type: int
  k3s_timeout:
    description: Seconds for the k3s check (opening the SSH tunnel, the C(/readyz) request).
    type: int
    default: 10
  k3s_api_port:
    description:
      - The port the k3s API listens on inside the VM (the C(gpuprov.cloud.k3s) role's C(k3s_api_port)), which the
        SSH tunnel forwards to in V(SshTunnel) access.
    type: int
    default: 6443
notes:
  - The SSH check needs C(paramiko) on the controller; the tunnelled k3s check needs the C(ssh) client.
"""

EXAMPLES = r"""
- name: Compare the journal with the clouds, SSH and k3s
  gpuprov.cloud.health_info:
    cloud_options: "{{ gpuprov_cloud_options | default({}) }}"
  register: gpuprov_health

- name: Show the table
  ansible.builtin.debug:
    msg: "{{ gpuprov_health.table }}"

- name: Alert on a disagreement
  ansible.builtin.fail:
    msg: "{{ gpuprov_health.disagreements | map(attribute='msg') | list }}"
  when: not gpuprov_health.healthy

- name: Is an instance named ghost running that the journal does not know of?
  gpuprov.cloud.health_info:
    name: ghost
    clouds: [local, docker]
"""

RETURN = r"""
journal:
  description: The journal read.
  returned: always
  type: str
journal_id:
  description: Its id, the one this journal's resources carry; null when there is no journal yet.
  returned: always
  type: str
healthy:
  description: True when there is no disagreement (what could not be checked is in RV(unknown)).
  returned: always
  type: bool
disagreements:
  description: Every disagreement, VM by VM.
  returned: always
  type: list
  elements: dict
  contains:
    vm: {description: The VM name., type: str, returned: always}
    kind:
      description: What disagrees.
      type: str
      returned: always
      sample: instance_gone
    msg:
      description: What the journal says and what is there.
      type: str
      returned: always
      sample: the journal says Ready with instance local-0123456789ab on local/local, but the instance is gone
    fix:
      description: What resolves it.
      type: str
      returned: always
      sample: >-
        ansible-playbook gpuprov.cloud.provision -e vm=train1 makes a new one;
        ansible-playbook gpuprov.cloud.down -e vm=train1 forgets it
unknown:
  description: "What could not be checked, as C(<vm>: <what>: <why>)."
  returned: always
  type: list
  elements: str
vms:
  description: One entry per VM.
  returned: always
  type: list
  elements: dict
  contains:
    name: {description: The VM name., type: str, returned: always}
    verdict: {description: "V(ok), V(disagrees) or V(unknown) (nothing disagrees, but not everything was checked).",
              type: str, returned: always}
    summary: {description: The VM's line of progress output., type: str, returned: always}
    journal:
      description: >-
        The journal's view: C(machine) (launch or teardown, null without a row), C(state) (its label, V(no row)),
        C(terminal), C(reason), C(instance_id), C(location) and C(ssh) of the VM on record, C(in_progress) and
        C(holder) (a live run working on it).
      type: dict
      returned: always
    cloud:
      description: >-
        The cloud's view: C(looked_at) (locations), C(instances) (each as the adapter observes it, with the
        location looked at and a C(vendor) dict of the cloud's own fields: states, reasons, times, status checks,
        spot or scheduling data), C(findings) (the cloud's own notes, prefixed with the location), C(errors)
        (classified errors per location) and C(summary).
      type: dict
      returned: always
    ssh:
      description: "C(status): V(ok), V(failed), V(unknown) or V(-) (not checked), and C(detail)."
      type: dict
      returned: always
    k3s:
      description: >-
        C(status): V(ok) (C(/readyz) answers ok), V(failed), V(unknown), the journalled k3s stage when it is not
        Ready, or V(-) (k3s not set up); C(detail), C(access) and C(kubeconfig).
      type: dict
      returned: always
    disagreements: {description: This VM's disagreements (as RV(disagreements) without C(vm))., type: list,
                    elements: dict, returned: always}
    unknown: {description: What could not be checked for this VM., type: list, elements: str, returned: always}
table:
  description: A printable table (name, journal state, cloud view, SSH, k3s, verdict), then each disagreement with
    its fix, what could not be checked, the cloud's findings and the SSH and k3s details.
  returned: always
  type: list
  elements: str
msg:
  description: How many disagreements, naming the VMs and kinds.
  returned: success
  type: str
"""

from ansible_collections.gpuprov.cloud.plugins.module_utils.controller_only import refuse_outside_controller
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.health_args import HEALTH_ARGUMENT_SPEC


def main():
    refuse_outside_controller("health_info", HEALTH_ARGUMENT_SPEC)


if __name__ == "__main__":
    main()
