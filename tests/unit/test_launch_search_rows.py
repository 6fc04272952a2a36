"""A long failover writes a small state per offer (issue 16): the planned offers live in the
journal's launch_search table, written once per search, and each offer left adds one row,
committed in the transaction of the state that points at it. A crash before any commit
resumes exactly; a search journalled in the older layout (every offer in the state) resumes.

The REAL executor and launch machine run on a tmp journal against the scripted fake cloud.
"""

from __future__ import annotations

import json
import sqlite3

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journal import Conflict
from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journal_sql import JournalError
from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journals import open_journal
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    BlockScope, ErrorKind, Offer, ProviderError,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import launch
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks import status
from ansible_collections.gpuprov.cloud.tests import pg_server
from ansible_collections.gpuprov.cloud.tests.fakes.toy_machine import Crash   # the controller dies: no commit
from ansible_collections.gpuprov.cloud.tests.fakes.commit_hook import crash_at_commit
from ansible_collections.gpuprov.cloud.tests.fakes.scripted_provider import ScriptedProvider, World, offer


def refusing_cloud(count, refused=None):
    """``count`` offers (one region each); every one but the last refuses at prepare."""
    regions = ["r%04d" % index for index in range(count)]
    p = ScriptedProvider("sim", [offer("sim", region) for region in regions])
    refused = set(regions[:-1] if refused is None else refused)
    p.fail("prepare", ProviderError(ErrorKind.UNAVAILABLE, "no capacity", BlockScope.OFFER), times=None,
           where=lambda subject: subject.region in refused)
    return p


def state_sizes(tmp_path, count):
    """The JSON size of every state committed by a launch through ``count`` offers, by kind."""
    sizes = {}
    w = World(tmp_path / str(count), [refusing_cloud(count)])

    def measure(old, new):
        sizes.setdefault(new["kind"], []).append(len(json.dumps(new, sort_keys=True)))
    out = w.launch(before_commit=measure)
    assert out.state["kind"] == "Ready"
    return sizes, out


def history_of(state):
    return [(h["offer"], h["outcome"]) for h in state["search"]["history"]]


def test_the_state_written_per_refused_offer_does_not_grow_with_the_offers(tmp_path):
    few = state_sizes(tmp_path, 10)[0]
    many, out = state_sizes(tmp_path, 300)

    assert len(many["Preparing"]) == 300 and len(few["Preparing"]) == 10   # one write per refused offer
    # The same but for the digits of the cursor and the count.
    assert max(many["Preparing"]) - max(few["Preparing"]) <= 4
    # Ready still carries the whole search, once.
    search = out.state["search"]
    assert len(search["offers"]) == 300 and search["cursor"] == 299
    assert history_of(out.state) == [("sim:r%04d:gpu.1x" % index, "Unavailable") for index in range(299)]
    assert [b["scope"] for b in search["blocked"]] == [BlockScope.OFFER] * 299
    # Its rows are gone with the search.
    journal = open_journal(str(tmp_path / "300" / "journal.sqlite"))
    try:
        assert journal.query("SELECT key, plan, seq FROM launch_search") == []
    finally:
        journal.close()


def test_a_running_search_names_its_offer_and_plan_and_keeps_the_offers_in_the_table(tmp_path):
    p = refusing_cloud(5)
    w = World(tmp_path, [p])
    seen = []

    def stop_at_the_third(old, new):
        if new["kind"] == "Preparing" and new["search"]["cursor"] == 2:
            seen.append(new)
            raise Crash("stop")
    with pytest.raises(Crash):
        w.launch(before_commit=stop_at_the_third)
    state = w.row().state
    search = state["search"]
    assert state["kind"] == "Preparing" and search["cursor"] == 1 and search["size"] == 5
    assert search["offer"]["region"] == "r0001" and "offers" not in search and "history" not in search
    assert w.row().label == "Preparing (offer 2 of 5: sim:r0001:gpu.1x)"
    rows = w.journal.query("SELECT seq, body FROM launch_search WHERE key = ? AND plan = ? ORDER BY seq",
                           ("vm1", search["plan"]))
    assert [seq for seq, _body in rows] == [0, 1]
    assert [o["region"] for o in json.loads(rows[0][1])["offers"]] == ["r%04d" % i for i in range(5)]
    assert json.loads(rows[1][1])["history"]["offer"] == "sim:r0000:gpu.1x"
    # The row of the offer being left was never written: it rolls back with its state.
    assert seen and seen[0]["search"]["cursor"] == 2
    # status reads the running search's rows: the offer it is at, and why the earlier one was left.
    [vm] = status.read_status(w.journal.path, "vm1")["vms"]
    assert vm["search"] == {"offer": 2, "of": 5, "offer_id": "sim:r0001:gpu.1x", "price_per_hour": 2.5,
                            "skipped": ["sim:r0000:gpu.1x (Unavailable): no capacity"]}


@pytest.mark.parametrize("blocked_scope", [BlockScope.OFFER, BlockScope.REGION])
def test_a_crash_before_any_commit_of_a_failover_resumes_exactly(tmp_path, blocked_scope):
    """Kill the controller before the n-th commit, for every n: the resumed run ends Ready on the
    same offer with the same history as a run never killed, with one instance."""
    def cloud():
        regions = ["r0", "r0", "r1", "r2", "r3"]
        types = ["a", "b", "a", "a", "a"]
        p = ScriptedProvider("sim", [offer("sim", r, t) for r, t in zip(regions, types, strict=True)])
        p.fail("prepare", ProviderError(ErrorKind.UNAVAILABLE, "no capacity", blocked_scope), times=None,
               where=lambda subject: subject.region in ("r0", "r1"))
        p.fail("create", ProviderError(ErrorKind.CAPACITY, "stockout"), times=None,
               where=lambda subject: subject.region == "r2")
        return p

    clean_cloud = cloud()
    clean = World(tmp_path / "clean", [clean_cloud]).launch()
    expected = (history_of(clean.state), clean.state["vm"]["location"])
    n = 0
    while True:
        p = cloud()
        w = World(tmp_path / ("crash-%d" % n), [p])
        try:
            out, crashed = w.launch(before_commit=crash_at_commit(n)), False
        except Crash:
            out, crashed = w.launch(), True
        assert out.state["kind"] == "Ready", (n, out.label)
        assert (history_of(out.state), out.state["vm"]["location"]) == expected, n
        assert [i.instance_id for i in p.live("vm1")] == [out.state["vm"]["instance_id"]], n
        if not crashed:
            break
        n += 1
    assert n > 8
    # A region-scoped refusal blocks r0's second offer unseen; an offer-scoped one tries it.
    tried = [offer_id for offer_id, _outcome in expected[0]]
    assert ("sim:r0:b" in tried) == (blocked_scope == BlockScope.OFFER)


def test_a_search_journalled_with_every_offer_in_its_state_resumes_and_moves_to_the_table(tmp_path):
    p = refusing_cloud(4, refused=["r0000", "r0001", "r0002"])
    w = World(tmp_path, [p])
    offers = [o.to_dict() for o in p.offers]
    old_search = {"offers": offers, "cursor": 1, "round": 0,
                  "blocked": [launch.make_block(offers[0], BlockScope.OFFER, "no capacity")],
                  "history": [{"offer": Offer.from_dict(offers[0]).offer_id, "outcome": "Unavailable",
                               "error": {"kind": "Unavailable", "msg": "no capacity", "block": "Offer"}}]}
    error = {"kind": "Unavailable", "msg": "no capacity", "block": "Offer"}
    w.journal.begin("vm1", "launch", {"kind": "NextOffer", "search": old_search, "error": error},
                    "NextOffer", False, "old-run", 60.0, None)
    w.journal.release("vm1", "old-run")

    out = w.launch()

    assert out.resumed and out.state["kind"] == "Ready"
    assert out.state["vm"]["location"]["region"] == "r0003"
    assert [outcome for _offer, outcome in history_of(out.state)] == ["Unavailable"] * 3
    assert p.ops("prepare") == [("sim:r0002:gpu.1x",), ("sim:r0003:gpu.1x",)]
    assert w.journal.query("SELECT key FROM launch_search") == []


def test_exhausting_the_search_keeps_the_whole_search_in_the_state(tmp_path):
    p = refusing_cloud(3, refused=["r0000", "r0001", "r0002"])
    w = World(tmp_path, [p])

    out = w.launch()

    assert out.state["kind"] == "Exhausted"
    assert "3 tried" in out.state["reason"]
    assert len(out.state["search"]["offers"]) == 3 and len(out.state["search"]["history"]) == 3
    assert w.journal.query("SELECT key FROM launch_search") == []


# -- the journal writes the rows with the state, or not at all, on both backends ----------

@pytest.fixture(params=["sqlite", "postgresql"])
def journal(request, tmp_path, monkeypatch):
    if request.param == "sqlite":
        j = open_journal(str(tmp_path / "journal.sqlite"), tables=launch.SEARCH_TABLES)
        yield j
        j.close()
        return
    reason = pg_server.unavailable()
    if reason:
        pytest.skip("PostgreSQL: %s" % reason)
    server = pg_server.PgServer()
    monkeypatch.setenv("PGPASSWORD", pg_server.PASSWORD)
    try:
        j = open_journal(server.new_database(), tables=launch.SEARCH_TABLES)
        yield j
        j.close()
    finally:
        server.destroy()


def test_rows_are_committed_with_the_transition_or_not_at_all(journal):
    insert = "INSERT INTO launch_search (key, plan, seq, body) VALUES (?, ?, ?, ?)"
    version = journal.begin("vm1", "toy", {"kind": "A"}, "A", False, "me", 60.0, None)
    version = journal.transition("vm1", "me", version, {"kind": "B"}, "B", False, "A",
                                 rows=[(insert, ("vm1", "p1", 0, "{}")), (insert, ("vm1", "p1", 1, "{}"))])
    with pytest.raises(Conflict):
        journal.transition("vm1", "me", version - 1, {"kind": "X"}, "X", False, "B",
                           rows=[(insert, ("vm1", "p1", 2, "{}"))])
    with pytest.raises((sqlite3.IntegrityError, JournalError)):   # a row that fails rolls the state back too
        journal.transition("vm1", "me", version, {"kind": "Y"}, "Y", False, "B",
                           rows=[(insert, ("vm1", "p1", 1, "{}"))])

    assert journal.query("SELECT seq FROM launch_search ORDER BY seq") == [(0,), (1,)]
    row = journal.load("vm1")
    assert row.state == {"kind": "B"} and row.version == version
