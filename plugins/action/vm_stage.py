# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin for gpuprov.cloud.vm_stage: records a k3s stage in the journal on the
controller. The documentation is in plugins/modules/vm_stage.py."""

from __future__ import annotations

from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.gpuprov.cloud.plugins.module_utils.cluster import stages
from ansible_collections.gpuprov.cloud.plugins.module_utils.cluster.args import VM_STAGE_ARGUMENT_SPEC
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.provider_args import validation_spec
from ansible_collections.gpuprov.cloud.plugins.module_utils.task_secrets import Hidden

display = Display()


class ActionModule(ActionBase):

    TRANSFERS_FILES = False
    _requires_connection = False  # the journal is on the controller

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        validation, params = self.validate_argument_spec(argument_spec=validation_spec(VM_STAGE_ARGUMENT_SPEC))
        # The no_log values and a journal DSN's password: hidden in every progress line and the result.
        hidden = Hidden(params, validation._no_log_values)
        return hidden.result(self._record(result, params, hidden))

    def _record(self, result, params, hidden):
        # Recording a stage changes no VM: never reported as a change.
        result["changed"] = False
        if self._task.check_mode:
            result["msg"] = "would record %s for %s" % (stages.label(params["stage"]), params["name"])
            return result
        try:
            row = stages.record(params["journal"], params["name"], params["stage"], params["note"], params["detail"],
                                password=params["journal_password"])
        except stages.StageError as exc:
            result.update(failed=True, msg=str(exc))
            return result
        display.display(hidden.text("gpuprov [%s] %s%s" % (params["name"], row.get("stage"),
                                                           ": %s" % params["note"] if params["note"] else "")))
        result.update(stage=row.get("stage"), status=row.get("status"),
                      msg="%s: %s" % (params["name"], row.get("stage")))
        return result
