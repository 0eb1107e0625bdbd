"""PyTorch twins of minigrad's attention, transformer block and GPT, written in plain
torch.nn code with the same parameter names, so that a minigrad state_dict loads into them
with strict=True. The oracle of the twin tests (test_attention.py, test_transformer_twin.py,
test_gpt.py) and the other side of benchmarks/train_step.py.

Importing this module needs torch; tests import it after ``pytest.importorskip("torch")``.
"""

from __future__ import annotations

import math

import torch
from torch import nn as tnn
from torch.nn import functional as TF


class TorchAttention(tnn.Module):
    """The equations of MultiHeadAttention, step by step, in PyTorch."""

    def __init__(self, d_model: int, n_heads: int, causal: bool):
        super().__init__()
        self.n_heads, self.d_k, self.causal = n_heads, d_model // n_heads, causal
        self.q_proj = tnn.Linear(d_model, d_model)
        self.k_proj = tnn.Linear(d_model, d_model)
        self.v_proj = tnn.Linear(d_model, d_model)
        self.o_proj = tnn.Linear(d_model, d_model)

    def forward(self, x, mask=None):
        batch, length, d_model = x.shape

        def heads(t):
            return t.view(batch, length, self.n_heads, self.d_k).transpose(1, 2)

        q, k, v = heads(self.q_proj(x)), heads(self.k_proj(x)), heads(self.v_proj(x))
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_k)
        allowed = torch.ones(length, length, dtype=torch.bool, device=x.device)
        if self.causal:
            allowed = torch.tril(allowed)
        if mask is not None:
            allowed = allowed & mask
        scores = scores.masked_fill(~allowed, float("-inf"))
        self.attn_weights = torch.softmax(scores, dim=-1)
        out = (self.attn_weights @ v).transpose(1, 2).reshape(batch, length, d_model)
        return self.o_proj(out)


class TorchFeedForward(tnn.Module):
    def __init__(self, d_model: int, d_ff: int, activation: str):
        super().__init__()
        self.fc1, self.fc2 = tnn.Linear(d_model, d_ff), tnn.Linear(d_ff, d_model)
        self.activation = activation

    def forward(self, x):
        hidden = self.fc1(x)
        if self.activation == "relu":
            hidden = torch.relu(hidden)
        else:
            hidden = TF.gelu(
                hidden, approximate="tanh" if self.activation == "gelu_tanh" else "none"
            )
        return self.fc2(hidden)


class TorchBlock(tnn.Module):
    def __init__(self, d_model, n_heads, d_ff=None, causal=True, norm_first=False,
                 residual=True, activation="gelu"):  # fmt: skip
        super().__init__()
        self.norm_first, self.residual = norm_first, residual
        self.attn = TorchAttention(d_model, n_heads, causal)
        self.ln1 = tnn.LayerNorm(d_model)
        self.ffn = TorchFeedForward(d_model, d_ff or 4 * d_model, activation)
        self.ln2 = tnn.LayerNorm(d_model)

    def forward(self, x, mask=None):
        shortcut = self.residual
        if self.norm_first:
            out = self.attn(self.ln1(x), mask)
            x = x + out if shortcut else out
            out = self.ffn(self.ln2(x))
            return x + out if shortcut else out
        out = self.attn(x, mask)
        x = self.ln1(x + out if shortcut else out)
        out = self.ffn(x)
        return self.ln2(x + out if shortcut else out)


class TorchGPT(tnn.Module):
    """models.GPT in plain PyTorch, from the same GPTConfig."""

    def __init__(self, config):
        super().__init__()
        c = config
        self.tok_emb = tnn.Embedding(c.vocab_size, c.d_model)
        self.pos_emb = tnn.Embedding(c.block_size, c.d_model)
        self.blocks = tnn.ModuleList(
            TorchBlock(c.d_model, c.n_heads, c.d_ff, True, c.norm_first, c.residual, c.activation)
            for _ in range(c.n_layers)
        )
        self.ln_f = tnn.LayerNorm(c.d_model) if c.norm_first else None
        self.head = tnn.Linear(c.d_model, c.vocab_size)

    def forward(self, idx, targets=None):
        positions = torch.arange(idx.shape[1], device=idx.device)
        x = self.tok_emb(idx) + self.pos_emb(positions)
        for block in self.blocks:
            x = block(x)
        if self.ln_f is not None:
            x = self.ln_f(x)
        logits = self.head(x)
        if targets is None:
            return logits, None
        flat = logits.reshape(-1, logits.shape[-1])
        loss = TF.cross_entropy(flat, targets.reshape(-1), ignore_index=-100)
        return logits, loss


def load_into_torch(twin, module) -> None:
    """Copy a minigrad module's weights into its twin; strict=True checks that the names agree."""
    state = {name: torch.from_numpy(t.numpy().copy()) for name, t in module.state_dict().items()}
    twin.load_state_dict(state, strict=True)
