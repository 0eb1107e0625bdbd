"""Softmax, log_softmax and GELU on the CPU: ``ops.activation``'s ops in fewer passes, on both
cores for big arrays, with their backward on arrays.

- Softmax shifts by the row max only so that no e^x overflows. On big arrays e^x comes
  first, unshifted; if every row's sum is finite and at least e^-60, nothing overflowed
  and each row's largest exp is a normal float, as precise as the shifted one, and the row
  max (a slow reduction along short rows) is skipped. Otherwise the shifted form runs.
- GELU's exact form reads the normal CDF Phi off a table in float32 (NumPy has no erf, and
  SciPy's is slow); the tanh form writes (1 + tanh u) / 2 as sigmoid(2u), one exp. Forward
  keeps Phi(x) (or the sigmoid) for backward, where the costly part would be again.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from minigrad import fast
from minigrad.fast.arrays import (
    PARALLEL_MIN_SIZE,
    in_two_halves,
    is_small,
    row_maxima,
    row_sums,
    sum_of_products,
)
from minigrad.ops.activation import GELU_TANH_C, INV_SQRT_2PI, SQRT_2_OVER_PI, normal_cdf
from minigrad.tensor import Tensor

NO_SHIFT_FLOOR = math.exp(-60.0)  # a row sum below this may have lost digits: shift it
NO_SHIFT_MIN_SIZE = 1 << 13  # below this many values the checks cost more than the max


@fast.register("Softmax", "cpu")
class SoftmaxKernel:
    @staticmethod
    def forward(ctx, x, dim):
        ctx.dim = dim
        y = np.empty(x.shape, dtype=x.dtype)
        if x.size:
            _by_rows(dim, _softmax_into, x, y)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_arrays
        grad_x = np.empty(y.shape, dtype=y.dtype)
        _by_rows(ctx.dim, _softmax_grad_into, grad.array, y, grad_x)
        return Tensor._make(grad_x)


def _softmax_into(x, y, dim):
    """y = softmax(x) along dim, written into y (see the module docstring)."""
    if x.size >= NO_SHIFT_MIN_SIZE and x.dtype in (np.float32, np.float64):
        with np.errstate(over="ignore", invalid="ignore"):
            np.exp(x, out=y)
            sums = _sums_along(y, dim)
        if np.minimum.reduce(sums, axis=None) >= NO_SHIFT_FLOOR and np.isfinite(sums).all():
            y /= sums
            return
    if dim == x.ndim - 1 and is_small(x):  # the row max and sums spread out along the rows
        y[...] = row_maxima(x)
        np.subtract(x, y, out=y)
        np.exp(y, out=y)
        sums = np.empty_like(y)
        sums[...] = row_sums(y)
        y /= sums
        return
    m = row_maxima(x) if dim == x.ndim - 1 else np.maximum.reduce(x, axis=dim, keepdims=True)
    np.subtract(x, m, out=y)
    np.exp(y, out=y)
    y /= _sums_along(y, dim)


def _sums_along(y, dim):
    return row_sums(y) if dim == y.ndim - 1 else y.sum(axis=dim, keepdims=True)


def _softmax_grad_into(grad, y, grad_x, dim):
    """grad_x = y * (g - sum(g * y)) along dim, written into grad_x."""
    if dim == y.ndim - 1 and is_small(y):
        grad_x[...] = sum_of_products(grad, y, (dim,))
        np.subtract(grad, grad_x, out=grad_x)
    else:
        np.subtract(grad, sum_of_products(grad, y, (dim,)), out=grad_x)
    grad_x *= y


def _by_rows(dim, compute, *arrays):
    """``compute(*arrays, dim)``, on both cores where the reduced dim is not dim 0 (the halves
    split dim 0, so each holds whole rows) and the arrays are big."""
    if dim == 0 or arrays[0].size < PARALLEL_MIN_SIZE:
        compute(*arrays, dim)
    else:
        in_two_halves(functools.partial(_with_dim, compute, dim), *arrays)


def _with_dim(compute, dim, *arrays):
    compute(*arrays, dim)


@fast.register("LogSoftmax", "cpu")
class LogSoftmaxKernel:
    @staticmethod
    def forward(ctx, x, dim):
        ctx.dim = dim
        if x.size == 0:
            y = x.copy()
        else:
            m = row_maxima(x) if dim == x.ndim - 1 else x.max(axis=dim, keepdims=True)
            y = np.subtract(x, m)
            exps = np.exp(y)
            y -= np.log(_sums_along(exps, dim))
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_arrays
        grad = grad.array
        grad_x = np.exp(y)  # softmax(x)
        grad_x *= grad.sum(axis=ctx.dim, keepdims=True)
        return Tensor._make(np.subtract(grad, grad_x, out=grad_x))


@fast.register("Gelu", "cpu")
class GeluKernel:
    @staticmethod
    def forward(ctx, x, approximate):
        ctx.approximate = approximate
        ctx.save_for_backward(x)
        rows = np.ascontiguousarray(x).reshape(-1)
        y, kept = np.empty_like(rows), np.empty_like(rows)
        in_two_halves(_gelu_tanh if approximate == "tanh" else _gelu_exact, rows, kept, y)
        ctx.save_for_kernel(kept)
        return y.reshape(x.shape)

    @staticmethod
    def backward(ctx, grad):
        (x,), (kept,) = ctx.saved_arrays, ctx.kernel_saved
        slope_into = _gelu_tanh_slope if ctx.approximate == "tanh" else _gelu_exact_slope

        def compute(x, kept, grad, out):
            slope_into(x, kept, out)
            out *= grad

        rows = x.reshape(-1) if x.flags.c_contiguous else x.ravel()
        out = np.empty_like(rows)
        in_two_halves(compute, rows, kept, np.ascontiguousarray(grad.array).reshape(-1), out)
        return Tensor._make(out.reshape(x.shape)), None


def _gelu_tanh(x, s, y):
    """s = sigmoid(2u) = (1 + tanh u) / 2, y = x s, written into s and y."""
    np.multiply(x, x, out=s)
    s *= -2.0 * SQRT_2_OVER_PI * GELU_TANH_C
    s -= 2.0 * SQRT_2_OVER_PI
    s *= x  # -2u = -2 sqrt(2/pi) (x + c x^3), the constants folded: one pass fewer
    with np.errstate(over="ignore"):  # e^-2u = inf gives s = 0: the right limit
        np.exp(s, out=s)
    s += 1.0
    np.divide(1.0, s, out=s)  # s = 1 / (1 + e^(-2u))
    np.multiply(x, s, out=y)


def _gelu_exact(x, cdf, y):
    """cdf = Phi(x), y = x Phi(x), written into cdf and y."""
    if x.dtype == np.float32:
        _normal_cdf_float32(x, cdf)
    else:
        cdf[...] = normal_cdf(x)  # float64: erf itself, to match PyTorch to round-off
    np.multiply(x, cdf, out=y)


def _gelu_tanh_slope(x, s, slope):
    """slope = s + 2x s (1 - s) u' from x and s = sigmoid(2u): dGELU/dx of the tanh form."""
    np.multiply(x, x, out=slope)
    slope *= 6.0 * GELU_TANH_C * SQRT_2_OVER_PI
    slope += 2.0 * SQRT_2_OVER_PI  # 2u'
    slope *= x
    slope *= s
    slope *= 1.0 - s
    slope += s


def _gelu_exact_slope(x, cdf, slope):
    """slope = Phi(x) + x phi(x) from x and cdf = Phi(x): dGELU/dx of the exact form."""
    np.multiply(x, x, out=slope)
    slope *= -0.5
    np.exp(slope, out=slope)
    slope *= INV_SQRT_2PI  # phi(x)
    slope *= x
    slope += cdf


# Phi on a grid, for float32: Phi(k h) for k h in [-16, 8], h = 2^-11. Between two grid
# points Phi is read off the straight line through them: error at most h^2/8 max|Phi''| =
# 7e-9 (Phi'' = -x phi(x), largest at x = 1), below float32's rounding of Phi itself (6e-8
# near 1); in the left tail, where Phi''/Phi ~ x^2, relative error 5e-6 at most. Beyond the
# grid, float32's Phi is 0 (below -16) or 1 (above 8).
_CDF_GRID_SHIFT = 11  # h = 2^-11: x * 2^11 is exact in floating point
_CDF_GRID_FIRST, _CDF_GRID_LAST = -16 << _CDF_GRID_SHIFT, 8 << _CDF_GRID_SHIFT
_CHUNK = 1 << 17  # values per pass: small temporaries, passes long enough for two threads


@functools.cache
def _cdf_grid() -> tuple[np.ndarray, np.ndarray]:
    """(Phi at each grid point but the last, the rise to the next point), float32, computed
    once in float64 from math.erfc: Phi(x) = erfc(-x / sqrt 2) / 2, which keeps every
    digit of the left tail."""
    h = 2.0**-_CDF_GRID_SHIFT
    cdf = np.array(
        [0.5 * math.erfc(-k * h / math.sqrt(2)) for k in range(_CDF_GRID_FIRST, _CDF_GRID_LAST + 1)]
    )
    return cdf[:-1].astype(np.float32), np.diff(cdf).astype(np.float32)


def _normal_cdf_float32(x: np.ndarray, out: np.ndarray) -> np.ndarray:
    """Phi(x) for float32 arrays by linear interpolation on the grid above, into ``out``
    (contiguous, x's shape). With u = x / h (exact): the grid point left of x is
    k = floor(u), and x lies the fraction u - k of the way to the next one, so
    Phi(x) ~ Phi(k h) + (u - k) rise(k)."""
    level, rise = _cdf_grid()
    flat_x, flat_out = x.reshape(-1), out.reshape(-1)
    u = np.empty(min(flat_x.size, _CHUNK), np.float32)
    k, at = np.empty_like(u), np.empty(u.shape, np.intp)
    # nan casts to int with an "invalid" warning: its row is 0 below, and Phi stays nan
    with np.errstate(invalid="ignore"):
        for start in range(0, flat_x.size, _CHUNK):
            xs, phi = flat_x[start : start + _CHUNK], flat_out[start : start + _CHUNK]
            us, ks, index = u[: xs.size], k[: xs.size], at[: xs.size]
            np.multiply(xs, np.float32(1 << _CDF_GRID_SHIFT), out=us)  # u = x / h
            np.clip(us, _CDF_GRID_FIRST, _CDF_GRID_LAST - 1, out=us)  # inf included
            np.floor(us, out=ks)
            us -= ks  # the fraction, in [0, 1)
            # the table row, cast to int by the ufunc (which releases the GIL)
            np.subtract(ks, np.float32(_CDF_GRID_FIRST), out=index, casting="unsafe")
            step = ks  # floor(u) is in index now: its buffer takes rise(k) (u - k)
            np.take(rise, index, out=step, mode="clip")
            step *= us
            np.take(level, index, out=phi, mode="clip")
            phi += step  # Phi(k h) + (u - k) rise(k)
    return out
