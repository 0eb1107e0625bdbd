"""A PyTorch twin of ``models.GPT``, written with plain torch ops and the same parameter names,
so that a minigrad state_dict loads into it unchanged. Used by the benchmarks (never by
minigrad itself)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as TF
from torch import nn


class TwinAttention(nn.Module):
    def __init__(self, d_model: int, n_heads: int):
        super().__init__()
        self.n_heads = n_heads
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.o_proj = nn.Linear(d_model, d_model)

    def forward(self, x):
        B, T, D = x.shape
        H = self.n_heads

        def heads(t):
            return t.view(B, T, H, D // H).transpose(1, 2)

        q, k, v = heads(self.q_proj(x)), heads(self.k_proj(x)), heads(self.v_proj(x))
        scores = q @ k.transpose(-2, -1) / math.sqrt(D // H)
        causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        weights = scores.masked_fill(~causal, float("-inf")).softmax(-1)
        return self.o_proj((weights @ v).transpose(1, 2).reshape(B, T, D))


class TwinFeedForward(nn.Module):
    def __init__(self, d_model: int, d_ff: int, activation: str):
        super().__init__()
        self.fc1 = nn.Linear(d_model, d_ff)
        self.fc2 = nn.Linear(d_ff, d_model)
        self.activation = activation

    def forward(self, x):
        h = self.fc1(x)
        if self.activation == "relu":
            h = TF.relu(h)
        else:
            h = TF.gelu(h, approximate="tanh" if self.activation == "gelu_tanh" else "none")
        return self.fc2(h)


class TwinBlock(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, norm_first, residual, activation):
        super().__init__()
        self.attn = TwinAttention(d_model, n_heads)
        self.ln1 = nn.LayerNorm(d_model)
        self.ffn = TwinFeedForward(d_model, d_ff, activation)
        self.ln2 = nn.LayerNorm(d_model)
        self.norm_first, self.residual = norm_first, residual

    def forward(self, x):
        skip = 1.0 if self.residual else 0.0
        if self.norm_first:
            x = skip * x + self.attn(self.ln1(x))
            return skip * x + self.ffn(self.ln2(x))
        x = self.ln1(skip * x + self.attn(x))
        return self.ln2(skip * x + self.ffn(x))


class TwinGPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        d_ff = config.d_ff or 4 * config.d_model
        self.tok_emb = nn.Embedding(config.vocab_size, config.d_model)
        self.pos_emb = nn.Embedding(config.block_size, config.d_model)
        self.blocks = nn.ModuleList(
            TwinBlock(
                config.d_model,
                config.n_heads,
                d_ff,
                config.norm_first,
                config.residual,
                config.activation,
            )
            for _ in range(config.n_layers)
        )
        self.ln_f = nn.LayerNorm(config.d_model) if config.norm_first else None
        self.head = nn.Linear(config.d_model, config.vocab_size)

    def forward(self, idx, targets=None):
        T = idx.shape[1]
        x = self.tok_emb(idx) + self.pos_emb(torch.arange(T, device=idx.device))
        for block in self.blocks:
            x = block(x)
        if self.ln_f is not None:
            x = self.ln_f(x)
        logits = self.head(x)
        if targets is None:
            return logits, None
        loss = TF.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))
        return logits, loss


def twin_of(model, config, device: str = "cpu") -> TwinGPT:
    """A TwinGPT holding exactly ``model``'s weights (a minigrad models.GPT)."""
    twin = TwinGPT(config)
    ours = model.state_dict()
    state = {name: torch.from_numpy(ours[name].numpy().copy()) for name in twin.state_dict()}
    twin.load_state_dict(state, strict=True)
    return twin.to(device)
