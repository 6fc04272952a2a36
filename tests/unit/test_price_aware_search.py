"""The price-aware search: ``prefer`` orders, ``max_price_per_hour`` filters, skipped offers
say why, and a vendor's Retry-After stretches the core's backoff."""

from __future__ import annotations

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.executor import MAX_RETRY_AFTER_S
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import ErrorKind, ProviderError
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.rest import RestError
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.request_params import search_preferences
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm.planning import choose_offers
from ansible_collections.gpuprov.cloud.tests.fakes.scripted_provider import ScriptedProvider, World, offer

A, B = "fakea", "fakeb"


def ids(offers):
    return [o.offer_id for o in offers]


def test_prefer_order_keeps_the_clouds_order_and_price_sorts_across_clouds():
    planned = [offer(A, "r1", price_per_hour=3.0), offer(A, "r2", price_per_hour=1.0),
               offer(B, "r1", price_per_hour=2.0), offer(B, "r2", price_per_hour=None, spot=True)]
    in_order, _skipped = choose_offers(planned, "order")
    assert ids(in_order) == ids(planned)
    by_price, skipped = choose_offers(planned, "price")
    assert ids(by_price) == ["fakea:r2:gpu.1x", "fakeb:r1:gpu.1x", "fakea:r1:gpu.1x", "fakeb:r2:gpu.1x"]
    assert skipped == []


def test_equal_prices_keep_the_clouds_order():
    planned = [offer(B, "r1", price_per_hour=2.0), offer(A, "r1", price_per_hour=2.0)]
    assert ids(choose_offers(planned, "price")[0]) == ["fakeb:r1:gpu.1x", "fakea:r1:gpu.1x"]


def test_max_price_skips_dearer_and_unpriced_offers_with_the_reason():
    planned = [offer(A, "r1", price_per_hour=3.29), offer(A, "r2", price_per_hour=1.99),
               offer(B, "r1", price_per_hour=None), offer(B, "r2", price_per_hour=2.0),
               offer(B, "r3", price_per_hour=0.5, available=False, unavailable_reason="no stock in r3")]
    chosen, skipped = choose_offers(planned, "order", 2.0)
    assert ids(chosen) == ["fakea:r2:gpu.1x", "fakeb:r2:gpu.1x"]   # 2.0 itself is not dearer
    assert [(o.offer_id, why) for o, why in skipped] == [
        ("fakea:r1:gpu.1x", "$3.29/h is above max_price_per_hour $2"),
        ("fakeb:r1:gpu.1x", "the cloud reports no price, and max_price_per_hour is $2"),
        ("fakeb:r3:gpu.1x", "no stock in r3"),
    ]


@pytest.mark.parametrize("params, message", [
    ({"prefer": "cheapest"}, "prefer: expected one of order, price, got 'cheapest'"),
    ({"max_price_per_hour": -1}, "max_price_per_hour: expected a number of US dollars >= 0, got -1"),
    ({"max_price_per_hour": True}, "max_price_per_hour: expected a number of US dollars >= 0, got True"),
])
def test_bad_preferences_name_the_field(params, message):
    with pytest.raises(ProviderError) as raised:
        search_preferences(params)
    assert raised.value.kind == ErrorKind.INVALID_REQUEST and raised.value.msg == message


def test_preferences_default_to_cloud_order_without_a_limit():
    assert search_preferences({}) == ("order", None)
    assert search_preferences({"prefer": "price", "max_price_per_hour": 3}) == ("price", 3.0)


def test_a_launch_by_price_takes_the_cheaper_cloud_and_records_the_skips(tmp_path):
    dear = ScriptedProvider(A, [offer(A, "r1", price_per_hour=4.0)])
    cheap = ScriptedProvider(B, [offer(B, "r1", price_per_hour=1.5), offer(B, "r2", price_per_hour=9.0)])
    w = World(tmp_path, [dear, cheap], prefer="price", max_price_per_hour=5.0)

    out = w.launch()

    assert out.state["kind"] == "Ready"
    assert out.state["vm"]["location"]["cloud"] == B and out.state["vm"]["price_per_hour"] == 1.5
    assert dear.calls["create"] == 0
    search = out.state["search"]
    assert ids_of(search["offers"]) == ["fakeb:r1:gpu.1x", "fakea:r1:gpu.1x"]
    assert [(h["offer"], h["outcome"], h["error"]["msg"]) for h in search["history"]] == [
        ("fakeb:r2:gpu.1x", "skipped", "$9/h is above max_price_per_hour $5")]


def test_a_launch_where_every_offer_is_too_dear_is_exhausted_with_the_reasons(tmp_path):
    p = ScriptedProvider(A, [offer(A, "r1", price_per_hour=4.0)])
    w = World(tmp_path, [p], max_price_per_hour=1.0)

    out = w.launch()

    assert out.state["kind"] == "Exhausted"
    assert out.state["reason"] == "no offer available: $4/h is above max_price_per_hour $1"
    assert p.calls["create"] == 0


def ids_of(offers):
    return ["%s:%s:%s" % (o["cloud"], o["region"], o["instance_type"]) for o in offers]


def test_a_rate_limited_create_waits_as_long_as_the_vendor_asked(tmp_path):
    p = ScriptedProvider(A, [offer(A, "r1")])
    p.fail("create", RestError(ErrorKind.TRANSIENT, "429 Too Many Requests", status=429, retry_after=12.0))
    w = World(tmp_path, [p])

    out = w.launch()

    assert out.state["kind"] == "Ready" and p.calls["create"] == 2
    assert 12.0 in w.clock.waits     # not the 0.5..1 s of the first backoff step


def test_a_huge_retry_after_is_capped(tmp_path):
    p = ScriptedProvider(A, [offer(A, "r1")])
    p.fail("plan", RestError(ErrorKind.TRANSIENT, "429", status=429, retry_after=86400.0))
    w = World(tmp_path, [p])

    out = w.launch()

    assert out.state["kind"] == "Ready"
    assert max(w.clock.waits) == MAX_RETRY_AFTER_S
