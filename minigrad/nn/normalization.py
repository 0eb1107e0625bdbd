"""``LayerNorm``: LayerNorm(z) = gamma * (z - mu) / sqrt(sigma^2 + eps) + beta, per token."""

from __future__ import annotations

import numpy as np

from minigrad import ops
from minigrad.nn.module import Module
from minigrad.nn.parameter import Parameter
from minigrad.tensor import Tensor


class LayerNorm(Module):
    """Normalizes over the last dims (``normalized_shape``, usually d_model) and applies the
    learned scale ``weight`` (gamma, starts at 1) and shift ``bias`` (beta, starts at 0).

    x: (..., *normalized_shape) -> the same shape.
    """

    def __init__(
        self,
        normalized_shape,
        eps: float = 1e-5,
        elementwise_affine: bool = True,
        bias: bool = True,
        dtype=None,
    ):
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        if not isinstance(normalized_shape, (tuple, list)) or not all(
            isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in normalized_shape
        ):
            raise TypeError(
                f"LayerNorm: normalized_shape must be an int or a tuple of sizes >= 0, got "
                f"{normalized_shape!r}"
            )
        if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not eps >= 0:
            raise ValueError(f"LayerNorm: eps must be a number >= 0, got {eps!r}")
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        dtype = np.dtype(dtype or np.float32)
        if elementwise_affine:
            self.weight = Parameter(np.ones(self.normalized_shape, dtype=dtype))
            self.bias = Parameter(np.zeros(self.normalized_shape, dtype=dtype)) if bias else None
        else:
            self.weight = None
            self.bias = None

    def forward(self, x: Tensor) -> Tensor:
        return ops.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        shape = self.normalized_shape
        shown = shape[0] if len(shape) == 1 else shape
        return f"{shown}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"
