"""In-place updates of a Tensor: ``x += y``, ``x.add_(y)``, ``x[i] = v``, ``x.zero_()``,
``x.masked_fill_(m, v)``, ``x.scatter_(dim, index, src)``...

Outside the graph (grad mode off, or neither side requires grad) the values change in
self's own array, so that everything sharing its memory sees them (``p.data``, a slice
taken with ``t[0]``, ``np.asarray(t)``): the training loop's

    with mg.no_grad():
        w -= lr * w.grad

Inside the graph the write is recorded, as PyTorch records it (its ``CopySlices``). The
tensor stays the same Python object, and its ``grad_fn`` becomes the node of the write,
whose first input is the tensor *as it was*: a new Tensor object (``before``) that takes
over the old node as its output. The node is the out-of-place op:

    t[index] = v    t = SetItem(before, index, v)   dL/dbefore = g with 0 at index,
                                                    dL/dv = g[index] summed to v's shape
    t += u          t = Add(before, u)              (and so on for -= *= /= add_ ...)

Two things keep every gradient right:

- The new values go into a fresh array. An op earlier in the graph may have saved the old
  one for its backward (exp saves its output), and it must keep the values it saw.
- An op that read t before the write reads ``before`` in the graph: ``Context.inputs``
  follows a tensor written in place since back to the version the op saw. So
  ``x += f(x)`` and ``x[i] -= 1`` (Python runs getitem, isub, setitem) are no cycles.

PyTorch writes into the same memory instead, and refuses at backward where an op needed
the old values; minigrad computes that case's gradient. What differs, memory: after a
write inside the graph, a tensor that shared t's old memory (a slice taken before, a
``t.data``) keeps the old values, where in PyTorch it would see the new ones.

A leaf that requires grad never changes in grad mode (PyTorch's rule): its gradient would
no longer be of the values it holds. Integer tensors have no gradient: writing into one is
always a plain write.

As in ops/tensor_methods.py, each method is a plain function of ``self``, and the table at
the end of the file attaches it to Tensor.
"""

from __future__ import annotations

import weakref

import numpy as np

from minigrad import backend, versions
from minigrad.autograd.function import Context
from minigrad.autograd.grad_mode import modes, no_grad
from minigrad.errors import ShapeError
from minigrad.ops import conversion, indexing
from minigrad.ops._helpers import as_tensor_like, on_same_device
from minigrad.ops.tensor_methods import operand
from minigrad.tensor import Tensor

_OUT_OF_PLACE = {
    "add": "__add__",
    "subtract": "__sub__",
    "multiply": "__mul__",
    "divide": "__truediv__",
}
_SYMBOLS = {"add": "+=", "subtract": "-=", "multiply": "*=", "divide": "/="}


# -- x += y, x -= y, x *= y, x /= y, and add_, sub_, mul_, div_ -----------------------------


def iadd_operator(self, other):
    return in_place(self, "add", other, "+=")


def isub_operator(self, other):
    return in_place(self, "subtract", other, "-=")


def imul_operator(self, other):
    return in_place(self, "multiply", other, "*=")


def itruediv_operator(self, other):
    return in_place(self, "divide", other, "/=")


def add_in_place(self, other, alpha=1) -> Tensor:
    """self += alpha * other, in place; returns self."""
    return in_place(self, "add", other, "add_", alpha)


def sub_in_place(self, other, alpha=1) -> Tensor:
    """self -= alpha * other, in place; returns self."""
    return in_place(self, "subtract", other, "sub_", alpha)


def mul_in_place(self, other) -> Tensor:
    """self *= other, in place; returns self."""
    return in_place(self, "multiply", other, "mul_")


def div_in_place(self, other) -> Tensor:
    """self /= other, in place; returns self."""
    return in_place(self, "divide", other, "div_")


def in_place(self: Tensor, ufunc_name: str, other, symbol: str, alpha=1) -> Tensor:
    """self <op>= alpha * other; self keeps its shape and dtype. Returns self."""
    other = operand(self, other)
    if alpha != 1:
        other = other * alpha
    if not records_write(self, other, symbol):
        return write_in_place(self, ufunc_name, raw_value(other), symbol)
    return record_write(
        self, lambda before: getattr(before, _OUT_OF_PLACE[ufunc_name])(other), symbol
    )


# -- writing values: x[i] = v, zero_, fill_, copy_, masked_fill_, index_fill_, scatter_ ----


def setitem_operator(self, index, value) -> None:
    index = indexing.prepared_index(self, index)
    value = assignable(self, value)
    if records_write(self, value, "assignment"):
        record_write(self, lambda before: indexing.SetItem.apply(before, index, value), "=")
    else:
        indexing.assign(self.array, index, raw_value(value))
        versions.bump(self.array)


def zero_in_place(self) -> Tensor:
    """Set every value to 0, in place; returns self."""
    setitem_operator(self, Ellipsis, 0)
    return self


def fill_in_place(self, value) -> Tensor:
    """Set every value to ``value`` (a number or a 0-d tensor), in place; returns self."""
    indexing.check_fill_value(value, "fill_")
    setitem_operator(self, Ellipsis, value)
    return self


def copy_in_place(self, other) -> Tensor:
    """Overwrite the values with ``other``'s (a Tensor, array or number, broadcast to self's
    shape and copied to self's device); returns self. In the graph the gradient flows back
    to ``other``."""
    if isinstance(other, Tensor) and other.device != self.device:
        other = conversion.to_device(other, self.device)
    setitem_operator(self, Ellipsis, other)
    return self


def masked_fill_in_place(self, mask, value) -> Tensor:
    """Set ``value`` (a number or 0-d tensor) wherever ``mask`` (bool, broadcastable to self)
    is True, in place; returns self."""
    return write(self, value, lambda x: indexing.masked_fill(x, mask, value), "masked_fill_")


def index_fill_in_place(self, dim: int, index, value) -> Tensor:
    """Set ``value`` at ``index`` (a vector of ints) along ``dim``, in place; returns self."""
    return write(self, value, lambda x: indexing.index_fill(x, dim, index, value), "index_fill_")


def scatter_in_place(self, dim: int, index, src=None, value=None, reduce=None) -> Tensor:
    """self[i][index[i][j][k]][k] = src[i][j][k] for dim=1 (see ``mg.scatter``), in place;
    returns self. The one-hot idiom: ``mg.zeros(n, V).scatter_(1, y.unsqueeze(1), 1.0)``."""
    src = value if src is None else src
    return write(
        self, src, lambda x: indexing.scatter(x, dim, index, src, reduce=reduce), "scatter_"
    )


def scatter_add_in_place(self, dim: int, index, src) -> Tensor:
    """self[i][index[i][j][k]][k] += src[i][j][k] for dim=1, repeats adding up; returns self."""
    return write(self, src, lambda x: indexing.scatter_add(x, dim, index, src), "scatter_add_")


def write(self: Tensor, value, compute, name: str) -> Tensor:
    """self = compute(self), in place: recorded where the graph runs through self or value,
    else the result's values copied into self's array."""
    if records_write(self, value, name):
        return record_write(self, compute, name)
    with no_grad():
        result = compute(self)
    _check_fits(self, result.shape, name)
    self.array[...] = result.array.astype(self.dtype, copy=False)
    versions.bump(self.array)
    return self


# -- the checks and the writes that they all share ------------------------------------------


def records_write(self: Tensor, other, symbol: str) -> bool:
    """Whether writing ``other`` into self in place is recorded in the graph: grad mode on,
    one of them requires grad, and self can hold a gradient. Raises for a leaf that
    requires grad: it may not change."""
    other_requires_grad = isinstance(other, Tensor) and other._requires_grad
    if not (modes.grad_enabled and (self._requires_grad or other_requires_grad)):
        return False
    if self._requires_grad and self.grad_fn is None:
        raise RuntimeError(
            f"in-place {symbol} to a leaf tensor that requires grad (shape {self.shape}): a "
            "leaf Variable that requires grad is being used in an in-place operation. Update "
            "it under `with mg.no_grad():`, as an optimizer does"
            if symbol == "assignment"
            else f"a leaf tensor that requires grad (shape {self.shape}) is used in an "
            f"in-place operation ({symbol}); update it under `with mg.no_grad():`, as an "
            "optimizer does"
        )
    return self.dtype.kind == "f"


def record_write(self: Tensor, compute, symbol: str) -> Tensor:
    """Record ``self = compute(before)`` into self (see the module docstring): ``before``
    holds self's array and node; self gets the result's fresh array and node."""
    before = Tensor._make(self.array, self._requires_grad, self.grad_fn, self._output_index)
    result = compute(before)
    _check_fits(self, result.shape, symbol)
    if result.dtype != self.dtype:  # (float64 into float32 stays float32, as in PyTorch)
        result = conversion.cast(result, self.dtype)
    if self.grad_fn is not None:  # before is now the old node's output
        outputs = list(self.grad_fn.outputs)
        outputs[self._output_index] = weakref.ref(before)
        self.grad_fn.outputs = tuple(outputs)
    # hooks registered so far are for the values before the write, as in PyTorch
    before.name, before._hooks, self._hooks = self.name, self._hooks, None
    self.array, self.grad_fn, self._output_index = result.array, result.grad_fn, 0
    self._requires_grad = True
    result.grad_fn.outputs = (weakref.ref(self),)
    Context.last_write_seq = result.grad_fn.seq  # (ops that read self before: Context.inputs)
    return self


def write_in_place(self: Tensor, ufunc_name: str, value, symbol: str) -> Tensor:
    """data <op>= value (an array or a number) into self's own array: same shape, dtype."""
    data = self.array
    try:
        result_shape = np.broadcast_shapes(data.shape, np.shape(value))
    except ValueError:
        raise ShapeError(
            f"{symbol}: shapes {data.shape} and {np.shape(value)} do not broadcast"
        ) from None
    _check_fits(self, result_shape, symbol)
    ufunc = getattr(backend.array_module(data), ufunc_name)
    try:
        ufunc(data, value, out=data)
    except TypeError:  # NumPy's UFuncTypeError: float into int, as PyTorch refuses too
        raise _dtype_error(data, value, ufunc, symbol) from None
    versions.bump(data)
    return self


def _dtype_error(data, value, ufunc, symbol: str) -> TypeError:
    xp = backend.array_module(data)
    probe = xp.empty(0, value.dtype) if hasattr(value, "dtype") else value
    try:
        result_dtype = ufunc(xp.empty(0, data.dtype), probe).dtype
    except TypeError:  # (no such op at all: a string, say)
        kind = getattr(value, "dtype", type(value).__name__)
        return TypeError(f"{symbol}: a tensor of dtype {data.dtype} cannot take a {kind}")
    return TypeError(
        f"{symbol}: the result has dtype {result_dtype}, which cannot be written in "
        f"place into a tensor of dtype {data.dtype}; convert it first (t = t.float())"
    )


def _check_fits(self: Tensor, result_shape: tuple, symbol: str) -> None:
    if tuple(result_shape) != self.shape:
        raise ShapeError(
            f"{symbol}: the result has shape {tuple(result_shape)}, which does not fit in "
            f"place into the tensor of shape {self.shape}"
        )


def assignable(self: Tensor, value):
    """A value for ``self[index] = value``: a Tensor on self's device, or a Python number;
    arrays and lists become Tensors. Anything else is a TypeError, as in PyTorch."""
    if isinstance(value, Tensor):
        return on_same_device(self, value)
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, (str, bytes)) or not (
        hasattr(value, "shape") or isinstance(value, (list, tuple))
    ):
        raise TypeError(f"can't assign a {type(value).__name__} to a tensor of dtype {self.dtype}")
    value = as_tensor_like(self, value)
    if value.dtype.kind not in "biuf":
        raise TypeError(
            f"can't assign values of dtype {value.dtype} to a tensor of dtype {self.dtype}"
        )
    return value


def raw_value(value):
    """A Tensor's array, or a Python number as it is."""
    return value.array if isinstance(value, Tensor) else value


# -- the table: which function becomes which Tensor method ----------------------------------

# in-place operators
Tensor.__iadd__ = iadd_operator
Tensor.__isub__ = isub_operator
Tensor.__imul__ = imul_operator
Tensor.__itruediv__ = itruediv_operator
Tensor.__setitem__ = setitem_operator

# in-place methods
Tensor.add_ = add_in_place
Tensor.sub_ = sub_in_place
Tensor.mul_ = mul_in_place
Tensor.div_ = div_in_place
Tensor.zero_ = zero_in_place
Tensor.fill_ = fill_in_place
Tensor.copy_ = copy_in_place
Tensor.masked_fill_ = masked_fill_in_place
Tensor.index_fill_ = index_fill_in_place
Tensor.scatter_ = scatter_in_place
Tensor.scatter_add_ = scatter_add_in_place
