"""A Transformer encoder-decoder (Vaswani et al. 2017) that translates one sequence into another.

Encoder, per block (post-LN; pre-LN moves each LayerNorm in front of its sublayer):
    X = LayerNorm(X + SelfAttn(X))                    keys: the source, padding masked out
    X = LayerNorm(X + FFN(X))
Decoder, per block:
    Y = LayerNorm(Y + CausalSelfAttn(Y))              position t reads targets <= t
    Y = LayerNorm(Y + CrossAttn(Y, memory))           Q from Y, K and V from the encoder
    Y = LayerNorm(Y + FFN(Y))
logits = head(Y)

``memory`` is the encoder's output: every decoder block reads all of it through its
cross-attention, so the decoder looks back at any source position it needs, in any order.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from numbers import Integral

import numpy as np

import minigrad as mg
from minigrad import nn
from minigrad.backend import array_module
from minigrad.errors import ShapeError
from minigrad.nn.feedforward import ACTIVATIONS
from minigrad.tensor import Tensor
from models.gpt import _as_tokens, next_token_loss


@dataclass
class Seq2SeqConfig:
    """The size and shape of a Seq2Seq. ``n_layers`` blocks in the encoder and as many in the
    decoder; ``d_ff`` defaults to 4 * d_model. Source and target share one vocabulary whose
    ``pad_id``, ``bos_id`` (starts every target) and ``eos_id`` (ends it) are given."""

    vocab_size: int
    block_size: int  # the longest source or target sequence, in tokens
    d_model: int
    n_heads: int
    n_layers: int
    d_ff: int | None = None
    dropout: float = 0.0
    norm_first: bool = False
    activation: str = "gelu"
    pad_id: int = 0
    bos_id: int = 1
    eos_id: int = 2

    def __post_init__(self):
        for name in ("vocab_size", "block_size", "d_model", "n_heads", "n_layers"):
            _check_positive(self, name)
        if self.d_model % self.n_heads != 0:
            raise ValueError(
                f"Seq2SeqConfig: d_model={self.d_model} must be divisible by n_heads={self.n_heads}"
            )
        if self.d_ff is not None:
            _check_positive(self, "d_ff")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"Seq2SeqConfig: dropout must be in [0, 1), got {self.dropout!r}")
        if self.activation not in ACTIVATIONS:
            raise ValueError(
                f"Seq2SeqConfig: activation must be one of {ACTIVATIONS}, got {self.activation!r}"
            )
        _check_special_ids(self)

    def to_dict(self) -> dict:
        return asdict(self)


def _check_positive(config, name: str) -> None:
    value = getattr(config, name)
    if not isinstance(value, Integral) or isinstance(value, bool) or value < 1:
        raise ValueError(
            f"{type(config).__name__}: {name} must be a positive integer, got {value!r}"
        )


def _check_special_ids(config) -> None:
    for name in ("pad_id", "bos_id", "eos_id"):
        value = getattr(config, name)
        if not isinstance(value, Integral) or not 0 <= value < config.vocab_size:
            raise ValueError(
                f"{type(config).__name__}: {name} must be a token id in "
                f"[0, {config.vocab_size}), got {value!r}"
            )


class DecoderBlock(nn.Module):
    """y: (B, T, d_model), memory: (B, S, d_model) -> (B, T, d_model).

    Submodules ``self_attn`` (causal), ``ln1``, ``cross_attn`` (queries from y, keys and
    values from memory), ``ln2``, ``ffn``, ``ln3``. ``memory_mask`` (B, 1, 1, S) is True at
    the source positions that may be read (not padding).
    """

    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.0,
                 norm_first: bool = False, activation: str = "gelu"):  # fmt: skip
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = nn.MultiHeadAttention(d_model, n_heads, causal=True)
        self.ln1 = nn.LayerNorm(d_model)
        self.cross_attn = nn.MultiHeadAttention(d_model, n_heads)
        self.ln2 = nn.LayerNorm(d_model)
        self.ffn = nn.FeedForward(d_model, d_ff, activation=activation)
        self.ln3 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, y: Tensor, memory: Tensor, memory_mask=None) -> Tensor:
        drop = self.dropout
        if self.norm_first:
            # Y = Y + SelfAttn(LN(Y)),  Y = Y + CrossAttn(LN(Y), memory),  Y = Y + FFN(LN(Y))
            y = y + drop(self.self_attn(self.ln1(y)))
            y = y + drop(self.cross_attn(self.ln2(y), memory_mask, memory=memory))
            return y + drop(self.ffn(self.ln3(y)))
        # Y = LN(Y + SelfAttn(Y)),  Y = LN(Y + CrossAttn(Y, memory)),  Y = LN(Y + FFN(Y))
        y = self.ln1(y + drop(self.self_attn(y)))
        y = self.ln2(y + drop(self.cross_attn(y, memory_mask, memory=memory)))
        return self.ln3(y + drop(self.ffn(y)))

    def extra_repr(self) -> str:
        return f"norm_first={self.norm_first}"


class Encoder(nn.Module):
    """src: (B, S) token ids, src_mask (B, 1, 1, S) -> memory (B, S, d_model).
    ``tok_emb``, ``pos_emb`` (learned), ``blocks.{i}`` (nn.TransformerBlock, not causal),
    ``ln_f`` (pre-LN only)."""

    def __init__(self, config: Seq2SeqConfig):
        super().__init__()
        c = config
        self.tok_emb = nn.Embedding(c.vocab_size, c.d_model)
        self.pos_emb = nn.Embedding(c.block_size, c.d_model)
        self.drop = nn.Dropout(c.dropout)
        self.blocks = nn.ModuleList(
            nn.TransformerBlock(c.d_model, c.n_heads, d_ff=c.d_ff, dropout=c.dropout,
                                causal=False, norm_first=c.norm_first, activation=c.activation)
            for _ in range(c.n_layers)
        )  # fmt: skip
        self.ln_f = nn.LayerNorm(c.d_model) if c.norm_first else None

    def forward(self, src: Tensor, src_mask) -> Tensor:
        x = self.drop(self.tok_emb(src) + self.pos_emb(_positions(src)))
        for block in self.blocks:
            x = block(x, src_mask)
        return self.ln_f(x) if self.ln_f is not None else x


class Decoder(nn.Module):
    """tgt_in: (B, T) token ids, memory (B, S, d_model) -> (B, T, d_model).
    ``tok_emb``, ``pos_emb``, ``blocks.{i}`` (DecoderBlock), ``ln_f`` (pre-LN only)."""

    def __init__(self, config: Seq2SeqConfig):
        super().__init__()
        c = config
        self.tok_emb = nn.Embedding(c.vocab_size, c.d_model)
        self.pos_emb = nn.Embedding(c.block_size, c.d_model)
        self.drop = nn.Dropout(c.dropout)
        self.blocks = nn.ModuleList(
            DecoderBlock(c.d_model, c.n_heads, c.d_ff or 4 * c.d_model, c.dropout,
                         c.norm_first, c.activation)
            for _ in range(c.n_layers)
        )  # fmt: skip
        self.ln_f = nn.LayerNorm(c.d_model) if c.norm_first else None

    def forward(self, tgt_in: Tensor, memory: Tensor, src_mask) -> Tensor:
        y = self.drop(self.tok_emb(tgt_in) + self.pos_emb(_positions(tgt_in)))
        for block in self.blocks:
            y = block(y, memory, src_mask)
        return self.ln_f(y) if self.ln_f is not None else y


class EncoderDecoder(nn.Module):
    """What both encoder-decoders share: ``forward`` and ``generate`` on top of the
    model's own ``encode(src) -> (memory, src_mask)`` and ``decode(tgt_in, memory, src_mask)
    -> logits``, and the checks of the token ids they are given."""

    def forward(self, src, tgt_in, targets=None) -> tuple[Tensor, Tensor | None]:
        memory, src_mask = self.encode(src)
        logits = self.decode(tgt_in, memory, src_mask)
        if targets is None:
            return logits, None
        targets = _as_tokens(targets, logits.device)
        if targets.shape != logits.shape[:2]:
            raise ShapeError(
                f"{type(self).__name__}: targets of shape {targets.shape} must match tgt_in "
                f"of shape {logits.shape[:2]}"
            )
        return logits, next_token_loss(logits, targets)

    def generate(self, src, max_new_tokens: int) -> Tensor:
        """Greedy decoding: (B, n) token ids, n <= max_new_tokens, each row the most likely
        token at every step after BOS, up to and including EOS, padded after it. Stops
        when every row has ended. Call ``model.eval()`` first when dropout > 0."""
        src = self._tokens(src, "src")
        return greedy_decode(self, src, max_new_tokens, self.config)

    def _tokens(self, idx, what: str) -> Tensor:
        idx = _as_tokens(idx, self.head.weight.device)
        if idx.ndim == 1:
            idx = idx.reshape(1, -1)
        if idx.ndim != 2:
            raise ShapeError(
                f"{type(self).__name__}: {what} must be (B, T) token ids, got shape {idx.shape}"
            )
        return idx


class Seq2Seq(EncoderDecoder):
    """forward(src (B, S), tgt_in (B, T), targets=None) -> (logits (B, T, vocab), loss).

    ``tgt_in`` is the target shifted right (BOS first), ``targets`` the target followed by
    EOS, -100 where no loss is taken (padding). Parameter names: ``encoder.blocks.{i}.attn``,
    ``decoder.blocks.{i}.self_attn`` / ``cross_attn`` (each with ``q_proj`` .. ``o_proj``),
    ``ln1`` .. ``ln3``, ``ffn.fc1``/``fc2``, the embeddings ``encoder.tok_emb`` ... and ``head``.
    """

    def __init__(self, config: Seq2SeqConfig):
        super().__init__()
        self.config = config
        self.encoder = Encoder(config)
        self.decoder = Decoder(config)
        self.head = nn.Linear(config.d_model, config.vocab_size)

    def source_mask(self, src: Tensor) -> Tensor:
        """(B, 1, 1, S), True at the source tokens that are not padding: the keys that the
        encoder's self-attention and the decoder's cross-attention may read."""
        return Tensor._make((src.array != self.config.pad_id)[:, None, None, :])

    def encode(self, src) -> tuple[Tensor, Tensor]:
        """(memory (B, S, d_model), the source mask)."""
        src = self._tokens(src, "src")
        mask = self.source_mask(src)
        return self.encoder(src, mask), mask

    def decode(self, tgt_in, memory: Tensor, src_mask: Tensor) -> Tensor:
        """The logits (B, T, vocab) of the token after each position of ``tgt_in``."""
        tgt_in = self._tokens(tgt_in, "tgt_in")
        return self.head(self.decoder(tgt_in, memory, src_mask))

    def cross_attention_maps(self) -> list[Tensor]:
        """The last forward's cross-attention weights, one (B, n_heads, T, S) per block."""
        return [block.cross_attn.attn_weights for block in self.decoder.blocks]

    def _tokens(self, idx, what: str) -> Tensor:
        idx = super()._tokens(idx, what)
        if idx.shape[1] > self.config.block_size:
            raise ShapeError(
                f"Seq2Seq: {what} of length {idx.shape[1]} is longer than block_size "
                f"{self.config.block_size}"
            )
        return idx

    def extra_repr(self) -> str:
        c = self.config
        return (
            f"vocab_size={c.vocab_size}, block_size={c.block_size}, d_model={c.d_model}, "
            f"n_heads={c.n_heads}, n_layers={c.n_layers}, norm_first={c.norm_first}"
        )


def greedy_decode(model, src: Tensor, max_new_tokens: int, config) -> Tensor:
    """What ``generate`` does for any model with ``encode(src)`` and
    ``decode(tgt_in, memory, src_mask)``: encode once, then feed back the argmax."""
    xp = array_module(src.array)
    batch = src.shape[0]
    steps = min(max_new_tokens, config.block_size)
    tokens = xp.full((batch, 1), config.bos_id, dtype=np.int64)
    ended = xp.zeros(batch, dtype=bool)
    with mg.no_grad():
        memory, src_mask = model.encode(src)
        for _ in range(steps):
            logits = model.decode(Tensor._make(tokens), memory, src_mask)
            next_token = logits.array[:, -1, :].argmax(axis=-1).astype(np.int64)
            next_token = xp.where(ended, config.pad_id, next_token)
            tokens = xp.concatenate([tokens, next_token[:, None]], axis=1)
            ended |= next_token == config.eos_id
            if bool(ended.all()):
                break
    return Tensor._make(tokens[:, 1:])


def _positions(idx: Tensor) -> Tensor:
    return Tensor._make(array_module(idx.array).arange(idx.shape[1]))
