"""Matrix products: ``matmul`` (the ``@`` operator, batched and broadcasting like NumPy) and
``linear`` (y = x W^T + b, fused into one node as in PyTorch's F.linear).
"""

from __future__ import annotations

from minigrad.autograd.function import Function
from minigrad.errors import ShapeError
from minigrad.ops.shape import reshape, squeeze, sum_to, transpose, unsqueeze


class Matmul(Function):
    # Y = A B (batched over leading dims, which broadcast)
    @staticmethod
    def forward(ctx, a, b):
        check_matmul_shapes(a, b)
        ctx.save_for_backward(a, b)
        return a @ b

    @staticmethod
    def backward(ctx, grad):
        # dL/dA = G B^T,  dL/dB = A^T G  (each summed back over the batch dims it was broadcast)
        a, b = ctx.saved_tensors
        grad_a = grad_b = None
        if ctx.needs_input_grad[0]:
            grad_a = sum_to(grad @ transpose(b, -1, -2), a.shape)
        if ctx.needs_input_grad[1]:
            grad_b = sum_to(transpose(a, -1, -2) @ grad, b.shape)
        return grad_a, grad_b


class Linear(Function):
    # y = x W^T + b,  x: (..., in), W: (out, in), b: (out,)
    @staticmethod
    def forward(ctx, x, weight, bias):
        check_linear_shapes(x, weight)
        ctx.save_for_backward(x, weight)
        y = x @ weight.T
        return y if bias is None else y + bias

    @staticmethod
    def backward(ctx, grad):
        # dL/dx = g W,  dL/dW = g^T x,  dL/db = sum of g  (both summed over all leading dims,
        # here as rows of one matrix)
        x, weight = ctx.saved_tensors
        out_features, in_features = weight.shape
        grad_rows = reshape(grad, (-1, out_features))
        grad_x = grad_w = grad_b = None
        if ctx.needs_input_grad[0]:
            grad_x = reshape(grad_rows @ weight, x.shape)
        if ctx.needs_input_grad[1]:
            grad_w = transpose(grad_rows, 0, 1) @ reshape(x, (-1, in_features))
        if ctx.needs_input_grad[2]:
            grad_b = grad_rows.sum(dim=0)
        return grad_x, grad_w, grad_b


def check_matmul_shapes(a, b) -> None:
    if a.shape[-1] != b.shape[-2]:
        raise ShapeError(
            f"matmul: cannot multiply shapes {a.shape} and {b.shape} "
            f"({a.shape[-1]} columns against {b.shape[-2]} rows)"
        )


def check_linear_shapes(x, weight) -> None:
    if x.shape[-1] != weight.shape[-1]:
        raise ShapeError(
            f"linear: input of shape {x.shape} has {x.shape[-1]} features but the weight "
            f"of shape {weight.shape} expects {weight.shape[-1]}"
        )


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
