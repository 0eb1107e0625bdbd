"""The Tensor: an n-dimensional array (NumPy or CuPy) that remembers how it was made.

``t.data`` is the array. If ``t`` came out of an op while grad mode was on and some input
required grad, ``t.grad_fn`` is the graph node of that op (a ``Context``), whose ``inputs``
lead further back: that chain is the computation graph, and ``t.backward()`` walks it.
"""

from __future__ import annotations

import numpy as np

from minigrad import backend
from minigrad.errors import ShapeError
from minigrad.hooks import RemovableHandle


class Tensor:
    __slots__ = (
        "_data",
        "grad",
        "grad_fn",
        "_requires_grad",
        "_output_index",
        "_retains_grad",
        "_hooks",
        "name",
        "__weakref__",
    )
    __array_ufunc__ = None  # numpy_array * tensor -> Tensor.__rmul__, not an object array

    def __init__(self, data, requires_grad: bool = False):
        """Wrap an array as it is (no copy, no dtype change); use ``mg.tensor`` for data."""
        if isinstance(data, Tensor):
            data = data.data
        if not hasattr(data, "shape") or isinstance(data, np.generic):
            data = np.asarray(data)
        self._data = data
        self.grad = None
        self.grad_fn = None
        self._requires_grad = False
        self._output_index = 0
        self._retains_grad = False
        self._hooks = None
        self.name = None
        self.requires_grad = requires_grad

    @classmethod
    def _make(cls, data, requires_grad=False, grad_fn=None, output_index=0):
        """Fast constructor for op outputs: no checks, the array is trusted."""
        t = cls.__new__(cls)
        t._data = data
        t.grad = None
        t.grad_fn = grad_fn
        t._requires_grad = requires_grad
        t._output_index = output_index
        t._retains_grad = False
        t._hooks = None
        t.name = None
        return t

    # -- what a tensor is ------------------------------------------------------------------

    @property
    def data(self):
        """The array. Reading or replacing it first waits for any halves of ops that the
        helper thread is still computing (backend's streams): code outside the ops that
        stream only ever sees finished values."""
        if backend._posted_writes:
            backend.finish_stream()
        return self._data

    @data.setter
    def data(self, array) -> None:
        if backend._posted_writes:
            backend.finish_stream()
        self._data = array

    @property
    def requires_grad(self) -> bool:
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        if value and self._data.dtype.kind not in "fc":
            raise RuntimeError(
                f"only floating point tensors can require gradients, but this tensor has "
                f"dtype {self._data.dtype} (shape {self.shape}); convert it with .float() first"
            )
        if not value and self.grad_fn is not None:
            raise RuntimeError(
                "requires_grad can only be turned off on a leaf tensor; use .detach() instead"
            )
        self._requires_grad = bool(value)

    @property
    def shape(self) -> tuple:
        return self._data.shape  # (a tuple, in NumPy and CuPy alike)

    @property
    def ndim(self) -> int:
        return self._data.ndim

    @property
    def dtype(self):
        return self._data.dtype

    @property
    def device(self) -> str:
        return backend.device_of(self._data)

    @property
    def is_leaf(self) -> bool:
        return self.grad_fn is None

    def size(self, dim=None):
        return self.shape if dim is None else self.shape[dim]

    def dim(self) -> int:
        return self._data.ndim

    def numel(self) -> int:
        return int(self._data.size)

    @property
    def nbytes(self) -> int:
        """Bytes the values take: numel() times the size of one (as torch.Tensor.nbytes)."""
        return int(self._data.nbytes)

    def __len__(self) -> int:
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __repr__(self) -> str:
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

    __hash__ = object.__hash__  # == is elementwise, so tensors hash by identity

    # -- leaving the graph, changing device or dtype ---------------------------------------

    def numpy(self) -> np.ndarray:
        """The values as a NumPy array (copied to the CPU if on the GPU)."""
        return backend.to_numpy(self.data)

    def item(self):
        if self.numel() != 1:
            raise ValueError(
                f"item(): only a one-element tensor has an item, shape is {self.shape}"
            )
        return self.numpy().reshape(()).item()

    def tolist(self):
        return self.numpy().tolist()

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __bool__(self) -> bool:
        if self.numel() != 1:
            raise RuntimeError(
                f"the truth value of a tensor of shape {self.shape} is ambiguous; "
                "use .any() or .all()"
            )
        return bool(self.item())

    def detach(self) -> Tensor:
        """The same values (shared, not copied), cut off from the graph."""
        return Tensor._make(self._data)  # (reads nothing: no need to wait for a stream)

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        self.requires_grad = requires_grad
        return self

    def retain_grad(self) -> None:
        """Keep ``.grad`` on this non-leaf tensor after backward (leaves always keep it)."""
        if not self.requires_grad:
            raise RuntimeError("retain_grad() on a tensor that does not require grad")
        if self.grad_fn is not None:
            self._retains_grad = True

    def register_hook(self, hook):
        """Call ``hook(grad)`` when this tensor's gradient is computed; a returned tensor
        replaces the gradient. Returns a handle whose ``remove()`` unregisters the hook."""
        if not self.requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that does not require grad")
        if self._hooks is None:
            self._hooks = {}
        handle = RemovableHandle(self._hooks)
        self._hooks[handle.id] = hook
        return handle

    def to(self, *args, **kwargs) -> Tensor:
        """``t.to("cuda")``, ``t.to(mg.float64)`` or both; differentiable."""
        device, dtype = backend.device_and_dtype(args, kwargs)
        result = self
        if dtype is not None and dtype != self.dtype:
            result = _ops.cast(result, dtype)
        if device is not None and device != result.device:
            result = _ops.to_device(result, device)
        return result

    def cpu(self) -> Tensor:
        return self.to("cpu")

    def cuda(self) -> Tensor:
        return self.to("cuda")

    def float(self) -> Tensor:
        return self.to(np.float32)

    def double(self) -> Tensor:
        return self.to(np.float64)

    def long(self) -> Tensor:
        return self.to(np.int64)

    def bool(self) -> Tensor:
        return self.to(np.bool_)

    def type_as(self, other: Tensor) -> Tensor:
        return self.to(other.dtype)

    # -- autograd --------------------------------------------------------------------------

    def backward(self, gradient=None, retain_graph=False, create_graph=False) -> None:
        """Accumulate d(self)/d(leaf) into ``.grad`` of every leaf that requires grad.

        ``self`` must be a scalar unless ``gradient`` (dL/dself, same shape) is given. The
        arrays ops saved are freed afterwards unless ``retain_graph=True``;
        ``create_graph=True`` records the backward pass too, for second derivatives.
        """
        _engine.backward(self, gradient, retain_graph, create_graph)

    # -- operators -------------------------------------------------------------------------

    def _operand(self, other):
        """A Tensor or Python number to combine with self (arrays and lists become Tensors)."""
        if isinstance(other, Tensor):
            return other
        if isinstance(other, np.generic):  # np.float64(2.0) acts as 2.0: it never upcasts float32
            return other.item()
        if isinstance(other, (int, float, bool)):
            return other
        if isinstance(other, complex):
            raise TypeError("complex numbers are not supported")
        return self.as_same_kind(other)

    def _promoted(self, other):
        """An integer tensor meeting a float number turns float32 first, as in PyTorch."""
        if isinstance(other, float) and self._data.dtype.kind in "biu":
            return self.float()
        if isinstance(other, Tensor) and other.dtype.kind == "f" and self.dtype.kind in "biu":
            return self.to(other.dtype)
        return self

    def __add__(self, other):
        other = self._operand(other)
        return _ops.add(self._promoted(other), other)

    def __radd__(self, other):
        other = self._operand(other)
        return _ops.add(other, self._promoted(other))

    def __sub__(self, other):
        other = self._operand(other)
        return _ops.sub(self._promoted(other), other)

    def __rsub__(self, other):
        other = self._operand(other)
        return _ops.sub(other, self._promoted(other))

    def __mul__(self, other):
        other = self._operand(other)
        return _ops.mul(self._promoted(other), other)

    def __rmul__(self, other):
        other = self._operand(other)
        return _ops.mul(other, self._promoted(other))

    def __truediv__(self, other):
        other = self._operand(other)
        return _ops.div(self._promoted(1.0), other)

    def __rtruediv__(self, other):
        other = self._operand(other)
        return _ops.div(other, self._promoted(1.0))

    def __pow__(self, other):
        other = self._operand(other)
        return _ops.pow(self._promoted(other), other)

    def __rpow__(self, other):
        other = self._operand(other)
        return _ops.pow(other, self._promoted(1.0))

    # x += y, x -= y, x *= y, x /= y: in place, as in PyTorch's hand-written training loop
    #     with mg.no_grad():
    #         w -= lr * w.grad
    # (without these, Python would run w = w - lr * w.grad: a new tensor, no longer a leaf)

    def __iadd__(self, other):
        return self._in_place("add", other)

    def __isub__(self, other):
        return self._in_place("subtract", other)

    def __imul__(self, other):
        return self._in_place("multiply", other)

    def __itruediv__(self, other):
        return self._in_place("divide", other)

    # x.add_(y), x.sub_(y), x.mul_(y), x.div_(y): PyTorch's in-place methods. Unlike the
    # operators they never fall back to a new tensor: they change self, or raise.

    def add_(self, other, alpha=1) -> Tensor:
        """self += alpha * other, in place; returns self."""
        return self._in_place_method("add", other, "add_", alpha)

    def sub_(self, other, alpha=1) -> Tensor:
        """self -= alpha * other, in place; returns self."""
        return self._in_place_method("subtract", other, "sub_", alpha)

    def mul_(self, other) -> Tensor:
        """self *= other, in place; returns self."""
        return self._in_place_method("multiply", other, "mul_")

    def div_(self, other) -> Tensor:
        """self /= other, in place; returns self."""
        return self._in_place_method("divide", other, "div_")

    _OUT_OF_PLACE = {
        "add": "__add__",
        "subtract": "__sub__",
        "multiply": "__mul__",
        "divide": "__truediv__",
    }
    _SYMBOLS = {"add": "+=", "subtract": "-=", "multiply": "*=", "divide": "/="}

    def _in_place(self, ufunc_name: str, other):
        """self <op>= other. Where no graph is being recorded through either (grad mode off,
        or neither requires grad), self's values change in place and self keeps its shape
        and dtype. Where one is: a leaf that requires grad may not change (its gradient
        would no longer be of the values it holds), and a tensor made by an op gives the
        result as a new node of the graph, as ``x = x + y`` would."""
        symbol = Tensor._SYMBOLS[ufunc_name]
        other = self._operand(other)
        if self._records_graph_with(other, symbol):
            return getattr(self, Tensor._OUT_OF_PLACE[ufunc_name])(other)
        return self._write_in_place(ufunc_name, _raw(other), symbol)

    def _in_place_method(self, ufunc_name: str, other, name: str, alpha=1) -> Tensor:
        """add_, sub_, mul_, div_: as ``_in_place``, but where the operator would give a new
        node of the graph, raise: minigrad does not record in-place ops in the graph."""
        other = self._operand(other)
        self._refuse_in_graph(other, name, f"x = x {Tensor._SYMBOLS[ufunc_name][0]} y")
        value = _raw(other) if alpha == 1 else _raw(other) * alpha
        return self._write_in_place(ufunc_name, value, name)

    def _refuse_in_graph(self, other, name: str, instead: str) -> None:
        """Raise where ``name`` (an in-place method) would change a tensor that the graph
        records through, self or ``other``: minigrad does not record in-place ops."""
        if self._records_graph_with(other, name):
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

    def _records_graph_with(self, other, symbol: str) -> bool:
        """Whether ``self <op> other`` would be recorded in the graph (grad mode on and one
        of them requires grad). Raises for a leaf that requires grad: it may not change."""
        other_requires_grad = isinstance(other, Tensor) and other._requires_grad
        if not (_grad_enabled() and (self._requires_grad or other_requires_grad)):
            return False
        if self._requires_grad and self.grad_fn is None:
            raise RuntimeError(
                f"a leaf tensor that requires grad (shape {self.shape}) is used in an "
                f"in-place operation ({symbol}); update it under `with mg.no_grad():`, "
                "as an optimizer does"
            )
        return True

    def _write_in_place(self, ufunc_name: str, value, symbol: str) -> Tensor:
        """data <op>= value (an array or a number) into self's own array: same shape, dtype."""
        data = self.data
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

    def __matmul__(self, other):
        return _ops.matmul(self, self._operand(other))

    def __rmatmul__(self, other):
        return _ops.matmul(self._operand(other), self)

    def __neg__(self):
        return _ops.neg(self)

    def __getitem__(self, index):
        return _ops.getitem(self, index)

    def __setitem__(self, index, value):
        if self.requires_grad and self.grad_fn is None and _grad_enabled():
            raise RuntimeError(
                "in-place assignment to a leaf tensor that requires grad; "
                "wrap it in `with mg.no_grad():` or write to .data"
            )
        if self.grad_fn is not None:
            raise RuntimeError("in-place assignment to a tensor that is part of a graph")
        value = value.data if isinstance(value, Tensor) else value
        self.data[_ops.raw_index(index)] = value

    # comparisons: bool tensors, no gradient
    def _compare(self, other, compare):
        other = other.data if isinstance(other, Tensor) else other
        try:
            return Tensor._make(compare(self.data, other))
        except ValueError as error:
            raise ShapeError(
                f"comparison: shapes {self.shape} and {np.shape(other)} do not broadcast ({error})"
            ) from None

    def __eq__(self, other):
        return self._compare(other, lambda a, b: a == b)

    def __ne__(self, other):
        return self._compare(other, lambda a, b: a != b)

    def __lt__(self, other):
        return self._compare(other, lambda a, b: a < b)

    def __le__(self, other):
        return self._compare(other, lambda a, b: a <= b)

    def __gt__(self, other):
        return self._compare(other, lambda a, b: a > b)

    def __ge__(self, other):
        return self._compare(other, lambda a, b: a >= b)

    def __and__(self, other):
        return self._compare(other, lambda a, b: a & b)

    def __or__(self, other):
        return self._compare(other, lambda a, b: a | b)

    def __invert__(self):
        return Tensor._make(~self.data)

    # -- differentiable methods (each is an op in minigrad.ops) ----------------------------

    def exp(self):
        return _ops.exp(self)

    def log(self):
        return _ops.log(self)

    def sqrt(self):
        return _ops.sqrt(self)

    def tanh(self):
        return _ops.tanh(self)

    def sigmoid(self):
        return _ops.sigmoid(self)

    def relu(self):
        return _ops.relu(self)

    def abs(self):
        return _ops.abs(self)

    def clamp(self, min=None, max=None):  # noqa: A002
        return _ops.clamp(self, min, max)

    def sum(self, dim=None, keepdim=False):
        return _ops.sum(self, dim, keepdim)

    def mean(self, dim=None, keepdim=False):
        return _ops.mean(self, dim, keepdim)

    def var(self, dim=None, unbiased=True, keepdim=False, correction=None):
        return _ops.var(self, dim, unbiased, keepdim, correction)

    def std(self, dim=None, unbiased=True, keepdim=False):
        return _ops.var(self, dim, unbiased, keepdim).sqrt()

    def amax(self, dim=None, keepdim=False):
        return _ops.amax(self, dim, keepdim)

    def max(self, dim=None, keepdim=False):
        """max() of the whole tensor; max(dim) gives (values, indices) as in PyTorch."""
        if dim is None:
            return _ops.amax(self)
        return _ops.MaxResult(_ops.amax(self, dim, keepdim), self.argmax(dim, keepdim))

    def min(self, dim=None, keepdim=False):
        if dim is None:
            return -_ops.amax(-self)
        return _ops.MaxResult(-_ops.amax(-self, dim, keepdim), self.argmin(dim, keepdim))

    def softmax(self, dim=-1):
        return _ops.softmax(self, dim)

    def log_softmax(self, dim=-1):
        return _ops.log_softmax(self, dim)

    def norm(self):
        """The L2 norm of all entries, sqrt(sum x^2)."""
        return (self * self).sum().sqrt()

    def reshape(self, *shape):
        return _ops.reshape(self, *shape)

    def view(self, *shape):
        return _ops.reshape(self, *shape)

    def transpose(self, dim0: int, dim1: int):
        return _ops.transpose(self, dim0, dim1)

    def permute(self, *dims):
        return _ops.permute(self, *dims)

    @property
    def T(self):
        if self.ndim != 2:
            raise ValueError(f".T needs a 2-D tensor, got shape {self.shape}; use .transpose()")
        return _ops.transpose(self, 0, 1)

    @property
    def mT(self):
        return _ops.transpose(self, -2, -1)

    def unsqueeze(self, dim: int):
        return _ops.unsqueeze(self, dim)

    def squeeze(self, dim=None):
        return _ops.squeeze(self, dim)

    def flatten(self, start_dim: int = 0, end_dim: int = -1):
        return _ops.flatten(self, start_dim, end_dim)

    def expand(self, *shape):
        shape = _ops.shape_arg(shape)
        lead = len(shape) - self.ndim
        full = tuple(s if s != -1 else self.shape[i - lead] for i, s in enumerate(shape))
        if lead < 0 or any(s != n and s != 1 for s, n in zip(self.shape, full[lead:])):
            raise ShapeError(f"expand: cannot expand a tensor of shape {self.shape} to {full}")
        return _ops.broadcast_to(self, full)

    def contiguous(self):
        return self

    def masked_fill(self, mask, value):
        return _ops.masked_fill(self, mask, value)

    def split(self, split_size, dim: int = 0):
        return _ops.split(self, split_size, dim)

    def chunk(self, chunks: int, dim: int = 0):
        return _ops.chunk(self, chunks, dim)

    def matmul(self, other):
        return _ops.matmul(self, other)

    def clone(self):
        """A copy in new memory, still in the graph: the gradient flows back unchanged."""
        return _ops.clone(self)

    def tril(self, diagonal: int = 0):
        """The lower triangle of the last two dims; see ``mg.tril``."""
        return _ops.tril(self, diagonal)

    def triu(self, diagonal: int = 0):
        """The upper triangle of the last two dims; see ``mg.triu``."""
        return _ops.triu(self, diagonal)

    # -- non-differentiable helpers --------------------------------------------------------

    def argmax(self, dim=None, keepdim=False):
        return Tensor._make(_as_array(self.data.argmax(axis=dim, keepdims=keepdim), self.data))

    def argmin(self, dim=None, keepdim=False):
        return Tensor._make(_as_array(self.data.argmin(axis=dim, keepdims=keepdim), self.data))

    def sign(self):
        return Tensor._make(backend.array_module(self.data).sign(self.data))

    def any(self):
        return Tensor._make(_as_array(self.data.any(), self.data))

    def all(self):
        return Tensor._make(_as_array(self.data.all(), self.data))

    def zero_(self):
        """Set every value to 0, in place (as add_ and the others: not on a tensor that the
        graph records through while grad mode is on)."""
        self._refuse_in_graph(None, "zero_", "mg.zeros_like(x)")
        self.data[...] = 0
        return self

    def fill_(self, value):
        """Set every value to ``value``, in place (see zero_)."""
        self._refuse_in_graph(value, "fill_", "mg.full_like(x, value)")
        self.data[...] = value.data if isinstance(value, Tensor) else value
        return self

    def copy_(self, other):
        """Overwrite the values in place (no graph), from a Tensor, array or number (see
        zero_)."""
        self._refuse_in_graph(other, "copy_", "other.clone()")
        other = other.data if isinstance(other, Tensor) else other
        if hasattr(other, "shape"):
            other = backend.to_device(other, self.device)
        self.data[...] = other
        return self

    # -- internal helpers used by ops and the engine ---------------------------------------

    def as_same_kind(self, value) -> Tensor:
        """``value`` (a Tensor, array, list or number) as a Tensor on self's device/dtype."""
        if isinstance(value, Tensor):
            if type(value._data) is not type(self._data) and value.device != self.device:
                raise _device_error(self, value)
            return value
        xp = backend.array_module(self.data)
        array = xp.asarray(value)
        if array.dtype.kind == "f" or array.dtype == np.float64:
            array = array.astype(self.dtype if self.dtype.kind == "f" else np.float32, copy=False)
        return Tensor._make(array)

    def as_index(self, value) -> Tensor:
        """Integer indices (Tensor, array or list) as a Tensor on self's device."""
        if isinstance(value, Tensor):
            if type(value._data) is not type(self._data) and value.device != self.device:
                raise _device_error(self, value)
            return value
        array = backend.array_module(self.data).asarray(value)
        return Tensor._make(array.astype(np.int64) if array.dtype.kind in "iu" else array)

    def ones_like_detached(self) -> Tensor:
        data = self._data  # (its shape and dtype: nothing to wait for)
        xp = np if type(data) is np.ndarray else backend.array_module(data)
        ones = xp.empty(data.shape, data.dtype)
        ones[...] = 1  # (np.ones is the same, in two more Python calls)
        return Tensor._make(ones)

    def zeros_like_detached(self) -> Tensor:
        return Tensor._make(backend.array_module(self.data).zeros_like(self.data))

    def norm_value(self) -> float:
        """The L2 norm as a Python float (no graph)."""
        flat = self.data.reshape(-1)
        return float(backend.array_module(flat).sqrt((flat.astype(np.float64) ** 2).sum()))


def _raw(value):
    """A Tensor's array, or a Python number as it is."""
    return value.data if isinstance(value, Tensor) else value


def _as_array(value, like):
    """NumPy reductions give scalars (np.int64); keep tensors' data as arrays."""
    if isinstance(value, np.generic) or not hasattr(value, "shape"):
        return backend.array_module(like).asarray(value)
    return value


def _device_error(a: Tensor, b: Tensor):
    from minigrad.errors import DeviceError

    return DeviceError(
        f"expected both tensors on the same device, got {a.shape} on {a.device} and "
        f"{b.shape} on {b.device}; move one with .to(device)"
    )


def _grad_enabled() -> bool:
    from minigrad.autograd.grad_mode import modes

    return modes.grad_enabled


from minigrad import ops as _ops  # noqa: E402  (the ops need Tensor defined first)
from minigrad.autograd import engine as _engine  # noqa: E402  (imported once, not per call)
