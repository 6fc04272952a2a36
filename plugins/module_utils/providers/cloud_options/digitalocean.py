# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The options of the digitalocean adapter (``cloud_options.digitalocean``)."""

from __future__ import annotations

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers import options as shared

# What the documentation says of the cloud, above its options.
DESCRIPTION = ("The V(digitalocean) cloud: DigitalOcean GPU Droplets, through its REST API v2. A boot script runs "
               "as user data; each VM gets its own cloud firewall (attached through a tag) letting in only the "
               "allowed addresses; the droplet's tags carry its identity.")

# Token variables, in order: DigitalOcean's own docs and Terraform provider (DIGITALOCEAN_TOKEN, then
# DIGITALOCEAN_ACCESS_TOKEN, also doctl's), then community.digitalocean's (DO_API_TOKEN, DO_API_KEY,
# DO_OAUTH_TOKEN).
TOKEN_ENVIRONMENT = ("DIGITALOCEAN_TOKEN", "DIGITALOCEAN_ACCESS_TOKEN", "DO_API_TOKEN", "DO_API_KEY",
                     "DO_OAUTH_TOKEN")

# What the cloud does with the user's tags (the modules' O(tags)), for its page.
TAGS = ("Tags the droplet C(<name>:<value>); a name holding C(:) is refused. The tags of a VM that is already "
        "there are changed in place.")

OPTIONS = dict(
    api_url=shared.api_url("https://api.digitalocean.com/v2"),
    api_key=dict(shared.api_key(*TOKEN_ENVIRONMENT), aliases=["api_token"], description=(
        "DigitalOcean API token (a personal access token; a custom-scoped one needs the droplet, ssh_key, firewall, "
        "tag, sizes and regions scopes), sent as a bearer token.")),
    regions=dict(shared.REGIONS, description=(
        "Region slugs to search, in order (for example V(nyc2), V(tor1), V(atl1)), when the request names none "
        "(the module's C(regions) wins). Unset: every region where DigitalOcean lists the size as creatable.")),
    allowed_cidrs=dict(shared.ALLOWED_CIDRS, description=(
        "Source addresses of the VM's cloud firewall when the task names none. Required one way or the other: "
        "digitalocean never opens V(0.0.0.0/0) by default.")),
    k3s_direct=shared.k3s_direct(False),
    image=dict(type="str", description=(
        "Image slug or id of new droplets. Unset: DigitalOcean's AI/ML-ready GPU images, V(gpu-h100x1-base) for "
        "one NVIDIA GPU, V(gpu-h100x8-base) for eight, V(gpu-amd-base) for AMD GPUs, and V(ubuntu-24-04-x64) for "
        "a droplet without a GPU.")),
    cpu_sizes=dict(type="list", elements="str", default=["s-2vcpu-4gb", "s-4vcpu-8gb"], description=(
        "The sizes offered when the request asks for no GPU (DigitalOcean lists well over a hundred CPU sizes; "
        "these are the ones worth a VM).")),
    ssh_user=dict(type="str", default="root", description=(
        "The login user the registered SSH key authorises: DigitalOcean embeds it in V(root)'s authorized keys; "
        "the adapter creates no user.")),
    ssh_port=dict(type="int", default=22, minimum=1, description=(
        "The port sshd listens on, for an image whose sshd listens elsewhere than 22 (it is opened in the "
        "firewall too).")),
    python_interpreter=dict(type="str", description=(
        "The Python Ansible uses on the droplet. Unset: Ansible's interpreter discovery.")),
    request_timeout_s=shared.seconds(60, "Read timeout of every API request."),
    boot_timeout_s=shared.BOOT_TIMEOUT_S,
    poll_interval_s=shared.POLL_INTERVAL_S,
)

CREDENTIALS = shared.Credentials("digitalocean", OPTIONS, sets=[("api_key",)])
