# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin for gpuprov.cloud.orphans: the orphan sweep runs on the controller (the
journal and the cloud credentials are there), printing each teardown step as it goes.
The documentation is in plugins/modules/orphans.py."""

from __future__ import annotations

import traceback

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.provider_args import validation_spec
from ansible_collections.gpuprov.cloud.plugins.module_utils.requirements import missing_import
from ansible_collections.gpuprov.cloud.plugins.module_utils.task_secrets import Hidden

display = Display()


class ActionModule(ActionBase):

    TRANSFERS_FILES = False
    _requires_connection = False  # the journal and the cloud APIs are the controller's

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        try:
            from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks import sweep
        except ImportError as exc:
            raise AnsibleActionFail("gpuprov.cloud.orphans cannot load its controller code: %s" % missing_import(exc)) from exc
        validation, params = self.validate_argument_spec(argument_spec=validation_spec(sweep.ORPHANS_ARGUMENT_SPEC))
        # The no_log values and a journal DSN's password: hidden in every progress line and the result.
        hidden = Hidden(params, validation._no_log_values)
        try:
            result.update(sweep.run_task(params, bool(self._task.check_mode),
                                         progress=lambda line: display.display(hidden.text("gpuprov %s" % line))))
        except Exception as exc:  # pylint: disable=broad-except
            display.vvv(hidden.text("gpuprov.cloud.orphans: %s" % traceback.format_exc()))
            result.update(failed=True, changed=False,
                          msg="gpuprov.cloud.orphans stopped on an unexpected %s: %s (-vvv shows the details); "
                              "a removal it began is journalled and the next state=absent run resumes it"
                              % (type(exc).__name__, exc))
        return hidden.result(result)
