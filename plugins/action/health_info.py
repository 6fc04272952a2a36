# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin for gpuprov.cloud.health_info: compares the journal with the clouds,
SSH and k3s from the controller, printing one line per VM as it goes. The
documentation is in plugins/modules/health_info.py."""

from __future__ import annotations

import traceback

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.provider_args import validation_spec
from ansible_collections.gpuprov.cloud.plugins.module_utils.requirements import missing_import
from ansible_collections.gpuprov.cloud.plugins.module_utils.task_secrets import Hidden
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.health_args import HEALTH_ARGUMENT_SPEC
from ansible_collections.gpuprov.cloud.plugins.plugin_utils.machine_credential import machine_credential_key

display = Display()


class ActionModule(ActionBase):

    TRANSFERS_FILES = False
    _requires_connection = False  # the journal, the cloud APIs and the SSH checks are the controller's

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        validation, params = self.validate_argument_spec(argument_spec=validation_spec(HEALTH_ARGUMENT_SPEC))
        # The no_log values and a journal DSN's password: hidden in every progress line and the result.
        hidden = Hidden(params, validation._no_log_values)
        return hidden.result(self._check(result, params, task_vars, hidden))

    def _check(self, result, params, task_vars, hidden):
        try:
            from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journal import JournalError
            from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.health import HealthCheck
        except ImportError as exc:
            raise AnsibleActionFail("gpuprov.cloud.health_info cannot load its controller code: %s" % missing_import(exc)) from exc
        # Read-only in every mode: check mode runs the same checks.
        result["changed"] = False
        try:
            # AWX's Machine credential: the key to log in with when neither ssh_key nor GPUPROV_SSH_KEY_FILE names one.
            check = HealthCheck(params, progress=lambda line: display.display(hidden.text("gpuprov health %s" % line)),
                                credential_key=machine_credential_key(task_vars, self._templar),
                                check_mode=self._task.check_mode)
            result.update(check.run())
        except JournalError as exc:
            result.update(failed=True, msg=str(exc))
            return result
        except Exception as exc:  # pylint: disable=broad-except
            display.vvv(hidden.text("gpuprov.cloud.health_info: %s" % traceback.format_exc()))
            result.update(failed=True, msg="gpuprov.cloud.health_info stopped on an unexpected %s: %s (-vvv shows "
                                           "the details); nothing was changed" % (type(exc).__name__, exc))
            return result
        count = len(result["disagreements"])
        result["msg"] = ("%d VM(s): no disagreement" % len(result["vms"]) if not count else
                         "%d disagreement(s): %s" % (count, "; ".join("%s: %s" % (d["vm"], d["kind"])
                                                                      for d in result["disagreements"])))
        return result
