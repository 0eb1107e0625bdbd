"""``Flatten`` and ``Unflatten``: reshaping layers, for inside an ``nn.Sequential``."""

from __future__ import annotations

from minigrad.nn.module import Module
from minigrad.tensor import Tensor


class Flatten(Module):
    """Flattens dims start_dim..end_dim into one: (N, C, L) -> (N, C * L) by default (the
    batch dim 0 is kept)."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, x: Tensor) -> Tensor:
        return x.flatten(self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Splits dim ``dim`` into ``unflattened_size``: Unflatten(1, (2, 5)) maps (N, 10) to
    (N, 2, 5); one size may be -1."""

    def __init__(self, dim: int, unflattened_size):
        super().__init__()
        self.dim, self.unflattened_size = dim, tuple(unflattened_size)

    def forward(self, x: Tensor) -> Tensor:
        dim = self.dim + x.ndim if self.dim < 0 else self.dim
        if not 0 <= dim < x.ndim:
            raise IndexError(
                f"Unflatten: dim {self.dim} is out of range for an input of shape {x.shape}"
            )
        shape = x.shape[:dim] + self.unflattened_size + x.shape[dim + 1 :]
        return x.reshape(*shape)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"
