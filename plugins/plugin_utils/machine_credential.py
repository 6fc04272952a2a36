# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The SSH key AWX's Machine credential gives a job, as the controller-side actions read it."""

from __future__ import annotations


def machine_credential_key(task_vars, templar):
    """The task's ``ansible_ssh_private_key_file`` (what AWX's Machine credential sets), templated;
    None when unset. It names the key only when neither the ``ssh_key`` option nor
    GPUPROV_SSH_KEY_FILE does (ssh.key_source)."""
    value = (task_vars or {}).get("ansible_ssh_private_key_file")
    if value:
        value = templar.template(value)
    return value or None
