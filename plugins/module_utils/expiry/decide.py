# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The reap decision table and the idle decision, as pure functions (issue 27).

``decide`` maps a VM's journalled facts and what its cloud last observed to keep / warn / reap: ``reap`` and
``status`` ask it, and the crash matrix can test it without a cloud. ``idle_verdict`` is the watchdog's idle rule
(watchdog.py runs the same rule in sh on the VM) as a function of what its probe read.

The rules, in order:

1. A VM whose limits are journalled and whose journal row is a teardown of its instance (``down``'s or a reap's
   teardown machine) is reaped whatever its deadline, since someone already asked for it to go: a teardown that
   did not end (a run killed half-way) is resumed, saving its price per hour; one that ended Leaked is retried
   (what it left may bill); one that ended Done is "torn down already", and reaping it only clears what the journal
   still lists of it (its ``vms`` row and limits), saving nothing.
2. Any other VM whose journal is not up (a launch in progress, Aborted) is kept: nothing to reap.
3. Gone from the cloud: past its deadline (or journalled Expired) it is reaped, which removes what remains
   (disks, firewall rules) and saves nothing per hour; before its deadline it is kept for ``status`` and ``down``.
4. Stopped: past its deadline, journalled Expired, or with an ``idle_stop`` set, it stopped itself: reaped as
   "expired (stopped itself)", never counted as a leak. Stopped for no reason of its limits: kept as it is.
5. Otherwise (running, booting, or not looked at: as billing as running): past the effective deadline (the
   earlier of the expiry and the spend cap) it is reaped; within ``WARN_WITHIN_S`` of it, warned about; else kept.

Nothing here reads a clock or a cloud: ``now`` and the observation are arguments.
"""

from __future__ import annotations

import dataclasses
from typing import Optional, Tuple

from ansible_collections.gpuprov.cloud.plugins.module_utils import money
from ansible_collections.gpuprov.cloud.plugins.module_utils.expiry import limits as lim

KEEP = "keep"
WARN = "warn"
REAP = "reap"
ACTIONS = (KEEP, WARN, REAP)

# provision, status and health warn about a VM this close to its deadline.
WARN_WITHIN_S = 3600

# The journalled state labels the table knows; any other (a launch under way, Aborted) is "not up".
READY = "Ready"
LEAKED = "Leaked"
EXPIRED = "Expired"          # the journal already recorded that the VM stopped itself
UP_STATES = (READY, LEAKED, EXPIRED)
# A teardown of the VM's instance (down's or reap's machine), as reap labels its row: not the machine's own state
# names, since the teardown's Leaked is not the launch's (rule 1).
TEARDOWN_UNDER_WAY = "teardown under way"     # Requesting, AwaitingGone, CleaningUp: a run stopped half-way
TEARDOWN_LEAKED = "teardown leaked"           # it gave up: what it names may bill
TORN_DOWN = "torn down"                       # Done, while the journal still lists the VM
TEARDOWN_STATES = (TEARDOWN_UNDER_WAY, TEARDOWN_LEAKED, TORN_DOWN)

# What the cloud last said about the instance: the values of providers.base.Status, plus ABSENT for "not there".
# (Spelt out here, not imported: the test pins them to Status, and this module stays free of the contract.)
RUNNING = "Running"
STOPPED = "Stopped"
ABSENT = "absent"
# What the journal's VM list (the STATUS column of ``status``) says once a command that looks at the cloud (reap,
# even as a dry run) saw the VM stopped or gone by its limits: ``status`` reads the journal only, and learns it so.
SEEN_STATUS = {STOPPED: "stopped itself", ABSENT: "gone (expired)"}
OBSERVED_BY_STATUS = {status: observed for observed, status in SEEN_STATUS.items()}

# idle_verdict's verdicts
BUSY = "busy"
IDLE = "idle"
STOP = "stop"


@dataclasses.dataclass(frozen=True)
class VmFacts:
    """What the journal says of one VM, plus the cloud's last observation of it.

    ``state``: the journalled label (READY, LEAKED, EXPIRED, one of TEARDOWN_STATES, or another). ``up_since``:
    epoch seconds it came up. ``price_per_hour``: the offer's journalled USD price (None: the cloud gives none).
    ``observed``: a Status value, ABSENT, or None when nobody looked. ``stopped_price_per_hour``: what it bills while stopped, where the cloud
    says (Prime Intellect's stoppedPriceHr), else None."""

    state: str
    limits: lim.Limits
    price_per_hour: Optional[float]
    up_since: Optional[float]
    observed: Optional[str]
    stopped_price_per_hour: Optional[float] = None


@dataclasses.dataclass(frozen=True)
class ReapDecision:
    """``action``: KEEP, WARN or REAP. ``reason``: one line for people. ``saved_per_hour``: USD per hour reaping it
    saves (0.0: nothing bills any more; None: unknown). ``expired``: it stopped or ended itself by its limits,
    which ``status`` shows as Expired and never as a leak."""

    action: str
    reason: str
    saved_per_hour: Optional[float]
    expired: bool = False


def _when(epoch: int, now: float) -> str:
    delta = epoch - now
    if delta > 0:
        return "in %s (at %s)" % (lim.format_duration(delta), lim.iso_utc(epoch))
    return "%s ago (at %s)" % (lim.format_duration(delta), lim.iso_utc(epoch))


def _past_reason(facts: VmFacts, when: int, cause: str, now: float) -> str:
    if cause == lim.CAUSE_MAX_SPEND:
        return "reached its spend cap %s at %s, %s" % (
            money.usd(facts.limits.max_spend_usd or 0), money.per_hour(facts.price_per_hour), _when(when, now))
    return "past its expiry, %s" % _when(when, now)


def _gone(facts: VmFacts, found: Optional[Tuple[int, str]], now: float) -> ReapDecision:
    if (found is not None and now >= found[0]) or facts.state == EXPIRED:
        return ReapDecision(REAP, "expired (gone from the cloud): removes what remains", 0.0, True)
    return ReapDecision(KEEP, "gone from the cloud before its deadline: status reports it, down removes what remains", 0.0)


def _stopped(facts: VmFacts, found: Optional[Tuple[int, str]], now: float) -> ReapDecision:
    saved = facts.stopped_price_per_hour
    if found is not None and now >= found[0]:
        return ReapDecision(REAP, "expired (stopped itself): %s" % _past_reason(facts, found[0], found[1], now), saved, True)
    if facts.state == EXPIRED:
        return ReapDecision(REAP, "expired (stopped itself, as journalled)", saved, True)
    if facts.limits.idle_stop_s is not None:
        return ReapDecision(REAP, "expired (stopped itself): idle for its idle_stop of %s"
                            % lim.format_duration(facts.limits.idle_stop_s), saved, True)
    return ReapDecision(KEEP, "stopped, not by its limits (no deadline passed, no idle_stop): left as it is", None)


def _billing(facts: VmFacts, found: Optional[Tuple[int, str]], now: float) -> ReapDecision:
    # Running, booting, or not looked at: taken as billing its price.
    leaked = "leaked, and " if facts.state == LEAKED else ""
    if found is None:
        if facts.limits.max_spend_usd is not None and facts.price_per_hour is None:
            return ReapDecision(KEEP, "%smax_spend %s cannot be enforced: the cloud reports no price for it"
                                % (leaked, money.usd(facts.limits.max_spend_usd)), None)
        return ReapDecision(KEEP, "%sno deadline" % leaked, facts.price_per_hour)
    when, cause = found
    if now >= when:
        return ReapDecision(REAP, leaked + _past_reason(facts, when, cause, now), facts.price_per_hour)
    what = "expires"
    if cause == lim.CAUSE_MAX_SPEND:
        what = "reaches its spend cap %s" % money.usd(facts.limits.max_spend_usd or 0)
    action = WARN if when - now <= WARN_WITHIN_S else KEEP
    return ReapDecision(action, "%s%s %s" % (leaked, what, _when(when, now)), facts.price_per_hour)


def _teardown(facts: VmFacts) -> ReapDecision:
    # Rule 1: the deadline no longer matters, the teardown was asked for already.
    if facts.state == TORN_DOWN:
        return ReapDecision(REAP, "torn down already: clears what the journal still lists", 0.0)
    if facts.state == TEARDOWN_LEAKED:
        return ReapDecision(REAP, "its last teardown left resources that may bill: retries it", facts.price_per_hour)
    return ReapDecision(REAP, "its teardown was interrupted: resumes it", facts.price_per_hour)


def decide(facts: VmFacts, now: float) -> ReapDecision:
    """The reap decision for one VM at ``now`` (the rules in this module's docstring)."""
    if facts.state in TEARDOWN_STATES:
        return _teardown(facts)
    if facts.state not in UP_STATES:
        return ReapDecision(KEEP, "not up (journalled %s): nothing to reap" % (facts.state,), None)
    found = lim.deadline_and_cause(facts.limits, facts.up_since, facts.price_per_hour)
    if facts.observed == ABSENT:
        return _gone(facts, found, now)
    if facts.observed == STOPPED:
        return _stopped(facts, found, now)
    return _billing(facts, found, now)


# --- idle -------------------------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class IdleProbe:
    """What the watchdog's probe read on the VM: established SSH connections to port 22, GPU compute processes
    (None: no nvidia-smi, or it failed) and pods requesting nvidia.com/gpu (None: no k3s, or it failed)."""

    ssh_sessions: int
    gpu_processes: Optional[int] = None
    gpu_pods: Optional[int] = None

    @property
    def busy(self) -> bool:
        """Anything in use (an unknown count is not)."""
        return any(count for count in (self.ssh_sessions, self.gpu_processes, self.gpu_pods) if count)

    def describe(self) -> str:
        """``ssh 0, gpu processes 1, gpu pods -`` (``-``: not counted)."""
        def shown(count: Optional[int]) -> str:
            return "-" if count is None else str(count)
        return "ssh %d, gpu processes %s, gpu pods %s" % (self.ssh_sessions, shown(self.gpu_processes), shown(self.gpu_pods))


@dataclasses.dataclass(frozen=True)
class IdleVerdict:
    """``verdict``: BUSY, IDLE or STOP. ``idle_since``: what the caller keeps for its next check (None when busy).
    ``idle_for_s``: how long it has been idle at ``now``."""

    verdict: str
    idle_since: Optional[float]
    idle_for_s: float
    reason: str


def idle_verdict(probe: IdleProbe, idle_since: Optional[float], now: float, idle_stop_s: Optional[int]) -> IdleVerdict:
    """Busy when anything is in use (the idle clock resets); otherwise idle since ``idle_since`` (or from ``now``,
    the first idle check), and STOP once idle for ``idle_stop_s`` or longer. Without ``idle_stop_s`` never STOP."""
    if probe.busy:
        return IdleVerdict(BUSY, None, 0.0, "busy: %s" % probe.describe())
    since = now if idle_since is None else idle_since
    idle_for = max(0.0, now - since)
    if idle_stop_s is not None and idle_for >= idle_stop_s:
        return IdleVerdict(STOP, since, idle_for, "idle for %s (idle_stop %s): %s" % (
            lim.format_duration(idle_for), lim.format_duration(idle_stop_s), probe.describe()))
    return IdleVerdict(IDLE, since, idle_for, "idle for %s: %s" % (lim.format_duration(idle_for), probe.describe()))
