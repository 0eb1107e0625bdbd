"""Make up names one character at a time, with the models of a names lecture: a bigram table,
an MLP over the last characters, and recurrent networks (nn.RNN, nn.GRU, a two-layer nn.LSTM).

    python names.py --model bigram|mlp|rnn|gru|lstm [--steps N] [--init weights.json] [--ordered]

It imports torch alone. ``--ordered`` takes the batches in order instead of at random, and
``--init`` starts from weights written by ``--save-init``, so that two runs can be compared
step by step.
"""

import argparse
import json

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset

NAMES = """emma olivia ava isabella sophia charlotte mia amelia harper evelyn abigail emily
elizabeth mila ella avery sofia camila aria scarlett victoria madison luna grace chloe penelope
layla riley zoey nora lily eleanor hannah lillian addison aubrey ellie stella natalie zoe leah
hazel violet aurora savannah audrey brooklyn bella claire skylar lucy paisley everly anna
caroline nova genesis emilia kennedy samantha maya willow kinsley naomi aaliyah elena sarah
ariana allison gabriella alice madelyn cora ruby eva serenity autumn adeline hailey gianna
valentina isla eliana quinn nevaeh ivy sadie piper lydia alexa josephine emery julia delilah
arianna vivian kaylee sophie brielle madeline liam noah oliver elijah william james benjamin
lucas henry alexander mason michael ethan daniel jacob logan jackson levi sebastian mateo jack
owen theodore aiden samuel joseph john david wyatt matthew luke asher carter julian grayson leo
jayden gabriel isaac lincoln anthony hudson dylan ezra thomas charles christopher jaxon maverick
josiah isaiah andrew elias joshua nathan caleb ryan adrian miles eli nolan christian aaron
cameron ezekiel colton luca landon hunter jonathan santiago axel easton cooper jeremiah angel
roman connor jameson robert greyson jordan ian carson jaxson leonardo nicholas dominic austin
everett brooks xavier kai jose parker adam jace wesley kayden silas""".split()

parser = argparse.ArgumentParser()
parser.add_argument("--model", default="gru", choices=["bigram", "mlp", "rnn", "gru", "lstm"])
parser.add_argument("--steps", type=int, default=60)
parser.add_argument("--seed", type=int, default=42)
parser.add_argument("--init", default=None)
parser.add_argument("--save-init", default=None)
parser.add_argument("--ordered", action="store_true")
args = parser.parse_args()
torch.manual_seed(args.seed)
g = torch.Generator().manual_seed(2147483647)


class NamesDataset(Dataset):
    """Each name as (x, y): x is "." then the name, y the name then "."; padded with -1."""

    def __init__(self, words):
        self.words = words
        self.chars = ["."] + sorted(set("".join(words)))
        self.stoi = {ch: i for i, ch in enumerate(self.chars)}
        self.itos = {i: s for s, i in self.stoi.items()}
        self.max_length = max(len(w) for w in words) + 1

    def __len__(self):
        return len(self.words)

    def get_vocab_size(self):
        return len(self.chars)

    def encode(self, word):
        return torch.tensor([self.stoi[w] for w in word], dtype=torch.long)

    def decode(self, ix):
        return "".join(self.itos[i] for i in ix)

    def __getitem__(self, idx):
        ix = self.encode(self.words[idx])
        x = torch.zeros(self.max_length, dtype=torch.long)
        y = torch.zeros(self.max_length, dtype=torch.long)
        x[1 : 1 + len(ix)] = ix
        y[: len(ix)] = ix
        y[len(ix) + 1 :] = -1
        return x, y


class Bigram(nn.Module):
    """logits = one_hot(previous character) @ W: a table of next-character counts, learned."""

    def __init__(self, vocab_size):
        super().__init__()
        self.logits = nn.Parameter(torch.zeros((vocab_size, vocab_size)))

    def forward(self, idx):
        xenc = F.one_hot(idx, num_classes=self.logits.shape[0]).float()
        return xenc @ self.logits


class MLP(nn.Module):
    """Bengio et al. 2003: embed the last block_size characters, concatenate, one hidden layer."""

    def __init__(self, vocab_size, block_size=3, n_embd=10, n_hidden=64):
        super().__init__()
        self.block_size, self.vocab_size = block_size, vocab_size
        self.wte = nn.Embedding(vocab_size + 1, n_embd)  # the extra token stands before the start
        self.mlp = nn.Sequential(
            nn.Linear(block_size * n_embd, n_hidden),
            nn.Tanh(),
            nn.Linear(n_hidden, vocab_size),
        )

    def forward(self, idx):
        embs = []
        for k in range(self.block_size):
            embs.append(self.wte(idx))
            idx = torch.roll(idx, 1, 1)
            idx[:, 0] = self.vocab_size
        x = torch.cat(embs, -1)
        return self.mlp(x)


class Recurrent(nn.Module):
    def __init__(self, vocab_size, kind, n_embd=16, n_hidden=48):
        super().__init__()
        self.wte = nn.Embedding(vocab_size, n_embd)
        if kind == "rnn":
            self.rnn = nn.RNN(n_embd, n_hidden, batch_first=True)
        elif kind == "gru":
            self.rnn = nn.GRU(n_embd, n_hidden, batch_first=True)
        else:
            self.rnn = nn.LSTM(n_embd, n_hidden, num_layers=2, batch_first=True)
        self.lm_head = nn.Linear(n_hidden, vocab_size)

    def forward(self, idx):
        out, _ = self.rnn(self.wte(idx))
        return self.lm_head(out)


dataset = NamesDataset(NAMES)
vocab_size = dataset.get_vocab_size()
if args.model == "bigram":
    model = Bigram(vocab_size)
elif args.model == "mlp":
    model = MLP(vocab_size)
else:
    model = Recurrent(vocab_size, args.model)
if args.init:
    with open(args.init) as f:
        model.load_state_dict({k: torch.tensor(v) for k, v in json.load(f).items()})
if args.save_init:
    with open(args.save_init, "w") as f:
        json.dump({k: v.tolist() for k, v in model.state_dict().items()}, f)
print(f"model #params: {sum(p.numel() for p in model.parameters())}")

optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01, betas=(0.9, 0.99), eps=1e-8)
batch_size = 32
for step in range(args.steps):
    if args.ordered:
        ix = [(step * batch_size + i) % len(dataset) for i in range(batch_size)]
    else:
        ix = torch.randint(0, len(dataset), (batch_size,), generator=g)
    X, Y = zip(*[dataset[i] for i in ix])
    X, Y = torch.stack(X), torch.stack(Y)
    logits = model(X)
    loss = F.cross_entropy(logits.view(-1, logits.size(-1)), Y.view(-1), ignore_index=-1)
    model.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.6f}")


@torch.inference_mode()
def sample(n=5):
    names = []
    for _ in range(n):
        idx = torch.zeros((1, 1), dtype=torch.long)
        for _ in range(dataset.max_length):
            logits = model(idx)[:, -1, :]
            probs = F.softmax(logits, dim=-1)
            nxt = torch.multinomial(probs, num_samples=1, generator=g)
            if nxt.item() == 0:
                break
            idx = torch.cat((idx, nxt), dim=1)
        names.append(dataset.decode(idx[0, 1:].tolist()))
    return names


print("samples:", " ".join(sample()))
