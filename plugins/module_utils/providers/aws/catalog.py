# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Static data of the AWS adapter: the GPU -> instance-type ladder, default regions
and the default images. Plain data and pure functions; no SDK, no network.

The ladder is deliberately static (the seed's "static GPU -> type ladder x
regions"): whether a type is offered in a region is checked live by ``prepare``
(DescribeInstanceTypeOfferings), and capacity only shows at ``RunInstances``.
Prices are us-east-1 on-demand Linux list prices in USD/hour at the time of
writing, for ordering and display only; ``None`` where we do not know a stable
figure (the P4/P5/P6 families were repriced in 2025).
"""

from __future__ import annotations

import collections
import re
from typing import Any, Dict, List, Optional, Tuple

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    ErrorKind, ProviderError,
)

Rung = collections.namedtuple("Rung", "gpu count instance_type vcpus memory_gib price")

# Regions tried when a request names none, in this order: the large US regions
# first (most GPU types and capacity), then the two large EU ones.
DEFAULT_REGIONS = ("us-east-1", "us-east-2", "us-west-2", "eu-west-1", "eu-central-1")

# The regions AWS has: every region of its partitions (commercial, China, GovCloud, the ISO
# partitions and the European Sovereign Cloud) in botocore's endpoint data (1.40). A request
# naming a region that looks like an AWS one and is not here is looked up in the installed
# botocore's list too (a newer SDK knows a newer region) before plan calls it unknown.
REGIONS = (
    "af-south-1", "ap-east-1", "ap-east-2", "ap-northeast-1", "ap-northeast-2", "ap-northeast-3", "ap-south-1",
    "ap-south-2", "ap-southeast-1", "ap-southeast-2", "ap-southeast-3", "ap-southeast-4", "ap-southeast-5",
    "ap-southeast-6", "ap-southeast-7", "ca-central-1", "ca-west-1", "cn-north-1", "cn-northwest-1",
    "eu-central-1", "eu-central-2", "eu-isoe-west-1", "eu-north-1", "eu-south-1", "eu-south-2", "eu-west-1",
    "eu-west-2", "eu-west-3", "eusc-de-east-1", "il-central-1", "me-central-1", "me-south-1", "mx-central-1",
    "sa-east-1", "us-east-1", "us-east-2", "us-gov-east-1", "us-gov-west-1", "us-iso-east-1", "us-iso-west-1",
    "us-isob-east-1", "us-isob-west-1", "us-isof-east-1", "us-isof-south-1", "us-west-1", "us-west-2",
)

# Within one (gpu, count), rungs are listed cheapest first; plan keeps that order.
# Only types the default GPU image supports are here: its open NVIDIA kernel modules
# need a Turing or newer GPU, so the V100 (p3, Volta) is left out; see LEFT_OUT.
LADDER = (
    Rung("T4", 1, "g4dn.xlarge", 4, 16, 0.526),
    Rung("T4", 1, "g4dn.2xlarge", 8, 32, 0.752),
    Rung("T4", 1, "g4dn.4xlarge", 16, 64, 1.204),
    Rung("T4", 1, "g4dn.8xlarge", 32, 128, 2.176),
    Rung("T4", 1, "g4dn.16xlarge", 64, 256, 4.352),
    Rung("T4", 4, "g4dn.12xlarge", 48, 192, 3.912),
    Rung("T4", 8, "g4dn.metal", 96, 384, 7.824),
    Rung("L4", 1, "g6.xlarge", 4, 16, 0.8048),
    Rung("L4", 1, "g6.2xlarge", 8, 32, 0.9776),
    Rung("L4", 1, "g6.4xlarge", 16, 64, 1.3232),
    Rung("L4", 1, "g6.8xlarge", 32, 128, 2.0144),
    Rung("L4", 1, "g6.16xlarge", 64, 256, 3.3968),
    Rung("L4", 4, "g6.12xlarge", 48, 192, 4.6016),
    Rung("L4", 4, "g6.24xlarge", 96, 384, 6.6752),
    Rung("L4", 8, "g6.48xlarge", 192, 768, 13.3504),
    Rung("A10G", 1, "g5.xlarge", 4, 16, 1.006),
    Rung("A10G", 1, "g5.2xlarge", 8, 32, 1.212),
    Rung("A10G", 1, "g5.4xlarge", 16, 64, 1.624),
    Rung("A10G", 1, "g5.8xlarge", 32, 128, 2.448),
    Rung("A10G", 1, "g5.16xlarge", 64, 256, 4.096),
    Rung("A10G", 4, "g5.12xlarge", 48, 192, 5.672),
    Rung("A10G", 4, "g5.24xlarge", 96, 384, 8.144),
    Rung("A10G", 8, "g5.48xlarge", 192, 768, 16.288),
    Rung("L40S", 1, "g6e.xlarge", 4, 32, 1.861),
    Rung("L40S", 1, "g6e.2xlarge", 8, 64, 2.242),
    Rung("L40S", 1, "g6e.4xlarge", 16, 128, 3.004),
    Rung("L40S", 1, "g6e.8xlarge", 32, 256, 4.529),
    Rung("L40S", 1, "g6e.16xlarge", 64, 512, 7.577),
    Rung("L40S", 4, "g6e.12xlarge", 48, 384, 10.493),
    Rung("L40S", 4, "g6e.24xlarge", 96, 768, 15.066),
    Rung("L40S", 8, "g6e.48xlarge", 192, 1536, 30.131),
    Rung("A100", 8, "p4d.24xlarge", 96, 1152, None),
    Rung("A100-80GB", 8, "p4de.24xlarge", 96, 1152, None),
    Rung("H100", 1, "p5.4xlarge", 16, 256, None),
    Rung("H100", 8, "p5.48xlarge", 192, 2048, None),
    Rung("H200", 8, "p5e.48xlarge", 192, 2048, None),
    Rung("H200", 8, "p5en.48xlarge", 192, 2048, None),
    Rung("B200", 8, "p6-b200.48xlarge", 192, 2048, None),
)

# gpu=None ("no GPU needed"): small general-purpose types, cheapest first. Used by
# smoke tests and CPU-only k3s nodes.
CPU_RUNGS = (
    Rung(None, 0, "t3.medium", 2, 4, 0.0416),
    Rung(None, 0, "t3.large", 2, 8, 0.0832),
    Rung(None, 0, "m5.large", 2, 8, 0.096),
)

# AWS sells the A10 only as its A10G variant.
GPU_ALIASES = {"A10": "A10G"}

# GPUs AWS sells that the ladder leaves out, and why (said when one is asked for).
LEFT_OUT = {
    "V100": "the p3 types are offered in none of the default regions, and the default GPU image (Deep "
            "Learning Base OSS Nvidia Driver AMI: open kernel modules, Turing or newer) leaves P3 out of "
            "its supported instances",
}

# Default images. GPU types get the AWS Deep Learning Base OSS Nvidia Driver AMI
# (Ubuntu 22.04: NVIDIA driver, CUDA, container toolkit), CPU types plain Ubuntu
# 22.04. First the public SSM parameter AWS publishes for the latest image; if it
# cannot be read, the newest image matching the name filter from the owners.
DEFAULT_IMAGES = {
    "gpu": {
        "ssm": "/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id",
        "name": "Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 22.04) *",
        "owners": ["amazon"],
    },
    "cpu": {
        "ssm": "/aws/service/canonical/ubuntu/server/22.04/stable/current/amd64/hvm/ebs-gp2/ami-id",
        "name": "ubuntu/images/hvm-ssd/ubuntu-jammy-22.04-amd64-server-*",
        "owners": ["099720109477"],  # Canonical
    },
}
DEFAULT_SSH_USER = "ubuntu"  # both default images

_REGION_RE = re.compile(r"^[a-z]{2,4}(-[a-z]+)+-[0-9]$")


def looks_like_region(name: Any) -> bool:
    """Whether ``name`` has the shape of an AWS region name (us-east-1, us-gov-west-1, eusc-de-east-1)."""
    return isinstance(name, str) and bool(_REGION_RE.match(name))


def rungs_for(gpu: Optional[str], gpu_count: Any) -> List[Rung]:
    """The ladder rungs that satisfy (gpu, gpu_count), or InvalidRequest naming the field."""
    if gpu is None:
        return list(CPU_RUNGS)
    gpu = GPU_ALIASES.get(gpu, gpu)
    same_gpu = [r for r in LADDER if r.gpu == gpu]
    if not same_gpu:
        offered = sorted({r.gpu for r in LADDER} | set(GPU_ALIASES))
        why = ("gpu: gpuprov plans no AWS type with %s: %s. " % (gpu, LEFT_OUT[gpu])) if gpu in LEFT_OUT else (
            "gpu: AWS has no instance type with %s; " % gpu)
        raise ProviderError(ErrorKind.INVALID_REQUEST, "%sit offers %s" % (why, ", ".join(offered)))
    if isinstance(gpu_count, bool) or not isinstance(gpu_count, int) or gpu_count < 1:
        raise ProviderError(ErrorKind.INVALID_REQUEST,
                            "gpu_count: expected a positive integer, got %r" % (gpu_count,))
    rungs = [r for r in same_gpu if r.count == gpu_count]
    if not rungs:
        counts = sorted({r.count for r in same_gpu})
        raise ProviderError(ErrorKind.INVALID_REQUEST,
                            "gpu_count: AWS offers %s in counts of %s, not %d"
                            % (gpu, ", ".join(str(c) for c in counts), gpu_count))
    return rungs


def regions_for(requested: Any, default: Any = None) -> Tuple[str, ...]:
    """Requested regions (validated, de-duplicated, in order) or the default list."""
    regions = requested or default or DEFAULT_REGIONS
    if isinstance(regions, str):
        regions = [r.strip() for r in regions.split(",") if r.strip()]
    out: List[str] = []
    for region in regions:
        if not looks_like_region(region):
            raise ProviderError(ErrorKind.INVALID_REQUEST,
                                "regions: %r is not an AWS region name (e.g. us-east-1)" % (region,))
        if region not in out:
            out.append(region)
    return tuple(out)


def image_defaults(gpu: Optional[str], options: Dict[str, Any]) -> Dict[str, Any]:
    """SSM parameter, name filter and owners for this offer, after the user's options."""
    base = DEFAULT_IMAGES["gpu" if gpu else "cpu"]
    ssm = options.get("ami_ssm_parameter")  # None (unset) = default, '' = skip SSM
    return {
        "ssm": base["ssm"] if ssm is None else ssm,
        "name": options.get("ami_name_filter") or base["name"],
        "owners": list(options.get("ami_owners") or base["owners"]),
    }
