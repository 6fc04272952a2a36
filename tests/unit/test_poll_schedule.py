"""The executor's schedule of readiness polls (issue 16): a Poll with ``first`` is stepped
again after ``first`` s, then after a growing share of the time already spent in the state,
never more than ``after`` (the cloud's rate-limit-safe interval); a Poll without it keeps
its fixed delay. Time is a fake clock; nothing sleeps."""

from __future__ import annotations

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.executor import (
    POLL_LATENESS, Executor, Machine, Next, Poll, poll_delay,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journal import Journal
from ansible_collections.gpuprov.cloud.tests.fakes.toy_machine import FakeClock


class WaitUntil(Machine):
    """Waiting -> Done once the clock reaches ``ready_at``, polling as told."""

    KIND = "wait-until"

    def __init__(self, clock, ready_at, after, first):
        self.clock, self.ready_at, self.after, self.first = clock, ready_at, after, first
        self.steps = []

    def is_terminal(self, state):
        return state["kind"] == "Done"

    def step(self, state, cx):
        self.steps.append(self.clock())
        if self.clock() >= self.ready_at:
            return Next({"kind": "Done"}, "ready")
        return Poll(self.after, "not yet", first=self.first)


def run_until(tmp_path, ready_in, after=10.0, first=1.0):
    """(the waits, when readiness was seen after the start) for a readiness ``ready_in`` s away."""
    clock = FakeClock()
    start = clock()
    machine = WaitUntil(clock, start + ready_in, after, first)
    waits = []

    def wait(seconds):
        waits.append(seconds)
        clock.advance(seconds)
    journal = Journal(str(tmp_path / ("j-%s-%s.sqlite" % (ready_in, first))), clock=clock)
    try:
        Executor(journal, machine, clock=clock, heartbeat=False).run("k", lambda prev, kind: {"kind": "Waiting"},
                                                                     wait_poll=wait)
    finally:
        journal.close()
    return waits, machine.steps[-1] - start


def test_a_readiness_poll_starts_quick_and_backs_off_to_the_clouds_interval(tmp_path):
    waits, _seen = run_until(tmp_path, 900.0)

    assert waits[:3] == [1.0, 1.0, 1.0]
    assert waits == sorted(waits)                  # never quicker again
    assert max(waits) == 10.0 and waits[-1] == 10.0
    assert len(waits) < 150                        # vs 900 at a fixed 1 s


@pytest.mark.parametrize("ready_in", [0.5, 7.0, 30.5, 33.3, 61.7, 150.2, 299.9])
def test_readiness_is_seen_within_the_lateness_share_or_the_first_interval(tmp_path, ready_in):
    _waits, seen = run_until(tmp_path, ready_in)

    assert seen >= ready_in
    if ready_in >= 30:
        assert seen / ready_in <= 1.05
    else:
        assert seen - ready_in <= 1.0


def test_a_fixed_poll_keeps_its_delay(tmp_path):
    waits, seen = run_until(tmp_path, 25.0, after=10.0, first=None)

    assert waits == [10.0, 10.0, 10.0]
    assert seen == 30.0


def test_poll_delay_is_bounded_by_first_and_after():
    quick = Poll(10.0, first=0.25)
    assert poll_delay(quick, 0.0) == 0.25
    assert poll_delay(quick, 25.0) == pytest.approx(POLL_LATENESS * 25.0)
    assert poll_delay(quick, 10_000.0) == 10.0
    assert poll_delay(Poll(3.0), 500.0) == 3.0


def test_a_launch_polls_a_boot_after_1_s_and_retries_a_refused_ssh_login_after_a_quarter_second(tmp_path):
    from ansible_collections.gpuprov.cloud.plugins.module_utils.vm.ssh import SshNotReady
    from ansible_collections.gpuprov.cloud.tests.fakes.scripted_provider import ScriptedProvider, World, offer

    p = ScriptedProvider("sim", [offer("sim", "r1")], poll_interval_s=10.0)
    w = World(tmp_path, [p])
    refusals = iter([SshNotReady("connection refused")])
    w.ssh.default = lambda endpoint: next(refusals, None)

    out = w.launch()

    assert out.state["kind"] == "Ready"
    assert w.clock.waits == [1.0, 0.25]   # one Pending listing, one refused login; not 10 s and 2 s


def test_a_cloud_whose_instances_are_up_within_moments_gives_its_own_first_wait(tmp_path):
    """readiness_poll_first_s (the local cloud's sshd listens milliseconds after create): both the boot poll
    and the refused login are looked at again that soon, then back off as any other."""
    from ansible_collections.gpuprov.cloud.plugins.module_utils.vm.ssh import SshNotReady
    from ansible_collections.gpuprov.cloud.tests.fakes.scripted_provider import ScriptedProvider, World, offer

    p = ScriptedProvider("sim", [offer("sim", "r1")], poll_interval_s=10.0, readiness_poll_first_s=0.02)
    w = World(tmp_path, [p])
    refusals = iter([SshNotReady("connection refused")] * 30)
    w.ssh.default = lambda endpoint: next(refusals, None)

    out = w.launch()

    assert out.state["kind"] == "Ready"
    boot, logins = w.clock.waits[0], w.clock.waits[1:]
    assert boot == 0.02 and logins[0] == 0.02 and len(logins) == 30
    assert logins == sorted(logins) and logins[-1] > 0.02   # backing off with the time already waited
