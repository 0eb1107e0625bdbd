"""Matrix products on the CPU: ``ops.linalg``'s Matmul and Linear with big products on both
cores (``arrays.matmul``), and their backward on arrays: the two products of a backward at
the same time, one on each core (``arrays.matmul_pair``), without the reshape, transpose and
product nodes that the reference's Tensor ops build.

Linear flattens x's leading dims into rows first: one (rows, in) @ (in, out) product runs
faster than a batch of small ones, and each thread adds the bias to its half of the rows.
A gradient is laid out in memory as its input where the shapes agree (attention's heads are
a transposed view), so that the transposes and reshapes that made the input undo the
gradient as views, not copies.
"""

from __future__ import annotations

import math

import numpy as np

from minigrad import fast
from minigrad.fast.arrays import by_rows, column_sums, matmul, matmul_pair, matrix_product
from minigrad.ops._helpers import sum_array_to
from minigrad.ops.linalg import check_linear_shapes, check_matmul_shapes
from minigrad.tensor import Tensor


@fast.register("Matmul", "cpu")
class MatmulKernel:
    @staticmethod
    def forward(ctx, a, b):
        check_matmul_shapes(a, b)
        ctx.save_for_backward(a, b)
        same_kind = b.ndim > 2 and a.dtype == b.dtype
        out = _laid_out_like(b, a.shape[:-1] + b.shape[-1:]) if same_kind else None
        return matmul(a, b, out=out)

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_arrays
        grad = grad.array
        need_a, need_b = ctx.needs_input_grad[:2]
        if a.ndim > 2 and a.shape[:-2] == b.shape[:-2]:  # a batch: each thread its matrices
            return _batch_grads(a, b, grad, need_a, need_b)
        grad_a, grad_b = matmul_pair(
            (grad, b.swapaxes(-1, -2)) if need_a else None,
            (a.swapaxes(-1, -2), grad) if need_b else None,
            outs=(
                _laid_out_like(a, grad.shape[:-1] + b.shape[-2:-1]) if need_a else None,
                _laid_out_like(b, grad.shape[:-2] + (a.shape[-1], grad.shape[-1]))
                if need_b
                else None,
            ),
        )
        grad_a = _wrap(sum_array_to(grad_a, a.shape)) if need_a else None
        grad_b = _wrap(sum_array_to(grad_b, b.shape)) if need_b else None
        return grad_a, grad_b


@fast.register("Linear", "cpu")
class LinearKernel:
    @staticmethod
    def forward(ctx, x, weight, bias):
        check_linear_shapes(x, weight)
        ctx.save_for_backward(x, weight)
        y = matmul(x.reshape(math.prod(x.shape[:-1]), x.shape[-1]), weight.T, add=bias)
        return y.reshape(x.shape[:-1] + (weight.shape[0],))

    @staticmethod
    def backward(ctx, grad):
        # each thread takes its rows of g and x: its rows of dL/dx = g W, and its part of the
        # sums over rows dL/dW = g^T x and dL/db = sum of g; the two parts add up
        x, weight = ctx.saved_arrays
        out_features, in_features = weight.shape
        rows = math.prod(x.shape[:-1])
        grad_rows, x_rows = grad.array.reshape(rows, out_features), x.reshape(rows, in_features)
        need_x, need_w, need_b = ctx.needs_input_grad
        rows = grad_rows.shape[0]
        grad_x = (
            np.empty((rows, in_features), np.result_type(grad_rows, weight)) if need_x else None
        )
        sums = [None, None]  # each part's (dL/dW, dL/db) over its rows

        def part(index, start, stop):
            g = grad_rows[start:stop]
            if need_x:
                matrix_product(g, weight, out=grad_x[start:stop])
            sums[index] = (matrix_product(g.T, x_rows[start:stop]) if need_w else None,
                           column_sums(g) if need_b else None)  # fmt: skip

        parts = by_rows(rows, 2 * grad_rows.size * in_features, part)
        grad_w, grad_b = sums[0]
        if parts == 2:
            grad_w = grad_w + sums[1][0] if need_w else None
            grad_b = grad_b + sums[1][1] if need_b else None
        grad_x = None if grad_x is None else grad_x.reshape(x.shape)
        return _wrap(grad_x), _wrap(grad_w), _wrap(grad_b)


def _batch_grads(a, b, grad, need_a, need_b) -> tuple:
    """dL/dA = G B^T and dL/dB = A^T G for batches of matrices of the same batch shape, each
    thread taking its matrices of the batch (along the first axis) for both products."""
    grad_a = _laid_out_like(a, a.shape) if need_a else None
    grad_b = _laid_out_like(b, b.shape) if need_b else None
    grad_a = np.empty(a.shape, grad.dtype) if need_a and grad_a is None else grad_a
    grad_b = np.empty(b.shape, grad.dtype) if need_b and grad_b is None else grad_b

    def part(_, start, stop):
        batch = slice(start, stop)
        if need_a:
            np.matmul(grad[batch], b[batch].swapaxes(-1, -2), out=grad_a[batch])
        if need_b:
            np.matmul(a[batch].swapaxes(-1, -2), grad[batch], out=grad_b[batch])

    macs = grad.size * a.shape[-1] * (need_a + need_b)
    by_rows(a.shape[0], macs, part)
    return _wrap(grad_a), _wrap(grad_b)


def _laid_out_like(x, product_shape):
    """An uninitialized array laid out in memory as x (its axes ordered by stride), for a
    product of ``product_shape``; None (a new C-ordered one) where the shapes differ, or
    where BLAS could not write into it."""
    if x.shape != product_shape or x.ndim < 2 or x.itemsize not in x.strides[-2:]:
        return None
    return np.empty(x.shape, x.dtype) if x.flags.c_contiguous else np.empty_like(x, order="K")


def _wrap(grad):
    return None if grad is None else Tensor._make(grad)
