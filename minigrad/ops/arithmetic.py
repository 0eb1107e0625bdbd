"""Elementwise arithmetic: + - * / ** and unary minus, broadcasting like NumPy; and the
comparisons within a tolerance (isclose, allclose, equal), which have no gradient.

When an input was broadcast in forward (a (3,) bias added to a (2, 3) matrix), its gradient
is summed back over the broadcast dims: dL/db = sum over rows of dL/dy. ``sum_to`` does that.
An argument that is a Python number stays a number (it never upcasts a float32 tensor) and
gets no gradient.
"""

from __future__ import annotations

import math

import numpy as np

from minigrad.autograd.function import Function
from minigrad.errors import ShapeError
from minigrad.ops._helpers import on_same_device, shape_of, xp_of
from minigrad.ops.shape import sum_to
from minigrad.tensor import Tensor


class Add(Function):
    # y = a + b;  dL/da = g,  dL/db = g  (each summed back to its own shape)
    @staticmethod
    def forward(ctx, a, b):
        ctx.shapes = shape_of(a), shape_of(b)
        return a + b

    @staticmethod
    def backward(ctx, grad):
        shape_a, shape_b = ctx.shapes
        grad_a = sum_to(grad, shape_a) if ctx.needs_input_grad[0] else None
        grad_b = sum_to(grad, shape_b) if ctx.needs_input_grad[1] else None
        return grad_a, grad_b


class Sub(Function):
    # y = a - b;  dL/da = g,  dL/db = -g
    @staticmethod
    def forward(ctx, a, b):
        ctx.shapes = shape_of(a), shape_of(b)
        return a - b

    @staticmethod
    def backward(ctx, grad):
        shape_a, shape_b = ctx.shapes
        grad_a = sum_to(grad, shape_a) if ctx.needs_input_grad[0] else None
        grad_b = sum_to(-grad, shape_b) if ctx.needs_input_grad[1] else None
        return grad_a, grad_b


class Mul(Function):
    # y = a * b;  dL/da = g * b,  dL/db = g * a
    @staticmethod
    def forward(ctx, a, b):
        ctx.shapes = shape_a, shape_b = shape_of(a), shape_of(b)
        # a Python number gets no gradient, so the array it multiplies need not be kept
        # (scores * (1 / sqrt(d_k)) would otherwise hold the whole score tensor)
        ctx.save_for_backward(
            a if shape_b is not None else None, b if shape_a is not None else None
        )
        return a * b

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        shape_a, shape_b = ctx.shapes
        grad_a = sum_to(grad * b, shape_a) if ctx.needs_input_grad[0] else None
        grad_b = sum_to(grad * a, shape_b) if ctx.needs_input_grad[1] else None
        return grad_a, grad_b


class Div(Function):
    # y = a / b;  dL/da = g / b,  dL/db = -g * a / b^2
    @staticmethod
    def forward(ctx, a, b):
        ctx.shapes = shape_a, shape_b = shape_of(a), shape_of(b)
        ctx.save_for_backward(a if shape_b is not None else None, b)  # (see Mul)
        return a / b

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        shape_a, shape_b = ctx.shapes
        grad_a = sum_to(grad / b, shape_a) if ctx.needs_input_grad[0] else None
        grad_b = sum_to(-grad * a / (b * b), shape_b) if ctx.needs_input_grad[1] else None
        return grad_a, grad_b


class Pow(Function):
    # y = a ** b;  dL/da = g * b * a^(b-1),  dL/db = g * y * log(a)
    @staticmethod
    def forward(ctx, a, b):
        ctx.shapes = shape_of(a), shape_of(b)
        y = a**b
        ctx.save_for_backward(a, b, y)
        return y

    @staticmethod
    def backward(ctx, grad):
        a, b, y = ctx.saved_tensors
        shape_a, shape_b = ctx.shapes
        grad_a = grad_b = None
        if ctx.needs_input_grad[0]:
            grad_a = sum_to(_power_rule(grad, a, b, shape_b), shape_a)
        if ctx.needs_input_grad[1]:
            grad_b = sum_to(grad * y * _log_base(a, shape_a), shape_b)
        return grad_a, grad_b


def _power_rule(grad, a, b, shape_b):
    """g * b * a^(b-1); 0 where b = 0 (a^0 = 1 is constant, even at a = 0, as in PyTorch)."""
    if shape_b is None:  # a Python number
        return grad * 0.0 if b == 0 else grad * b * a ** (b - 1)
    at_zero = b == 0
    if not at_zero.array.any():
        return grad * b * a ** (b - 1)
    from minigrad.ops.indexing import where

    with np.errstate(divide="ignore", invalid="ignore"):
        return where(at_zero, 0.0, grad * b * a ** (b - 1))


def _log_base(a, shape_a):
    """log a, for d a^b / db = a^b log a; 0 where a = 0 (the limit there, as in PyTorch)."""
    if shape_a is None:  # a Python number
        return math.log(a) if a > 0 else (0.0 if a == 0 else math.nan)
    at_zero = a == 0
    if not at_zero.array.any():
        return a.log()
    from minigrad.ops.indexing import where

    with np.errstate(divide="ignore"):
        return where(at_zero, 0.0, a.log())


class Neg(Function):
    # y = -x;  dL/dx = -g
    @staticmethod
    def forward(ctx, x):
        return -x

    @staticmethod
    def backward(ctx, grad):
        return -grad


# -- the public functions; Tensor's operators call these ---------------------------------


def add(a, b):
    return Add.apply(a, b)


def sub(a, b):
    return Sub.apply(a, b)


def mul(a, b):
    return Mul.apply(a, b)


def div(a, b):
    return Div.apply(a, b)


def pow(a, b):  # noqa: A001  (the name PyTorch uses)
    return Pow.apply(a, b)


def neg(x):
    return Neg.apply(x)


# -- equal within a tolerance: bool answers, no gradient ------------------------------------


def isclose(a, b, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False):
    """|a - b| <= atol + rtol * |b|, elementwise (broadcasting), as a bool tensor; infinities
    are close to themselves, nan only with ``equal_nan``. a and b share a dtype."""
    return Tensor._make(_isclose(a, b, rtol, atol, equal_nan, "isclose"))


def allclose(a, b, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> bool:
    """Whether every entry of a is close to b's (see ``isclose``)."""
    return bool(_isclose(a, b, rtol, atol, equal_nan, "allclose").all())


def _isclose(a, b, rtol, atol, equal_nan, op: str):
    a_array, b_array = _comparable(a, b, op)
    try:
        return xp_of(a_array).isclose(a_array, b_array, rtol=rtol, atol=atol, equal_nan=equal_nan)
    except ValueError:
        raise ShapeError(f"{op}: shapes {a.shape} and {b.shape} do not broadcast") from None


def equal(a, b) -> bool:
    """Whether a and b have the same shape and the same values (of any dtypes)."""
    if not isinstance(a, Tensor) or not isinstance(b, Tensor):
        raise TypeError(
            f"equal: expected two tensors, got {type(a).__name__} and {type(b).__name__}"
        )
    on_same_device(a, b)
    return a.shape == b.shape and bool((a.array == b.array).all())


def _comparable(a, b, op: str):
    if not isinstance(a, Tensor) or not isinstance(b, Tensor):
        raise TypeError(
            f"{op}: expected two tensors, got {type(a).__name__} and {type(b).__name__}"
        )
    on_same_device(a, b)
    if a.dtype != b.dtype:
        raise RuntimeError(f"{op}: dtypes must match, got {a.dtype} and {b.dtype}")
    return a.array, b.array
