"""Progress on long waits (tasks/progress.py), driven by a fake clock: a heartbeat line at
least every 15 s with the elapsed time and the last observed status, while a boot or SSH
wait repeats the same status and while one step blocks."""

from __future__ import annotations

import re

from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.progress import HEARTBEAT_S, ProgressPrinter

LINE = re.compile(r"^\[vm1 +(\d+\.\d)s\] ")


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def _ssh_wait(printer, clock, seconds, poll_every=2.0, tick_every=1.0):
    """A Connecting state polling SSH every ``poll_every`` s for ``seconds`` s, with the same status
    each time, while the heartbeat thread would tick every ``tick_every`` s."""
    next_poll = clock.now
    end = clock.now + seconds
    while clock.now < end:
        if clock.now >= next_poll:
            printer.on_event("poll", {"label": "Connecting (offer 1 of 1: aws:us-east-1:g5.xlarge)",
                                      "note": "waiting for SSH on 203.0.113.7:22: connection refused"})
            next_poll += poll_every
        printer.tick()
        clock.now += tick_every


def _elapsed(lines):
    return [float(LINE.match(line).group(1)) for line in lines]


def test_a_300_s_ssh_wait_gets_a_heartbeat_at_least_every_15_s_with_elapsed_time_and_status():
    clock, lines = Clock(), []
    printer = ProgressPrinter("vm1", lines.append, clock=clock)
    printer.on_event("transition", {"frm": "Booting", "to": "Connecting (offer 1 of 1: aws:us-east-1:g5.xlarge)",
                                    "note": "running at 203.0.113.7:22"})
    clock.now += 3
    _ssh_wait(printer, clock, 300)
    elapsed = _elapsed(lines)
    gaps = [b - a for a, b in zip([0.0] + elapsed, elapsed + [clock.now - 1000.0], strict=True)]
    assert max(gaps) <= 15.0, lines
    heartbeats = [line for line in lines if "still Connecting" in line]
    assert len(heartbeats) >= 300 // 15, lines
    # Each says how long it has been in the state and what was last observed.
    assert heartbeats[0].endswith("s in it: waiting for SSH on 203.0.113.7:22: connection refused"), heartbeats[0]
    assert "still Connecting (offer 1 of 1: aws:us-east-1:g5.xlarge), 13 s in it" in heartbeats[0]
    # The distinct wait itself is said once, not per poll.
    assert sum("Connecting (offer 1 of 1: aws:us-east-1:g5.xlarge): waiting for SSH" in line for line in lines) == 1


def test_a_step_that_blocks_still_gets_heartbeats_and_lines_reset_the_silence():
    clock, lines = Clock(), []
    printer = ProgressPrinter("vm1", lines.append, clock=clock)
    printer.on_event("transition", {"frm": "Creating", "to": "Booting", "note": "created i-1"})
    for _second in range(40):          # the step blocks: no event at all, only the thread's ticks
        clock.now += 1
        printer.tick()
    assert [line.split("] ", 1)[1] for line in lines] == [
        "Creating -> Booting: created i-1",
        "still Booting, 10 s in it: created i-1",
        "still Booting, 20 s in it: created i-1",
        "still Booting, 30 s in it: created i-1",
        "still Booting, 40 s in it: created i-1"]
    printer.on_event("poll", {"label": "Booting", "note": "instance i-1: Pending, no endpoint yet"})
    clock.now += HEARTBEAT_S - 1
    printer.tick()
    assert lines[-1].endswith("Booting: instance i-1: Pending, no endpoint yet")   # no heartbeat right after it
    clock.now += 1
    printer.tick()
    assert lines[-1].endswith("still Booting, 50 s in it: instance i-1: Pending, no endpoint yet")


def test_elapsed_counts_from_the_task_start_and_retries_are_the_last_status():
    clock, lines = Clock(), []
    printer = ProgressPrinter("vm1", lines.append, clock=clock, started=clock.now - 5)
    printer.on_event("retry", {"label": "Creating", "attempt": 1, "max_attempts": 5, "error": "Throttling",
                               "delay": 30.0})
    clock.now += HEARTBEAT_S
    printer.tick()
    assert lines == ["[vm1   5.0s] Creating: attempt 1/5 failed (Throttling); retrying in 30.0 s",
                     "[vm1  15.0s] still Creating, 10 s in it: attempt 1/5 failed (Throttling)"]
