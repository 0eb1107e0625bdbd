"""Small helpers shared by the op modules (not ops themselves)."""

from __future__ import annotations

import numpy as np

from minigrad.backend import array_module
from minigrad.errors import DeviceError, OutOfRangeError
from minigrad.tensor import Tensor


def xp_of(array):
    """numpy or cupy, whichever holds ``array``."""
    return np if type(array) is np.ndarray else array_module(array)


def shape_of(value):
    """The shape of an array argument, or None for a Python number (which gets no grad)."""
    return getattr(value, "shape", None)


def normalize_dims(dim, ndim: int) -> tuple:
    """dim=None -> all axes; an int or a tuple -> a sorted tuple of non-negative axes."""
    if dim is None:
        return tuple(range(ndim))
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    normalized = []
    for d in dims:
        if not -max(ndim, 1) <= d < max(ndim, 1):
            raise OutOfRangeError(
                f"dim {d} is out of range for a tensor with {ndim} dims "
                f"(expected -{max(ndim, 1)} <= dim < {max(ndim, 1)})"
            )
        normalized.append(d % max(ndim, 1))
    if ndim == 0:  # dim 0 or -1 of a 0-d tensor (allowed, as in PyTorch): nothing to reduce
        return ()
    return tuple(sorted(set(normalized)))


def normalize_dim(dim: int, ndim: int, op: str) -> int:
    """One dim as a non-negative axis (-1 is the last), or an error naming ``op``."""
    size = max(ndim, 1)
    if not -size <= dim < size:
        raise OutOfRangeError(
            f"{op}: dim {dim} is out of range for a tensor with {ndim} dims "
            f"(expected {-size} <= dim < {size})"
        )
    return dim % size


def count_in(shape: tuple, dims) -> int:
    """How many values ``dims`` of ``shape`` hold: the n of a mean over them."""
    count = 1
    for axis in dims:
        count *= shape[axis]
    return count


def sum_array_to(x, shape: tuple):
    """The array ``x`` summed over the dims that broadcasting added to ``shape`` or stretched
    from 1 in it: the gradient of a broadcast input."""
    lead = x.ndim - len(shape)
    stretched = tuple(
        lead + i for i, size in enumerate(shape) if size == 1 and x.shape[lead + i] != 1
    )
    summed = x.sum(axis=tuple(range(lead)) + stretched, keepdims=True) if lead or stretched else x
    return summed.reshape(shape)


def kept_shape(shape: tuple, dims: tuple) -> tuple:
    """The shape a reduction over ``dims`` has with keepdim=True: those dims set to 1."""
    return tuple(1 if axis in dims else size for axis, size in enumerate(shape))


def as_tensor_like(like: Tensor, value) -> Tensor:
    """``value`` (a Tensor, array, list or number) as a Tensor on like's device, a float one
    in like's float dtype (float32 if ``like`` is not a float tensor)."""
    if isinstance(value, Tensor):
        return on_same_device(like, value)
    array = array_module(like.array).asarray(value)
    if array.dtype.kind == "f" or array.dtype == np.float64:
        array = array.astype(like.dtype if like.dtype.kind == "f" else np.float32, copy=False)
    return Tensor._make(array)


def as_index(like: Tensor, value) -> Tensor:
    """Integer indices (a Tensor, array or list) as an int64 Tensor on like's device."""
    if isinstance(value, Tensor):
        return on_same_device(like, value)
    array = array_module(like.array).asarray(value)
    return Tensor._make(array.astype(np.int64) if array.dtype.kind in "iu" else array)


def on_same_device(like: Tensor, other: Tensor) -> Tensor:
    """``other`` as it is, or a DeviceError if it lives on another device than ``like``."""
    if type(other.array) is not type(like.array) and other.device != like.device:
        raise DeviceError(
            f"expected both tensors on the same device, got {like.shape} on {like.device} "
            f"and {other.shape} on {other.device}; move one with .to(device)"
        )
    return other
