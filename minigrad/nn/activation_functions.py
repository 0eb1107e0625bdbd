"""Activations composed from minigrad's ops, so that their gradients come from autograd:

silu(x)       = x * sigmoid(x)
leaky_relu(x) = x if x > 0 else negative_slope * x
elu(x)        = x if x > 0 else alpha * (exp(x) - 1)
softplus(x)   = log(1 + exp(beta * x)) / beta,  x itself where beta * x > threshold
"""

from __future__ import annotations

from minigrad import ops
from minigrad.tensor import Tensor


def silu(input: Tensor, inplace: bool = False) -> Tensor:  # noqa: A002  (PyTorch's names)
    """SiLU (swish): x * sigmoid(x)."""
    return input * ops.sigmoid(input)


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:  # noqa: A002
    """x where x > 0, negative_slope * x elsewhere."""
    return ops.where(input.array > 0, input, input * negative_slope)


def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:  # noqa: A002
    """x where x > 0, alpha * (exp(x) - 1) elsewhere."""
    # exp of min(x, 0): the branch not taken must not overflow (inf * 0 would give nan)
    negative = alpha * (ops.exp(ops.clamp(input, max=0.0)) - 1.0)
    return ops.where(input.array > 0, input, negative)


def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:  # noqa: A002
    """log(1 + exp(beta * x)) / beta, a smooth relu; x itself where beta * x > threshold."""
    scaled = input * beta
    # the clamp only keeps the branch not taken from overflowing (inf * 0 would give nan)
    smooth = ops.log(1.0 + ops.exp(ops.clamp(scaled, max=threshold))) / beta
    return ops.where(scaled.array > threshold, input, smooth)
