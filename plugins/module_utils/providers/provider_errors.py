# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""How an adapter says what went wrong (part of the provider contract, base.py, which re-exports it): the seven
kinds of failure, how much of a search each rules out, and the classified error every primitive raises."""

from __future__ import annotations

from typing import Any, Dict, Optional


class ErrorKind:
    """The seven kinds of provider failure; each drives one core action."""

    TRANSIENT = "Transient"          # retry the same step with backoff
    CAPACITY = "Capacity"            # compensate, block the offer, next offer
    QUOTA = "Quota"                  # compensate, block the whole region, next offer
    UNAVAILABLE = "Unavailable"      # block the offer, next offer, nothing to compensate
    FAILED = "Failed"                # compensate, block the offer, next offer
    INVALID_REQUEST = "InvalidRequest"  # compensate if needed, abort
    CREDENTIALS = "Credentials"      # never retried: block the whole cloud, next cloud (compensate if needed)

    ALL = (TRANSIENT, CAPACITY, QUOTA, UNAVAILABLE, FAILED, INVALID_REQUEST, CREDENTIALS)
    FATAL = (INVALID_REQUEST, CREDENTIALS)


class BlockScope:
    """How much of the search an error rules out."""

    OFFER = "offer"                  # this offer only
    INSTANCE_TYPE = "instance_type"  # this instance type in this region (all zones)
    REGION = "region"                # every offer of this cloud in this region
    CLOUD = "cloud"                  # every offer of this cloud

    ALL = (OFFER, INSTANCE_TYPE, REGION, CLOUD)


DEFAULT_BLOCK_SCOPE = {
    ErrorKind.CAPACITY: BlockScope.OFFER,
    ErrorKind.QUOTA: BlockScope.REGION,
    ErrorKind.UNAVAILABLE: BlockScope.OFFER,
    ErrorKind.FAILED: BlockScope.OFFER,
}


class ProviderError(Exception):
    """A classified adapter failure. ``block`` overrides the kind's default scope;
    ``retry_after`` is the delay in seconds the vendor asked for before a retry (a 429's
    Retry-After), None when it asked for none. ``rate_limited``: the vendor said this account
    asks too often (a 429, EC2's RequestLimitExceeded, GCP's rateLimitExceeded): the core then
    holds every worker's calls to that account a while, not only this one's (fleet/gate.py)."""

    retry_after: Optional[float] = None

    def __init__(self, kind: str, msg: str, block: Optional[str] = None, rate_limited: bool = False):
        if kind not in ErrorKind.ALL:
            raise ValueError("unknown error kind %r" % (kind,))
        if block is not None and block not in BlockScope.ALL:
            raise ValueError("unknown block scope %r" % (block,))
        super().__init__("%s: %s" % (kind, msg))
        self.kind = kind
        self.msg = msg
        self.block = block
        self.rate_limited = rate_limited

    @property
    def block_scope(self) -> Optional[str]:
        return self.block or DEFAULT_BLOCK_SCOPE.get(self.kind)

    @property
    def fatal(self) -> bool:
        return self.kind in ErrorKind.FATAL

    @property
    def throttled(self) -> bool:
        """A Transient the vendor meant as "slow down": rate-limited, or a retry it asked to wait for."""
        return self.kind == ErrorKind.TRANSIENT and (self.rate_limited or self.retry_after is not None)

    def to_dict(self) -> Dict[str, Any]:
        return {"kind": self.kind, "msg": self.msg, "block": self.block_scope}
