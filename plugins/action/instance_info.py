# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin for gpuprov.cloud.instance_info: runs the module's task in the controller's process when the
task runs there (plugin_utils/controller_module.py), else the module. The documentation is in
plugins/modules/instance_info.py."""

from __future__ import annotations

from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.primitive_tasks import INSTANCE_INFO
from ansible_collections.gpuprov.cloud.plugins.plugin_utils.controller_module import ControllerModuleAction


class ActionModule(ControllerModuleAction):

    TASK = INSTANCE_INFO
