"""Reductions: sum, mean, var / std, amax / amin, norm, logsumexp, the running sum cumsum,
and the truth tests all / any (no gradient).

Each backward broadcasts the upstream gradient back over the reduced dims (that is what
``_spread`` does: put the reduced dims back as size 1, then broadcast), times the local
derivative of the reduction.

Every reduction takes ``keepdim=`` and, as PyTorch does, its NumPy spelling ``keepdims=``.
"""

from __future__ import annotations

import math

from minigrad.autograd.function import Function
from minigrad.autograd.grad_mode import is_grad_enabled, no_grad
from minigrad.backend import as_array
from minigrad.ops._helpers import count_in, kept_shape, normalize_dim, normalize_dims, xp_of
from minigrad.ops.shape import broadcast_to, flip, reshape, squeeze
from minigrad.tensor import Tensor


def _spread(grad, input_shape, dims, count=None):
    """Undo a reduction's shape: (B, d) summed over d -> (B,) -> (B, 1) -> (B, d), then
    divided by ``count`` if one is given (a mean's n)."""
    kept = kept_shape(input_shape, dims)
    if is_grad_enabled():  # create_graph: by ops, so that the spread is differentiable too
        spread = broadcast_to(reshape(grad, kept), input_shape)
        return spread if count is None else spread / count
    # on arrays: a new array written in one pass (at 8x8, 0.2 against 5 us for the two ops
    # and their view, which a leaf's .grad would then copy)
    spread = xp_of(grad.array).empty(input_shape, grad.dtype)
    spread[...] = grad.array.reshape(kept)
    if count is not None:
        spread /= count
    return Tensor._make(spread)


class Sum(Function):
    # y = sum_i x_i;  dL/dx_i = g
    @staticmethod
    def forward(ctx, x, dims, keepdim):
        ctx.input_shape, ctx.dims = x.shape, dims
        return x.sum(axis=dims, keepdims=keepdim)

    @staticmethod
    def backward(ctx, grad):
        return _spread(grad, ctx.input_shape, ctx.dims), None, None


class Mean(Function):
    # y = (1/n) sum_i x_i;  dL/dx_i = g / n
    @staticmethod
    def forward(ctx, x, dims, keepdim):
        ctx.input_shape, ctx.dims = x.shape, dims
        return x.mean(axis=dims, keepdims=keepdim)

    @staticmethod
    def backward(ctx, grad):
        count = count_in(ctx.input_shape, ctx.dims)
        return _spread(grad, ctx.input_shape, ctx.dims, count), None, None


class Var(Function):
    # y = sum_i (x_i - mean)^2 / (n - correction);  dL/dx_i = g * 2 (x_i - mean) / (n - correction)
    @staticmethod
    def forward(ctx, x, dims, correction, keepdim):
        ctx.input_shape, ctx.dims, ctx.correction = x.shape, dims, correction
        ctx.save_for_backward(x)
        return x.var(axis=dims, ddof=correction, keepdims=keepdim)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        centered = x - x.mean(dim=ctx.dims, keepdim=True)
        dof = count_in(ctx.input_shape, ctx.dims) - ctx.correction
        scale = 2.0 / dof if dof > 0 else math.nan  # var itself is nan there (as in PyTorch)
        return _spread(grad, ctx.input_shape, ctx.dims) * centered * scale, None, None, None


class Amax(Function):
    # y = max_i x_i;  dL/dx_i = g / k at the k entries equal to the max, else 0
    # (ties share the gradient evenly, as in PyTorch's amax)
    @staticmethod
    def forward(ctx, x, dims, keepdim):
        ctx.input_shape, ctx.dims = x.shape, dims
        y = x.max(axis=dims, keepdims=True)
        is_max = x == y
        ctx.save_for_backward(is_max / is_max.sum(axis=dims, keepdims=True).astype(x.dtype))
        return y if keepdim else y.reshape(tuple(s for i, s in enumerate(x.shape) if i not in dims))

    @staticmethod
    def backward(ctx, grad):
        (share,) = ctx.saved_tensors
        return _spread(grad, ctx.input_shape, ctx.dims) * share, None, None


class Norm(Function):
    # y = (sum_i |x_i|^p)^(1/p);  dL/dx_i = g * sign(x_i) |x_i|^(p-1) / y^(p-1),
    # for p = 2: g * x_i / y;  0 where y = 0 (as in PyTorch).  p = inf: y = max_i |x_i|, and
    # g * sign(x_i) / k at the k entries where |x_i| = y.  y keeps the reduced dims (as size
    # 1): the saved y is then the output itself, so that backward is differentiable in it too
    @staticmethod
    def forward(ctx, x, p, dims):
        ctx.input_shape, ctx.dims, ctx.p = x.shape, dims, p
        xp = xp_of(x)
        if p == math.inf:
            y = xp.abs(x).max(axis=dims, keepdims=True)
        elif p == 2:
            y = xp.sqrt((x * x).sum(axis=dims, keepdims=True))
        else:
            y = (xp.abs(x) ** p).sum(axis=dims, keepdims=True) ** (1.0 / p)
        ctx.save_for_backward(x, y)
        return y

    @staticmethod
    def backward(ctx, grad):
        x, y = ctx.saved_tensors
        upstream = _spread(grad, ctx.input_shape, ctx.dims)
        nonzero = y.array != 0
        if ctx.p == math.inf:
            at_max = (x.abs() == y).to(x.dtype)
            share = at_max / at_max.sum(dim=ctx.dims, keepdim=True)
            return upstream * x.sign() * share, None, None
        safe_y = y + Tensor._make(~nonzero).to(y.dtype)  # 1 where y = 0: no 0/0 there
        if ctx.p == 2:
            local = x / safe_y
        else:
            local = x.sign() * x.abs() ** (ctx.p - 1) / safe_y ** (ctx.p - 1)
        return upstream * local * Tensor._make(nonzero), None, None


class Cumsum(Function):
    # y_i = sum_{j <= i} x_j along dim;  dL/dx_j = sum_{i >= j} g_i: the running sum of g
    # taken from the far end
    @staticmethod
    def forward(ctx, x, dim):
        ctx.dim = dim
        return xp_of(x).cumsum(x, axis=dim)

    @staticmethod
    def backward(ctx, grad):
        return flip(Cumsum.apply(flip(grad, ctx.dim), ctx.dim), ctx.dim), None


# -- the public functions ------------------------------------------------------------------


def keep(keepdim: bool, keepdims) -> bool:
    """``keepdims=`` (NumPy's spelling, which PyTorch accepts too) overrides ``keepdim=``."""
    return bool(keepdim if keepdims is None else keepdims)


def _reduced_shape(shape: tuple, dims: tuple) -> tuple:
    return tuple(size for axis, size in enumerate(shape) if axis not in dims)


def sum(x, dim=None, keepdim=False, *, dtype=None, keepdims=None):  # noqa: A001
    """Sum over ``dim`` (None: all); bool and integer tensors sum to int64, as in PyTorch."""
    if dtype is not None:
        x = x.to(dtype)
    elif x.dtype.kind in "biu":
        x = x.long()
    return Sum.apply(x, normalize_dims(dim, x.ndim), keep(keepdim, keepdims))


def mean(x, dim=None, keepdim=False, *, dtype=None, keepdims=None):
    if dtype is not None:
        x = x.to(dtype)
    if x.dtype.kind not in "fc":
        raise RuntimeError(
            f"mean(): could not infer output dtype. Input dtype must be either a floating "
            f"point or complex dtype. Got: {x.dtype} (convert with .float() first)"
        )
    return Mean.apply(x, normalize_dims(dim, x.ndim), keep(keepdim, keepdims))


def var(x, dim=None, unbiased=True, keepdim=False, *, correction=None, keepdims=None):
    """The variance over ``dim``, divided by n - correction (correction 1 unless
    ``unbiased=False`` or ``correction=`` says otherwise)."""
    correction = (1 if unbiased else 0) if correction is None else correction
    return Var.apply(x, normalize_dims(dim, x.ndim), correction, keep(keepdim, keepdims))


def std(x, dim=None, unbiased=True, keepdim=False, *, correction=None, keepdims=None):
    """sqrt of ``var`` with the same arguments."""
    return var(x, dim, unbiased, keepdim, correction=correction, keepdims=keepdims).sqrt()


def amax(x, dim=None, keepdim=False, *, keepdims=None):
    """The largest value over ``dim`` (None: all); ties share the gradient evenly."""
    dims = normalize_dims(dim, x.ndim)
    if x.numel() == 0 and 0 in [x.shape[d] for d in dims or range(x.ndim)]:
        raise RuntimeError(f"amax: cannot reduce over a dim of size 0 (tensor of shape {x.shape})")
    return Amax.apply(x, dims, keep(keepdim, keepdims))


def amin(x, dim=None, keepdim=False, *, keepdims=None):
    """The smallest value over ``dim``: -amax(-x)."""
    if x.numel() == 0:
        raise RuntimeError(f"amin: cannot reduce over a dim of size 0 (tensor of shape {x.shape})")
    return -amax(-x, dim, keepdim, keepdims=keepdims)


def norm(x, p="fro", dim=None, keepdim=False, dtype=None):
    """The p-norm over ``dim`` (None: all entries): p = 2 or "fro" (sqrt of the sum of
    squares, the default), any p > 0, or inf (the largest |x|)."""
    if dtype is not None:
        x = x.to(dtype)
    if x.dtype.kind not in "fc":
        raise RuntimeError(f"norm: expected a floating point tensor, got dtype {x.dtype}")
    if p in ("fro", None):
        p = 2
    if isinstance(p, str) or not p > 0:
        raise ValueError(f"norm: p must be 'fro', a positive number or inf, got {p!r}")
    dims = normalize_dims(dim, x.ndim)
    y = Norm.apply(x, float(p), dims)
    return y if keepdim else reshape(y, _reduced_shape(x.shape, dims))


def logsumexp(x, dim, keepdim=False, *, keepdims=None):
    """log(sum(exp(x))) over ``dim``, computed stably: m + log(sum(exp(x - m))) with m the
    max (a constant, so the gradient is softmax(x) alone)."""
    dims = normalize_dims(dim, x.ndim)
    with no_grad():
        m = amax(x, dims, keepdim=True)
        m = m.masked_fill(m.abs() == math.inf, 0.0)  # all -inf (or an inf) along a row
    y = (x - m).exp().sum(dims, keepdim=True).log() + m
    return y if keep(keepdim, keepdims) else squeeze(y, dims)


def cumsum(x, dim: int, *, dtype=None):
    """The running sum along ``dim``; bool and integer tensors sum in int64, as in PyTorch."""
    if dtype is not None:
        x = x.to(dtype)
    elif x.dtype.kind in "biu":
        x = x.long()
    return Cumsum.apply(x, normalize_dim(dim, x.ndim, "cumsum"))


def all(x, dim=None, keepdim=False, *, keepdims=None):  # noqa: A001
    """True where every value along ``dim`` (None: all) is nonzero; a bool tensor, no gradient."""
    dims = normalize_dims(dim, x.ndim)
    return Tensor._make(
        as_array(x.array.all(axis=dims, keepdims=keep(keepdim, keepdims)), (x.array,))
    )


def any(x, dim=None, keepdim=False, *, keepdims=None):  # noqa: A001
    """True where some value along ``dim`` (None: all) is nonzero; a bool tensor, no gradient."""
    dims = normalize_dims(dim, x.ndim)
    return Tensor._make(
        as_array(x.array.any(axis=dims, keepdims=keep(keepdim, keepdims)), (x.array,))
    )
