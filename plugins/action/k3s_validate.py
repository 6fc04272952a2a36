# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin for gpuprov.cloud.k3s_validate: validates a VM's k3s through the
access path the user will use, from the controller. The documentation is in
plugins/modules/k3s_validate.py."""

from __future__ import annotations

import os
import time

from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.gpuprov.cloud.plugins.module_utils.cluster import kubeconfig, validate
from ansible_collections.gpuprov.cloud.plugins.module_utils.cluster.args import K3S_VALIDATE_ARGUMENT_SPEC
from ansible_collections.gpuprov.cloud.plugins.module_utils.state_dir import default_state_dir

display = Display()


class ActionModule(ActionBase):

    TRANSFERS_FILES = False
    _requires_connection = False  # the checks run from the controller, as the user's kubectl would

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        validation, params = self.validate_argument_spec(argument_spec=K3S_VALIDATE_ARGUMENT_SPEC)
        del validation
        result["changed"] = False
        name = params["name"]
        try:
            config = kubeconfig.load_file(params["kubeconfig"])
        except kubeconfig.KubeconfigError as exc:
            result.update(failed=True, msg=str(exc))
            return result
        if config is None:
            result.update(failed=True, msg="kubeconfig %s does not exist" % params["kubeconfig"])
            return result
        ssh_config = params["ssh_config"] or os.path.join(default_state_dir(), "ssh_config")
        forward = None
        client = None
        deadline = time.monotonic() + params["timeout"]
        last_line = None
        outcome = None
        error = None
        try:
            while True:
                try:
                    if params["access"] == "SshTunnel" and (forward is None or forward.proc is None
                                                            or forward.proc.poll() is not None):
                        if forward is not None:
                            forward.close()
                        forward = validate.SshForward(ssh_config, name, params["remote_port"])
                        forward.open()
                        if client is not None:
                            client.close()
                        client = None
                    if client is None:
                        connect_to = ("127.0.0.1", forward.local_port) if forward is not None else None
                        client = validate.ApiClient(config, connect_to=connect_to)
                    hosts = list(dict.fromkeys([h for h in params["hosts"] if h] + [client.host]))
                    outcome = validate.validate_once(client, params["gpu_expected"], hosts)
                    error = None
                except validate.ApiError as exc:
                    error = str(exc)
                    outcome = None
                if outcome is not None:
                    if outcome["ok"]:
                        break
                    if outcome["missing_sans"] and not params["fail_on_missing_sans"] and outcome["checks"]["api"]["ok"]:
                        break
                    line = "; ".join(c["detail"] for c in outcome["checks"].values() if not c["ok"])
                else:
                    line = error
                if line != last_line:
                    display.display("gpuprov [%s] validating: %s" % (name, line))
                    last_line = line
                if time.monotonic() + params["interval"] > deadline:
                    break
                time.sleep(params["interval"])
        finally:
            if client is not None:
                client.close()
            if forward is not None:
                forward.close()
        path = ("SSH tunnel to %s:%d (as gpuprov.cloud.tunnel forwards it), server %s"
                % (name, params["remote_port"], client.server if client else "?")
                if params["access"] == "SshTunnel" else "direct, server %s" % (client.server if client else "?"))
        if outcome is None:
            result.update(failed=True, ok=False, path=path,
                          msg="%s: the k3s API was not reachable through the %s within %d s: %s"
                              % (name, path, params["timeout"], error))
            return result
        result.update(ok=outcome["ok"], checks=outcome["checks"], missing_sans=outcome["missing_sans"],
                      certificate_sans=outcome["certificate_sans"], nodes=outcome["nodes"], path=path)
        if outcome["ok"]:
            result["msg"] = "%s: k3s validated through the %s" % (name, path)
        elif outcome["missing_sans"] and not params["fail_on_missing_sans"]:
            result["msg"] = "%s: the API certificate does not cover %s" % (name, ", ".join(outcome["missing_sans"]))
        else:
            result.update(failed=True, msg="%s: k3s validation through the %s failed after %d s: %s" % (
                name, path, params["timeout"],
                "; ".join(c["detail"] for c in outcome["checks"].values() if not c["ok"])))
        return result
