"""Making tensors: from data, filled with a value, or random (seeded by ``mg.manual_seed``).

Floating data becomes float32 unless ``dtype`` says otherwise, even NumPy's float64 arrays
(NumPy's float64 default would otherwise make tensors float64 by accident); integer data
becomes int64.
"""

from __future__ import annotations

import numpy as np

from minigrad import backend, rng
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
        data = data.data
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


def randn_like(t: Tensor, dtype=None) -> Tensor:
    return randn(*t.shape, dtype=dtype or t.dtype, device=t.device)


def rand_like(t: Tensor, dtype=None) -> Tensor:
    return rand(*t.shape, dtype=dtype or t.dtype, device=t.device)


def from_numpy(array: np.ndarray) -> Tensor:
    """A tensor that shares memory with ``array`` and keeps its dtype."""
    return Tensor(np.asarray(array))
