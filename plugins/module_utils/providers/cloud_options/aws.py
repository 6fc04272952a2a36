# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The options of the aws adapter (``cloud_options.aws``)."""

from __future__ import annotations

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers import options as shared

DEFAULT_CONTROLLER_IP_URL = "https://checkip.amazonaws.com"

# What the documentation says of the cloud, above its options.
DESCRIPTION = "The V(aws) cloud: Amazon EC2, through boto3."

# What the cloud does with the user's tags (the modules' O(tags)), for its page.
TAGS = ("Tags the instance, its volumes and its security group; a C(Name) tag names them in the console in place "
        "of gpuprov's (the VM name, the group's name). The tags of a VM that is already there are changed in "
        "place.")

OPTIONS = dict(
    aws_access_key_id=dict(
        type="str", no_log=True, fallback=shared.from_environment("AWS_ACCESS_KEY_ID"),
        description="Access key id. Not used when C(profile) is set. Unset (here and in the environment): "
                    "boto3's chain (shared files, SSO, container and instance metadata)."),
    aws_secret_access_key=dict(
        type="str", no_log=True, fallback=shared.from_environment("AWS_SECRET_ACCESS_KEY"),
        description="Secret access key of C(aws_access_key_id)."),
    aws_session_token=dict(
        type="str", no_log=True, fallback=shared.from_environment("AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"),
        description="Session token of temporary credentials."),
    profile=dict(
        type="str", fallback=shared.from_environment("AWS_PROFILE"),
        description="A profile of the shared AWS files (C(~/.aws/config), C(~/.aws/credentials)); it wins over "
                    "the key options."),
    endpoint_url=dict(
        type="str", fallback=shared.from_environment("AWS_ENDPOINT_URL"),
        description="API endpoint of every client (a test server, a VPC endpoint)."),
    regions=dict(shared.REGIONS, aliases=["region"], description=(
        "Regions to search, in order, when the request names none (the module's C(regions) wins). Default: "
        "the large US regions, then the large EU ones (the adapter's catalog). E(AWS_REGION) is not read: "
        "this is a search order, not one region.")),
    ami_id=dict(type="raw", description="Image to boot: an AMI id, or a mapping of region to AMI id."),
    ami_ssm_parameter=dict(
        type="str", description="SSM parameter holding the image id; V('') skips SSM. Default: the Deep Learning "
                                "Base OSS Nvidia Driver (Ubuntu 22.04) parameter for GPU types, Canonical's Ubuntu "
                                "22.04 for CPU types."),
    ami_name_filter=dict(type="str", description="Image name pattern of the DescribeImages fallback."),
    ami_owners=dict(type="list", elements="str", description="Image owners of the DescribeImages fallback."),
    ssh_user=shared.ssh_user("V(ubuntu), the default images' user"),
    allowed_cidrs=dict(shared.ALLOWED_CIDRS, description=(
        "Source addresses (CIDRs) allowed to reach the instance when the task names none. Unset: this "
        "controller's public address (/32), as C(controller_ip_url) reports it. V(0.0.0.0/0) is used only when "
        "given explicitly.")),
    controller_ip_url=dict(
        type="str", default=DEFAULT_CONTROLLER_IP_URL,
        description="Where to ask this controller's public address when no CIDR is given; V('') disables the "
                    "lookup (C(allowed_cidrs) is then required)."),
    k3s_direct=shared.k3s_direct(False),
    boot_timeout_s=shared.BOOT_TIMEOUT_S,
    poll_interval_s=shared.POLL_INTERVAL_S,
)

# Where boto3 finds credentials (the adapter's check_credentials resolves its chain locally, and names these
# when it finds none).
CREDENTIALS = shared.Credentials(
    "aws", OPTIONS, sets=[("aws_access_key_id", "aws_secret_access_key"), ("profile",)],
    files=("~/.aws/credentials", "~/.aws/config"),
    also=("run aws configure (it writes ~/.aws/credentials)",))
