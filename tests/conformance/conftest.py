"""Discovers one harness per adapter under harnesses/ and parametrises the suite."""

from __future__ import annotations

import importlib.util
import pathlib

import pytest

HARNESS_DIR = pathlib.Path(__file__).parent / "harnesses"
CLOUDS = sorted(p.stem for p in HARNESS_DIR.glob("*.py") if not p.stem.startswith("_"))


def _load(cloud):
    spec = importlib.util.spec_from_file_location("gpuprov_harness_" + cloud, HARNESS_DIR / (cloud + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(params=CLOUDS)
def harness(request, tmp_path_factory):
    made = _load(request.param).make_harness(tmp_path_factory)
    try:
        yield made
    finally:
        made.close()
