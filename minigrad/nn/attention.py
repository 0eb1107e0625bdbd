"""Multi-head attention, step by step as in the equations:

Q = X W_Q,  K = X W_K,  V = X W_V          (cross-attention: K, V from another sequence)
S = Q K^T / sqrt(d_k),  A = softmax_row(S),  O = A V
head_h = softmax(Q_h K_h^T / sqrt(d_k)) V_h,  O = Concat(head_1..head_H) W_O

``attend`` is the middle line, the one piece of attention maths that ``MultiHeadAttention``,
PyTorch's ``nn.MultiheadAttention`` (multihead.py) and ``F.scaled_dot_product_attention``
all run. A mask enters it as an additive bias on S: 0 where attention is allowed, -inf
where it is not, so that softmax gives those positions weight 0.
"""

from __future__ import annotations

import math

import numpy as np

from minigrad import ops
from minigrad.backend import xp_for
from minigrad.errors import ShapeError
from minigrad.nn.linear import Linear
from minigrad.nn.module import Module
from minigrad.tensor import Tensor


def attend(query: Tensor, key: Tensor, value: Tensor, bias=None, dropout_p: float = 0.0,
           scale: float | None = None) -> tuple[Tensor, Tensor]:  # fmt: skip
    """O = softmax(Q K^T * scale + bias) V and the weights A that multiplied V.

    query (..., L, d_k), key (..., S, d_k), value (..., S, d_v) -> O (..., L, d_v),
    A (..., L, S). ``scale`` defaults to 1/sqrt(d_k); ``bias`` (a Tensor or array
    broadcastable to (..., L, S)) is added to the scores; ``dropout_p`` drops weights.
    """
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    # S = Q K^T / sqrt(d_k), computed as (Q / sqrt(d_k)) K^T: the same numbers, but the
    # scaling runs over the queries, (..., L, d_k), instead of the bigger scores (..., L, S)
    scores = (query * scale) @ key.transpose(-2, -1)
    if bias is not None:
        # an additive mask: one pass over S, cheaper than selecting with masked_fill
        scores = scores + bias
    # A = softmax_row(S)
    weights = ops.softmax(scores, dim=-1)
    if dropout_p > 0.0:
        weights = ops.dropout(weights, dropout_p, True)
    # O = A V
    return weights @ value, weights


def mask_as_bias(mask, like: Tensor, true_means: str, op: str):
    """A mask as the additive bias ``attend`` takes, in like's dtype and on its device: a
    boolean mask becomes 0 / -inf (True means "attend" or "masked", as ``true_means`` says:
    PyTorch's two conventions); a float mask is added as it is."""
    if isinstance(mask, Tensor) and mask.dtype != np.bool_:
        return mask if mask.dtype == like.dtype else mask.to(like.dtype)
    xp = xp_for(like.device)
    array = xp.asarray(mask.array if isinstance(mask, Tensor) else mask)
    if array.dtype != np.bool_:
        if array.dtype.kind != "f":
            raise TypeError(f"{op}: a mask must be boolean or floating, got dtype {array.dtype}")
        return Tensor._make(array.astype(like.dtype, copy=False))
    allowed = array if true_means == "attend" else ~array
    return Tensor._make(xp.where(allowed, 0.0, -xp.inf).astype(like.dtype))


def causal_bias(queries: int, keys: int, dtype, device: str) -> Tensor:
    """0 where query i may attend to key j <= i (the lower triangle), -inf elsewhere."""
    xp = xp_for(device)
    lower = xp.tri(queries, keys, dtype=np.bool_)
    return Tensor._make(xp.where(lower, 0.0, -xp.inf).astype(dtype))


def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask=None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> Tensor:
    """softmax(Q K^T * scale + mask) V, as PyTorch's: query (..., L, E), key (..., S, E),
    value (..., S, Ev) -> (..., L, Ev).

    ``attn_mask``: boolean (True = may attend) or float (added to the scores), broadcastable
    to (..., L, S). ``is_causal``: query i attends to keys j <= i (no attn_mask then).
    ``dropout_p`` drops attention weights (always: pass 0.0 in eval). ``enable_gqa``: the
    query's heads (dim -3) share key and value heads in groups, as in grouped-query attention.
    """
    op = "scaled_dot_product_attention"
    if is_causal and attn_mask is not None:
        raise RuntimeError(f"{op}: an explicit attn_mask should not be set when is_causal=True")
    if query.shape[-1] != key.shape[-1] or key.shape[-2] != value.shape[-2]:
        raise ShapeError(
            f"{op}: query (..., L, E) {query.shape}, key (..., S, E) {key.shape} and value "
            f"(..., S, Ev) {value.shape} do not fit"
        )
    if enable_gqa and key.shape[-3] != query.shape[-3]:
        key, value = _shared_heads(key, query.shape[-3]), _shared_heads(value, query.shape[-3])
    if is_causal:
        bias = causal_bias(query.shape[-2], key.shape[-2], query.dtype, query.device)
    elif attn_mask is not None:
        bias = mask_as_bias(attn_mask, query, true_means="attend", op=op)
    else:
        bias = None
    output, _ = attend(query, key, value, bias, dropout_p, scale)
    return output


def _shared_heads(kv: Tensor, query_heads: int) -> Tensor:
    """(..., H_kv, S, d) -> (..., H_q, S, d), each kv head repeated for its group of query
    heads (as repeat_interleave along dim -3)."""
    heads = kv.shape[-3]
    if query_heads % heads:
        raise ShapeError(
            f"scaled_dot_product_attention: {query_heads} query heads do not divide into "
            f"groups of {heads} key/value heads"
        )
    lead, rest = kv.shape[:-3], kv.shape[-2:]
    grouped = kv.unsqueeze(-3).expand(*lead, heads, query_heads // heads, *rest)
    return grouped.reshape(*lead, query_heads, *rest)


class MultiHeadAttention(Module):
    """Self-attention with ``n_heads`` heads of size d_k = d_model / n_heads, or
    cross-attention when ``memory`` is given.

    forward(x: (B, T, d_model), mask=None, memory=None) -> (B, T, d_model). Queries come from
    x; keys and values from x too, or from ``memory`` (B, S, d_model) (S = T without it).
    ``mask`` is boolean, broadcastable to (B, n_heads, T, S), True where position i may
    attend to position j; ``causal=True`` also forbids attending to later positions (j > i).
    The last attention weights A, (B, n_heads, T, S), stay on ``.attn_weights`` (detached)
    for plots.
    """

    def __init__(self, d_model: int, n_heads: int, causal: bool = False, bias: bool = True):
        super().__init__()
        for what, value in (("d_model", d_model), ("n_heads", n_heads)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"MultiHeadAttention: {what} must be an int >= 1, got {value!r}")
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

    def forward(self, x: Tensor, mask=None, memory: Tensor | None = None) -> Tensor:
        self._check_input("input", x)
        source = x if memory is None else memory
        if memory is not None:
            self._check_input("memory", memory)
            if memory.shape[0] != x.shape[0]:
                raise ShapeError(
                    f"MultiHeadAttention: memory has batch size {memory.shape[0]}, the "
                    f"input {x.shape[0]}"
                )
        batch, length, _ = x.shape

        # Q = X W_Q,  K = X W_K,  V = X W_V   (K, V from the memory in cross-attention)
        q = self.split_heads(self.q_proj(x))  # (B, H, T, d_k)
        k = self.split_heads(self.k_proj(source))  # (B, H, S, d_k)
        v = self.split_heads(self.v_proj(source))

        # head_h = softmax(Q_h K_h^T / sqrt(d_k)) V_h, every head at once
        heads, weights = attend(q, k, v, self.mask_bias(x, source.shape[1], mask))
        self.attn_weights = weights.detach()

        # Concat(head_1..head_H): (B, H, T, d_k) -> (B, T, d_model), then O W_O
        concat = heads.transpose(1, 2).reshape(batch, length, self.d_model)
        return self.o_proj(concat)

    def split_heads(self, projected: Tensor) -> Tensor:
        """(B, T, d_model) -> (B, H, T, d_k)."""
        batch, length, _ = projected.shape
        return projected.reshape(batch, length, self.n_heads, self.d_k).transpose(1, 2)

    def _check_input(self, what: str, t: Tensor) -> None:
        if t.ndim != 3 or t.shape[-1] != self.d_model:
            raise ShapeError(
                f"MultiHeadAttention: expected {what} (B, T, {self.d_model}), got {t.shape}"
            )

    def allowed_positions(self, x: Tensor, keys: int, mask):
        """The boolean array (broadcastable to (B, H, T, S)) of allowed (i, j) pairs, or None
        when every position may attend everywhere."""
        xp = xp_for(x.device)  # (not x.array: that would wait for the projections' halves)
        length = x.shape[1]
        allowed = None
        if mask is not None:
            allowed = mask.array if isinstance(mask, Tensor) else xp.asarray(mask)
            if allowed.dtype != np.bool_:
                raise TypeError(
                    f"MultiHeadAttention: mask must be boolean (True = may attend), "
                    f"got dtype {allowed.dtype}"
                )
            target = (x.shape[0], self.n_heads, length, keys)
            try:
                np.broadcast_shapes(tuple(allowed.shape), target)
            except ValueError:
                raise ShapeError(
                    f"MultiHeadAttention: mask of shape {tuple(allowed.shape)} does not "
                    f"broadcast to (B, n_heads, T, S) = {target}"
                ) from None
        if self.causal:
            # position i attends to j <= i: the lower triangle
            lower = xp.tri(length, keys, dtype=np.bool_)
            allowed = lower if allowed is None else allowed & lower
        return allowed

    def mask_bias(self, x: Tensor, keys: int, mask):
        """The allowed positions as the additive bias of the scores, or None."""
        allowed = self.allowed_positions(x, keys, mask)
        if allowed is None:
            return None
        return mask_as_bias(allowed, x, true_means="attend", op="MultiHeadAttention")

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, n_heads={self.n_heads}, causal={self.causal}"
