#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ssh_files
short_description: Write ssh config (internal, tunnel playbook)
version_added: 0.1.0
description:
  - Generates C(known_hosts) and the ssh config (one C(Host) block per VM, with its C(HostKeyAlias) and
    C(StrictHostKeyChecking yes)) in the gpuprov state directory from the journal written by
    M(gpuprov.cloud.vm), exactly as every M(gpuprov.cloud.vm) run does before it uses them. Every running VM
    with a pinned host key in the journal gets its key and block; the journal wins over what the files say.
  - For a task that uses these files with no M(gpuprov.cloud.vm) run before it in the same state directory, as
    the C(gpuprov.cloud.tunnel) playbook in a new AWX job (a fresh HOME), or C(ssh <name>) with
    C(Include <state dir>/ssh_config).
  - With O(name), fails unless that VM gets a C(Host) block (it is running and its host key is journalled).
  - Files are written 0600. The journal is only read. Runs on the controller through its action plugin.
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
    support: partial
    details: Reads the journal and returns the hosts, but writes nothing and reports no change.
options:
  name:
    description: A VM that must get a C(Host) block; the task fails, saying so, when it does not.
    type: str
  journal:
    description:
      - The journal, a path (SQLite; C(~) and C($VAR) expanded) or a C(postgresql://) DSN (taken as written);
        defaults to E(GPUPROV_JOURNAL), else C(<state dir>/journal.sqlite). A journal that does not exist yet
        gives no hosts and is not created.
    type: str
  journal_password:
    description:
      - Password of a PostgreSQL journal, when the DSN does not carry one and libpq's environment (E(PGPASSWORD),
        E(PGPASSFILE)) does not give it. Never logged, journalled or shown.
    type: str
  ssh_key:
    description:
      - The private key the C(Host) blocks name (C(IdentityFile)). When unset, E(GPUPROV_SSH_KEY_FILE), else the
        task's C(ansible_ssh_private_key_file) (an AWX Machine credential), else the collection's own key,
        C(<state dir>/id_ed25519), as for M(gpuprov.cloud.vm).
    type: path
"""

EXAMPLES = r"""
- name: Write the ssh config and known_hosts from the journal, and check that train1 is in them
  gpuprov.cloud.ssh_files:
    name: train1
  register: gpuprov_files

- name: Log in with the pinned host key
  ansible.builtin.command:
    argv: [ssh, -F, "{{ gpuprov_files.ssh_config }}", -o, BatchMode=yes, train1, uptime]
  changed_when: false
"""

RETURN = r"""
changed:
  description: Whether either file's content changed.
  returned: always
  type: bool
journal:
  description: The journal read.
  returned: success
  type: str
ssh_config:
  description: Path of the ssh config (C(ssh -F) it, or C(Include) it from C(~/.ssh/config)).
  returned: success
  type: str
  sample: /home/me/.local/state/gpuprov/ssh_config
known_hosts:
  description: Path of the known hosts file the C(Host) blocks name.
  returned: success
  type: str
ssh_key:
  description: Path of the private key the C(Host) blocks name.
  returned: success
  type: str
ssh_key_source:
  description: Where that key came from.
  returned: success
  type: str
  choices: [ssh_key, GPUPROV_SSH_KEY_FILE, ansible_ssh_private_key_file, state directory]
hosts:
  description: The VMs that have a C(Host) block from the journal, sorted.
  returned: success
  type: list
  elements: str
  sample: [train1]
"""

from ansible_collections.gpuprov.cloud.plugins.module_utils.controller_only import refuse_outside_controller
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.ssh_files import SSH_FILES_ARGUMENT_SPEC


def main():
    refuse_outside_controller("ssh_files", SSH_FILES_ARGUMENT_SPEC)


if __name__ == "__main__":
    main()
