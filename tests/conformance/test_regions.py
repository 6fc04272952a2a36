"""The shared conformance suite, on ``regions``: a region a cloud does not have is an
InvalidRequest at plan time that names it and the regions the cloud has, on every adapter.

Without it a request the cloud cannot place (``regions: [mars-1]`` on the local cloud) was
planned somewhere else, and every re-run then found the VM outside the requested regions: a
mismatch, or with ``recreate`` a destroy and re-make on each run. What each check pins down:

* plan with ``regions: [mars-1]`` raises ProviderError(InvalidRequest) whose message starts with
  the field, names mars-1, and after it names a region the adapter's own plan (no region asked)
  has offers in; that plan creates nothing;
* plan with the region of one of its offers still plans there, and only there;
* ``regions`` is shared by every cloud of a request: a region the cloud does not have, next to
  one it has, is left out, not refused.
"""

from __future__ import annotations

import dataclasses

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    ANY_REGION, ErrorKind, ProviderError,
)

UNKNOWN = "mars-1"


def _plan(harness, regions):
    return harness.provider.plan(dataclasses.replace(harness.request, regions=list(regions)))


def _placed(offers):
    """The offers that name a region (not RunPod's or Massed Compute's "any data center")."""
    return [o for o in offers if o.region and o.region != ANY_REGION]


def test_plan_refuses_a_region_the_cloud_does_not_have(harness):
    has = sorted({o.region for o in _placed(_plan(harness, []))})
    assert has, "plan without regions returned no offer naming a region"
    before = harness.resources()
    with pytest.raises(ProviderError) as info:
        _plan(harness, [UNKNOWN])
    assert harness.resources() == before, "a refused plan changed the fake's resources"
    error = info.value
    assert error.kind == ErrorKind.INVALID_REQUEST, "plan(regions=[%s]) raised %r" % (UNKNOWN, error)
    assert error.msg.startswith("regions:"), "the message must name the field: %r" % error.msg
    assert UNKNOWN in error.msg, "the message must name the requested region: %r" % error.msg
    listed = error.msg.split(UNKNOWN, 1)[1]
    assert any(region in listed for region in has), (
        "the message names none of the regions the adapter plans in (%s): %r" % (", ".join(has), error.msg))


def test_plan_in_a_region_of_its_own_offers_still_works(harness):
    offers = _placed(_plan(harness, []))
    assert offers, "plan without regions returned no offer naming a region"
    region = offers[0].region
    again = _plan(harness, [region])
    assert again, "plan(regions=[%s]) returned no offer, and plan without regions offers %s" % (region, region)
    assert {o.region for o in again} == {region}


def test_another_clouds_region_next_to_its_own_is_left_out(harness):
    region = _placed(_plan(harness, []))[0].region
    offers = _plan(harness, [UNKNOWN, region])
    assert offers and {o.region for o in offers} == {region}
