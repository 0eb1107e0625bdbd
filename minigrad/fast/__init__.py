"""How big ops run fast, beside the reading path.

Every op in ``minigrad.ops`` is written as its *reference*: a forward in plain array calls and
a backward on Tensors, the way the math reads. This package holds the other way to compute
some of them: *kernels*. A kernel computes what its op's reference computes, with tricks a
learner need not read: a helper thread for the second core (``threads``), fewer passes over
memory and less per-call overhead on small arrays (``arrays``), backward on the arrays where
the reference's builds Tensor ops that need no graph (``shape``), a table for the normal CDF,
fused CuPy kernels on the GPU (``cuda``).

A kernel is registered for an op by the op's name and a device::

    @fast.register("LayerNorm", "cpu")
    class LayerNormKernel:
        def forward(ctx, x, weight, bias, axes, eps): ...   # as LayerNorm.forward
        def backward(ctx, grad): ...                         # or backward = None

``Function.apply`` asks ``kernel_for`` which forward to run, in one place; the engine runs the
kernel's backward where it has one, except under ``create_graph=True``, where the
reference's backward (on Tensors, so differentiable) runs. A kernel's forward therefore saves
what the reference's backward reads, in the same order. Only the built-in ops of minigrad
get kernels. ``tests/test_kernels.py`` holds each kernel equal to its reference.

``MINIGRAD_REFERENCE=1`` in the environment, or ``with mg.fast.disabled():``, runs the
references alone: no kernel and no helper thread. ``set_num_threads(1)`` (or
``MINIGRAD_NUM_THREADS=1``) keeps the kernels but on one thread, BLAS included.
``keep_freed_memory()`` is an opt-in setting of glibc's malloc for training loops.
"""

from __future__ import annotations

import os
from contextlib import contextmanager

import numpy as np

from minigrad.fast.malloc import keep_freed_memory
from minigrad.fast.threads import get_num_threads, set_num_threads

_registry: dict = {}  # (op name, device) -> kernel
_resolved: dict = {}  # (Function subclass, array type) -> kernel or None, filled on first use
_enabled = os.environ.get("MINIGRAD_REFERENCE", "").strip() in ("", "0")


def register(op: str, device: str = "cpu"):
    """Class decorator: the kernel for the op named ``op`` (its Function's class name, or a
    routine's name such as ``"adam_update"``) on ``device`` ("cpu" or "cuda")."""

    def decorate(kernel):
        _registry[(op, device)] = kernel
        _resolved.clear()
        return kernel

    return decorate


def kernel_for(function, array_type):
    """The kernel registered for the op ``function`` (a Function subclass) on arrays of
    ``array_type``, or None: none registered, or the fast layer is switched off."""
    if not _enabled:
        return None
    key = (function, array_type)
    try:
        return _resolved[key]
    except KeyError:
        pass
    kernel = None
    if function.__module__.startswith("minigrad."):  # (a user's Function may share a name)
        device = "cpu" if array_type is np.ndarray else "cuda"
        kernel = _registry.get((function.__name__, device))
    _resolved[key] = kernel
    return kernel


def routine(name: str, device: str):
    """The fast routine registered as ``name`` on ``device`` (a function), or None."""
    return _registry.get((name, device)) if _enabled else None


def is_enabled() -> bool:
    """Whether kernels run (False under MINIGRAD_REFERENCE=1 or inside ``disabled()``)."""
    return _enabled


@contextmanager
def disabled():
    """Inside ``with mg.fast.disabled():`` every op runs its reference implementation."""
    global _enabled
    was_enabled, _enabled = _enabled, False
    try:
        yield
    finally:
        _enabled = was_enabled


__all__ = [
    "disabled", "get_num_threads", "is_enabled", "keep_freed_memory", "kernel_for", "register",
    "routine", "set_num_threads",
]  # fmt: skip
