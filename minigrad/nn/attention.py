"""Multi-head self-attention, step by step as in the equations:

Q = X W_Q,  K = X W_K,  V = X W_V
S = Q K^T / sqrt(d_k),  A = softmax_row(S),  O = A V
head_h = softmax(Q_h K_h^T / sqrt(d_k)) V_h,  O = Concat(head_1..head_H) W_O
"""

from __future__ import annotations

import math

import numpy as np

from minigrad import ops
from minigrad.backend import array_module, xp_for
from minigrad.errors import ShapeError
from minigrad.nn.linear import Linear
from minigrad.nn.module import Module
from minigrad.tensor import Tensor


class MultiHeadAttention(Module):
    """Self-attention with ``n_heads`` heads of size d_k = d_model / n_heads.

    forward(x: (B, T, d_model), mask=None) -> (B, T, d_model). ``mask`` is boolean,
    broadcastable to (B, n_heads, T, T), True where position i may attend to position j;
    ``causal=True`` also forbids attending to later positions. The last attention weights A,
    (B, n_heads, T, T), stay on ``.attn_weights`` (detached) for plots.
    """

    def __init__(self, d_model: int, n_heads: int, causal: bool = False, bias: bool = True):
        super().__init__()
        if d_model % n_heads != 0:
            raise ValueError(
                f"MultiHeadAttention: d_model={d_model} is not divisible by n_heads={n_heads}"
            )
        self.d_model, self.n_heads, self.causal = d_model, n_heads, causal
        self.d_k = d_model // n_heads
        self.q_proj = Linear(d_model, d_model, bias=bias)
        self.k_proj = Linear(d_model, d_model, bias=bias)
        self.v_proj = Linear(d_model, d_model, bias=bias)
        self.o_proj = Linear(d_model, d_model, bias=bias)
        self.attn_weights = None

    def forward(self, x: Tensor, mask=None) -> Tensor:
        if x.ndim != 3 or x.shape[-1] != self.d_model:
            raise ShapeError(
                f"MultiHeadAttention: expected input (B, T, {self.d_model}), got {x.shape}"
            )
        batch, length, _ = x.shape

        # Q = X W_Q,  K = X W_K,  V = X W_V          each (B, T, d_model)
        q = self.q_proj(x)
        k = self.k_proj(x)
        v = self.v_proj(x)

        # split heads: (B, T, d_model) -> (B, H, T, d_k)
        q = self.split_heads(q)
        k = self.split_heads(k)
        v = self.split_heads(v)

        # S = Q K^T / sqrt(d_k)                      (B, H, T, T)
        # computed as (Q / sqrt(d_k)) K^T: the same numbers, but the scaling runs over the
        # queries, (B, H, T, d_k), instead of the T/d_k times bigger scores
        scores = (q * (1.0 / math.sqrt(self.d_k))) @ k.transpose(-2, -1)

        # masked positions get -inf added, so that softmax gives them weight 0
        # (an additive mask: one pass over S, cheaper than selecting with masked_fill)
        allowed = self.allowed_positions(x, length, mask)
        if allowed is not None:
            xp = array_module(allowed)
            scores = scores + Tensor(xp.where(allowed, 0.0, -xp.inf).astype(scores.dtype))

        # A = softmax_row(S)
        weights = ops.softmax(scores, dim=-1)
        self.attn_weights = weights.detach()

        # O = A V: each head's weighted sum of values  (B, H, T, d_k)
        heads = weights @ v

        # Concat(head_1..head_H): (B, H, T, d_k) -> (B, T, d_model)
        concat = heads.transpose(1, 2).reshape(batch, length, self.d_model)

        # O W_O
        return self.o_proj(concat)

    def split_heads(self, projected: Tensor) -> Tensor:
        """(B, T, d_model) -> (B, H, T, d_k)."""
        batch, length, _ = projected.shape
        return projected.reshape(batch, length, self.n_heads, self.d_k).transpose(1, 2)

    def allowed_positions(self, x: Tensor, length: int, mask):
        """The boolean array (broadcastable to (B, H, T, T)) of allowed (i, j) pairs, or None
        when every position may attend everywhere."""
        xp = xp_for(x.device)  # (not x.array: that would wait for the projections' halves)
        allowed = None
        if mask is not None:
            allowed = mask.array if isinstance(mask, Tensor) else xp.asarray(mask)
            if allowed.dtype != np.bool_:
                raise TypeError(
                    f"MultiHeadAttention: mask must be boolean (True = may attend), "
                    f"got dtype {allowed.dtype}"
                )
            target = (x.shape[0], self.n_heads, length, length)
            try:
                np.broadcast_shapes(tuple(allowed.shape), target)
            except ValueError:
                raise ShapeError(
                    f"MultiHeadAttention: mask of shape {tuple(allowed.shape)} does not "
                    f"broadcast to (B, n_heads, T, T) = {target}"
                ) from None
        if self.causal:
            # position i attends to j <= i: the lower triangle
            lower = xp.tri(length, length, dtype=np.bool_)
            allowed = lower if allowed is None else allowed & lower
        return allowed

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, n_heads={self.n_heads}, causal={self.causal}"
