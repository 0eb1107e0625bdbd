"""Matrix products: ``matmul`` (the ``@`` operator, batched and broadcasting like NumPy) and
``linear`` (y = x W^T + b, fused into one node as in PyTorch's F.linear); PyTorch's stricter
forms of matmul, each for one shape: ``mm`` (2-D), ``bmm`` (3-D, a batch of matrices), ``mv``
(matrix times vector), ``dot`` (two vectors), and ``outer`` (u v^T). ``einsum`` is in
ops/einsum.py.
"""

from __future__ import annotations

import math

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
        rows = math.prod(x.shape[:-1])  # (not -1: a size of 0 leaves it undetermined)
        grad_rows = reshape(grad, (rows, out_features))
        grad_x = grad_w = grad_b = None
        if ctx.needs_input_grad[0]:
            grad_x = reshape(grad_rows @ weight, x.shape)
        if ctx.needs_input_grad[1]:
            grad_w = transpose(grad_rows, 0, 1) @ reshape(x, (rows, in_features))
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


def _check_ndim(op: str, name: str, t, ndim: int, what: str) -> None:
    if t.ndim != ndim:
        raise RuntimeError(
            f"{op}: {name} must be a {what}, got a {t.ndim}-D tensor of shape {t.shape}"
        )


def mm(input, mat2):  # noqa: A002  (PyTorch's argument names)
    """The matrix product of two 2-D tensors (no broadcasting)."""
    _check_ndim("mm", "self", input, 2, "matrix")
    _check_ndim("mm", "mat2", mat2, 2, "matrix")
    if input.shape[1] != mat2.shape[0]:
        raise RuntimeError(
            f"mm: mat1 and mat2 shapes cannot be multiplied ({input.shape[0]}x{input.shape[1]} "
            f"and {mat2.shape[0]}x{mat2.shape[1]})"
        )
    return Matmul.apply(input, mat2)


def bmm(input, mat2):  # noqa: A002
    """A batch of matrix products: (b, n, m) @ (b, m, p) -> (b, n, p), no broadcasting."""
    _check_ndim("bmm", "batch1", input, 3, "3D tensor")
    _check_ndim("bmm", "batch2", mat2, 3, "3D tensor")
    expected = [input.shape[0], input.shape[2]]
    if list(mat2.shape[:2]) != expected:
        raise RuntimeError(
            f"bmm: Expected size for first two dimensions of batch2 tensor to be: {expected} "
            f"but got: {list(mat2.shape[:2])} (batch1 {input.shape}, batch2 {mat2.shape})"
        )
    return Matmul.apply(input, mat2)


def mv(input, vec):  # noqa: A002
    """A matrix (n, m) times a vector (m,) -> (n,)."""
    _check_ndim("mv", "input", input, 2, "matrix")
    _check_ndim("mv", "vec", vec, 1, "vector")
    if input.shape[1] != vec.shape[0]:
        raise RuntimeError(
            f"mv: size mismatch, got input ({input.shape[0]}x{input.shape[1]}) and vec "
            f"({vec.shape[0]})"
        )
    return matmul(input, vec)


def dot(input, other):  # noqa: A002
    """The dot product of two 1-D tensors of the same size: sum_i u_i v_i."""
    if input.ndim != 1 or other.ndim != 1:
        raise RuntimeError(
            f"dot: 1D tensors expected, but got {input.ndim}D and {other.ndim}D tensors"
        )
    if input.shape != other.shape:
        raise RuntimeError(
            f"dot: inconsistent tensor size, expected tensors of the same number of elements, "
            f"but got {input.shape[0]} and {other.shape[0]} elements"
        )
    return matmul(input, other)


def outer(input, vec2):  # noqa: A002
    """u v^T for 1-D u (n,) and v (m,): the (n, m) matrix of products u_i v_j."""
    _check_ndim("outer", "input", input, 1, "1-D tensor")
    _check_ndim("outer", "vec2", vec2, 1, "1-D tensor")
    return reshape(input, (-1, 1)) * reshape(vec2, (1, -1))
