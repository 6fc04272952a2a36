# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin for gpuprov.cloud.k3s_kubeconfig: writes the VM's kubeconfig on the
controller. The documentation is in plugins/modules/k3s_kubeconfig.py."""

from __future__ import annotations

import os

from ansible.plugins.action import ActionBase

from ansible_collections.gpuprov.cloud.plugins.module_utils.cluster import kubeconfig
from ansible_collections.gpuprov.cloud.plugins.module_utils.cluster.args import K3S_KUBECONFIG_ARGUMENT_SPEC
from ansible_collections.gpuprov.cloud.plugins.module_utils.state_dir import default_state_dir
from ansible_collections.gpuprov.cloud.plugins.module_utils.private_files import PrivateFileError
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.diff import masked_kubeconfig


def _file_diff(path, before, after):
    """One file's diff for --diff, credentials masked (an absent file shows as empty)."""
    def text(config):
        return kubeconfig.dump(masked_kubeconfig(config)) if config else ""
    return {"before_header": path, "after_header": path, "before": text(before), "after": text(after)}


class ActionModule(ActionBase):

    TRANSFERS_FILES = False
    _requires_connection = False  # everything happens on the controller

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        validation, params = self.validate_argument_spec(argument_spec=K3S_KUBECONFIG_ARGUMENT_SPEC)
        del validation
        if not kubeconfig.HAS_YAML:
            result.update(failed=True, msg="gpuprov.cloud.k3s_kubeconfig needs PyYAML on the controller")
            return result
        name = params["name"]
        path = os.path.abspath(os.path.join(os.path.expanduser(params["dir"]), "gpuprov-%s.yaml" % name))
        merge_path = os.path.abspath(os.path.expanduser(params["merge_path"])) if params["merge"] else None
        try:
            config = kubeconfig.for_vm(params["k3s_yaml"], name, params["server"])
            if self._task.diff:
                # Read before the write: the files as they were and as they will be.
                diffs = [_file_diff(path, kubeconfig.load_file(path), config)]
                if merge_path:
                    existing = kubeconfig.load_file(merge_path)
                    diffs.append(_file_diff(merge_path, existing, kubeconfig.merge(
                        existing, config, params["set_current_context"])))
                result["diff"] = diffs
            # Recorded in the gpuprov state directory, where `down` looks for what to remove.
            changed, merged = kubeconfig.write_for_vm(default_state_dir(), config, path, merge_path,
                                                      params["set_current_context"], self._task.check_mode)
        except (kubeconfig.KubeconfigError, PrivateFileError, OSError) as exc:
            result.update(failed=True, msg="kubeconfig for %s: %s" % (name, exc))
            return result
        result.update(changed=changed, path=path, context=name, server=params["server"], merged=merged,
                      msg="kubeconfig %s (context %s, server %s)" % (path, name, params["server"]))
        return result
