# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The reap decision table and the idle decision (plugins/module_utils/expiry/decide.py), row by row."""

from __future__ import annotations

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.expiry import decide
from ansible_collections.gpuprov.cloud.plugins.module_utils.expiry.decide import (
    ABSENT, EXPIRED, KEEP, LEAKED, READY, REAP, RUNNING, STOPPED, TEARDOWN_LEAKED, TEARDOWN_UNDER_WAY, TORN_DOWN, WARN,
    IdleProbe, ReapDecision, VmFacts, idle_verdict,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.expiry.limits import Limits
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import Status

UP = 1_777_658_400            # 2026-05-01T18:00:00Z
HOUR = 3600


def facts(state=READY, observed=RUNNING, price=2.0, up_since=UP, stopped_price=None, **limits):
    return VmFacts(state=state, limits=Limits(**limits), price_per_hour=price, up_since=up_since, observed=observed,
                   stopped_price_per_hour=stopped_price)


def test_the_observations_are_the_providers_status_values():
    assert (decide.RUNNING, decide.STOPPED) == (Status.RUNNING, Status.STOPPED)
    assert decide.ABSENT not in Status.ALL


# --- running (or not looked at) --------------------------------------------------------------------------------------

def test_no_limits_keeps_the_vm():
    assert decide.decide(facts(), UP + 10 * HOUR) == ReapDecision(KEEP, "no deadline", 2.0)


def test_a_vm_far_from_its_expiry_is_kept_saying_when():
    found = decide.decide(facts(expires_at=UP + 8 * HOUR), UP + HOUR)
    assert found == ReapDecision(KEEP, "expires in 7h (at 2026-05-02T02:00:00Z)", 2.0)


def test_within_the_hour_it_is_warned_about():
    found = decide.decide(facts(expires_at=UP + 8 * HOUR), UP + 7 * HOUR + 18 * 60)
    assert found == ReapDecision(WARN, "expires in 42m (at 2026-05-02T02:00:00Z)", 2.0)
    assert decide.decide(facts(expires_at=UP + 8 * HOUR), UP + 7 * HOUR).action == WARN          # exactly an hour
    assert decide.decide(facts(expires_at=UP + 8 * HOUR), UP + 7 * HOUR - 1).action == KEEP


def test_at_and_past_its_expiry_it_is_reaped_saving_its_price():
    assert decide.decide(facts(expires_at=UP + HOUR), UP + HOUR) == ReapDecision(
        REAP, "past its expiry, 0s ago (at 2026-05-01T19:00:00Z)", 2.0)
    found = decide.decide(facts(expires_at=UP + HOUR), UP + HOUR + 300)
    assert found == ReapDecision(REAP, "past its expiry, 5m ago (at 2026-05-01T19:00:00Z)", 2.0)
    assert found.expired is False                      # still running: it did not stop itself


def test_the_spend_cap_binds_when_it_comes_first_and_says_so():
    vm = facts(price=4.0, expires_at=UP + 10 * HOUR, max_spend_usd=10.0)          # $10 at $4/h: 2.5 h
    assert decide.decide(vm, UP + HOUR) == ReapDecision(KEEP, "reaches its spend cap $10 in 1h30m (at 2026-05-01T20:30:00Z)", 4.0)
    assert decide.decide(vm, UP + 2 * HOUR).action == WARN
    assert decide.decide(vm, UP + 3 * HOUR) == ReapDecision(
        REAP, "reached its spend cap $10 at $4/h, 30m ago (at 2026-05-01T20:30:00Z)", 4.0)


def test_a_spend_cap_without_a_price_cannot_be_enforced_and_says_so():
    found = decide.decide(facts(price=None, max_spend_usd=10.0), UP + 100 * HOUR)
    assert found == ReapDecision(KEEP, "max_spend $10 cannot be enforced: the cloud reports no price for it", None)
    # an expiry still binds
    assert decide.decide(facts(price=None, max_spend_usd=10.0, expires_at=UP + HOUR), UP + 2 * HOUR).action == REAP


def test_a_vm_nobody_looked_at_is_taken_as_billing():
    found = decide.decide(facts(observed=None, expires_at=UP + HOUR), UP + 2 * HOUR)
    assert (found.action, found.saved_per_hour) == (REAP, 2.0)
    assert decide.decide(facts(observed=Status.PENDING, expires_at=UP + HOUR), UP + 2 * HOUR).action == REAP


def test_a_leaked_vm_past_its_deadline_is_reaped_and_before_it_kept_both_saying_leaked():
    assert decide.decide(facts(state=LEAKED, expires_at=UP + HOUR), UP + 2 * HOUR) == ReapDecision(
        REAP, "leaked, and past its expiry, 1h ago (at 2026-05-01T19:00:00Z)", 2.0)
    assert decide.decide(facts(state=LEAKED, expires_at=UP + 5 * HOUR), UP).reason.startswith("leaked, and expires in 5h")
    assert decide.decide(facts(state=LEAKED), UP) == ReapDecision(KEEP, "leaked, and no deadline", 2.0)


# --- stopped: it stopped itself, never a leak --------------------------------------------------------------------------

def test_stopped_after_its_deadline_is_expired_stopped_itself_and_never_a_leak():
    found = decide.decide(facts(observed=STOPPED, expires_at=UP + HOUR), UP + HOUR + 400)
    assert found == ReapDecision(REAP, "expired (stopped itself): past its expiry, 6m40s ago (at 2026-05-01T19:00:00Z)", None, True)
    # a leaked VM found stopped after its deadline is expired too, not counted as a leak
    assert decide.decide(facts(state=LEAKED, observed=STOPPED, expires_at=UP + HOUR), UP + 2 * HOUR).expired is True


def test_stopped_at_its_spend_cap_saves_what_the_cloud_bills_while_stopped():
    found = decide.decide(facts(observed=STOPPED, price=4.0, max_spend_usd=2.0, stopped_price=0.05), UP + HOUR)
    assert found == ReapDecision(REAP, "expired (stopped itself): reached its spend cap $2 at $4/h, 30m ago "
                                 "(at 2026-05-01T18:30:00Z)", 0.05, True)


def test_stopped_with_an_idle_stop_before_its_deadline_stopped_itself_for_idleness():
    found = decide.decide(facts(observed=STOPPED, idle_stop_s=1800, expires_at=UP + 8 * HOUR), UP + HOUR)
    assert found == ReapDecision(REAP, "expired (stopped itself): idle for its idle_stop of 30m", None, True)


def test_journalled_expired_and_stopped_is_reaped_for_what_remains():
    assert decide.decide(facts(state=EXPIRED, observed=STOPPED), UP) == ReapDecision(
        REAP, "expired (stopped itself, as journalled)", None, True)


def test_stopped_for_no_reason_of_its_limits_is_left_as_it_is():
    for vm in (facts(observed=STOPPED), facts(observed=STOPPED, expires_at=UP + 5 * HOUR)):
        assert decide.decide(vm, UP + HOUR) == ReapDecision(
            KEEP, "stopped, not by its limits (no deadline passed, no idle_stop): left as it is", None)


# --- gone from the cloud --------------------------------------------------------------------------------------------------

def test_gone_after_its_deadline_is_reaped_for_what_remains_saving_nothing():
    assert decide.decide(facts(observed=ABSENT, expires_at=UP + HOUR), UP + 2 * HOUR) == ReapDecision(
        REAP, "expired (gone from the cloud): removes what remains", 0.0, True)
    assert decide.decide(facts(state=EXPIRED, observed=ABSENT), UP).action == REAP


def test_gone_before_its_deadline_is_kept_for_status_and_down():
    assert decide.decide(facts(observed=ABSENT, expires_at=UP + 5 * HOUR), UP + HOUR) == ReapDecision(
        KEEP, "gone from the cloud before its deadline: status reports it, down removes what remains", 0.0)


# --- a teardown of it in the journal ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("limits", [{}, {"expires_at": UP + 100 * HOUR}, {"expires_at": UP}])
def test_an_interrupted_teardown_is_resumed_whatever_the_deadline_saving_its_price(limits):
    found = decide.decide(facts(state=TEARDOWN_UNDER_WAY, observed=None, **limits), UP + HOUR)
    assert found == ReapDecision(REAP, "its teardown was interrupted: resumes it", 2.0)
    assert found.expired is False          # down or a reap asked for it: it did not end itself


def test_a_teardown_that_left_resources_is_retried_saving_what_they_may_bill():
    found = decide.decide(facts(state=TEARDOWN_LEAKED, observed=None, price=None, expires_at=UP + 5 * HOUR), UP)
    assert found == ReapDecision(REAP, "its last teardown left resources that may bill: retries it", None)


def test_a_vm_torn_down_already_is_cleared_from_the_journal_saving_nothing():
    for observed in (None, RUNNING, ABSENT):   # the teardown's Done is the fact; nobody needs to look again
        found = decide.decide(facts(state=TORN_DOWN, observed=observed, expires_at=UP + HOUR), UP)
        assert found == ReapDecision(REAP, "torn down already: clears what the journal still lists", 0.0)


def test_the_teardown_labels_are_not_the_machines_state_names():
    # A teardown's Leaked must never read as the launch's Leaked (kept before its deadline), nor Done as "not up".
    assert not set(decide.TEARDOWN_STATES) & {READY, LEAKED, EXPIRED, "Done", "Requesting", "AwaitingGone",
                                              "CleaningUp", "DeletionRequested"}


# --- not up ------------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("state", ["Aborted", "Done", "Creating", "Searching", ""])
def test_a_vm_that_is_not_up_is_never_reaped(state):
    found = decide.decide(facts(state=state, expires_at=UP), UP + 100 * HOUR)
    assert found == ReapDecision(KEEP, "not up (journalled %s): nothing to reap" % state, None)


def test_every_action_is_one_of_the_three():
    seen = set()
    for state in (READY, LEAKED, EXPIRED, "Aborted") + decide.TEARDOWN_STATES:
        for observed in (RUNNING, STOPPED, ABSENT, None):
            for limits in ({}, {"expires_at": UP + HOUR}, {"idle_stop_s": 600}, {"max_spend_usd": 1.0}):
                for now in (UP, UP + HOUR - 60, UP + 2 * HOUR):
                    found = decide.decide(facts(state=state, observed=observed, **limits), now)
                    assert found.action in decide.ACTIONS and found.reason
                    seen.add(found.action)
    assert seen == set(decide.ACTIONS)


# --- idle ----------------------------------------------------------------------------------------------------------------------

def test_anything_in_use_is_busy_and_resets_the_idle_clock():
    for probe in (IdleProbe(ssh_sessions=1), IdleProbe(0, gpu_processes=2), IdleProbe(0, gpu_processes=0, gpu_pods=1)):
        found = idle_verdict(probe, idle_since=UP - 10_000, now=UP, idle_stop_s=600)
        assert (found.verdict, found.idle_since, found.idle_for_s) == (decide.BUSY, None, 0.0)
        assert found.reason.startswith("busy: ssh ")


def test_the_first_idle_check_starts_the_clock_and_later_ones_count_from_it():
    probe = IdleProbe(ssh_sessions=0, gpu_processes=0, gpu_pods=None)
    first = idle_verdict(probe, None, UP, 600)
    assert (first.verdict, first.idle_since, first.idle_for_s) == (decide.IDLE, UP, 0.0)
    assert first.reason == "idle for 0s: ssh 0, gpu processes 0, gpu pods -"
    later = idle_verdict(probe, first.idle_since, UP + 599, 600)
    assert (later.verdict, later.idle_for_s) == (decide.IDLE, 599)


def test_idle_for_idle_stop_or_longer_is_stop():
    found = idle_verdict(IdleProbe(0), UP, UP + 600, 600)
    assert (found.verdict, found.idle_since, found.idle_for_s) == (decide.STOP, UP, 600)
    assert found.reason == "idle for 10m (idle_stop 10m): ssh 0, gpu processes -, gpu pods -"
    assert idle_verdict(IdleProbe(0), UP, UP + 7200, 600).verdict == decide.STOP


def test_without_idle_stop_idle_is_never_stop():
    assert idle_verdict(IdleProbe(0), UP, UP + 10 ** 7, None).verdict == decide.IDLE


def test_a_clock_that_went_back_counts_no_idle_time():
    assert idle_verdict(IdleProbe(0), UP, UP - 50, 600).idle_for_s == 0.0


def test_unknown_counts_are_not_in_use():
    assert IdleProbe(0, None, None).busy is False
    assert IdleProbe(0, 0, 0).busy is False
    assert IdleProbe(3).describe() == "ssh 3, gpu processes -, gpu pods -"
