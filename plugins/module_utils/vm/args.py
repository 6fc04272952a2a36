# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The argument spec of gpuprov.cloud.vm, shared by its action plugin and the
module file that carries its documentation."""

from __future__ import annotations

VM_ARGUMENT_SPEC = dict(
    name=dict(type="str", required=True),
    state=dict(type="str", default="present", choices=["present", "absent"]),
    clouds=dict(type="list", elements="str", default=["local"]),
    gpu=dict(type="str"),
    gpu_count=dict(type="int", default=1),
    regions=dict(type="list", elements="str", default=[]),
    spot=dict(type="bool", default=False),
    retry_until_up=dict(type="bool", default=False),
    boot_timeout=dict(type="int"),
    ssh_timeout=dict(type="int", default=300),
    teardown_timeout=dict(type="int", default=600),
    journal=dict(type="path"),
    ssh_key=dict(type="path", no_log=False),
    ssh_user=dict(type="str"),
    cloud_options=dict(type="dict", default={}, no_log=True),
    k8s=dict(type="bool"),
    boot_script=dict(type="dict", no_log=True, options=dict(
        script=dict(type="str", required=True),
        env=dict(type="dict", default={}),
    )),
)
