# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin for gpuprov.cloud.ssh_files: writes the controller's known_hosts and ssh
config from the journal. The documentation is in plugins/modules/ssh_files.py."""

from __future__ import annotations

from ansible.plugins.action import ActionBase

from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journal import JournalError
from ansible_collections.gpuprov.cloud.plugins.module_utils.private_files import PrivateFileError
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.provider_args import validation_spec
from ansible_collections.gpuprov.cloud.plugins.module_utils.task_secrets import Hidden
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.ssh_files import (
    SSH_FILES_ARGUMENT_SPEC, SshFilesError, generate,
)
from ansible_collections.gpuprov.cloud.plugins.plugin_utils.machine_credential import machine_credential_key


class ActionModule(ActionBase):

    TRANSFERS_FILES = False
    _requires_connection = False  # the journal and the files are the controller's

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        validation, params = self.validate_argument_spec(argument_spec=validation_spec(SSH_FILES_ARGUMENT_SPEC))
        # The no_log values and a journal DSN's password: hidden in the result.
        hidden = Hidden(params, validation._no_log_values)
        try:
            result.update(generate(params, machine_credential_key(task_vars, self._templar),
                                   check_mode=self._task.check_mode))
        except (SshFilesError, JournalError, PrivateFileError) as exc:
            result.update(failed=True, changed=False, msg=str(exc))
        return hidden.result(result)
