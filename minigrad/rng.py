"""The random number generators, one per device, seeded together by ``manual_seed``.

Besides the grad-mode flag this is the only global state in minigrad.
"""

from __future__ import annotations

import numpy as np

_generators: dict = {"cpu": np.random.default_rng()}
_seed: int | None = None


def manual_seed(seed: int) -> None:
    """Seed every device's generator, so that runs repeat exactly."""
    global _seed
    _seed = int(seed)
    _generators.clear()
    _generators["cpu"] = np.random.default_rng(_seed)


def generator(device: str = "cpu"):
    """The generator of ``device``: a numpy Generator, or cupy's for "cuda"."""
    if device not in _generators:
        from minigrad.backend import xp_for

        cupy = xp_for("cuda")
        seed = _seed if _seed is not None else int(_generators["cpu"].integers(2**31))
        _generators[device] = cupy.random.default_rng(seed)
    return _generators[device]
