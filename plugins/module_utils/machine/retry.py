# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Retry budgets: how many consecutive transient failures a state tolerates, and
how long to back off between them (exponential, capped, with jitter)."""

from __future__ import annotations

import dataclasses
import random


@dataclasses.dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 5
    initial_backoff: float = 1.0
    max_backoff: float = 30.0
    multiplier: float = 2.0
    jitter: float = 0.5   # fraction of the delay drawn at random, so parallel runs spread out

    def backoff(self, attempt: int, rng: random.Random) -> float:
        """Delay before attempt ``attempt + 1`` (``attempt`` counts failures so far, from 1)."""
        base = min(self.max_backoff, self.initial_backoff * (self.multiplier ** max(0, attempt - 1)))
        return base * (1.0 - self.jitter) + base * self.jitter * rng.random()
