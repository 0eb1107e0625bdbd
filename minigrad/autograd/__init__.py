"""Reverse-mode automatic differentiation: ``Function`` (one op and its backward), the graph
walk (``engine``), grad mode, and gradient checks."""

from minigrad.autograd.function import Context, Function
from minigrad.autograd.grad_mode import (
    detect_anomaly,
    enable_grad,
    is_grad_enabled,
    no_grad,
    set_grad_enabled,
)
from minigrad.autograd.gradcheck import GradcheckError, gradcheck, gradgradcheck


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False):
    """d outputs / d inputs as a tuple, without touching ``.grad`` (as torch.autograd.grad)."""
    from minigrad.autograd.engine import backward

    inputs = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
    saved = [x.grad for x in inputs]
    for x in inputs:
        x.grad = None
    try:
        retain = create_graph if retain_graph is None else retain_graph
        backward(outputs, grad_outputs, retain, create_graph)
        return tuple(x.grad for x in inputs)
    finally:
        for x, old in zip(inputs, saved):
            x.grad = old


__all__ = [
    "Context", "Function", "GradcheckError", "detect_anomaly", "enable_grad", "grad",
    "gradcheck", "gradgradcheck", "is_grad_enabled", "no_grad", "set_grad_enabled",
]  # fmt: skip
