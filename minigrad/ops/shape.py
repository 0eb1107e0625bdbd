"""Ops that move values around without changing them: reshape, transpose, permute,
broadcast_to and its inverse sum_to, flip, roll, repeat.

Their backward undoes the move: the gradient of a reshape is reshaped back, of a transpose
transposed back, of a flip flipped back, of a roll rolled back; a repeat's copies each
send their gradient back, summed. ``broadcast_to`` and ``sum_to`` are each other's
backward, which is how every broadcasting op sends gradients back to its inputs' shapes.
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
        # apply, not permute(): an inverse permutation needs none of permute's checks
        return Permute.apply(grad, inverse_permutation(ctx.axes)), None


def inverse_permutation(axes: tuple) -> tuple:
    """The axes that undo ``axes``: where each axis went (permuting by one, then the other,
    gives the identity)."""
    return tuple(sorted(range(len(axes)), key=axes.__getitem__))


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


class Flip(Function):
    # y = x reversed along dims;  dL/dx = g reversed along the same dims
    @staticmethod
    def forward(ctx, x, dims):
        ctx.dims = dims
        return xp_of(x).flip(x, dims)

    @staticmethod
    def backward(ctx, grad):
        return Flip.apply(grad, ctx.dims), None


class Roll(Function):
    # y = x shifted cyclically by `shifts` along dims;  dL/dx = g shifted back by -shifts
    @staticmethod
    def forward(ctx, x, shifts, dims):
        ctx.shifts, ctx.dims = shifts, dims
        return xp_of(x).roll(x, shifts, dims)

    @staticmethod
    def backward(ctx, grad):
        back = tuple(-s for s in ctx.shifts) if isinstance(ctx.shifts, tuple) else -ctx.shifts
        return Roll.apply(grad, back, ctx.dims), None, None


class Repeat(Function):
    # y = x tiled r_i times along each dim i;  dL/dx = the sum of g over the r_i copies:
    # g viewed as (r_0, s_0, r_1, s_1, ...) and summed over the r axes
    @staticmethod
    def forward(ctx, x, repeats):
        ctx.input_shape, ctx.repeats = x.shape, repeats
        return xp_of(x).tile(x, repeats)

    @staticmethod
    def backward(ctx, grad):
        sizes = (1,) * (len(ctx.repeats) - len(ctx.input_shape)) + ctx.input_shape
        pairs = tuple(n for pair in zip(ctx.repeats, sizes) for n in pair)
        copies = tuple(range(0, 2 * len(sizes), 2))
        return reshape(reshape(grad, pairs).sum(dim=copies), ctx.input_shape), None


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


def flip(x, *dims):
    """x reversed along ``dims`` (a tuple, or ints as separate arguments)."""
    axes = tuple(normalize_dim(d, x.ndim, "flip") for d in _shape_arg(dims))
    if len(set(axes)) != len(axes):
        raise RuntimeError(f"flip: dims {_shape_arg(dims)} has a dim more than once")
    return Flip.apply(x, axes if x.ndim else ())


def roll(x, shifts, dims=None):
    """x shifted cyclically: entry i moves to i + shifts along dims (wrapping around); with
    dims=None the flattened tensor is rolled and the shape kept, as in PyTorch."""
    if dims is None:
        if not isinstance(shifts, int):
            (shifts,) = shifts  # one shift for the flattened tensor
        return reshape(Roll.apply(reshape(x, (-1,)), int(shifts), 0), x.shape)
    shifts = (shifts,) if isinstance(shifts, int) else tuple(shifts)
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    if len(shifts) != len(dims):
        raise RuntimeError(
            f"roll: shifts and dimensions must align. shifts: {len(shifts)}, dims: {len(dims)}"
        )
    return Roll.apply(x, shifts, tuple(normalize_dim(d, x.ndim, "roll") for d in dims))


def repeat(x, *sizes):
    """x tiled ``sizes[i]`` times along each dim (PyTorch's Tensor.repeat, NumPy's tile);
    more sizes than dims add leading dims."""
    sizes = _shape_arg(sizes)
    if len(sizes) < x.ndim:
        raise RuntimeError(
            f"repeat: number of dimensions of repeat dims ({len(sizes)}) can not be smaller "
            f"than number of dimensions of tensor ({x.ndim}, shape {x.shape})"
        )
    if any(s < 0 for s in sizes):
        raise RuntimeError(f"repeat: repeats can not be negative, got {sizes}")
    return Repeat.apply(x, tuple(int(s) for s in sizes))


def expand(x, *shape):
    """x broadcast to ``shape`` without copying; -1 keeps a dim's size, as in PyTorch."""
    shape = _shape_arg(shape)
    lead = len(shape) - x.ndim
    if any(s == -1 for s in shape[: max(lead, 0)]):
        raise ShapeError(f"expand: -1 is not allowed in a new leading dim, got {shape}")
    full = tuple(s if s != -1 else x.shape[i - lead] for i, s in enumerate(shape))
    if lead < 0 or any(s != n and s != 1 for s, n in zip(x.shape, full[lead:])):
        raise ShapeError(f"expand: cannot expand a tensor of shape {x.shape} to {full}")
    return broadcast_to(x, full)


def _shape_arg(shape) -> tuple:
    """Accept both f(2, 3) and f((2, 3))."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        return tuple(shape[0])
    return tuple(shape)
