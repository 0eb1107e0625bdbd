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
        normalize = _normalize_small if ctx.small else _normalize
        xhat, rstd, y = normalize(x_rows, weight_row, bias_row, eps)
        ctx.save_for_kernel(xhat, rstd)
        return y if y.shape == x.shape else y.reshape(x.shape)

    @staticmethod
    def backward(ctx, grad):
        (_, weight), (xhat, rstd) = ctx.saved_arrays, ctx.kernel_saved
        grad = grad.data
        grad_rows, weight_row = _matrix(grad, xhat.shape[1]), _row(weight)
        if ctx.small:
            grad_x, grad_w, grad_b = _grads_small(grad_rows, xhat, rstd, weight_row)
        else:
            grad_times_xhat = grad_rows * xhat  # summed down the rows: dL/dgamma
            grad_w = column_sums(grad_times_xhat) if ctx.needs_input_grad[1] else None
            grad_b = column_sums(grad_rows) if ctx.needs_input_grad[2] else None
            grad_x = _input_grad(grad_rows, xhat, rstd, weight_row, grad_times_xhat)
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


def _normalize(x, weight, bias, eps):
    """(xhat, rstd, y) for the rows of a matrix x (weight and bias: a row, or None)."""
    xhat = np.subtract(x, row_means(x))  # x - mu
    rstd = sum_of_products(xhat, xhat, (1,))
    rstd *= 1.0 / x.shape[1]  # sigma^2
    rstd += eps
    np.sqrt(rstd, out=rstd)
    np.reciprocal(rstd, out=rstd)  # 1 / sqrt(sigma^2 + eps)
    xhat *= rstd
    y = xhat * weight if weight is not None else xhat.copy()
    if bias is not None:
        y += bias
    return xhat, rstd, y


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


def _input_grad(grad, xhat, rstd, weight, grad_times_xhat):
    """dL/dx for the rows of matrices, from g * xhat (overwritten here). Both row means are
    matrix-vector products with gamma / n: mean(dL/dxhat) = g (gamma/n) and
    mean(dL/dxhat * xhat) = (g * xhat) (gamma/n)."""
    if weight is None:
        grad_x = grad.copy()  # dL/dxhat
        mean_grad_xhat, mean_grad_xhat_xhat = row_means(grad), row_means(grad_times_xhat)
    else:
        grad_x = grad * weight  # dL/dxhat
        column = (weight * (1.0 / grad.shape[1]))[:, None]  # gamma / n
        mean_grad_xhat, mean_grad_xhat_xhat = grad.dot(column), grad_times_xhat.dot(column)
    grad_x -= np.multiply(xhat, mean_grad_xhat_xhat, out=grad_times_xhat)
    grad_x -= mean_grad_xhat
    grad_x *= rstd
    return grad_x
