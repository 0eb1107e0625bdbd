"""In-place updates of a Tensor: ``x += y``, ``x.add_(y)``, ``x.zero_()``, ``x[i] = v``...

The operators are there for PyTorch's hand-written training loop

    with mg.no_grad():
        w -= lr * w.grad

(without ``__isub__``, Python would run ``w = w - lr * w.grad``: a new tensor, no longer a
leaf). minigrad records no in-place op in the graph: where the graph records through a
tensor, the operators give a new node instead (as ``x = x + y`` would), and the methods
(``add_``, ``zero_``, ``copy_``...) refuse. A leaf that requires grad never changes under
grad mode: its gradient would no longer be of the values it holds.

As in ops/tensor_methods.py, each method is a plain function of ``self``, and the table at
the end of the file attaches it to Tensor.
"""

from __future__ import annotations

import numpy as np

from minigrad import backend
from minigrad.autograd.grad_mode import modes
from minigrad.errors import ShapeError
from minigrad.ops.indexing import _raw_index as raw_index
from minigrad.ops.tensor_methods import operand
from minigrad.tensor import Tensor

_OUT_OF_PLACE = {
    "add": "__add__",
    "subtract": "__sub__",
    "multiply": "__mul__",
    "divide": "__truediv__",
}
_SYMBOLS = {"add": "+=", "subtract": "-=", "multiply": "*=", "divide": "/="}


# -- x += y, x -= y, x *= y, x /= y ---------------------------------------------------------


def iadd_operator(self, other):
    return in_place(self, "add", other)


def isub_operator(self, other):
    return in_place(self, "subtract", other)


def imul_operator(self, other):
    return in_place(self, "multiply", other)


def itruediv_operator(self, other):
    return in_place(self, "divide", other)


def in_place(self: Tensor, ufunc_name: str, other):
    """self <op>= other. Where no graph is being recorded through either (grad mode off,
    or neither requires grad), self's values change in place and self keeps its shape
    and dtype. Where one is: a leaf that requires grad may not change (its gradient
    would no longer be of the values it holds), and a tensor made by an op gives the
    result as a new node of the graph, as ``x = x + y`` would."""
    symbol = _SYMBOLS[ufunc_name]
    other = operand(self, other)
    if records_graph_with(self, other, symbol):
        return getattr(self, _OUT_OF_PLACE[ufunc_name])(other)
    return write_in_place(self, ufunc_name, raw_value(other), symbol)


# -- x.add_(y), x.sub_(y), x.mul_(y), x.div_(y): PyTorch's in-place methods. Unlike the
#    operators they never fall back to a new tensor: they change self, or raise.


def add_in_place(self, other, alpha=1) -> Tensor:
    """self += alpha * other, in place; returns self."""
    return in_place_method(self, "add", other, "add_", alpha)


def sub_in_place(self, other, alpha=1) -> Tensor:
    """self -= alpha * other, in place; returns self."""
    return in_place_method(self, "subtract", other, "sub_", alpha)


def mul_in_place(self, other) -> Tensor:
    """self *= other, in place; returns self."""
    return in_place_method(self, "multiply", other, "mul_")


def div_in_place(self, other) -> Tensor:
    """self /= other, in place; returns self."""
    return in_place_method(self, "divide", other, "div_")


def in_place_method(self: Tensor, ufunc_name: str, other, name: str, alpha=1) -> Tensor:
    """add_, sub_, mul_, div_: as ``in_place``, but where the operator would give a new
    node of the graph, raise: minigrad does not record in-place ops in the graph."""
    other = operand(self, other)
    refuse_in_graph(self, other, name, f"x = x {_SYMBOLS[ufunc_name][0]} y")
    value = raw_value(other) if alpha == 1 else raw_value(other) * alpha
    return write_in_place(self, ufunc_name, value, name)


# -- writing values: zero_, fill_, copy_, x[i] = v ------------------------------------------


def zero_in_place(self):
    """Set every value to 0, in place (as add_ and the others: not on a tensor that the
    graph records through while grad mode is on)."""
    refuse_in_graph(self, None, "zero_", "mg.zeros_like(x)")
    self.array[...] = 0
    return self


def fill_in_place(self, value):
    """Set every value to ``value``, in place (see zero_)."""
    refuse_in_graph(self, value, "fill_", "mg.full_like(x, value)")
    self.array[...] = value.array if isinstance(value, Tensor) else value
    return self


def copy_in_place(self, other):
    """Overwrite the values in place (no graph), from a Tensor, array or number (see
    zero_)."""
    refuse_in_graph(self, other, "copy_", "other.clone()")
    other = other.array if isinstance(other, Tensor) else other
    if hasattr(other, "shape"):
        other = backend.to_device(other, self.device)
    self.array[...] = other
    return self


def setitem_operator(self, index, value):
    if self.requires_grad and self.grad_fn is None and modes.grad_enabled:
        raise RuntimeError(
            "in-place assignment to a leaf tensor that requires grad; "
            "wrap it in `with mg.no_grad():` or write to .data"
        )
    if self.grad_fn is not None:
        raise RuntimeError("in-place assignment to a tensor that is part of a graph")
    value = value.array if isinstance(value, Tensor) else value
    self.array[raw_index(index)] = value


# -- the checks and the write that they all share -------------------------------------------


def refuse_in_graph(self: Tensor, other, name: str, instead: str) -> None:
    """Raise where ``name`` (an in-place method) would change a tensor that the graph
    records through, self or ``other``: minigrad does not record in-place ops."""
    if records_graph_with(self, other, name):
        reason = (
            f"the tensor (shape {self.shape}) was made by {self.grad_fn.name} in the graph"
            if self.grad_fn is not None
            else "the other operand requires grad"
        )
        raise RuntimeError(
            f"{name}: minigrad does not record in-place ops in the graph, and {reason}; "
            f"use the out-of-place op ({instead}), or `with mg.no_grad():` if no "
            "gradient should flow through this update"
        )


def records_graph_with(self: Tensor, other, symbol: str) -> bool:
    """Whether ``self <op> other`` would be recorded in the graph (grad mode on and one
    of them requires grad). Raises for a leaf that requires grad: it may not change."""
    other_requires_grad = isinstance(other, Tensor) and other._requires_grad
    if not (modes.grad_enabled and (self._requires_grad or other_requires_grad)):
        return False
    if self._requires_grad and self.grad_fn is None:
        raise RuntimeError(
            f"a leaf tensor that requires grad (shape {self.shape}) is used in an "
            f"in-place operation ({symbol}); update it under `with mg.no_grad():`, "
            "as an optimizer does"
        )
    return True


def write_in_place(self: Tensor, ufunc_name: str, value, symbol: str) -> Tensor:
    """data <op>= value (an array or a number) into self's own array: same shape, dtype."""
    data = self.array
    result_shape = np.broadcast_shapes(data.shape, np.shape(value))
    if result_shape != data.shape:
        raise ShapeError(
            f"{symbol}: the result has shape {result_shape}, which does not fit in place "
            f"into the tensor of shape {data.shape}"
        )
    ufunc = getattr(backend.array_module(data), ufunc_name)
    try:
        ufunc(data, value, out=data)
    except TypeError:  # NumPy's UFuncTypeError: float into int, as PyTorch refuses too
        xp = backend.array_module(data)
        probe = xp.empty(0, value.dtype) if hasattr(value, "dtype") else value
        result_dtype = ufunc(xp.empty(0, data.dtype), probe).dtype
        raise TypeError(
            f"{symbol}: the result has dtype {result_dtype}, which cannot be written in "
            f"place into a tensor of dtype {data.dtype}; convert it first (t = t.float())"
        ) from None
    return self


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
