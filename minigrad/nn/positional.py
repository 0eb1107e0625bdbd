"""``PositionalEncoding``: the fixed sinusoidal position signal, X_i = Embedding(x_i) + PE_i.

PE[pos, 2i]     = sin(pos / 10000^(2i / d_model))
PE[pos, 2i + 1] = cos(pos / 10000^(2i / d_model))
"""

from __future__ import annotations

import numpy as np

from minigrad.errors import ShapeError
from minigrad.nn.module import Module
from minigrad.tensor import Tensor


def sinusoidal_table(max_len: int, d_model: int) -> np.ndarray:
    """PE as a float32 array (max_len, d_model), computed in float64."""
    position = np.arange(max_len, dtype=np.float64)[:, None]
    frequency = np.exp(-np.log(10000.0) * np.arange(0, d_model, 2, dtype=np.float64) / d_model)
    angles = position * frequency  # (max_len, ceil(d_model / 2))
    table = np.zeros((max_len, d_model), dtype=np.float64)
    table[:, 0::2] = np.sin(angles)
    table[:, 1::2] = np.cos(angles[:, : d_model // 2])
    return table.astype(np.float32)


class PositionalEncoding(Module):
    """forward(x: (B, T, d_model)) -> x + PE[:T].

    ``pe`` is a buffer, not a parameter: it moves with ``to(device)`` but is never learned,
    and since it can always be recomputed it is left out of ``state_dict()``.
    """

    def __init__(self, max_len: int, d_model: int):
        super().__init__()
        self.max_len, self.d_model = max_len, d_model
        self.register_buffer("pe", Tensor(sinusoidal_table(max_len, d_model)), persistent=False)

    def forward(self, x: Tensor) -> Tensor:
        length = x.shape[-2]
        if length > self.max_len or x.shape[-1] != self.d_model:
            raise ShapeError(
                f"PositionalEncoding: input of shape {x.shape} needs (..., T <= {self.max_len}, "
                f"{self.d_model})"
            )
        table = self.pe.array[:length]
        if table.dtype != x.dtype:
            table = table.astype(x.dtype)
        return x + Tensor._make(table)

    def extra_repr(self) -> str:
        return f"max_len={self.max_len}, d_model={self.d_model}"
