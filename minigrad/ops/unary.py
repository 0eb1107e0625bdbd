"""Elementwise functions of one tensor: exp, log, log2, log10, log1p, expm1, sqrt, rsqrt,
reciprocal, square, sin, cos, tanh, sigmoid, relu, abs, clamp, and the step functions sign,
floor, ceil, round, trunc.

Each backward is the chain rule with the function's own derivative, written where possible
in terms of the output y, which forward already computed. The step functions are flat
almost everywhere, so their gradient is zero (as in PyTorch).

As in PyTorch, an integer or bool tensor is turned float32 first by the functions whose
values are not integers (sin of an int64 tensor is float32).
"""

from __future__ import annotations

import math

import numpy as np

from minigrad.autograd.function import Function
from minigrad.backend import ignore_overflow
from minigrad.ops._helpers import xp_of


class Exp(Function):
    # y = e^x;  dL/dx = g * y
    @staticmethod
    def forward(ctx, x):
        y = xp_of(x).exp(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return grad * y


class Log(Function):
    # y = ln x;  dL/dx = g / x
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return xp_of(x).log(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad / x


class Log2(Function):
    # y = log2 x;  dL/dx = g / (x ln 2)
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return xp_of(x).log2(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad / (x * math.log(2.0))


class Log10(Function):
    # y = log10 x;  dL/dx = g / (x ln 10)
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return xp_of(x).log10(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad / (x * math.log(10.0))


class Log1p(Function):
    # y = ln(1 + x) (accurate for small x);  dL/dx = g / (1 + x)
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return xp_of(x).log1p(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad / (1.0 + x)


class Expm1(Function):
    # y = e^x - 1 (accurate for small x);  dL/dx = g * (y + 1)
    @staticmethod
    def forward(ctx, x):
        y = xp_of(x).expm1(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return grad * (y + 1.0)


class Sqrt(Function):
    # y = sqrt(x);  dL/dx = g / (2 y)
    @staticmethod
    def forward(ctx, x):
        y = xp_of(x).sqrt(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return grad / (2.0 * y)


class Rsqrt(Function):
    # y = 1 / sqrt(x);  dL/dx = -g * y^3 / 2
    @staticmethod
    def forward(ctx, x):
        with np.errstate(divide="ignore"):  # 1 / sqrt(0) = inf, as in PyTorch
            y = 1.0 / xp_of(x).sqrt(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return grad * y * y * y * -0.5


class Reciprocal(Function):
    # y = 1 / x;  dL/dx = -g * y^2
    @staticmethod
    def forward(ctx, x):
        with np.errstate(divide="ignore"):  # 1 / 0 = inf, as in PyTorch
            y = 1.0 / x
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return -grad * y * y


class Square(Function):
    # y = x^2;  dL/dx = 2 g x
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * x * 2.0


class Sin(Function):
    # y = sin x;  dL/dx = g * cos x
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return xp_of(x).sin(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * cos(x)


class Cos(Function):
    # y = cos x;  dL/dx = -g * sin x
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return xp_of(x).cos(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return -grad * sin(x)


class Tanh(Function):
    # y = tanh x;  dL/dx = g * (1 - y^2)
    @staticmethod
    def forward(ctx, x):
        y = xp_of(x).tanh(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return grad * (1.0 - y * y)


class Sigmoid(Function):
    # y = 1 / (1 + e^-x);  dL/dx = g * y * (1 - y)
    @staticmethod
    def forward(ctx, x):
        with ignore_overflow(x):  # e^-x = inf for x < -88 (float32) gives y = 0: right
            y = 1.0 / (1.0 + xp_of(x).exp(-x))
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return grad * y * (1.0 - y)


class Relu(Function):
    # y = max(x, 0);  dL/dx = g where x > 0, else 0
    @staticmethod
    def forward(ctx, x):
        y = xp_of(x).maximum(x, 0)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return grad * (y > 0)


class Abs(Function):
    # y = |x|;  dL/dx = g * sign(x)   (0 at x = 0, as in PyTorch)
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return xp_of(x).abs(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * x.sign()


class Clamp(Function):
    # y = min(max(x, lo), hi);  dL/dx = g where lo <= x <= hi, else 0
    @staticmethod
    def forward(ctx, x, lo, hi):
        inside = xp_of(x).ones(x.shape, dtype=bool)
        if lo is not None:
            inside &= x >= lo
        if hi is not None:
            inside &= x <= hi
        ctx.save_for_backward(inside)
        return xp_of(x).clip(x, lo, hi)

    @staticmethod
    def backward(ctx, grad):
        (inside,) = ctx.saved_tensors
        return grad * inside, None, None


class Sign(Function):
    # y = -1, 0 or 1 by the sign of x;  dL/dx = 0
    @staticmethod
    def forward(ctx, x):
        return x.copy() if x.dtype == np.bool_ else xp_of(x).sign(x)

    @staticmethod
    def backward(ctx, grad):
        return grad.zeros_like_detached()


class Floor(Function):
    # y = the largest integer <= x;  dL/dx = 0
    @staticmethod
    def forward(ctx, x):
        return xp_of(x).floor(x)

    @staticmethod
    def backward(ctx, grad):
        return grad.zeros_like_detached()


class Ceil(Function):
    # y = the smallest integer >= x;  dL/dx = 0
    @staticmethod
    def forward(ctx, x):
        return xp_of(x).ceil(x)

    @staticmethod
    def backward(ctx, grad):
        return grad.zeros_like_detached()


class Trunc(Function):
    # y = x rounded toward zero;  dL/dx = 0
    @staticmethod
    def forward(ctx, x):
        return xp_of(x).trunc(x)

    @staticmethod
    def backward(ctx, grad):
        return grad.zeros_like_detached()


class Round(Function):
    # y = x rounded to `decimals` places, ties to even (as PyTorch and NumPy);  dL/dx = 0
    @staticmethod
    def forward(ctx, x, decimals):
        return xp_of(x).round(x, decimals)

    @staticmethod
    def backward(ctx, grad):
        return grad.zeros_like_detached(), None


# -- the public functions ------------------------------------------------------------------


def _floating(x):
    """An integer or bool tensor as float32 (as PyTorch does for exp, sin, sqrt...)."""
    return x.float() if x.dtype.kind in "biu" else x


def exp(x):
    return Exp.apply(_floating(x))


def log(x):
    return Log.apply(_floating(x))


def log2(x):
    return Log2.apply(_floating(x))


def log10(x):
    return Log10.apply(_floating(x))


def log1p(x):
    return Log1p.apply(_floating(x))


def expm1(x):
    return Expm1.apply(_floating(x))


def sqrt(x):
    return Sqrt.apply(_floating(x))


def rsqrt(x):
    return Rsqrt.apply(_floating(x))


def reciprocal(x):
    return Reciprocal.apply(_floating(x))


def square(x):
    """x * x; an integer tensor stays integer (as in PyTorch)."""
    return Square.apply(x.long() if x.dtype == np.bool_ else x)


def sin(x):
    return Sin.apply(_floating(x))


def cos(x):
    return Cos.apply(_floating(x))


def tanh(x):
    return Tanh.apply(_floating(x))


def sigmoid(x):
    return Sigmoid.apply(_floating(x))


def sign(x):
    return Sign.apply(x)


def floor(x):
    """Integer tensors come back as they are (they are already whole), as in PyTorch."""
    return x if x.dtype.kind in "biu" else Floor.apply(x)


def ceil(x):
    return x if x.dtype.kind in "biu" else Ceil.apply(x)


def trunc(x):
    return x if x.dtype.kind in "biu" else Trunc.apply(x)


def round(x, decimals: int = 0):  # noqa: A001  (the name PyTorch uses)
    if x.dtype.kind in "biu" and decimals >= 0:
        return x
    return Round.apply(x, decimals)


def relu(x):
    return Relu.apply(x)


def abs(x):  # noqa: A001  (the name PyTorch uses)
    return Abs.apply(x)


def clamp(x, min=None, max=None):  # noqa: A002
    if min is None and max is None:
        raise ValueError("clamp: at least one of min and max must be given")
    return Clamp.apply(x, min, max)


def clamp_min(x, min):  # noqa: A002
    return Clamp.apply(x, min, None)


def clamp_max(x, max):  # noqa: A002
    return Clamp.apply(x, None, max)
