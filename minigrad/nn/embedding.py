"""``Embedding``: a learned table of vectors, one row per token id: X_i = Embedding(x_i)."""

from __future__ import annotations

import numpy as np

from minigrad import ops
from minigrad.nn import init
from minigrad.nn.module import Module
from minigrad.nn.parameter import Parameter
from minigrad.tensor import Tensor


class Embedding(Module):
    """Looks up rows of ``weight`` (num_embeddings, embedding_dim), initialised N(0, 1).

    idx: integer Tensor of any shape (..., ) -> (..., embedding_dim).
    """

    def __init__(self, num_embeddings: int, embedding_dim: int, dtype=None):
        super().__init__()
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        shape = (num_embeddings, embedding_dim)
        self.weight = Parameter(np.empty(shape, dtype=np.dtype(dtype or np.float32)))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.normal_(self.weight)

    def forward(self, idx) -> Tensor:
        return ops.embedding(idx, self.weight)

    def extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.embedding_dim}"
