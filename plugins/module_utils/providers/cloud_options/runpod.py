# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The options of the runpod adapter (``cloud_options.runpod``).

The default ``api_url`` is RunPod's REST API v2 (``https://api.runpod.io/v2``): REST v1
(``rest.runpod.io/v1``) was retired on 2026-11-15 (RunPod's migration guide,
api-reference-v2/migrate-from-v1)."""

from __future__ import annotations

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers import options as shared

# What the documentation says of the cloud, above its options.
DESCRIPTION = ("The V(runpod) cloud: RunPod GPU pods (containers, not VMs: no k3s, no boot script), through its "
               "REST API v2. The login is the pod's sshd on its public IP and the port RunPod maps to 22/tcp; "
               "the controller's key is registered with the account as C(gpuprov-<vm>-<fingerprint>) (removed at "
               "teardown) and also set in the pod's C(PUBLIC_KEY) environment variable. Pod ports have no firewall: C(allowed_cidrs) "
               "cannot be enforced on RunPod.")

DEFAULT_IMAGE = "runpod/pytorch:1.0.2-cu1281-torch280-ubuntu2404"

# What the cloud does with the user's tags (the modules' O(tags)), for its page.
TAGS = ("Takes no tags: the modules' C(tags) are ignored here.")

OPTIONS = dict(
    api_url=shared.api_url("https://api.runpod.io/v2"),
    api_key=shared.api_key("RUNPOD_API_KEY"),
    regions=dict(type="list", elements="str", description=(
        "RunPod data center ids to search, in order (for example V(US-TX-3), V(EU-RO-1)), when the request "
        "names none (the module's C(regions) wins). Unset: every data center the catalog lists for the GPU.")),
    cloud_type=dict(type="str", default="SECURE", choices=["SECURE", "COMMUNITY"], description=(
        "RunPod's cloud tier: V(SECURE) (RunPod-operated data centers) or V(COMMUNITY) (community hosts, "
        "cheaper). Prices and stock are read for this tier.")),
    image=dict(type="str", default=DEFAULT_IMAGE, description=(
        "Container image of the pod. It must start sshd with the keys in C(PUBLIC_KEY), as RunPod's official "
        "images do.")),
    container_disk_gb=dict(type="int", default=50, minimum=1, description=(
        "Container disk in GB (ephemeral: wiped when the pod restarts).")),
    volume_gb=dict(type="int", minimum=10, description=(
        "Size in GB of a persistent volume on the pod's host, mounted at C(volume_path); unset: none. "
        "It is destroyed with the pod.")),
    volume_path=dict(type="str", default="/workspace", description="Mount path of the persistent volume."),
    min_cuda_version=dict(type="str", description=(
        "Lowest CUDA version the host must report, as V(major.minor) (for example V(12.4)); unset: any. "
        "Applied to the catalog's stock and to the pod.")),
    boot_timeout_s=shared.BOOT_TIMEOUT_S,
    poll_interval_s=shared.POLL_INTERVAL_S,
)

CREDENTIALS = shared.Credentials("runpod", OPTIONS, sets=[("api_key",)])
