"""The embedding's gradient on the CPU: ``ops.embedding.EmbeddingBackward``'s
``target[index] += values`` by one matrix product or by sorted sums (``arrays.add_rows``),
where NumPy's ``np.add.at`` adds one element at a time."""

from __future__ import annotations

import numpy as np

from minigrad import fast
from minigrad.fast.arrays import add_rows


@fast.register("EmbeddingBackward", "cpu")
class EmbeddingBackwardKernel:
    backward = None  # the reference's: the lookup g[indices]

    @staticmethod
    def forward(ctx, grad, indices, weight_shape):
        ctx.indices = indices
        grad_weight = np.zeros(weight_shape, dtype=grad.dtype)
        add_rows(grad_weight, indices.reshape(-1), grad.reshape(-1, weight_shape[-1]))
        return grad_weight
