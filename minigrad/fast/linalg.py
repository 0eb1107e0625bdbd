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

import numpy as np

from minigrad import fast
from minigrad.errors import ShapeError
from minigrad.fast.arrays import column_sums, matmul, matmul_pair
from minigrad.ops._helpers import sum_array_to
from minigrad.tensor import Tensor


@fast.register("Matmul", "cpu")
class MatmulKernel:
    @staticmethod
    def forward(ctx, a, b):
        if a.shape[-1] != b.shape[-2]:
            raise ShapeError(
                f"matmul: cannot multiply shapes {a.shape} and {b.shape} "
                f"({a.shape[-1]} columns against {b.shape[-2]} rows)"
            )
        ctx.save_for_backward(a, b)
        same_kind = b.ndim > 2 and a.dtype == b.dtype
        out = _laid_out_like(b, a.shape[:-1] + b.shape[-1:]) if same_kind else None
        return matmul(a, b, out=out)

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_arrays
        grad = grad.data
        need_a, need_b = ctx.needs_input_grad[:2]
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
        if x.shape[-1] != weight.shape[-1]:
            raise ShapeError(
                f"linear: input of shape {x.shape} has {x.shape[-1]} features but the weight "
                f"of shape {weight.shape} expects {weight.shape[-1]}"
            )
        ctx.save_for_backward(x, weight)
        y = matmul(x.reshape(-1, x.shape[-1]), weight.T, add=bias)
        return y.reshape(x.shape[:-1] + (weight.shape[0],))

    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_arrays
        out_features, in_features = weight.shape
        grad_rows = grad.data.reshape(-1, out_features)
        need_x, need_w, need_b = ctx.needs_input_grad
        grad_x, grad_w = matmul_pair(
            (grad_rows, weight) if need_x else None,
            (grad_rows.T, x.reshape(-1, in_features)) if need_w else None,
        )
        grad_b = column_sums(grad_rows) if need_b else None
        grad_x = None if grad_x is None else grad_x.reshape(x.shape)
        return _wrap(grad_x), _wrap(grad_w), _wrap(grad_b)


def _laid_out_like(x, product_shape):
    """An uninitialized array laid out in memory as x (its axes ordered by stride), for a
    product of ``product_shape``; None (a new C-ordered one) where the shapes differ, or
    where BLAS could not write into it."""
    if x.shape != product_shape or x.ndim < 2 or x.itemsize not in x.strides[-2:]:
        return None
    return np.empty(x.shape, x.dtype) if x.flags.c_contiguous else np.empty_like(x, order="K")


def _wrap(grad):
    return None if grad is None else Tensor._make(grad)
