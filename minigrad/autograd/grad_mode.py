"""Grad mode and the engine's other switches, thread-local as in PyTorch; each is set by a
context manager that restores it on exit and also decorates: ``@mg.no_grad()``, ``@mg.no_grad``."""

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
    """Sets one flag of ``modes`` inside ``with`` (or a decorated function), then restores it."""

    flag, value = "", True

    def __new__(cls, *args, **kwargs):
        if len(args) == 1 and callable(args[0]) and not kwargs:  # @mg.no_grad, no parentheses
            return cls()(args[0])
        return super().__new__(cls)

    def __enter__(self):
        if "_previous" not in vars(self):  # (set_grad_enabled is entered when made)
            self._previous = getattr(modes, self.flag)
        setattr(modes, self.flag, self.value)
        return self

    def __exit__(self, *exc_info):
        setattr(modes, self.flag, vars(self).pop("_previous"))

    def _recreate_cm(self):  # as a decorator: a fresh one per call (calls may nest)
        return copy.copy(self)


class no_grad(SetFlag):
    """Inside ``with mg.no_grad():`` ops record nothing and their results need no grad."""

    flag, value = "grad_enabled", False


class enable_grad(SetFlag):
    """Turn graph recording back on, for example inside a ``no_grad`` block."""

    flag, value = "grad_enabled", True


def inference_mode(mode=True):
    """PyTorch's inference mode: ``no_grad`` here (``mode=False``: ``enable_grad``, as in torch)."""
    if callable(mode):  # @mg.inference_mode, no parentheses
        return no_grad(mode)
    return no_grad() if mode else enable_grad()


class set_grad_enabled(SetFlag):
    """``mg.set_grad_enabled(False)`` stops recording at once; in ``with``, until its end."""

    flag = "grad_enabled"

    def __init__(self, mode: bool):
        self.value = bool(mode)
        self.__enter__()  # a plain call takes effect at once, as in PyTorch

    def __call__(self, function):  # as a decorator it acts inside the calls only
        self.__exit__()
        return super().__call__(function)


class detect_anomaly(SetFlag):
    """Raise at the first op whose forward or backward produces nan or inf, naming the op."""

    flag, value = "anomaly", True
