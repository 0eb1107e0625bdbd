"""Activations that are one node each: softmax, log_softmax and GELU.

Each could be written as several primitive ops (the tests check that those compute the same),
but as one node each has a backward of its own, written from its derivative.
"""

from __future__ import annotations

import math

from minigrad.autograd.function import Function
from minigrad.backend import erf
from minigrad.ops._helpers import normalize_dim, xp_of

SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
GELU_TANH_C = 0.044715  # u = sqrt(2/pi) (x + 0.044715 x^3) in the tanh form


class Softmax(Function):
    # y_i = e^(x_i - m) / sum_j e^(x_j - m),  m = max_j x_j
    # (the same as e^x_i / sum_j e^x_j; the shift by the row max keeps e^x from overflowing)
    @staticmethod
    def forward(ctx, x, dim):
        if x.size == 0:  # (an empty row has no max)
            y = x.copy()
        else:
            exps = xp_of(x).exp(x - x.max(axis=dim, keepdims=True))
            y = exps / exps.sum(axis=dim, keepdims=True)
        ctx.dim = dim
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        # dL/dx_i = y_i * (g_i - sum_j g_j y_j)
        (y,) = ctx.saved_tensors
        return y * (grad - (grad * y).sum(dim=ctx.dim, keepdim=True))


class LogSoftmax(Function):
    # y_i = x_i - m - log sum_j e^(x_j - m),  m = max_j x_j
    @staticmethod
    def forward(ctx, x, dim):
        if x.size == 0:  # (an empty row has no max)
            y = x.copy()
        else:
            shifted = x - x.max(axis=dim, keepdims=True)
            y = shifted - xp_of(x).log(xp_of(x).exp(shifted).sum(axis=dim, keepdims=True))
        ctx.dim = dim
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        # dL/dx_i = g_i - softmax(x)_i * sum_j g_j,  softmax(x) = e^y
        (y,) = ctx.saved_tensors
        return grad - y.exp() * grad.sum(dim=ctx.dim, keepdim=True)


def normal_cdf(x):
    """Phi(x) = (1 + erf(x / sqrt 2)) / 2, the standard normal CDF, elementwise."""
    return 0.5 * (1.0 + erf(x * (1.0 / math.sqrt(2.0))))


class Gelu(Function):
    # exact:  y = x * Phi(x),  Phi(x) = (1 + erf(x / sqrt 2)) / 2, the normal CDF
    # tanh:   y = x/2 * (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3)
    @staticmethod
    def forward(ctx, x, approximate):
        ctx.approximate = approximate
        ctx.save_for_backward(x)
        if approximate == "tanh":
            u = SQRT_2_OVER_PI * (x + GELU_TANH_C * x * x * x)
            return 0.5 * x * (1.0 + xp_of(x).tanh(u))
        return x * normal_cdf(x)

    @staticmethod
    def backward(ctx, grad):
        # dL/dx = g * dy/dx, with dy/dx an op of its own, so that create_graph=True can
        # differentiate it again
        (x,) = ctx.saved_tensors
        return grad * GeluDerivative.apply(x, ctx.approximate), None


class GeluDerivative(Function):
    # exact:  dy/dx = Phi(x) + x phi(x),  phi(x) = e^(-x^2/2) / sqrt(2 pi)
    # tanh:   dy/dx = (1 + t)/2 + x/2 (1 - t^2) u',  t = tanh(u),  u' = sqrt(2/pi) (1 + 3c x^2)
    @staticmethod
    def forward(ctx, x, approximate):
        ctx.approximate = approximate
        ctx.save_for_backward(x)
        xp = xp_of(x)
        if approximate == "tanh":
            t = xp.tanh(SQRT_2_OVER_PI * (x + GELU_TANH_C * x * x * x))
            du = SQRT_2_OVER_PI * (1.0 + 3.0 * GELU_TANH_C * x * x)
            return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du
        return normal_cdf(x) + x * xp.exp(-0.5 * x * x) * INV_SQRT_2PI

    @staticmethod
    def backward(ctx, grad):
        # exact:  d2y/dx2 = phi(x) (2 - x^2)
        # tanh:   d2y/dx2 = (1 - t^2) (u' + x/2 (u'' - 2 t u'^2)),  u'' = 6 sqrt(2/pi) c x
        (x,) = ctx.saved_tensors
        if ctx.approximate == "tanh":
            t = (SQRT_2_OVER_PI * (x + GELU_TANH_C * x * x * x)).tanh()
            du = SQRT_2_OVER_PI * (1.0 + 3.0 * GELU_TANH_C * x * x)
            ddu = 6.0 * SQRT_2_OVER_PI * GELU_TANH_C * x
            return grad * (1.0 - t * t) * (du + 0.5 * x * (ddu - 2.0 * t * du * du)), None
        pdf = (-0.5 * x * x).exp() * INV_SQRT_2PI
        return grad * pdf * (2.0 - x * x), None


def softmax(x, dim: int = -1):
    dim = normalize_dim(dim, x.ndim, "softmax")
    if x.ndim == 0:  # one value is its own row (CuPy, unlike NumPy, has no axis 0 on a 0-d array)
        return Softmax.apply(x.reshape(1), dim=0).reshape(())
    return Softmax.apply(x, dim=dim)


def log_softmax(x, dim: int = -1):
    dim = normalize_dim(dim, x.ndim, "log_softmax")
    if x.ndim == 0:
        return LogSoftmax.apply(x.reshape(1), dim=0).reshape(())
    return LogSoftmax.apply(x, dim=dim)


def gelu(x, approximate: str = "none"):
    """GELU: the exact form x * Phi(x) (as PyTorch's default), or approximate="tanh"."""
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return Gelu.apply(x, approximate)
