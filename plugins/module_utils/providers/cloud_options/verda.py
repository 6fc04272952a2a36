# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The options of the verda adapter (``cloud_options.verda``)."""

from __future__ import annotations

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers import options as shared

# What the documentation says of the cloud, above its options.
DESCRIPTION = ("The V(verda) cloud: Verda (formerly DataCrunch), through its REST API v1 with OAuth2 client "
               "credentials. Verda has no firewall API: an instance's public address has every port open, so "
               "C(allowed_cidrs) cannot be enforced there (the k3s API is reached through an SSH tunnel).")

# The image type the Verda SDK's examples deploy (Ubuntu 24.04, CUDA 12.8 open driver, Docker).
DEFAULT_IMAGE = "ubuntu-24.04-cuda-12.8-open-docker"

# What the cloud does with the user's tags (the modules' O(tags)), for its page.
TAGS = ("Takes no tags: the modules' C(tags) are ignored here.")

OPTIONS = dict(
    api_url=shared.api_url("https://api.verda.com/v1"),
    client_id=dict(
        type="str", no_log=True, fallback=shared.from_environment("VERDA_CLIENT_ID"),
        description="OAuth2 client id of a Verda API credential (never logged). Required, here or in "
                    "E(VERDA_CLIENT_ID)."),
    client_secret=dict(
        type="str", no_log=True, fallback=shared.from_environment("VERDA_CLIENT_SECRET"),
        description="OAuth2 client secret of that credential (never logged). Required, here or in "
                    "E(VERDA_CLIENT_SECRET). The adapter trades it for an access token at "
                    "C(<api_url>/oauth2/token) and fetches a new one when it expires or is refused."),
    regions=dict(shared.REGIONS, description=(
        "Location codes to search, in order (for example V(FIN-01), V(FIN-03), V(ICE-01)), when the request "
        "names none (the module's C(regions) wins). Unset: every location the availability listing reports.")),
    image=dict(
        type="str", description=(
            "OS image type (or image id) of new instances. Unset: V(%s) where the instance type supports it, "
            "otherwise the first image the instance type lists as supported." % DEFAULT_IMAGE)),
    os_volume_size_gb=dict(type="int", default=100, minimum=1, description="Size of the OS volume in GB."),
    os_volume_on_delete=dict(
        type="str", default="delete_permanently", choices=["delete_permanently", "move_to_trash"], description=(
            "What becomes of an instance's OS volume when the collection deletes the instance (C(down), a failed "
            "offer, a sweep). V(delete_permanently): it is deleted with the instance, as the boot disk is on the "
            "other clouds, and nothing of the VM is left on the account. V(move_to_trash): Verda's own default, "
            "the volume goes to the account's trash, where Verda keeps it for 96 hours (it can be restored from "
            "there). A spot instance that Verda discontinues takes its OS volume with it either way.")),
    ssh_user=dict(
        type="str", default="root",
        description="The image's login user that the registered SSH key authorises (Verda's images log in as "
                    "V(root)); the adapter creates no user."),
    ssh_port=dict(
        type="int", default=22, minimum=1,
        description="The SSH port of the instance, for an image whose sshd listens elsewhere than 22."),
    boot_timeout_s=shared.BOOT_TIMEOUT_S,
    poll_interval_s=shared.POLL_INTERVAL_S,
)

CREDENTIALS = shared.Credentials("verda", OPTIONS, sets=[("client_id", "client_secret")])
