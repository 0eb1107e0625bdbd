"""Fused activations: softmax, log_softmax and GELU, each one node with its own backward.

Composite versions built from primitive ops compute the same (the tests check it), but take
several passes over memory and several graph nodes; these take one.
"""

from __future__ import annotations

import math

import numpy as np

from minigrad.autograd.function import Function
from minigrad.autograd.grad_mode import is_grad_enabled
from minigrad.backend import (
    GELU_TANH_C,
    INV_SQRT_2PI,
    PARALLEL_MIN_SIZE,
    SQRT_2_OVER_PI,
    fused_gelu,
    fused_gelu_slope,
    ignore_overflow,
    in_two_halves,
    is_numpy,
    is_small,
    normal_cdf,
    reduce_max,
    row_maxima,
    row_sums,
    sum_of_products,
    wait_for_writes_to,
)
from minigrad.ops._helpers import normalize_dim, xp_of
from minigrad.tensor import Tensor


class Softmax(Function):
    # y_i = e^(x_i - m) / sum_j e^(x_j - m), m = max_j x_j (so exp never overflows);
    # the same as e^x_i / sum_j e^x_j, which big arrays use where no e^x overflows
    # (_softmax_into)
    # dL/dx = y * (g - sum_j g_j y_j)
    streams = True  # (backend, "streams"): whole rows in each half

    @staticmethod
    def forward(ctx, x, dim):
        ctx.dim = dim
        y = xp_of(x).empty(x.shape, dtype=x.dtype)
        _by_rows(dim, _softmax_into, x, y)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        if not is_grad_enabled():  # the same formula on arrays: fewer passes, no graph nodes
            (y,) = ctx.saved_arrays
            grad_x = xp_of(y).empty(y.shape, dtype=y.dtype)
            _by_rows(ctx.dim, _softmax_grad_into, grad.data, y, grad_x)
            return Tensor._make(grad_x)
        (y,) = ctx.saved_tensors
        return y * (grad - (grad * y).sum(dim=ctx.dim, keepdim=True))


# Below this, a row's sum of e^x is too close to float32's smallest normal number: its
# largest exp could have lost digits, so that row needs the shift by its max.
NO_SHIFT_FLOOR = math.exp(-60.0)
# Below this many values the checks of the unshifted path cost more than the row max (8x8:
# 8 us more per forward + backward)
NO_SHIFT_MIN_SIZE = 1 << 13


def _softmax_into(x, y, dim):
    """y = softmax(x) along dim, written into y.

    The shift by the row max only keeps e^x from overflowing: e^(x - m) / sum e^(x - m) is
    e^x / sum e^x. So on big NumPy arrays, e^x comes first, unshifted; if every row's sum is
    finite and at least e^-60, no exp overflowed and each row's largest one is a normal
    float, as precise as the shifted one (more: x - m is not rounded), and the row max, a
    slow reduction along short rows, is skipped. Scores of a few units, as attention's,
    always pass; where a row does not (values beyond about +-80), the whole array (one
    half, on two threads) is redone with the shift.
    """
    xp = xp_of(x)
    if x.size >= NO_SHIFT_MIN_SIZE and xp is np and x.dtype in (np.float32, np.float64):
        with ignore_overflow(x):
            np.exp(x, out=y)
        sums = _sums_along(y, dim)
        if np.minimum.reduce(sums, axis=None) >= NO_SHIFT_FLOOR and np.isfinite(sums).all():
            y /= sums
            return
    if x.size == 0:  # nothing to write (and an empty row has no max)
        return
    if dim == x.ndim - 1 and is_small(x):
        _softmax_small(x, y)
        return
    m = row_maxima(x) if dim == x.ndim - 1 else reduce_max(x, dim, keepdims=True)
    xp.subtract(x, m, out=y)
    xp.exp(y, out=y)
    y /= _sums_along(y, dim)


def _softmax_small(x, y):
    """_softmax_into along the last axis of a small NumPy array (backend.SMALL_SIZE): the
    row max and the row sums spread out along the rows before the op that takes them, so
    that each runs NumPy's loop over whole arrays (8x8 forward and backward: 12.7 -> 12.2
    us). tests/test_fused_twins.py holds it to the broadcasting lines above."""
    y[...] = row_maxima(x)  # m
    np.subtract(x, y, out=y)
    np.exp(y, out=y)  # e^(x - m)
    sums = np.empty_like(y)
    sums[...] = row_sums(y)
    y /= sums


def _sums_along(y, dim):
    return row_sums(y) if dim == y.ndim - 1 else y.sum(axis=dim, keepdims=True)


def _softmax_grad_into(grad, y, grad_x, dim):
    """grad_x = y * (g - sum(g * y)) along dim, written into grad_x (on a small NumPy array,
    the sums spread out first, as in _softmax_small)."""
    xp = xp_of(y)
    if dim == y.ndim - 1 and is_small(y):
        grad_x[...] = sum_of_products(grad, y, (dim,))
        xp.subtract(grad, grad_x, out=grad_x)
    else:
        xp.subtract(grad, sum_of_products(grad, y, (dim,)), out=grad_x)
    grad_x *= y


def _by_rows(dim, compute, *arrays):
    """``compute(*arrays, dim)``, on both cores when the reduced dim is not dim 0 (the halves
    are split along dim 0, so each half holds whole rows) and the arrays are big enough to
    be split (small ones skip the hand-off's checks: 43 -> 40 us for an 8x8 softmax forward
    and backward)."""
    if dim == 0 or arrays[0].size < PARALLEL_MIN_SIZE:
        wait_for_writes_to(*arrays)  # (in a stream: whole arrays read here)
        compute(*arrays, dim)
    else:  # the last array is the one written
        in_two_halves(lambda *halves: compute(*halves, dim), *arrays, writes=(len(arrays) - 1,))


class LogSoftmax(Function):
    # y_i = x_i - m - log sum_j e^(x_j - m)
    # dL/dx = g - softmax(x) * sum_j g_j,  with softmax(x) = e^y
    @staticmethod
    def forward(ctx, x, dim):
        ctx.dim = dim
        xp = xp_of(x)
        if x.size == 0:  # an empty row has no max
            y = x.copy()
            ctx.save_for_backward(y)
            return y
        shifted = x - x.max(axis=dim, keepdims=True)
        y = shifted - xp.log(xp.exp(shifted).sum(axis=dim, keepdims=True))
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        if not is_grad_enabled():  # the same formula on arrays: fewer passes, no graph nodes
            (y,) = ctx.saved_arrays
            grad_x = xp_of(y).exp(y)
            grad_x *= grad.data.sum(axis=ctx.dim, keepdims=True)
            return Tensor._make(grad.data - grad_x)
        (y,) = ctx.saved_tensors
        return grad - y.exp() * grad.sum(dim=ctx.dim, keepdim=True)


def sigmoid_of_negated(z):
    """1 / (1 + e^z), in place on ``z``. Where e^z overflows to inf the result is exactly 0,
    the right limit, so NumPy's overflow warning is silenced. (1 / t by ``divide``: the same
    correctly rounded quotient as ``reciprocal``, which NumPy computes at half the speed.)"""
    xp = xp_of(z)
    with ignore_overflow(z):
        xp.exp(z, out=z)
    z += 1.0
    return xp.divide(1.0, z, out=z)


def _gelu_tanh(x, s, y):
    """s = sigmoid(2u), y = x s (see Gelu), written into s and y."""
    xp = xp_of(x)
    xp.multiply(x, x, out=s)
    s *= -2.0 * SQRT_2_OVER_PI * GELU_TANH_C
    s -= 2.0 * SQRT_2_OVER_PI
    s *= x  # -2u = -2 sqrt(2/pi) (x + c x^3), the constants folded: one pass fewer
    sigmoid_of_negated(s)  # s = 1 / (1 + e^(-2u))
    xp.multiply(x, s, out=y)


def _gelu_exact(x, cdf, y):
    """cdf = Phi(x), y = x Phi(x), written into cdf and y."""
    normal_cdf(x, out=cdf)
    xp_of(x).multiply(x, cdf, out=y)


def _gelu_tanh_slope(x, s, slope):
    """slope = s + 2x s (1 - s) u' (see Gelu), from x and s = sigmoid(2u)."""
    xp = xp_of(x)
    xp.multiply(x, x, out=slope)
    slope *= 6.0 * GELU_TANH_C * SQRT_2_OVER_PI
    slope += 2.0 * SQRT_2_OVER_PI  # 2u'
    slope *= x
    slope *= s
    slope *= 1.0 - s
    slope += s


def _gelu_exact_slope(x, cdf, slope):
    """slope = Phi(x) + x phi(x), from x and cdf = Phi(x)."""
    xp = xp_of(x)
    xp.multiply(x, x, out=slope)
    slope *= -0.5
    xp.exp(slope, out=slope)
    slope *= INV_SQRT_2PI  # phi(x)
    slope *= x
    slope += cdf


class Gelu(Function):
    # exact:  y = x * Phi(x), Phi(x) = (1 + erf(x / sqrt 2)) / 2 (the normal CDF)
    #         dy/dx = Phi(x) + x * phi(x), phi(x) = e^(-x^2/2) / sqrt(2 pi)
    # tanh:   y = x/2 * (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3)
    #           = x * s,  s = (1 + tanh(u))/2 = sigmoid(2u) = 1 / (1 + e^(-2u))
    #         dy/dx = s + 2x s (1 - s) u',  u' = sqrt(2/pi) (1 + 3c x^2)
    #         (the sigmoid form needs one exp, cheaper than NumPy's tanh)
    # dL/dx = g * dy/dx, with dy/dx its own op (GeluDerivative) so that it too can be
    # differentiated (second derivatives through create_graph=True). Forward keeps Phi(x)
    # (or s) for it: erf and exp are the costly parts.
    streams = True  # (backend, "streams"): elementwise

    @staticmethod
    def forward(ctx, x, approximate):
        ctx.approximate = approximate
        if not is_numpy(x):  # on the GPU: the lines below as one kernel (tested as they are)
            y, kept = fused_gelu(x, approximate)
            ctx.save_for_backward(x, kept)
            return y
        xp = xp_of(x)
        if not x.flags.c_contiguous:  # (in a stream: a copy reads the whole of x)
            wait_for_writes_to(x)
        rows = xp.ascontiguousarray(x).reshape(-1)
        y, kept = xp.empty_like(rows), xp.empty_like(rows)
        compute = _gelu_tanh if approximate == "tanh" else _gelu_exact
        in_two_halves(compute, rows, kept, y, writes=(1, 2))
        ctx.save_for_backward(x, kept.reshape(x.shape))
        return y.reshape(x.shape)

    @staticmethod
    def backward(ctx, grad):
        if not is_grad_enabled():  # on arrays: g * dy/dx in one pass per half, no graph nodes
            x, kept = ctx.saved_arrays
            return Tensor._make(_gelu_grad(grad.data, x, kept, ctx.approximate)), None
        x, kept = ctx.saved_tensors
        return grad * GeluDerivative.apply(x, ctx.approximate, kept.data), None


def _gelu_grad(grad, x, kept, approximate: str):
    """g * dGELU/dx on arrays: GeluDerivative's forward, multiplied by g in place."""
    if not is_numpy(x):
        slope = fused_gelu_slope(x, kept, approximate)
        slope *= grad
        return slope
    slope_into = _gelu_tanh_slope if approximate == "tanh" else _gelu_exact_slope

    def compute(x, kept, grad, out):
        slope_into(x, kept, out)
        out *= grad

    rows = x.reshape(-1) if x.flags.c_contiguous else x.ravel()
    out = np.empty_like(rows)
    in_two_halves(compute, rows, kept.reshape(-1), grad.reshape(-1), out, writes=(3,))
    return out.reshape(x.shape)


class GeluDerivative(Function):
    # y = dGELU/dx (see Gelu), from x and what Gelu's forward kept (Phi(x), or s);
    # its own derivative:
    # exact:  d2y/dx2 = phi(x) (2 - x^2)
    # tanh:   d2y/dx2 = (1 - t^2) (u' + x/2 (u'' - 2 t u'^2)), u'' = 6 sqrt(2/pi) c x
    @staticmethod
    def forward(ctx, x, approximate, kept):
        ctx.approximate = approximate
        ctx.save_for_backward(x)
        if not is_numpy(x):
            return fused_gelu_slope(x, kept, approximate)
        xp = xp_of(x)
        rows = xp.ascontiguousarray(x).reshape(-1)
        slope = xp.empty_like(rows)
        compute = _gelu_tanh_slope if approximate == "tanh" else _gelu_exact_slope
        kept_rows = xp.ascontiguousarray(kept).reshape(-1)
        in_two_halves(compute, rows, kept_rows, slope, writes=(2,))
        return slope.reshape(x.shape)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        if ctx.approximate == "tanh":
            t = (SQRT_2_OVER_PI * (x + GELU_TANH_C * x * x * x)).tanh()
            du = SQRT_2_OVER_PI * (1.0 + 3.0 * GELU_TANH_C * x * x)
            ddu = 6.0 * SQRT_2_OVER_PI * GELU_TANH_C * x
            return grad * (1.0 - t * t) * (du + 0.5 * x * (ddu - 2.0 * t * du * du)), None, None
        pdf = (-0.5 * x * x).exp() * INV_SQRT_2PI
        return grad * pdf * (2.0 - x * x), None, None


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
