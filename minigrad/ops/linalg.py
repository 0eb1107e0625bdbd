"""Matrix products: ``matmul`` (the ``@`` operator, batched and broadcasting like NumPy) and
``linear`` (y = x W^T + b, fused into one node as in PyTorch's F.linear).
"""

from __future__ import annotations

from minigrad.autograd.function import Function
from minigrad.autograd.grad_mode import is_grad_enabled
from minigrad.backend import (
    column_sums,
    empty_laid_out_like,
    matmul_pair,
    reshaped,
    weight_grads_posted,
)
from minigrad.backend import matmul as matmul_arrays
from minigrad.errors import ShapeError
from minigrad.ops._helpers import sum_array_to
from minigrad.ops.shape import reshape, squeeze, sum_to, transpose, unsqueeze
from minigrad.tensor import Tensor


class Matmul(Function):
    # Y = A B (batched over leading dims);  dL/dA = G B^T,  dL/dB = A^T G
    # (summed back over batch dims that were broadcast)
    streams = True  # (backend, "streams"): attention's products, batch halves on each thread

    @staticmethod
    def forward(ctx, a, b):
        if a.shape[-1] != b.shape[-2]:
            raise ShapeError(
                f"matmul: cannot multiply shapes {a.shape} and {b.shape} "
                f"({a.shape[-1]} columns against {b.shape[-2]} rows)"
            )
        ctx.save_for_backward(a, b)
        # a batch laid out as b where it has b's shape and dtype (attention's A V, with V's
        # heads a transposed view: the merge of the heads back to (B, T, d_model) is a view)
        same_kind = b.ndim > 2 and a.dtype == b.dtype
        out = _laid_out_like(b, a.shape[:-1] + b.shape[-1:]) if same_kind else None
        return matmul_arrays(a, b, out=out)

    @staticmethod
    def backward(ctx, grad):
        if not is_grad_enabled():  # the same products on the arrays: no graph nodes to build
            return _matmul_grads_on_arrays(ctx, grad.data)
        a, b = ctx.saved_tensors
        grad_a = grad_b = None
        if ctx.needs_input_grad[0]:
            grad_a = sum_to(grad @ transpose(b, -1, -2), a.shape)
        if ctx.needs_input_grad[1]:
            grad_b = sum_to(transpose(a, -1, -2) @ grad, b.shape)
        return grad_a, grad_b


class Linear(Function):
    # y = x W^T + b, x: (..., in), W: (out, in), b: (out,)
    # dL/dx = g W,  dL/dW = g^T x (summed over all leading dims),  dL/db = sum of g
    # The leading dims are flattened into rows first: one (rows, in) @ (in, out) product
    # runs faster than a batch of small ones (BLAS shares a big one between threads).
    streams = True  # (backend, "streams"): halves of the rows on each thread

    @staticmethod
    def forward(ctx, x, weight, bias):
        if x.shape[-1] != weight.shape[-1]:
            raise ShapeError(
                f"linear: input of shape {x.shape} has {x.shape[-1]} features but the weight "
                f"of shape {weight.shape} expects {weight.shape[-1]}"
            )
        ctx.save_for_backward(x, weight)
        y = matmul_arrays(reshaped(x, (-1, x.shape[-1])), weight.T, add=bias)
        return y.reshape(x.shape[:-1] + (weight.shape[0],))

    @staticmethod
    def backward(ctx, grad):
        if not is_grad_enabled():  # the same products on the arrays: no graph nodes to build
            return _linear_grads_on_arrays(ctx, grad.data)
        x, weight = ctx.saved_tensors  # create_graph: Tensor ops, differentiable in their turn
        out_features, in_features = weight.shape
        grad_rows = reshape(grad, (-1, out_features))
        grad_x = None
        if ctx.needs_input_grad[0]:
            grad_x = reshape(grad_rows @ weight, x.shape)
        grad_w = None
        if ctx.needs_input_grad[1]:
            grad_w = transpose(grad_rows, 0, 1) @ reshape(x, (-1, in_features))
        grad_b = grad_rows.sum(dim=0) if ctx.needs_input_grad[2] else None
        return grad_x, grad_w, grad_b


# Outside create_graph, backward needs no graph of its own: the two functions below compute
# the Tensor versions' gradients on the raw arrays, without their reshape, transpose and
# product nodes (six for a Linear). At the tiny GPT's sizes that saves 9% of a step.


def _matmul_grads_on_arrays(ctx, grad) -> tuple:
    a, b = ctx.saved_arrays
    need_a, need_b = ctx.needs_input_grad[:2]
    # each gradient laid out as its input (backend.empty_laid_out_like) where the shapes agree
    grad_a, grad_b = matmul_pair(
        (grad, b.swapaxes(-1, -2)) if need_a else None,
        (a.swapaxes(-1, -2), grad) if need_b else None,
        outs=(
            _laid_out_like(a, grad.shape[:-1] + b.shape[-2:-1]) if need_a else None,
            _laid_out_like(b, grad.shape[:-2] + (a.shape[-1], grad.shape[-1])) if need_b else None,
        ),
    )
    grad_a = sum_array_to(grad_a, a.shape) if need_a else None
    grad_b = sum_array_to(grad_b, b.shape) if need_b else None
    return _wrap(grad_a), _wrap(grad_b)


def _linear_grads_on_arrays(ctx, grad) -> tuple:
    x, weight = ctx.saved_arrays
    out_features, in_features = weight.shape
    grad_rows, x_rows = grad.reshape(-1, out_features), x.reshape(-1, in_features)
    need_x, need_w, need_b = ctx.needs_input_grad
    posted = _post_weight_grads(ctx, grad_rows, x_rows, weight) if need_w else None
    if posted is not None:  # dL/dW and dL/db on the helper; dL/dx here, meanwhile
        grad_w, grad_b = posted
        grad_x = (grad_rows @ weight).reshape(x.shape) if need_x else None
        return _wrap(grad_x), _wrap(grad_w), _wrap(grad_b)
    grad_x, grad_w = matmul_pair(
        (grad_rows, weight) if need_x else None,
        (grad_rows.T, x_rows) if need_w else None,
    )
    grad_b = column_sums(grad_rows) if need_b else None  # by BLAS (see backend.column_sums)
    return _wrap(None if grad_x is None else grad_x.reshape(x.shape)), _wrap(grad_w), _wrap(grad_b)


def _post_weight_grads(ctx, grad_rows, x_rows, weight):
    """dL/dW and dL/db queued on the helper thread (backend.weight_grads_posted), where only
    the engine will read them: W and b are leaves, handed their gradients once the walk is
    over (the engine waits for the helper first). None otherwise."""
    _, weight_input, bias_input = ctx.inputs
    if (
        weight_input.grad_fn is not None
        or (bias_input is not None and bias_input.grad_fn is not None)
        or weight.dtype != grad_rows.dtype
    ):
        return None
    return weight_grads_posted(grad_rows, x_rows, ctx.needs_input_grad[2])


def _laid_out_like(x, product_shape):
    """An array laid out as x for a product of ``product_shape`` (x's gradient before any
    sum over broadcast dims), or None (a new C-ordered one) when the shapes differ."""
    return empty_laid_out_like(x) if x.shape == product_shape else None


def _wrap(grad):
    return None if grad is None else Tensor._make(grad)


def matmul(a, b):
    """a @ b. 1-D operands are treated as a row (left) or a column (right), as in NumPy."""
    if a.ndim == 0 or b.ndim == 0:
        raise ShapeError(f"matmul: both operands need at least 1 dim, got {a.shape} and {b.shape}")
    if a.ndim == 1 and b.ndim == 1:
        return squeeze(squeeze(Matmul.apply(unsqueeze(a, 0), unsqueeze(b, -1)), -1), -1)
    if a.ndim == 1:
        return squeeze(Matmul.apply(unsqueeze(a, 0), b), -2)
    if b.ndim == 1:
        return squeeze(Matmul.apply(a, unsqueeze(b, -1)), -1)
    return Matmul.apply(a, b)


def linear(x, weight, bias=None):
    """y = x W^T + b with W of shape (out_features, in_features), as in PyTorch."""
    return Linear.apply(x, weight, bias)
