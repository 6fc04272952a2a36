# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Prices as people read them, one way everywhere: ``$2.49``, ``$0``, ``$0.0125`` (at most four
decimals, trailing zeros dropped), so a price never prints as ``$0.0/h`` in one place and ``$0/h`` in
another."""

from __future__ import annotations

from typing import Optional


def amount(value: float) -> str:
    """``value`` in US dollars without the sign: ``2.49``, ``0``."""
    return ("%.4f" % value).rstrip("0").rstrip(".") or "0"


def usd(value: float) -> str:
    """``$2.49``."""
    return "$" + amount(value)


def per_hour(value: Optional[float]) -> str:
    """``$2.49/h``; empty for a price the cloud does not report."""
    return "" if value is None else "%s/h" % usd(value)
