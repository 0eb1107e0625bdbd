"""The array backend: NumPy on "cpu", CuPy on "cuda".

This is the only module that imports CuPy, and only when a "cuda" device is asked for.
Everything that differs between the two libraries lives here, behind small named functions,
so that the ops above can be written once against ``xp`` (whichever module holds the array).
"""

from __future__ import annotations

import contextlib
import functools
import math
import os

import numpy as np

from minigrad import threads

DEVICES = ("cpu", "cuda")
GPU_INSTALL_HINT = (
    'GPU support needs CuPy and an NVIDIA GPU: pip install "minigrad[gpu]" (brings cupy-cuda12x)'
)

_cupy = None  # the cupy module once imported, False if importing it failed
_cupy_error = ""


def _import_cupy():
    """Import CuPy on first use; return the module or None if it is not usable."""
    global _cupy, _cupy_error
    if _cupy is None:
        try:
            import cupy

            if cupy.cuda.runtime.getDeviceCount() < 1:
                raise RuntimeError("no CUDA device found")
            _cupy = cupy
        except Exception as error:  # ImportError, CUDARuntimeError, ...
            _cupy, _cupy_error = False, f"{type(error).__name__}: {error}"
    return _cupy or None


def cuda_is_available() -> bool:
    """True when CuPy imports and sees at least one GPU."""
    return _import_cupy() is not None


def check_device(device) -> str:
    """Normalize a device name ("cpu", "cuda", "cuda:0") and make sure it can be used."""
    name = str(device).split(":")[0]
    if name not in DEVICES:
        raise ValueError(f"unknown device {device!r}: expected 'cpu' or 'cuda'")
    if name == "cuda" and _import_cupy() is None:
        from minigrad.errors import DeviceError

        raise DeviceError(f"device 'cuda' is not available ({_cupy_error}). {GPU_INSTALL_HINT}")
    return name


def device_and_dtype(args, kwargs) -> tuple:
    """Read ``.to(...)``'s arguments, as PyTorch takes them: ``to("cuda")``,
    ``to(mg.float64)``, ``to("cuda", mg.float64)`` or keywords. Returns (device, dtype), each
    None when not given; the device is checked, the dtype a numpy dtype."""
    device, dtype = kwargs.get("device"), kwargs.get("dtype")
    for arg in args:
        if isinstance(arg, str) and arg.split(":")[0] in DEVICES:
            device = arg
        else:
            dtype = arg
    return (
        check_device(device) if device is not None else None,
        np.dtype(dtype) if dtype is not None else None,
    )


def xp_for(device: str):
    """The array module (numpy or cupy) that serves ``device``."""
    return np if device == "cpu" else _import_cupy()


def is_numpy(array) -> bool:
    return isinstance(array, (np.ndarray, np.generic))


def array_module(array):
    """numpy for NumPy arrays, cupy for CuPy arrays."""
    return np if is_numpy(array) else _import_cupy()


def device_of(array) -> str:
    return "cpu" if is_numpy(array) else "cuda"


def to_device(array, device: str):
    """Copy ``array`` to ``device`` ("cpu" or "cuda"); returns it unchanged if already there."""
    if device_of(array) == device:
        return array
    if device == "cpu":
        return array.get()
    return _import_cupy().asarray(array)


def to_numpy(array) -> np.ndarray:
    return np.asarray(array) if is_numpy(array) else array.get()


# ----------------------------------------------------------------------------------------------
# Where NumPy and CuPy differ
# ----------------------------------------------------------------------------------------------


def index_add(target, index, values) -> None:
    """target[index] += values, accumulating repeated indices (unlike plain ``+=``)."""
    if is_numpy(target):
        if _picks_rows(target, index, values):
            _add_rows(target, index, values)
        else:
            np.add.at(target, index, values)
    else:
        _import_cupy().add.at(target, index, values)


_HAS_VECDOT = hasattr(np, "vecdot")  # NumPy >= 2


def reduce_max(a, axis, keepdims: bool = False):
    """a.max(axis=axis, keepdims=keepdims), in one call on NumPy arrays (``ndarray.max`` goes
    through two Python-level wrappers first: a microsecond, which small ops notice)."""
    if type(a) is np.ndarray:
        return np.maximum.reduce(a, axis=axis, keepdims=keepdims)
    return a.max(axis=axis, keepdims=keepdims)


def row_maxima(a):
    """The max of each row of ``a`` (along its last axis), keeping that axis: (..., n) ->
    (..., 1). On a C-ordered NumPy array, as the value at each row's argmax, picked by flat
    position: NumPy's argmax runs a vectorized loop along each row, and its max reduction
    does not (512x64: 6.8 against 30.6 us; 32x4x64x64: 0.29 against 0.55 ms; at 8x8 the
    call's own Python makes it level, 1.05 against 1.08 us). A nan is picked as max picks
    it: argmax stops at the first."""
    if type(a) is not np.ndarray or not a.flags.c_contiguous or a.size == 0:
        return reduce_max(a, -1, keepdims=True)
    at = a.argmax(axis=-1, keepdims=True)
    at += _row_starts_shaped(a.shape)  # flat positions
    return a.ravel().take(at)


@functools.lru_cache(maxsize=64)
def _row_starts_shaped(shape: tuple) -> np.ndarray:
    """row_starts for a C-ordered array of this shape, shaped as its rows: (..., 1)."""
    return _row_starts(math.prod(shape[:-1]), shape[-1]).reshape(shape[:-1] + (1,))


SMALL_RANGE_SIZE = 32  # up to this many values, Python's min and max beat NumPy's


def index_range(a) -> tuple[int, int]:
    """(smallest, largest) of a non-empty integer array, as Python ints: for the range checks
    of class and embedding indices. A few values go through Python's min and max (8 values:
    0.7 against 3.4 us for ``a.min()`` and ``a.max()``), more through one reduction each."""
    if type(a) is np.ndarray:
        if a.size <= SMALL_RANGE_SIZE:
            values = a.ravel().tolist()
            return min(values), max(values)
        return int(np.minimum.reduce(a, axis=None)), int(np.maximum.reduce(a, axis=None))
    return int(a.min()), int(a.max())


def row_starts(rows: int, columns: int, like):
    """(0, columns, 2 columns, ...): the flat position of each row's first value in a
    C-ordered (rows, columns) array, on like's device. Made once per size on NumPy, and
    read-only (an ``arange`` and its step each call: 0.35 us at 8 rows)."""
    if type(like) is np.ndarray:
        return _row_starts(rows, columns)
    return array_module(like).arange(0, rows * columns, columns)


@functools.lru_cache(maxsize=64)
def _row_starts(rows: int, columns: int) -> np.ndarray:
    starts = np.arange(0, rows * columns, columns)
    starts.flags.writeable = False
    return starts


# Up to this many values, an op on a NumPy array costs more in NumPy's per-call work than in
# its passes over memory. Ops with a row or column operand (LayerNorm's mean, softmax's row
# sums) then spread it out to the array's shape first, into a buffer, so that each
# elementwise op runs NumPy's loop over whole arrays: at 8x8, 0.1 us to spread and 0.2 for
# the op, against 0.75 us for the broadcasting loop, which pays per row (128x32: 0.7 + 0.5
# against 1.4). Above it, the spread costs as much as it saves (2048x128: 47 against 44 us),
# and those ops broadcast.
SMALL_SIZE = 1 << 15


def is_small(a) -> bool:
    """Whether ``a`` is a NumPy array of at most SMALL_SIZE values."""
    return type(a) is np.ndarray and a.size <= SMALL_SIZE


def row_means(a):
    """a.mean(axis=-1, keepdims=True): the mean of each row (along the last axis). On a
    float NumPy array, as the matrix product a @ (1/n, ..., 1/n)^T: BLAS runs it at memory
    speed, where NumPy's reduction along short rows pays a per-row cost (2048 rows of 128:
    21 against 101 us; 8 rows of 8: 1.7 against 2.5 us, the column made once)."""
    if type(a) is np.ndarray:
        if a.dtype.kind == "f":
            return _rows_times(a, 1.0 / a.shape[-1])
        means = np.add.reduce(a, axis=-1, keepdims=True)
        means *= 1.0 / a.shape[-1]
        return means
    return a.mean(axis=-1, keepdims=True)


def weighted_sum(a, weight: float):
    """weight * (the sum of the values of a 1-D array), as a 0-d array. On a float NumPy
    array, as its product with a column of ``weight``s: a (1,) array, then viewed as 0-d
    (a 1-D product or sum gives a NumPy scalar, which an op must then make an array)."""
    if type(a) is not np.ndarray:
        return a.sum() * weight  # (CuPy: a 0-d array)
    if a.dtype.kind == "f" and a.size:
        return a.dot(constant_column(a.size, weight, a.dtype)).reshape(())
    return np.asarray(a.sum() * weight)


def row_sums(a, keepdims: bool = True):
    """a.sum(axis=-1, keepdims=keepdims), by BLAS on a float NumPy array (see row_means);
    without keepdims, as a @ (1, ..., 1): a 1-D array gives a scalar (8 values: 0.25 against
    0.67 us for ``np.add.reduce``)."""
    if type(a) is np.ndarray:
        if a.dtype.kind == "f":
            return _rows_times(a, 1.0) if keepdims else a.dot(ones_row(a.shape[-1], a.dtype))
        return np.add.reduce(a, axis=-1, keepdims=keepdims)
    return a.sum(axis=-1, keepdims=keepdims)


def _rows_times(a, weight: float):
    """The rows of ``a`` (along its last axis) times a column of ``weight``s, one matrix
    product: (..., n) -> (..., 1)."""
    n = a.shape[-1]
    column = constant_column(n, weight, a.dtype)
    if a.ndim == 2:
        return a.dot(column)
    return a.reshape(-1, n).dot(column).reshape(a.shape[:-1] + (1,))


@functools.lru_cache(maxsize=64)
def ones_row(n: int, dtype) -> np.ndarray:
    """A NumPy row of n ones, made once per (n, dtype) and read-only: (1, ..., 1) @ a sums
    the columns of a."""
    row = np.ones(n, dtype)
    row.flags.writeable = False
    return row


def scalar_operand(value: float, like):
    """``value`` as the operand of an op with the array ``like`` that costs least: a cached
    read-only 0-d array of like's dtype on NumPy, where a Python float costs NumPy a
    conversion each time (an op at 8x8: 0.21 against 0.49 us); the float itself on CuPy."""
    if type(like) is np.ndarray:
        return _constant(value, like.dtype)
    return value


@functools.lru_cache(maxsize=64)
def _constant(value: float, dtype) -> np.ndarray:
    array = np.asarray(value, dtype)
    array.flags.writeable = False
    return array


@functools.lru_cache(maxsize=64)
def constant_column(n: int, value: float, dtype) -> np.ndarray:
    """A NumPy (n, 1) column of ``value``s, made once per (n, value, dtype) and read-only:
    a @ (1/n, ..., 1/n)^T is the mean of each row of a."""
    column = np.full((n, 1), value, dtype)
    column.flags.writeable = False
    return column


def column_sums(a, out=None):
    """a.sum(axis=0) of a matrix, into ``out`` where given. On a float NumPy one, as
    (1, ..., 1) @ a (see row_means): 2.3-3.4x NumPy's reduction down the columns of a big
    one, summed by BLAS in blocks rather than row after row; 0.25 against 0.85 us at 8x8."""
    if type(a) is np.ndarray:
        # (ndarray.dot writes only into a C-ordered ``out`` of the product's own dtype)
        if a.dtype.kind == "f" and (out is None or _fits_dot(out, a.dtype)):
            return ones_row(a.shape[0], a.dtype).dot(a, out=out)
        return np.add.reduce(a, axis=0, out=out)
    return a.sum(axis=0, out=out)


def _fits_dot(out, dtype) -> bool:
    return out.dtype == dtype and out.flags.c_contiguous


def sum_of_products(a, b, axes: tuple, out=None):
    """sum over ``axes`` of a * b, keeping those dims: a dot product per row. One pass with
    NumPy's vecdot where it applies (NumPy >= 2, the last axis), instead of a product array
    and a sum over it (2.4x faster on 2048 rows of 128); ``out`` (optional) receives it."""
    if _HAS_VECDOT and type(a) is np.ndarray and axes == (a.ndim - 1,):
        if out is None:
            return np.vecdot(a, b)[..., None]
        np.vecdot(a, b, out=out[..., 0])
        return out
    return (a * b).sum(axis=axes, keepdims=True, out=out)


def _picks_rows(target, index, values) -> bool:
    """True if ``index`` is one integer array picking rows of ``target`` (as an embedding's
    gradient does), with one row of ``values`` per index."""
    return (
        isinstance(index, np.ndarray)
        and index.dtype.kind in "iu"
        and target.ndim >= 1
        and values.shape == index.shape + target.shape[1:]
    )


# Up to this many entries in the one-hot matrix (indices x rows of the target), _add_rows
# sums by a matrix product: an embedding of 64 rows, 2048 indices of 128 values, 0.34-0.69
# against 0.68-0.90 ms sorted; of 256 rows, 2048 indices of 256 values, 2.4-2.8 against
# 2.9-3.3 ms (timed in several runs on 2 cores).
ONE_HOT_MAX_SIZE = 1 << 19


def _add_rows(target, index, values) -> None:
    """target[index] += values for integer row indices, repeated ones accumulating.

    np.add.at does this one element at a time. For few rows and indices, the sums are one
    matrix product: one_hot(index)^T @ values, where one_hot has a 1 in row k at column
    index[k]. Otherwise the rows are sorted by index (stable, so each index's rows keep
    their order) and each run of equal indices is summed by one ``np.add.reduceat``. Both
    are several times faster.
    """
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


def _erf_numpy(x: np.ndarray) -> np.ndarray:
    """erf for NumPy arrays: SciPy's when installed, else Python's math.erf per element."""
    try:
        from scipy.special import erf
    except ImportError:
        return np.vectorize(math.erf, otypes=[x.dtype])(x)
    return erf(x)


def ignore_overflow(array):
    """A context in which NumPy does not warn when exp overflows to inf (CuPy never warns)."""
    return np.errstate(over="ignore") if is_numpy(array) else contextlib.nullcontext()


def erf(x):
    """The error function erf(x) = 2/sqrt(pi) * integral_0^x exp(-t^2) dt, elementwise."""
    if is_numpy(x):
        return _erf_numpy(x)
    import cupyx.scipy.special

    return cupyx.scipy.special.erf(x)


# Phi on a grid, for float32: Phi(k h) for k h in [-16, 8], h = 2^-11. Between two grid
# points Phi is read off the straight line through them: error at most h^2/8 max|Phi''| =
# 7e-9 (Phi'' = -x phi(x), largest at x = 1), below float32's rounding of Phi itself (6e-8
# near 1); in the left tail, where Phi''/Phi ~ x^2, relative error 5e-6 at most. Beyond the
# grid, float32's Phi is 0 (below -16) or 1 (above 8).
_CDF_GRID_SHIFT = 11  # h = 2^-11: x * 2^11 is exact in floating point
_CDF_GRID_FIRST, _CDF_GRID_LAST = -16 << _CDF_GRID_SHIFT, 8 << _CDF_GRID_SHIFT
# Values per pass. The temporaries stay small, and each pass is long enough that the two
# threads of in_two_halves rarely wait for each other's GIL (chunks of 2^17 values: see
# benchmarks/LOG.md, "Twelfth session").
_CHUNK = 1 << 17


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
    """Phi(x) for float32 NumPy arrays by linear interpolation on the grid above, written into
    ``out`` (contiguous, x's shape). Two gathers and seven passes a chunk, against about 30
    passes and an exp for a fitted erfc, and more precise (7e-8 against 2.3e-7).

    With u = x / h (exact): the grid point left of x is k = floor(u), and x lies the
    fraction u - k of the way to the next one, so Phi(x) ~ Phi(k h) + (u - k) rise(k).
    """
    level, rise = _cdf_grid()
    flat_x, flat_out = x.reshape(-1), out.reshape(-1)
    u = np.empty(min(flat_x.size, _CHUNK), np.float32)
    # rows as intp, the index type np.take works in (int32 rows: converted inside, 4% slower)
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
            # the table row (0 for the first grid point), cast to int by the ufunc, which
            # releases the GIL (np.copyto's cast keeps it)
            np.subtract(ks, np.float32(_CDF_GRID_FIRST), out=index, casting="unsafe")
            step = ks  # floor(u) is in index now: its buffer takes rise(k) (u - k)
            np.take(rise, index, out=step, mode="clip")
            step *= us
            np.take(level, index, out=phi, mode="clip")
            phi += step  # Phi(k h) + (u - k) rise(k)
    return out


def normal_cdf(x, out=None):
    """Phi(x) = (1 + erf(x / sqrt 2)) / 2, the standard normal CDF, elementwise; written into
    ``out`` if given (a contiguous array of x's shape and dtype).

    float64 uses erf itself (so GELU matches PyTorch's to round-off); float32 NumPy arrays
    interpolate on the grid above, accurate to float32 precision.
    """
    if is_numpy(x) and x.dtype == np.float32:
        return _normal_cdf_float32(x, np.empty_like(x) if out is None else out)
    cdf = erf(x * (1 / math.sqrt(2)))
    cdf += 1.0
    cdf *= 0.5
    if out is None:
        return cdf
    out[...] = cdf
    return out


# -- two cores: halves of big operations for the helper thread (minigrad.threads) ---------

PARALLEL_MIN_SIZE = 1 << 17  # below this many values a thread hand-off costs more than it saves
PRODUCT_MIN_SIZE = 1 << 21  # the same for matrix products, in multiply-adds


def in_two_halves(fn, *arrays, writes: tuple) -> None:
    """Call ``fn(*arrays)``, which must write its results into some of ``arrays`` (their
    positions: ``writes``, every one of them: in a stream, below, the helper's halves of
    those are what a reader waits for), as two calls on the first and the second half of
    the rows, at the same time: the second half on minigrad's helper thread (see
    minigrad.threads).

    NumPy releases the GIL inside its loops, so the halves really run in parallel: ufunc
    passes over big arrays take about 0.6x the time. Small arrays, CuPy arrays and one-thread
    settings get the plain call ``fn(*arrays)``, which computes exactly the same values.
    """
    first = arrays[0]
    helper = _helper_for_rows_of(first)
    if helper is None:
        _whole(fn, arrays)
        return
    half = first.shape[0] // 2
    firsts = [a[:half] for a in arrays]
    seconds = [a[half:] for a in arrays]
    _share(
        helper,
        lambda: fn(*seconds),
        lambda: fn(*firsts),
        firsts,
        [seconds[i] for i in writes],
    )


def splits_in_two_halves(a) -> bool:
    """Whether in_two_halves would split the rows of ``a`` between the two threads."""
    return _helper_for_rows_of(a) is not None


def _helper_for_rows_of(a):
    """The helper thread, where the rows of ``a`` are worth sharing with it (a big NumPy
    array of two rows or more); else None."""
    if not is_numpy(a) or a.size < PARALLEL_MIN_SIZE or a.shape[0] < 2:
        return None
    return threads.helper()


def _whole(fn, arrays) -> None:
    if streaming:
        wait_for_writes_to(*arrays)
    fn(*arrays)


def matmul(a, b, add=None, out=None):
    """a @ b, plus ``add`` (a row, broadcast over the result) where given, written into
    ``out`` where given. A big NumPy product is computed in two halves along the first axis
    (rows of a matrix, or matrices of a batch), one on the helper thread, which then owns the
    second core while BLAS runs on one thread (see minigrad.threads); each thread adds
    ``add`` to its half while it is still in cache. Anything else is ``a @ b`` (then
    ``+= add``)."""
    if not _splits(a, b):
        if streaming:
            wait_for_writes_to(a, b, add)
        return _product(a, b, add, out)
    if out is None:
        out = np.empty(a.shape[:-1] + b.shape[-1:], a.dtype)
    half = a.shape[0] // 2
    a_first, a_second, out_first, out_second = a[:half], a[half:], out[:half], out[half:]
    b_first, b_second = (b[:half], b[half:]) if a.ndim > 2 else (b, b)
    _share(
        threads.helper(),
        lambda: _product(a_second, b_second, add, out_second),
        lambda: _product(a_first, b_first, add, out_first),
        (a_first, b_first, add),
        (out_second,),
    )
    return out


def matrix_product(a, b, out=None):
    """a @ b, into ``out`` where given. Two NumPy arrays of one or two dims go through
    ``ndarray.dot``: the same BLAS product, without the dispatch of matmul's generalized
    ufunc, which costs more than the product of small matrices (8x8 @ 8x8: 0.33 against
    0.81 us; 8x8 @ 8x1: 0.28 against 0.74; 2048x128 @ 128x128: the same 0.30 ms)."""
    if (
        type(a) is np.ndarray
        and type(b) is np.ndarray
        and 0 < a.ndim <= 2
        and 0 < b.ndim <= 2
        and (out is None or a.dtype == b.dtype and _fits_dot(out, a.dtype))
    ):
        return a.dot(b, out=out)
    # (without ``out``, the operator: some CuPy versions take ``cupy.matmul`` through a
    # generic wrapper that costs more than the product of small matrices)
    return a @ b if out is None else array_module(a).matmul(a, b, out=out)


def _product(a, b, add, out):
    """a @ b, plus ``add`` where given, into ``out`` (a new array where None)."""
    out = matrix_product(a, b, out)
    if add is not None:
        out += add
    return out


def _splits(a, b) -> bool:
    """Whether matmul(a, b) shares the product between the two threads: big products of
    matrices (2-D) or of batches of the same length."""
    return (
        _worth_a_thread(a, b)
        and a.shape[0] >= 2
        and (a.ndim == b.ndim == 2 or a.shape[:-2] == b.shape[:-2])
    )


def _worth_a_thread(a, b) -> bool:
    """Whether the product a @ b is a big NumPy product and the helper thread spins (without
    a spinning helper, BLAS shares the work between its own threads)."""
    if (
        a.size * b.shape[-1] < PRODUCT_MIN_SIZE  # rows x inner x columns (small ones: one test)
        or type(a) is not np.ndarray
        or type(b) is not np.ndarray
        or a.ndim < 2
        or b.ndim < 2
        or a.dtype != b.dtype
        or a.shape[-1] != b.shape[-2]
    ):
        return False
    helper = threads.helper()
    return helper is not None and helper.spins


def matmul_pair(first, second, outs=(None, None)) -> tuple:
    """(a1 @ b1, a2 @ b2) for ``first`` = (a1, b1) and ``second`` = (a2, b2): two independent
    products, such as the two of a matmul's backward, written into ``outs`` where given.
    Big ones run at the same time, each whole on its own core (5-8% faster than splitting
    each in halves); a pair given as None gives None, and a lone product goes to matmul."""
    pairs = (first, second)
    if first is None or second is None:
        return tuple(None if p is None else matmul(*p, out=out) for p, out in zip(pairs, outs))
    if not (_worth_a_thread(*first) and _worth_a_thread(*second)):
        return matmul(*first, out=outs[0]), matmul(*second, out=outs[1])
    products = list(outs)

    def second_product():
        products[1] = _product(*second, None, outs[1])

    def first_product():
        products[0] = _product(*first, None, outs[0])

    threads.helper().run(second_product, first_product)
    return products[0], products[1]


# -- streams: halves handed to the helper without waiting for them ------------------------
#
# Inside a transformer block every op is row-parallel: the first half of the batch's rows of
# its output needs only the first half of its inputs' rows. So a chain of such ops (a
# Linear, the attention's products, softmax, GELU, LayerNorm, the residual additions) can
# run as two *streams*: the calling thread computes every op's first half, the helper every
# op's second half, in order, and neither waits for the other after each op (a hand-off
# with a wait costs 100-300 us here: the helper takes the GIL from a thread that holds it).
# The ops that do so say ``streams = True`` (Function.apply sets ``streaming`` around their
# forward). Their halves' outputs are noted in ``_posted_writes``; before the calling thread
# reads an array whose memory overlaps one of them, it waits for the helper
# (``finish_stream``): in a stream op, through ``wait_for_writes_to``; anywhere else, at
# ``Tensor.data``, which waits whenever a stream is open. The loss, which reads every row,
# closes the stream; so does backward (its first step) and anything that reads ``.data``.

streaming = False  # True during the forward of an op that streams (Function.apply)
_posted_writes = {}  # id(memory owner) -> [owner, each posted half that writes into it]


def in_a_stream() -> bool:
    """Whether the op running now streams (its halves need not be waited for)."""
    return streaming


def wait_for_writes_to(*arrays) -> None:
    """Wait for the helper if any of ``arrays`` (None and non-arrays are skipped) overlaps
    memory that a posted half still writes."""
    if not _posted_writes:
        return
    for a in arrays:
        if type(a) is np.ndarray:
            written = _posted_writes.get(id(memory_owner(a)))
            # (may_share_memory compares the byte bounds of the two, in C: 0.4 us a test)
            if written is not None and any(np.may_share_memory(a, part) for part in written[1:]):
                finish_stream()
                return


def memory_owner(a):
    """The array that owns ``a``'s memory: ``a`` itself, or the array it is a view of."""
    return a if a.base is None else a.base


def owner_if_writable(a):
    """memory_owner(a), if each value of ``a`` can be changed in place on its own: not a
    read-only NumPy array, nor (on CuPy, whose views are never read-only) a broadcast view,
    where one memory slot stands for a whole dim of values. None otherwise."""
    if type(a) is np.ndarray:
        if not a.flags.writeable:
            return None
    elif any(stride == 0 and size > 1 for stride, size in zip(a.strides, a.shape)):
        return None
    return memory_owner(a)


def finish_stream() -> None:
    """Wait for every half this thread handed to the helper (raising the first error of
    one: the arrays it wrote are then garbage, but no longer being written)."""
    try:
        waited = threads.finish_posted()
    except BaseException:
        _posted_writes.clear()
        raise
    if waited:
        _posted_writes.clear()


if hasattr(os, "register_at_fork"):  # a child has no helper to finish a parent's halves
    os.register_at_fork(before=finish_stream)


def _share(helper, second, first, caller_reads, helper_writes) -> None:
    """``second()`` on the helper and ``first()`` here: in a stream, without waiting (after
    waiting for the helper's earlier halves if ``first`` reads what one of them writes)."""
    if streaming:
        wait_for_writes_to(*caller_reads)
        if helper.post(second):
            for part in helper_writes:
                owner = memory_owner(part)
                _posted_writes.setdefault(id(owner), [owner]).append(part)
            first()
            return
    helper.run(second, first)


def ufunc_in_halves(ufunc, a, b):
    """In a stream (see above), ufunc(a, b) of a big float NumPy result in two halves of its
    rows, each operand split along with it where it has the result's first axis (one that
    is broadcast along that axis is read whole by both halves). None where it does not
    split: the caller computes a + b (or a * b) itself, which may then read a and b."""
    if not streaming:
        return None
    shape = _shape_in_halves(a, b)
    if shape is None:
        wait_for_writes_to(a, b)
        return None
    out = np.empty(shape, np.result_type(a, b))
    half = shape[0] // 2

    def part(x, rows):
        split = type(x) is np.ndarray and x.ndim == len(shape) and x.shape[0] == shape[0]
        return x[rows] if split else x

    firsts = [part(a, slice(None, half)), part(b, slice(None, half))]
    seconds = [part(a, slice(half, None)), part(b, slice(half, None))]
    out_first, out_second = out[:half], out[half:]
    _share(
        threads.helper(),
        lambda: ufunc(*seconds, out=out_second),
        lambda: ufunc(*firsts, out=out_first),
        firsts,
        (out_second,),
    )
    return out


def _shape_in_halves(a, b):
    """The shape of ufunc(a, b) where ufunc_in_halves splits it: a big float result of two
    rows or more, from NumPy arrays and Python numbers, with the helper on. Else None."""
    size_a = a.size if type(a) is np.ndarray else 0
    size_b = b.size if type(b) is np.ndarray else 0
    if max(size_a, size_b) < PARALLEL_MIN_SIZE:  # (first: the cheap test that small ops fail)
        return None
    if (
        threads.helper() is None
        or any(type(x) not in (np.ndarray, float, int) for x in (a, b))
        or any(type(x) is np.ndarray and x.dtype.kind != "f" for x in (a, b))
    ):
        return None
    if size_a == size_b and a.shape == b.shape:  # (the residual additions: no broadcast)
        shape = a.shape
    else:
        shape = np.broadcast_shapes(np.shape(a), np.shape(b))
    return shape if shape[0] >= 2 else None


def reshaped(x, shape):
    """x.reshape(shape); in a stream, after waiting for the helper if the reshape must copy
    (a view reads nothing)."""
    if _posted_writes and type(x) is np.ndarray:
        try:
            return np.reshape(x, shape, copy=False)
        except (ValueError, TypeError):  # it must copy (or NumPy < 2.1 has no copy=False)
            wait_for_writes_to(x)
    return x.reshape(shape)


def weight_grads_posted(grad_rows, x_rows, with_bias: bool):
    """(g^T x, the column sums of g), a Linear's dL/dW and dL/db, computed on the helper
    thread *while the caller goes on*: returned at once, as arrays the helper fills in by the
    time ``threads.finish_posted()`` returns (the autograd engine calls it before it hands
    gradients to the leaves). Until then nothing may read them, nor write g or x. None (the
    caller computes them) for a product too small for a thread, or where the helper is busy
    or off."""
    if not _worth_a_thread(grad_rows.T, x_rows):
        return None
    dtype = grad_rows.dtype
    grad_w = np.empty((grad_rows.shape[1], x_rows.shape[1]), dtype)
    grad_b = np.empty(grad_rows.shape[1], dtype) if with_bias else None

    def weight_grads():
        np.matmul(grad_rows.T, x_rows, out=grad_w)
        if grad_b is not None:
            column_sums(grad_rows, out=grad_b)

    if not threads.post(weight_grads):
        return None
    return grad_w, grad_b


def empty_laid_out_like(a):
    """An uninitialized array of a's shape, dtype and memory order (its axes ordered by
    stride, as np.empty_like's order="K"), for a gradient with respect to ``a``: when ``a``
    is a transposed view, as attention's heads (B, H, T, d_k) of a (B, T, H, d_k) array,
    the transposes and reshapes that made ``a`` then undo its gradient as views, not copies.
    BLAS writes such a product in place if the matrices' rows or columns are contiguous
    (NumPy's matmul takes the latter as the transposed product); None where neither is, or
    off NumPy."""
    if type(a) is not np.ndarray or a.ndim < 2 or a.itemsize not in a.strides[-2:]:
        return None
    if a.flags.c_contiguous:
        return np.empty(a.shape, a.dtype)
    return np.empty_like(a, order="K")


def default_rng(device: str):
    """The random generator of ``device`` (see minigrad.rng for seeding)."""
    from minigrad import rng

    return rng.generator(device)


# -- fused CUDA kernels ----------------------------------------------------------------------
# On the GPU each array call is one kernel launch, about 10-20 us of Python and driver time
# however small the array, so an op written as a dozen calls costs a dozen launches. The
# kernels below do the arithmetic of such an op's NumPy lines in one launch. Each op keeps its
# plain lines (which run on CuPy arrays too); the GPU cases of the op's tests check the kernel
# against PyTorch and the composite twins, and the AdamW kernel against its lines directly.

_kernels: dict = {}


def _cached_kernel(name: str, kind: str, *definition):
    """A CuPy ElementwiseKernel or ReductionKernel (``kind``), compiled on first use and kept."""
    kernel = _kernels.get(name)
    if kernel is None:
        kernel = getattr(_import_cupy(), kind)(*definition, "minigrad_" + name)
        _kernels[name] = kernel
    return kernel


def _elementwise_kernel(name: str, inputs: str, outputs: str, body: str):
    return _cached_kernel(name, "ElementwiseKernel", inputs, outputs, body)


def fused_adam_update(p, grad, m, v, c) -> None:
    """``optim.adam.adam_update`` as one kernel (CUDA arrays): p, m and v updated in place.
    ``c`` holds the coefficients (``optim.adam.AdamCoefficients``)."""
    kernel = _elementwise_kernel(
        "adam_update",
        "T g, float64 decay, float64 wd, bool decoupled, float64 one_minus_beta1, "
        "float64 beta2, float64 one_minus_beta2, float64 bias_correction2_sqrt, "
        "float64 eps, float64 step_size",
        "T p, T m, T v",
        """
        T grad = g;
        if (wd != 0) {
            if (decoupled) p = p * (T)decay;        // p = p (1 - lr wd)
            else grad = grad + (T)wd * p;           // g = g + wd p
        }
        m = m + (grad - m) * (T)one_minus_beta1;  // m = m + (1 - beta1) (g - m)
        v = v * (T)beta2 + grad * grad * (T)one_minus_beta2;
        T denom = sqrt(v) / (T)bias_correction2_sqrt + (T)eps;
        p = p - m / denom * (T)step_size;
        """,
    )
    kernel(
        grad,
        1 - c.lr * c.weight_decay,
        c.weight_decay,
        c.decoupled,
        1 - c.beta1,
        c.beta2,
        1 - c.beta2,
        c.bias_correction2_sqrt,
        c.eps,
        c.step_size,
        p,
        m,
        v,
    )


# GELU's constants, for these kernels and for ops.activation's NumPy lines
SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
GELU_TANH_C = 0.044715  # u = sqrt(2/pi) (x + 0.044715 x^3) in the tanh form


def fused_gelu(x, approximate: str):
    """GELU of a CUDA array in one kernel: returns (y, kept), kept being what the NumPy lines
    of ``ops.activation.Gelu`` keep for backward: s = sigmoid(2u) (tanh form) or Phi(x)."""
    if approximate == "tanh":
        kernel = _elementwise_kernel(
            "gelu_tanh",
            "T x",
            "T y, T s",
            f"""
            T u = (T){SQRT_2_OVER_PI!r} * x * ((T)1 + (T){GELU_TANH_C!r} * x * x);
            s = (T)1 / ((T)1 + exp((T)-2 * u));   // (1 + tanh u) / 2
            y = x * s;
            """,
        )
    else:
        kernel = _elementwise_kernel(
            "gelu_exact",
            "T x",
            "T y, T s",
            f"""
            s = (T)0.5 * ((T)1 + erf(x * (T){1 / math.sqrt(2.0)!r}));   // Phi(x)
            y = x * s;
            """,
        )
    return kernel(x)


def fused_gelu_slope(x, kept, approximate: str):
    """dGELU/dx of a CUDA array in one kernel, from x and what ``fused_gelu`` kept."""
    if approximate == "tanh":
        kernel = _elementwise_kernel(
            "gelu_tanh_slope",
            "T x, T s",
            "T slope",
            f"""
            T du2 = (T){2 * SQRT_2_OVER_PI!r} * ((T)1 + (T){3 * GELU_TANH_C!r} * x * x);  // 2u'
            slope = s + x * s * ((T)1 - s) * du2;
            """,
        )
    else:
        kernel = _elementwise_kernel(
            "gelu_exact_slope",
            "T x, T cdf",
            "T slope",
            f"slope = cdf + x * exp((T)-0.5 * x * x) * (T){INV_SQRT_2PI!r};",
        )
    return kernel(x, kept)


def fused_centered_sum_of_squares(x, mean, axes):
    """sum over ``axes`` of (x - mean)^2 for CUDA arrays, as one reduction kernel (keepdims):
    LayerNorm's variance times n, without the (x - mean) and square temporaries."""
    kernel = _cached_kernel(
        "centered_sum_of_squares",
        "ReductionKernel",
        "T x, T mean",  # inputs
        "T y",  # output
        "(x - mean) * (x - mean)",  # each value's term
        "a + b",  # how terms combine
        "y = a",  # what the output gets
        "0",  # the sum's start
    )
    return kernel(x, mean, axis=axes, keepdims=True)


def fused_layer_norm_output(x, mean, rstd, weight, bias):
    """LayerNorm's elementwise part on CUDA arrays in one kernel: returns (xhat, y) with
    xhat = (x - mean) * rstd and y = xhat * weight + bias (weight and bias broadcast)."""
    kernel = _elementwise_kernel(
        "layer_norm_output",
        "T x, T mean, T rstd, T weight, T bias",
        "T xhat, T y",
        """
        xhat = (x - mean) * rstd;
        y = xhat * weight + bias;
        """,
    )
    return kernel(x, mean, rstd, weight, bias)


def fused_layer_norm_input_grad(grad_xhat, xhat, rstd, mean_grad_xhat, mean_grad_xhat_xhat):
    """LayerNorm's input gradient on CUDA arrays in one kernel, from its row means:
    rstd * (dL/dxhat - mean(dL/dxhat) - xhat * mean(dL/dxhat * xhat))."""
    kernel = _elementwise_kernel(
        "layer_norm_input_grad",
        "T gx, T xhat, T rstd, T mean_gx, T mean_gx_xhat",
        "T grad_x",
        "grad_x = rstd * (gx - mean_gx - xhat * mean_gx_xhat);",
    )
    return kernel(grad_xhat, xhat, rstd, mean_grad_xhat, mean_grad_xhat_xhat)
