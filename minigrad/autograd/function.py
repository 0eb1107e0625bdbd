"""``Function``: one differentiable op, and ``Context``: the graph node that a call leaves.

An op is a subclass of Function with two static methods side by side::

    class Exp(Function):
        @staticmethod
        def forward(ctx, x):              # x: a raw ndarray (numpy or cupy)
            y = xp_of(x).exp(x)
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, grad):          # grad: dL/dy as a Tensor
            (y,) = ctx.saved_tensors      # d exp(x)/dx = exp(x) = y
            return grad * y               # dL/dx, one per input of forward

and is called as ``Exp.apply(t)``. Forward works on arrays; backward works on Tensors, with
Tensor ops. When ``backward(create_graph=True)`` records those ops, the backward pass is
itself a graph, and second derivatives come for free (the DeZero and PyTorch design).

A saved array that *is* one of the op's input or output arrays comes back from
``ctx.saved_tensors`` as that very Tensor, still connected to the graph; anything else comes
back as a constant. That is what makes ``grad * y`` above differentiable in ``x``.
"""

from __future__ import annotations

import itertools
import weakref

import numpy as np

from minigrad import errors, fast, versions
from minigrad.autograd.grad_mode import modes
from minigrad.backend import array_module, as_array

_numbers = itertools.count()  # numbers the graph nodes in the order their ops ran


class Context:
    """The node that one op call adds to the graph; PyTorch names it ``ctx``: the op
    (``function``), its arguments (``inputs``: Tensors, or constants), weak references to the
    Tensors it made (``outputs``), its number (``seq``). Ops keep settings on it (``ctx.dim``)
    and arrays through ``save_for_backward``, so that backward can free them; ``kernel`` is
    the fast kernel that ran in place of the op's forward, if one did (``minigrad.fast``)."""

    # class-level defaults: a Context costs nothing until an op sets something
    function = kernel = None
    _inputs = outputs = needs_input_grad = _saved = _kernel_saved = ()
    _versions = _kernel_versions = None  # the latest write when saved (minigrad/versions.py)
    edge_grad_norms = None  # filled by backward inside viz.record_grads()
    seq, saved_bytes, _freed = -1, 0, False
    last_write_seq = -1  # of the newest node of a write in place (set by ops/inplace.py)

    @property
    def name(self) -> str:
        return self.function.__name__ if self.function else "?"

    @property
    def inputs(self) -> tuple:  # each as the op read it: a later write in place is undone
        if self.seq > Context.last_write_seq:  # (no write in place since this op ran)
            return self._inputs
        return tuple([_as_read_at(arg, self.seq) for arg in self._inputs])  # (ops/inplace.py)

    def save_for_backward(self, *values) -> None:
        """Keep arrays (or Tensors) for backward; read them back with ``saved_tensors``."""
        self._saved, self._versions = values, versions.read()

    def save_for_kernel(self, *values) -> None:
        """Keep arrays for a kernel's backward (``kernel_saved``), freed with the rest."""
        self._kernel_saved, self._kernel_versions = values, versions.read()

    @property
    def saved_tensors(self) -> tuple:
        return tuple([self._as_tensor(value) for value in self.saved_arrays])

    @property
    def saved_arrays(self) -> tuple:
        """What forward saved, as it saved it (arrays): for a kernel's backward."""
        return self._checked(self._saved, self._versions)

    @property
    def kernel_saved(self) -> tuple:
        return self._checked(self._kernel_saved, self._kernel_versions)

    def _checked(self, saved: tuple, written_then) -> tuple:
        """``saved``, unless backward has freed it or a write in place has changed it since."""
        if self._freed:
            raise errors.saved_arrays_freed(self.name)
        if (change := versions.changed(saved, written_then)) is not None:
            raise errors.modified_in_place(self.name, saved[change[0]], change[1])
        return saved

    def _as_tensor(self, value):
        """A saved value as a Tensor: the input or output Tensor that holds this very array
        (so that create_graph can differentiate through it), else a constant."""
        if not hasattr(value, "shape") or isinstance(value, Tensor):
            return value
        outputs = [ref() for ref in self.outputs]  # held weakly: an output holds its node
        for tensor in (*self.inputs, *outputs):
            if isinstance(tensor, Tensor) and tensor.array is value:
                return tensor
        return Tensor._make(value)

    def free_saved(self) -> None:
        """Drop what forward saved (backward calls this unless retain_graph=True)."""
        self.saved_bytes = self.count_saved_bytes() if self._saved or self._kernel_saved else 0
        self._saved = self._kernel_saved = ()
        self._freed = True

    def count_saved_bytes(self) -> int:
        saved = (*self._saved, *self._kernel_saved)
        return self.saved_bytes if self._freed else sum([getattr(v, "nbytes", 0) for v in saved])


class Function:
    """Base class of every differentiable op (see the module docstring)."""

    @staticmethod
    def forward(ctx, *args, **options):
        raise NotImplementedError("an op defines forward(ctx, *inputs) as a static method")

    @staticmethod
    def backward(ctx, *grads):
        raise NotImplementedError("an op defines backward(ctx, *grads) as a static method")

    @classmethod
    def apply(cls, *args, **options):
        """Run forward on the arrays of ``args`` and, if grad is needed, record a node.

        Tensor arguments are the op's inputs; any other argument (a Python number, an
        axis) and every keyword option is passed to forward as it is and gets no gradient.
        """
        arrays, tensors, needs = [], [], []  # per argument: as forward reads it, needs grad
        for arg in args:
            if isinstance(arg, Tensor):
                tensors.append(arg)
                needs.append(arg._requires_grad)
                arg = arg.array
            else:
                needs.append(False)
            arrays.append(arg)
        array_type = type(tensors[0].array) if tensors else np.ndarray
        for other in tensors[1:]:  # (every Tensor on one device)
            if type(other.array) is not array_type:
                errors.check_same_device(cls.__name__, tensors)
        ctx = Context()
        ctx.kernel = fast.kernel_for(cls, array_type)  # the one place the fast layer enters
        try:
            output = (ctx.kernel or cls).forward(ctx, *arrays, **options)
        except errors.MinigradError:
            raise
        except (ValueError, IndexError, TypeError) as error:
            raise errors.op_error(cls.__name__, tensors, error) from None

        if type(output) is not array_type or modes.anomaly:  # several, a scalar, or checks
            return _as_tensors(output, ctx, cls, args, arrays, tensors, needs)
        if not (True in needs and modes.grad_enabled):
            return Tensor._make(output)
        result = Tensor._make(output, True, ctx, 0)
        record(ctx, cls, args, tuple(needs), (result,))
        return result


def _as_tensors(output, ctx, function, args, arrays, tensors, needs):
    """apply's ending for several outputs, a scalar (NumPy's reductions give them; where forward
    saved it, as sqrt of a 0-d array does, its array takes its place) or detect_anomaly."""
    several = type(output) is tuple
    values = output if several else (output,)
    outputs = [as_array(value, arrays) for value in values]
    for value, array in zip(values, outputs):
        ctx._saved = tuple([array if saved is value else saved for saved in ctx._saved])
    if modes.anomaly:
        errors.check_finite(function.__name__, "forward", outputs, tensors)
    if not (True in needs and modes.grad_enabled):
        results = [Tensor._make(out) for out in outputs]
    else:
        results = [Tensor._make(out, True, ctx, i) for i, out in enumerate(outputs)]
        record(ctx, function, args, tuple(needs), results)
    return tuple(results) if several else results[0]


def next_sequence_number() -> int:
    """A number that no node gets: every node made later gets a bigger one. ``nn.Module`` takes
    one before and one after its forward, so that every node numbered in between is known to
    come from that module call."""
    return next(_numbers)


def record(ctx, function, inputs, needs_input_grad, outputs) -> None:
    """Make ``ctx`` the graph node of a call: the op, its inputs, (weak references to) its
    outputs, and for several outputs their shapes (for zeros in place of one dropped unused)."""
    ctx.function, ctx._inputs, ctx.needs_input_grad = function, inputs, needs_input_grad
    ctx.outputs = tuple(map(weakref.ref, outputs))
    if len(outputs) > 1:
        ctx.output_specs = [(out.shape, out.dtype, array_module(out.array)) for out in outputs]
    ctx.seq = next(_numbers)  # (one atomic call: no number is handed out twice)


def _as_read_at(arg, seq: int):
    while getattr(arg, "grad_fn", None) is not None and arg.grad_fn.seq > seq:
        arg = arg.grad_fn._inputs[0]  # the version before the write
    return arg


from minigrad.tensor import Tensor  # noqa: E402  (tensor.py imports this module first)
