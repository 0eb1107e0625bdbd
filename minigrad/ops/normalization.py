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
        xp = xp_of(x)
        if xp is not np and weight is not None and bias is not None:
            return _forward_on_gpu(ctx, x, weight, bias, axes, eps)
        xhat, y = xp.empty(x.shape, x.dtype), xp.empty(x.shape, x.dtype)
        rstd = xp.empty(x.shape[: x.ndim - len(axes)] + (1,) * len(axes), x.dtype)

        def normalize(x, xhat, rstd, y):  # rows are independent: any split of dim 0 works
            mean = reduce_sum(x, axes, keepdims=True)  # (NumPy's mean is slower)
            mean *= inv_n
            xp.subtract(x, mean, out=xhat)  # x - mu
            sum_of_products(xhat, xhat, axes, out=rstd)
            rstd *= inv_n  # sigma^2
            rstd += eps
            xp.power(rstd, -0.5, out=rstd)  # 1 / sqrt(sigma^2 + eps)
            xhat *= rstd
            if weight is not None:
                xp.multiply(xhat, weight, out=y)
            else:
                y[...] = xhat
            if bias is not None:
                y += bias

        _by_rows(axes, normalize, x, xhat, rstd, y)
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


def _by_rows(axes, compute, *arrays) -> None:
    """``compute(*arrays)``, on both cores when the arrays are big and dim 0 is a row dim."""
    if arrays[0].size < PARALLEL_MIN_SIZE or 0 in axes:
        compute(*arrays)
    else:
        in_two_halves(compute, *arrays)


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
    xp = xp_of(grad)
    if xp is not np and weight is not None:  # on the GPU: one kernel for grad_x
        grad_xhat = grad * weight
        mean_grad_xhat = grad_xhat.sum(axis=axes, keepdims=True)
        mean_grad_xhat *= inv_n
        mean_grad_xhat_xhat = (grad_xhat * xhat).sum(axis=axes, keepdims=True)
        mean_grad_xhat_xhat *= inv_n
        grad_x = fused_layer_norm_input_grad(
            grad_xhat, xhat, rstd, mean_grad_xhat, mean_grad_xhat_xhat
        )
        return _wrap_grads(grad_x, grad_w, grad_b)
    grad_x = xp.empty(grad.shape, grad.dtype)

    def input_grad(grad, xhat, rstd, grad_x):
        if weight is not None:
            xp.multiply(grad, weight, out=grad_x)  # dL/dxhat
        else:
            grad_x[...] = grad
        mean_grad_xhat_xhat = sum_of_products(grad_x, xhat, axes)
        mean_grad_xhat_xhat *= inv_n
        mean_grad_xhat = reduce_sum(grad_x, axes, keepdims=True)
        mean_grad_xhat *= inv_n
        grad_x -= mean_grad_xhat
        grad_x -= xhat * mean_grad_xhat_xhat
        grad_x *= rstd

    _by_rows(axes, input_grad, grad, xhat, rstd, grad_x)
    return _wrap_grads(grad_x, grad_w, grad_b)


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
    normalized_shape = tuple(normalized_shape)
    if x.shape[x.ndim - len(normalized_shape) :] != normalized_shape:
        raise ShapeError(
            f"layer_norm: input of shape {x.shape} does not end in normalized_shape "
            f"{normalized_shape}"
        )
    for name, param in (("weight", weight), ("bias", bias)):
        if param is not None and param.shape != normalized_shape:
            raise ShapeError(
                f"layer_norm: {name} has shape {param.shape}, expected {normalized_shape}"
            )
    axes = tuple(range(x.ndim - len(normalized_shape), x.ndim))
    return LayerNorm.apply(x, weight, bias, axes, eps)
