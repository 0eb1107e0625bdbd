"""LayerNorm on the CPU: ``ops.normalization.LayerNorm`` in fewer passes, with its backward
on arrays.

The normalized dims are the trailing ones, so x is a matrix of rows of n values, each row on
its own. Forward keeps xhat and 1 / sqrt(sigma^2 + eps) for its backward (the reference
recomputes them from x); the row means and sums are products with a column of 1/n
(``arrays.row_means``), and on small arrays each row operand is first spread out to the
matrix's shape (``arrays.SMALL_SIZE``).
"""

from __future__ import annotations

import numpy as np

from minigrad import fast
from minigrad.fast.arrays import (
    PARALLEL_MIN_SIZE,
    by_rows,
    column_sums,
    constant_column,
    is_small,
    ones_row,
    row_means,
    scalar_operand,
    sum_of_products,
)
from minigrad.tensor import Tensor


@fast.register("LayerNorm", "cpu")
class LayerNormKernel:
    @staticmethod
    def forward(ctx, x, weight, bias, axes, eps):
        ctx.axes, ctx.eps = axes, eps
        ctx.save_for_backward(x, weight)  # what the reference's backward reads
        n = x.shape[-1] if len(axes) == 1 else int(np.prod([x.shape[a] for a in axes]))
        x_rows, weight_row, bias_row = _matrix(x, n), _row(weight), _row(bias)
        ctx.small = _fits_small_path(x_rows, weight_row, bias_row)
        if ctx.small:
            xhat, rstd, y = _normalize_small(x_rows, weight_row, bias_row, eps)
        else:  # each row on its own: the rows split between the two threads
            xhat, rstd = np.empty_like(x_rows), np.empty((x_rows.shape[0], 1), x_rows.dtype)
            y = np.empty(x_rows.shape, np.result_type(x_rows, weight_row) if weight is not None
                         else x_rows.dtype)  # fmt: skip

            def part(_, start, stop):
                rows = slice(start, stop)
                _normalize(x_rows[rows], weight_row, bias_row, eps, xhat[rows], rstd[rows], y[rows])

            by_rows(x_rows.shape[0], x_rows.size, part, PARALLEL_MIN_SIZE)
        ctx.save_for_kernel(xhat, rstd)
        return y if y.shape == x.shape else y.reshape(x.shape)

    @staticmethod
    def backward(ctx, grad):
        (_, weight), (xhat, rstd) = ctx.saved_arrays, ctx.kernel_saved
        grad = grad.array
        grad_rows, weight_row = _matrix(grad, xhat.shape[1]), _row(weight)
        if ctx.small:
            grad_x, grad_w, grad_b = _grads_small(grad_rows, xhat, rstd, weight_row)
        else:  # each thread its rows of dL/dx and its part of the sums down the rows
            operands = (grad_rows, xhat) if weight_row is None else (grad_rows, xhat, weight_row)
            grad_x = np.empty(grad_rows.shape, np.result_type(*operands))
            sums = [None, None]

            def part(index, start, stop):
                rows = slice(start, stop)
                g, g_xhat = grad_rows[rows], grad_rows[rows] * xhat[rows]
                sums[index] = (column_sums(g_xhat), column_sums(g))  # dL/dgamma, dL/dbeta
                _input_grad(g, xhat[rows], rstd[rows], weight_row, g_xhat, grad_x[rows])

            parts = by_rows(grad_rows.shape[0], grad_rows.size, part, PARALLEL_MIN_SIZE)
            grad_w, grad_b = sums[0] if parts == 1 else (a + b for a, b in zip(*sums))
        normalized_shape = grad.shape[grad.ndim - len(ctx.axes) :]
        _, need_w, need_b = ctx.needs_input_grad
        return (
            Tensor._make(grad_x.reshape(grad.shape)),
            Tensor._make(grad_w.reshape(normalized_shape)) if need_w else None,
            Tensor._make(grad_b.reshape(normalized_shape)) if need_b else None,
        )


def _matrix(a, n: int):
    """``a`` as a matrix of rows of n values (a view where the layout allows)."""
    return a if a.ndim == 2 and a.shape[1] == n else a.reshape(-1, n)


def _row(param):
    """weight or bias (of normalized_shape) as one row of n values; None stays None."""
    return param if param is None or param.ndim == 1 else param.reshape(-1)


def _fits_small_path(x, weight, bias) -> bool:
    """A small matrix with a weight and a bias of its dtype (see _normalize_small)."""
    return (
        is_small(x)
        and weight is not None
        and bias is not None
        and weight.dtype == x.dtype
        and bias.dtype == x.dtype
    )


def _normalize(x, weight, bias, eps, xhat, rstd, y) -> None:
    """xhat, rstd and y for the rows of a matrix x (weight and bias: a row, or None), written
    into the arrays given."""
    np.subtract(x, row_means(x), out=xhat)  # x - mu
    sum_of_products(xhat, xhat, (1,), out=rstd)
    rstd *= 1.0 / x.shape[1]  # sigma^2
    rstd += eps
    np.sqrt(rstd, out=rstd)
    np.reciprocal(rstd, out=rstd)  # 1 / sqrt(sigma^2 + eps)
    xhat *= rstd
    if weight is not None:
        np.multiply(xhat, weight, out=y)
    else:
        y[...] = xhat
    if bias is not None:
        y += bias


def _normalize_small(x, weight, bias, eps):
    """_normalize for a small matrix: each row or column operand spread out to the matrix's
    shape first, and the row means as products with a column of 1/n."""
    mean_column = constant_column(x.shape[1], 1.0 / x.shape[1], x.dtype)
    spread = np.empty_like(x)
    spread[...] = x.dot(mean_column)  # mu, in each row
    xhat = np.subtract(x, spread)  # x - mu
    rstd = np.multiply(xhat, xhat, out=spread).dot(mean_column)  # sigma^2
    rstd += scalar_operand(eps, rstd)
    np.sqrt(rstd, out=rstd)
    np.reciprocal(rstd, out=rstd)  # 1 / sqrt(sigma^2 + eps)
    spread[...] = rstd
    xhat *= spread
    spread[...] = weight
    y = np.multiply(xhat, spread)  # gamma * xhat
    spread[...] = bias
    y += spread  # + beta
    return xhat, rstd, y


def _grads_small(grad, xhat, rstd, weight):
    """(dL/dx, dL/dgamma, dL/dbeta) for a small matrix, as _normalize_small: operands spread
    out, sums and means by ndarray.dot."""
    rows, n = grad.shape
    mean_column, ones = constant_column(n, 1.0 / n, grad.dtype), ones_row(rows, grad.dtype)
    buffer = grad * xhat
    grad_w, grad_b = ones.dot(buffer), ones.dot(grad)  # sums down the rows
    grad_x = np.empty_like(grad)
    grad_x[...] = weight
    grad_x *= grad  # dL/dxhat = g * gamma
    mean_grad_xhat = grad_x.dot(mean_column)
    mean_grad_xhat_xhat = np.multiply(grad_x, xhat, out=buffer).dot(mean_column)
    buffer[...] = mean_grad_xhat_xhat
    buffer *= xhat
    grad_x -= buffer  # - xhat * mean(dL/dxhat * xhat)
    buffer[...] = mean_grad_xhat
    grad_x -= buffer  # - mean(dL/dxhat)
    buffer[...] = rstd
    grad_x *= buffer  # * rstd
    return grad_x, grad_w, grad_b


def _input_grad(grad, xhat, rstd, weight, grad_times_xhat, grad_x) -> None:
    """dL/dx for the rows of matrices, written into ``grad_x``, from g * xhat (overwritten
    here). Both row means are matrix-vector products with gamma / n: mean(dL/dxhat) =
    g (gamma/n) and mean(dL/dxhat * xhat) = (g * xhat) (gamma/n)."""
    if weight is None:
        grad_x[...] = grad  # dL/dxhat
        mean_grad_xhat, mean_grad_xhat_xhat = row_means(grad), row_means(grad_times_xhat)
    else:
        np.multiply(grad, weight, out=grad_x)  # dL/dxhat
        column = (weight * (1.0 / grad.shape[1]))[:, None]  # gamma / n
        mean_grad_xhat, mean_grad_xhat_xhat = grad.dot(column), grad_times_xhat.dot(column)
    grad_x -= np.multiply(xhat, mean_grad_xhat_xhat, out=grad_times_xhat)
    grad_x -= mean_grad_xhat
    grad_x *= rstd
