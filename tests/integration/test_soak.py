"""The concurrency soak (tests/soak), short and bounded: seeded rounds of random concurrent provision,
recreate, down, sweep, status, health and instance runs through the real ansible-playbook, from two
controllers on one PostgreSQL journal and a third on its own SQLite journal, on the local cloud and (where
the engine answers and the image exists) docker, with SIGKILLs and Ctrl-Cs at crash points and random
moments; the oracle (tests/soak/oracle.py) checks the promise after every round and at quiescence.

Bounded by rounds AND by a time budget that only ends it early (no new round starts once it is spent; it
never fails on time). ``make soak`` runs the same for as long as asked. Knobs: GPUPROV_SOAK_SEED (a seed
reproduces the schedule), GPUPROV_SOAK_ROUNDS, GPUPROV_SOAK_BUDGET_S, GPUPROV_SOAK_CLOUDS (auto | local)."""

from __future__ import annotations

import os

import pytest

from ansible_collections.gpuprov.cloud.tests.soak import runner, world

# Its docker VMs share the one engine: under pytest-xdist (make test) it runs with the other docker tests.
pytestmark = pytest.mark.xdist_group("docker")


def test_soak_keeps_the_promise(tmp_path):
    if not world.sshd_available():
        pytest.skip("openssh-server (sshd) is not installed; .ci/run installs it")
    soak = runner.Soak(seed=os.environ.get("GPUPROV_SOAK_SEED", "24"),
                       rounds=int(os.environ.get("GPUPROV_SOAK_ROUNDS", "8")),
                       budget_s=float(os.environ.get("GPUPROV_SOAK_BUDGET_S", "60")),
                       concurrency=3, clouds=os.environ.get("GPUPROV_SOAK_CLOUDS", "auto"),
                       work=tmp_path / "soak", history_file=str(tmp_path / "soak-history.json"))
    result = soak.run()
    print("\n" + result.report())
    assert result.rounds >= 1, result.report()
    assert not result.violations, result.report()
