"""The random number generators, one per device, seeded together by ``manual_seed``.

Besides the grad-mode flag this is the only global state in minigrad.

``nn.DataParallel`` runs the two halves of a batch on two threads at once; drawing from one
generator in whichever order the threads come would make every run different. So each half
draws from a generator of its own (``HalvesGenerators``), both seeded from the CPU generator
the first time either half asks: a run repeats exactly, and a model that draws nothing leaves
the CPU generator where it was.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager

import numpy as np

_generators: dict = {"cpu": np.random.default_rng()}
_seed: int | None = None
_this_thread = threading.local()  # .half: (HalvesGenerators, 0 or 1) inside DataParallel


def manual_seed(seed: int) -> None:
    """Seed every device's generator, so that runs repeat exactly."""
    global _seed
    _seed = int(seed)
    _generators.clear()
    _generators["cpu"] = np.random.default_rng(_seed)


def generator(device: str = "cpu"):
    """The generator of ``device``: a numpy Generator, or cupy's for "cuda"."""
    half = getattr(_this_thread, "half", None)
    if half is not None and device == "cpu":
        halves, index = half
        return halves.generator(index)
    if device not in _generators:
        from minigrad.backend import xp_for

        cupy = xp_for("cuda")
        seed = _seed if _seed is not None else int(_generators["cpu"].integers(2**31))
        _generators[device] = cupy.random.default_rng(seed)
    return _generators[device]


class HalvesGenerators:
    """The CPU generators of one DataParallel call's two halves, seeded on first use."""

    def __init__(self):
        self._lock = threading.Lock()
        self._generators = None

    def generator(self, index: int):
        with self._lock:  # both seeds are drawn at once, whichever half asks first
            if self._generators is None:
                seeds = _generators["cpu"].integers(2**63, size=2)
                self._generators = [np.random.default_rng(int(seed)) for seed in seeds]
        return self._generators[index]

    @contextmanager
    def half(self, index: int):
        """``with halves.half(i):`` this thread draws from half i's generator."""
        previous = getattr(_this_thread, "half", None)
        _this_thread.half = (self, index)
        try:
            yield
        finally:
            _this_thread.half = previous
