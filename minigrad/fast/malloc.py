"""Keep freed memory in the process for the next training step (Linux with glibc): an
opt-in setting, for a process that does little but train (``minigrad train`` sets it).

NumPy gets its arrays from ``malloc``. By default glibc serves a big request (over 128 KiB
at first) with a fresh ``mmap`` and returns it to the OS on ``free``; it also gives back
the top of the heap once more than a few MiB lie free there. A training step allocates and
frees the same megabytes of activations and gradients every time, so the kernel maps each
of their 4 KiB pages in again, zeroed: about 7,000 page faults per step of the ``small``
GPT of ``benchmarks/train_step.py``. With the two thresholds raised, freed blocks stay in
the heap and the next step reuses them: no page faults after the first step, and that
step faster (``benchmarks/README.md``, "Page faults").

The price: the process holds on to its peak memory until it exits, as PyTorch's caching
allocators do. ``MINIGRAD_KEEP_FREED_MEMORY=0`` in the environment makes this a no-op.
"""

from __future__ import annotations

import ctypes
import os
import sys

_M_TRIM_THRESHOLD = -1  # mallopt parameters, from glibc's <malloc.h>
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 256 << 20  # requests up to 256 MiB come from the heap, not from mmap
TRIM_THRESHOLD = 1 << 30  # the heap keeps up to 1 GiB free at its top


def keep_freed_memory() -> bool:
    """Raise glibc's mmap and trim thresholds (see the module docstring). True if done;
    False elsewhere (macOS, Windows, musl) or when MINIGRAD_KEEP_FREED_MEMORY=0."""
    if not sys.platform.startswith("linux") or os.environ.get("MINIGRAD_KEEP_FREED_MEMORY") == "0":
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the C library the interpreter runs on
    except (OSError, AttributeError):  # no mallopt: not glibc
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    return bool(
        mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) and mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )
