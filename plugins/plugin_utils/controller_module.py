# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The action of a module whose work is cloud API calls (offers, instance, instance_info).

Such a task nearly always runs on the controller (``hosts: localhost`` or ``delegate_to:
localhost``). There, shipping the module costs more than the work of a re-run: AnsiballZ
scans and zips every adapter the module may need, and a new Python imports them again.
So when the task would run its module with this very Python, the action runs the module's
task (module_utils/primitive_tasks.py) in its own process instead, with the same argument
spec, the same checks and the same result, ``no_log`` values hidden as the module hides
them. Anywhere else (a remote host, become, an ``environment`` keyword, async, another
interpreter) it runs the module as Ansible normally does.
"""

from __future__ import annotations

import os
import sys
import traceback

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.module_utils.errors import UnsupportedError
from ansible.plugins.action.normal import ActionModule as NormalAction
from ansible.utils.display import Display

from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.provider_args import validation_spec
from ansible_collections.gpuprov.cloud.plugins.module_utils.task_secrets import Hidden

display = Display()


class ControllerModuleAction(NormalAction):
    """``TASK``: the module's PrimitiveTask (set by each action plugin)."""

    TASK = None

    def run(self, tmp=None, task_vars=None):
        if not self._runs_with_controller_python(task_vars or {}):
            return super().run(tmp, task_vars)
        result = super(NormalAction, self).run(tmp, task_vars)  # pylint: disable=bad-super-call
        del tmp
        # The module's no_log values, and what journal_module.JournalModule hides besides (a journal DSN's password).
        # cloud_options checked against each cloud's declared options, as the module checks it.
        validation = ArgumentSpecValidator(validation_spec(self.TASK.argument_spec)).validate(dict(self._task.args))
        hidden = Hidden(dict(self._task.args), validation._no_log_values)
        params = validation.validated_parameters
        if validation.errors.errors:
            # The module's own words, naming the module (not this action).
            msg = validation.errors.msg
            if isinstance(validation.errors[0], UnsupportedError):
                msg = "Unsupported parameters for (%s) module: %s" % (self._task.resolved_action, msg)
            result.update(hidden.result({"failed": True, "changed": False, "msg": msg}))
            return result
        try:
            outcome = self.TASK(params, bool(self._task.check_mode), bool(self._task.diff))
        except Exception as exc:  # pylint: disable=broad-except
            # A module would end in a traceback here; say what happened and how to see more.
            display.vvv(hidden.text("%s: %s" % (self._task.action, traceback.format_exc())))
            outcome = {"failed": True, "changed": False,
                       "msg": "%s stopped on an unexpected %s: %s (-vvv shows the details)"
                              % (self._task.action, type(exc).__name__, exc)}
        outcome.setdefault("changed", False)
        # What ModuleArgumentSpecValidator warns of in a module.
        warnings = ["Both option {option} and its alias {alias} are set.".format(**found)
                    for found in validation._warnings] + list(outcome.pop("warnings", None) or [])
        if warnings:
            outcome["warnings"] = warnings
        outcome["invocation"] = {"module_args": params}
        result.update(hidden.result(outcome))
        return result

    def _runs_with_controller_python(self, task_vars):
        """Whether Ansible would run the module on this machine, as this user, with this Python and
        environment: only then is running its task here the same thing."""
        if self._connection.transport != "local" or self._play_context.become:
            return False
        if any(self._task.environment or ()) or self._task.async_val:   # the keyword's default is [{}]
            return False
        host_vars = task_vars
        if self._task.delegate_to:
            host_vars = (task_vars.get("ansible_delegated_vars") or {}).get(self._task.delegate_to) or {}
        interpreter = host_vars.get("ansible_python_interpreter")
        if not interpreter:
            # Left to interpreter discovery, which may find another Python (with other packages).
            return False
        interpreter = self._templar.template(interpreter)
        return isinstance(interpreter, str) and same_python(interpreter, sys.executable)


def same_python(one, other):
    """Whether two interpreter paths run the same Python with the same packages: the same file in the
    same folder (a virtual environment's python and python3 are one; its base Python, the very same
    file by its real path, is another environment)."""
    one, other = os.path.abspath(one), os.path.abspath(other)
    return os.path.dirname(one) == os.path.dirname(other) and os.path.realpath(one) == os.path.realpath(other)
