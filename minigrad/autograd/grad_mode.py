"""Grad mode: whether ops record the graph, and the other switches of the autograd engine.

These flags are minigrad's one piece of global mutable state (besides the RNG). Each is set
only through a context manager, which restores the old value on exit. As in PyTorch, they
are local to the thread that sets them (``threading.local``).
"""

from __future__ import annotations

import copy
import threading
from contextlib import ContextDecorator


class _Modes(threading.local):
    grad_enabled = True  # ops record the graph for backward
    anomaly = False  # check every forward and backward result for nan / inf
    retain_graph = False  # inside backward: whether the nodes keep their saved arrays
    node_observer = None  # called as observer(node, input_grads) after each node's backward


modes = _Modes()


def is_grad_enabled() -> bool:
    return modes.grad_enabled


class SetFlag(ContextDecorator):
    """Context manager (and decorator) that sets one flag of ``modes`` and restores it."""

    flag, value = "", True

    def __enter__(self):
        self._previous = getattr(modes, self.flag)
        setattr(modes, self.flag, self.value)
        return self

    def __exit__(self, *exc_info):
        setattr(modes, self.flag, self._previous)
        return False

    def _recreate_cm(self):  # as a decorator: a fresh one per call (calls may nest)
        return copy.copy(self)


class no_grad(SetFlag):
    """Inside ``with mg.no_grad():`` ops record nothing and their results need no grad."""

    flag, value = "grad_enabled", False


class enable_grad(SetFlag):
    """Turn graph recording back on, for example inside a ``no_grad`` block."""

    flag, value = "grad_enabled", True


class set_grad_enabled(SetFlag):
    """``with mg.set_grad_enabled(flag):`` records the graph only if ``flag`` is true."""

    flag = "grad_enabled"

    def __init__(self, mode: bool = True):
        self.value = bool(mode)


class detect_anomaly(SetFlag):
    """Raise at the first op whose forward or backward produces nan or inf, naming the op."""

    flag, value = "anomaly", True
