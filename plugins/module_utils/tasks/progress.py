# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Live progress of a VM machine for people: one line per transition, retry and distinct
wait, and a heartbeat while nothing else is said.

A wait for boot or SSH repeats the same status for minutes (the SSH check alone may wait
300 s); a line per poll would flood the output and a line per distinct status leaves it
silent. So ``tick`` prints ``still <state> ... <elapsed>: <last status>`` once no line was
printed for ``every`` seconds, and ``HeartbeatThread`` calls ``tick`` while the machine runs,
so the heartbeat also covers a step that blocks (an SSH attempt, a slow cloud call) and a
single long wait (retry backoff, retry_until_up's pause)."""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Dict, Optional

# At most this many seconds without a line while a machine runs (the promise is 15 s; the
# thread ticks every second, so the heartbeat lands between 10 and 11 s).
HEARTBEAT_S = 10.0
TICK_S = 1.0


class ProgressPrinter:
    """Turns the executor's events (``on_event``) into lines for ``emit``; ``clock`` is injectable."""

    def __init__(self, name: str, emit: Callable[[str], None], clock: Callable[[], float] = time.monotonic,
                 every: float = HEARTBEAT_S, started: Optional[float] = None):
        self.name = name
        self.emit = emit
        self.clock = clock
        self.every = every
        self.started = clock() if started is None else started   # elapsed times count from here
        self.last_line_at = self.state_since = clock()
        self.label = ""            # the machine's state label, as the journal shows it
        self.status = "starting"   # what was last observed (a poll's note, a transition's note, an error)
        self._last_poll_note: Optional[str] = None
        self._lock = threading.Lock()

    def _say(self, now: float, line: str) -> None:
        self.last_line_at = now
        self.emit("[%s %5.1fs] %s" % (self.name, now - self.started, line))

    def on_event(self, kind: str, data: Dict[str, Any]) -> None:
        with self._lock:
            now = self.clock()
            if kind == "transition":
                self.label, self.state_since, self._last_poll_note = data["to"], now, None
                self.status = data.get("note") or "entered"
                line = "%s -> %s" % (data["frm"], data["to"]) + (": %s" % data["note"] if data.get("note") else "")
            elif kind == "poll":
                self.label = data["label"]
                self.status = data.get("note") or "waiting"
                if self._last_poll_note == data.get("note"):
                    return  # one line per distinct wait; tick() says it is still going on
                self._last_poll_note = data.get("note")
                line = "%s: %s" % (data["label"], self.status)
            elif kind == "retry":
                self.label = data["label"]
                self.status = "attempt %d/%d failed (%s)" % (data["attempt"], data["max_attempts"], data["error"])
                line = "%s: %s; retrying in %.1f s" % (data["label"], self.status, data["delay"])
            elif kind in ("resume", "begin"):
                self.label, self.state_since = data["label"], now
                line = ("resuming journalled state %s" if kind == "resume" else "begin %s") % data["label"]
            elif kind == "cancel":
                line = "%s in %s: compensating before exit" % (data.get("reason") or "interrupted", data["label"])
            else:
                line = "%s %s" % (kind, data.get("label", ""))
            self._say(now, line)

    def tick(self) -> None:
        """The heartbeat: a line saying what the run is still doing, once ``every`` seconds passed silently."""
        with self._lock:
            now = self.clock()
            if now - self.last_line_at < self.every:
                return
            self._say(now, "still %s, %.0f s in it: %s" % (
                self.label or "starting", now - self.state_since, self.status))


class HeartbeatThread:
    """Calls ``printer.tick()`` every ``TICK_S`` until stopped (a context manager)."""

    def __init__(self, printer: ProgressPrinter, interval: float = TICK_S):
        self.printer = printer
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="gpuprov-progress", daemon=True)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.printer.tick()
            except Exception:  # pylint: disable=broad-except  # a broken printer must never stop a launch
                pass

    def __enter__(self) -> "HeartbeatThread":
        self._thread.start()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self._stop.set()
        self._thread.join(timeout=5.0)
