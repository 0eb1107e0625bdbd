"""Layer normalization as one node:

    LayerNorm(z) = gamma * (z - mu) / sqrt(sigma^2 + eps) + beta

over the last dims (``normalized_shape``), mu and sigma^2 the mean and (biased) variance there.
"""

from __future__ import annotations

from minigrad.autograd.function import Function
from minigrad.errors import ShapeError
from minigrad.ops._helpers import xp_of


class LayerNorm(Function):
    # over the normalized dims (``axes``) of each row z:
    #   mu = mean(z),  sigma^2 = mean((z - mu)^2),  xhat = (z - mu) / sqrt(sigma^2 + eps)
    #   y = gamma * xhat + beta
    @staticmethod
    def forward(ctx, x, weight, bias, axes, eps):
        mu = x.mean(axis=axes, keepdims=True)
        variance = ((x - mu) ** 2).mean(axis=axes, keepdims=True)  # sigma^2 (biased)
        xhat = (x - mu) / xp_of(x).sqrt(variance + eps)
        y = xhat if weight is None else xhat * weight
        if bias is not None:
            y = y + bias
        ctx.axes, ctx.eps = axes, eps
        ctx.save_for_backward(x, weight)
        return y

    @staticmethod
    def backward(ctx, grad):
        # dL/dxhat = g * gamma
        # dL/dx = (dL/dxhat - mean(dL/dxhat) - xhat * mean(dL/dxhat * xhat)) / sqrt(sigma^2 + eps)
        # dL/dgamma = sum over rows of g * xhat;  dL/dbeta = sum over rows of g
        x, weight = ctx.saved_tensors
        axes = ctx.axes
        centered = x - x.mean(dim=axes, keepdim=True)  # z - mu, again on Tensors: so that
        rstd = ((centered * centered).mean(dim=axes, keepdim=True) + ctx.eps) ** -0.5
        xhat = centered * rstd  # create_graph sees how xhat depends on x
        grad_xhat = grad if weight is None else grad * weight
        mean_grad_xhat = grad_xhat.mean(dim=axes, keepdim=True)
        mean_grad_xhat_xhat = (grad_xhat * xhat).mean(dim=axes, keepdim=True)
        grad_x = (grad_xhat - mean_grad_xhat - xhat * mean_grad_xhat_xhat) * rstd
        rows = tuple(range(x.ndim - len(axes)))  # the dims that are not normalized
        grad_weight = (grad * xhat).sum(dim=rows) if ctx.needs_input_grad[1] else None
        grad_bias = grad.sum(dim=rows) if ctx.needs_input_grad[2] else None
        return grad_x, grad_weight, grad_bias


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
