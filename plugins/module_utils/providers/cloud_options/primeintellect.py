# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The options of the primeintellect adapter (``cloud_options.primeintellect``)."""

from __future__ import annotations

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers import options as shared

# What the documentation says of the cloud, above its options.
DESCRIPTION = (
    "The V(primeintellect) cloud: Prime Intellect's GPU marketplace, through its REST API v1. Offers come from "
    "many underlying providers; a pod is a container or a VM depending on the provider, so k3s is never "
    "installed there, and no boot script runs (Prime has no user data). The SSH user and port come from the "
    "pod's connection string.")

# What the cloud does with the user's tags (the modules' O(tags)), for its page.
TAGS = ("Takes no tags: the modules' C(tags) are ignored here.")

OPTIONS = dict(
    api_url=dict(shared.api_url("https://api.primeintellect.ai"), description=(
        "Base URL of Prime Intellect's API, with or without its C(/api/v1) suffix (Prime's CLI takes either); "
        "point it at a proxy or a test server.")),
    api_key=shared.api_key("PRIME_API_KEY"),
    regions=dict(shared.REGIONS, description=(
        "Data centers (an offer's C(dataCenter), e.g. V(CANADA-1)), Prime's region names (an offer's C(region), "
        "e.g. V(united_states), V(canada)) or countries (e.g. V(US)) to search, when the request names none (the "
        "module's C(regions) wins). Unset: every location.")),
    providers=dict(type="list", elements="str", description=(
        "Only offers of these underlying providers (e.g. V(runpod), V(hyperstack), V(primecompute)). Unset: "
        "every provider.")),
    security=dict(type="str", default="any", choices=["any", "secure_cloud", "community_cloud"], description=(
        "Only offers of this kind: V(secure_cloud) (data centers), V(community_cloud), or V(any) (both).")),
    image=dict(type="str", default="ubuntu_22_cuda_12", description=(
        "The pod's image, one of Prime's environment names; offers that do not list it are unavailable.")),
    disk_size_gb=dict(type="int", minimum=1, description=(
        "The pod's disk in GB (C(diskSize)). Unset: the offer's default.")),
    team_id=dict(type="str", description="Create pods for this Prime team (C(team.teamId)). Unset: the key's user."),
    boot_timeout_s=shared.BOOT_TIMEOUT_S,
    poll_interval_s=shared.POLL_INTERVAL_S,
)

CREDENTIALS = shared.Credentials("primeintellect", OPTIONS, sets=[("api_key",)])
