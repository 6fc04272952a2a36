# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The options of the nebius adapter (``cloud_options.nebius``)."""

from __future__ import annotations

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers import options as shared

# What the documentation says of the cloud, above its options.
DESCRIPTION = ("The V(nebius) cloud: Nebius AI Cloud compute VMs, through its official Python SDK C(nebius) (gRPC; "
               "no REST API exists). The login user and the SSH key, and a boot script, go in as cloud-init user "
               "data; each VM gets its own security group.")

# What the cloud does with the user's tags (the modules' O(tags)), for its page.
TAGS = ("Labels the instance and its boot disk. The labels of a VM that is already there are changed on the "
        "instance; its boot disk keeps its create-time labels.")

OPTIONS = dict(
    project_id=dict(type="str", fallback=shared.from_environment("NEBIUS_PROJECT_ID"), description=(
        "The project (C(project-...)) the VMs are made in; a Nebius project lives in one region (C(region)). "
        "Unset: E(NEBIUS_PROJECT_ID). Required for every API call.")),
    tenant_id=dict(type="str", description=(
        "The tenant (C(tenant-...)) of C(project_id), whose capacity advisor "
        "(C(nebius.capacity.v1.ResourceAdviceService)) says which presets are out of stock. Unset: the "
        "project's parent, read with C(nebius.iam.v2.ProjectService.Get). An advisor that cannot be consulted "
        "leaves every offer available, saying why in the offer's detail.")),
    region=dict(type="str", default="eu-north1", description=(
        "The region of C(project_id) (offers are in it; a request naming only other regions is refused, "
        "naming it).")),
    iam_token=dict(type="str", no_log=True, fallback=shared.from_environment("NEBIUS_IAM_TOKEN"), description=(
        "An IAM access token (C(nebius iam get-access-token)), never logged. Unset: E(NEBIUS_IAM_TOKEN), as the "
        "SDK reads it. Exclusive with the service-account options.")),
    credentials_file=dict(type="path", description=(
        "A service-account credentials JSON file (C(nebius iam auth-public-key generate)); the SDK exchanges it "
        "for IAM tokens.")),
    service_account_id=dict(type="str", description=(
        "Service account id, with C(service_account_public_key_id) and C(service_account_private_key_file).")),
    service_account_public_key_id=dict(type="str", description="The id of the service account's public key."),
    service_account_private_key_file=dict(type="path", no_log=False, description=(
        "Path of the PEM private key of the service account.")),
    api_endpoint=dict(type="str", description=(
        "C(host:port) that every Nebius service is called at (a proxy or a test server). Unset: the SDK's own "
        "resolution of Nebius's public endpoints (C(*.api.nebius.cloud:443)).")),
    api_insecure=dict(type="bool", default=False, description=(
        "Plaintext gRPC (no TLS) to C(api_endpoint): only for a local test server.")),
    subnet_id=dict(type="str", description=(
        "The subnet of the VM's network interface. Unset: the first subnet the project lists (its default "
        "network's).")),
    image_family=dict(type="str", default="ubuntu22.04-cuda12", description=(
        "Public image family of the boot disk.")),
    disk_size_gib=dict(type="int", default=200, minimum=1, description="Boot disk size in GiB."),
    disk_type=dict(type="str", default="NETWORK_SSD", description="Boot disk type.",
                   choices=["NETWORK_SSD", "NETWORK_HDD", "NETWORK_SSD_NON_REPLICATED", "NETWORK_SSD_IO_M3"]),
    allowed_cidrs=dict(shared.ALLOWED_CIDRS, description=(
        "Source ranges of the VM's security group when the task names none (at most 8, Nebius's limit per "
        "rule). Required one way or the other: V(0.0.0.0/0) is never assumed.")),
    ssh_user=dict(type="str", default="ubuntu", description=(
        "The login user cloud-init makes with the SSH key, when the task names none.")),
    ssh_port=dict(type="int", default=22, minimum=1, description=(
        "The port sshd listens on (opened in the security group); for images whose sshd listens elsewhere.")),
    prices=dict(type="bool", default=True, description=(
        "Price offers with the billing calculator (C(nebius.billing.v1.CalculatorService)); V(false) leaves "
        "offers unpriced.")),
    python_interpreter=dict(type="str", description=(
        "The Python Ansible uses on the instance. Unset: Ansible's interpreter discovery.")),
    request_timeout_s=shared.seconds(60, "Deadline of every API call."),
    boot_timeout_s=shared.BOOT_TIMEOUT_S,
    poll_interval_s=shared.POLL_INTERVAL_S,
)

CREDENTIALS = shared.Credentials(
    "nebius", OPTIONS, required=("project_id",),
    sets=[("iam_token",), ("credentials_file",),
          ("service_account_id", "service_account_public_key_id", "service_account_private_key_file")])
