# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Canonical GPU names and the spellings users and vendors use for them."""

from __future__ import annotations

from typing import Any, Optional

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    ErrorKind, ProviderError,
)

# canonical name -> memory in GiB (documentation and tie-breaking only)
GPUS = {
    "T4": 16, "L4": 24, "A10": 24, "A10G": 24, "L40": 48, "L40S": 48,
    "A40": 48, "A6000": 48, "RTX4090": 24, "RTX6000ADA": 48,
    "V100": 16, "A100": 40, "A100-80GB": 80, "H100": 80, "H200": 141,
    "GH200": 96, "B200": 180, "MI300X": 192,
    "A4000": 16, "A4500": 20, "A5000": 24, "RTX3090": 24, "RTX4080": 16, "RTX5090": 32,
    "RTX6000": 24, "RTXPRO6000": 96, "A16": 16, "V100-32GB": 32,
    "H100-NVL": 94, "B300": 288, "GB200": 186, "GB300": 288, "MI325X": 256,
    "A30": 24, "H200-NVL": 143, "RTX2000ADA": 16, "RTX4000ADA": 20, "RTX5000ADA": 32, "RTX5080": 16,
    "RTXPRO4500": 32,
}

_ALIASES = {
    "A100-40GB": "A100", "A100_40GB": "A100", "A10080GB": "A100-80GB", "A100_80GB": "A100-80GB",
    "H100-80GB": "H100", "H100_SXM": "H100", "H100-SXM": "H100", "H100SXM": "H100",
    "RTX-4090": "RTX4090", "RTX_4090": "RTX4090", "RTXA6000": "A6000", "RTX-A6000": "A6000",
    "RTX6000-ADA": "RTX6000ADA",
    "RTXA4000": "A4000", "RTX-A4000": "A4000", "RTXA4500": "A4500", "RTX-A4500": "A4500",
    "RTXA5000": "A5000", "RTX-A5000": "A5000", "RTX-3090": "RTX3090", "RTX_3090": "RTX3090",
    "RTX-4080": "RTX4080", "RTX-5090": "RTX5090", "RTX_5090": "RTX5090", "QUADRORTX6000": "RTX6000",
    "RTXPRO6000BLACKWELL": "RTXPRO6000", "RTX-PRO-6000": "RTXPRO6000", "H100NVL": "H100-NVL",
    "H100_NVL": "H100-NVL", "V10032GB": "V100-32GB", "V100_32GB": "V100-32GB",
    "H200NVL": "H200-NVL", "H200_NVL": "H200-NVL", "RTX2000-ADA": "RTX2000ADA", "RTX4000-ADA": "RTX4000ADA",
    "RTX5000-ADA": "RTX5000ADA", "RTX-5080": "RTX5080", "RTX-PRO-4500": "RTXPRO4500",
}

NO_GPU = ("", "none", "no", "cpu")


def canonical_gpu(value: Any, field: str = "gpu") -> Optional[str]:
    """Return the canonical GPU name, None for 'no GPU', or raise InvalidRequest."""
    if value is None:
        return None
    text = str(value).strip()
    if text.lower() in NO_GPU:
        return None
    key = text.upper().replace(" ", "")
    key = _ALIASES.get(key, key)
    if key in GPUS:
        return key
    raise ProviderError(
        ErrorKind.INVALID_REQUEST,
        "%s: unknown GPU %r; expected one of %s (or 'none')" % (field, value, ", ".join(sorted(GPUS))),
    )
