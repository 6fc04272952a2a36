# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A VM's limits (plugins/module_utils/expiry/limits.py): parsing the task options, a re-run's changes, and the
spend arithmetic from journalled prices, in Decimal and to the cent."""

from __future__ import annotations

import datetime
import json
from decimal import Decimal

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.expiry import limits as lim
from ansible_collections.gpuprov.cloud.plugins.module_utils.expiry.limits import ConflictingLimits, LimitError, Limits

NOW = 1_777_658_400          # 2026-05-01T18:00:00Z


# --- durations -------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, seconds", [
    ("90s", 90), ("45m", 2700), ("8h", 28800), ("2d", 172800), ("1h30m", 5400), ("1d2h3m4s", 93784),
    ("1h 30m", 5400), (" 8H ", 28800), ("3600", 3600), (3600, 3600), ("90m", 5400),
])
def test_a_duration_reads_as_whole_seconds(text, seconds):
    assert lim.parse_duration("ttl", text) == seconds


@pytest.mark.parametrize("value", ["eight hours", "", "h", "1.5h", "30m1h", "-5m", "5 minutes", "1w", None, 2.5, True, [1]])
def test_what_is_not_a_duration_is_refused_naming_the_option_and_the_value(value):
    with pytest.raises(LimitError) as caught:
        lim.parse_duration("ttl", value)
    assert str(caught.value) == "ttl: expected a duration such as 8h or 45m, got %r" % (value,)
    assert caught.value.option == "ttl" and isinstance(caught.value, ValueError)


@pytest.mark.parametrize("value", [0, "0", "0s", "0h0m", -60])
def test_a_duration_of_nothing_is_refused(value):
    with pytest.raises(LimitError, match=r"^ttl: expected a duration such as 8h or 45m \(longer than 0 s\), got "):
        lim.parse_duration("ttl", value)


def test_the_exact_message_for_a_word_duration():
    with pytest.raises(LimitError) as caught:
        lim.parse_duration("ttl", "eight hours")
    assert str(caught.value) == "ttl: expected a duration such as 8h or 45m, got 'eight hours'"


# --- expires_at ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text", ["2026-05-01T18:00:00Z", "2026-05-01T18:00:00z", "2026-05-01T20:00:00+02:00",
                                  "2026-05-01T13:00:00-05:00", "2026-05-01 18:00:00+00:00", "2026-05-01T18:00:00.999Z"])
def test_expires_at_takes_an_iso_time_with_an_offset_or_z(text):
    assert lim.parse_expires_at(text) == NOW


def test_expires_at_takes_an_aware_datetime():
    moment = datetime.datetime(2026, 5, 1, 18, 0, tzinfo=datetime.timezone.utc)
    assert lim.parse_expires_at(moment) == NOW


@pytest.mark.parametrize("text", ["2026-05-01T18:00:00", "2026-05-01", datetime.datetime(2026, 5, 1, 18, 0)])
def test_a_naive_time_is_refused_saying_an_offset_is_missing(text):
    with pytest.raises(LimitError) as caught:
        lim.parse_expires_at(text)
    message = str(caught.value)
    assert message.startswith("expires_at: expected an ISO 8601 time with an offset or Z, such as 2026-05-01T18:00:00Z, got ")
    assert message.endswith("which has no offset (whose clock is it?)")


@pytest.mark.parametrize("value", ["tomorrow", "2026-13-01T00:00:00Z", "", 1777658400, None])
def test_what_is_not_a_time_is_refused(value):
    with pytest.raises(LimitError) as caught:
        lim.parse_expires_at(value)
    assert str(caught.value) == ("expires_at: expected an ISO 8601 time with an offset or Z, such as 2026-05-01T18:00:00Z,"
                                 " got %r" % (value,))


# --- idle_stop and max_spend -----------------------------------------------------------------------------------------

def test_idle_stop_has_a_floor_of_a_minute_unless_the_caller_lowers_it():
    assert lim.parse_idle_stop("1m") == 60
    with pytest.raises(LimitError) as caught:
        lim.parse_idle_stop("59s")
    assert str(caught.value) == "idle_stop: expected at least 1m (60 s), got '59s'"
    assert lim.parse_idle_stop("3s", floor_s=1) == 3
    with pytest.raises(LimitError, match="^idle_stop: expected a duration"):
        lim.parse_idle_stop("soon")


@pytest.mark.parametrize("value, usd", [(25, 25.0), (12.5, 12.5), ("12.50", 12.5), (" 7 ", 7.0), (0.01, 0.01), ("1e2", 100.0)])
def test_max_spend_takes_dollars_with_at_most_two_decimals(value, usd):
    assert lim.parse_max_spend(value) == usd


@pytest.mark.parametrize("value", [0, "0.00", -5, "12.345", 0.1 + 0.2, "$20", "twenty", "nan", "inf", True, None, [20]])
def test_max_spend_refuses_what_is_not_a_positive_amount_in_cents(value):
    with pytest.raises(LimitError) as caught:
        lim.parse_max_spend(value)
    assert str(caught.value) == ("max_spend: expected an amount in US dollars above 0 with at most 2 decimals, such as 25"
                                 " or 12.50, got %r" % (value,))


# --- all options together ---------------------------------------------------------------------------------------------

def test_parse_limits_counts_the_ttl_from_the_moment_given():
    found = lim.parse_limits({"ttl": "8h", "idle_stop": "30m", "max_spend": "40"}, ttl_from=NOW + 0.9)
    assert found == Limits(expires_at=NOW + 8 * 3600, idle_stop_s=1800, max_spend_usd=40.0)


def test_parse_limits_takes_expires_at_and_leaves_unset_what_is_absent_none_or_empty():
    found = lim.parse_limits({"expires_at": "2026-05-01T18:00:00Z", "ttl": None, "idle_stop": "", "other": 1}, ttl_from=0)
    assert found == Limits(expires_at=NOW)
    assert lim.parse_limits({}, ttl_from=NOW) == Limits() and Limits().empty


def test_ttl_and_expires_at_are_exclusive_and_the_error_names_both():
    with pytest.raises(ConflictingLimits) as caught:
        lim.parse_limits({"ttl": "1h", "expires_at": "2026-05-01T18:00:00Z"}, ttl_from=NOW)
    assert str(caught.value) == "ttl: cannot be given with expires_at: both set the deadline, give one of them"
    assert isinstance(caught.value, LimitError) and isinstance(caught.value, ValueError)


def test_parse_limits_passes_the_idle_floor_through():
    assert lim.parse_limits({"idle_stop": "3s"}, ttl_from=NOW, idle_floor_s=1).idle_stop_s == 3
    with pytest.raises(LimitError, match="^idle_stop: expected at least 1m"):
        lim.parse_limits({"idle_stop": "3s"}, ttl_from=NOW)


def test_limits_grace_is_a_duration_kept_with_the_limits_but_no_limit_of_its_own():
    found = lim.parse_limits({"limits_grace": "90s"}, ttl_from=NOW)
    assert found.grace_s == 90 and found.grace == 90 and found.empty
    assert found.describe()["limits_grace"] == "1m30s"
    assert "limits_grace" not in Limits(expires_at=NOW).describe()   # unset: the shape of a VM without one
    assert Limits().grace == lim.DEFAULT_GRACE_S == 300
    assert Limits.from_dict(found.to_dict()) == found
    with pytest.raises(LimitError) as caught:
        lim.parse_limits({"limits_grace": "soon"}, ttl_from=NOW)
    assert str(caught.value) == "limits_grace: expected a duration such as 8h or 45m, got 'soon'"
    merged, _diff = lim.with_changes(Limits(expires_at=NOW, grace_s=600), Limits(expires_at=NOW + 60))
    assert merged.grace_s == 600   # a re-run that leaves the grace out keeps it


@pytest.mark.parametrize("grace, interval", [(None, 60), (1, 1), (2, 1), (3, 1), (10, 5), (120, 60), (3600, 60)])
def test_the_watchdog_checks_at_least_twice_within_its_grace_and_at_least_once_a_minute(grace, interval):
    assert Limits(grace_s=grace).check_interval_s == interval


@pytest.mark.parametrize("options, option", [({"ttl": "x"}, "ttl"), ({"expires_at": "x"}, "expires_at"),
                                             ({"idle_stop": "x"}, "idle_stop"), ({"max_spend": "x"}, "max_spend")])
def test_each_bad_option_is_named_first_in_its_error(options, option):
    with pytest.raises(LimitError) as caught:
        lim.parse_limits(options, ttl_from=NOW)
    assert str(caught.value).startswith(option + ": ") and caught.value.option == option


# --- the record and a re-run ------------------------------------------------------------------------------------------

def test_limits_round_trip_through_json_and_ignore_keys_they_do_not_know():
    limits = Limits(expires_at=NOW, idle_stop_s=600, max_spend_usd=12.5)
    assert Limits.from_dict(json.loads(json.dumps(limits.to_dict()))) == limits
    assert Limits.from_dict(dict(limits.to_dict(), later_field="x")) == limits
    assert Limits.from_dict(None) == Limits()


def test_limits_describe_as_people_read_them():
    assert Limits(expires_at=NOW, idle_stop_s=5400, max_spend_usd=12.5).describe() == {
        "expires_at": "2026-05-01T18:00:00Z", "idle_stop": "1h30m", "max_spend": "$12.5"}
    assert Limits().describe() == {"expires_at": None, "idle_stop": None, "max_spend": None}


def test_a_rerun_replaces_what_it_sets_and_keeps_what_it_leaves_unset():
    old = Limits(expires_at=NOW, idle_stop_s=600, max_spend_usd=20.0)
    merged, diff = lim.with_changes(old, Limits(expires_at=NOW + 3600))
    assert merged == Limits(expires_at=NOW + 3600, idle_stop_s=600, max_spend_usd=20.0)
    assert diff == {"before": old.describe(), "after": merged.describe()}
    assert diff["before"]["expires_at"] == "2026-05-01T18:00:00Z" and diff["after"]["expires_at"] == "2026-05-01T19:00:00Z"


def test_a_rerun_with_the_same_or_no_limits_changes_nothing():
    old = Limits(expires_at=NOW, max_spend_usd=20.0)
    for new in (Limits(), Limits(expires_at=NOW), old):
        merged, diff = lim.with_changes(old, new)
        assert merged == old and diff["before"] == diff["after"]


def test_a_rerun_can_shorten_a_deadline_and_lower_a_cap():
    merged, _diff = lim.with_changes(Limits(expires_at=NOW, max_spend_usd=20.0), Limits(expires_at=NOW - 60, max_spend_usd=5.0))
    assert merged == Limits(expires_at=NOW - 60, max_spend_usd=5.0)


# --- spend --------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("price, seconds, spent", [
    (2.49, 3600, "2.49"), (2.49, 1800, "1.25"),         # 1.245 rounds half up
    (0.1, 3 * 3600, "0.30"),                            # not 0.30000000000000004
    (3.0, 1, "0.00"), (3.0, 6, "0.01"),                 # 0.005 rounds up to a cent
    (98.32, 10 * 3600 + 17, "983.66"),
    (0.0, 86400, "0.00"),
])
def test_spend_is_the_price_times_the_time_up_in_decimal_cents(price, seconds, spent):
    assert lim.spend_usd(price, NOW, NOW + seconds) == Decimal(spent)


def test_spend_is_unknown_without_a_price_or_a_start_and_nothing_before_the_start():
    assert lim.spend_usd(None, NOW, NOW + 60) is None
    assert lim.spend_usd(2.0, None, NOW) is None
    assert lim.spend_usd(2.0, NOW, NOW - 3600) == Decimal("0.00")


def test_the_spend_budget_is_the_uptime_the_cap_buys_rounded_down():
    assert lim.spend_budget_s(Limits(max_spend_usd=10.0), 4.0) == 9000
    assert lim.spend_budget_s(Limits(max_spend_usd=1.0), 3.0) == 1200
    assert lim.spend_budget_s(Limits(max_spend_usd=0.1), 0.3) == 1200        # not 1199 from binary floats
    assert lim.spend_budget_s(Limits(max_spend_usd=1.0), 7.0) == 514           # 514.28...
    for price in (None, 0.0, -1.0):
        assert lim.spend_budget_s(Limits(max_spend_usd=10.0), price) is None
    assert lim.spend_budget_s(Limits(), 4.0) is None


def test_at_the_spend_deadline_the_spend_has_reached_the_cap_and_not_a_second_before_it_exceeds_it():
    limits = Limits(max_spend_usd=10.0)
    up = NOW
    due = lim.deadline(limits, up, 7.0)
    assert lim.spend_usd(7.0, up, due) <= Decimal("10.00") <= lim.spend_usd(7.0, up, due + 1)


def test_the_deadline_is_the_earlier_of_the_expiry_and_the_spend_cap():
    both = Limits(expires_at=NOW + 3 * 3600, max_spend_usd=10.0)
    assert lim.deadline_and_cause(both, NOW, 4.0) == (NOW + 9000, lim.CAUSE_MAX_SPEND)     # 2.5 h of spend
    assert lim.deadline_and_cause(both, NOW, 2.0) == (NOW + 3 * 3600, lim.CAUSE_EXPIRY)   # 5 h of spend
    assert lim.deadline_and_cause(Limits(expires_at=NOW + 9000, max_spend_usd=10.0), NOW, 4.0) == (NOW + 9000, lim.CAUSE_EXPIRY)


def test_without_a_price_or_a_start_only_the_expiry_binds():
    limits = Limits(expires_at=NOW + 60, max_spend_usd=1.0)
    assert lim.deadline(limits, None, 4.0) == NOW + 60
    assert lim.deadline(limits, NOW, None) == NOW + 60
    assert lim.deadline(Limits(max_spend_usd=1.0), NOW, None) is None
    assert lim.deadline(Limits(idle_stop_s=600), NOW, 4.0) is None


def test_time_left_counts_to_the_deadline_and_goes_negative_past_it():
    limits = Limits(expires_at=NOW + 600, max_spend_usd=1.0)
    assert lim.time_left(limits, NOW, 12.0, NOW + 100) == 200           # $1 at $12/h: 5 min
    assert lim.time_left(limits, NOW, 1.0, NOW + 700) == -100
    assert lim.time_left(Limits(), NOW, 1.0, NOW) is None


@pytest.mark.parametrize("seconds, text", [(0, "0s"), (59, "59s"), (5400, "1h30m"), (90061, "1d1h1m1s"), (-120, "2m"),
                                           (172800, "2d"), (59.9, "59s")])
def test_durations_format_back_as_they_are_written(seconds, text):
    assert lim.format_duration(seconds) == text


def test_formatted_durations_parse_back_to_the_same_seconds():
    for seconds in (1, 59, 60, 3599, 3600, 5400, 86399, 93784):
        assert lim.parse_duration("ttl", lim.format_duration(seconds)) == seconds


def test_iso_utc_is_the_inverse_of_parse_expires_at():
    assert lim.iso_utc(NOW) == "2026-05-01T18:00:00Z"
    assert lim.parse_expires_at(lim.iso_utc(NOW + 1)) == NOW + 1
