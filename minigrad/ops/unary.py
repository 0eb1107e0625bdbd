"""Elementwise functions of one tensor: exp, log, sqrt, tanh, sigmoid, relu, abs, clamp.

Each backward is the chain rule with the function's own derivative, written where possible
in terms of the output y, which forward already computed.
"""

from __future__ import annotations

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


def exp(x):
    return Exp.apply(x)


def log(x):
    return Log.apply(x)


def sqrt(x):
    return Sqrt.apply(x)


def tanh(x):
    return Tanh.apply(x)


def sigmoid(x):
    return Sigmoid.apply(x)


def relu(x):
    return Relu.apply(x)


def abs(x):  # noqa: A001  (the name PyTorch uses)
    return Abs.apply(x)


def clamp(x, min=None, max=None):  # noqa: A002
    if min is None and max is None:
        raise ValueError("clamp: at least one of min and max must be given")
    return Clamp.apply(x, min, max)
