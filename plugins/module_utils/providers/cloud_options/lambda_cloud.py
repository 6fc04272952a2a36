# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The options of the lambda adapter (``cloud_options.lambda``)."""

from __future__ import annotations

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers import options as shared

# What the documentation says of the cloud, above its options.
DESCRIPTION = ("The V(lambda) cloud: Lambda Cloud (Lambda Labs) VMs, through its REST API v1. A boot script runs "
               "as cloud-init user data; each VM gets its own firewall ruleset.")

# What the cloud does with the user's tags (the modules' O(tags)), for its page.
TAGS = ("Tags the instance. Lambda's API changes only an instance's name, so the tags of a VM that is already "
        "there cannot change (a warning says so once per asked-for change, and the VM keeps the tags it was made "
        "with).")

OPTIONS = dict(
    api_url=shared.api_url("https://cloud.lambda.ai/api/v1"),
    api_key=dict(shared.api_key("LAMBDA_API_KEY"), description=(
        "Lambda Cloud API key, sent as a bearer token (never logged). Unset: E(LAMBDA_API_KEY).")),
    regions=dict(shared.REGIONS, description=(
        "Regions to search, in order, when the request names none (the module's C(regions) wins). Unset: every "
        "region that Lambda lists with capacity.")),
    allowed_cidrs=dict(shared.ALLOWED_CIDRS, description=(
        "Source ranges of the VM's firewall ruleset when the task names none. Required one way or the other: "
        "lambda never opens V(0.0.0.0/0) by default. IPv4 only (Lambda's rules and instances are IPv4; IPv6 "
        "ranges are left out). The account's global ruleset still applies on top.")),
    k3s_direct=shared.k3s_direct(False),
    ssh_user=dict(type="str", default="ubuntu", description=(
        "The login user of the image. Lambda's images log in as V(ubuntu); the task's C(ssh_user) does not "
        "change it.")),
    ssh_port=dict(type="int", default=22, minimum=1, description=(
        "The port sshd listens on, for an image whose sshd listens elsewhere than 22 (it is opened in the "
        "firewall ruleset too).")),
    image_family=dict(type="str", description=(
        "Boot image family (C(GET /images) lists them, e.g. V(lambda-stack-22-04)). Unset: Lambda's default, the "
        "latest Lambda Stack image.")),
    image_id=dict(type="str", description="Boot image id; exclusive with C(image_family)."),
    python_interpreter=dict(type="str", description=(
        "The Python Ansible uses on the instance. Unset: Ansible's interpreter discovery (V(/usr/bin/python3) on "
        "Lambda's Ubuntu images).")),
    firewall_unsupported_regions=dict(type="list", elements="str", default=["us-south-1"], description=(
        "Regions where Lambda applies no firewall rules (its docs name V(us-south-1)): no ruleset is made there "
        "and the VM is reachable as the account's global rules allow.")),
    request_timeout_s=shared.seconds(60, "Read timeout of every API request."),
    boot_timeout_s=shared.BOOT_TIMEOUT_S,
    poll_interval_s=shared.POLL_INTERVAL_S,
)

CREDENTIALS = shared.Credentials("lambda", OPTIONS, sets=[("api_key",)])
