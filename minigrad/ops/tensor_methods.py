"""The Tensor's methods that call an op: ``t + u``, ``t @ w``, ``t[i]``, ``t.exp()``,
``t.sum(dim)``, ``t.reshape(...)``, ``t.to("cuda")``, ``t == u``...

They live here, not in tensor.py, so that imports go one way: tensor.py defines what a
Tensor is and imports no op; the ops import Tensor, and this module, imported last by the
ops package, attaches the methods that call them. Each method is a plain function of
``self`` below (``add_operator`` becomes ``Tensor.__add__``, ``exp_method`` becomes
``Tensor.exp``), and the table at the end of the file attaches them, one line each.
In-place updates (``t += u``, ``t.add_(u)``, ``t[i] = v``) are in ops/inplace.py; the
methods that call no op (``print(t)``, ``t.numpy()``, ``t.item()``) in ops/tensor_protocols.py.
"""

from __future__ import annotations

import numpy as np

from minigrad import backend
from minigrad.errors import ShapeError
from minigrad.ops import (
    activation,
    arithmetic,
    conversion,
    indexing,
    linalg,
    ordering,
    pointwise,
    reduce,
    triangle,
    unary,
)
from minigrad.ops import shape as shape_ops  # (``shape`` is an argument's name below)
from minigrad.ops._helpers import as_tensor_like
from minigrad.ops.shape import _shape_arg as shape_arg
from minigrad.tensor import Tensor

# -- operands: what a Tensor may meet in an operator ----------------------------------------


def operand(self: Tensor, other):
    """A Tensor or Python number to combine with self (arrays and lists become Tensors)."""
    if isinstance(other, Tensor):
        return other
    if isinstance(other, np.generic):  # np.float64(2.0) acts as 2.0: it never upcasts float32
        return other.item()
    if isinstance(other, (int, float, bool)):
        return other
    if isinstance(other, complex):
        raise TypeError("complex numbers are not supported")
    if isinstance(other, (str, bytes)) or other is None:
        raise TypeError(f"unsupported operand type(s): 'Tensor' and '{type(other).__name__}'")
    other = as_tensor_like(self, other)
    if other.dtype.kind not in "biuf":  # (lists of strings, objects)
        raise TypeError(f"unsupported operand: a Tensor and values of dtype {other.dtype}")
    return other


def promoted(self: Tensor, other) -> Tensor:
    """An integer tensor meeting a float number turns float32 first, as in PyTorch."""
    if isinstance(other, float) and self.array.dtype.kind in "biu":
        return self.float()
    if isinstance(other, Tensor) and other.dtype.kind == "f" and self.dtype.kind in "biu":
        return self.to(other.dtype)
    return self


# -- arithmetic operators: t + u, 2 * t, t @ w, -t ------------------------------------------


def add_operator(self, other):
    other = operand(self, other)
    return arithmetic.add(promoted(self, other), other)


def radd_operator(self, other):
    other = operand(self, other)
    return arithmetic.add(other, promoted(self, other))


def sub_operator(self, other):
    other = operand(self, other)
    return arithmetic.sub(promoted(self, other), other)


def rsub_operator(self, other):
    other = operand(self, other)
    return arithmetic.sub(other, promoted(self, other))


def mul_operator(self, other):
    other = operand(self, other)
    return arithmetic.mul(promoted(self, other), other)


def rmul_operator(self, other):
    other = operand(self, other)
    return arithmetic.mul(other, promoted(self, other))


def truediv_operator(self, other):
    other = operand(self, other)
    return arithmetic.div(promoted(self, 1.0), other)


def rtruediv_operator(self, other):
    other = operand(self, other)
    return arithmetic.div(other, promoted(self, 1.0))


def pow_operator(self, other):
    other = operand(self, other)
    return arithmetic.pow(promoted(self, other), other)


def rpow_operator(self, other):
    other = operand(self, other)
    return arithmetic.pow(other, promoted(self, 1.0))


def matmul_operator(self, other):
    return linalg.matmul(self, operand(self, other))


def rmatmul_operator(self, other):
    return linalg.matmul(operand(self, other), self)


def neg_operator(self):
    return arithmetic.neg(self)


def getitem_operator(self, index):
    return indexing.getitem(self, index)


# -- comparisons: bool tensors, no gradient -------------------------------------------------


def compare(self, other, comparison):
    """``comparison(self.array, other)`` as a bool Tensor outside the graph."""
    other = other.array if isinstance(other, Tensor) else other
    try:
        return Tensor._make(comparison(self.array, other))
    except ValueError as error:
        raise ShapeError(
            f"comparison: shapes {self.shape} and {np.shape(other)} do not broadcast ({error})"
        ) from None


def eq_operator(self, other):
    return compare(self, other, lambda a, b: a == b)


def ne_operator(self, other):
    return compare(self, other, lambda a, b: a != b)


def lt_operator(self, other):
    return compare(self, other, lambda a, b: a < b)


def le_operator(self, other):
    return compare(self, other, lambda a, b: a <= b)


def gt_operator(self, other):
    return compare(self, other, lambda a, b: a > b)


def ge_operator(self, other):
    return compare(self, other, lambda a, b: a >= b)


def and_operator(self, other):
    return compare(self, other, lambda a, b: a & b)


def or_operator(self, other):
    return compare(self, other, lambda a, b: a | b)


def invert_operator(self):
    return Tensor._make(~self.array)


# -- elementwise math -----------------------------------------------------------------------


def exp_method(self):
    return unary.exp(self)


def log_method(self):
    return unary.log(self)


def sqrt_method(self):
    return unary.sqrt(self)


def tanh_method(self):
    return unary.tanh(self)


def sigmoid_method(self):
    return unary.sigmoid(self)


def relu_method(self):
    return unary.relu(self)


def abs_method(self):
    return unary.abs(self)


def clamp_method(self, min=None, max=None):  # noqa: A002
    return unary.clamp(self, min, max)


def softmax_method(self, dim=-1):
    return activation.softmax(self, dim)


def log_softmax_method(self, dim=-1):
    return activation.log_softmax(self, dim)


# -- reductions: the functions of ops/reduce.py and ops/ordering.py (self is their first
# argument), attached in the table below


# -- shape ----------------------------------------------------------------------------------


def reshape_method(self, *shape):
    return shape_ops.reshape(self, *shape)


def view_method(self, *shape):
    return shape_ops.reshape(self, *shape)


def transpose_method(self, dim0: int, dim1: int):
    return shape_ops.transpose(self, dim0, dim1)


def permute_method(self, *dims):
    return shape_ops.permute(self, *dims)


def T_property(self):
    if self.ndim != 2:
        raise ValueError(f".T needs a 2-D tensor, got shape {self.shape}; use .transpose()")
    return shape_ops.transpose(self, 0, 1)


def mT_property(self):
    return shape_ops.transpose(self, -2, -1)


def unsqueeze_method(self, dim: int):
    return shape_ops.unsqueeze(self, dim)


def squeeze_method(self, dim=None):
    return shape_ops.squeeze(self, dim)


def flatten_method(self, start_dim: int = 0, end_dim: int = -1):
    return shape_ops.flatten(self, start_dim, end_dim)


def expand_as_method(self, other):
    return shape_ops.expand(self, other.shape)


def view_as_method(self, other):
    return shape_ops.reshape(self, other.shape)


def t_method(self):
    """The transpose of a matrix (a tensor of at most 2 dims is returned as it is)."""
    if self.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {self.ndim}D")
    return shape_ops.transpose(self, 0, 1) if self.ndim == 2 else self


def unbind_method(self, dim: int = 0):
    """The slices along dim, as a tuple of tensors without that dim."""
    dim = shape_ops.normalize_dim(dim, self.ndim, "unbind")
    return tuple(self[(slice(None),) * dim + (i,)] for i in range(self.shape[dim]))


def narrow_method(self, dim: int, start: int, length: int):
    """The entries start .. start + length - 1 along dim."""
    dim = shape_ops.normalize_dim(dim, self.ndim, "narrow")
    if not 0 <= start % max(self.shape[dim], 1) + length <= self.shape[dim] or length < 0:
        raise RuntimeError(
            f"narrow: start ({start}) + length ({length}) exceeds dimension size "
            f"({self.shape[dim]}) of dim {dim}"
        )
    start = start % self.shape[dim] if self.shape[dim] else 0
    return self[(slice(None),) * dim + (slice(start, start + length),)]


def contiguous_method(self):
    return self


# -- indexing, linear algebra, copies -------------------------------------------------------


def masked_fill_method(self, mask, value):
    return indexing.masked_fill(self, mask, value)


def split_method(self, split_size, dim: int = 0):
    return indexing.split(self, split_size, dim)


def chunk_method(self, chunks: int, dim: int = 0):
    return indexing.chunk(self, chunks, dim)


def matmul_method(self, other):
    return linalg.matmul(self, other)


def masked_select_method(self, mask):
    """The entries where ``mask`` (broadcast with self) is True, as a 1-D tensor."""
    shape = np.broadcast_shapes(self.shape, tuple(mask.shape))
    return shape_ops.broadcast_to(self, shape)[shape_ops.broadcast_to(mask, shape).array]


def clone_method(self):
    """A copy in new memory, still in the graph: the gradient flows back unchanged."""
    return conversion.clone(self)


def tril_method(self, diagonal: int = 0):
    """The lower triangle of the last two dims; see ``mg.tril``."""
    return triangle.tril(self, diagonal)


def triu_method(self, diagonal: int = 0):
    """The upper triangle of the last two dims; see ``mg.triu``."""
    return triangle.triu(self, diagonal)


# -- device and dtype -----------------------------------------------------------------------


def to_method(self, *args, **kwargs) -> Tensor:
    """``t.to("cuda")``, ``t.to(mg.float64)`` or both; differentiable."""
    device, dtype = backend.device_and_dtype(args, kwargs)
    result = self
    if dtype is not None and dtype != self.dtype:
        result = conversion.cast(result, dtype)
    if device is not None and device != result.device:
        result = conversion.to_device(result, device)
    return result


def cpu_method(self) -> Tensor:
    return self.to("cpu")


def cuda_method(self) -> Tensor:
    return self.to("cuda")


def float_method(self) -> Tensor:
    return self.to(np.float32)


def double_method(self) -> Tensor:
    return self.to(np.float64)


def long_method(self) -> Tensor:
    return self.to(np.int64)


def bool_method(self) -> Tensor:
    return self.to(np.bool_)


def type_as_method(self, other: Tensor) -> Tensor:
    return self.to(other.dtype)


# -- non-differentiable helpers -------------------------------------------------------------


def new_tensor_method(self, data, dtype=None, device=None, requires_grad=False) -> Tensor:
    """``data`` as a new tensor, by default of self's dtype and device."""
    from minigrad.creation import tensor

    return tensor(
        data, dtype=dtype or self.dtype, device=device or self.device, requires_grad=requires_grad
    )


def new_full_method(self, size, fill_value, dtype=None, device=None, requires_grad=False):
    """A tensor of ``size`` full of ``fill_value``, by default of self's dtype and device."""
    xp = backend.xp_for(device or self.device)
    array = xp.full(tuple(shape_arg((size,))), fill_value, dtype=dtype or self.dtype)
    return Tensor(array, requires_grad=requires_grad)


def new_zeros_method(self, *size, dtype=None, device=None, requires_grad=False):
    return new_full_method(self, shape_arg(size), 0, dtype, device, requires_grad)


def new_ones_method(self, *size, dtype=None, device=None, requires_grad=False):
    return new_full_method(self, shape_arg(size), 1, dtype, device, requires_grad)


def new_empty_method(self, *size, dtype=None, device=None, requires_grad=False):
    return new_full_method(self, shape_arg(size), 0, dtype, device, requires_grad)


def isnan_method(self) -> Tensor:
    return Tensor._make(backend.array_module(self.array).isnan(self.array))


def isinf_method(self) -> Tensor:
    return Tensor._make(backend.array_module(self.array).isinf(self.array))


def isfinite_method(self) -> Tensor:
    return Tensor._make(backend.array_module(self.array).isfinite(self.array))


# -- the table: which function becomes which Tensor method ----------------------------------
# arithmetic operators (Python looks them up on the class, so setting them there works)
Tensor.__add__ = add_operator
Tensor.__radd__ = radd_operator
Tensor.__sub__ = sub_operator
Tensor.__rsub__ = rsub_operator
Tensor.__mul__ = mul_operator
Tensor.__rmul__ = rmul_operator
Tensor.__truediv__ = truediv_operator
Tensor.__rtruediv__ = rtruediv_operator
Tensor.__pow__ = pow_operator
Tensor.__rpow__ = rpow_operator
Tensor.__matmul__ = matmul_operator
Tensor.__rmatmul__ = rmatmul_operator
Tensor.__neg__ = neg_operator
Tensor.__getitem__ = getitem_operator

# comparisons (elementwise; tensor.py keeps __hash__ = object.__hash__, hashing by identity)
Tensor.__eq__ = eq_operator
Tensor.__ne__ = ne_operator
Tensor.__lt__ = lt_operator
Tensor.__le__ = le_operator
Tensor.__gt__ = gt_operator
Tensor.__ge__ = ge_operator
Tensor.__and__ = and_operator
Tensor.__or__ = or_operator
Tensor.__invert__ = invert_operator

# elementwise math
Tensor.exp = exp_method
Tensor.log = log_method
Tensor.sqrt = sqrt_method
Tensor.tanh = tanh_method
Tensor.sigmoid = sigmoid_method
Tensor.relu = relu_method
Tensor.abs = abs_method
Tensor.clamp = clamp_method
Tensor.softmax = softmax_method
Tensor.log_softmax = log_softmax_method
# (the functions of ops/unary.py and ops/pointwise.py take the tensor first: they are the
# methods as they are)
Tensor.log2 = unary.log2
Tensor.log10 = unary.log10
Tensor.log1p = unary.log1p
Tensor.expm1 = unary.expm1
Tensor.rsqrt = unary.rsqrt
Tensor.reciprocal = unary.reciprocal
Tensor.square = unary.square
Tensor.sin = unary.sin
Tensor.cos = unary.cos
Tensor.sign = unary.sign
Tensor.floor = unary.floor
Tensor.ceil = unary.ceil
Tensor.round = unary.round
Tensor.trunc = unary.trunc
Tensor.clamp_min = unary.clamp_min
Tensor.clamp_max = unary.clamp_max
Tensor.neg = arithmetic.neg
Tensor.pow = pointwise.pow
Tensor.maximum = pointwise.maximum
Tensor.minimum = pointwise.minimum

# reductions
Tensor.sum = reduce.sum
Tensor.mean = reduce.mean
Tensor.var = reduce.var
Tensor.std = reduce.std
Tensor.amax = reduce.amax
Tensor.amin = reduce.amin
Tensor.norm = reduce.norm
Tensor.logsumexp = reduce.logsumexp
Tensor.cumsum = reduce.cumsum
Tensor.all = reduce.all
Tensor.any = reduce.any
Tensor.max = ordering.max
Tensor.min = ordering.min
Tensor.argmax = ordering.argmax
Tensor.argmin = ordering.argmin
Tensor.topk = ordering.topk
Tensor.sort = ordering.sort
Tensor.argsort = ordering.argsort
Tensor.gather = ordering.gather
Tensor.take_along_dim = ordering.take_along_dim

# shape
Tensor.reshape = reshape_method
Tensor.view = view_method
Tensor.transpose = transpose_method
Tensor.permute = permute_method
Tensor.T = property(T_property)
Tensor.mT = property(mT_property)
Tensor.unsqueeze = unsqueeze_method
Tensor.squeeze = squeeze_method
Tensor.flatten = flatten_method
Tensor.expand = shape_ops.expand
Tensor.expand_as = expand_as_method
Tensor.view_as = view_as_method
Tensor.flip = shape_ops.flip
Tensor.roll = shape_ops.roll
Tensor.repeat = shape_ops.repeat
Tensor.t = t_method
Tensor.unbind = unbind_method
Tensor.narrow = narrow_method
Tensor.contiguous = contiguous_method

# indexing, linear algebra, copies
Tensor.masked_fill = masked_fill_method
Tensor.split = split_method
Tensor.chunk = chunk_method
Tensor.matmul = matmul_method
Tensor.mm = linalg.mm
Tensor.bmm = linalg.bmm
Tensor.mv = linalg.mv
Tensor.dot = linalg.dot
Tensor.outer = linalg.outer
Tensor.masked_select = masked_select_method
Tensor.clone = clone_method
Tensor.tril = tril_method
Tensor.triu = triu_method
Tensor.index_select = indexing.index_select
Tensor.scatter = indexing.scatter
Tensor.scatter_add = indexing.scatter_add
Tensor.index_fill = indexing.index_fill
Tensor.nonzero = indexing.nonzero
Tensor.isclose = arithmetic.isclose
Tensor.allclose = arithmetic.allclose
Tensor.equal = arithmetic.equal

# device and dtype
Tensor.to = to_method
Tensor.cpu = cpu_method
Tensor.cuda = cuda_method
Tensor.float = float_method
Tensor.double = double_method
Tensor.long = long_method
Tensor.bool = bool_method
Tensor.type_as = type_as_method
Tensor.type = conversion.type_method

# non-differentiable helpers
Tensor.new_tensor = new_tensor_method
Tensor.new_full = new_full_method
Tensor.new_zeros = new_zeros_method
Tensor.new_ones = new_ones_method
Tensor.new_empty = new_empty_method
Tensor.isnan = isnan_method
Tensor.isinf = isinf_method
Tensor.isfinite = isfinite_method
