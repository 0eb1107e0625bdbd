"""Reverse-mode automatic differentiation: ``Function`` (one op and its backward), the graph
walk (``engine``), grad mode, and gradient checks."""

from minigrad.autograd.engine import grad
from minigrad.autograd.function import Context, Function
from minigrad.autograd.grad_mode import (
    detect_anomaly,
    enable_grad,
    is_grad_enabled,
    no_grad,
    set_grad_enabled,
)
from minigrad.autograd.gradcheck import GradcheckError, gradcheck, gradgradcheck

__all__ = [
    "Context", "Function", "GradcheckError", "detect_anomaly", "enable_grad", "grad",
    "gradcheck", "gradgradcheck", "is_grad_enabled", "no_grad", "set_grad_enabled",
]  # fmt: skip
