"""``Linear``: y = x W^T + b, the layer behind Q = X W_Q and the feed-forward network."""

from __future__ import annotations

import math

import numpy as np

from minigrad import ops
from minigrad.nn import init
from minigrad.nn.module import Module
from minigrad.nn.parameter import Parameter
from minigrad.tensor import Tensor


class Linear(Module):
    """y = x W^T + b.  x: (..., in_features) -> y: (..., out_features).

    ``weight`` is (out_features, in_features) as in PyTorch, and so is the initialisation:
    weight and bias from U(-1/sqrt(in_features), 1/sqrt(in_features)).
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, dtype=None):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        dtype = np.dtype(dtype or np.float32)
        self.weight = Parameter(np.empty((out_features, in_features), dtype=dtype))
        self.bias = Parameter(np.empty(out_features, dtype=dtype)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        # kaiming_uniform_(a=sqrt(5)): bound = sqrt(1/3) * sqrt(3/fan_in) = 1/sqrt(fan_in)
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            bound = 1.0 / math.sqrt(self.in_features) if self.in_features > 0 else 0.0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, x: Tensor) -> Tensor:
        return ops.linear(x, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"bias={self.bias is not None}"
        )
