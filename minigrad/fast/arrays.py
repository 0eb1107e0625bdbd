"""Array routines for the kernels: the same results as the plain NumPy calls they replace,
with less per-call overhead on small arrays and both cores on big ones.

Three ideas recur (their measurements: benchmarks/README.md):

- **Both cores.** ``in_two_halves`` and ``matmul`` compute the first half of the rows here
  and the second on the helper thread (``threads``), where the arrays are big enough that a
  hand-off pays (``PARALLEL_MIN_SIZE`` values, ``PRODUCT_MIN_SIZE`` multiply-adds).
- **Reductions by BLAS.** The mean of each row is the product a @ (1/n, ..., 1/n)^T, which
  BLAS runs at memory speed where NumPy's reduction along short rows pays per row; sums down
  the columns are (1, ..., 1) @ a. ``ndarray.dot`` skips matmul's generalized-ufunc dispatch,
  which costs more than the product of small matrices.
- **Small arrays pay per call.** Up to ``SMALL_SIZE`` values an op costs more in NumPy's
  per-call work than in its passes over memory: cached constants (a column of 1/n, a 0-d
  eps) and row operands spread out to the array's shape before an elementwise op, so that
  NumPy runs its loop over whole arrays rather than its broadcasting loop.
"""

from __future__ import annotations

import functools
import math
import threading

import numpy as np

from minigrad.fast import threads

PARALLEL_MIN_SIZE = 1 << 17  # values: below this a hand-off costs more than it saves
PRODUCT_MIN_SIZE = 1 << 21  # the same for matrix products, in multiply-adds
BLAS_THREADS_MIN_SIZE = 1 << 16  # multiply-adds: below this BLAS uses one thread anyway
SMALL_SIZE = 1 << 15  # values: "small" for the per-call tricks above
_HAS_VECDOT = hasattr(np, "vecdot")  # NumPy >= 2


def is_small(a) -> bool:
    """Whether ``a`` is a NumPy array of at most SMALL_SIZE values."""
    return type(a) is np.ndarray and a.size <= SMALL_SIZE


# -- both cores ---------------------------------------------------------------------------


def in_two_halves(fn, *arrays) -> None:
    """``fn(*arrays)``, which writes its results into some of ``arrays``, as two calls on two
    parts of their rows at the same time, one on the helper thread (``by_rows``). Small
    arrays, and one thread, get the plain call: the same values."""
    first = arrays[0]

    def part(_, start, stop):
        fn(*[a[start:stop] for a in arrays])

    by_rows(first.shape[0], first.size, part, PARALLEL_MIN_SIZE)


def by_rows(rows: int, size: int, compute, min_size: int = PRODUCT_MIN_SIZE) -> int:
    """``compute(part, start, stop)`` for the rows [start, stop) of work on ``rows`` rows (of
    ``size`` values or multiply-adds in all): as part 0 on this thread and part 1 on the
    helper at the same time, split where both should finish together; or, where the work is
    small or there is one thread, as part 0 over all rows. Returns the number of parts."""
    helper = _helper_for(size, rows, min_size)
    if helper is None:
        if _blas_on_one_thread(size):
            with threads.blas().one_thread():
                compute(0, 0, rows)
        else:
            compute(0, 0, rows)
        return 1
    mine = helper.split(rows, size)
    helper.run(lambda: compute(1, mine, rows), lambda: compute(0, 0, mine), (size, mine / rows))
    return 2


def _helper_for(size: int, rows: int, min_size: int = PARALLEL_MIN_SIZE):
    """The helper thread, where work of ``size`` on ``rows`` rows is worth sharing; else
    None (small work, one row, one thread, a thread other than the main one, a helper that
    sleeps between tasks or backs off)."""
    if size < min_size or rows < 2:
        return None
    if threading.current_thread() is not threading.main_thread():  # (nn.DataParallel's)
        return None
    helper = threads.helper()
    if helper is None or not helper.spins or helper.backing_off():
        return None
    return helper


def _blas_on_one_thread(size: int) -> bool:
    """Whether work of ``size`` computed on this thread alone should hold BLAS at one thread
    too: where minigrad computes on one thread and the work is big enough for BLAS to start
    its own."""
    return size >= BLAS_THREADS_MIN_SIZE and threads.on_one_thread()


def matmul(a, b, add=None, out=None):
    """a @ b, plus ``add`` (a row, broadcast over the result) where given, into ``out`` where
    given. A big NumPy product is computed in two halves along the first axis (rows of a
    matrix, or matrices of a batch), one on the helper thread while BLAS runs on one thread;
    each thread adds ``add`` to its half while it is still in cache."""
    macs = a.size * b.shape[-1] if a.ndim >= 2 and b.ndim >= 2 else 0
    splits = macs >= PRODUCT_MIN_SIZE and _pairs_rows(a, b)
    helper = _helper_for(macs, a.shape[0], PRODUCT_MIN_SIZE) if splits else None
    if helper is None:
        if _blas_on_one_thread(macs):
            with threads.blas().one_thread():
                return _product(a, b, add, out)
        return _product(a, b, add, out)
    if out is None:
        out = np.empty(a.shape[:-1] + b.shape[-1:], a.dtype)
    mine = helper.split(a.shape[0], macs)
    b_first, b_second = (b[:mine], b[mine:]) if a.ndim > 2 else (b, b)
    helper.run(
        lambda: _product(a[mine:], b_second, add, out[mine:]),
        lambda: _product(a[:mine], b_first, add, out[:mine]),
        (macs, mine / a.shape[0]),
    )
    return out


def matmul_pair(first, second, outs=(None, None)) -> tuple:
    """(a1 @ b1, a2 @ b2) for ``first`` = (a1, b1) and ``second`` = (a2, b2), two independent
    products (a backward's two), written into ``outs`` where given; None for a pair given as
    None. Two big ones run at the same time, each whole on its own core, which beats
    splitting each in halves."""
    pairs = (first, second)
    if first is None or second is None:
        return tuple(None if p is None else matmul(*p, out=out) for p, out in zip(pairs, outs))
    a, b = first
    macs = min(a.size * b.shape[-1], second[0].size * second[1].shape[-1])
    helper = _helper_for(macs, a.shape[0], PRODUCT_MIN_SIZE) if _same_kind(first, second) else None
    if helper is None:
        return matmul(*first, out=outs[0]), matmul(*second, out=outs[1])
    products = [None, None]

    def second_product():
        products[1] = _product(*second, None, outs[1])

    def first_product():
        products[0] = _product(*first, None, outs[0])

    helper.run(second_product, first_product)
    return products[0], products[1]


def _pairs_rows(a, b) -> bool:
    """Whether a @ b can be split along a's first axis: NumPy matrices, or batches of the
    same length, of one dtype."""
    return (
        type(a) is np.ndarray
        and type(b) is np.ndarray
        and a.ndim >= 2
        and (a.ndim == b.ndim == 2 or a.shape[:-2] == b.shape[:-2])
        and a.dtype == b.dtype
    )


def _same_kind(first, second) -> bool:
    arrays = (*first, *second)
    return (
        all(type(x) is np.ndarray and x.ndim >= 2 for x in arrays)
        and len({x.dtype for x in arrays}) == 1
    )


def matrix_product(a, b, out=None):
    """a @ b, into ``out`` where given. A small product of two NumPy arrays of one or two dims
    goes to ``ndarray.dot`` (the same BLAS product, without matmul's dispatch). A big one goes
    to ``np.matmul``: ``dot`` first zeroes its whole result while it holds the GIL (a pass
    over memory that BLAS then overwrites), which keeps the helper thread from starting its
    half for as long as that takes."""
    if (
        type(a) is np.ndarray
        and type(b) is np.ndarray
        and 0 < a.ndim <= 2
        and 0 < b.ndim <= 2
        and math.prod(a.shape[:-1]) * b.shape[-1] <= SMALL_SIZE  # (values of the result)
        and (out is None or (a.dtype == b.dtype and _fits_dot(out, a.dtype)))
    ):
        return a.dot(b, out=out)
    return a @ b if out is None else np.matmul(a, b, out=out)


def _product(a, b, add, out):
    out = matrix_product(a, b, out)
    if add is not None:
        out += add
    return out


def _fits_dot(out, dtype) -> bool:
    """Whether ndarray.dot can write into ``out``: C-ordered, of the product's dtype."""
    return out.dtype == dtype and out.flags.c_contiguous


# -- reductions by BLAS, and cached constants ---------------------------------------------


def row_means(a):
    """The mean of each row (the last axis), keeping it: (..., n) -> (..., 1)."""
    if type(a) is np.ndarray and a.dtype.kind == "f":
        return _rows_times(a, 1.0 / a.shape[-1])
    return a.mean(axis=-1, keepdims=True)


def row_sums(a, keepdims: bool = True):
    """The sum of each row (the last axis); a 1-D array gives a scalar without keepdims."""
    if type(a) is np.ndarray and a.dtype.kind == "f":
        return _rows_times(a, 1.0) if keepdims else a.dot(ones_row(a.shape[-1], a.dtype))
    return a.sum(axis=-1, keepdims=keepdims)


def row_maxima(a):
    """The max of each row (the last axis), keeping it. On a C-ordered NumPy array, as the
    value at each row's argmax: NumPy vectorizes argmax along rows, not its max reduction. A
    nan is picked as max picks it (argmax stops at the first)."""
    if type(a) is not np.ndarray or not a.flags.c_contiguous or a.size == 0:
        return a.max(axis=-1, keepdims=True)
    at = a.argmax(axis=-1, keepdims=True)
    at += _row_starts_shaped(a.shape)  # flat positions
    return a.ravel().take(at)


def column_sums(a):
    """a.sum(axis=0) of a matrix, as (1, ..., 1) @ a on a float NumPy one."""
    if type(a) is np.ndarray and a.dtype.kind == "f":
        return ones_row(a.shape[0], a.dtype).dot(a)
    return a.sum(axis=0)


def sum_of_products(a, b, axes: tuple, out=None):
    """sum over ``axes`` of a * b, keeping those dims: one pass by NumPy's vecdot along the
    last axis, instead of a product array and a sum over it."""
    if _HAS_VECDOT and type(a) is np.ndarray and axes == (a.ndim - 1,):
        if out is None:
            return np.vecdot(a, b)[..., None]
        np.vecdot(a, b, out=out[..., 0])
        return out
    return (a * b).sum(axis=axes, keepdims=True, out=out)


def weighted_sum(a, weight: float):
    """weight * (the sum of a 1-D array), as a 0-d array (a product with a column of
    ``weight``s on a float NumPy one; a NumPy sum would give a scalar to convert)."""
    if type(a) is np.ndarray and a.dtype.kind == "f" and a.size:
        return a.dot(constant_column(a.size, weight, a.dtype)).reshape(())
    return np.asarray(a.sum() * weight) if type(a) is np.ndarray else a.sum() * weight


def _rows_times(a, weight: float):
    n = a.shape[-1]
    column = constant_column(n, weight, a.dtype)
    if a.ndim == 2:
        return a.dot(column)
    return a.reshape(-1, n).dot(column).reshape(a.shape[:-1] + (1,))


@functools.lru_cache(maxsize=64)
def ones_row(n: int, dtype) -> np.ndarray:
    """A read-only row of n ones, made once per (n, dtype)."""
    return _read_only(np.ones(n, dtype))


@functools.lru_cache(maxsize=64)
def constant_column(n: int, value: float, dtype) -> np.ndarray:
    """A read-only (n, 1) column of ``value``s, made once per (n, value, dtype)."""
    return _read_only(np.full((n, 1), value, dtype))


def scalar_operand(value: float, like):
    """``value`` as a cached read-only 0-d array of like's dtype on NumPy (a Python float
    costs NumPy a conversion at every op), the float itself elsewhere."""
    return _constant(value, like.dtype) if type(like) is np.ndarray else value


@functools.lru_cache(maxsize=64)
def _constant(value: float, dtype) -> np.ndarray:
    return _read_only(np.asarray(value, dtype))


def _read_only(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array


# -- indices ------------------------------------------------------------------------------

SMALL_RANGE_SIZE = 32  # up to this many values, Python's min and max beat NumPy's


def index_range(a) -> tuple[int, int]:
    """(smallest, largest) of a non-empty integer array, as Python ints."""
    if type(a) is np.ndarray:
        if a.size <= SMALL_RANGE_SIZE:
            values = a.ravel().tolist()
            return min(values), max(values)
        return int(np.minimum.reduce(a, axis=None)), int(np.maximum.reduce(a, axis=None))
    return int(a.min()), int(a.max())


def row_starts(rows: int, columns: int):
    """(0, columns, 2 columns, ...): the flat position of each row's first value in a
    C-ordered (rows, columns) NumPy array; made once per size, read-only."""
    return _row_starts(rows, columns)


@functools.lru_cache(maxsize=64)
def _row_starts(rows: int, columns: int) -> np.ndarray:
    return _read_only(np.arange(0, rows * columns, columns))


@functools.lru_cache(maxsize=64)
def _row_starts_shaped(shape: tuple) -> np.ndarray:
    return _row_starts(math.prod(shape[:-1]), shape[-1]).reshape(shape[:-1] + (1,))


# Up to this many entries in the one-hot matrix (indices x rows of the target), add_rows
# sums by one matrix product; beyond it, by sorting.
ONE_HOT_MAX_SIZE = 1 << 19


def add_rows(target, index, values) -> None:
    """target[index] += values for an integer array of row indices (an embedding's
    gradient), repeated rows accumulating, as ``np.add.at`` does one element at a time.

    For few rows and indices the sums are one product: one_hot(index)^T @ values. Otherwise
    the rows are sorted by index (stable) and each run of equal indices summed by one
    ``np.add.reduceat``."""
    index = index.reshape(-1)
    if index.size == 0:
        return
    values = values.reshape((index.size,) + target.shape[1:])
    size = target.shape[0]
    lowest, highest = index_range(index)
    if lowest < -size or highest >= size:
        bad = lowest if lowest < -size else highest
        raise IndexError(f"index {bad} is out of bounds for axis 0 with size {size}")
    index = np.where(index < 0, index + size, index)  # -1 is the last row
    if size * index.size <= ONE_HOT_MAX_SIZE and values.dtype.kind == target.dtype.kind == "f":
        one_hot = np.zeros((index.size, size), values.dtype)
        one_hot[np.arange(index.size), index] = 1
        # 0 * inf is nan: an inf or nan in values would spread to every row of the product,
        # where the sorted sums keep it in its own row
        with np.errstate(invalid="ignore"):
            sums = matmul(one_hot.T, values.reshape(index.size, -1))
        if np.isfinite(sums).all():
            target += sums.reshape(target.shape)
            return
    order = np.argsort(index, kind="stable")
    sorted_index = index[order]
    starts = np.flatnonzero(np.concatenate(([True], sorted_index[1:] != sorted_index[:-1])))
    target[sorted_index[starts]] += np.add.reduceat(values[order], starts, axis=0)
