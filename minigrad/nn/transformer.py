"""``TransformerBlock``: attention and a feed-forward network, each wrapped in "Add & Norm".

    post-LN (norm_first=False, the original):  X = LayerNorm(X + O),  X = LayerNorm(X + FFN(X))
    pre-LN  (norm_first=True):                 X = X + O(LayerNorm(X)),  X = X + FFN(LayerNorm(X))

The ``X +`` of each line is the residual connection: its gradient is the identity,
d(X + F(X))/dX = I + dF/dX. ``residual=False`` removes both, to study what they do.
"""

from __future__ import annotations

from minigrad.nn.attention import MultiHeadAttention
from minigrad.nn.dropout import Dropout
from minigrad.nn.feedforward import FeedForward
from minigrad.nn.module import Module
from minigrad.nn.normalization import LayerNorm
from minigrad.tensor import Tensor


class TransformerBlock(Module):
    """x: (B, T, d_model) -> (B, T, d_model). Submodules ``attn``, ``ln1``, ``ffn``, ``ln2``.

    ``d_ff`` defaults to 4 * d_model; ``dropout`` applies to the attention and FFN outputs
    before they are added; ``activation`` is the FFN's ("gelu", "gelu_tanh" or "relu").
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int | None = None,
        dropout: float = 0.0,
        causal: bool = True,
        norm_first: bool = False,
        residual: bool = True,
        activation: str = "gelu",
    ):
        super().__init__()
        self.norm_first, self.residual = norm_first, residual
        self.attn = MultiHeadAttention(d_model, n_heads, causal=causal)
        self.ln1 = LayerNorm(d_model)
        self.ffn = FeedForward(d_model, d_ff or 4 * d_model, activation=activation)
        self.ln2 = LayerNorm(d_model)
        self.dropout = Dropout(dropout)

    def forward(self, x: Tensor, mask=None) -> Tensor:
        if self.norm_first:
            return self._pre_ln(x, mask)
        return self._post_ln(x, mask)

    def _post_ln(self, x: Tensor, mask) -> Tensor:
        # Z = LayerNorm(X + O), then LayerNorm(Z + FFN(Z))
        attended = self.dropout(self.attn(x, mask))
        x = self.ln1(x + attended if self.residual else attended)
        transformed = self.dropout(self.ffn(x))
        return self.ln2(x + transformed if self.residual else transformed)

    def _pre_ln(self, x: Tensor, mask) -> Tensor:
        # X = X + O(LayerNorm(X)), then X + FFN(LayerNorm(X))
        attended = self.dropout(self.attn(self.ln1(x), mask))
        x = x + attended if self.residual else attended
        transformed = self.dropout(self.ffn(self.ln2(x)))
        return x + transformed if self.residual else transformed

    def extra_repr(self) -> str:
        return f"norm_first={self.norm_first}, residual={self.residual}"
