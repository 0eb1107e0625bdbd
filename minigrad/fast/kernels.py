"""Every kernel of the fast layer, registered by importing its module (``minigrad``'s
``__init__`` imports this one last, once the ops exist)."""

from minigrad.fast import (
    activation,
    adam,
    arithmetic,
    cuda,
    embedding,
    linalg,
    loss,
    normalization,
    shape,
)

__all__ = [
    "activation", "adam", "arithmetic", "cuda", "embedding", "linalg", "loss", "normalization",
    "shape",
]  # fmt: skip
