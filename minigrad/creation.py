"""Making tensors: from data, filled with a value, or random (seeded by ``mg.manual_seed``).

Floating data becomes float32 unless ``dtype`` says otherwise, even NumPy's float64 arrays
(NumPy's float64 default would otherwise make tensors float64 by accident); integer data
becomes int64.
"""

from __future__ import annotations

import numpy as np

from minigrad import backend, rng
from minigrad.errors import ShapeError
from minigrad.tensor import Tensor


def _default_dtype(array, dtype):
    if dtype is not None:
        return np.dtype(dtype)
    kind = array.dtype.kind
    if kind == "f":
        return np.dtype(np.float32)
    if kind in "iu":
        return np.dtype(np.int64)
    if kind == "b":
        return np.dtype(np.bool_)
    raise TypeError(f"tensor: cannot make a tensor from data of dtype {array.dtype}")


def tensor(data, dtype=None, device="cpu", requires_grad: bool = False) -> Tensor:
    """A new leaf tensor holding a copy of ``data`` (list, number, array or Tensor)."""
    device = backend.check_device(device)
    if isinstance(data, Tensor):
        data = data.array
    xp = backend.xp_for(device)
    if not backend.is_numpy(data) and device == "cpu" and hasattr(data, "get"):
        data = data.get()
    array = xp.array(data)
    array = array.astype(_default_dtype(array, dtype), copy=False)
    return Tensor(array, requires_grad=requires_grad)


def _shape(shape) -> tuple:
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        return tuple(shape[0])
    return tuple(shape)


def _filled(fill, shape, dtype, device, requires_grad):
    device = backend.check_device(device)
    array = backend.xp_for(device).full(shape, fill, dtype=np.dtype(dtype or np.float32))
    return Tensor(array, requires_grad=requires_grad)


def zeros(*shape, dtype=None, device="cpu", requires_grad=False) -> Tensor:
    return _filled(0, _shape(shape), dtype, device, requires_grad)


def ones(*shape, dtype=None, device="cpu", requires_grad=False) -> Tensor:
    return _filled(1, _shape(shape), dtype, device, requires_grad)


def empty(*shape, dtype=None, device="cpu", requires_grad=False) -> Tensor:
    return _filled(0, _shape(shape), dtype, device, requires_grad)


def full(shape, fill_value, dtype=None, device="cpu", requires_grad=False) -> Tensor:
    if isinstance(shape, int):
        shape = (shape,)
    if dtype is None and isinstance(fill_value, bool):
        dtype = np.bool_
    elif dtype is None and isinstance(fill_value, int):
        dtype = np.int64
    return _filled(fill_value, tuple(shape), dtype, device, requires_grad)


def zeros_like(t: Tensor, dtype=None, requires_grad=False) -> Tensor:
    return _filled(0, t.shape, dtype or t.dtype, t.device, requires_grad)


def ones_like(t: Tensor, dtype=None, requires_grad=False) -> Tensor:
    return _filled(1, t.shape, dtype or t.dtype, t.device, requires_grad)


def full_like(t: Tensor, fill_value, dtype=None, requires_grad=False) -> Tensor:
    return _filled(fill_value, t.shape, dtype or t.dtype, t.device, requires_grad)


def arange(start, end=None, step=1, dtype=None, device="cpu", requires_grad=False) -> Tensor:
    """arange(n) or arange(start, end, step); int64 for integer arguments, else float32."""
    if end is None:
        start, end = 0, start
    device = backend.check_device(device)
    integer = all(isinstance(v, (int, np.integer)) for v in (start, end, step))
    dtype = np.dtype(dtype) if dtype is not None else np.dtype(np.int64 if integer else np.float32)
    array = backend.xp_for(device).arange(start, end, step).astype(dtype)
    return Tensor(array, requires_grad=requires_grad)


def linspace(start, end, steps, dtype=None, device="cpu", requires_grad=False) -> Tensor:
    device = backend.check_device(device)
    array = backend.xp_for(device).linspace(start, end, steps).astype(dtype or np.float32)
    return Tensor(array, requires_grad=requires_grad)


def eye(n, m=None, dtype=None, device="cpu", requires_grad=False) -> Tensor:
    device = backend.check_device(device)
    array = backend.xp_for(device).eye(n, m, dtype=np.dtype(dtype or np.float32))
    return Tensor(array, requires_grad=requires_grad)


def randn(*shape, dtype=None, device="cpu", requires_grad=False) -> Tensor:
    """Standard normal samples."""
    device = backend.check_device(device)
    dtype = np.dtype(dtype or np.float32)
    array = rng.generator(device).standard_normal(_shape(shape), dtype=np.float64).astype(dtype)
    return Tensor(array, requires_grad=requires_grad)


def rand(*shape, dtype=None, device="cpu", requires_grad=False) -> Tensor:
    """Uniform samples from [0, 1)."""
    device = backend.check_device(device)
    dtype = np.dtype(dtype or np.float32)
    array = rng.generator(device).random(_shape(shape)).astype(dtype)
    return Tensor(array, requires_grad=requires_grad)


def randint(low, high=None, size=(), dtype=None, device="cpu") -> Tensor:
    """Integers from [low, high) (or [0, low) when high is omitted)."""
    if high is None:
        low, high = 0, low
    device = backend.check_device(device)
    array = rng.generator(device).integers(low, high, size=tuple(size))
    return Tensor(backend.xp_for(device).asarray(array).astype(dtype or np.int64))


def multinomial(input: Tensor, num_samples: int, replacement: bool = False) -> Tensor:  # noqa: A002
    """Indices drawn from the categories of each row of ``input``, category j with
    probability input[j] / sum(input): weights need not sum to 1, only be >= 0.

    input: (C,) or (N, C) floats -> int64 (num_samples,) or (N, num_samples), on input's
    device. Without replacement a category is drawn at most once per row, so num_samples
    may not exceed C. Draws from minigrad's generator: ``mg.manual_seed`` repeats them.
    """
    weights = _checked_weights(input, num_samples, replacement)
    rows = weights.reshape(-1, weights.shape[-1])  # (N, C): a 1-D input is one row
    generator = rng.generator(input.device)
    if replacement:
        indices = _draw_with_replacement(rows, num_samples, generator)
    else:
        indices = _draw_without_replacement(rows, num_samples, generator)
    return Tensor(indices.reshape(weights.shape[:-1] + (num_samples,)))


def _draw_with_replacement(rows, num_samples: int, generator):
    """Inverse CDF: with cdf the running sums of a row scaled to end at exactly 1, a uniform
    u in [0, 1) falls in category j where cdf[j-1] <= u < cdf[j], an interval as wide as
    category j's probability (zero-width for a zero weight, which is never drawn)."""
    xp = backend.array_module(rows)
    cdf = xp.cumsum(rows, axis=-1)
    cdf /= cdf[:, -1:]  # (x / x is exactly 1: the last interval ends at 1 > u)
    uniforms = generator.random((rows.shape[0], num_samples))
    picks = [xp.searchsorted(cdf[i], uniforms[i], side="right") for i in range(rows.shape[0])]
    return xp.stack(picks).astype(np.int64)


def _draw_without_replacement(rows, num_samples: int, generator):
    """Draw, remove, renormalize, repeat, all at once (the exponential race, as PyTorch
    does): with E_j ~ Exp(1), w_j / E_j is largest for category j with probability
    w_j / sum(w), and the order of the largest keys is that of drawing one at a time."""
    xp = backend.array_module(rows)
    exponentials = -xp.log1p(-generator.random(rows.shape))  # -log(1 - u), u in [0, 1)
    keys = rows / exponentials  # (E = 0 has probability 2^-53: an infinite key, drawn first)
    return xp.argsort(-keys, axis=-1)[:, :num_samples].astype(np.int64)


def _checked_weights(input: Tensor, num_samples: int, replacement: bool):  # noqa: A002
    """input's array as float64, after PyTorch's checks, each error naming what was wrong."""
    if input.ndim not in (1, 2):
        raise ShapeError(f"multinomial: input must be 1-D or 2-D, got shape {input.shape}")
    if input.dtype.kind != "f":
        raise TypeError(f"multinomial: input must be floating point, got {input.dtype}")
    categories = input.shape[-1]
    if num_samples <= 0:
        raise ValueError(f"multinomial: cannot draw num_samples={num_samples} <= 0 samples")
    if not replacement and num_samples > categories:
        raise ValueError(
            f"multinomial: cannot draw {num_samples} samples without replacement from "
            f"{categories} categories (input of shape {input.shape}); pass replacement=True"
        )
    weights = input.array.astype(np.float64)
    xp = backend.array_module(weights)
    if not bool(xp.isfinite(weights).all()) or bool((weights < 0).any()):
        raise ValueError("multinomial: the weights contain inf, nan or a value < 0")
    if bool((weights.sum(axis=-1) <= 0).any()):
        raise ValueError("multinomial: a row of weights sums to 0 (nothing to draw from)")
    drawable = (weights > 0).sum(axis=-1)
    if not replacement and bool((drawable < num_samples).any()):
        raise ValueError(
            f"multinomial: cannot draw {num_samples} samples without replacement from a row "
            f"with only {int(drawable.min())} categories of weight > 0"
        )
    return weights


def randn_like(t: Tensor, dtype=None) -> Tensor:
    return randn(*t.shape, dtype=dtype or t.dtype, device=t.device)


def rand_like(t: Tensor, dtype=None) -> Tensor:
    return rand(*t.shape, dtype=dtype or t.dtype, device=t.device)


def from_numpy(array: np.ndarray) -> Tensor:
    """A tensor that shares memory with ``array`` and keeps its dtype."""
    return Tensor(np.asarray(array))
