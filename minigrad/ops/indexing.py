"""Picking and joining: ``t[index]``, ``cat``, ``stack``, ``split``, ``chunk``, ``where``,
``masked_fill``.

The backward of ``t[index]`` puts the gradient back where the values came from, into zeros
of t's shape. With an integer array as index the same entry can be picked twice
(``emb[[3, 3]]``); its gradient is then the sum of both, which ``index_add`` accumulates
(plain ``+=`` would keep only one of them).
"""

from __future__ import annotations

import numpy as np

from minigrad.autograd.function import Function
from minigrad.backend import index_add, is_numpy, to_numpy
from minigrad.errors import OutOfRangeError, ShapeError
from minigrad.ops._helpers import normalize_dim, shape_of, xp_of
from minigrad.ops.shape import sum_to, unsqueeze


def _has_integer_array(index) -> bool:
    """True if the index picks by integer arrays, so the same entry may be picked twice."""
    items = index if isinstance(index, tuple) else (index,)
    for item in items:
        kind = getattr(getattr(item, "dtype", None), "kind", None)
        if kind in ("i", "u") or (
            isinstance(item, list) and not all(isinstance(v, bool) for v in item)
        ):
            return True
    return False


class GetItem(Function):
    # y = x[index];  dL/dx = zeros with g added at index (repeats accumulate)
    @staticmethod
    def forward(ctx, x, index):
        ctx.input_shape, ctx.index = x.shape, index
        try:
            return x[index]
        except IndexError as error:
            raise _out_of_range(index, x.shape, error) from None

    @staticmethod
    def backward(ctx, grad):
        return ScatterAdd.apply(grad, ctx.index, ctx.input_shape), None


class ScatterAdd(Function):
    # y = zeros(shape); y[index] += g;  the backward of GetItem, and GetItem is its backward
    @staticmethod
    def forward(ctx, values, index, shape):
        ctx.index = index
        out = xp_of(values).zeros(shape, dtype=values.dtype)
        if _has_integer_array(index):
            index_add(out, index, values)
        else:
            out[index] = values
        return out

    @staticmethod
    def backward(ctx, grad):
        return GetItem.apply(grad, ctx.index), None, None


class Cat(Function):
    # y = [x_1, x_2, ...] joined along dim;  dL/dx_i = the slice of g where x_i went
    @staticmethod
    def forward(ctx, *arrays, dim):
        ctx.dim = dim
        ctx.sizes = [a.shape[dim] for a in arrays]
        return xp_of(arrays[0]).concatenate(arrays, axis=dim)

    @staticmethod
    def backward(ctx, grad):
        grads, start = [], 0
        for size in ctx.sizes:
            index = (slice(None),) * ctx.dim + (slice(start, start + size),)
            grads.append(grad[index])
            start += size
        return tuple(grads)


class Where(Function):
    # y = a where cond else b;  dL/da = g where cond,  dL/db = g where not cond
    @staticmethod
    def forward(ctx, cond, a, b):
        ctx.shapes = shape_of(a), shape_of(b)
        ctx.save_for_backward(cond)
        xp = xp_of(cond)
        dtype = _result_dtype(a, b)
        return xp.where(cond, a, b).astype(dtype, copy=False)

    @staticmethod
    def backward(ctx, grad):
        (cond,) = ctx.saved_tensors
        shape_a, shape_b = ctx.shapes
        grad_a = sum_to(where(cond, grad, 0.0), shape_a) if ctx.needs_input_grad[1] else None
        grad_b = sum_to(where(cond, 0.0, grad), shape_b) if ctx.needs_input_grad[2] else None
        return None, grad_a, grad_b


def _result_dtype(a, b):
    """A Python number takes the dtype of the array beside it (no upcasting to float64)."""
    import numpy as np

    if hasattr(a, "dtype") and hasattr(b, "dtype"):
        return np.result_type(a.dtype, b.dtype)
    if hasattr(a, "dtype"):
        return a.dtype if a.dtype.kind == "f" or isinstance(b, (bool, int)) else np.float32
    if hasattr(b, "dtype"):
        return b.dtype if b.dtype.kind == "f" or isinstance(a, (bool, int)) else np.float32
    return np.float32


def _out_of_range(index, shape, error) -> OutOfRangeError:
    return OutOfRangeError(
        f"index out of range: {_describe(index)} on a tensor of shape {shape} ({error})"
    )


def _describe(index) -> str:
    items = index if isinstance(index, tuple) else (index,)
    parts = []
    for item in items:
        if hasattr(item, "shape") and getattr(item, "size", 2) > 8:
            parts.append(f"array of shape {tuple(item.shape)}, min {item.min()}, max {item.max()}")
        else:
            parts.append(repr(item.tolist() if hasattr(item, "tolist") else item))
    return "[" + ", ".join(parts) + "]"


# -- the public functions ------------------------------------------------------------------


def getitem(x, index):
    index = _raw_index(index)
    if not is_numpy(x.array):
        _check_bounds_on_cpu(index, x.shape)
        index = _index_on_gpu(index, xp_of(x.array))
    return GetItem.apply(x, index)


def _check_bounds_on_cpu(index, shape):
    """CuPy wraps an out-of-range integer array index around where NumPy raises, and words its
    errors differently: try the index on a NumPy stand-in of the same shape (one zero-stride
    element, no copy of the data) so that a GPU tensor raises the same error as a CPU one."""
    stand_in = np.broadcast_to(np.zeros((), dtype=np.int8), shape)
    try:
        stand_in[_index_on_cpu(index)]
    except IndexError as error:
        raise _out_of_range(index, shape, error) from None


def _index_on_cpu(index):
    """GPU arrays inside an index as NumPy arrays."""
    if isinstance(index, tuple):
        return tuple(_index_on_cpu(item) for item in index)
    if hasattr(index, "shape") and not is_numpy(index):
        return to_numpy(index)
    return index


def _index_on_gpu(index, xp):
    """NumPy arrays and lists inside an index as CuPy arrays (CuPy takes no NumPy index)."""
    if isinstance(index, tuple):
        return tuple(_index_on_gpu(item, xp) for item in index)
    if isinstance(index, (list, np.ndarray)):
        return xp.asarray(index)
    return index


def _raw_index(index):
    """Turn Tensors inside an index into arrays (an index gets no gradient)."""
    if isinstance(index, tuple):
        return tuple(_raw_index(item) for item in index)
    if hasattr(index, "data") and hasattr(index, "grad_fn"):
        return index.array
    return index


def cat(tensors, dim: int = 0):
    tensors = list(tensors)
    if not tensors:
        raise ValueError("cat: expected a non-empty sequence of tensors")
    ndim = tensors[0].ndim
    dim = normalize_dim(dim, ndim, "cat")
    for t in tensors:
        if t.ndim != ndim or any(
            a != b for i, (a, b) in enumerate(zip(t.shape, tensors[0].shape)) if i != dim
        ):
            shapes = ", ".join(str(x.shape) for x in tensors)
            raise ShapeError(f"cat: shapes {shapes} must match except in dim {dim}")
    return Cat.apply(*tensors, dim=dim)


def stack(tensors, dim: int = 0):
    tensors = list(tensors)
    if not tensors:
        raise ValueError("stack: expected a non-empty sequence of tensors")
    shapes = {t.shape for t in tensors}
    if len(shapes) > 1:
        raise ShapeError(f"stack: all tensors must have the same shape, got {sorted(shapes)}")
    dim = normalize_dim(dim, tensors[0].ndim + 1, "stack")
    return cat([unsqueeze(t, dim) for t in tensors], dim)


def split(x, split_size_or_sections, dim: int = 0):
    """Pieces of ``split_size`` along dim (the last may be smaller), or of the given sizes."""
    dim = normalize_dim(dim, x.ndim, "split")
    length = x.shape[dim]
    if isinstance(split_size_or_sections, int):
        step = split_size_or_sections
        if step <= 0:
            raise ValueError(f"split: split_size must be a positive integer, got {step}")
        sizes = [min(step, length - start) for start in range(0, length, step)]
    else:
        sizes = list(split_size_or_sections)
        if sum(sizes) != length:
            raise ShapeError(
                f"split: sizes {sizes} do not add up to {length} (dim {dim} of {x.shape})"
            )
    pieces, start = [], 0
    for size in sizes:
        pieces.append(getitem(x, (slice(None),) * dim + (slice(start, start + size),)))
        start += size
    return tuple(pieces)


def chunk(x, chunks: int, dim: int = 0):
    if chunks <= 0:
        raise ValueError(f"chunk: chunks must be a positive integer, got {chunks}")
    length = x.shape[normalize_dim(dim, x.ndim, "chunk")]
    return split(x, -(-length // chunks), dim)


def where(cond, a, b):
    return Where.apply(cond, a, b)


def masked_fill(x, mask, value):
    """x with ``value`` wherever ``mask`` (bool, broadcastable to x) is True."""
    if tuple(mask.shape) != x.shape:
        import numpy as np

        try:
            np.broadcast_shapes(tuple(mask.shape), x.shape)
        except ValueError:
            raise ShapeError(
                f"masked_fill: mask of shape {tuple(mask.shape)} does not broadcast to {x.shape}"
            ) from None
    return Where.apply(mask, value, x)
