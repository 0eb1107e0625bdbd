"""Picking, writing and joining: ``t[index]``, ``t[index] = v`` (as a new tensor),
``index_select``, ``scatter``, ``index_fill``, ``nonzero``, ``cat``, ``stack``,
``split``, ``chunk``, ``where``, ``masked_fill``.

The backward of ``t[index]`` puts the gradient back where the values came from, into zeros
of t's shape. With an integer array as index the same entry can be picked twice
(``emb[[3, 3]]``); its gradient is then the sum of both, which ``index_add`` accumulates
(plain ``+=`` would keep only one of them).

Writing is the mirror image: ``y = x`` with ``y[index] = v`` sends the gradient at ``index``
to v and the rest to x. ``scatter`` is that op with the index that walks along one dim
(``picks_along``), as ``gather`` (ops/ordering.py) is the picking one. The in-place forms
(``t[index] = v``, ``scatter_``) are in ops/inplace.py, built on these.
"""

from __future__ import annotations

import operator

import numpy as np

from minigrad.autograd.function import Function
from minigrad.autograd.grad_mode import modes
from minigrad.backend import array_module, index_add, is_numpy, to_numpy
from minigrad.errors import OutOfRangeError, ShapeError
from minigrad.ops._helpers import as_index, normalize_dim, shape_of, xp_of
from minigrad.ops.shape import sum_to, unsqueeze
from minigrad.tensor import Tensor


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
            raise _index_error(index, x.shape, error) from None

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


class SetItem(Function):
    # y = x, then y[index] = v (v broadcast to x[index]'s shape);
    # dL/dx = g with 0 at index (those values were overwritten),  dL/dv = g[index] summed
    # back to v's shape
    @staticmethod
    def forward(ctx, x, index, value):
        ctx.index, ctx.value_shape = index, shape_of(value)
        y = x.copy()
        assign(y, index, value)
        return y

    @staticmethod
    def backward(ctx, grad):
        grad_x = grad_value = None
        if ctx.needs_input_grad[0]:
            grad_x = SetItem.apply(grad, ctx.index, 0.0)
        if ctx.needs_input_grad[2]:
            grad_value = _sum_to_value(GetItem.apply(grad, ctx.index), ctx.value_shape)
        return grad_x, None, grad_value


def _sum_to_value(grad, shape):
    """g[index] summed back to the value's shape, which may have more leading 1s than
    x[index] (x[0] = v of shape (1, n), as NumPy and PyTorch allow)."""
    if len(shape) > grad.ndim:
        grad = grad.reshape((1,) * (len(shape) - grad.ndim) + grad.shape)
    return sum_to(grad, shape)


def assign(target, index, value) -> None:
    """target[index] = value on arrays, with NumPy's errors in the user's terms."""
    try:
        target[index] = value
    except IndexError as error:
        raise _index_error(index, target.shape, error) from None
    except ValueError:  # the value does not broadcast to the shape that index picks
        picked = _stand_in(target.shape)[_index_on_cpu(index)].shape
        raise RuntimeError(
            f"shape mismatch: a value of shape {tuple(np.shape(value))} cannot be broadcast "
            f"to the indexing result of shape {picked} (t[index] = value, t of shape "
            f"{target.shape}, index {_describe(index)})"
        ) from None


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
    if hasattr(a, "dtype") and hasattr(b, "dtype"):
        return np.result_type(a.dtype, b.dtype)
    if hasattr(a, "dtype"):
        return a.dtype if a.dtype.kind == "f" or isinstance(b, (bool, int)) else np.float32
    if hasattr(b, "dtype"):
        return b.dtype if b.dtype.kind == "f" or isinstance(a, (bool, int)) else np.float32
    return np.float32


def _index_error(index, shape, error) -> OutOfRangeError:
    """NumPy's IndexError as an IndexError that names the index and the tensor's shape."""
    if "out of bounds" in str(error):
        return OutOfRangeError(
            f"index out of range: {_describe(index)} on a tensor of shape {shape} ({error})"
        )
    return OutOfRangeError(f"t[index]: {error}; index {_describe(index)}, tensor of shape {shape}")


def _describe(index) -> str:
    items = index if isinstance(index, tuple) else (index,)
    parts = []
    for item in items:
        if hasattr(item, "shape") and getattr(item, "size", 2) > 8:
            parts.append(f"array of shape {tuple(item.shape)}, min {item.min()}, max {item.max()}")
        else:
            parts.append(repr(item.tolist() if hasattr(item, "tolist") else item))
    return "[" + ", ".join(parts) + "]"


# -- indices: what t[index] takes ----------------------------------------------------------


def prepared_index(x, index):
    """``index`` as x's array module takes it: Tensors in it as arrays, a range as a list, a
    one-element int Tensor in a slice as an int. A type that is no index raises an
    IndexError, as in PyTorch; on the GPU the bounds are checked as NumPy checks them."""
    index = _raw_index(index)
    _check_index_types(index)
    if not is_numpy(x.array):
        _check_bounds_on_cpu(index, x.shape)
        index = _index_on_gpu(index, xp_of(x.array))
    return index


def _check_index_types(index) -> None:
    for item in index if isinstance(index, tuple) else (index,):
        if item is None or item is Ellipsis or isinstance(item, (slice, int, np.integer, list)):
            continue
        kind = getattr(getattr(item, "dtype", None), "kind", None)
        if kind is None:
            raise OutOfRangeError(
                "only integers, slices (`:`), ellipsis (`...`), None and long or bool "
                f"tensors are valid indices (got {type(item).__name__})"
            )
        if kind not in "biu":
            raise OutOfRangeError(
                f"tensors used as indices must be long, int or bool tensors (got {item.dtype})"
            )


def _stand_in(shape):
    """A NumPy array of ``shape`` with one zero-stride element (no data): to try an index."""
    return np.broadcast_to(np.zeros((), dtype=np.int8), shape)


def _check_bounds_on_cpu(index, shape):
    """CuPy wraps an out-of-range integer array index around where NumPy raises, and words its
    errors differently: try the index on a NumPy stand-in of the same shape (one zero-stride
    element, no copy of the data) so that a GPU tensor raises the same error as a CPU one."""
    try:
        _stand_in(shape)[_index_on_cpu(index)]
    except IndexError as error:
        raise _index_error(index, shape, error) from None


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
    if isinstance(index, Tensor):
        return index.array
    if isinstance(index, range):  # (a list, so that repeats are seen as in one)
        return list(index)
    if isinstance(index, slice):
        ends = (index.start, index.stop, index.step)
        return slice(*[operator.index(e) if isinstance(e, Tensor) else e for e in ends])
    return index


# -- the public functions ------------------------------------------------------------------


def getitem(x, index):
    return GetItem.apply(x, prepared_index(x, index))


def setitem(x, index, value):
    """A new tensor: x with ``value`` written at ``index`` (``t[index] = value`` in place is
    this, recorded into t; see ops/inplace.py). Differentiable in x and in value."""
    return SetItem.apply(x, prepared_index(x, index), value)


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
    """x with ``value`` (a number or 0-d tensor) wherever ``mask`` (bool, broadcastable to
    x) is True."""
    check_mask(mask, "masked_fill")
    check_fill_value(value, "masked_fill")
    if tuple(mask.shape) != x.shape:
        try:
            np.broadcast_shapes(tuple(mask.shape), x.shape)
        except ValueError:
            raise ShapeError(
                f"masked_fill: mask of shape {tuple(mask.shape)} does not broadcast to {x.shape}"
            ) from None
    return Where.apply(mask, value, x)


# -- along one dim: scatter, index_select, index_fill; and nonzero --------------------------


def picks_along(index, dim: int) -> tuple:
    """The fancy index that takes ``index`` along ``dim`` and every other axis as it is:
    for dim 1 of 3 dims it picks x[i, index[i, j, k], k] at each (i, j, k) of index."""
    xp = xp_of(index)
    picks = []
    for axis, size in enumerate(index.shape):
        at_axis = [1] * index.ndim
        at_axis[axis] = size
        picks.append(index if axis == dim else xp.arange(size).reshape(at_axis))
    return tuple(picks)


def scatter(x, dim: int, index, src=None, value=None, reduce=None):
    """x with src written where index points along dim: out[i][index[i][j][k]][k] =
    src[i][j][k] for dim=1; ``src`` may be a number (or pass ``value=``). Differentiable in x
    (not where written) and in src, as ``t[index] = v``. ``reduce="add"`` or ``"multiply"``
    combines with x's values instead, outside the graph only, as in PyTorch."""
    src = value if src is None else src
    dim = normalize_dim(dim, x.ndim, "scatter")
    index = _index_for(x, dim, index, "scatter", src)
    picks = picks_along(index, dim)
    if isinstance(src, Tensor):  # the part of src that index covers
        src = GetItem.apply(src, tuple(slice(0, size) for size in index.shape))
    if reduce is None:
        return SetItem.apply(x, picks, src)
    return _scatter_reduced(x, picks, src, reduce)


def scatter_add(x, dim: int, index, src):
    """x with src added where index points along dim (repeats add up); differentiable in
    both: dL/dx = g, dL/dsrc = g gathered back."""
    dim = normalize_dim(dim, x.ndim, "scatter_add")
    index = _index_for(x, dim, index, "scatter_add", src)
    part = GetItem.apply(src, tuple(slice(0, size) for size in index.shape))
    return x + ScatterAdd.apply(part, picks_along(index, dim), x.shape)


def _scatter_reduced(x, picks, src, reduce: str):
    if reduce not in ("add", "multiply"):
        raise RuntimeError(f"scatter: reduce must be 'add' or 'multiply', got {reduce!r}")
    if modes.grad_enabled and (x.requires_grad or getattr(src, "requires_grad", False)):
        raise RuntimeError(
            f"scatter(reduce={reduce!r}) has no derivative (as in PyTorch); use scatter_add, "
            "or scatter under `with mg.no_grad():`"
        )
    values = src.array if isinstance(src, Tensor) else src
    out = x.array.copy()
    if reduce == "add":
        index_add(out, picks, values)
    elif is_numpy(out):
        np.multiply.at(out, picks, values)
    else:  # (CuPy has no multiply.at: on the host, then back)
        host = to_numpy(out)
        np.multiply.at(host, _index_on_cpu(picks), _index_on_cpu(values))
        out = array_module(out).asarray(host)
    return Tensor._make(out)


def _index_for(x, dim: int, index, op: str, src=None):
    """The index of scatter as an array on x's device, checked as PyTorch checks it."""
    index = as_index(x, index)
    if index.dtype.kind not in "iu":
        raise RuntimeError(f"{op}(): expected an int64 index, got dtype {index.dtype}")
    if index.ndim != x.ndim:
        raise RuntimeError(
            f"{op}(): the index must have as many dims as the tensor: index of shape "
            f"{index.shape}, tensor of shape {x.shape}"
        )
    src_shape = getattr(src, "shape", None)
    for axis, size in enumerate(index.shape):
        too_big = axis != dim and size > x.shape[axis]
        if too_big or (src_shape is not None and size > src_shape[axis]):
            limits = f"the tensor {x.shape} apart from dim {dim}" + (
                "" if src_shape is None else f", and src {tuple(src_shape)}"
            )
            raise RuntimeError(f"{op}(): index of shape {index.shape} is larger than {limits}")
    _check_within(index.array, x.shape[dim], dim, op, RuntimeError, negative=False)
    return index.array


def _check_within(index, size: int, dim: int, op: str, kind, negative: bool) -> None:
    """Raise ``kind`` where an index falls outside 0..size-1 (-size.. too, if ``negative``)."""
    if index.size == 0:
        return
    low, high = int(index.min()), int(index.max())
    bad = low if low < (-size if negative else 0) else (high if high >= size else None)
    if bad is not None:
        raise kind(f"{op}(): index {bad} is out of bounds for dimension {dim} with size {size}")


def index_select(x, dim: int, index):
    """The entries of x at ``index`` (a vector of ints) along dim; differentiable in x."""
    dim = normalize_dim(dim, x.ndim, "index_select")
    index = _vector_index(x, index, "index_select")
    _check_within(index, x.shape[dim] if x.ndim else 1, dim, "index_select", OutOfRangeError, False)
    return GetItem.apply(x, (slice(None),) * dim + (index,))


def index_fill(x, dim: int, index, value):
    """x with ``value`` (a number or 0-d tensor) at ``index`` (a vector of ints) along dim;
    differentiable in x (not where filled) and in a value tensor."""
    dim = normalize_dim(dim, x.ndim, "index_fill")
    index = _vector_index(x, index, "index_fill")
    _check_within(index, x.shape[dim] if x.ndim else 1, dim, "index_fill", OutOfRangeError, True)
    check_fill_value(value, "index_fill")
    return SetItem.apply(x, (slice(None),) * dim + (index,), value)


def _vector_index(x, index, op: str):
    index = as_index(x, index)
    if index.dtype.kind not in "iu":
        raise RuntimeError(f"{op}(): expected an int64 index, got dtype {index.dtype}")
    if index.ndim > 1:
        raise OutOfRangeError(f"{op}(): the index must be a vector, got shape {index.shape}")
    return index.array.reshape(-1)


def check_mask(mask, op: str) -> None:
    if getattr(mask, "dtype", None) != np.bool_:
        raise RuntimeError(
            f"{op}: the mask must be a bool tensor, got dtype {getattr(mask, 'dtype', type(mask))}"
        )


def check_fill_value(value, op: str) -> None:
    """A fill value is a number or a 0-d tensor, as PyTorch requires."""
    if isinstance(value, Tensor) and value.ndim != 0:
        raise RuntimeError(
            f"{op}: the value must be a number or a 0-d tensor, got a tensor of shape {value.shape}"
        )


def nonzero(x, as_tuple: bool = False):
    """The indices of the non-zero entries: an int64 tensor of shape (n, x.ndim), one row per
    entry in row-major order; with ``as_tuple=True`` one 1-D tensor per dim (as NumPy's)."""
    array = x.array if x.ndim else x.array.reshape(1)
    xp = xp_of(array)
    if as_tuple:
        return tuple(Tensor._make(i.astype(np.int64)) for i in xp.nonzero(array))
    rows = xp.argwhere(array).astype(np.int64)
    return Tensor._make(rows if x.ndim else rows[:, :0])
