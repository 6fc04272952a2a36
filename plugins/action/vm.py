# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin for gpuprov.cloud.vm: runs the launch/teardown machines on the
controller, printing live progress. The documentation is in plugins/modules/vm.py."""

from __future__ import annotations

import importlib
import traceback

from ansible.errors import AnsibleActionFail
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers import registry
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.provider_args import reconcile_clouds, validation_spec
from ansible_collections.gpuprov.cloud.plugins.module_utils.requirements import missing_import, missing_package
from ansible_collections.gpuprov.cloud.plugins.module_utils.task_secrets import Hidden
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.args import VM_ARGUMENT_SPEC
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.host_vars import options_from_host_vars

# Imported with the plugin, not in run(): the strategy loads this plugin in ansible-playbook's own process
# before it forks a worker per host, so a fleet's workers share one import of the controller code instead
# of each paying for it (about 0.2 s of CPU a VM).
try:
    from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.service import VmService
    SERVICE_IMPORT_ERROR = None
except ImportError as exc:
    VmService = None
    SERVICE_IMPORT_ERROR = exc
else:
    # The default cloud's adapter too (the local cloud: no SDK, a few ms to import, tens where no bytecode is
    # cached); the other adapters stay imported only by the workers whose task names their cloud, so that a
    # run never loads an SDK it does not use.
    registry.preload(registry.DEFAULT_CLOUD)
# The spec a task is validated against (every cloud's declared options, some ms to build), built once here for
# the same reason; the validator only reads it.
VALIDATED_AGAINST = validation_spec(VM_ARGUMENT_SPEC)
# The SSH check's client, for the same reason: vm/ssh.py imports it only when a check runs, so that what merely
# reads the journal (the inventory, status) never pays for it; every vm task but a dry run makes a check.
try:
    importlib.import_module("paramiko")
    HAS_PARAMIKO = True
except ImportError:
    HAS_PARAMIKO = False   # run() says how to install it when the task needs it (a launch's SSH check)

display = Display()


class ActionModule(ActionBase):

    TRANSFERS_FILES = False
    _requires_connection = False  # everything happens on the controller

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        if boolean(self._task.args.get("from_host_vars", False), strict=False):
            # What the task sets wins; the rest comes from the host's variables (tasks/host_vars.py), and the VM
            # is the host: its name is the inventory host's (no template to compile in every VM's worker).
            self._task.args = dict(options_from_host_vars(task_vars or {}, self._templar.template), **self._task.args)
            self._task.args.setdefault("name", (task_vars or {}).get("inventory_hostname"))
        elif self._task.args.get("name") is None:
            raise AnsibleActionFail("name: required: the VM's name (a DNS label such as train1); or set "
                                    "from_host_vars: true, which takes the inventory host's name")
        validation, params = self.validate_argument_spec(argument_spec=VALIDATED_AGAINST)
        # The no_log values and a journal DSN's password: hidden in every progress line and the result.
        hidden = Hidden(params, validation._no_log_values)
        reconcile_clouds(params)
        if VmService is None:
            raise AnsibleActionFail("gpuprov.cloud.vm cannot load its controller code: %s"
                                    % missing_import(SERVICE_IMPORT_ERROR))
        if not HAS_PARAMIKO and params["state"] == "present" and not self._task.check_mode:
            # Before anything is journalled or created: a launch ends in an SSH check of the VM.
            clouds = set(params.get("clouds") or ())
            raise AnsibleActionFail("gpuprov.cloud.vm checks each VM it launches over SSH, which needs paramiko. %s"
                                    % missing_package("paramiko", clouds.pop() if len(clouds) == 1 else None))
        # AWX's Machine credential reaches the task as ansible_ssh_private_key_file: the key to use
        # when neither the ssh_key option nor GPUPROV_SSH_KEY_FILE names one.
        credential_key = (task_vars or {}).get("ansible_ssh_private_key_file")
        if credential_key:
            credential_key = self._templar.template(credential_key)
        service = VmService(params, progress=lambda line: display.display(hidden.text("gpuprov %s" % line)),
                            credential_key=credential_key or None)
        try:
            result.update(service.run(check_mode=self._task.check_mode, diff=self._task.diff))
        except Exception as exc:  # pylint: disable=broad-except
            # Every committed state is resumable: say so instead of printing a traceback.
            display.vvv(hidden.text("gpuprov.cloud.vm: %s" % traceback.format_exc()))
            result.update(failed=True, changed=False,
                          msg="gpuprov.cloud.vm stopped on an unexpected %s: %s. Everything done so far is in "
                              "the journal; re-run the task to resume (-vvv shows the details)."
                              % (type(exc).__name__, exc))
        return hidden.result(result)
