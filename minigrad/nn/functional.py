"""``minigrad.nn.functional`` (imported as F): the layers' maths as plain functions.

Each is an op of ``minigrad.ops``, with its forward and backward in one place there.
"""

from minigrad.ops import (
    cross_entropy,
    dropout,
    embedding,
    gelu,
    layer_norm,
    linear,
    log_softmax,
    mse_loss,
    relu,
    sigmoid,
    softmax,
    tanh,
)

__all__ = [
    "cross_entropy", "dropout", "embedding", "gelu", "layer_norm", "linear", "log_softmax",
    "mse_loss", "relu", "sigmoid", "softmax", "tanh",
]  # fmt: skip
