"""``FeedForward``: the position-wise network of a transformer block, FFN(x) = W_2 act(W_1 x)."""

from __future__ import annotations

from minigrad import ops
from minigrad.nn.linear import Linear
from minigrad.nn.module import Module
from minigrad.tensor import Tensor

ACTIVATIONS = ("gelu", "gelu_tanh", "relu")


class FeedForward(Module):
    """x: (..., d_model) -> fc2(act(fc1(x))): (..., d_model), with fc1: d_model -> d_ff.

    ``activation``: "gelu" (exact), "gelu_tanh" (the tanh approximation) or "relu".
    """

    def __init__(self, d_model: int, d_ff: int, activation: str = "gelu"):
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(
                f"FeedForward: activation must be one of {ACTIVATIONS}, got {activation!r}"
            )
        self.activation = activation
        self.fc1 = Linear(d_model, d_ff)
        self.fc2 = Linear(d_ff, d_model)

    def forward(self, x: Tensor) -> Tensor:
        hidden = self.fc1(x)
        if self.activation == "relu":
            hidden = ops.relu(hidden)
        else:
            hidden = ops.gelu(hidden, "tanh" if self.activation == "gelu_tanh" else "none")
        return self.fc2(hidden)

    def extra_repr(self) -> str:
        return f"activation={self.activation!r}"
