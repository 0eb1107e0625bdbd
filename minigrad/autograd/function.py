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
back as a constant. That is what makes ``grad * y`` above differentiable in ``x``. The link is
made when ``saved_tensors`` is read, not when forward saves: most backward passes read
``saved_arrays`` and never need it.
"""

from __future__ import annotations

import weakref

import numpy as np

from minigrad import backend
from minigrad.autograd.grad_mode import modes
from minigrad.backend import array_module, device_of
from minigrad.errors import DeviceError, MinigradError, OutOfRangeError, ShapeError


class _NodeCounter:
    next = 0  # numbers the graph nodes in the order their ops ran


def next_sequence_number() -> int:
    """The number the next node will get. ``nn.Module`` notes it before and after its forward,
    so that every node numbered in between is known to come from that module call."""
    return _NodeCounter.next


class Context:
    """The node that one op call adds to the graph; PyTorch names it ``ctx``.

    ``function`` is the op, ``inputs`` its arguments (Tensors, or the constants it was given),
    ``outputs`` weak references to the Tensors it made. Ops may keep small settings on it
    as attributes (``ctx.dim = dim``); arrays go through ``save_for_backward`` so that
    ``backward`` can free them.
    """

    # Class-level defaults: creating a Context costs nothing until an op sets something,
    # which matters because every op call makes one, recorded or not.
    function = None
    inputs = ()
    outputs = ()
    needs_input_grad = ()
    edge_grad_norms = None  # filled by backward inside viz.record_grads()
    saved_bytes = 0
    seq = -1  # creation order of recorded nodes (see next_sequence_number)
    _saved = ()
    _freed = False

    @property
    def name(self) -> str:
        return self.function.__name__ if self.function else "?"

    def save_for_backward(self, *values) -> None:
        """Keep arrays (or Tensors) for backward; read them back with ``saved_tensors``."""
        self._saved = values

    @property
    def saved_tensors(self) -> tuple:
        if self._freed:
            self._raise_freed()
        as_tensor = self._as_tensor
        return tuple([as_tensor(value) for value in self._saved])

    @property
    def saved_arrays(self) -> tuple:
        """What forward saved, as raw arrays (a saved Tensor gives its ``.data``): for the
        backward formulas that work on arrays, outside create_graph."""
        if self._freed:
            self._raise_freed()
        saved = self._saved
        for value in saved:  # (forward gets arrays: Tensors are saved only by user ops)
            if isinstance(value, Tensor):
                return tuple([v.data if isinstance(v, Tensor) else v for v in saved])
        return saved

    def _raise_freed(self):
        raise RuntimeError(
            f"{self.name}: trying to backward through the graph a second time, but the "
            "arrays it saved were freed after the first backward. Pass "
            "retain_graph=True to the first backward() if you need to call it again."
        )

    def _as_tensor(self, value):
        """A saved value as a Tensor: the input or output Tensor that holds this very array
        (so that create_graph can differentiate through it), else a constant."""
        if not hasattr(value, "shape") or isinstance(value, Tensor):
            return value
        for arg in self.inputs:  # (_data: which array, not its values: nothing to wait for)
            if isinstance(arg, Tensor) and arg._data is value:
                return arg
        for ref in self.outputs:
            output = ref()  # held weakly: the output holds this node already
            if output is not None and output._data is value:
                return output
        return Tensor._make(value)

    def free_saved(self) -> None:
        """Drop what forward saved (backward calls this unless retain_graph=True)."""
        if self._saved:
            self.saved_bytes = _bytes_of(self._saved)
            self._saved = ()
        self._freed = True

    def count_saved_bytes(self) -> int:
        if self._freed:
            return self.saved_bytes
        return _bytes_of(self._saved)


def _bytes_of(values) -> int:
    total = 0  # (a loop: a third faster than sum() of a list, and every backward calls it)
    for value in values:
        total += getattr(value, "nbytes", 0)  # arrays, Tensors, None
    return total


def _shapes(args) -> str:
    shapes = [str(tuple(a.shape)) for a in args if isinstance(a, Tensor)]
    return " and ".join(shapes) if shapes else "no tensors"


class Function:
    """Base class of every differentiable op (see the module docstring)."""

    # An op whose forward hands its halves to the helper thread without waiting, and reads
    # its inputs only through backend.in_two_halves, matmul, ufunc_in_halves and reshaped
    # (or after backend.wait_for_writes_to): see backend, "streams". Every other op's
    # inputs are read through Tensor.data, which waits for the helper first.
    streams = False

    @staticmethod
    def forward(ctx, *args, **options):
        raise NotImplementedError

    @staticmethod
    def backward(ctx, *grads):
        raise NotImplementedError

    @classmethod
    def apply(cls, *args, **options):
        """Run forward on the arrays of ``args`` and, if grad is needed, record a node.

        Tensor arguments are the op's inputs; any other argument (a Python number, an
        axis) and every keyword option is passed to forward as it is and gets no gradient.
        """
        raw = []
        needs_grad = []  # per argument: a Tensor that requires grad
        array_type = None
        # (not in backward, where grad mode is off: each op's result is read at once there,
        # and waiting for it would wait for the weight gradients queued before it too)
        streams = cls.streams and modes.grad_enabled
        if backend._posted_writes and not streams:
            backend.finish_stream()  # (as Tensor.data would: the inputs read finished)
        for arg in args:
            if isinstance(arg, Tensor):
                data = arg._data
                if array_type is None:
                    array_type = type(data)
                elif type(data) is not array_type:
                    _check_same_device(cls, args)
                raw.append(data)
                needs_grad.append(arg._requires_grad)
            else:
                raw.append(arg)
                needs_grad.append(False)
        requires_grad = True in needs_grad

        ctx = Context()
        backend.streaming = streams
        try:
            output = cls.forward(ctx, *raw, **options)
        except MinigradError:
            raise
        except (ValueError, IndexError, TypeError) as error:
            raise _op_error(cls, args, error) from None
        finally:
            backend.streaming = False

        if type(output) is tuple:
            return _wrap_outputs(cls, ctx, args, raw, output, needs_grad)
        if isinstance(output, _SCALARS):
            output = _scalar_as_array(ctx, output, raw)
        if modes.anomaly:
            backend.finish_stream()
            _check_finite(cls.__name__, "forward", (output,), args)
        if not (requires_grad and modes.grad_enabled):
            return Tensor._make(output)

        out = Tensor._make(output, True, ctx, 0)
        _record(ctx, cls, args, needs_grad, (weakref.ref(out),))
        return out


_SCALARS = (np.generic, int, float, bool)


def _scalar_as_array(ctx, scalar, raw):
    """A scalar that forward returned (NumPy's reductions return np.float32, not 0-d arrays)
    as a 0-d array. Where forward saved it too (sqrt of a 0-d array saves its output), the
    array is saved in its place, so that it still links to the output Tensor."""
    if isinstance(scalar, np.generic):
        array = np.asarray(scalar)
    else:  # a Python number: an array of the inputs' module (raw[0] may be one too: 2.0 * x)
        array = _as_array(scalar, next((a for a in raw if hasattr(a, "shape")), None))
    for value in ctx._saved:
        if value is scalar:
            ctx._saved = tuple([array if v is scalar else v for v in ctx._saved])
            break
    return array


def _wrap_outputs(cls, ctx, args, raw, output, needs_grad):
    """apply() for an op whose forward returns several arrays (a tuple)."""
    like = next((a for a in raw if hasattr(a, "shape")), None)
    arrays = tuple(_as_array(out, like) for out in output)
    if modes.anomaly:
        _check_finite(cls.__name__, "forward", arrays, args)
    if not (True in needs_grad and modes.grad_enabled):
        return tuple(Tensor._make(a) for a in arrays)
    outs = tuple(Tensor._make(a, True, ctx, i) for i, a in enumerate(arrays))
    # for zeros in place of the gradient of an output that was dropped unused
    ctx.output_specs = tuple((a.shape, a.dtype, array_module(a)) for a in arrays)
    _record(ctx, cls, args, needs_grad, tuple([weakref.ref(out) for out in outs]))
    return outs


def _record(ctx, cls, args, needs_grad, output_refs) -> None:
    """Make ``ctx`` the graph node of this call: the op, its inputs, (weak references to) its
    outputs."""
    ctx.function = cls
    ctx.inputs = args
    ctx.needs_input_grad = tuple(needs_grad)
    ctx.outputs = output_refs
    ctx.seq = _NodeCounter.next
    _NodeCounter.next += 1


def _as_array(value, like):
    """NumPy reductions return scalars (np.float32), not 0-d arrays; make them arrays."""
    if isinstance(value, np.ndarray) or not isinstance(value, (np.generic, int, float, bool)):
        return value
    return array_module(like).asarray(value) if like is not None else np.asarray(value)


def _check_same_device(cls, args) -> None:
    devices = [(device_of(a.data), tuple(a.shape)) for a in args if isinstance(a, Tensor)]
    if len({d for d, _ in devices}) > 1:
        described = " and ".join(f"{shape} on {dev}" for dev, shape in devices)
        raise DeviceError(
            f"{_snake_case(cls.__name__)}: expected all tensors on the same device, "
            f"got {described}. "
            "Move them with .to(device) first."
        )


def _op_error(cls, args, error):
    """Re-raise a NumPy/CuPy error in the user's terms: the op and the shapes involved."""
    message = str(error).splitlines()[0] if str(error) else type(error).__name__
    kind = OutOfRangeError if isinstance(error, IndexError) else ShapeError
    op = _snake_case(cls.__name__)  # the name users call: add, matmul, broadcast_to
    if isinstance(error, ValueError) and "broadcast" in message:
        return ShapeError(f"{op}: shapes {_shapes(args)} do not broadcast")
    if isinstance(error, TypeError):
        return TypeError(f"{op}: invalid inputs ({_shapes(args)}): {message}")
    return kind(f"{op}: invalid input shapes {_shapes(args)}: {message}")


def _snake_case(name: str) -> str:
    """An op's class name as the function users call: Add -> add, BroadcastTo -> broadcast_to."""
    return "".join("_" + c.lower() if c.isupper() and i else c.lower() for i, c in enumerate(name))


def _check_finite(op_name: str, stage: str, arrays, args) -> None:
    for array in arrays:
        if array is None or getattr(array.dtype, "kind", "f") not in "fc":
            continue
        xp = array_module(array)
        if not bool(xp.isfinite(array).all()):
            kind = "nan" if bool(xp.isnan(array).any()) else "inf"
            raise RuntimeError(
                f"detect_anomaly: {op_name} {stage} produced {kind} values "
                f"(input shapes {_shapes(args)})"
            )


from minigrad.tensor import Tensor  # noqa: E402  (tensor.py imports this module first)
