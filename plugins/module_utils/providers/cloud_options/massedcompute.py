# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The options of the massedcompute adapter (``cloud_options.massedcompute``)."""

from __future__ import annotations

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers import options as shared

# What the documentation says of the cloud, above its options.
DESCRIPTION = ("The V(massedcompute) cloud: Massed Compute VMs, through its VM REST API v1. A boot script runs as "
               "the launch's startup command (through sudo). Massed Compute has no firewall API: the VM's ports are "
               "as Massed Compute leaves them, and C(allowed_cidrs) restricts nothing there.")

# What the cloud does with the user's tags (the modules' O(tags)), for its page.
TAGS = ("Takes no tags: the modules' C(tags) are ignored here.")

OPTIONS = dict(
    api_url=shared.api_url("https://vm.massedcompute.com/api/v1"),
    api_key=dict(shared.api_key("MASSED_COMPUTE_API_KEY"), description=(
        "Massed Compute API key (a full-access key: read-only keys cannot launch), sent as a bearer token (never "
        "logged). Unset: E(MASSED_COMPUTE_API_KEY).")),
    regions=dict(shared.REGIONS, description=(
        "Regions to search, in order, when the request names none (the module's C(regions) wins); V(any) lets "
        "Massed Compute pick. Unset: every region the GPU inventory lists with capacity.")),
    ssh_user=dict(type="str", description=(
        "The login user of the image. Unset: the C(username) Massed Compute reports for the instance, lowercased "
        "(V(ubuntu) on its Ubuntu images); the task's C(ssh_user) does not change it.")),
    ssh_port=dict(type="int", default=22, minimum=1, description=(
        "The port sshd listens on (Massed Compute reports only an ip), for an image whose sshd listens elsewhere.")),
    image_id=dict(type="int", minimum=1, description=(
        "Boot image id (C(GET /images) lists them as C(vm_image_id)); wins over C(image_name).")),
    image_name=dict(type="str", default="Ubuntu Server 22.04 w/ drivers", description=(
        "Boot image name, matched case-insensitively against C(vm_image_name) when C(image_id) is unset.")),
    python_interpreter=dict(type="str", description=(
        "The Python Ansible uses on the instance. Unset: Ansible's interpreter discovery.")),
    request_timeout_s=shared.seconds(60, "Read timeout of every API request."),
    boot_timeout_s=shared.BOOT_TIMEOUT_S,
    poll_interval_s=shared.POLL_INTERVAL_S,
)

CREDENTIALS = shared.Credentials("massedcompute", OPTIONS, sets=[("api_key",)])
