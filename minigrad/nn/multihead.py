"""PyTorch's ``nn.MultiheadAttention``: the same attention as ``MultiHeadAttention``
(attention.py), with PyTorch's signature, parameters and mask conventions, so that programs
written for PyTorch run and its weights load:

    Q = query W_q^T + b_q,  K = key W_k^T + b_k,  V = value W_v^T + b_v
    head_h = softmax(Q_h K_h^T / sqrt(d_k) + mask) V_h,  O = Concat(head_1..head_H) W_o^T + b_o

W_q, W_k, W_v are stacked in one ``in_proj_weight`` (3E, E), or kept apart as
``q_proj_weight``, ``k_proj_weight`` (E, kdim), ``v_proj_weight`` (E, vdim) when the key or
value width differs from E. Inputs are (L, N, E) (sequence first) unless ``batch_first``.
A boolean ``attn_mask`` or ``key_padding_mask`` is True where attention is NOT allowed
(the opposite of scaled_dot_product_attention's); float masks are added to the scores.
"""

from __future__ import annotations

import numpy as np

from minigrad import ops
from minigrad.backend import array_module
from minigrad.errors import ShapeError
from minigrad.nn import init
from minigrad.nn.attention import attend, mask_as_bias
from minigrad.nn.linear import Linear
from minigrad.nn.module import Module
from minigrad.nn.parameter import Parameter
from minigrad.tensor import Tensor


class MultiheadAttention(Module):
    """forward(query (L, N, E), key (S, N, kdim), value (S, N, vdim), key_padding_mask=None,
    need_weights=True, attn_mask=None, average_attn_weights=True, is_causal=False)
    -> (attn_output (L, N, E), attn_weights (N, L, S) averaged over heads, or
    (N, num_heads, L, S), or None without need_weights).

    attn_mask: (L, S) or (N * num_heads, L, S); key_padding_mask: (N, S), True (or -inf)
    for keys to ignore, such as padding. Unbatched inputs (L, E) work too.
    ``add_bias_kv`` appends a learned key and value (bias_k, bias_v) to every sequence;
    ``add_zero_attn`` appends a key and value of zeros after the heads are split.
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        add_bias_kv: bool = False,
        add_zero_attn: bool = False,
        kdim: int | None = None,
        vdim: int | None = None,
        batch_first: bool = False,
        dtype=None,
    ):
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0 or embed_dim % num_heads:
            raise ValueError(
                f"MultiheadAttention: embed_dim={embed_dim} must be divisible by "
                f"num_heads={num_heads}"
            )
        self.embed_dim, self.num_heads = embed_dim, num_heads
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.dropout, self.batch_first = dropout, batch_first
        self.head_dim = embed_dim // num_heads
        dtype = np.dtype(dtype or np.float32)

        def weight(*shape):
            return Parameter(np.empty(shape, dtype))

        if self._qkv_same_embed_dim:
            self.in_proj_weight = weight(3 * embed_dim, embed_dim)
            for name in ("q_proj_weight", "k_proj_weight", "v_proj_weight"):
                self.register_parameter(name, None)
        else:
            self.q_proj_weight = weight(embed_dim, embed_dim)
            self.k_proj_weight = weight(embed_dim, self.kdim)
            self.v_proj_weight = weight(embed_dim, self.vdim)
            self.register_parameter("in_proj_weight", None)
        self.in_proj_bias = weight(3 * embed_dim) if bias else None
        if not bias:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias, dtype=dtype)
        if add_bias_kv:
            self.bias_k, self.bias_v = weight(1, 1, embed_dim), weight(1, 1, embed_dim)
        else:
            self.register_parameter("bias_k", None)
            self.register_parameter("bias_v", None)
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        """PyTorch's: xavier_uniform_ projections, zero biases, xavier_normal_ bias_k/v."""
        for w in (self.in_proj_weight, self.q_proj_weight, self.k_proj_weight, self.v_proj_weight):
            if w is not None:
                init.xavier_uniform_(w)
        if self.in_proj_bias is not None:
            init.zeros_(self.in_proj_bias)
            init.zeros_(self.out_proj.bias)
        for extra in (self.bias_k, self.bias_v):
            if extra is not None:
                init.xavier_normal_(extra)

    def _projections(self) -> tuple:
        """(W_q, W_k, W_v) and (b_q, b_k, b_v) (the biases None without bias)."""
        if self._qkv_same_embed_dim:
            weights = self.in_proj_weight.chunk(3, dim=0)
        else:
            weights = (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight)
        if self.in_proj_bias is None:
            return weights, (None, None, None)
        return weights, self.in_proj_bias.chunk(3, dim=0)

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        key_padding_mask=None,
        need_weights: bool = True,
        attn_mask=None,
        average_attn_weights: bool = True,
        is_causal: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        if is_causal and attn_mask is None:
            # as in PyTorch, is_causal is only a hint that attn_mask is the causal mask
            raise RuntimeError(
                "MultiheadAttention: need attn_mask if specifying the is_causal hint "
                "(e.g. nn.Transformer.generate_square_subsequent_mask(L))"
            )
        query, key, value, unbatched = self._sequence_first(query, key, value)
        if unbatched and key_padding_mask is not None:
            key_padding_mask = _unsqueezed(key_padding_mask)
        length, batch, _ = query.shape
        (w_q, w_k, w_v), (b_q, b_k, b_v) = self._projections()

        # Q = query W_q^T + b_q,  K = key W_k^T + b_k,  V = value W_v^T + b_v
        q = ops.linear(query, w_q, b_q)  # (L, N, E)
        k = ops.linear(key, w_k, b_k)  # (S, N, E)
        v = ops.linear(value, w_v, b_v)
        bias = self._mask_bias(attn_mask, key_padding_mask, q, batch, length, key.shape[0])
        if self.bias_k is not None:  # one more key and value: the learned bias_k, bias_v
            k = ops.cat([k, self.bias_k.expand(1, batch, self.embed_dim)], dim=0)
            v = ops.cat([v, self.bias_v.expand(1, batch, self.embed_dim)], dim=0)
            bias = _one_more_key(bias)

        # heads: (L, N, E) -> (N, H, L, d_k)
        q, k, v = self._split_heads(q), self._split_heads(k), self._split_heads(v)
        if self.add_zero_attn:  # one more key and value of zeros
            zeros = Tensor._make(
                array_module(k.array).zeros(k.shape[:2] + (1,) + k.shape[3:], k.dtype)
            )
            k, v = ops.cat([k, zeros], dim=2), ops.cat([v, zeros], dim=2)
            bias = _one_more_key(bias)

        # head_h = softmax(Q_h K_h^T / sqrt(d_k) + mask) V_h
        dropout_p = self.dropout if self.training else 0.0
        heads, weights = attend(q, k, v, bias, dropout_p)

        # Concat(head_1..head_H) W_o^T + b_o: (N, H, L, d_k) -> (L, N, E)
        concat = heads.permute(2, 0, 1, 3).reshape(length, batch, self.embed_dim)
        output = self.out_proj(concat)
        if unbatched:
            output = output[:, 0]
        elif self.batch_first:
            output = output.transpose(0, 1)
        if not need_weights:
            return output, None
        if average_attn_weights:
            weights = weights.mean(dim=1)  # (N, L, S)
        return output, (weights[0] if unbatched else weights)

    def _sequence_first(self, query, key, value):
        """query, key, value as (L, N, features), and whether they came unbatched."""
        if query.ndim == 2:
            if key.ndim != 2 or value.ndim != 2:
                raise ShapeError(
                    f"MultiheadAttention: an unbatched query {query.shape} needs unbatched key "
                    f"and value, got {key.shape} and {value.shape}"
                )
            return query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1), True
        if query.ndim != 3 or key.ndim != 3 or value.ndim != 3:
            raise ShapeError(
                f"MultiheadAttention: expected query, key and value of 3 dims (or 2 unbatched), "
                f"got {query.shape}, {key.shape} and {value.shape}"
            )
        if self.batch_first:
            query, key, value = query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1)
        checks = (
            (query, "query", self.embed_dim),
            (key, "key", self.kdim),
            (value, "value", self.vdim),
        )
        for t, name, width in checks:
            if t.shape[-1] != width:
                raise ShapeError(
                    f"MultiheadAttention: expected {name} features {width}, got shape {t.shape}"
                )
        if key.shape[:2] != value.shape[:2] or key.shape[1] != query.shape[1]:
            raise ShapeError(
                f"MultiheadAttention: query {query.shape}, key {key.shape} and value "
                f"{value.shape} do not share the batch size, or key and value the length"
            )
        return query, key, value, False

    def _split_heads(self, projected: Tensor) -> Tensor:
        """(L, N, E) -> (N, H, L, d_k)."""
        length, batch, _ = projected.shape
        return projected.reshape(length, batch, self.num_heads, self.head_dim).permute(1, 2, 0, 3)

    def _mask_bias(self, attn_mask, key_padding_mask, q, batch, length, keys):
        """attn_mask and key_padding_mask as one additive bias, broadcastable to
        (N, H, L, S), or None."""
        op = "MultiheadAttention"
        bias = None
        if attn_mask is not None:
            shape = tuple(attn_mask.shape)
            bias = mask_as_bias(attn_mask, q, true_means="masked", op=op)
            if shape == (batch * self.num_heads, length, keys):
                bias = bias.reshape(batch, self.num_heads, length, keys)
            elif shape != (length, keys):
                raise RuntimeError(
                    f"{op}: attn_mask of shape {shape} should be (L, S) = {(length, keys)} or "
                    f"(N * num_heads, L, S) = {(batch * self.num_heads, length, keys)}"
                )
        if key_padding_mask is not None:
            shape = tuple(key_padding_mask.shape)
            if shape != (batch, keys):
                raise RuntimeError(
                    f"{op}: key_padding_mask of shape {shape} should be (N, S) = {(batch, keys)}"
                )
            padding = mask_as_bias(key_padding_mask, q, true_means="masked", op=op)
            padding = padding.reshape(batch, 1, 1, keys)
            bias = padding if bias is None else bias + padding
        return bias

    def extra_repr(self) -> str:
        return (
            f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, "
            f"batch_first={self.batch_first}"
        )


def _unsqueezed(mask):
    """An unbatched key_padding_mask (S,) as (1, S)."""
    if isinstance(mask, Tensor):
        return mask.unsqueeze(0)
    return mask[None] if hasattr(mask, "shape") else np.asarray(mask)[None]


def _one_more_key(bias):
    """The bias with a column of zeros for one more key (which every query may attend to)."""
    if bias is None:
        return None
    zeros = Tensor._make(array_module(bias.array).zeros(bias.shape[:-1] + (1,), bias.dtype))
    return ops.cat([bias, zeros], dim=-1)
