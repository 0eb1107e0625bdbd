"""The Tensor: an n-dimensional array (NumPy or CuPy) that remembers how it was made.

``t.array`` is the array. If ``t`` came out of an op while grad mode was on and some input
required grad, ``t.grad_fn`` is the graph node of that op (a ``Context``), whose ``inputs``
lead further back: that chain is the computation graph, and ``t.backward()`` walks it.

The methods that call an op (``t + u``, ``t.exp()``, ``t += u``...) are not here: this file
imports no op; ops/tensor_methods.py and ops/inplace.py attach them to the class, and
ops/tensor_protocols.py the array conveniences (``t.numpy()``, ``t.item()``, ``t.data``...).
"""

from __future__ import annotations

import numpy as np

from minigrad import backend, errors
from minigrad.hooks import RemovableHandle


class Tensor:
    __slots__ = (
        "array", "grad", "grad_fn", "_requires_grad", "_output_index", "_retains_grad", "_hooks",
        "name", "__weakref__",
    )  # fmt: skip
    __array_ufunc__ = None  # numpy_array * tensor -> Tensor.__rmul__, not an object array

    def __init__(self, array, requires_grad: bool = False):
        """Wrap an array as it is (no copy, no dtype change); use ``mg.tensor`` for data."""
        array = array.array if isinstance(array, Tensor) else array
        if not hasattr(array, "shape") or isinstance(array, np.generic):
            array = np.asarray(array)
        self.array, self._output_index = array, 0
        self.grad = self.grad_fn = self._hooks = self.name = None
        self._requires_grad = self._retains_grad = False
        self.requires_grad = requires_grad  # (checks that the dtype can have a gradient)

    @classmethod
    def _make(cls, array, requires_grad=False, grad_fn=None, output_index=0):
        """Fast constructor for op outputs: no checks, the array is trusted."""
        t = cls.__new__(cls)
        t.array, t.grad_fn, t._output_index = array, grad_fn, output_index
        t._requires_grad, t._retains_grad = requires_grad, False
        t.grad = t._hooks = t.name = None
        return t

    @property
    def requires_grad(self) -> bool:
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        if value and self.array.dtype.kind not in "fc":
            raise errors.requires_grad_of_non_float(self.array.dtype, self.shape)
        if not value and self.grad_fn is not None:
            raise errors.requires_grad_off_non_leaf()
        self._requires_grad = bool(value)

    @property
    def shape(self) -> tuple:
        return self.array.shape  # (a tuple, in NumPy and CuPy alike)

    @property
    def dtype(self):
        return self.array.dtype

    @property
    def device(self) -> str:
        return backend.device_of(self.array)

    @property
    def is_leaf(self) -> bool:
        return self.grad_fn is None

    __hash__ = object.__hash__  # == is elementwise, so tensors hash by identity

    def detach(self) -> Tensor:
        """The same values (shared, not copied), cut off from the graph."""
        return Tensor._make(self.array)

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

    def backward(self, gradient=None, retain_graph=False, create_graph=False) -> None:
        """Accumulate d(self)/d(leaf) into ``.grad`` of every leaf that requires grad.

        ``self`` must be a scalar unless ``gradient`` (dL/dself, same shape) is given. The
        arrays ops saved are freed afterwards unless ``retain_graph=True``;
        ``create_graph=True`` records the backward pass too, for second derivatives.
        """
        from minigrad.autograd import engine  # (a circle: the engine uses Tensor)

        engine.backward(self, gradient, retain_graph, create_graph)
