# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The options of the nebius adapter (``cloud_options.nebius``)."""

from __future__ import annotations

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers import options as shared

# What the documentation says of the cloud, above its options.
DESCRIPTION = "The V(nebius) cloud: Nebius AI Cloud compute VMs, through its official Python SDK (gRPC)."

OPTIONS = dict(
    boot_timeout_s=shared.BOOT_TIMEOUT_S,
    poll_interval_s=shared.POLL_INTERVAL_S,
)
