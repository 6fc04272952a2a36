"""The mutation runner's pytest plugin (loaded with ``-p``).

In the coverage pass (``$GPUPROV_MUTATION_COVERAGE`` set): which test (node id) ran which line of the targets. It
starts measuring when loaded, before any conftest or test module imports the targets, in every pytest process
(xdist's workers load it too); each process writes its own coverage data file and a JSON file of its tests'
outcomes and durations there, and the runner reads them all.

In a mutant's run (``$GPUPROV_MUTATION_LIMITS``: a JSON file of node id -> seconds): each test's own time limit,
a pytest-timeout marker, so that a test the mutant makes hang fails by name after its limit, not the whole run's.
"""

from __future__ import annotations

import json
import os

import coverage
import pytest

OUT = os.environ.get("GPUPROV_MUTATION_COVERAGE")
LIMITS = os.environ.get("GPUPROV_MUTATION_LIMITS")
INCLUDE = [p for p in os.environ.get("GPUPROV_MUTATION_INCLUDE", "").split(os.pathsep) if p]

_measure = None
_results = {}
if OUT:
    _measure = coverage.Coverage(data_file=os.path.join(OUT, "coverage"), data_suffix=True, include=INCLUDE,
                                 config_file=False)
    _measure.start()


def pytest_collection_modifyitems(items):
    if LIMITS:
        with open(LIMITS) as limits_file:
            limits = json.load(limits_file)
        for item in items:
            if item.nodeid in limits:
                item.add_marker(pytest.mark.timeout(limits[item.nodeid]))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    if _measure is not None:
        _measure.switch_context(item.nodeid)
    yield
    if _measure is not None:
        _measure.switch_context("")


def pytest_runtest_logreport(report):
    if _measure is None:
        return
    result = _results.setdefault(report.nodeid, {"duration": 0.0, "passed": True})
    result["duration"] += report.duration
    if report.failed:
        result["passed"] = False
    if report.when == "call" and report.skipped:
        result["skipped"] = True


def pytest_unconfigure(config):
    if _measure is None:
        return
    _measure.stop()
    _measure.save()
    with open(os.path.join(OUT, "tests.%d.json" % os.getpid()), "w") as out:
        json.dump(_results, out)
