"""Run the concurrency soak (tests/soak/runner.py) from the command line; `make soak` calls it:

    make soak SOAK_MINUTES=30 SOAK_SEED=1234
    .venv/bin/python tests/soak/run.py --minutes 5 [--seed N] [--rounds N] [--concurrency 3] [--clouds auto]

It prints each round, every violation the oracle finds (with the seed and the operation history), and
a summary: rounds, operations, violations. Exit status 1 when the oracle found a violation."""

from __future__ import annotations

import os
import sys

# The collection is imported as ansible_collections.gpuprov.cloud (the Makefile's PYTHONPATH): the same
# path when run by hand.
_COLLECTIONS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "build", "collections")
if os.path.isdir(_COLLECTIONS) and os.path.abspath(_COLLECTIONS) not in [os.path.abspath(p) for p in sys.path]:
    sys.path.insert(0, os.path.abspath(_COLLECTIONS))

from ansible_collections.gpuprov.cloud.tests.soak.runner import main  # noqa: E402  pylint: disable=wrong-import-position

if __name__ == "__main__":
    sys.exit(main())
