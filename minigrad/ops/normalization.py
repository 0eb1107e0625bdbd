"""Layer normalization as one fused node:

    LayerNorm(z) = gamma * (z - mu) / sqrt(sigma^2 + eps) + beta

over the last dims (``normalized_shape``), mu and sigma^2 the mean and (biased) variance there.
"""

from __future__ import annotations

import numpy as np

from minigrad.autograd.function import Function
from minigrad.autograd.grad_mode import is_grad_enabled
from minigrad.backend import (
    column_sums,
    constant_column,
    fused_centered_sum_of_squares,
    fused_layer_norm_input_grad,
    fused_layer_norm_output,
    in_a_stream,
    in_two_halves,
    is_numpy,
    is_small,
    ones_row,
    reshaped,
    row_means,
    scalar_operand,
    splits_in_two_halves,
    sum_of_products,
    wait_for_writes_to,
)
from minigrad.errors import ShapeError
from minigrad.ops._helpers import count_in, xp_of
from minigrad.tensor import Tensor


class LayerNorm(Function):
    # xhat = (x - mu) * rstd, rstd = 1 / sqrt(sigma^2 + eps);  y = gamma * xhat + beta
    # dL/dxhat = g * gamma
    # dL/dx = rstd * (dL/dxhat - mean(dL/dxhat) - xhat * mean(dL/dxhat * xhat))
    # dL/dgamma = sum over rows of g * xhat;  dL/dbeta = sum over rows of g
    streams = True  # (backend, "streams"): each row on its own

    @staticmethod
    def forward(ctx, x, weight, bias, axes, eps):
        ctx.axes, ctx.eps = axes, eps
        n = ctx.n = x.shape[-1] if len(axes) == 1 else count_in(x.shape, axes)  # per row
        if not is_numpy(x) and weight is not None and bias is not None:
            ctx.small = False
            return _forward_on_gpu(ctx, x, weight, bias, axes, eps)
        # the normalized dims are the trailing ones: x as a (rows, n) matrix, one row each
        x_rows, weight_row, bias_row = _matrix(x, n), _row(weight), _row(bias)
        ctx.small = _is_small(x_rows, weight_row, bias_row)  # (backward takes the same path)
        if ctx.small:
            wait_for_writes_to(x_rows)  # (in a stream: read whole here)
            xhat, rstd, y = _normalize_small(x_rows, weight_row, bias_row, eps)
        else:
            xhat, rstd, y = _normalize(x_rows, weight_row, bias_row, eps)
        ctx.save_for_backward(x, weight, xhat, rstd)
        return y if y.shape == x.shape else y.reshape(x.shape)

    @staticmethod
    def backward(ctx, grad):
        if not is_grad_enabled():
            _, weight, xhat, rstd = ctx.saved_arrays
            return _backward_on_arrays(ctx, grad.data, weight, xhat, rstd)
        x, weight, xhat, rstd = ctx.saved_tensors
        axes = ctx.axes
        # create_graph: rebuild xhat and rstd from x, differentiably, so that second
        # derivatives see how they depend on x
        centered = x - x.mean(dim=axes, keepdim=True)
        rstd = ((centered * centered).mean(dim=axes, keepdim=True) + ctx.eps) ** -0.5
        xhat = centered * rstd
        grad_xhat = grad * weight if weight is not None else grad
        grad_x = rstd * (
            grad_xhat
            - grad_xhat.mean(dim=axes, keepdim=True)
            - xhat * (grad_xhat * xhat).mean(dim=axes, keepdim=True)
        )
        rows = tuple(range(grad.ndim - len(axes)))
        grad_w = (grad * xhat).sum(dim=rows) if ctx.needs_input_grad[1] else None
        grad_b = grad.sum(dim=rows) if ctx.needs_input_grad[2] else None
        return grad_x, grad_w, grad_b


def _forward_on_gpu(ctx, x, weight, bias, axes, eps):
    """LayerNorm.forward on CUDA arrays: the row statistics by reductions, the rest in one
    kernel. The lines above compute the same; on the GPU, tests compare this path with the
    Tensor twin (tests/test_fused_twins.py) and with PyTorch."""
    inv_n = 1.0 / ctx.n
    mean = x.sum(axis=axes, keepdims=True)
    mean *= inv_n
    rstd = fused_centered_sum_of_squares(x, mean, axes)
    rstd *= inv_n  # sigma^2
    rstd += eps
    rstd **= -0.5  # 1 / sqrt(sigma^2 + eps)
    xhat, y = fused_layer_norm_output(x, mean, rstd, weight, bias)
    ctx.save_for_backward(x, weight, xhat, rstd)
    return y


def _normalize(x, weight, bias, eps):
    """LayerNorm.forward's arithmetic on the rows of a matrix x (weight and bias: one value
    per column, or None), where it does not take _normalize_small: returns (xhat, rstd, y).
    Outside a stream it runs on one thread:
    in two halves of the rows on both cores, waiting for both (backend.in_two_halves), the
    toy GPT's step was 2-3% slower, as its passes are short and each hand-over of the GIL
    between the threads costs a wake-up. In a stream nothing waits (backend, "streams")."""
    if not (in_a_stream() and splits_in_two_halves(x)):
        wait_for_writes_to(x)
        return _normalize_rows(x, weight, bias, eps)
    xp = xp_of(x)
    xhat = xp.empty_like(x)
    y = xp.empty(x.shape, x.dtype if weight is None else xp.result_type(x, weight))
    rstd = xp.empty((x.shape[0], 1), x.dtype)

    def normalize(x, xhat, rstd, y):
        _normalize_rows(x, weight, bias, eps, xhat, rstd, y)

    in_two_halves(normalize, x, xhat, rstd, y, writes=(1, 2, 3))
    return xhat, rstd, y


def _normalize_rows(x, weight, bias, eps, xhat=None, rstd=None, y=None):
    """(xhat, rstd, y) of _normalize, written into the arrays given (new ones where None: at
    8x8, allocating them first made the op 6-9% slower)."""
    xp = xp_of(x)
    xhat = xp.subtract(x, row_means(x), out=xhat)  # x - mu
    rstd = sum_of_products(xhat, xhat, (1,), out=rstd)
    rstd *= 1.0 / x.shape[1]  # sigma^2
    rstd += eps
    xp.sqrt(rstd, out=rstd)  # then 1 / that (power(-0.5): 7.3 against 1.7 us on 1024 rows)
    xp.reciprocal(rstd, out=rstd)  # 1 / sqrt(sigma^2 + eps)
    xhat *= rstd
    if weight is not None:
        y = xp.multiply(xhat, weight, out=y)
    elif y is None:
        y = xhat.copy()
    else:
        y[...] = xhat
    if bias is not None:
        y += bias
    return xhat, rstd, y


def _is_small(x, weight, bias) -> bool:
    """Whether LayerNorm on the matrix x takes _normalize_small and then _grads_small: a
    small NumPy one (backend.SMALL_SIZE), with a weight and a bias of its dtype. Forward and
    backward of those calls alone, in a Function, against the general path's: 8x8 16.4
    against 23.4 us, 128x32 24.8 against 32.4, 512x64 72.8 against 83.4 (2048x128: 495
    against 464)."""
    return (
        is_small(x)
        and weight is not None
        and bias is not None
        and weight.dtype == x.dtype
        and bias.dtype == x.dtype
    )


def _normalize_small(x, weight, bias, eps):
    """(xhat, rstd, y) of _normalize_rows, for a small NumPy matrix (backend.SMALL_SIZE): the
    same arithmetic, with each row or column operand first spread out to the matrix's shape,
    so that every elementwise op runs NumPy's loop over whole arrays (8x8: 0.1 + 0.2 us,
    against 0.75 us for its broadcasting loop, which pays per row), and the row means as
    products with a column of 1/n (ndarray.dot). tests/test_fused_twins.py holds the two
    paths to the same values."""
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
    """(dL/dx, dL/dgamma, dL/dbeta) of LayerNorm.backward for a small NumPy matrix, as
    _normalize_small: operands spread out, sums and means by ndarray.dot."""
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


def _backward_on_arrays(ctx, grad, weight, xhat, rstd):
    """LayerNorm.backward's formula on raw arrays: the fast path outside create_graph (the
    Tensor version above is its plain twin). It works on (rows, n) matrices, as forward."""
    n = ctx.n
    grad_rows, weight_row = _matrix(grad, n), _row(weight)
    if ctx.small:  # as forward (grad has x's dtype); xhat and rstd were saved as matrices
        return _finish_grads(ctx, grad, *_grads_small(grad_rows, xhat, rstd, weight_row))
    xhat, rstd = _matrix(xhat, n), _matrix(rstd, 1)
    on_gpu = not is_numpy(grad) and weight is not None  # dL/dx in one kernel, below
    # g * xhat: summed down the rows, dL/dgamma; on the CPU also a buffer for dL/dx
    grad_times_xhat = grad_rows * xhat if ctx.needs_input_grad[1] or not on_gpu else None
    grad_w = column_sums(grad_times_xhat) if ctx.needs_input_grad[1] else None
    grad_b = column_sums(grad_rows) if ctx.needs_input_grad[2] else None
    if on_gpu:
        grad_xhat = grad_rows * weight_row
        mean_grad_xhat = row_means(grad_xhat)
        mean_grad_xhat_xhat = row_means(grad_xhat * xhat)
        grad_x = fused_layer_norm_input_grad(
            grad_xhat, xhat, rstd, mean_grad_xhat, mean_grad_xhat_xhat
        )
    else:
        grad_x = _input_grad(grad_rows, xhat, rstd, weight_row, grad_times_xhat)
    return _finish_grads(ctx, grad, grad_x, grad_w, grad_b)


def _finish_grads(ctx, grad, grad_x, grad_w, grad_b) -> tuple:
    """backward's return value: the gradients of the matrices back in the shapes of x and
    of normalized_shape, as Tensors; None for those not needed."""
    wrap = Tensor._make
    if grad_x.shape != grad.shape:
        grad_x = grad_x.reshape(grad.shape)
    _, need_w, need_b = ctx.needs_input_grad
    if len(ctx.axes) > 1:  # as the normalized dims: (n,) -> normalized_shape
        normalized_shape = grad.shape[grad.ndim - len(ctx.axes) :]
        grad_w = grad_w.reshape(normalized_shape) if need_w else None
        grad_b = grad_b.reshape(normalized_shape) if need_b else None
    return wrap(grad_x), wrap(grad_w) if need_w else None, wrap(grad_b) if need_b else None


def _matrix(a, n: int):
    """``a`` as a matrix of rows of n values (a view where the layout allows)."""
    return a if a.ndim == 2 and a.shape[1] == n else reshaped(a, (-1, n))


def _row(param):
    """weight or bias (of normalized_shape) as one row of n values; None stays None."""
    return param if param is None or param.ndim == 1 else param.reshape(-1)


def _input_grad(grad, xhat, rstd, weight, grad_times_xhat):
    """dL/dx on the rows of matrices (see LayerNorm), on one thread (as _normalize), from
    g * xhat (made for dL/dgamma, and overwritten here).

    Both row means are matrix-vector products with gamma / n: mean(dL/dxhat) = g (gamma/n)
    and mean(dL/dxhat * xhat) = (g * xhat) (gamma/n), with no dL/dxhat * xhat array, and
    g * xhat's buffer then takes xhat * that mean (at 2048 rows of 128: 0.44-0.46 against
    0.48-0.52 ms for the backward, whose products were vecdot and a fresh array)."""
    if weight is None:
        grad_x = grad.copy()  # dL/dxhat
        mean_grad_xhat, mean_grad_xhat_xhat = row_means(grad), row_means(grad_times_xhat)
    else:
        grad_x = grad * weight  # dL/dxhat
        column = (weight * (1.0 / grad.shape[1]))[:, None]  # gamma / n
        mean_grad_xhat, mean_grad_xhat_xhat = grad.dot(column), grad_times_xhat.dot(column)
    grad_x -= xp_of(grad).multiply(xhat, mean_grad_xhat_xhat, out=grad_times_xhat)
    grad_x -= mean_grad_xhat
    grad_x *= rstd
    return grad_x


def layer_norm(x, normalized_shape, weight=None, bias=None, eps: float = 1e-5):
    """Normalize x over its last ``len(normalized_shape)`` dims, then scale and shift."""
    if isinstance(normalized_shape, int):
        normalized_shape = (normalized_shape,)
    else:
        normalized_shape = tuple(normalized_shape)
    shape = x.shape
    first = len(shape) - len(normalized_shape)  # the first normalized dim
    if shape[first:] != normalized_shape:
        raise ShapeError(
            f"layer_norm: input of shape {shape} does not end in normalized_shape "
            f"{normalized_shape}"
        )
    if weight is not None and weight.shape != normalized_shape:
        raise _parameter_shape_error("weight", weight, normalized_shape)
    if bias is not None and bias.shape != normalized_shape:
        raise _parameter_shape_error("bias", bias, normalized_shape)
    axes = (first,) if first == len(shape) - 1 else tuple(range(first, len(shape)))
    return LayerNorm.apply(x, weight, bias, axes=axes, eps=eps)


def _parameter_shape_error(name, param, normalized_shape) -> ShapeError:
    return ShapeError(f"layer_norm: {name} has shape {param.shape}, expected {normalized_shape}")
