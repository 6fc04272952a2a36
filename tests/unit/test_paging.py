"""providers/paging.py: when a paged listing is complete (issue 24, item 7), for the SDK
adapters' token loops (paging.collect) and the REST client (paging.Listing, tested through
RestClient.paginate in test_rest_client.py)."""

from __future__ import annotations

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import ErrorKind, ProviderError
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.paging import (
    Listing, collect, message_key, reported_total,
)


class Server:
    """Pages by token: ``pages`` maps a token ("" the first page) to (items, next token)."""

    def __init__(self, pages):
        self.pages = pages
        self.asked = []

    def __call__(self, token):
        self.asked.append(token)
        return self.pages[token]


def test_tokens_are_followed_to_the_last_page():
    server = Server({"": ([1, 2], "t2"), "t2": ([3], "t3"), "t3": ([4], None)})
    assert collect(server, "cloud List") == [1, 2, 3, 4]
    assert server.asked == ["", "t2", "t3"]


def test_a_server_that_ignores_the_token_ends_at_its_second_answer():
    server = Server({"": ([1, 2], "t2"), "t2": ([1, 2], "t2")})
    assert collect(server, "cloud List") == [1, 2]
    assert server.asked == ["", "t2"]


def test_a_token_already_followed_ends_the_listing():
    server = Server({"": ([1], "a"), "a": ([2], "b"), "b": ([3], "a")})
    assert collect(server, "cloud List") == [1, 2, 3]
    assert server.asked == ["", "a", "b"]


def test_a_page_of_items_already_listed_ends_the_listing_whatever_its_token():
    server = Server({"": ([1, 2], "a"), "a": ([3], "b"), "b": ([3], "c"), "c": ([4], None)})
    assert collect(server, "cloud List") == [1, 2, 3]
    assert server.asked == ["", "a", "b"]


def test_empty_pages_with_a_token_are_followed():
    # GCP may answer a filtered list's page with no result and a next token.
    server = Server({"": ([], "a"), "a": ([], "b"), "b": ([5], None)})
    assert collect(server, "cloud List") == [5]


def test_an_item_two_pages_hold_is_listed_once():
    server = Server({"": ([{"id": 1}, {"id": 2}], "a"), "a": ([{"id": 2}, {"id": 3}], None)})
    assert collect(server, "cloud List") == [{"id": 1}, {"id": 2}, {"id": 3}]


def test_the_page_cap_is_the_last_guard():
    server = Server({str(n): ([n], str(n + 1)) for n in range(10)} | {"": ([-1], "0")})
    with pytest.raises(ProviderError) as info:
        collect(server, "cloud List", max_pages=3)
    assert info.value.kind == ErrorKind.FAILED
    assert "cloud List: more than 3 pages" in info.value.msg and "expected at most 3" in info.value.msg
    assert len(server.asked) == 3


def test_errors_are_made_by_the_callers_factory():
    class Mine(ProviderError):
        pass
    server = Server({str(n): ([n], str(n + 1)) for n in range(10)} | {"": ([-1], "0")})
    with pytest.raises(Mine):
        collect(server, "cloud List", max_pages=2, error=lambda message: Mine(ErrorKind.FAILED, message))


def test_a_listing_ends_at_the_total_it_reports():
    listing = Listing("cloud GET /vms")
    assert listing.add([{"id": 7}]) == [{"id": 7}]
    assert listing.more("page-2", total=1) is False


def test_a_repeat_before_the_total_came_is_failed_naming_both_counts():
    listing = Listing("cloud GET /vms")
    listing.add([1, 2])
    assert listing.more("page-2", total=5) is True
    assert listing.add([1, 2]) == []
    with pytest.raises(ProviderError) as info:
        listing.more("page-3", total=5)
    assert info.value.kind == ErrorKind.FAILED
    assert "cloud GET /vms: page 2 holds only items already listed" in info.value.msg
    assert "2 of the 5 items" in info.value.msg and "does not page" in info.value.msg


def test_a_next_page_back_to_the_first_is_a_repeat():
    listing = Listing("cloud GET /vms", first="page-1")
    listing.add([1])
    assert listing.more("page-1") is False


@pytest.mark.parametrize("value, total", [(3, 3), (0, 0), (True, None), (-1, None), ("3", None), (None, None)])
def test_only_counts_are_totals(value, total):
    assert reported_total(value) == total


def test_messages_are_told_apart_by_their_bytes():
    class Message:
        def __init__(self, data):
            self.data = data

        def SerializeToString(self, deterministic=False):
            assert deterministic
            return self.data
    assert message_key(Message(b"a")) == message_key(Message(b"a")) != message_key(Message(b"b"))
