"""Layer normalization as one fused node:

    LayerNorm(z) = gamma * (z - mu) / sqrt(sigma^2 + eps) + beta

over the last dims (``normalized_shape``), mu and sigma^2 the mean and (biased) variance there.
"""

from __future__ import annotations

import numpy as np

from minigrad.autograd.function import Function
from minigrad.autograd.grad_mode import is_grad_enabled
from minigrad.backend import (
    PARALLEL_MIN_SIZE,
    fused_centered_sum_of_squares,
    fused_layer_norm_input_grad,
    fused_layer_norm_output,
    in_two_halves,
    reduce_sum,
    sum_of_products,
)
from minigrad.errors import ShapeError
from minigrad.ops._helpers import xp_of
from minigrad.tensor import Tensor


class LayerNorm(Function):
    # xhat = (x - mu) * rstd, rstd = 1 / sqrt(sigma^2 + eps);  y = gamma * xhat + beta
    # dL/dxhat = g * gamma
    # dL/dx = rstd * (dL/dxhat - mean(dL/dxhat) - xhat * mean(dL/dxhat * xhat))
    # dL/dgamma = sum over rows of g * xhat;  dL/dbeta = sum over rows of g
    @staticmethod
    def forward(ctx, x, weight, bias, axes, eps):
        ctx.axes, ctx.eps = axes, eps
        ctx.inv_n = inv_n = 1.0 / _count(x.shape, axes)  # mean = sum * inv_n
        if type(x) is not np.ndarray and weight is not None and bias is not None:
            return _forward_on_gpu(ctx, x, weight, bias, axes, eps)
        if x.size < PARALLEL_MIN_SIZE or 0 in axes:
            xhat, rstd, y = _normalize(x, weight, bias, axes, inv_n, eps)
        else:  # on both cores, each normalizing half of the rows into the outputs
            xp = xp_of(x)
            xhat, y = xp.empty(x.shape, x.dtype), xp.empty(x.shape, x.dtype)
            rstd = xp.empty(x.shape[: x.ndim - len(axes)] + (1,) * len(axes), x.dtype)

            def normalize_half(x, xhat, rstd, y):
                _normalize(x, weight, bias, axes, inv_n, eps, xhat, rstd, y)

            in_two_halves(normalize_half, x, xhat, rstd, y)
        ctx.save_for_backward(x, weight, xhat, rstd)
        return y

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
        return grad_x, grad_w, grad_b, None, None


def _forward_on_gpu(ctx, x, weight, bias, axes, eps):
    """LayerNorm.forward on CUDA arrays: the row statistics by reductions, the rest in one
    kernel. The lines above compute the same; on the GPU, tests compare this path with the
    Tensor twin (tests/test_fused_twins.py) and with PyTorch."""
    inv_n = ctx.inv_n
    mean = x.sum(axis=axes, keepdims=True)
    mean *= inv_n
    rstd = fused_centered_sum_of_squares(x, mean, axes)
    rstd *= inv_n  # sigma^2
    rstd += eps
    rstd **= -0.5  # 1 / sqrt(sigma^2 + eps)
    xhat, y = fused_layer_norm_output(x, mean, rstd, weight, bias)
    ctx.save_for_backward(x, weight, xhat, rstd)
    return y


def _normalize(x, weight, bias, axes, inv_n, eps, xhat=None, rstd=None, y=None):
    """LayerNorm.forward's arithmetic on arrays: returns (xhat, rstd, y), written into the
    given arrays if any (each thread of in_two_halves passes its half of the rows)."""
    xp = xp_of(x)
    mean = reduce_sum(x, axes, keepdims=True)  # (NumPy's mean is slower)
    mean *= inv_n
    xhat = xp.subtract(x, mean, out=xhat)  # x - mu
    rstd = sum_of_products(xhat, xhat, axes, out=rstd)
    rstd *= inv_n  # sigma^2
    rstd += eps
    xp.power(rstd, -0.5, out=rstd)  # 1 / sqrt(sigma^2 + eps)
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


def _count(shape, axes) -> int:
    count = 1
    for axis in axes:
        count *= shape[axis]
    return count


def _backward_on_arrays(ctx, grad, weight, xhat, rstd):
    """LayerNorm.backward's formula on raw arrays, in place where it can be: the fast path
    outside create_graph (the Tensor version above is its plain twin)."""
    axes, inv_n = ctx.axes, ctx.inv_n
    rows = tuple(range(grad.ndim - len(axes)))
    grad_w = reduce_sum(grad * xhat, rows) if ctx.needs_input_grad[1] else None
    grad_b = reduce_sum(grad, rows) if ctx.needs_input_grad[2] else None
    if type(grad) is not np.ndarray and weight is not None:  # on the GPU: one kernel
        grad_xhat = grad * weight
        mean_grad_xhat = grad_xhat.sum(axis=axes, keepdims=True)
        mean_grad_xhat *= inv_n
        mean_grad_xhat_xhat = (grad_xhat * xhat).sum(axis=axes, keepdims=True)
        mean_grad_xhat_xhat *= inv_n
        grad_x = fused_layer_norm_input_grad(
            grad_xhat, xhat, rstd, mean_grad_xhat, mean_grad_xhat_xhat
        )
    elif grad.size < PARALLEL_MIN_SIZE or 0 in axes:
        grad_x = _input_grad(grad, xhat, rstd, weight, axes, inv_n)
    else:  # on both cores, each taking half of the rows
        grad_x = xp_of(grad).empty(grad.shape, grad.dtype)

        def input_grad_half(grad, xhat, rstd, grad_x):
            _input_grad(grad, xhat, rstd, weight, axes, inv_n, grad_x)

        in_two_halves(input_grad_half, grad, xhat, rstd, grad_x)
    return _wrap_grads(grad_x, grad_w, grad_b)


def _input_grad(grad, xhat, rstd, weight, axes, inv_n, grad_x=None):
    """dL/dx on arrays (into ``grad_x`` if given, as a thread of in_two_halves does)."""
    xp = xp_of(grad)
    if weight is not None:
        grad_x = xp.multiply(grad, weight, out=grad_x)  # dL/dxhat
    elif grad_x is None:
        grad_x = grad.copy()
    else:
        grad_x[...] = grad
    mean_grad_xhat_xhat = sum_of_products(grad_x, xhat, axes)
    mean_grad_xhat_xhat *= inv_n
    mean_grad_xhat = reduce_sum(grad_x, axes, keepdims=True)
    mean_grad_xhat *= inv_n
    grad_x -= mean_grad_xhat
    grad_x -= xhat * mean_grad_xhat_xhat
    grad_x *= rstd
    return grad_x


def _wrap_grads(grad_x, grad_w, grad_b) -> tuple:
    wrap = Tensor._make
    return (
        wrap(grad_x),
        wrap(grad_w) if grad_w is not None else None,
        wrap(grad_b) if grad_b is not None else None,
        None,
        None,
    )


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
    return LayerNorm.apply(x, weight, bias, tuple(range(first, len(shape))), eps)


def _parameter_shape_error(name, param, normalized_shape) -> ShapeError:
    return ShapeError(f"layer_norm: {name} has shape {param.shape}, expected {normalized_shape}")
