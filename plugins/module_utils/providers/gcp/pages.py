# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every entry of one GCP listing, however its pager pages (a part of the gcp adapter, gcp/__init__.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, List

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.paging import Listing


def all_pages(pager, where: str) -> List[Any]:
    """Every entry of a pager's pages (a list's items; an aggregated list's (scope, scoped list)
    pairs), each once. The SDK's pager follows ``next_page_token`` for as long as one comes;
    here paging.Listing ends it: at a page whose entries were all listed before, or a token
    already followed (a server that ignores pageToken), and at its page cap. A scope holding
    only its warning (NO_RESULTS_ON_PAGE) is kept, as it names a zone, but is nothing new: GCP
    may answer pages with no result and a next token."""
    listing = Listing(where, key=_entry_key)
    found, kept = [], set()
    for _number, page in zip(range(listing.max_pages), pager.pages, strict=False):  # the next page is fetched only when asked
        items = page.items
        entries = list(items.items()) if isinstance(items, Mapping) else list(items)
        listing.add([entry for entry in entries if _lists_something(entry)])
        for entry in entries:
            key = _entry_key(entry)
            if key not in kept:
                kept.add(key)
                found.append(entry)
        if not listing.more(page.next_page_token):
            break
    return found


def _entry_key(entry: Any) -> Any:
    """A page entry's identity: its serialized message (with its scope, in an aggregated list)."""
    scope, message = entry if isinstance(entry, tuple) else ("", entry)
    return scope, type(message).pb(message).SerializeToString(deterministic=True)


def _lists_something(entry: Any) -> bool:
    """Whether an entry holds a result: a list's item does; a scope does unless all it has is its warning."""
    if not isinstance(entry, tuple):
        return True
    scoped = entry[1]
    return any(field.name != "warning" for field, _value in type(scoped).pb(scoped).ListFields())
