"""Shared test setup: the ``device`` fixture and the hypothesis profile.

Every test that should run on both backends takes ``device``; its "cuda" case skips cleanly
when CuPy or a GPU is missing, so one suite serves both (never a copy of the CPU tests).
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings
from threadpoolctl import threadpool_limits

import minigrad as mg
from minigrad.fast import threads

# `pytest -n 2` already keeps both cores busy; a second BLAS thread per worker would only
# fight for them (and the toy matrices here are too small to share anyway).
threadpool_limits(limits=1, user_api="blas")
mg.set_num_threads(1)  # no helper thread either; the tests of it ask for two (two_threads)

# Few examples per property keep the suite fast; no deadline, since the first call of an op
# may import SciPy or compile CuPy kernels.
settings.register_profile(
    "minigrad",
    deadline=None,
    max_examples=12,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
settings.register_profile("thorough", parent=settings.get_profile("minigrad"), max_examples=200)
# HYPOTHESIS_PROFILE=thorough runs many more examples (for a long check, not for CI)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "minigrad"))


@pytest.fixture(params=["cpu", "cuda"])
def device(request) -> str:
    """The device a test runs on: "cpu" always, "cuda" only where a GPU can be used."""
    if request.param == "cuda" and not mg.cuda.is_available():
        pytest.skip("no CUDA device (CuPy with an NVIDIA GPU is needed)")
    return request.param


@pytest.fixture
def two_threads():
    """minigrad on two threads for one test (the suite runs on one, above): the helper."""
    before = mg.get_num_threads()
    mg.set_num_threads(2)
    yield threads.helper()
    mg.set_num_threads(before)
