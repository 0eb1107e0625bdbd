"""Changing dtype or device, or copying, differentiably: the gradient goes back the way it
came. And the protocols that turn a tensor into something else: ``np.asarray(t)``, ``t`` as
an index, ``f"{t:.4f}"``, ``t.type()``."""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from minigrad.autograd.function import Function
from minigrad.backend import device_of
from minigrad.backend import to_device as _move


class Cast(Function):
    # y = x as another dtype;  dL/dx = g as x's dtype
    @staticmethod
    def forward(ctx, x, dtype):
        ctx.input_dtype = x.dtype
        return x.astype(dtype)

    @staticmethod
    def backward(ctx, grad):
        return cast(grad, ctx.input_dtype), None


class ToDevice(Function):
    # y = x copied to another device;  dL/dx = g copied back
    @staticmethod
    def forward(ctx, x, device):
        ctx.input_device = device_of(x)
        return _move(x, device)

    @staticmethod
    def backward(ctx, grad):
        return to_device(grad, ctx.input_device), None


class Clone(Function):
    # y = a copy of x in new memory;  dL/dx = g
    @staticmethod
    def forward(ctx, x):
        return x.copy()

    @staticmethod
    def backward(ctx, grad):
        return grad


def clone(x):
    """A copy of ``x`` that owns its memory (writing to it leaves x alone), still in the
    graph: the gradient flows back to x unchanged."""
    return Clone.apply(x)


def cast(x, dtype):
    return x if x.dtype == dtype else Cast.apply(x, dtype)


def to_device(x, device: str):
    return x if x.device == device else ToDevice.apply(x, device)


MaxResult = namedtuple("MaxResult", ["values", "indices"])


# -- Python's and NumPy's protocols: np.asarray(t), data[t], f"{t:.4f}", t.type() ----------


def array_protocol(self, dtype=None, copy=None):
    """``np.asarray(t)``: the values as a NumPy array, sharing t's memory (as PyTorch's,
    CPU only, and not for a tensor that requires grad: use ``t.detach()``)."""
    if device_of(self.array) != "cpu":
        raise TypeError(
            f"can't convert {self.device} tensor to numpy (shape {self.shape}); use "
            "Tensor.cpu() to copy the tensor to host memory first"
        )
    if self.requires_grad:
        raise RuntimeError(
            "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead."
        )
    array = self.array
    if dtype is not None and np.dtype(dtype) != array.dtype:
        if copy is False:
            raise ValueError(f"np.asarray: converting {array.dtype} to {dtype} needs a copy")
        return array.astype(dtype)
    return array.copy() if copy else array


def index_protocol(self) -> int:
    """A one-element integer tensor as a Python int wherever Python wants an index
    (``data[i:i + T]`` with ``i`` from ``mg.randint``)."""
    if self.numel() != 1 or self.dtype.kind not in "biu":
        raise TypeError(
            "only integer tensors of a single element can be converted to an index (got "
            f"dtype {self.dtype}, shape {self.shape})"
        )
    return int(self.item())


def format_protocol(self, spec: str) -> str:
    """``f"{loss:.4f}"``: a 0-d tensor formats as its number, as in PyTorch; any other tensor
    takes only the empty spec (its repr)."""
    if self.ndim == 0:
        return format(self.item(), spec)
    return object.__format__(self, spec)


_TYPE_NAMES = {
    np.dtype(np.float32): "FloatTensor",
    np.dtype(np.float64): "DoubleTensor",
    np.dtype(np.float16): "HalfTensor",
    np.dtype(np.int64): "LongTensor",
    np.dtype(np.int32): "IntTensor",
    np.dtype(np.int16): "ShortTensor",
    np.dtype(np.int8): "CharTensor",
    np.dtype(np.uint8): "ByteTensor",
    np.dtype(np.bool_): "BoolTensor",
}


def type_method(self, dtype=None, non_blocking: bool = False):
    """``t.type()``: PyTorch's name of t's type ('torch.FloatTensor', 'torch.cuda.LongTensor');
    ``t.type(mg.int64)`` or ``t.type('torch.LongTensor')``: t converted (t itself if it is
    that type already)."""
    if dtype is None:
        prefix = "torch." if self.device == "cpu" else "torch.cuda."
        return prefix + _TYPE_NAMES.get(self.dtype, f"{self.dtype.name}Tensor")
    device = None
    if getattr(dtype, "__name__", None) in _TYPE_NAMES.values():
        dtype = f"torch.{dtype.__name__}"  # (mg.LongTensor, PyTorch's legacy constructor)
    if isinstance(dtype, str):
        device = "cuda" if dtype.startswith("torch.cuda.") else "cpu"
        name = dtype.rsplit(".", 1)[-1]
        matches = [d for d, type_name in _TYPE_NAMES.items() if type_name == name]
        if not matches or not dtype.startswith("torch."):
            raise ValueError(
                f"type(): invalid type {dtype!r}; expected a dtype or a name such as "
                "'torch.FloatTensor'"
            )
        dtype = matches[0]
    result = cast(self, np.dtype(dtype))
    return result if device is None else to_device(result, device)
