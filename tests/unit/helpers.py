# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Plain helpers the unit tests share (their fixtures are in conftest.py)."""

from __future__ import annotations

import time

import pytest


def wait_for(condition, what, limit_s=10.0, step_s=0.02):
    """Polls ``condition`` every ``step_s`` until it holds (another thread or process getting somewhere); fails
    naming ``what`` after ``limit_s``. The limit only keeps a broken test from hanging: nothing asserts how long
    the wait took."""
    deadline = time.monotonic() + limit_s
    while not condition():
        if time.monotonic() > deadline:
            # pytest.fail, not AssertionError: it is a BaseException, so code under test that catches Exception
            # (an executor step) cannot turn the failure into a retry.
            pytest.fail("gave up after %g s waiting for %s" % (limit_s, what))
        time.sleep(step_s)
