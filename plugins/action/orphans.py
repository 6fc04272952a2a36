# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin for gpuprov.cloud.orphans: the orphan sweep runs on the controller (the
journal and the cloud credentials are there), printing each teardown step as it goes
(plugin_utils/controller_task.py). The documentation is in plugins/modules/orphans.py."""

from __future__ import annotations

from ansible_collections.gpuprov.cloud.plugins.plugin_utils.controller_task import ControllerTaskAction


class ActionModule(ControllerTaskAction):

    NAME = "gpuprov.cloud.orphans"
    RESUMES = "a removal it began is journalled and the next state=absent run resumes it"

    def load(self):
        from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks import sweep  # pylint: disable=import-outside-toplevel
        return sweep.ORPHANS_ARGUMENT_SPEC, sweep.run_task
