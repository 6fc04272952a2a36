# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A VM's limits (issue 27): when it expires, how long it may sit idle, and how much it may spend.

The task options, as a user writes them:

``ttl``         a duration (``90s``, ``45m``, ``8h``, ``2d``, ``1h30m``, or a whole number of seconds), counted from
                ``ttl_from`` (the caller's choice: the moment the VM was first requested, so a re-run with the same
                ttl computes the same deadline)
``expires_at``  an ISO 8601 time with an offset or ``Z``; exclusive with ``ttl``
``idle_stop``   a duration; at least ``IDLE_STOP_FLOOR_S`` unless the caller passes another floor
``max_spend``   US dollars above 0, at most 2 decimals
``limits_grace`` a duration (default ``DEFAULT_GRACE_S``): how long past a deadline the VM's own watchdog waits
                before it powers the VM off, so that the controller's reap, which also removes disks and firewall
                rules, goes first; not a limit of its own (``Limits.empty`` ignores it)

Both ``ttl`` and ``expires_at`` become ``Limits.expires_at`` (epoch seconds, UTC). ``max_spend`` binds through the
VM's journalled price and the time since it came up: ``deadline`` is the earlier of the expiry and the moment the
spend reaches the cap. Spend is computed in Decimal and rounded to cents, never in binary floats.

Nothing here reads a clock: every function that needs the time takes ``now``.
"""

from __future__ import annotations

import dataclasses
import datetime
import math
import re
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any, Dict, Mapping, Optional, Tuple

from ansible_collections.gpuprov.cloud.plugins.module_utils import money

# Shorter idle stops would power a VM off between two commands of one session (an SSH session counts as use, but
# a playbook's next task may open its connection a few seconds after the last one closed).
IDLE_STOP_FLOOR_S = 60
# The watchdog's default grace past a deadline, and the longest pause between two of its checks.
DEFAULT_GRACE_S = 300
MAX_CHECK_INTERVAL_S = 60

CENT = Decimal("0.01")
SECONDS_PER_HOUR = Decimal(3600)

# What caused a deadline: the expiry (ttl / expires_at) or the spend cap reached.
CAUSE_EXPIRY = "expiry"
CAUSE_MAX_SPEND = "max_spend"

_DURATION_RE = re.compile(r"^(?:(\d+)\s*d)?\s*(?:(\d+)\s*h)?\s*(?:(\d+)\s*m)?\s*(?:(\d+)\s*s)?$", re.IGNORECASE)
_UNITS = (86400, 3600, 60, 1)
_DURATION_EXPECTED = "expected a duration such as 8h or 45m"
_TIME_EXPECTED = "expected an ISO 8601 time with an offset or Z, such as 2026-05-01T18:00:00Z"
_AMOUNT_EXPECTED = "expected an amount in US dollars above 0 with at most 2 decimals, such as 25 or 12.50"


class LimitError(ValueError):
    """A limit option that cannot be taken; the message starts with the option's name."""

    def __init__(self, option: str, problem: str):
        super().__init__("%s: %s" % (option, problem))
        self.option = option


class ConflictingLimits(LimitError):
    """Two options that each set the same limit (``ttl`` and ``expires_at``)."""


@dataclasses.dataclass(frozen=True)
class Limits:
    """A VM's limits; None is "no such limit". ``expires_at`` is epoch seconds, UTC."""

    expires_at: Optional[int] = None
    idle_stop_s: Optional[int] = None
    max_spend_usd: Optional[float] = None
    grace_s: Optional[int] = None   # the watchdog's grace past a deadline (None: DEFAULT_GRACE_S); not a limit

    @property
    def empty(self) -> bool:
        """No limit at all (a grace alone limits nothing)."""
        return self.expires_at is None and self.idle_stop_s is None and self.max_spend_usd is None

    @property
    def grace(self) -> int:
        """The watchdog's grace past a deadline, in seconds."""
        return DEFAULT_GRACE_S if self.grace_s is None else self.grace_s

    @property
    def check_interval_s(self) -> int:
        """Seconds between two watchdog checks: at least two checks within the grace, at most a minute apart, so
        the VM powers off within its grace of the deadline."""
        return max(1, min(MAX_CHECK_INTERVAL_S, self.grace // 2))

    def to_dict(self) -> Dict[str, Any]:
        """The record as journalled (JSON-ready)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Optional[Mapping[str, Any]]) -> "Limits":
        """From ``to_dict``'s output; keys it does not know are ignored (a journal written by a later version)."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in (data or {}).items() if k in names})

    def describe(self) -> Dict[str, Optional[str]]:
        """The limits as a person reads them (diff mode, status): ``{"expires_at": "2026-05-01T18:00:00Z",
        "idle_stop": "30m", "max_spend": "$25"}``, None where unset; ``limits_grace`` too once it is set."""
        shown = {
            "expires_at": None if self.expires_at is None else iso_utc(self.expires_at),
            "idle_stop": None if self.idle_stop_s is None else format_duration(self.idle_stop_s),
            "max_spend": None if self.max_spend_usd is None else money.usd(self.max_spend_usd),
        }
        if self.grace_s is not None:   # shown only when set: most VMs keep the default
            shown["limits_grace"] = format_duration(self.grace_s)
        return shown


# --- parsing the task options --------------------------------------------------------------------------------------

def parse_duration(option: str, value: Any) -> int:
    """``value`` (``"1h30m"``, ``"45s"``, ``"3600"`` or ``3600``) in whole seconds, above 0; LimitError naming
    ``option`` otherwise."""
    if isinstance(value, bool):
        raise LimitError(option, "%s, got %r" % (_DURATION_EXPECTED, value))
    if isinstance(value, int):
        seconds = value
    elif isinstance(value, str):
        text = value.strip()
        if text.isdigit():
            seconds = int(text)
        else:
            match = _DURATION_RE.match(text)
            if not text or not match or not any(match.groups()):
                raise LimitError(option, "%s, got %r" % (_DURATION_EXPECTED, value))
            seconds = sum(int(part) * unit for part, unit in zip(match.groups(), _UNITS, strict=True) if part)
    else:
        raise LimitError(option, "%s, got %r" % (_DURATION_EXPECTED, value))
    if seconds <= 0:
        raise LimitError(option, "%s (longer than 0 s), got %r" % (_DURATION_EXPECTED, value))
    return seconds


def parse_expires_at(value: Any) -> int:
    """An ISO 8601 time with an offset or Z (or an aware datetime) as epoch seconds; a naive time is refused,
    since it does not say whose clock it means."""
    if isinstance(value, datetime.datetime):
        moment = value
    elif isinstance(value, str):
        text = value.strip()
        # fromisoformat takes "Z" from Python 3.11 on; spelt out so the meaning does not rest on the version.
        if text[-1:] in ("Z", "z"):
            text = text[:-1] + "+00:00"
        try:
            moment = datetime.datetime.fromisoformat(text)
        except ValueError:
            raise LimitError("expires_at", "%s, got %r" % (_TIME_EXPECTED, value)) from None
    else:
        raise LimitError("expires_at", "%s, got %r" % (_TIME_EXPECTED, value))
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise LimitError("expires_at", "%s, got %r, which has no offset (whose clock is it?)" % (_TIME_EXPECTED, value))
    return math.floor(moment.timestamp())


def parse_idle_stop(value: Any, floor_s: int = IDLE_STOP_FLOOR_S) -> int:
    """``idle_stop`` in seconds, at least ``floor_s``."""
    seconds = parse_duration("idle_stop", value)
    if seconds < floor_s:
        raise LimitError("idle_stop", "expected at least %s (%d s), got %r" % (format_duration(floor_s), floor_s, value))
    return seconds


def parse_max_spend(value: Any) -> float:
    """``max_spend`` in US dollars: above 0, at most 2 decimals (``25``, ``12.5``, ``"12.50"``)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise LimitError("max_spend", "%s, got %r" % (_AMOUNT_EXPECTED, value))
    try:
        amount = Decimal(str(value).strip())
    except InvalidOperation:
        raise LimitError("max_spend", "%s, got %r" % (_AMOUNT_EXPECTED, value)) from None
    exponent = amount.as_tuple().exponent
    if not amount.is_finite() or amount <= 0 or not isinstance(exponent, int) or exponent < -2:
        raise LimitError("max_spend", "%s, got %r" % (_AMOUNT_EXPECTED, value))
    return float(amount)


def parse_limits(options: Mapping[str, Any], ttl_from: float, idle_floor_s: int = IDLE_STOP_FLOOR_S) -> Limits:
    """The Limits the task options ``ttl``, ``expires_at``, ``idle_stop``, ``max_spend`` and ``limits_grace`` ask
    for; an option that is absent, None or "" sets nothing. ``ttl`` counts from ``ttl_from`` (epoch seconds)."""
    given = {k: options.get(k) for k in ("ttl", "expires_at", "idle_stop", "max_spend", "limits_grace")}
    given = {k: v for k, v in given.items() if v is not None and v != ""}
    if "ttl" in given and "expires_at" in given:
        raise ConflictingLimits("ttl", "cannot be given with expires_at: both set the deadline, give one of them")
    expires_at: Optional[int] = None
    if "ttl" in given:
        expires_at = math.floor(ttl_from) + parse_duration("ttl", given["ttl"])
    elif "expires_at" in given:
        expires_at = parse_expires_at(given["expires_at"])
    return Limits(
        expires_at=expires_at,
        idle_stop_s=parse_idle_stop(given["idle_stop"], idle_floor_s) if "idle_stop" in given else None,
        max_spend_usd=parse_max_spend(given["max_spend"]) if "max_spend" in given else None,
        grace_s=parse_duration("limits_grace", given["limits_grace"]) if "limits_grace" in given else None,
    )


def with_changes(old: Limits, new: Limits) -> Tuple[Limits, Dict[str, Dict[str, Optional[str]]]]:
    """A re-run's limits: each limit ``new`` sets replaces the old one; one it leaves unset (None) keeps the old
    value, so a playbook that does not mention a spend cap does not lift it. Returns the limits to journal and
    the diff for Ansible's diff mode, ``{"before": ..., "after": ...}`` in ``Limits.describe`` form; unchanged
    when the two are equal."""
    changes = {f.name: getattr(new, f.name) for f in dataclasses.fields(new) if getattr(new, f.name) is not None}
    merged = dataclasses.replace(old, **changes)
    return merged, {"before": old.describe(), "after": merged.describe()}


# --- spend and deadlines ---------------------------------------------------------------------------------------------

def _decimal(value: float) -> Decimal:
    # str() first: Decimal(0.1) is the binary float's 55 digits, Decimal("0.1") is what the price list says.
    return Decimal(str(value))


def spend_usd(price_per_hour: Optional[float], up_since: Optional[float], now: float) -> Optional[Decimal]:
    """What the VM has cost since ``up_since`` at ``price_per_hour``, rounded half up to cents; None when the price
    or the start is unknown. A ``now`` before ``up_since`` costs nothing."""
    if price_per_hour is None or up_since is None:
        return None
    seconds = max(Decimal(0), _decimal(now) - _decimal(up_since))
    return (_decimal(price_per_hour) * seconds / SECONDS_PER_HOUR).quantize(CENT, rounding=ROUND_HALF_UP)


def spend_budget_s(limits: Limits, price_per_hour: Optional[float]) -> Optional[int]:
    """Seconds of uptime ``max_spend`` buys at ``price_per_hour`` (rounded down); None without a cap or a price
    above 0 (a free VM never reaches its cap)."""
    if limits.max_spend_usd is None or price_per_hour is None or price_per_hour <= 0:
        return None
    return int(_decimal(limits.max_spend_usd) * SECONDS_PER_HOUR / _decimal(price_per_hour))


def deadline_and_cause(limits: Limits, up_since: Optional[float], price_per_hour: Optional[float]) -> Optional[Tuple[int, str]]:
    """(the effective deadline in epoch seconds, CAUSE_EXPIRY or CAUSE_MAX_SPEND): the earlier of the expiry and
    the moment the spend reaches the cap (the expiry on a tie); None when neither applies."""
    candidates = []
    if limits.expires_at is not None:
        candidates.append((limits.expires_at, 0, CAUSE_EXPIRY))
    budget = spend_budget_s(limits, price_per_hour)
    if budget is not None and up_since is not None:
        candidates.append((math.floor(up_since) + budget, 1, CAUSE_MAX_SPEND))
    if not candidates:
        return None
    when, _order, cause = min(candidates)
    return when, cause


def deadline(limits: Limits, up_since: Optional[float], price_per_hour: Optional[float]) -> Optional[int]:
    """The effective deadline in epoch seconds (see ``deadline_and_cause``), or None."""
    found = deadline_and_cause(limits, up_since, price_per_hour)
    return None if found is None else found[0]


def time_left(limits: Limits, up_since: Optional[float], price_per_hour: Optional[float], now: float) -> Optional[float]:
    """Seconds from ``now`` to the effective deadline (negative: past it by that much); None without one."""
    found = deadline(limits, up_since, price_per_hour)
    return None if found is None else found - now


# --- how limits read ------------------------------------------------------------------------------------------------

def format_duration(seconds: float) -> str:
    """``5400`` -> ``1h30m``; ``90061`` -> ``1d1h1m1s``; ``0`` -> ``0s`` (whole seconds; the sign is dropped)."""
    left = int(abs(seconds))
    parts = []
    for unit, name in zip(_UNITS, "dhms", strict=True):
        count, left = divmod(left, unit)
        if count:
            parts.append("%d%s" % (count, name))
    return "".join(parts) or "0s"


def iso_utc(epoch: float) -> str:
    """``1777658400`` -> ``2026-05-01T18:00:00Z``."""
    return datetime.datetime.fromtimestamp(epoch, tz=datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
