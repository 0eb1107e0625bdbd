"""A GPT: a decoder-only transformer that predicts the next token.

X_i = tok_emb(x_i) + pos_emb(i)                  (learned positions)
X   = blocks[L-1](... blocks[0](X))              (causal TransformerBlocks)
logits = head(ln_f(X))                           (ln_f only for pre-LN blocks)
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from numbers import Integral

import numpy as np

import minigrad as mg
from minigrad import nn, rng
from minigrad.backend import array_module
from minigrad.errors import ShapeError
from minigrad.nn import functional as F
from minigrad.nn.feedforward import ACTIVATIONS
from minigrad.tensor import Tensor


@dataclass
class GPTConfig:
    """The size and shape of a GPT. ``d_ff`` defaults to 4 * d_model."""

    vocab_size: int
    block_size: int  # the longest context the model reads
    d_model: int
    n_heads: int
    n_layers: int
    d_ff: int | None = None
    dropout: float = 0.0
    norm_first: bool = False  # False: post-LN blocks, Z = LayerNorm(X + O)
    residual: bool = True  # False: no shortcuts (for the residual studies)
    activation: str = "gelu"

    def __post_init__(self):
        for name in ("vocab_size", "block_size", "d_model", "n_heads", "n_layers"):
            value = getattr(self, name)
            if not isinstance(value, Integral) or isinstance(value, bool) or value < 1:
                raise ValueError(f"GPTConfig: {name} must be a positive integer, got {value!r}")
        if self.d_model % self.n_heads != 0:
            raise ValueError(
                f"GPTConfig: d_model={self.d_model} must be divisible by n_heads={self.n_heads}"
            )
        if self.d_ff is not None and (not isinstance(self.d_ff, Integral) or self.d_ff < 1):
            raise ValueError(
                f"GPTConfig: d_ff must be a positive integer or None, got {self.d_ff!r}"
            )
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"GPTConfig: dropout must be in [0, 1), got {self.dropout!r}")
        if self.activation not in ACTIVATIONS:
            raise ValueError(
                f"GPTConfig: activation must be one of {ACTIVATIONS}, got {self.activation!r}"
            )

    def to_dict(self) -> dict:
        return asdict(self)


class GPT(nn.Module):
    """forward(idx: (B, T) int64, targets=None) -> (logits (B, T, vocab_size), loss or None).

    Parameter names: ``tok_emb``, ``pos_emb``, ``blocks.{i}.attn.{q,k,v,o}_proj``,
    ``blocks.{i}.ln1``, ``blocks.{i}.ffn.fc1``/``fc2``, ``blocks.{i}.ln2``, ``ln_f`` (pre-LN
    only) and ``head`` (not tied to ``tok_emb``).
    """

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.config = config
        self.tok_emb = nn.Embedding(config.vocab_size, config.d_model)
        self.pos_emb = nn.Embedding(config.block_size, config.d_model)
        self.drop = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(
            nn.TransformerBlock(
                config.d_model,
                config.n_heads,
                d_ff=config.d_ff,
                dropout=config.dropout,
                causal=True,
                norm_first=config.norm_first,
                residual=config.residual,
                activation=config.activation,
            )
            for _ in range(config.n_layers)
        )
        # pre-LN blocks leave their output un-normalized: one last LayerNorm before the head
        self.ln_f = nn.LayerNorm(config.d_model) if config.norm_first else None
        self.head = nn.Linear(config.d_model, config.vocab_size)

    def forward(self, idx, targets=None) -> tuple[Tensor, Tensor | None]:
        idx = _as_tokens(idx)
        if idx.ndim != 2:
            raise ShapeError(f"GPT: idx must be (B, T) token ids, got shape {idx.shape}")
        length = idx.shape[1]
        if length > self.config.block_size:
            raise ShapeError(
                f"GPT: sequence of length {length} is longer than block_size "
                f"{self.config.block_size}; crop the context to the last "
                f"{self.config.block_size} tokens"
            )
        positions = Tensor._make(array_module(idx.array).arange(length))
        # X_i = Embedding(x_i) + P_i
        x = self.drop(self.tok_emb(idx) + self.pos_emb(positions))
        for block in self.blocks:
            x = block(x)
        if self.ln_f is not None:
            x = self.ln_f(x)
        logits = self.head(x)
        if targets is None:
            return logits, None
        targets = _as_tokens(targets, idx.device)
        if targets.shape != idx.shape:
            raise ShapeError(
                f"GPT: targets of shape {targets.shape} must match idx of shape {idx.shape}"
            )
        return logits, next_token_loss(logits, targets)

    def generate(
        self, idx, max_new_tokens: int, temperature: float = 1.0, top_k: int | None = None
    ) -> Tensor:
        """The prompt ``idx`` (B, T) followed by ``max_new_tokens`` sampled tokens.

        Each step reads at most the last ``block_size`` tokens, divides the last logits by
        ``temperature`` (0 picks the most likely token), keeps only the ``top_k`` largest if
        given, and samples from the softmax with minigrad's RNG (``mg.manual_seed``).
        With dropout > 0, call ``model.eval()`` first, as in PyTorch.
        """
        idx = _as_tokens(idx, self.tok_emb.weight.device)
        if idx.ndim == 1:
            idx = idx.reshape(1, -1)
        tokens = idx.array
        xp = array_module(tokens)
        with mg.no_grad():
            for _ in range(max_new_tokens):
                context = Tensor._make(tokens[:, -self.config.block_size :])
                logits, _ = self(context)
                last = logits.array[:, -1, :].astype(np.float64)
                next_token = _sample(last, temperature, top_k, xp)
                tokens = xp.concatenate([tokens, next_token[:, None]], axis=1)
        return Tensor._make(tokens)

    def extra_repr(self) -> str:
        c = self.config
        return (
            f"vocab_size={c.vocab_size}, block_size={c.block_size}, d_model={c.d_model}, "
            f"n_heads={c.n_heads}, n_layers={c.n_layers}, norm_first={c.norm_first}, "
            f"residual={c.residual}"
        )


def next_token_loss(logits: Tensor, targets: Tensor) -> Tensor:
    """The mean cross-entropy of the logits (B, T, vocab) against the next tokens (B, T),
    over the positions whose target is not -100 (a task's prompt, which it does not score)."""
    return F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=-100
    )


def _as_tokens(idx, device: str = "cpu") -> Tensor:
    """Token ids as an int64 Tensor (lists and arrays are accepted too)."""
    if not isinstance(idx, Tensor):
        idx = mg.tensor(idx, dtype=np.int64, device=device)
    if idx.dtype.kind not in "iu":
        raise TypeError(f"GPT: token ids must be integers (int64), got dtype {idx.dtype}")
    return idx


def _sample(logits, temperature: float, top_k: int | None, xp):
    """One token id per row of ``logits`` (B, V), as an int64 array (B,)."""
    if temperature == 0:
        return logits.argmax(axis=-1).astype(np.int64)
    logits = logits / temperature
    if top_k is not None:
        k = min(int(top_k), logits.shape[-1])
        kth_largest = xp.sort(logits, axis=-1)[:, -k][:, None]
        logits = xp.where(logits < kth_largest, -xp.inf, logits)
    probs = xp.exp(logits - logits.max(axis=-1, keepdims=True))
    probs /= probs.sum(axis=-1, keepdims=True)
    # inverse CDF: the first token whose cumulative probability exceeds u ~ U(0, 1)
    u = rng.generator(_device_of(probs)).random((probs.shape[0], 1))
    chosen = (xp.cumsum(probs, axis=-1) <= u).sum(axis=-1)
    return xp.minimum(chosen, probs.shape[-1] - 1).astype(np.int64)


def _device_of(array) -> str:
    from minigrad.backend import device_of

    return device_of(array)
