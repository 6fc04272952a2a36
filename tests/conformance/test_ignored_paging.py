"""A server that ignores the paging query (issue 24, item 7), for every adapter with a paged
listing: every page asked is answered as the first (with the total where the vendor reports
one), and it still offers a next page. Each listing must end at once, with the right items
and none twice: after its first page when the total has come, else when the next page
repeats it. Before the fix each listing read 100 pages and failed (a teardown polling one
failed at every poll), or, on the SDK clouds, followed the same token again and again.

The whole life of a VM runs against such a server: plan (its catalog listing), prepare,
create, observe, list_owned (the orphan sweep), delete, cleanup and observe again. Each
primitive may ask, per listing, at most one page past each first page it asked: the fake
counts the pages asked (``harness.page_requests``). Where a vendor signals another page only
by a full one (Verda's scripts), the harness fills the first page first
(``harness.fill_first_pages``); Prime Intellect's listings also report their total, so a server
of theirs that ignores paging could not make them loop even before the fix.
"""

from __future__ import annotations

import collections

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import ResourceKind
from ansible_collections.gpuprov.cloud.tests.conformance.test_conformance import (
    _ids, _launch, _list_owned, _offer, _teardown,
)


def _bounded(harness, what, call):
    """``call()``, checking that no listing it read asked more than one page past a first page."""
    before = len(harness.page_requests())
    result = call()
    asked = harness.page_requests()[before:]
    firsts, later = collections.Counter(), collections.Counter()
    for listing, first in asked:
        (firsts if first else later)[listing] += 1
    over = {listing: (firsts[listing], n) for listing, n in later.items() if n > firsts[listing]}
    assert not over, ("%s: %s against a server that ignores paging read more than one page past each first page "
                      "of a listing (listing: (first pages, later pages)): %r; expected each listing to end at "
                      "its first page's total or at the page that repeats it" % (harness.cloud, what, over))
    return result, asked


def test_listings_end_when_the_server_ignores_paging(harness):
    offer = _offer(harness)
    reference = [o.to_dict() for o in harness.provider.plan(harness.request)]
    harness.fill_first_pages()
    before = harness.resources()
    harness.ignore_paging()
    name = harness.spec.vm_name
    provider = harness.provider
    location = offer.location
    asked = []
    try:
        offers, pages = _bounded(harness, "plan", lambda: provider.plan(harness.request))
        asked += pages
        assert [o.to_dict() for o in offers] == reference, "plan's offers changed when the server ignores paging"

        _prepared, pages = _bounded(harness, "prepare", lambda: provider.prepare(offer, harness.spec))
        asked += pages
        instance_id, pages = _bounded(harness, "create", lambda: _launch(harness, offer, harness.spec))
        asked += pages
        harness.settle(location, instance_id)

        found, pages = _bounded(harness, "observe", lambda: provider.observe(location, name))
        asked += pages
        assert _ids(found) == [instance_id], "observe: expected exactly %s once, got %r" % (instance_id, found)

        owned, pages = _bounded(harness, "list_owned", lambda: _list_owned(harness, harness.new_provider(), offer))
        asked += pages
        mine = [o for o in owned if o.vm_name == name]
        instances = [o.resource_id for o in mine if o.kind == ResourceKind.INSTANCE]
        assert instances == [instance_id], "list_owned: expected %s once, got %r" % (instance_id, owned)
        keys = [(o.kind, o.resource_id) for o in owned]
        assert len(keys) == len(set(keys)), "list_owned reports a resource twice: %r" % (owned,)

        _none, pages = _bounded(harness, "delete", lambda: provider.delete(location, name, [instance_id]))
        asked += pages
        harness.settle_deleted(location, instance_id)
        _none, pages = _bounded(harness, "cleanup", lambda: provider.cleanup(location, name))
        asked += pages
        gone, pages = _bounded(harness, "observe after delete", lambda: provider.observe(location, name))
        asked += pages
        assert gone == [], "observe after delete + cleanup: expected nothing, got %r" % (gone,)
        assert harness.resources() == before, "delete + cleanup left resources of the VM"
        assert asked, "%s: no primitive read a paged listing; the harness's page_requests sees none" % harness.cloud
    finally:
        _teardown(harness, location, name)
