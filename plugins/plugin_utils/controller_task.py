# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The action of a task that only ever runs on the controller (orphans, reap): the journal and the cloud
credentials are there. It checks the task's arguments against the module's spec, runs the task's code in this
process, prints each progress line it gives as it goes, and hides the no_log values (and a journal DSN's
password) in every line and in the result."""

from __future__ import annotations

import traceback
from typing import Any, Callable, Dict, Tuple

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.gpuprov.cloud.plugins.module_utils.requirements import missing_import
from ansible_collections.gpuprov.cloud.plugins.module_utils.task_secrets import Hidden
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.provider_args import validation_spec

display = Display()


class ControllerTaskAction(ActionBase):
    """``NAME``: the module's full name; ``RESUMES``: what the next run does with work an unexpected failure
    interrupted (said in its message); ``load()``: the task's (argument spec, run_task), imported on first use."""

    TRANSFERS_FILES = False
    _requires_connection = False  # the journal and the cloud APIs are the controller's

    NAME = ""
    RESUMES = ""

    def load(self) -> Tuple[Dict[str, Any], Callable[..., Dict[str, Any]]]:
        raise NotImplementedError

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        try:
            argument_spec, run_task = self.load()
        except ImportError as exc:
            raise AnsibleActionFail("%s cannot load its controller code: %s" % (self.NAME, missing_import(exc))) from exc
        validation, params = self.validate_argument_spec(argument_spec=validation_spec(argument_spec))
        hidden = Hidden(params, validation._no_log_values)
        try:
            result.update(run_task(params, bool(self._task.check_mode),
                                   progress=lambda line: display.display(hidden.text("gpuprov %s" % line))))
        except Exception as exc:  # pylint: disable=broad-except
            display.vvv(hidden.text("%s: %s" % (self.NAME, traceback.format_exc())))
            result.update(failed=True, changed=False,
                          msg="%s stopped on an unexpected %s: %s (-vvv shows the details); %s"
                              % (self.NAME, type(exc).__name__, exc, self.RESUMES))
        return hidden.result(result)
