# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The argument spec of gpuprov.cloud.health_info, shared by its action plugin and the
module file that carries its documentation: the module_defaults group's shared options
(it uses ``cloud_options``, ``clouds``/``cloud``, ``journal``, ``ssh_key`` and
``ssh_timeout``, and ignores the rest) and its own."""

from __future__ import annotations

from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.provider_args import group_argument_spec

HEALTH_ARGUMENT_SPEC = group_argument_spec(
    name=dict(type="str"),
    k3s_timeout=dict(type="int", default=10),
    k3s_api_port=dict(type="int", default=6443),
)
