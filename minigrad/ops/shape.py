"""Ops that move values around without changing them: reshape, transpose, permute,
broadcast_to and its inverse sum_to.

Their backward undoes the move: the gradient of a reshape is reshaped back, of a transpose
transposed back. ``broadcast_to`` and ``sum_to`` are each other's backward, which is how every
broadcasting op sends gradients back to its inputs' shapes.
"""

from __future__ import annotations

from minigrad.autograd.function import Function
from minigrad.errors import ShapeError
from minigrad.ops._helpers import normalize_dim, sum_array_to, xp_of


class Reshape(Function):
    # y = x viewed as `shape`;  dL/dx = reshape(g, x.shape)
    @staticmethod
    def forward(ctx, x, shape):
        ctx.input_shape = x.shape
        return x.reshape(shape)

    @staticmethod
    def backward(ctx, grad):
        return Reshape.apply(grad, ctx.input_shape), None  # (the shape is known good)


class Permute(Function):
    # y = x with axes reordered;  dL/dx = g with the inverse order
    @staticmethod
    def forward(ctx, x, axes):
        ctx.axes = axes
        return xp_of(x).transpose(x, axes)

    @staticmethod
    def backward(ctx, grad):
        inverse = tuple(sorted(range(len(ctx.axes)), key=ctx.axes.__getitem__))
        # apply, not permute(): an inverse permutation needs none of permute's checks (19 of
        # the 56 backward nodes of a tiny GPT's step are permutes and reshapes)
        return Permute.apply(grad, inverse), None


class BroadcastTo(Function):
    # y = x repeated along broadcast dims;  dL/dx = sum of g over those dims
    @staticmethod
    def forward(ctx, x, shape):
        ctx.input_shape = x.shape
        return xp_of(x).broadcast_to(x, shape)

    @staticmethod
    def backward(ctx, grad):
        return sum_to(grad, ctx.input_shape), None


class SumTo(Function):
    # y = g summed over the dims that broadcasting added or stretched;  dL/dx = broadcast(g)
    @staticmethod
    def forward(ctx, x, shape):
        ctx.input_shape = x.shape
        return sum_array_to(x, shape)

    @staticmethod
    def backward(ctx, grad):
        return broadcast_to(grad, ctx.input_shape), None


# -- the public functions ------------------------------------------------------------------


def reshape(x, *shape):
    shape = _shape_arg(shape)
    if -1 in shape or tuple(shape) != x.shape:
        return Reshape.apply(x, tuple(shape))
    return x


def permute(x, *dims):
    dims = tuple(normalize_dim(d, x.ndim, "permute") for d in _shape_arg(dims))
    if sorted(dims) != list(range(x.ndim)):
        raise ShapeError(f"permute: {dims} is not a permutation of the {x.ndim} dims of {x.shape}")
    return Permute.apply(x, dims)


def transpose(x, dim0: int, dim1: int):
    dim0, dim1 = normalize_dim(dim0, x.ndim, "transpose"), normalize_dim(dim1, x.ndim, "transpose")
    axes = list(range(x.ndim))
    axes[dim0], axes[dim1] = axes[dim1], axes[dim0]
    return Permute.apply(x, tuple(axes))


def broadcast_to(x, shape):
    shape = tuple(shape)
    return x if x.shape == shape else BroadcastTo.apply(x, shape)


def sum_to(x, shape):
    """Sum ``x`` down to ``shape`` (None, for a Python-number input, gives None)."""
    if shape is None:
        return None
    shape = tuple(shape)
    return x if x.shape == shape else SumTo.apply(x, shape)


def unsqueeze(x, dim: int):
    dim = normalize_dim(dim, x.ndim + 1, "unsqueeze")
    return reshape(x, x.shape[:dim] + (1,) + x.shape[dim:])


def squeeze(x, dim=None):
    if dim is None:
        return reshape(x, tuple(s for s in x.shape if s != 1))
    dims = (dim,) if isinstance(dim, int) else dim
    dims = {normalize_dim(d, x.ndim, "squeeze") for d in dims}
    return reshape(x, tuple(s for i, s in enumerate(x.shape) if not (i in dims and s == 1)))


def flatten(x, start_dim: int = 0, end_dim: int = -1):
    if x.ndim == 0:
        return reshape(x, (1,))
    start = normalize_dim(start_dim, x.ndim, "flatten")
    end = normalize_dim(end_dim, x.ndim, "flatten")
    size = 1
    for s in x.shape[start : end + 1]:
        size *= s
    return reshape(x, x.shape[:start] + (size,) + x.shape[end + 1 :])


def _shape_arg(shape) -> tuple:
    """Accept both f(2, 3) and f((2, 3))."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        return tuple(shape[0])
    return tuple(shape)
