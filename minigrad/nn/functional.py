"""``minigrad.nn.functional`` (imported as F): the layers' maths as plain functions.

Each is an op of ``minigrad.ops``, with its forward and backward in one place there, or a
composition of them (activation_functions.py, loss_functions.py), whose gradient autograd
derives.
"""

from minigrad.nn.activation_functions import elu, leaky_relu, silu, softplus
from minigrad.nn.attention import scaled_dot_product_attention
from minigrad.nn.loss_functions import (
    binary_cross_entropy,
    binary_cross_entropy_with_logits,
    kl_div,
    nll_loss,
)
from minigrad.ops import (
    cross_entropy,
    dropout,
    embedding,
    gelu,
    layer_norm,
    linear,
    log_softmax,
    mse_loss,
    one_hot,
    pad,
    relu,
    sigmoid,
    softmax,
    tanh,
)

__all__ = [
    "cross_entropy", "dropout", "embedding", "gelu", "layer_norm", "linear", "log_softmax",
    "mse_loss", "relu", "sigmoid", "softmax", "tanh",
]  # fmt: skip
__all__ += [
    "binary_cross_entropy", "binary_cross_entropy_with_logits", "elu", "kl_div",
    "leaky_relu", "nll_loss", "scaled_dot_product_attention", "silu", "softplus",
]  # fmt: skip
__all__ += ["one_hot", "pad"]
