# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The options of the massedcompute adapter (``cloud_options.massedcompute``)."""

from __future__ import annotations

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers import options as shared

# What the documentation says of the cloud, above its options.
DESCRIPTION = "The V(massedcompute) cloud: Massed Compute VMs, through its VM REST API v1."

OPTIONS = dict(
    api_url=shared.api_url("https://vm.massedcompute.com/api/v1"),
    api_key=shared.api_key("MASSED_COMPUTE_API_KEY"),
    boot_timeout_s=shared.BOOT_TIMEOUT_S,
    poll_interval_s=shared.POLL_INTERVAL_S,
)
