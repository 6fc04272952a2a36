# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which offers of a launch search are still open: the blocks an offer's failure leaves (one
offer, an instance type, a region or a whole cloud, the adapter's BlockScope) and the next offer
none of them skips. Plain data in, plain data out: the launch machine journals both."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import BlockScope, ErrorKind, Offer


def is_blocked(offer: Dict[str, Any], blocks: List[Dict[str, Any]]) -> bool:
    for b in blocks:
        if b["cloud"] != offer["cloud"]:
            continue
        scope = b["scope"]
        if scope == BlockScope.CLOUD:
            return True
        if b["region"] != offer["region"]:
            continue
        if scope == BlockScope.REGION:
            return True
        if scope == BlockScope.INSTANCE_TYPE and b["instance_type"] == offer["instance_type"]:
            return True
        if scope == BlockScope.OFFER and b["offer_id"] == Offer.from_dict(offer).offer_id:
            return True
    return False


def make_block(offer: Dict[str, Any], scope: str, reason: str) -> Dict[str, Any]:
    return {"scope": scope, "cloud": offer["cloud"], "region": offer["region"],
            "instance_type": offer["instance_type"], "offer_id": Offer.from_dict(offer).offer_id,
            "reason": reason}


def next_cursor(offers: List[Dict[str, Any]], blocked: List[Dict[str, Any]], start: int) -> Optional[int]:
    for index in range(start, len(offers)):
        if not is_blocked(offers[index], blocked):
            return index
    return None


def search_size(search: Dict[str, Any]) -> int:
    """How many offers a search plans (either layout)."""
    return search["size"] if "size" in search else len(search.get("offers") or [])


def refused_everywhere(history: List[Dict[str, Any]], clouds: List[str]) -> str:
    """The reasons, one per cloud, when every cloud of a search (``history``: its rows) failed with a fatal
    error (Credentials, InvalidRequest); '' when some cloud failed otherwise (it may do better later)."""
    reasons: Dict[str, str] = {}
    for row in history:
        error = row.get("error") or {}
        if error.get("kind") in ErrorKind.FATAL:
            reasons.setdefault(row["offer"].split(":", 1)[0], error["msg"])
    if not clouds or any(cloud not in reasons for cloud in clouds):
        return ""
    return "; ".join(dict.fromkeys(reasons[cloud] for cloud in clouds))
