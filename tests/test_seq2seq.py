"""models.Seq2Seq and models.RNNSeq2Seq beside PyTorch: the Transformer encoder-decoder against
torch.nn.Transformer, cross-attention against torch.nn.MultiheadAttention, the LSTM
encoder-decoder against torch.nn.LSTM, each with weights copied from minigrad's model.
"""

from __future__ import annotations

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn, optim
from minigrad.nn import functional as F
from minigrad.viz import find_shortcuts
from models import RNNSeq2Seq, RNNSeq2SeqConfig, Seq2Seq, Seq2SeqConfig
from models.memory import parameter_count

torch = pytest.importorskip("torch")

PAD, BOS, EOS = 0, 1, 2
ATOL = 2e-5


def t(array) -> torch.Tensor:
    return torch.tensor(np.asarray(array))


def batch(vocab: int = 12, seed: int = 0):
    """(src, tgt_in, targets): right-padded sources of lengths 5, 3 and 1, targets of 4, 2, 3."""
    rng = np.random.default_rng(seed)
    src = np.full((3, 5), PAD, dtype=np.int64)
    tgt_in = np.full((3, 5), PAD, dtype=np.int64)
    targets = np.full((3, 5), -100, dtype=np.int64)
    for row, (s, g) in enumerate([(5, 4), (3, 2), (1, 3)]):
        src[row, :s] = rng.integers(3, vocab, size=s)
        words = rng.integers(3, vocab, size=g)
        tgt_in[row, : g + 1] = [BOS, *words]
        targets[row, : g + 1] = [*words, EOS]
    return src, tgt_in, targets


# -- the Transformer encoder-decoder against torch.nn.Transformer -----------------------------


def copy_attention(torch_mha, ours: nn.MultiHeadAttention) -> None:
    """torch's in_proj stacks W_q, W_k, W_v; out_proj is o_proj."""
    weights = [ours.q_proj.weight, ours.k_proj.weight, ours.v_proj.weight]
    biases = [ours.q_proj.bias, ours.k_proj.bias, ours.v_proj.bias]
    torch_mha.in_proj_weight.data = t(np.concatenate([w.numpy() for w in weights]))
    torch_mha.in_proj_bias.data = t(np.concatenate([b.numpy() for b in biases]))
    copy_linear(torch_mha.out_proj, ours.o_proj)


def copy_linear(torch_module, ours) -> None:
    torch_module.weight.data = t(ours.weight.numpy())
    if getattr(ours, "bias", None) is not None:
        torch_module.bias.data = t(ours.bias.numpy())


class TorchSeq2Seq(torch.nn.Module):
    """Embeddings and head around torch.nn.Transformer, weights copied from a Seq2Seq."""

    def __init__(self, model: Seq2Seq):
        super().__init__()
        c = model.config
        self.transformer = torch.nn.Transformer(
            c.d_model, c.n_heads, c.n_layers, c.n_layers, c.d_ff or 4 * c.d_model,
            dropout=0.0, activation="relu", batch_first=True, norm_first=c.norm_first,
        )  # fmt: skip
        if not c.norm_first:  # post-LN blocks end normalized: no final norms in ours
            self.transformer.encoder.norm = None
            self.transformer.decoder.norm = None
        else:
            copy_linear(self.transformer.encoder.norm, model.encoder.ln_f)
            copy_linear(self.transformer.decoder.norm, model.decoder.ln_f)
        self.embeddings = torch.nn.ModuleDict()
        for side in ("encoder", "decoder"):
            for name in ("tok_emb", "pos_emb"):
                ours = getattr(getattr(model, side), name).weight.numpy()
                self.embeddings[f"{side}_{name}"] = torch.nn.Embedding.from_pretrained(
                    t(ours), freeze=False
                )
        for ours, theirs in zip(model.encoder.blocks, self.transformer.encoder.layers):
            copy_attention(theirs.self_attn, ours.attn)
            self._copy_rest(theirs, ours.ffn, [ours.ln1, ours.ln2])
        for ours, theirs in zip(model.decoder.blocks, self.transformer.decoder.layers):
            copy_attention(theirs.self_attn, ours.self_attn)
            copy_attention(theirs.multihead_attn, ours.cross_attn)
            self._copy_rest(theirs, ours.ffn, [ours.ln1, ours.ln2, ours.ln3])
        self.head = torch.nn.Linear(c.d_model, c.vocab_size)
        copy_linear(self.head, model.head)

    @staticmethod
    def _copy_rest(layer, ffn, norms) -> None:
        copy_linear(layer.linear1, ffn.fc1)
        copy_linear(layer.linear2, ffn.fc2)
        for i, norm in enumerate(norms, start=1):
            copy_linear(getattr(layer, f"norm{i}"), norm)

    def embed(self, side: str, idx):
        positions = torch.arange(idx.shape[1])
        e = self.embeddings
        return e[f"{side}_tok_emb"](idx) + e[f"{side}_pos_emb"](positions)

    def forward(self, src, tgt_in):
        padding = src == PAD
        causal = torch.nn.Transformer.generate_square_subsequent_mask(tgt_in.shape[1])
        out = self.transformer(
            self.embed("encoder", src), self.embed("decoder", tgt_in), tgt_mask=causal,
            src_key_padding_mask=padding, memory_key_padding_mask=padding,
        )  # fmt: skip
        return self.head(out)


def seq2seq(norm_first: bool, seed: int = 0) -> Seq2Seq:
    mg.manual_seed(seed)
    config = Seq2SeqConfig(vocab_size=12, block_size=8, d_model=16, n_heads=4, n_layers=2,
                           d_ff=24, norm_first=norm_first, activation="relu")  # fmt: skip
    return Seq2Seq(config)


@pytest.mark.parametrize("norm_first", [False, True], ids=["post_ln", "pre_ln"])
def test_seq2seq_matches_torch_transformer_and_its_adamw_losses(norm_first):
    model = seq2seq(norm_first)
    twin = TorchSeq2Seq(model)
    src, tgt_in, targets = batch()

    logits, _ = model(src, tgt_in)
    np.testing.assert_allclose(logits.numpy(), twin(t(src), t(tgt_in)).detach().numpy(), atol=ATOL)

    ours = optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)
    theirs = torch.optim.AdamW(twin.parameters(), lr=1e-2, weight_decay=0.01)
    losses, torch_losses = [], []
    for _ in range(10):
        _, loss = model(src, tgt_in, targets)
        ours.zero_grad()
        loss.backward()
        ours.step()
        losses.append(loss.item())
        out = twin(t(src), t(tgt_in))
        torch_loss = torch.nn.functional.cross_entropy(
            out.reshape(-1, out.shape[-1]), t(targets).reshape(-1), ignore_index=-100
        )
        theirs.zero_grad()
        torch_loss.backward()
        theirs.step()
        torch_losses.append(torch_loss.item())
    np.testing.assert_allclose(losses, torch_losses, rtol=1e-4, atol=1e-5)
    assert losses[-1] < losses[0] / 2  # it learns the batch


def test_seq2seq_parameter_names_are_the_equations():
    names = {name for name, _ in seq2seq(False).named_parameters()}
    assert {
        "encoder.tok_emb.weight",
        "encoder.blocks.0.attn.q_proj.weight",
        "encoder.blocks.1.ffn.fc2.bias",
        "decoder.blocks.0.self_attn.k_proj.weight",
        "decoder.blocks.0.cross_attn.q_proj.weight",
        "decoder.blocks.1.cross_attn.v_proj.bias",
        "decoder.blocks.1.ln3.weight",
        "head.weight",
    } <= names
    assert not any("ln_f" in name for name in names)  # post-LN: no final norms
    assert "decoder.ln_f.weight" in {name for name, _ in seq2seq(True).named_parameters()}


@pytest.mark.parametrize("norm_first", [False, True])
def test_parameter_count_of_the_memory_estimate_is_exact(norm_first):
    model = seq2seq(norm_first)
    assert parameter_count(model.config) == model.num_parameters()
    for cell in ("rnn", "lstm", "gru"):
        for attention in (None, "dot"):
            config = RNNSeq2SeqConfig(12, 8, 16, 2, cell=cell, attention=attention)
            assert parameter_count(config) == RNNSeq2Seq(config).num_parameters()


def test_source_padding_changes_nothing():
    """A padded source gives the logits of the unpadded one: padding is masked out of the
    encoder's self-attention and the decoder's cross-attention."""
    model = seq2seq(False)
    src, tgt_in, _ = batch()
    short, _ = model(src[1:2, :3], tgt_in[1:2])
    padded, _ = model(src[1:2], tgt_in[1:2])
    np.testing.assert_allclose(short.numpy(), padded.numpy(), atol=1e-5)
    weights = model.cross_attention_maps()[0].numpy()
    assert weights.shape == (1, 4, 5, 5)
    np.testing.assert_array_equal(weights[..., 3:], 0.0)


def test_shortcuts_of_the_encoder_decoder():
    """Two per encoder block and three per decoder block (self, cross, FFN)."""
    model = seq2seq(False)
    src, tgt_in, targets = batch()
    _, loss = model(src, tgt_in, targets)
    assert len(find_shortcuts(loss)) == 2 * 2 + 3 * 2


# -- cross-attention against torch.nn.MultiheadAttention ----------------------------------------


def test_cross_attention_matches_torch_multihead_attention():
    mg.manual_seed(1)
    attention = nn.MultiHeadAttention(16, 4)
    twin = torch.nn.MultiheadAttention(16, 4, batch_first=True)
    copy_attention(twin, attention)
    rng = np.random.default_rng(0)
    x_np = rng.standard_normal((2, 3, 16)).astype(np.float32)
    memory_np = rng.standard_normal((2, 5, 16)).astype(np.float32)
    allowed = np.array([[True] * 5, [True, True, False, False, False]])

    x, memory = mg.tensor(x_np, requires_grad=True), mg.tensor(memory_np, requires_grad=True)
    out = attention(x, mg.tensor(allowed[:, None, None, :]), memory=memory)
    (out * out).sum().backward()
    x_t = t(x_np).requires_grad_()
    memory_t = t(memory_np).requires_grad_()
    out_t, weights_t = twin(x_t, memory_t, memory_t, key_padding_mask=t(~allowed),
                            average_attn_weights=False)  # fmt: skip
    (out_t * out_t).sum().backward()

    np.testing.assert_allclose(out.numpy(), out_t.detach().numpy(), atol=ATOL)
    np.testing.assert_allclose(
        attention.attn_weights.numpy(), weights_t.detach().numpy(), atol=ATOL
    )
    np.testing.assert_allclose(x.grad.numpy(), x_t.grad.numpy(), atol=1e-4)
    np.testing.assert_allclose(memory.grad.numpy(), memory_t.grad.numpy(), atol=1e-4)
    in_proj = np.concatenate(
        [attention.q_proj.weight.grad.numpy(), attention.k_proj.weight.grad.numpy(),
         attention.v_proj.weight.grad.numpy()]
    )  # fmt: skip
    np.testing.assert_allclose(in_proj, twin.in_proj_weight.grad.numpy(), atol=1e-4)
    np.testing.assert_allclose(
        attention.o_proj.weight.grad.numpy(), twin.out_proj.weight.grad.numpy(), atol=1e-4
    )


# -- the LSTM encoder-decoder against torch.nn.LSTM ---------------------------------------------


def copy_recurrent(torch_rnn, ours) -> None:
    for name, param in ours.named_parameters():
        getattr(torch_rnn, name).data = t(param.numpy())


class TorchRNNSeq2Seq(torch.nn.Module):
    """The same model on torch.nn.LSTM: packed sources (padding skipped), Luong attention."""

    def __init__(self, model: RNNSeq2Seq):
        super().__init__()
        c = model.config
        self.attention = c.attention
        emb = {n: t(getattr(model, n).weight.numpy()) for n in ("encoder_emb", "decoder_emb")}
        self.encoder_emb = torch.nn.Embedding.from_pretrained(emb["encoder_emb"], freeze=False)
        self.decoder_emb = torch.nn.Embedding.from_pretrained(emb["decoder_emb"], freeze=False)
        self.encoder = torch.nn.LSTM(c.d_model, c.d_model, c.n_layers, batch_first=True)
        self.decoder = torch.nn.LSTM(c.d_model, c.d_model, c.n_layers, batch_first=True)
        copy_recurrent(self.encoder, model.encoder)
        copy_recurrent(self.decoder, model.decoder)
        self.head = torch.nn.Linear(c.d_model, c.vocab_size)
        copy_linear(self.head, model.head)
        if c.attention:
            self.combine = torch.nn.Linear(2 * c.d_model, c.d_model)
            copy_linear(self.combine, model.combine)

    def forward(self, src, tgt_in):
        lengths = (src != PAD).sum(dim=1)
        packed = torch.nn.utils.rnn.pack_padded_sequence(
            self.encoder_emb(src), lengths, batch_first=True, enforce_sorted=False
        )
        states, last = self.encoder(packed)
        states, _ = torch.nn.utils.rnn.pad_packed_sequence(
            states, batch_first=True, total_length=src.shape[1]
        )
        decoded, _ = self.decoder(self.decoder_emb(tgt_in), last)
        if self.attention is None:
            return self.head(decoded), last
        scores = (decoded @ states.transpose(1, 2)).masked_fill(
            (src == PAD)[:, None, :], -torch.inf
        )
        context = scores.softmax(dim=-1) @ states
        return self.head(torch.tanh(self.combine(torch.cat([context, decoded], -1)))), last


@pytest.mark.parametrize("attention", [None, "dot"], ids=["last_state", "attention"])
def test_lstm_seq2seq_matches_torch_lstm(attention):
    mg.manual_seed(3)
    model = RNNSeq2Seq(RNNSeq2SeqConfig(12, 8, 16, n_layers=2, cell="lstm", attention=attention))
    twin = TorchRNNSeq2Seq(model)
    src, tgt_in, targets = batch()

    (states, (h, c)), _ = model.encode(src)
    logits, loss = model(src, tgt_in, targets)
    loss.backward()
    logits_t, (h_t, c_t) = twin(t(src), t(tgt_in))
    loss_t = torch.nn.functional.cross_entropy(
        logits_t.reshape(-1, 12), t(targets).reshape(-1), ignore_index=-100
    )
    loss_t.backward()

    # the last state is each row's state at its last real token, as packed sequences give
    np.testing.assert_allclose(h.numpy(), h_t.detach().numpy(), atol=ATOL)
    np.testing.assert_allclose(c.numpy(), c_t.detach().numpy(), atol=ATOL)
    np.testing.assert_allclose(logits.numpy(), logits_t.detach().numpy(), atol=ATOL)
    for name, param in model.encoder.named_parameters():
        np.testing.assert_allclose(
            param.grad.numpy(), getattr(twin.encoder, name).grad.numpy(), atol=1e-4
        )
    for name, param in model.decoder.named_parameters():
        np.testing.assert_allclose(
            param.grad.numpy(), getattr(twin.decoder, name).grad.numpy(), atol=1e-4
        )


# -- generate -----------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["seq2seq", "rnn", "gru-attn"])
def test_generate_is_the_argmax_of_forward_and_stops_at_eos(kind):
    if kind == "seq2seq":
        model = seq2seq(False)
    else:
        cell, _, attention = kind.partition("-")
        mg.manual_seed(0)
        model = RNNSeq2Seq(cell=cell, attention="dot" if attention else None,
                           vocab_size=12, block_size=8, d_model=16)  # fmt: skip
    src, _, _ = batch()
    out = model.generate(src, 6).numpy()
    assert out.shape[0] == 3 and out.shape[1] <= 6
    for row in range(3):
        tokens = [BOS]
        for step in range(out.shape[1]):
            if tokens[-1] == EOS and len(tokens) > 1:
                assert out[row, step] == PAD  # padding after the end
                continue
            logits, _ = model(src[row : row + 1], np.array([tokens]))
            tokens.append(int(logits.numpy()[0, -1].argmax()))
            assert out[row, step] == tokens[-1]


def test_trained_seq2seq_reverses_and_generate_stops_early():
    """A tiny Seq2Seq learns to reverse three digits in 150 AdamW steps; decoding then
    stops after EOS, with 4 of the 8 allowed steps."""
    mg.manual_seed(0)
    model = Seq2Seq(Seq2SeqConfig(13, 6, 32, 2, 1, activation="relu"))
    opt = optim.AdamW(model.parameters(), lr=3e-3)
    rng = np.random.default_rng(0)
    for _ in range(150):
        digits = rng.integers(3, 13, size=(64, 3))
        tgt_in = np.concatenate([np.full((64, 1), BOS), digits[:, ::-1]], axis=1)
        targets = np.concatenate([digits[:, ::-1], np.full((64, 1), EOS)], axis=1)
        _, loss = model(digits, tgt_in, targets)
        opt.zero_grad()
        loss.backward()
        opt.step()
    test = rng.integers(3, 13, size=(32, 3))
    out = model.eval().generate(test, 8).numpy()
    assert out.shape == (32, 4)
    assert (out[:, :3] == test[:, ::-1]).mean() > 0.95
    assert (out[:, 3] == EOS).mean() > 0.95


def test_errors_name_the_shapes():
    model = seq2seq(False)
    with pytest.raises(ValueError, match="block_size 8"):
        model(np.ones((1, 9), dtype=np.int64), np.ones((1, 2), dtype=np.int64))
    with pytest.raises(ValueError, match=r"targets of shape \(1, 3\)"):
        model(np.ones((1, 4), dtype=np.int64), np.ones((1, 2), dtype=np.int64), np.ones((1, 3)))
    with pytest.raises(TypeError, match="int64"):
        model(mg.ones(1, 4), np.ones((1, 2), dtype=np.int64))
    with pytest.raises(ValueError, match="cell must be one of"):
        RNNSeq2SeqConfig(12, 8, 16, cell="transformer")
    with pytest.raises(ValueError, match="divisible"):
        Seq2SeqConfig(12, 8, 10, 3, 1)
    with pytest.raises(ValueError, match="eos_id"):
        Seq2SeqConfig(12, 8, 16, 2, 1, eos_id=12)


def test_loss_is_cross_entropy_over_the_unpadded_targets():
    model = seq2seq(False)
    src, tgt_in, targets = batch()
    logits, loss = model(src, tgt_in, targets)
    kept = targets.reshape(-1) != -100
    flat = logits.reshape(-1, 12)
    expected = F.cross_entropy(flat[mg.tensor(np.flatnonzero(kept))], targets.reshape(-1)[kept])
    np.testing.assert_allclose(loss.item(), expected.item(), rtol=1e-6)


def test_draw_graph_marks_the_decoder_reading_the_encoder():
    """The encoder's output enters each decoder block's k_proj and v_proj: 2 edges per block,
    drawn in their own style; a GPT's self-attention has none."""
    from minigrad.viz.graph import collect_graph, cross_attention_edges
    from models import GPT, GPTConfig

    model = seq2seq(True)
    src, tgt_in, targets = batch()
    _, loss = model(src, tgt_in, targets)
    memory, _ = model.encode(src)
    edges = cross_attention_edges(collect_graph(loss))
    assert len(edges) == 2 * 2
    assert all(edge.tensor.shape == memory.shape for edge in edges)
    source = mg.viz.draw_graph(loss, params=model, fold_repeated=False).source
    assert source.count('class="cross-attention"') == 4
    assert "encoder → K, V" in source

    gpt = GPT(GPTConfig(vocab_size=12, block_size=8, d_model=16, n_heads=2, n_layers=2))
    _, gpt_loss = gpt(src, src)
    assert cross_attention_edges(collect_graph(gpt_loss)) == []
    assert "cross-attention" not in mg.viz.draw_graph(gpt_loss, params=gpt).source
