"""Grad mode: whether ops record the graph, and the other switches of the autograd engine.

These flags are minigrad's one piece of global mutable state (besides the RNG). Each is set
only through a context manager, which restores the old value on exit. As in PyTorch, each
thread has its own: a thread starts with grad on (``nn.DataParallel`` hands its threads the
caller's flags).
"""

from __future__ import annotations

import functools
import threading


class _Modes(threading.local):
    grad_enabled = True  # ops record the graph for backward
    anomaly = False  # check every forward and backward result for nan / inf
    record_edge_grads = False  # backward keeps, per edge, the norm of the gradient it carried
    retain_graph = False  # inside backward: whether the nodes keep their saved arrays

    def get(self) -> tuple:
        return self.grad_enabled, self.anomaly, self.record_edge_grads, self.retain_graph

    def set(self, flags: tuple) -> None:
        self.grad_enabled, self.anomaly, self.record_edge_grads, self.retain_graph = flags


modes = _Modes()


def is_grad_enabled() -> bool:
    return modes.grad_enabled


class _SetFlag:
    """Context manager (and decorator) that sets one flag of ``modes`` and restores it."""

    flag = ""
    value = True

    def __enter__(self):
        self._previous = getattr(modes, self.flag)
        setattr(modes, self.flag, self.value)
        return self

    def __exit__(self, *exc_info):
        setattr(modes, self.flag, self._previous)
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.__class__():
                return fn(*args, **kwargs)

        return wrapper


class no_grad(_SetFlag):
    """Inside ``with mg.no_grad():`` ops record nothing and their results need no grad."""

    flag, value = "grad_enabled", False


class enable_grad(_SetFlag):
    """Turn graph recording back on, for example inside a ``no_grad`` block."""

    flag, value = "grad_enabled", True


class set_grad_enabled(_SetFlag):
    """``with mg.set_grad_enabled(flag):`` records the graph only if ``flag`` is true."""

    flag = "grad_enabled"

    def __init__(self, mode: bool = True):
        self.value = bool(mode)


class detect_anomaly(_SetFlag):
    """Raise at the first op whose forward or backward produces nan or inf, naming the op."""

    flag, value = "anomaly", True
