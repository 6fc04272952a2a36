# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""GCP Compute catalogue for the gcp adapter: the static GPU ladder, default
regions and images, and the names every per-VM resource gets. Pure data and
functions; no SDK import, so it is importable (and testable) anywhere.

The ladder says which machine type carries which GPU; ``plan`` intersects it
with the zones that list the machine type (and, for N1 types with attached
GPUs, the accelerator type) in the live catalogue. Prices are approximate
on-demand list prices (USD/hour, us-central1) and only a hint for ordering
and display; ``None`` where no stable list price is known. Spot prices vary
daily and are never guessed (``None``).
"""

from __future__ import annotations

import hashlib
import re
from collections import namedtuple
from typing import Dict, List, Optional

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    VM_NAME_TAG, ErrorKind, ProviderError,
)

# Regions searched when neither the request nor the ``regions`` / ``zones``
# options name any (GPU-rich regions first; order = preference).
DEFAULT_REGIONS = [
    "us-central1", "us-east4", "us-east1", "us-west1", "us-west4",
    "europe-west4", "asia-southeast1",
]

# Ubuntu images: cloud-init reads the ``user-data`` metadata key, and the
# accelerator families ship the NVIDIA driver preinstalled (GPU-ready), one family per
# driver branch (``...-with-nvidia-<branch>``). The R580 families had new images all
# through 2026; none was seen for -550 after 2025, and Google's guest tests list the -570
# families as out of date.
ACCELERATOR_IMAGES = "ubuntu-os-accelerator-images"
ACCELERATOR_FAMILIES = {580: "ubuntu-accelerator-2204-amd64-with-nvidia-580"}
CPU_IMAGE = ("ubuntu-os-cloud", "ubuntu-2204-lts")

# The GPU generation of each GPU and the NVIDIA driver branches that run it (oldest,
# newest; None = no bound): Blackwell needs R570 or later (NVIDIA: HGX B200 from
# 570.133.20), R580 is the last branch for Volta. The default image of a GPU is the
# family of the newest branch in its range.
GENERATIONS = {"T4": "Turing", "V100": "Volta", "L4": "Ada", "A100": "Ampere", "A100-80GB": "Ampere",
               "H100": "Hopper", "H200": "Hopper", "B200": "Blackwell"}
DRIVER_BRANCHES = {"Volta": (None, 580), "Turing": (None, None), "Ampere": (None, None), "Ada": (None, None),
                   "Hopper": (None, None), "Blackwell": (570, None)}
_FAMILY_BRANCH_RE = re.compile(r"-with-nvidia-(\d+)")


def _branches(gpu: str):
    return DRIVER_BRANCHES[GENERATIONS[gpu]]


def gpu_image(gpu: str):
    """(project, family) of the default boot image for ``gpu``: the accelerator family of
    the newest driver branch that runs its generation."""
    oldest, newest = _branches(gpu)
    fits = [b for b in ACCELERATOR_FAMILIES if (oldest is None or b >= oldest) and (newest is None or b <= newest)]
    return ACCELERATOR_IMAGES, ACCELERATOR_FAMILIES[max(fits)]


def check_driver(gpu: str, family: str) -> None:
    """InvalidRequest naming image_family when the family's name says its driver branch
    cannot run ``gpu`` (a family that names no branch is taken as the user's choice)."""
    named = _FAMILY_BRANCH_RE.search(family or "")
    if not named:
        return
    branch, (oldest, newest) = int(named.group(1)), _branches(gpu)
    if (oldest is not None and branch < oldest) or (newest is not None and branch > newest):
        need = "R%d or later" % oldest if oldest is not None and branch < oldest else "R%d or earlier" % newest
        raise ProviderError(ErrorKind.INVALID_REQUEST, "image_family: %s ships NVIDIA driver R%d; the %s (%s) needs "
                            "%s" % (family, branch, gpu, GENERATIONS[gpu], need))


# gpu: canonical name (None = CPU only); count: GPUs in the VM; accelerator:
# acceleratorType name; attached: True when the GPUs are added through
# guestAccelerators (N1), False when built into the machine type (A2/A3/A4/G2);
# spot_only: GCP sells the type only as Spot / flex-start (or through a reservation,
# which gpuprov does not use): A3 High below 8 GPUs, A3 Ultra and A4 (Google's
# "consumption option availability by machine type"); disk: boot disk type
# the series supports; nic: nicType the series needs (None = default).
Rung = namedtuple("Rung", "gpu count machine_type accelerator attached price spot_only disk nic")


def _r(gpu, count, machine_type, accelerator, price, attached=False, spot_only=False,
       disk="pd-balanced", nic=None):
    return Rung(gpu, count, machine_type, accelerator, attached, price, spot_only, disk, nic)


_HD, _GV = "hyperdisk-balanced", "GVNIC"

LADDER = [
    _r(None, 0, "e2-standard-2", None, 0.067),
    _r("T4", 1, "n1-standard-4", "nvidia-tesla-t4", 0.54, attached=True),
    _r("T4", 2, "n1-standard-8", "nvidia-tesla-t4", 1.08, attached=True),
    _r("T4", 4, "n1-standard-16", "nvidia-tesla-t4", 2.16, attached=True),
    _r("V100", 1, "n1-standard-8", "nvidia-tesla-v100", 2.86, attached=True),
    _r("V100", 2, "n1-standard-16", "nvidia-tesla-v100", 5.72, attached=True),
    _r("V100", 4, "n1-standard-32", "nvidia-tesla-v100", 11.44, attached=True),
    _r("V100", 8, "n1-standard-64", "nvidia-tesla-v100", 22.88, attached=True),
    _r("L4", 1, "g2-standard-4", "nvidia-l4", 0.71),
    _r("L4", 2, "g2-standard-24", "nvidia-l4", 2.00),
    _r("L4", 4, "g2-standard-48", "nvidia-l4", 4.00),
    _r("L4", 8, "g2-standard-96", "nvidia-l4", 8.00),
    _r("A100", 1, "a2-highgpu-1g", "nvidia-tesla-a100", 3.67),
    _r("A100", 2, "a2-highgpu-2g", "nvidia-tesla-a100", 7.35),
    _r("A100", 4, "a2-highgpu-4g", "nvidia-tesla-a100", 14.69),
    _r("A100", 8, "a2-highgpu-8g", "nvidia-tesla-a100", 29.39),
    _r("A100", 16, "a2-megagpu-16g", "nvidia-tesla-a100", 55.74),
    _r("A100-80GB", 1, "a2-ultragpu-1g", "nvidia-a100-80gb", 5.07),
    _r("A100-80GB", 2, "a2-ultragpu-2g", "nvidia-a100-80gb", 10.14),
    _r("A100-80GB", 4, "a2-ultragpu-4g", "nvidia-a100-80gb", 20.28),
    _r("A100-80GB", 8, "a2-ultragpu-8g", "nvidia-a100-80gb", 40.55),
    _r("H100", 1, "a3-highgpu-1g", "nvidia-h100-80gb", None, spot_only=True, nic=_GV),
    _r("H100", 2, "a3-highgpu-2g", "nvidia-h100-80gb", None, spot_only=True, nic=_GV),
    _r("H100", 4, "a3-highgpu-4g", "nvidia-h100-80gb", None, spot_only=True, nic=_GV),
    _r("H100", 8, "a3-highgpu-8g", "nvidia-h100-80gb", 88.25, nic=_GV),
    _r("H100", 8, "a3-megagpu-8g", "nvidia-h100-mega-80gb", None, nic=_GV),
    _r("H200", 8, "a3-ultragpu-8g", "nvidia-h200-141gb", None, spot_only=True, disk=_HD, nic=_GV),
    _r("B200", 8, "a4-highgpu-8g", "nvidia-b200", None, spot_only=True, disk=_HD, nic=_GV),
]


def gcp_gpus() -> List[str]:
    return sorted({r.gpu for r in LADDER if r.gpu})


def select_rungs(gpu: Optional[str], count: int, spot: bool) -> List[Rung]:
    """The rungs that serve ``count`` x ``gpu``: the smallest GPU count >= the
    ask that GCP sells in that pricing model (so 3 x A100 gets a2-highgpu-4g,
    1 x H100 on demand gets a3-highgpu-8g). Raises InvalidRequest naming the field."""
    if gpu is None:
        return [r for r in LADDER if r.gpu is None]
    rungs = [r for r in LADDER if r.gpu == gpu]
    if not rungs:
        raise ProviderError(ErrorKind.INVALID_REQUEST, "gpu: GCP offers no %s; GCP GPUs: %s"
                            % (gpu, ", ".join(gcp_gpus())))
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise ProviderError(ErrorKind.INVALID_REQUEST,
                            "gpu_count: expected a positive integer, got %r" % (count,))
    sold = [r for r in rungs if spot or not r.spot_only]
    if not sold:
        raise ProviderError(ErrorKind.INVALID_REQUEST, "spot: GCP sells the %s only as Spot or flex-start (or "
                            "through a reservation, which gpuprov does not use); ask for spot" % gpu)
    fits = [r for r in sold if r.count >= count]
    if not fits:
        most = max(r.count for r in sold)
        raise ProviderError(ErrorKind.INVALID_REQUEST, "gpu_count: GCP sells at most %d x %s in one VM%s, asked for %d"
                            % (most, gpu, "" if spot else " on demand", count))
    least = min(r.count for r in fits)
    return [r for r in fits if r.count == least]


def rung_of(machine_type: str) -> Optional[Rung]:
    """The ladder rung of a machine type (None for one the ladder does not list)."""
    return next((r for r in LADDER if r.machine_type == machine_type), None)


# Compute Engine's metadata limits: each value at most 256 KiB, all keys and values under 512 KB.
METADATA_VALUE_MAX = 262144
METADATA_TOTAL_MAX = 512 * 1024


def check_metadata(items: Dict[str, str]) -> None:
    """InvalidRequest naming boot_script when the instance metadata would pass GCP's limits."""
    sizes = {key: len(value.encode("utf-8")) for key, value in items.items()}
    for key, size in sizes.items():
        if size > METADATA_VALUE_MAX:
            raise ProviderError(ErrorKind.INVALID_REQUEST, "boot_script: the %s metadata value would be %d bytes; "
                                "GCP takes at most %d bytes a value" % (key, size, METADATA_VALUE_MAX))
    total = sum(sizes.values()) + sum(len(k.encode("utf-8")) for k in items)
    if total >= METADATA_TOTAL_MAX:
        raise ProviderError(ErrorKind.INVALID_REQUEST, "boot_script: the instance metadata would be %d bytes; GCP "
                            "takes less than %d bytes in all" % (total, METADATA_TOTAL_MAX))


def region_of(zone: str) -> str:
    """us-central1-a -> us-central1."""
    return zone.rsplit("-", 1)[0]


def _bounded(prefix: str, vm_name: str, suffix: str = "") -> str:
    """``prefix + vm_name + suffix`` cut to a 63-character GCP name, kept unique by a
    hash of the VM name (the suffix always survives)."""
    name = prefix + vm_name + suffix
    if len(name) <= 63:
        return name
    digest = hashlib.sha256(vm_name.encode()).hexdigest()[:8]
    return (prefix + vm_name)[:63 - 9 - len(suffix)].rstrip("-") + "-" + digest + suffix


def instance_name(vm_name: str) -> str:
    """The instance name: the VM name itself (it becomes the hostname), with a
    ``g-`` prefix when it starts with a digit (GCP names start with a letter)."""
    return vm_name if vm_name[:1].isalpha() else _bounded("g-", vm_name)


def journal_suffix(journal_id: Optional[str]) -> str:
    """``-j`` + 8 hex digits of the journal id's hash ('' without a journal id).

    Firewall rules are global and have no labels, so two controllers' rules for
    one VM name must differ by name; the full journal id is in the description."""
    return "-j" + hashlib.sha256(journal_id.encode()).hexdigest()[:8] if journal_id else ""


def firewall_name(vm_name: str, journal_id: Optional[str] = None) -> str:
    """The per-VM firewall rule of the journal ``journal_id``, also the instance's
    network tag. Without a journal id: the name rules had before journal ids."""
    return _bounded("gpuprov-", vm_name, journal_suffix(journal_id))


# Label keys: a lowercase letter, then lowercase letters, digits, '_' and '-'; values:
# lowercase letters, digits, '_' and '-'; both at most 63 characters.
_LABEL_KEY_RE = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
_LABEL_VALUE_RE = re.compile(r"^[a-z0-9_-]{0,63}$")


def checked_labels(labels: Dict[str, str]) -> Dict[str, str]:
    """``labels`` if every key and value is a valid GCP label, else InvalidRequest."""
    for key, value in labels.items():
        if not _LABEL_KEY_RE.match(key) or not isinstance(value, str) or not _LABEL_VALUE_RE.match(value):
            raise ProviderError(ErrorKind.INVALID_REQUEST,
                                "%s: %r cannot be a GCP label value (at most 63 lowercase letters, digits, "
                                "'-' and '_')" % (key, value))
    return labels


# The identity a firewall rule's description carries, as ``key=value`` pairs
# (firewall rules have no labels).
_DESCRIBED_RE = re.compile(r"(gpuprov-[a-z-]+)=([a-z0-9_-]+)")


def describe_identity(labels: Dict[str, str]) -> str:
    """``(k=v, k=v)`` for a firewall description; read back by described_identity."""
    return "(%s)" % ", ".join("%s=%s" % (k, labels[k]) for k in sorted(labels, key=lambda k: (k != VM_NAME_TAG, k)))


def described_identity(description: Optional[str]) -> Dict[str, str]:
    """The identity labels written into a firewall description by describe_identity."""
    return dict(_DESCRIBED_RE.findall(description or ""))
