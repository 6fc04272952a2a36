# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the adapters' ``list_owned`` (providers/<cloud>/owned.py) share: where a resource
is listed, the journal a name's ``j<8 hex>`` mark stands for, and a price in cents.

Global resources (registered SSH keys, and on some clouds firewalls) live at the region
``global`` and are listed when the sweep asks about ``ANY_REGION`` or ``global``, never
once per region, so a sweep over several regions lists each once.
"""

from __future__ import annotations

import hashlib
from typing import Any, Optional

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    ANY_REGION, Location, ProviderError, validate_vm_name,
)

GLOBAL = "global"   # the region of an account-wide resource
UNPLACED = "unplaced"   # the region of an instance the listing names none for (not placed yet)


def lists_region(location: Location, region: Optional[str]) -> bool:
    """True when a resource in ``region`` belongs to the listing of ``location``."""
    return location.region == ANY_REGION or region == location.region


def lists_global(location: Location) -> bool:
    """True when the listing of ``location`` includes account-wide resources."""
    return location.region in (ANY_REGION, GLOBAL)


def mark_of(journal_id: Optional[str]) -> str:
    """The 8 hex digits of sha256(journal id) that names carry as ``j<8 hex>``."""
    return hashlib.sha256(journal_id.encode("utf-8")).hexdigest()[:8] if journal_id else ""


def journal_of_mark(mark: Optional[str], own_journal_id: Optional[str]) -> Optional[str]:
    """The journal a name's mark (8 hex, without the ``j``) stands for: the adapter's own
    journal id when the mark is its, else ``j<mark>`` (another journal's; a name holds only
    the hash of its id), None without a mark (made before journal ids)."""
    if not mark:
        return None
    return own_journal_id if own_journal_id and mark_of(own_journal_id) == mark else "j" + mark


def dollars(cents: Any) -> Optional[float]:
    """US cents (a number) as dollars; None for anything else."""
    if isinstance(cents, bool) or not isinstance(cents, (int, float)):
        return None
    return round(cents / 100.0, 4)


def number(value: Any) -> Optional[float]:
    """A price the API gave as a number or a numeric string; None for anything else."""
    if isinstance(value, bool):
        return None
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def vm_name_or_none(text: str) -> Optional[str]:
    """``text`` when it is a valid VM name (read back out of a vendor-side name), else None."""
    try:
        return validate_vm_name(text)
    except ProviderError:
        return None
