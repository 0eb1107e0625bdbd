"""An encoder-decoder Transformer (nn.Transformer) learns to copy sequences of symbols, in the
layout of PyTorch's own tutorials: sequence first, (S, N, E), with padding and causal masks.

    python copy_transformer.py [--steps N] [--dropout P] [--init weights.json] [--ordered]

It imports torch alone. ``--ordered`` makes the batches from a fixed pattern instead of at
random, and ``--init`` starts from weights written by ``--save-init``, so that two runs can be
compared step by step.
"""

import argparse
import json
import math

import torch
from torch import Tensor, nn

PAD, BOS, EOS = 0, 1, 2
N_SYMBOLS = 8  # symbols 3 .. 10
VOCAB = 3 + N_SYMBOLS

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=60)
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--dropout", type=float, default=0.1)
parser.add_argument("--init", default=None)
parser.add_argument("--save-init", default=None)
parser.add_argument("--ordered", action="store_true")
args = parser.parse_args()
torch.manual_seed(args.seed)


class PositionalEncoding(nn.Module):
    def __init__(self, d_model: int, dropout: float = 0.1, max_len: int = 64):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        position = torch.arange(max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(max_len, 1, d_model)
        pe[:, 0, 0::2] = torch.sin(position * div_term)
        pe[:, 0, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe)

    def forward(self, x: Tensor) -> Tensor:
        """x: (seq_len, batch, d_model)"""
        x = x + self.pe[: x.size(0)]
        return self.dropout(x)


class Seq2SeqTransformer(nn.Module):
    def __init__(self, d_model=32, nhead=4, layers=2, dim_feedforward=64, dropout=0.1):
        super().__init__()
        self.d_model = d_model
        self.src_emb = nn.Embedding(VOCAB, d_model)
        self.tgt_emb = nn.Embedding(VOCAB, d_model)
        self.pos = PositionalEncoding(d_model, dropout)
        self.transformer = nn.Transformer(
            d_model=d_model,
            nhead=nhead,
            num_encoder_layers=layers,
            num_decoder_layers=layers,
            dim_feedforward=dim_feedforward,
            dropout=dropout,
        )
        self.generator = nn.Linear(d_model, VOCAB)

    def embed(self, emb, tokens):
        return self.pos(emb(tokens) * math.sqrt(self.d_model))

    def forward(self, src, tgt, src_padding_mask, tgt_padding_mask):
        tgt_mask = nn.Transformer.generate_square_subsequent_mask(tgt.size(0))
        out = self.transformer(
            self.embed(self.src_emb, src),
            self.embed(self.tgt_emb, tgt),
            tgt_mask=tgt_mask,
            src_key_padding_mask=src_padding_mask,
            tgt_key_padding_mask=tgt_padding_mask,
            memory_key_padding_mask=src_padding_mask,
        )
        return self.generator(out)

    def encode(self, src, src_padding_mask):
        return self.transformer.encoder(self.embed(self.src_emb, src), src_key_padding_mask=src_padding_mask)

    def decode(self, tgt, memory, memory_padding_mask):
        tgt_mask = nn.Transformer.generate_square_subsequent_mask(tgt.size(0))
        return self.transformer.decoder(
            self.embed(self.tgt_emb, tgt), memory, tgt_mask=tgt_mask, memory_key_padding_mask=memory_padding_mask
        )


def make_batch(batch_size, step, max_len=7):
    """Sequences of 3..max_len symbols, padded: src = x EOS PAD..., tgt = BOS x EOS PAD..."""
    if args.ordered:
        lengths = [3 + (step + i) % (max_len - 2) for i in range(batch_size)]
        rows = [[3 + (step * 5 + i * 3 + j * 7) % N_SYMBOLS for j in range(n)] for i, n in enumerate(lengths)]
    else:
        lengths = torch.randint(3, max_len + 1, (batch_size,)).tolist()
        rows = [torch.randint(3, VOCAB, (n,)).tolist() for n in lengths]
    src = torch.full((max_len + 1, batch_size), PAD, dtype=torch.long)
    tgt = torch.full((max_len + 2, batch_size), PAD, dtype=torch.long)
    for b, row in enumerate(rows):
        src[: len(row), b] = torch.tensor(row)
        src[len(row), b] = EOS
        tgt[0, b] = BOS
        tgt[1 : len(row) + 1, b] = torch.tensor(row)
        tgt[len(row) + 1, b] = EOS
    return src, tgt


@torch.no_grad()
def greedy_decode(model, src, max_len):
    src_padding_mask = (src == PAD).transpose(0, 1)
    memory = model.encode(src, src_padding_mask)
    ys = torch.full((1, src.size(1)), BOS, dtype=torch.long)
    for _ in range(max_len):
        out = model.decode(ys, memory, src_padding_mask)
        prob = model.generator(out[-1])
        _, next_word = torch.max(prob, dim=1)
        ys = torch.cat([ys, next_word.unsqueeze(0)], dim=0)
    return ys


model = Seq2SeqTransformer(dropout=args.dropout)
for p in model.parameters():
    if p.dim() > 1:
        nn.init.xavier_uniform_(p)
if args.init:
    with open(args.init) as f:
        model.load_state_dict({k: torch.tensor(v) for k, v in json.load(f).items()})
if args.save_init:
    with open(args.save_init, "w") as f:
        json.dump({k: v.tolist() for k, v in model.state_dict().items()}, f)

loss_fn = nn.CrossEntropyLoss(ignore_index=PAD)
optimizer = torch.optim.Adam(model.parameters(), lr=3e-3, betas=(0.9, 0.98), eps=1e-9)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=50, gamma=0.5)
model.train()
for step in range(args.steps):
    src, tgt = make_batch(32, step)
    tgt_input, tgt_out = tgt[:-1, :], tgt[1:, :]
    src_padding_mask = (src == PAD).transpose(0, 1)
    tgt_padding_mask = (tgt_input == PAD).transpose(0, 1)
    logits = model(src, tgt_input, src_padding_mask, tgt_padding_mask)
    optimizer.zero_grad()
    loss = loss_fn(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1))
    loss.backward()
    optimizer.step()
    scheduler.step()
    print(f"step {step} loss {loss.item():.6f}")

model.eval()
src, tgt = make_batch(4, 0)
out = greedy_decode(model, src, tgt.size(0) - 1)
correct = (out[1:] == tgt[1:]) | (tgt[1:] == PAD)
print(f"copied exactly: {correct.all(dim=0).float().mean().item():.2f}")
