"""The Tensor's methods that call no op: Python's protocols (``print(t)``, ``len(t)``,
``float(t)``, ``bool(t)``) and PyTorch's conveniences (``t.numpy()``, ``t.item()``,
``t.size()``, ``t.data``, ``t.requires_grad_()``). They read or describe the array; none
records a graph node. As in ops/tensor_methods.py, each is a plain function of ``self``, and
the table at the end attaches it to Tensor.
"""

from __future__ import annotations

import numpy as np

from minigrad import backend
from minigrad.ops import conversion
from minigrad.tensor import Tensor


def data_property(self) -> Tensor:
    """The same values (shared memory) as a Tensor with no history, as in PyTorch:
    ``p.data += -lr * p.grad`` updates p outside the graph; ``p.data = t`` replaces them."""
    return self.detach()


def set_data(self, value) -> None:
    self.array = value.array if isinstance(value, Tensor) else backend.as_array(value)


def requires_grad_method(self, requires_grad: bool = True) -> Tensor:
    self.requires_grad = requires_grad
    return self


def numpy_method(self) -> np.ndarray:
    """The values as a NumPy array (copied to the CPU if on the GPU)."""
    return backend.to_numpy(self.array)


def item_method(self):
    if self.array.size != 1:
        raise ValueError(f"item(): only a one-element tensor has an item, shape is {self.shape}")
    return self.numpy().reshape(()).item()


def numel_method(self) -> int:
    return int(self.array.size)


def ndim_property(self) -> int:
    return self.array.ndim


def size_method(self, dim=None):
    return self.shape if dim is None else self.shape[dim]


def dim_method(self) -> int:
    return self.array.ndim


def nbytes_property(self) -> int:
    """Bytes the values take: numel() times the size of one (as torch.Tensor.nbytes)."""
    return int(self.array.nbytes)


def len_protocol(self) -> int:
    if self.ndim == 0:
        raise TypeError("len() of a 0-d tensor")
    return self.shape[0]


def repr_protocol(self) -> str:
    body = np.array2string(self.numpy(), separator=", ", precision=4, prefix="tensor(")
    extras = []
    if self.device != "cpu":
        extras.append(f"device='{self.device}'")
    if self.dtype not in (np.float32, np.int64, np.bool_):
        extras.append(f"dtype={self.dtype}")
    if self.grad_fn is not None:
        extras.append(f"grad_fn=<{self.grad_fn.name}>")
    elif self.requires_grad:
        extras.append("requires_grad=True")
    return "tensor(" + ", ".join([body] + extras) + ")"


def tolist_method(self):
    return self.numpy().tolist()


def float_protocol(self) -> float:
    return float(self.item())


def int_protocol(self) -> int:
    return int(self.item())


def bool_protocol(self) -> bool:
    if self.numel() != 1:
        raise RuntimeError(
            f"the truth value of a tensor of shape {self.shape} is ambiguous; use .any() or .all()"
        )
    return bool(self.item())


def zeros_like_detached(self) -> Tensor:
    """Zeros of self's shape, dtype and device, with no graph."""
    return Tensor._make(backend.array_module(self.array).zeros_like(self.array))


def norm_value(self) -> float:
    """The L2 norm as a Python float (no graph)."""
    flat = self.array.reshape(-1)
    return float(backend.array_module(flat).sqrt((flat.astype(np.float64) ** 2).sum()))


# -- the table: which function becomes which Tensor method ----------------------------------
Tensor.__repr__ = repr_protocol
Tensor.__len__ = len_protocol
Tensor.__float__ = float_protocol
Tensor.__int__ = int_protocol
Tensor.__bool__ = bool_protocol
Tensor.__index__ = conversion.index_protocol
Tensor.__format__ = conversion.format_protocol
Tensor.__array__ = conversion.array_protocol  # (np.asarray(t); __array_ufunc__ stays None)
Tensor.data = property(data_property, set_data)
Tensor.requires_grad_ = requires_grad_method
Tensor.numpy = numpy_method
Tensor.item = item_method
Tensor.numel = numel_method
Tensor.nelement = numel_method  # (PyTorch's other name for numel)
Tensor.ndim = property(ndim_property)
Tensor.size = size_method
Tensor.dim = dim_method
Tensor.nbytes = property(nbytes_property)
Tensor.tolist = tolist_method
Tensor.zeros_like_detached = zeros_like_detached
Tensor.norm_value = norm_value
