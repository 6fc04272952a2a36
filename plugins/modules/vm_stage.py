#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: vm_stage
short_description: Record a VM's k3s stage (internal, k3s role)
version_added: 0.1.0
description:
  - Writes O(stage) (prefixed C(k3s:)) to the C(stage) column of the VM's row in the journal written by
    M(gpuprov.cloud.vm), keeps the row's C(status) as the VM machine left it, merges O(detail) and the note into
    the row's C(detail.k3s), and adds a C(stage) event to the VM's history, so the status playbook and the
    journal inventory show where the k3s setup of the VM is and how long each stage took.
  - The write is made under the VM's journal lease; when another run holds it (a C(down) of the same VM), the
    task fails instead of overtaking it.
  - Runs on the controller through its action plugin. Never reports a change (no VM is changed).
  - "A member of the module_defaults group C(group/gpuprov.cloud.gpuprov): the group's O(journal) and
    O(journal_password) defaults reach the stages the C(gpuprov.cloud.k3s) role records."
requirements:
  - python >= 3.11
  - psycopg (for a C(postgresql://) O(journal), C(requirements/postgresql.txt))
author:
  - gpuprov.cloud contributors (@gpuprov)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.flow
  - gpuprov.cloud.controller
  - gpuprov.cloud.group
  - gpuprov.cloud.group.cloud_ignored
  - gpuprov.cloud.group.vm_settings_ignored
attributes:
  check_mode:
    support: full
    details: Writes nothing in check mode.
options:
  name:
    description: The VM name (the journal key).
    type: str
    required: true
  stage:
    description:
      - One of V(CheckingBootInstall), V(Installing), V(AwaitingApi), V(FetchingKubeconfig), V(Validating),
        V(Ready), V(Failed), V(Skipped) (with or without the C(k3s:) prefix).
    type: str
    required: true
  note:
    description: Why, in words (shown by the status playbook).
    type: str
    default: ""
  detail:
    description: Facts of the stage, merged into the row's C(detail.k3s).
    type: dict
    default: {}
  journal:
    description:
      - The journal, a path (SQLite; C(~) and C($VAR) expanded) or a C(postgresql://) DSN (taken as written);
        defaults to E(GPUPROV_JOURNAL), else C(<state dir>/journal.sqlite).
    type: str
  journal_password:
    description:
      - Password of a PostgreSQL journal, when the DSN does not carry one and libpq's environment (E(PGPASSWORD),
        E(PGPASSFILE)) does not give it. Never logged, journalled or shown.
    type: str
"""

EXAMPLES = r"""
- name: Record the boot check
  gpuprov.cloud.vm_stage:
    name: train1
    stage: CheckingBootInstall
    note: polling the boot install

- name: Stages of a PostgreSQL journal, its password from a group default (as for gpuprov.cloud.vm)
  module_defaults:
    group/gpuprov.cloud.gpuprov:
      journal: postgresql://gpuprov@db.example.com/gpuprov
      journal_password: "{{ vault_gpuprov_journal_password }}"
  block:
    - name: Record the install
      gpuprov.cloud.vm_stage:
        name: train1
        stage: Installing
"""

RETURN = r"""
stage:
  description: The stage now recorded.
  returned: success
  type: str
  sample: k3s:CheckingBootInstall
status:
  description: The VM's status (unchanged).
  returned: success
  type: str
  sample: running
"""

from ansible_collections.gpuprov.cloud.plugins.module_utils.controller_only import refuse_outside_controller
from ansible_collections.gpuprov.cloud.plugins.module_utils.cluster.args import VM_STAGE_ARGUMENT_SPEC


def main():
    refuse_outside_controller("vm_stage", VM_STAGE_ARGUMENT_SPEC)


if __name__ == "__main__":
    main()
