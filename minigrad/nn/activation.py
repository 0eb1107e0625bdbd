"""Activation layers: each wraps one function of ``minigrad.nn.functional``."""

from __future__ import annotations

from minigrad import ops
from minigrad.nn.module import Module
from minigrad.tensor import Tensor


class ReLU(Module):
    """relu(x) = max(x, 0)."""

    def forward(self, x: Tensor) -> Tensor:
        return ops.relu(x)


class GELU(Module):
    """GELU(x) = x * Phi(x) (exact, PyTorch's default), or the tanh form with
    ``approximate="tanh"``."""

    def __init__(self, approximate: str = "none"):
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"GELU: approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def forward(self, x: Tensor) -> Tensor:
        return ops.gelu(x, self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}" if self.approximate != "none" else ""


class Tanh(Module):
    def forward(self, x: Tensor) -> Tensor:
        return ops.tanh(x)


class Sigmoid(Module):
    def forward(self, x: Tensor) -> Tensor:
        return ops.sigmoid(x)


class Identity(Module):
    """Returns its input unchanged."""

    def forward(self, x: Tensor) -> Tensor:
        return x


class Softmax(Module):
    def __init__(self, dim: int = -1):
        super().__init__()
        self.dim = dim

    def forward(self, x: Tensor) -> Tensor:
        return ops.softmax(x, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"
