"""Reverse-mode automatic differentiation: ``Function`` (one op and its backward), the graph
walk (``engine``), grad mode, and gradient checks."""

from minigrad.autograd.function import Context, Function
from minigrad.autograd.grad_mode import (
    detect_anomaly,
    enable_grad,
    is_grad_enabled,
    no_grad,
    set_grad_enabled,
)
from minigrad.autograd.gradcheck import GradcheckError, gradcheck, gradgradcheck


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False):
    """d outputs / d inputs as a tuple, without touching any ``.grad`` (as torch.autograd.grad).

    ``inputs`` may be leaves or intermediate tensors; one that ``outputs`` does not depend on
    gets None. The ``.grad`` of every tensor in the graph is left as it was.
    """
    from minigrad.autograd.engine import backward

    outputs, grad_outputs = _single(outputs), _single(grad_outputs)
    inputs = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
    # backward writes .grad of the leaves (and of retained tensors): note them all, run
    # backward with the inputs retaining their grad, read the inputs', then restore everything
    touched = {id(t): t for t in (*_leaves_of(outputs), *inputs)}.values()
    saved = [(t, t.grad, t._retains_grad) for t in touched]
    for t in touched:
        t.grad = None
    for x in inputs:
        if x.grad_fn is not None:
            x._retains_grad = True
    try:
        retain = create_graph if retain_graph is None else retain_graph
        backward(outputs, grad_outputs, retain, create_graph)
        return tuple(x.grad for x in inputs)
    finally:
        for t, old_grad, old_retains in saved:
            t.grad, t._retains_grad = old_grad, old_retains


def _single(value):
    """grad() takes one output (or a one-element list of it, as PyTorch allows)."""
    if isinstance(value, (tuple, list)):
        if len(value) != 1:
            raise ValueError(f"grad: expected one output, got {len(value)}; sum them first")
        return value[0]
    return value


def _leaves_of(output) -> list:
    """The leaves that require grad in the graph of ``output`` (output itself if a leaf)."""
    from minigrad.autograd.engine import topological_order

    if output.grad_fn is None:
        return [output]
    leaves = []
    for node in topological_order(output.grad_fn):
        for arg in node.inputs:
            if getattr(arg, "grad_fn", True) is None and arg.requires_grad:
                leaves.append(arg)
    return leaves


__all__ = [
    "Context", "Function", "GradcheckError", "detect_anomaly", "enable_grad", "grad",
    "gradcheck", "gradgradcheck", "is_grad_enabled", "no_grad", "set_grad_enabled",
]  # fmt: skip
