# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The AnsibleModule of every module that takes a ``journal`` (the module_defaults group's members)."""

from __future__ import annotations

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.provider_args import validation_spec
from ansible_collections.gpuprov.cloud.plugins.module_utils.task_secrets import task_secrets


class JournalModule(AnsibleModule):
    """An AnsibleModule that hides, besides its ``no_log`` options, the secrets of task_secrets (the
    password in a journal DSN, ``PGPASSWORD``, cloud credentials from the environment) wherever
    the module would show them: its ``invocation``, its result and warnings, its log line, even the
    error of arguments that do not validate. They are no_log values from the moment the arguments
    are read, before they are validated.

    It validates its arguments against provider_args.validation_spec of the spec it is given: the
    ``cloud_options`` the module declares as a dict is checked against each cloud's declared options
    (their credentials hidden as the ``no_log`` options they are), as if the module declared them."""

    def _load_params(self):
        super()._load_params()
        self.no_log_values.update(task_secrets(self.params or {}))
        # AnsibleModule builds its validator from self.argument_spec right after this.
        self.argument_spec = validation_spec(self.argument_spec)
