# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The options of the hyperstack adapter (``cloud_options.hyperstack``)."""

from __future__ import annotations

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers import options as shared

# What the documentation says of the cloud, above its options.
DESCRIPTION = ("The V(hyperstack) cloud: Hyperstack (NexGen Cloud) VMs, through its Infrahub REST API v1. Each "
               "region's resources live in an environment V(gpuprov-<region>) made on first use and removed once "
               "empty; each VM carries its own security rules and a public IP; a boot script runs as cloud-init "
               "user data.")

# What the cloud does with the user's tags (the modules' O(tags)), for its page.
TAGS = ("Labels the VM C(<name>=<value>); a tag with a space is refused (Hyperstack reads a space as the start of "
        "another label), as is a name holding C(=). The labels of a VM that is already there are changed in "
        "place.")

OPTIONS = dict(
    api_url=shared.api_url("https://infrahub-api.nexgencloud.com/v1"),
    api_key=dict(shared.api_key("HYPERSTACK_API_KEY"), description=(
        "Hyperstack API key, sent in the C(api_key) header (never logged). Unset: E(HYPERSTACK_API_KEY).")),
    regions=dict(shared.REGIONS, description=(
        "Regions to search, in order, when the request names none (the module's C(regions) wins), e.g. "
        "V(CANADA-1), V(NORWAY-1), V(US-1). Unset: every region whose flavors Hyperstack lists.")),
    allowed_cidrs=dict(shared.ALLOWED_CIDRS, description=(
        "Source ranges of the VM's security rules when the task names none. Required one way or the other: "
        "hyperstack never opens V(0.0.0.0/0) by default, and without a rule SSH is closed.")),
    k3s_direct=shared.k3s_direct(False),
    image_name=dict(type="str", default="Ubuntu Server 22.04 LTS R535 CUDA 12.2", description=(
        "The OS image (C(GET /core/images) lists a region's images). It must exist in the offer's region.")),
    ssh_user=dict(type="str", default="ubuntu", description=(
        "The login user of the image: V(ubuntu) on Hyperstack's Ubuntu images; the task's C(ssh_user) does not "
        "change it.")),
    ssh_port=dict(type="int", default=22, minimum=1, description=(
        "The port sshd listens on. VMs are made with port randomization off, so the public IP forwards it as "
        "it is; it is opened in the VM's security rules.")),
    python_interpreter=dict(type="str", description=(
        "The Python Ansible uses on the instance. Unset: Ansible's interpreter discovery.")),
    request_timeout_s=shared.seconds(60, "Read timeout of every API request."),
    boot_timeout_s=shared.BOOT_TIMEOUT_S,
    poll_interval_s=shared.POLL_INTERVAL_S,
)

CREDENTIALS = shared.Credentials("hyperstack", OPTIONS, sets=[("api_key",)])
