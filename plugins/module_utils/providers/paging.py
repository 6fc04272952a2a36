# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""When a paged listing is complete: one rule for every paginator (the REST client's and
the SDK adapters' own loops over page tokens).

A listing ends, with the items it has, as soon as one of these holds:

* the API says no page follows (no next token or link; a short or empty page);
* the items came that the API reports in all (a total such as Hyperstack's ``count``,
  DigitalOcean's ``meta.total``, Prime Intellect's ``totalCount``);
* a page brings no item the listing has not seen already, or its next page is one
  already fetched: the server ignores the page query (or repeats its last page). Its
  answer was the whole listing, unless it reports a total that has not come: then the
  listing is Failed, naming both counts (the rest cannot be read, and a short listing
  would pass for a complete one: a teardown would take a missing VM for gone).

An item seen before is never yielded twice. More than ``max_pages`` pages, with the
server still offering another, is Failed: the last guard, never reached by a server
that ignores paging.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Hashable, Iterable, List, Optional, Tuple

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import ErrorKind, ProviderError

DEFAULT_MAX_PAGES = 100


def item_key(item: Any) -> Hashable:
    """What makes two items one: their canonical JSON (a dict's keys sorted)."""
    return json.dumps(item, sort_keys=True, default=str)


def message_key(message: Any) -> Hashable:
    """What makes two protobuf messages (an SDK's list items) one: their type and serialized bytes."""
    return type(message).__name__, message.SerializeToString(deterministic=True)


def reported_total(value: Any) -> Optional[int]:
    """``value`` as a count of items (an int >= 0, not a bool), else None."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


class Listing:
    """One paged listing as its loop reads it: :meth:`add` each page, then ask :meth:`more`
    whether to fetch the next one.

    ``where``: the cloud and call, first words of every message. ``key``: an item's
    identity (:func:`item_key` by default). ``first``: the first page's identity (a
    token, or whatever :meth:`more` is given for the pages after it), so that a next
    page pointing back to it counts as a repeat. ``error``: makes the Failed error from
    a message (a plain ProviderError by default; the REST client's scrubs secrets).
    """

    def __init__(self, where: str, max_pages: int = DEFAULT_MAX_PAGES, key: Callable[[Any], Hashable] = item_key,
                 first: Optional[Hashable] = None, error: Optional[Callable[[str], ProviderError]] = None):
        self.where = where
        self.max_pages = max_pages
        self.key = key
        self.count = 0          # distinct items so far
        self.pages = 0          # pages added
        self._seen: set = set()
        self._fetched: set = set() if first in (None, "") else {first}
        self._page_size = 0
        self._page_new = 0
        self._error = error or (lambda message: ProviderError(ErrorKind.FAILED, message))

    def add(self, page: Iterable[Any]) -> List[Any]:
        """The items of one more page that the listing has not seen, in the page's order."""
        page = list(page)
        new = []
        for item in page:
            identity = self.key(item)
            if identity not in self._seen:
                self._seen.add(identity)
                new.append(item)
        self.pages += 1
        self.count += len(new)
        self._page_size, self._page_new = len(page), len(new)
        return new

    def more(self, following: Optional[Hashable], total: Any = None) -> bool:
        """Whether to fetch the page ``following`` names after the page just added.

        ``following``: the next page's token (or link), None or empty when the API says
        none follows. ``total``: how many items the API reports in all, where it does.
        """
        total = reported_total(total)
        if total is not None and self.count >= total:
            return False
        if following in (None, ""):
            return False
        if self._page_size and not self._page_new:
            return self._repeated("page %d holds only items already listed" % self.pages, total)
        if following in self._fetched:
            return self._repeated("page %d points to a page already fetched as the next" % self.pages, total)
        if self.pages >= self.max_pages:
            raise self._error("%s: more than %d pages, and the server offers another; expected at most %d: "
                              "narrow the listing" % (self.where, self.max_pages, self.max_pages))
        self._fetched.add(following)
        return True

    def _repeated(self, what: str, total: Optional[int]) -> bool:
        """A server that does not page: its answer was the whole listing, unless its total says not."""
        if total is None:
            return False
        raise self._error("%s: %s, so the server does not page this listing, and %d of the %d items it reports "
                          "came; expected pages that reach its total" % (self.where, what, self.count, total))


def collect(fetch: Callable[[Any], Tuple[Iterable[Any], Any]], where: str, max_pages: int = DEFAULT_MAX_PAGES,
            key: Callable[[Any], Hashable] = item_key, first: Any = "",
            error: Optional[Callable[[str], ProviderError]] = None) -> List[Any]:
    """Every distinct item of a listing paged by tokens: ``fetch(token)`` answers one page
    as ``(items, next token)`` (``first`` asks for the first page); the rules above end it.
    ``key`` and ``error`` as for :class:`Listing`."""
    listing = Listing(where, max_pages=max_pages, key=key, first=first, error=error)
    found: List[Any] = []
    token = first
    for _page in range(max_pages):  # bounded: more() fails past the last page allowed
        items, token = fetch(token)
        found.extend(listing.add(items))
        if not listing.more(token):
            break
    return found
