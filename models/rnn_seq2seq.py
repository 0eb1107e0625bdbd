"""The encoder-decoder the Transformer replaced (Sutskever et al. 2014; Luong et al. 2015).

Encoder: an RNN, LSTM or GRU reads the source one token at a time,
    h_s = cell(x_s, h_{s-1})                          s = 1 .. S (padding skipped)
Decoder: another one, started from the encoder's last state, reads the target so far,
    d_t = cell(y_{t-1}, d_{t-1}),   d_0 = h_S
and predicts the next token from
    attention=None:   logits_t = head(d_t)            all it knows of the source is h_S
    attention="dot":  a_t = softmax_s(d_t . h_s),  c_t = sum_s a_ts h_s
                      logits_t = head(tanh(W_c [c_t; d_t]))     (Luong's global attention)

Without attention, the whole source must squeeze through one state vector h_S; with it,
every step can look back at every source position.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import minigrad as mg
from minigrad import nn
from minigrad.tensor import Tensor
from models.seq2seq import EncoderDecoder, _check_positive, _check_special_ids

CELLS = {"rnn": nn.RNN, "lstm": nn.LSTM, "gru": nn.GRU}
ATTENTIONS = (None, "dot")


@dataclass
class RNNSeq2SeqConfig:
    """Sizes of an RNNSeq2Seq: embeddings and states of width ``d_model``, ``n_layers``
    stacked layers in the encoder and in the decoder."""

    vocab_size: int
    block_size: int  # the longest target (and source) sequence, in tokens
    d_model: int
    n_layers: int = 1
    cell: str = "lstm"  # "rnn", "lstm" or "gru"
    attention: str | None = None  # None or "dot"
    pad_id: int = 0
    bos_id: int = 1
    eos_id: int = 2

    def __post_init__(self):
        for name in ("vocab_size", "block_size", "d_model", "n_layers"):
            _check_positive(self, name)
        if self.cell not in CELLS:
            raise ValueError(
                f"RNNSeq2SeqConfig: cell must be one of {tuple(CELLS)}, got {self.cell!r}"
            )
        if self.attention not in ATTENTIONS:
            raise ValueError(
                f"RNNSeq2SeqConfig: attention must be None or 'dot', got {self.attention!r}"
            )
        _check_special_ids(self)

    def to_dict(self) -> dict:
        return asdict(self)


class RNNSeq2Seq(EncoderDecoder):
    """forward(src (B, S), tgt_in (B, T), targets=None) -> (logits (B, T, vocab), loss);
    generate(src, max_new_tokens) decodes greedily, as ``models.Seq2Seq``.

    Parameter names: ``encoder_emb``, ``encoder`` (nn.RNN / LSTM / GRU, PyTorch's
    ``weight_ih_l0`` ...), ``decoder_emb``, ``decoder``, ``combine`` (W_c, with attention
    only) and ``head``.
    """

    def __init__(self, config: RNNSeq2SeqConfig | None = None, cell: str = "lstm",
                 attention: str | None = None, **sizes):  # fmt: skip
        super().__init__()
        if config is None:
            config = RNNSeq2SeqConfig(cell=cell, attention=attention, **sizes)
        self.config = c = config
        recurrent = CELLS[c.cell]
        self.encoder_emb = nn.Embedding(c.vocab_size, c.d_model)
        self.encoder = recurrent(c.d_model, c.d_model, num_layers=c.n_layers, batch_first=True)
        self.decoder_emb = nn.Embedding(c.vocab_size, c.d_model)
        self.decoder = recurrent(c.d_model, c.d_model, num_layers=c.n_layers, batch_first=True)
        self.combine = nn.Linear(2 * c.d_model, c.d_model) if c.attention else None
        self.head = nn.Linear(c.d_model, c.vocab_size)
        self.attn_weights = None  # the last (B, T, S) attention weights, with attention

    @property
    def is_lstm(self) -> bool:
        return self.config.cell == "lstm"

    def encode(self, src) -> tuple[tuple, Tensor]:
        """((the encoder's states h_s (B, S, d), its last state), the source mask (B, S)).

        The tokens go in one step at a time, and a row's state stops changing after its
        last real token, so the last state is h at that token (PyTorch's packed sequences)."""
        src = self._tokens(src, "src")
        real = src.array != self.config.pad_id  # (B, S)
        embedded = self.encoder_emb(src)  # (B, S, d)
        state, outputs = None, []
        for s in range(src.shape[1]):
            output, new_state = self.encoder(embedded[:, s : s + 1, :], state)
            keep = Tensor._make(real[None, :, s : s + 1])  # (1, B, 1): layers, rows, units
            state = new_state if state is None else _where_state(keep, new_state, state)
            outputs.append(output)
        states = mg.cat(outputs, dim=1)  # (B, S, d): h_s of the top layer
        return (states, state), Tensor._make(real)

    def decode(self, tgt_in, memory: tuple, src_mask: Tensor, state=None) -> Tensor:
        """Logits (B, T, vocab) of the token after each position of ``tgt_in``, the decoder
        started from the encoder's last state (or from ``state``)."""
        states, last_state = memory
        tgt_in = self._tokens(tgt_in, "tgt_in")
        decoded, _ = self.decoder(self.decoder_emb(tgt_in), last_state if state is None else state)
        if self.config.attention is None:
            return self.head(decoded)
        # a_t = softmax_s(d_t . h_s) over the real source tokens;  c_t = sum_s a_ts h_s
        scores = decoded @ states.transpose(1, 2)  # (B, T, S)
        allowed = src_mask.array[:, None, :]
        scores = scores.masked_fill(Tensor._make(~allowed), float("-inf"))
        weights = nn.functional.softmax(scores, dim=-1)
        self.attn_weights = weights.detach()
        context = weights @ states  # (B, T, d)
        # logits_t = head(tanh(W_c [c_t; d_t]))
        return self.head(self.combine(mg.cat([context, decoded], dim=-1)).tanh())

    def extra_repr(self) -> str:
        c = self.config
        return f"cell={c.cell!r}, attention={c.attention!r}, d_model={c.d_model}"


def _where_state(keep: Tensor, new, old):
    """The new state where ``keep`` is True, the old one elsewhere (h, or (h, c))."""
    if isinstance(new, tuple):
        return tuple(mg.where(keep, n, o) for n, o in zip(new, old))
    return mg.where(keep, new, old)
