# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin for gpuprov.cloud.k3s_kubeconfig: writes the VM's kubeconfig on the
controller. The documentation is in plugins/modules/k3s_kubeconfig.py."""

from __future__ import annotations

import os

from ansible.plugins.action import ActionBase

from ansible_collections.gpuprov.cloud.plugins.module_utils.cluster import kubeconfig
from ansible_collections.gpuprov.cloud.plugins.module_utils.private_files import write_private

ARGUMENT_SPEC = dict(
    name=dict(type="str", required=True),
    k3s_yaml=dict(type="str", required=True, no_log=True),
    server=dict(type="str", required=True),
    dir=dict(type="path", default="~/.kube"),
    merge=dict(type="bool", default=False),
    merge_path=dict(type="path", default="~/.kube/config"),
    set_current_context=dict(type="bool", default=False),
)


class ActionModule(ActionBase):

    TRANSFERS_FILES = False
    _requires_connection = False  # everything happens on the controller

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        validation, params = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        del validation
        if not kubeconfig.HAS_YAML:
            result.update(failed=True, msg="gpuprov.cloud.k3s_kubeconfig needs PyYAML on the controller")
            return result
        name = params["name"]
        path = os.path.join(os.path.expanduser(params["dir"]), "gpuprov-%s.yaml" % name)
        try:
            config = kubeconfig.for_vm(params["k3s_yaml"], name, params["server"])
            text = kubeconfig.dump(config)
            if self._task.check_mode:
                changed = not os.path.exists(path) or open(path).read() != text
            else:
                changed = write_private(path, text)
            merged = False
            if params["merge"]:
                target = os.path.expanduser(params["merge_path"])
                existing = kubeconfig.load_file(target)
                new = kubeconfig.dump(kubeconfig.merge(existing, config, params["set_current_context"]))
                if existing is None or kubeconfig.dump(existing) != new:
                    if not self._task.check_mode:
                        write_private(target, new)
                    merged = changed = True
        except (kubeconfig.KubeconfigError, OSError) as exc:
            result.update(failed=True, msg="kubeconfig for %s: %s" % (name, exc))
            return result
        result.update(changed=changed, path=path, context=name, server=params["server"], merged=merged,
                      msg="kubeconfig %s (context %s, server %s)" % (path, name, params["server"]))
        return result
