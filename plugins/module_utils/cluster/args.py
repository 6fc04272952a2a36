# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The argument specs of the controller-side k3s tasks, each shared by its action
plugin (which validates the task's arguments with it) and the module file that
carries its documentation (tests/unit/test_action_argument_specs.py checks that
each spec matches the documented options)."""

from __future__ import annotations

from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.provider_args import group_argument_spec

K3S_KUBECONFIG_ARGUMENT_SPEC = dict(
    name=dict(type="str", required=True),
    k3s_yaml=dict(type="str", required=True, no_log=True),
    server=dict(type="str", required=True),
    dir=dict(type="path", default="~/.kube"),
    merge=dict(type="bool", default=False),
    merge_path=dict(type="path", default="~/.kube/config"),
    set_current_context=dict(type="bool", default=False),
)

K3S_VALIDATE_ARGUMENT_SPEC = dict(
    name=dict(type="str", required=True),
    kubeconfig=dict(type="path", required=True),
    access=dict(type="str", default="Direct", choices=["Direct", "SshTunnel"]),
    hosts=dict(type="list", elements="str", default=[]),
    gpu_expected=dict(type="bool", default=False),
    timeout=dict(type="int", default=300),
    interval=dict(type="int", default=3),
    ssh_config=dict(type="path"),
    remote_port=dict(type="int", default=6443),
    fail_on_missing_sans=dict(type="bool", default=True),
)

# A member of the module_defaults group: journal and journal_password (a PostgreSQL journal's) come with the
# group's shared options, so the k3s role's stages reach the journal the group defaults name.
VM_STAGE_ARGUMENT_SPEC = group_argument_spec(
    name=dict(type="str", required=True),
    stage=dict(type="str", required=True),
    note=dict(type="str", default=""),
    detail=dict(type="dict", default={}),
)
