"""``Dropout``: zero each value with probability p while training, scaling the rest by
1/(1-p) so that the expected value is unchanged; the identity in eval mode."""

from __future__ import annotations

from minigrad import ops
from minigrad.nn.module import Module
from minigrad.tensor import Tensor


class Dropout(Module):
    def __init__(self, p: float = 0.5):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"Dropout: p must be between 0 and 1, got {p}")
        self.p = p

    def forward(self, x: Tensor) -> Tensor:
        return ops.dropout(x, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}"
