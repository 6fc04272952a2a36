# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The argument spec of gpuprov.cloud.vm, shared by its action plugin and the
module file that carries its documentation: the options the module_defaults group
shares (module_utils/provider_args.py) plus the vm's own."""

from __future__ import annotations

from ansible_collections.gpuprov.cloud.plugins.module_utils.expiry.vm_task import LIMITS_SPEC
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.provider_args import TAGS_SPEC, group_argument_spec

VM_ARGUMENT_SPEC = group_argument_spec(
    name=dict(type="str"),   # required unless from_host_vars (the action checks it: the host is the VM)
    state=dict(type="str", default="present", choices=["present", "absent"]),
    retry_until_up=dict(type="bool", default=False),
    recreate=dict(type="bool", default=False),
    k8s=dict(type="bool"),
    from_host_vars=dict(type="bool", default=False),
    boot_script=dict(type="dict", no_log=True, options=dict(
        script=dict(type="str", required=True),
        env=dict(type="dict", default={}),
    )),
    **TAGS_SPEC,
    **LIMITS_SPEC
)
