"""Variants of the transformer block that the studies need, composed from ``minigrad.nn``.

``ResidualBlock`` writes each sublayer with its shortcut spelled out,

    y = s * x + F(x)                 pre-LN:  F(x) = Attn(LN(x)) or FFN(LN(x))
    y = LN(s * x + F(x))             post-LN: F(x) = Attn(x) or FFN(x)

with a shortcut scale ``s`` (1 is the usual block) and a ``GradientGate`` on each of the two
edges into the sum, so that backward can be sent through the shortcut only, the branch only,
or both, while forward computes the same values. ``ReZeroBlock`` is x + alpha * F(x) with
alpha = 0 at initialization (Bachlechner et al. 2020). ``TinyLM`` is a small GPT-style language
model (token and position embeddings, blocks, head) for the short training runs of
``copytask``.
"""

from __future__ import annotations

import minigrad as mg
from minigrad import nn
from minigrad.autograd import Function
from minigrad.tensor import Tensor


class GradientGate(Function):
    """Identity in forward; in backward passes the gradient on (``is_open=True``) or stops it.

    Unlike ``detach``, the gate keeps the edge in the graph and the value in forward; only
    the gradient along this one edge is zero: y = x, dL/dx = dL/dy if open else 0.
    """

    @staticmethod
    def forward(ctx, x, is_open: bool):
        ctx.is_open = is_open
        return x.copy()

    @staticmethod
    def backward(ctx, grad):
        return (grad if ctx.is_open else grad * 0.0), None


def gate(x: Tensor, is_open: bool) -> Tensor:
    """``x`` unchanged; an open gate is left out of the graph altogether."""
    return x if is_open else GradientGate.apply(x, is_open)


class ResidualBlock(nn.Module):
    """A transformer block (attention, then FFN) with scaled, gateable shortcuts.

    ``paths`` lists, per sublayer (attention, FFN), which backward edges are open:
    ``(shortcut_open, branch_open)``; all open by default (the ordinary block).
    x: (B, T, d_model) -> (B, T, d_model).
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        norm_first: bool = True,
        shortcut_scale: float = 1.0,
        causal: bool = True,
    ):
        super().__init__()
        self.norm_first, self.shortcut_scale = norm_first, shortcut_scale
        self.attn = nn.MultiHeadAttention(d_model, n_heads, causal=causal)
        self.ln1 = nn.LayerNorm(d_model)
        self.ffn = nn.FeedForward(d_model, 4 * d_model)
        self.ln2 = nn.LayerNorm(d_model)
        self.paths = [(True, True), (True, True)]

    def forward(self, x: Tensor) -> Tensor:
        x = self.sublayer(x, self.attn, self.ln1, self.paths[0])
        return self.sublayer(x, self.ffn, self.ln2, self.paths[1])

    def sublayer(self, x: Tensor, branch: nn.Module, norm: nn.Module, paths) -> Tensor:
        shortcut_open, branch_open = paths
        skip = x * self.shortcut_scale if self.shortcut_scale != 1.0 else x
        if self.norm_first:
            # y = s * x + F(LN(x))
            return gate(skip, shortcut_open) + gate(branch(norm(x)), branch_open)
        # y = LN(s * x + F(x))
        return norm(gate(skip, shortcut_open) + gate(branch(x), branch_open))

    def extra_repr(self) -> str:
        return f"norm_first={self.norm_first}, shortcut_scale={self.shortcut_scale}"


def set_paths(blocks, branches_taken) -> None:
    """Open, for every sublayer of ``blocks`` (in order: attn, FFN, attn, FFN, ...), the
    branch edge if its index is in ``branches_taken`` and the shortcut edge otherwise;
    ``None`` opens every edge again."""
    index = 0
    for block in blocks:
        paths = []
        for _ in range(2):
            if branches_taken is None:
                paths.append((True, True))
            else:
                through_branch = index in branches_taken
                paths.append((not through_branch, through_branch))
            index += 1
        block.paths = paths


class ReZeroBlock(nn.Module):
    """x + alpha * Attn(x), then x + alpha * FFN(x), no LayerNorm, each alpha = 0 at init:
    the block is exactly the identity at initialization, dy/dx = I."""

    def __init__(self, d_model: int, n_heads: int, causal: bool = True):
        super().__init__()
        self.attn = nn.MultiHeadAttention(d_model, n_heads, causal=causal)
        self.ffn = nn.FeedForward(d_model, 4 * d_model)
        self.alpha_attn = nn.Parameter(mg.zeros(1))
        self.alpha_ffn = nn.Parameter(mg.zeros(1))

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.alpha_attn * self.attn(x)
        return x + self.alpha_ffn * self.ffn(x)


class TinyLM(nn.Module):
    """A small GPT-style model: idx (B, T) -> logits (B, T, vocab). ``blocks`` is any list of
    (B, T, d) -> (B, T, d) modules; ``final_norm`` adds the LayerNorm that pre-LN needs."""

    def __init__(self, vocab_size: int, block_size: int, d_model: int, blocks, final_norm: bool):
        super().__init__()
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        self.pos_emb = nn.Embedding(block_size, d_model)
        self.blocks = nn.ModuleList(blocks)
        self.ln_f = nn.LayerNorm(d_model) if final_norm else None
        self.head = nn.Linear(d_model, vocab_size)

    def forward(self, idx: Tensor) -> Tensor:
        return self.logits(self.residual_stream(idx))

    def residual_stream(self, idx: Tensor) -> Tensor:
        """x after the last block, before the final LayerNorm: (B, T, d_model)."""
        positions = mg.arange(idx.shape[1])
        x = self.tok_emb(idx) + self.pos_emb(positions)
        for block in self.blocks:
            x = block(x)
        return x

    def logits(self, stream: Tensor) -> Tensor:
        if self.ln_f is not None:
            stream = self.ln_f(stream)
        return self.head(stream)
