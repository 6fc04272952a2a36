# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the VMs of a fleet share through the journal (issue 28): answers of read-only cloud calls,
and the clouds' throttle answers.

Every worker of a fleet, on every controller of one journal, already shares the journal; so these live
there, in two tables of their own (handed to the journal as ``FLEET_TABLES``, as expiry/store.py hands
its table):

* ``fleet_answers``: one row per question (a plan of one request shape on one account, a listing of one
  location, a lookup prepare makes): the answer as JSON, when it was taken (the journal's clock), and a
  claim (who is asking the cloud right now, until when), so that one worker asks while the others wait
  for its answer instead of asking too;
* ``fleet_budget``: the token buckets that keep an account's requests, from every worker together, under the
  vendor's documented limits (``Provider.api_limits``): one row per account scope and limit;
* ``fleet_throttle``: one row per account scope (fleet/scope.py): until when every worker holds its calls
  to that account, why, and how many throttle answers came in a row (the hold doubles with each).

Only answers of read-only calls are shared, and never where a stale one could make something twice: the
launch re-checks an offer at prepare and observes before every create as it always did (vm/launch.py).
A row lost or never written costs one more call, nothing else; a crashed claimant's claim expires.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, List, Optional, Sequence, Tuple

FLEET_TABLES = (
    """CREATE TABLE IF NOT EXISTS fleet_answers (
        key TEXT PRIMARY KEY,
        answer TEXT,
        taken_at REAL,
        claim_owner TEXT,
        claim_expires REAL
    )""",
    """CREATE TABLE IF NOT EXISTS fleet_budget (
        scope TEXT NOT NULL,
        bucket INTEGER NOT NULL,
        tokens REAL NOT NULL,
        updated_at REAL NOT NULL,
        PRIMARY KEY (scope, bucket)
    )""",
    """CREATE TABLE IF NOT EXISTS fleet_throttle (
        scope TEXT PRIMARY KEY,
        until REAL NOT NULL,
        strikes INTEGER NOT NULL,
        reason TEXT NOT NULL,
        updated_at REAL NOT NULL
    )""",
)

# The first hold of an account after a throttle answer that asked for no delay (EC2's
# RequestLimitExceeded says none), doubled with each further one while the last still runs, up to
# THROTTLE_HOLD_MAX_S; a Retry-After is honoured as given (up to that cap).
THROTTLE_HOLD_S = 1.0
THROTTLE_HOLD_MAX_S = 60.0


@dataclasses.dataclass(frozen=True)
class Answer:
    """A shared answer: the JSON value and when it was taken (journal clock, epoch seconds)."""

    value: Any
    taken_at: float


@dataclasses.dataclass(frozen=True)
class Hold:
    """An account's throttle hold: every worker waits ``seconds`` more before calling it."""

    seconds: float
    reason: str


class FleetRows:
    """The two tables, read and written through ``journal``'s plain-SQL API (any backend)."""

    def __init__(self, journal: Any):
        self.journal = journal
        journal.ensure_tables(FLEET_TABLES)

    def now(self) -> float:
        return float(self.journal.clock())

    # -- answers ------------------------------------------------------------------------
    def answer(self, key: str) -> Optional[Answer]:
        """``key``'s answer, or None when none was ever written."""
        found: List[Tuple[Any, ...]] = self.journal.query(
            "SELECT answer, taken_at FROM fleet_answers WHERE key = ?", (key,))
        if not found or found[0][0] is None:
            return None
        try:
            return Answer(json.loads(found[0][0]), float(found[0][1]))
        except (TypeError, ValueError):
            return None   # an unreadable row is an answer never written: ask again

    def claim(self, key: str, owner: str, ttl: float, seen: Optional[Answer]) -> bool:
        """Claim the asking of ``key`` for ``ttl`` s. False when another owner's claim is live, or when an
        answer newer than ``seen`` (the one the caller read, or None) came meanwhile: read it instead."""
        now = self.now()
        with self.journal.transaction() as tx:
            tx.execute("INSERT INTO fleet_answers (key) VALUES (?) ON CONFLICT (key) DO NOTHING", (key,))
            done = tx.execute("UPDATE fleet_answers SET claim_owner = ?, claim_expires = ? WHERE key = ? AND "
                              "(claim_owner IS NULL OR claim_owner = ? OR claim_expires < ?) AND "
                              "COALESCE(taken_at, 0) <= ?",
                              (owner, now + ttl, key, owner, now, seen.taken_at if seen else 0))
            return bool(done.rowcount)

    def put(self, key: str, owner: str, value: Any) -> Answer:
        """Write ``key``'s answer, taken now, and end ``owner``'s claim of it."""
        answer = Answer(value, self.now())
        text = json.dumps(value, sort_keys=True)
        with self.journal.transaction() as tx:
            tx.execute("INSERT INTO fleet_answers (key) VALUES (?) ON CONFLICT (key) DO NOTHING", (key,))
            tx.execute("UPDATE fleet_answers SET answer = ?, taken_at = ?, claim_owner = CASE WHEN claim_owner = ? "
                       "THEN NULL ELSE claim_owner END WHERE key = ?", (text, answer.taken_at, owner, key))
            # Answers are useful for seconds: a day-old one is only clutter (a request shape not asked since).
            tx.execute("DELETE FROM fleet_answers WHERE taken_at < ? AND claim_owner IS NULL", (answer.taken_at - 86400,))
        return answer

    def release(self, key: str, owner: str) -> None:
        """End ``owner``'s claim of ``key`` without an answer (its call failed)."""
        self.journal.execute("UPDATE fleet_answers SET claim_owner = NULL WHERE key = ? AND claim_owner = ?",
                             (key, owner))

    def booting_beside(self, key: str, cloud: str, region: str) -> bool:
        """True when another machine than ``key`` is Booting on ``cloud`` in ``region`` (by its label,
        ``Booting (offer N of M: <cloud>:<region>:...)``, vm/launch.py): a listing would serve two."""
        found = self.journal.query("SELECT 1 FROM machines WHERE terminal = 0 AND key <> ? AND label LIKE ? LIMIT 1",
                                   (key, "Booting (offer %% of %%: %s:%s:%%" % (cloud, region)))
        return bool(found)

    # -- the budget -----------------------------------------------------------------------
    def take(self, scope: str, buckets: Sequence[Tuple[float, float]]) -> float:
        """Reserve one request in each of ``scope``'s token ``buckets`` ((size, refill per second), full at first)
        and return how long to wait before sending it: 0.0 while they hold one, else until its turn comes. A
        reservation is a debt the refill pays back, so the fleet's requests queue in the order they came and
        none is ever refused: a request waits for its slot, and the step that makes it keeps its earlier ones."""
        wait = 0.0
        with self.journal.transaction() as tx:
            now = self.now()
            for index, (size, rate) in enumerate(buckets):
                tx.execute("INSERT INTO fleet_budget (scope, bucket, tokens, updated_at) VALUES (?, ?, ?, ?) "
                           "ON CONFLICT (scope, bucket) DO NOTHING", (scope, index, size, now))
                # One UPDATE does the arithmetic on the row as the last writer left it (PostgreSQL re-reads a row
                # another transaction changed meanwhile; SQLite holds the whole journal): never a lost update,
                # and a time older than the row's refills nothing (a bucket stamped back would refill twice).
                tx.execute("UPDATE fleet_budget SET tokens = CASE WHEN tokens + ? * "
                           "(CASE WHEN ? > updated_at THEN ? - updated_at ELSE 0 END) > ? THEN ? ELSE tokens + ? * "
                           "(CASE WHEN ? > updated_at THEN ? - updated_at ELSE 0 END) END - 1, "
                           "updated_at = CASE WHEN ? > updated_at THEN ? ELSE updated_at END "
                           "WHERE scope = ? AND bucket = ?",
                           (rate, now, now, size, size, rate, now, now, now, now, scope, index))
                left = float(tx.execute("SELECT tokens FROM fleet_budget WHERE scope = ? AND bucket = ?",
                                        (scope, index)).fetchone()[0])
                if left < 0:
                    wait = max(wait, -left / rate if rate > 0 else THROTTLE_HOLD_MAX_S)
        return wait

    # -- throttle -----------------------------------------------------------------------
    def hold(self, scope: str) -> Optional[Hold]:
        """The hold on ``scope`` still running, or None."""
        found = self.journal.query("SELECT until, reason FROM fleet_throttle WHERE scope = ?", (scope,))
        if not found:
            return None
        left = float(found[0][0]) - self.now()
        return Hold(left, found[0][1]) if left > 0 else None

    def throttled(self, scope: str, reason: str, retry_after: Optional[float]) -> Hold:
        """Journal a throttle answer on ``scope``: hold every worker's calls to it. Returns the hold."""
        now = self.now()
        with self.journal.transaction() as tx:
            row = tx.execute("SELECT until, strikes FROM fleet_throttle WHERE scope = ?", (scope,)).fetchone()
            # A throttle answer while the last hold runs (or just ran out) is a further strike.
            strikes = int(row[1]) + 1 if row and float(row[0]) > now - THROTTLE_HOLD_MAX_S else 1
            seconds = retry_after if retry_after is not None else THROTTLE_HOLD_S * 2 ** min(strikes - 1, 6)
            seconds = max(0.0, min(float(seconds), THROTTLE_HOLD_MAX_S))
            until = max(now + seconds, float(row[0]) if row else 0.0)
            if row:
                tx.execute("UPDATE fleet_throttle SET until = ?, strikes = ?, reason = ?, updated_at = ? "
                           "WHERE scope = ?", (until, strikes, reason, now, scope))
            else:
                tx.execute("INSERT INTO fleet_throttle (scope, until, strikes, reason, updated_at) "
                           "VALUES (?, ?, ?, ?, ?)", (scope, until, strikes, reason, now))
        return Hold(until - now, reason)
