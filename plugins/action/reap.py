# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin for gpuprov.cloud.reap: the controller's enforcement of the VMs' limits runs where the journal
and the cloud credentials are, printing each VM it reaps (plugin_utils/controller_task.py). The documentation is
in plugins/modules/reap.py."""

from __future__ import annotations

from ansible_collections.gpuprov.cloud.plugins.plugin_utils.controller_task import ControllerTaskAction


class ActionModule(ControllerTaskAction):

    NAME = "gpuprov.cloud.reap"
    RESUMES = "a teardown it began is journalled and the next reap or down resumes it"

    def load(self):
        from ansible_collections.gpuprov.cloud.plugins.module_utils.expiry import reap  # pylint: disable=import-outside-toplevel
        return reap.REAP_ARGUMENT_SPEC, reap.run_task
