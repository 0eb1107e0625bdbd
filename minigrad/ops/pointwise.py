"""Elementwise functions of two tensors that PyTorch has as functions: ``maximum`` and
``minimum`` (``mg.max(a, b)``, ``mg.min(a, b)``), and ``pow(input, exponent)``, the function
form of ``**``.

Both inputs broadcast; each gradient is summed back to its input's shape. Where the two
values tie, each gets half the gradient, as in PyTorch.
"""

from __future__ import annotations

import numpy as np

from minigrad.autograd.function import Function
from minigrad.ops._helpers import xp_of
from minigrad.ops.shape import sum_to
from minigrad.tensor import Tensor


def _shares(a, b, a_wins):
    """How much of the gradient goes to a and to b: 1 to the winner, 1/2 each on a tie, and
    (with a NaN, which neither wins) to both, as in PyTorch."""
    dtype = np.result_type(a.dtype, b.dtype)
    dtype = dtype if dtype.kind == "f" else np.dtype(np.float32)  # (integers get no gradient)
    half_on_ties = xp_of(a).where(a == b, 0.5, 1.0).astype(dtype)
    return half_on_ties * ~a_wins(b, a), half_on_ties * ~a_wins(a, b)


class Maximum(Function):
    # y = max(a, b);  dL/da = g where a > b (g/2 on a tie), dL/db = g where b > a
    @staticmethod
    def forward(ctx, a, b):
        ctx.shapes = a.shape, b.shape
        ctx.save_for_backward(*_shares(a, b, lambda u, v: u > v))
        return xp_of(a).maximum(a, b)

    @staticmethod
    def backward(ctx, grad):
        share_a, share_b = ctx.saved_tensors
        shape_a, shape_b = ctx.shapes
        grad_a = sum_to(grad * share_a, shape_a) if ctx.needs_input_grad[0] else None
        grad_b = sum_to(grad * share_b, shape_b) if ctx.needs_input_grad[1] else None
        return grad_a, grad_b


class Minimum(Function):
    # y = min(a, b);  dL/da = g where a < b (g/2 on a tie), dL/db = g where b < a
    @staticmethod
    def forward(ctx, a, b):
        ctx.shapes = a.shape, b.shape
        ctx.save_for_backward(*_shares(a, b, lambda u, v: u < v))
        return xp_of(a).minimum(a, b)

    @staticmethod
    def backward(ctx, grad):
        share_a, share_b = ctx.saved_tensors
        shape_a, shape_b = ctx.shapes
        grad_a = sum_to(grad * share_a, shape_a) if ctx.needs_input_grad[0] else None
        grad_b = sum_to(grad * share_b, shape_b) if ctx.needs_input_grad[1] else None
        return grad_a, grad_b


def _check_tensors(op: str, a, b) -> None:
    for position, value in (("input", a), ("other", b)):
        if not isinstance(value, Tensor):
            raise TypeError(
                f"{op}(): argument '{position}' must be Tensor, not {type(value).__name__}"
            )


def maximum(input, other):  # noqa: A002  (PyTorch's argument names)
    """The elementwise larger of two tensors (broadcasting); NaN wins, as in PyTorch."""
    _check_tensors("maximum", input, other)
    return Maximum.apply(input, other)


def minimum(input, other):  # noqa: A002
    """The elementwise smaller of two tensors (broadcasting); NaN wins, as in PyTorch."""
    _check_tensors("minimum", input, other)
    return Minimum.apply(input, other)


def pow(input, exponent):  # noqa: A001, A002  (PyTorch's names)
    """input ** exponent; either may be a Python number (mg.pow(2, t) is 2 ** t)."""
    if isinstance(input, Tensor):
        return input**exponent
    if isinstance(exponent, Tensor):
        return input**exponent  # Tensor.__rpow__
    raise TypeError(
        f"pow(): expected a Tensor as input or exponent, got {type(input).__name__} and "
        f"{type(exponent).__name__}"
    )
