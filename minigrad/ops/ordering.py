"""Ops that order values: ``max`` / ``min`` along a dim (values and indices), ``argmax`` /
``argmin``, ``topk``, ``sort``, ``argsort``, and the picking op they share, ``gather``
(``take_along_dim``).

Each of them finds indices first (no gradient: an index is an integer), then picks the
values at those indices with ``TakeAlongDim``. Its backward sends each value's gradient back
to the place it was picked from, into zeros of the input's shape (``PutAlongDim``), so a
maximum's gradient goes to the one entry that was the maximum, as in PyTorch.
"""

from __future__ import annotations

import numpy as np

from minigrad.autograd.function import Function
from minigrad.backend import as_array, index_add
from minigrad.ops._helpers import normalize_dim, xp_of
from minigrad.ops.conversion import MaxResult
from minigrad.ops.pointwise import maximum, minimum
from minigrad.ops.reduce import amax, amin, keep
from minigrad.ops.shape import reshape, squeeze
from minigrad.tensor import Tensor


class TakeAlongDim(Function):
    # y = x picked along dim at index: y[..., i, ...] = x[..., index[..., i, ...], ...];
    # dL/dx = zeros of x's shape with g added where each value came from (repeats add up)
    @staticmethod
    def forward(ctx, x, index, dim):
        ctx.input_shape, ctx.index, ctx.dim = x.shape, index, dim
        # (gather's index may be smaller than x in the other dims: the leading part of x)
        leading = tuple(
            slice(0, n) if axis != dim else slice(None) for axis, n in enumerate(index.shape)
        )
        return xp_of(x).take_along_axis(x[leading], index, axis=dim)

    @staticmethod
    def backward(ctx, grad):
        return PutAlongDim.apply(grad, ctx.index, ctx.dim, ctx.input_shape), None, None


class PutAlongDim(Function):
    # y = zeros(shape) with values added along dim at index;  dL/dvalues = g picked at index
    @staticmethod
    def forward(ctx, values, index, dim, shape):
        ctx.index, ctx.dim = index, dim
        xp = xp_of(values)
        out = xp.zeros(shape, dtype=values.dtype)
        # the full position of each value: index along dim, its own position along the others
        ndim = index.ndim
        where = tuple(
            index
            if axis == dim
            else xp.arange(n).reshape([-1 if a == axis else 1 for a in range(ndim)])
            for axis, n in enumerate(index.shape)
        )
        index_add(out, where, values)
        return out

    @staticmethod
    def backward(ctx, grad):
        return TakeAlongDim.apply(grad, ctx.index, ctx.dim), None, None, None


def _indices(x, array) -> Tensor:
    return Tensor._make(as_array(array, (x.array,)).astype(np.int64, copy=False))


def _check_reducible(x, op: str, dim: int) -> None:
    if x.ndim and x.shape[dim] == 0:
        raise IndexError(
            f"{op}(): Expected reduction dim {dim} to have non-zero size (tensor of shape "
            f"{x.shape})"
        )


def _along(x, dim, op: str):
    """x with at least one dim (a 0-d tensor as shape (1,)) and ``dim`` as an axis of it."""
    dim = normalize_dim(dim, x.ndim, op)
    _check_reducible(x, op, dim)
    return _at_least_1d(x), dim


def _picked(x, flat, indices, dim, keepdim, scalar):
    """The values of ``flat`` at ``indices`` along dim, both as (values, indices), with dim
    dropped unless ``keepdim``; shape () for a 0-d input."""
    values, indices = TakeAlongDim.apply(flat, indices, dim), _indices(x, indices)
    if scalar:
        return MaxResult(reshape(values, ()), reshape(indices, ()))
    if not keepdim:
        return MaxResult(squeeze(values, dim), squeeze(indices, dim))
    return MaxResult(values, indices)


def _extreme(x, dim, keepdim, op: str, find):
    flat, axis = _along(x, dim, op)
    return _picked(x, flat, find(flat.array, axis=axis, keepdims=True), axis, keepdim, x.ndim == 0)


def max(input, dim=None, keepdim=False, *, keepdims=None):  # noqa: A001, A002  (PyTorch's)
    """max(x): the largest value (ties share the gradient); max(x, dim, keepdim=False): the
    named tuple (values, indices) along dim; max(x, other): the elementwise maximum."""
    if isinstance(dim, Tensor):
        return maximum(input, dim)
    if dim is None:
        _check_whole(input, "max")
        return amax(input)
    return _extreme(input, dim, keep(keepdim, keepdims), "max", xp_of(input.array).argmax)


def min(input, dim=None, keepdim=False, *, keepdims=None):  # noqa: A001, A002
    """min(x), min(x, dim, keepdim=False) -> (values, indices), min(x, other): as ``max``."""
    if isinstance(dim, Tensor):
        return minimum(input, dim)
    if dim is None:
        _check_whole(input, "min")
        return amin(input)
    return _extreme(input, dim, keep(keepdim, keepdims), "min", xp_of(input.array).argmin)


def _check_whole(x, op: str) -> None:
    if x.numel() == 0:
        raise RuntimeError(
            f"{op}(): Expected reduction dim to be specified for input.numel() == 0 (tensor "
            f"of shape {x.shape}). Specify the reduction dim with the 'dim' argument."
        )


def argmax(input, dim=None, keepdim=False):  # noqa: A002
    """The index of the largest value: in the flattened tensor (dim=None), or along dim."""
    return _arg_extreme(input, dim, keepdim, "argmax", xp_of(input.array).argmax)


def argmin(input, dim=None, keepdim=False):  # noqa: A002
    """The index of the smallest value: in the flattened tensor (dim=None), or along dim."""
    return _arg_extreme(input, dim, keepdim, "argmin", xp_of(input.array).argmin)


def _arg_extreme(x, dim, keepdim, op: str, find):
    if dim is None:
        _check_whole(x, op)
        return _indices(x, find(x.array, axis=None, keepdims=bool(keepdim)))
    flat, axis = _along(x, dim, op)
    found = find(flat.array, axis=axis, keepdims=bool(keepdim))
    return _indices(x, found.reshape(()) if x.ndim == 0 else found)


def _argsort(array, axis: int, descending: bool):
    """Indices that sort ``array`` along axis, ties kept in their order (a stable sort);
    NaN counts as the largest value, as in PyTorch."""
    xp = xp_of(array)
    if not descending:
        return xp.argsort(array, axis=axis, kind="stable")
    # sorting the reversed array and reversing the result gives descending order with ties
    # still in their first order; n - 1 - i maps a position in the reversed array back
    ascending_of_reversed = xp.argsort(xp.flip(array, axis), axis=axis, kind="stable")
    return (array.shape[axis] - 1) - xp.flip(ascending_of_reversed, axis)


def _at_least_1d(x):
    return reshape(x, (1,)) if x.ndim == 0 else x


def sort(input, dim=-1, descending=False, stable=False):  # noqa: A002
    """The values along dim in order, and where each came from: (values, indices). The
    sort is always stable (``stable`` is accepted for PyTorch's signature)."""
    axis = normalize_dim(dim, input.ndim, "sort")
    flat = _at_least_1d(input)
    order = _argsort(flat.array, axis, descending)
    return _picked(input, flat, order, axis, True, input.ndim == 0)


def argsort(input, dim=-1, descending=False, stable=False):  # noqa: A002
    """The indices that sort ``input`` along dim (the indices of ``sort``)."""
    return sort(input, dim, descending, stable).indices


def topk(input, k: int, dim=-1, largest=True, sorted=True):  # noqa: A001, A002
    """The k largest (or, with largest=False, smallest) values along dim, largest first,
    and their indices: (values, indices). Values are always returned sorted."""
    axis = normalize_dim(dim, input.ndim, "topk")
    flat = _at_least_1d(input)
    if not 0 <= k <= flat.shape[axis]:
        raise RuntimeError(
            f"topk: selected index k out of range: k = {k} for dim {dim} of size "
            f"{flat.shape[axis]} (tensor of shape {input.shape})"
        )
    order = _argsort(flat.array, axis, descending=largest)
    first_k = order[(slice(None),) * axis + (slice(0, k),)]
    return _picked(input, flat, first_k, axis, True, input.ndim == 0)


def gather(input, dim: int, index):  # noqa: A002
    """out[i][j] = input[i][index[i][j]] for dim=1 (and so on for other dims): values picked
    along dim at an int64 index of input's number of dims; differentiable in input."""
    return _take_along(input, index, dim, "gather")


def take_along_dim(input, indices, dim: int):  # noqa: A002
    """``gather`` with PyTorch's other argument order (indices, dim)."""
    return _take_along(input, indices, dim, "take_along_dim")


def _take_along(x, index, dim, op: str):
    if not isinstance(index, Tensor) or index.dtype != np.int64:
        kind = index.dtype if isinstance(index, Tensor) else type(index).__name__
        raise RuntimeError(f"{op}(): Expected dtype int64 for index, got {kind}")
    axis = normalize_dim(dim, x.ndim, op)
    if index.ndim != x.ndim:
        raise RuntimeError(
            f"{op}(): Index tensor must have the same number of dimensions as input tensor "
            f"(index {index.shape}, input {x.shape})"
        )
    if any(n > size for a, (n, size) in enumerate(zip(index.shape, x.shape)) if a != axis):
        raise RuntimeError(
            f"{op}(): Size does not match: index {index.shape} is larger than input "
            f"{x.shape} in a dim other than {axis}"
        )
    if index.numel() and not (
        0 <= int(index.array.min()) and int(index.array.max()) < x.shape[axis]
    ):
        raise RuntimeError(
            f"{op}(): index out of bounds: values from {int(index.array.min())} to "
            f"{int(index.array.max())} for dim {axis} of size {x.shape[axis]}"
        )
    return TakeAlongDim.apply(x, index.array, axis)
