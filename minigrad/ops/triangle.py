"""Triangular masks: ``tril`` keeps the lower triangle of the last two dims, ``triu`` the
upper, and zero the rest. ``torch.tril(torch.ones(T, T))`` is how the causal mask of
"Let's build GPT" is made: row i may attend to columns j <= i.

``diagonal`` shifts the boundary: tril keeps entry (i, j) where j - i <= diagonal, triu where
j - i >= diagonal. A zeroed entry does not depend on x, a kept one is x itself, so the
gradient is the upstream gradient under the same mask.
"""

from __future__ import annotations

from minigrad.autograd.function import Function
from minigrad.errors import ShapeError
from minigrad.ops._helpers import xp_of


class Triangle(Function):
    # y = x where the entry (i, j) of the last two dims is kept, 0 elsewhere;
    # dL/dx = g under the same mask
    @staticmethod
    def forward(ctx, x, upper, diagonal):
        ctx.upper, ctx.diagonal = upper, diagonal
        xp = xp_of(x)
        return xp.triu(x, diagonal) if upper else xp.tril(x, diagonal)

    @staticmethod
    def backward(ctx, grad):
        return Triangle.apply(grad, ctx.upper, ctx.diagonal), None, None


def tril(x, diagonal: int = 0):
    """The lower triangle of ``x``'s last two dims (entries with j - i <= diagonal); the
    rest is zero. x: (..., M, N) -> (..., M, N)."""
    _check_matrix(x, "tril")
    return Triangle.apply(x, False, int(diagonal))


def triu(x, diagonal: int = 0):
    """The upper triangle of ``x``'s last two dims (entries with j - i >= diagonal); the
    rest is zero. x: (..., M, N) -> (..., M, N)."""
    _check_matrix(x, "triu")
    return Triangle.apply(x, True, int(diagonal))


def _check_matrix(x, op: str) -> None:
    # NumPy would treat a 1-D array as a row and return 2-D; PyTorch refuses it
    if x.ndim < 2:
        raise ShapeError(f"{op}: input tensor must have at least 2 dimensions, got shape {x.shape}")
