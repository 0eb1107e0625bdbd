"""Check analytic gradients against finite differences, in float64.

    dL/dx_i  ~  (L(x + eps e_i) - L(x - eps e_i)) / (2 eps)

``gradcheck`` compares every entry of the Jacobian that backward computes with this central
difference; ``gradgradcheck`` does the same for the gradient itself (second derivatives,
through ``create_graph=True``). On a mismatch both raise, naming the input, the index and the
two values of the worst entry.
"""

from __future__ import annotations

import numpy as np

from minigrad.backend import array_module
from minigrad.tensor import Tensor


class GradcheckError(AssertionError):
    """Raised when an analytic gradient disagrees with its finite-difference estimate."""


def _float_outputs(result) -> tuple:
    """The floating-point Tensors among fn's results. One that does not require grad is
    checked too: its analytic derivative is 0, so a backward that wrongly cut the graph
    (or a constant gradient, in gradgradcheck) is compared with finite differences."""
    outputs = result if isinstance(result, (tuple, list)) else (result,)
    return tuple(out for out in outputs if isinstance(out, Tensor) and out.dtype.kind == "f")


def _outputs(fn, inputs) -> tuple:
    return _float_outputs(fn(*inputs))


def _checked_inputs(inputs):
    inputs = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
    for i, t in enumerate(inputs):
        if isinstance(t, Tensor) and t.requires_grad and t.dtype != np.float64:
            raise TypeError(
                f"gradcheck: input {i} is {t.dtype}; finite differences need float64 "
                "inputs (use .double())"
            )
    return inputs


def _pick(result, output_index) -> np.ndarray:
    return _float_outputs(result)[output_index].numpy().copy()


def _numerical_jacobian(fn, inputs, output_index, x, eps):
    """d out / d x by central differences: shape (out.numel(), x.numel())."""
    flat = x.array.reshape(-1)
    columns = []
    for i in range(flat.size):
        original = flat[i].item()
        flat[i] = original + eps
        plus = _pick(fn(*inputs), output_index)  # copied: an output may be a view of x
        flat[i] = original - eps
        minus = _pick(fn(*inputs), output_index)
        flat[i] = original
        columns.append((plus - minus).reshape(-1) / (2 * eps))
    return np.stack(columns, axis=1) if columns else np.zeros((0, 0))


def _analytic_jacobian(output, x):
    if not output.requires_grad:  # a constant: every derivative is 0
        return np.zeros((output.numel(), x.numel()))
    rows = []
    for j in range(output.numel()):
        x.grad = None
        seed = np.zeros(output.numel(), dtype=output.dtype)
        seed[j] = 1.0
        seed_tensor = _like(output, seed.reshape(output.shape))
        output.backward(seed_tensor, retain_graph=True)
        rows.append(np.zeros(x.numel()) if x.grad is None else x.grad.numpy().reshape(-1))
    x.grad = None
    return np.stack(rows, axis=0) if rows else np.zeros((0, x.numel()))


def _compare(analytic, numerical, name, atol, rtol, what="gradient"):
    diff = np.abs(analytic - numerical)
    allowed = atol + rtol * np.abs(numerical)
    if diff.size == 0 or (diff <= allowed).all():
        return
    worst = np.unravel_index(np.argmax(diff - allowed), diff.shape)
    out_index, in_index = int(worst[0]), int(worst[1])
    raise GradcheckError(
        f"{what} check failed for {name}: at output entry {out_index}, input entry "
        f"{in_index} the analytic value is {analytic[worst]:.10g} but finite differences "
        f"give {numerical[worst]:.10g} (|difference| {diff[worst]:.3g} > atol {atol} + "
        f"rtol {rtol} * |numerical|)"
    )


def gradcheck(fn, inputs, eps=1e-6, atol=1e-5, rtol=1e-3) -> bool:
    """True if backward's gradients of ``fn(*inputs)`` match finite differences; else raise.

    ``inputs``: a tuple of float64 Tensors (those with requires_grad=True are checked).
    """
    inputs = _checked_inputs(inputs)
    outputs = _outputs(fn, inputs)
    if not outputs:
        raise GradcheckError("gradcheck: fn returned no floating-point tensor to check")
    for out_index, output in enumerate(outputs):
        for in_index, x in enumerate(inputs):
            if not (isinstance(x, Tensor) and x.requires_grad):
                continue
            analytic = _analytic_jacobian(output, x)
            numerical = _numerical_jacobian(fn, inputs, out_index, x, eps)
            _compare(analytic, numerical, f"input {in_index} (shape {x.shape})", atol, rtol)
    return True


def gradgradcheck(fn, inputs, grad_outputs=None, eps=1e-6, atol=1e-5, rtol=1e-3) -> bool:
    """True if second derivatives of ``fn(*inputs)`` match finite differences of the first.

    Checks the function  inputs -> d<fn(inputs), v>/d inputs  (v random but fixed, or
    ``grad_outputs``) with ``gradcheck``, its backward running through create_graph=True.
    """
    inputs = _checked_inputs(inputs)
    differentiable = [i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x.requires_grad]
    outputs = _outputs(fn, inputs)
    rng = np.random.default_rng(0)
    if grad_outputs is None:
        grad_outputs = [rng.standard_normal(out.shape) for out in outputs]
    grad_outputs = [g.numpy() if isinstance(g, Tensor) else np.asarray(g) for g in grad_outputs]

    def first_derivatives(*xs):
        for i in differentiable:
            xs[i].grad = None
        outs = _outputs(fn, xs)
        total = None
        for out, v in zip(outs, grad_outputs):
            if out.requires_grad:
                term = (out * _like(out, v)).sum()
                total = term if total is None else total + term
        if total is not None:
            total.backward(create_graph=True)
        # an input the outputs do not depend on has derivative 0 (a constant, still checked)
        grads = tuple(
            xs[i].zeros_like_detached() if xs[i].grad is None else xs[i].grad
            for i in differentiable
        )
        for i in differentiable:
            xs[i].grad = None
        return grads

    return gradcheck(first_derivatives, inputs, eps=eps, atol=atol, rtol=rtol)


def _like(tensor, values) -> Tensor:
    """``values`` as a constant Tensor of tensor's device and dtype."""
    return Tensor._make(array_module(tensor.array).asarray(values, dtype=tensor.dtype))
