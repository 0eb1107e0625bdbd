"""Random number generators, as PyTorch's: ``mg.Generator`` and the default one of each device.

``mg.manual_seed(seed)`` seeds every device's default generator, so that runs repeat exactly;
a ``generator=`` argument (``mg.randn(3, generator=g)``, ``DataLoader(..., generator=g)``)
draws from a generator of its own instead. Besides the grad-mode flag the default generators
are the only global state in minigrad.

A CPU Generator is PyTorch's: a Mersenne Twister (NumPy's MT19937) seeded as PyTorch seeds
its own, so that ``randint``, ``rand``, ``randperm`` and the DataLoader's shuffle, built on its
raw 32-bit words below as PyTorch builds them, draw PyTorch's very numbers for the same seed.
Other draws (``randn``, dropout masks) use NumPy's methods on it: as reproducible, not the
same numbers. On the GPU the generator is CuPy's.

``nn.DataParallel`` runs the two halves of a batch on two threads at once; drawing from one
generator in whichever order the threads come would make every run different. So each half
draws from a generator of its own (``HalvesGenerators``), both seeded from the CPU generator
the first time either half asks: a run repeats exactly, and a model that draws nothing leaves
the CPU generator where it was.
"""

from __future__ import annotations

import os
import threading
from contextlib import contextmanager

import numpy as np

from minigrad import backend
from minigrad.tensor import Tensor

DEFAULT_SEED = 67280421310721  # PyTorch's seed of a Generator() that nobody seeded
_SEEDS = 2**64  # a seed is a 64-bit word: -1 is the seed 2**64 - 1, as in PyTorch
_MT_WORDS = 624  # the Mersenne Twister's state: 624 32-bit words and a position


def _checked_seed(seed) -> int:
    """``seed`` as PyTorch reads it (int(seed), negative ones wrapped to 64 bits)."""
    try:
        value = int(seed)
    except (TypeError, ValueError):
        raise TypeError(f"manual_seed: expected an integer seed, got {seed!r}") from None
    if not -(2**63) <= value < _SEEDS:
        raise ValueError(f"manual_seed: the seed {value} does not fit in 64 bits")
    return value % _SEEDS


def _fresh_seed() -> int:
    return int.from_bytes(os.urandom(8), "little")


def _mersenne_twister(seed: int):
    """NumPy's MT19937 in the state std::mt19937(seed) starts in, as PyTorch's CPU generator
    (which keeps the low 32 bits of the seed): key[i] = 1812433253 * (key[i-1] ^
    (key[i-1] >> 30)) + i, modulo 2^32."""
    key = [seed & 0xFFFFFFFF]
    for i in range(1, _MT_WORDS):
        key.append((1812433253 * (key[-1] ^ (key[-1] >> 30)) + i) & 0xFFFFFFFF)
    bits = np.random.MT19937()
    bits.state = {
        "bit_generator": "MT19937",
        "state": {"key": np.array(key, np.uint32), "pos": _MT_WORDS},
    }
    return np.random.Generator(bits)


def words32(engine, count: int):
    """The next ``count`` raw 32-bit words of ``engine`` (uint64 array), PyTorch's random()."""
    return engine.bit_generator.random_raw(count) & 0xFFFFFFFF


def words64(engine, count: int):
    """``count`` 64-bit words, each made of two 32-bit ones (high first), PyTorch's random64()."""
    pairs = words32(engine, 2 * count)
    return (pairs[0::2] << np.uint64(32)) | pairs[1::2]


def draw_seed(engine) -> int:
    """A seed for a new generator, as PyTorch draws one (an int64's ``random_()``)."""
    return int(words64(engine, 1)[0] % np.uint64(2**63))


class Generator:
    """A random number generator of its own, for ``generator=`` arguments, as in PyTorch:

    g = mg.Generator().manual_seed(42)
    mg.randn(3, generator=g)       # the same three numbers after every manual_seed(42)
    """

    def __init__(self, device: str = "cpu"):
        self.device = backend.check_device(device)
        self._initial_seed = DEFAULT_SEED
        self._engine = None  # the numpy (or cupy) generator, made at the first draw

    def __repr__(self) -> str:
        return f"Generator(device={self.device!r})"

    def manual_seed(self, seed) -> Generator:
        """Start over from ``seed``; returns the generator."""
        self._initial_seed = _checked_seed(seed)  # (a bad seed leaves the state as it was)
        self._engine = None
        return self

    def seed(self) -> int:
        """Seed from the operating system's entropy; returns the seed."""
        seed = _fresh_seed()
        self.manual_seed(seed)
        return seed

    def initial_seed(self) -> int:
        return self._initial_seed

    @property
    def engine(self):
        """The numpy (or cupy) Generator that draws the numbers."""
        if self._engine is None and self.device == "cpu":
            self._engine = _mersenne_twister(self._initial_seed)
        elif self._engine is None:
            self._engine = backend.xp_for(self.device).random.default_rng(self._initial_seed)
        return self._engine

    def get_state(self) -> Tensor:
        """The state as a uint8 tensor (for ``set_state``, and savable with ``mg.save``):
        the 624 words of the Mersenne Twister and its position, little-endian."""
        state = self._cpu_state("get_state")["state"]
        words = np.append(state["key"].astype("<u4"), np.array([state["pos"]], "<u4"))
        return Tensor(words.view(np.uint8).copy())

    def set_state(self, new_state) -> Generator:
        """Go back to a state that ``get_state`` returned."""
        self._cpu_state("set_state")
        raw = np.asarray(getattr(new_state, "array", new_state))
        size = 4 * (_MT_WORDS + 1)
        if raw.dtype != np.uint8 or raw.shape != (size,):
            raise RuntimeError(
                f"set_state: expected the uint8 tensor of shape ({size},) that get_state "
                f"returns, got dtype {raw.dtype} and shape {raw.shape}"
            )
        words = np.ascontiguousarray(raw).view("<u4").astype(np.uint32)
        state = {"key": words[:_MT_WORDS], "pos": int(words[-1])}
        self.engine.bit_generator.state = {"bit_generator": "MT19937", "state": state}
        return self

    def _cpu_state(self, method: str) -> dict:
        if self.device != "cpu":
            raise RuntimeError(f"{method}: only the state of a CPU generator can be read or set")
        return self.engine.bit_generator.state


default_generator = Generator()  # torch.default_generator: seeded afresh at each start
default_generator.seed()
_cuda_generator: list = []  # the default "cuda" generator, made on first use
_cuda_seed: list = []  # a seed given before it was made


def manual_seed(seed) -> Generator:
    """Seed every device's default generator, so that runs repeat exactly. Returns the CPU
    one. Any int that fits in 64 bits, negative ones included, as in PyTorch."""
    seed = _checked_seed(seed)
    manual_seed_cuda(seed)
    return default_generator.manual_seed(seed)


def manual_seed_cuda(seed) -> None:
    """Seed the default "cuda" generator (at its first use, if CUDA is not in use yet)."""
    seed = _checked_seed(seed)
    _cuda_seed[:] = [seed]
    if _cuda_generator:
        _cuda_generator[0].manual_seed(seed)


def seed() -> int:
    """Seed the default generators from the operating system's entropy; returns the seed."""
    return manual_seed(_fresh_seed()).initial_seed()


def initial_seed() -> int:
    """The seed of the default CPU generator."""
    return default_generator.initial_seed()


def get_rng_state() -> Tensor:
    """The default CPU generator's state, a uint8 tensor."""
    return default_generator.get_state()


def set_rng_state(new_state) -> None:
    default_generator.set_state(new_state)


def default_for(device: str) -> Generator:
    """The default Generator of ``device``."""
    if device == "cpu":
        return default_generator
    if not _cuda_generator:
        seed = _cuda_seed[0] if _cuda_seed else int(default_generator.engine.integers(2**63))
        _cuda_generator.append(Generator(device).manual_seed(seed))
    return _cuda_generator[0]


def generator(device: str = "cpu", given: Generator | None = None):
    """The numpy (or cupy) generator to draw from on ``device``: that of ``given`` (a
    Generator passed as ``generator=``), or else the device's default one."""
    if given is not None:
        if not isinstance(given, Generator):
            raise TypeError(f"generator must be a minigrad Generator, got {type(given).__name__}")
        if given.device != device:
            raise RuntimeError(
                f"expected a generator on device '{device}', got one on '{given.device}'"
            )
        return given.engine
    half = getattr(_this_thread, "half", None)
    if half is not None and device == "cpu":
        halves, index = half
        return halves.generator(index)
    return default_for(device).engine


_this_thread = threading.local()  # .half: (HalvesGenerators, 0 or 1) inside DataParallel


class HalvesGenerators:
    """The CPU generators of one DataParallel call's two halves, seeded on first use."""

    def __init__(self):
        self._lock = threading.Lock()
        self._generators = None

    def generator(self, index: int):
        with self._lock:  # both seeds are drawn at once, whichever half asks first
            if self._generators is None:
                seeds = default_generator.engine.integers(2**63, size=2)
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
