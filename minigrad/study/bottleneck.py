"""Study ``bottleneck``: an encoder-decoder that passes on only its last state loses the source.

An LSTM encoder reads the source s_1 .. s_S and ends in one state (h_S, c_S); without
attention that pair of vectors is all the decoder ever sees of the source. Attention
(Bahdanau et al. 2015; here Luong et al.'s dot form) lets every decoder step read every
encoder state,

    a_tj = softmax_j(d_t . e_j),   context_t = sum_j a_tj e_j,
    logits_t = W_out tanh(W_c [d_t; context_t]),

and the Transformer keeps only attention: self-attention in the encoder and the decoder, and
cross-attention from the decoder to the encoder's output.

Three small encoder-decoders of equal width, trained with the same budget (steps, batch,
Adam learning rate) on the same data:

    LSTM, last state    the decoder LSTM starts from the encoder's final (h, c), nothing else
    LSTM + attention    the same, and dot attention over the encoder states at every step
    Transformer         one encoder layer and one decoder layer (post-LN, nn.Transformer*)

The tasks: ``copy`` (repeat S random symbols: every output depends on one input, the first
one furthest back), ``reverse`` (the same, backwards), and any ``extra_tasks`` given as
name -> ``(count, length, seed) -> [(source, target)]`` sentence pairs (``minigrad study
bottleneck`` passes the ``translate`` task of models/data/translate.py), tokenized by words.
Accuracy is measured with teacher forcing on held-out sequences: the decoder reads the true
previous target word and predicts the next one. "exact" is the share of sequences with every
word right.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

import minigrad as mg
import minigrad.nn.functional as F
from minigrad import nn, optim
from minigrad.study.common import Check, StudyResult, timed

PAD, BOS = 0, 1  # token ids shared by every vocabulary
IGNORE = -100  # cross_entropy's ignore_index
MODELS = ("LSTM, last state", "LSTM + attention", "Transformer")

Pairs = list[tuple[list[int], list[int]]]  # (source ids, target ids)


# -- the three encoder-decoders ------------------------------------------------------------------


class LSTMEncoderDecoder(nn.Module):
    """An LSTM encoder and an LSTM decoder that starts from the encoder's final (h, c);
    with ``attention`` each decoder state d_t also reads the encoder states by dot attention.

    forward(source (B, S), target_in (B, T), source_pad (B, S) bool) -> logits (B, T, V).
    The source is padded on the left, so the encoder's last step is a real word.
    """

    def __init__(self, source_vocab: int, target_vocab: int, width: int, attention: bool):
        super().__init__()
        self.attention = attention
        self.source_embedding = nn.Embedding(source_vocab, width)
        self.target_embedding = nn.Embedding(target_vocab, width)
        self.encoder = nn.LSTM(width, width, batch_first=True)
        self.decoder = nn.LSTM(width, width, batch_first=True)
        if attention:
            self.combine = nn.Linear(2 * width, width)  # W_c
        self.out = nn.Linear(width, target_vocab)  # W_out

    def forward(self, source, target_in, source_pad):
        encoded, last_state = self.encoder(self.source_embedding(source))  # e_j: (B, S, W)
        decoded, _ = self.decoder(self.target_embedding(target_in), last_state)  # d_t
        if not self.attention:
            return self.out(decoded)
        # a_tj = softmax_j(d_t . e_j) over the real source words, context_t = sum_j a_tj e_j
        scores = decoded @ encoded.transpose(1, 2)  # (B, T, S)
        scores = scores.masked_fill(mg.tensor(source_pad[:, None, :]), float("-inf"))
        context = F.softmax(scores, dim=-1) @ encoded
        # logits_t = W_out tanh(W_c [d_t; context_t])
        return self.out(mg.tanh(self.combine(mg.cat([decoded, context], dim=-1))))


class TransformerEncoderDecoder(nn.Module):
    """One post-LN encoder layer and one decoder layer (nn.TransformerEncoderLayer and
    nn.TransformerDecoderLayer), sinusoidal positions, FFN of width 2 * width, no dropout.
    Same forward as ``LSTMEncoderDecoder``."""

    def __init__(
        self, source_vocab: int, target_vocab: int, width: int, n_heads: int, max_len: int
    ):
        super().__init__()
        self.source_embedding = nn.Embedding(source_vocab, width)
        self.target_embedding = nn.Embedding(target_vocab, width)
        self.position = nn.PositionalEncoding(max_len, width)
        layer = dict(dim_feedforward=2 * width, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoderLayer(width, n_heads, **layer)
        self.decoder = nn.TransformerDecoderLayer(width, n_heads, **layer)
        self.out = nn.Linear(width, target_vocab)

    def forward(self, source, target_in, source_pad):
        pad = mg.tensor(source_pad)
        memory = self.encoder(
            self.position(self.source_embedding(source)), src_key_padding_mask=pad
        )
        causal = nn.Transformer.generate_square_subsequent_mask(target_in.shape[1])
        decoded = self.decoder(
            self.position(self.target_embedding(target_in)),
            memory,
            tgt_mask=causal,
            memory_key_padding_mask=pad,
            tgt_is_causal=True,
        )
        return self.out(decoded)


def build(model: str, source_vocab: int, target_vocab: int, width: int, n_heads: int, max_len):
    if model == "Transformer":
        return TransformerEncoderDecoder(source_vocab, target_vocab, width, n_heads, max_len)
    return LSTMEncoderDecoder(source_vocab, target_vocab, width, attention="attention" in model)


# -- data: id sequences, batches -----------------------------------------------------------------


def symbol_pairs(task: str, count: int, length: int, vocab: int, rng) -> Pairs:
    """``count`` random sequences of ``length`` symbols (ids 2 .. vocab-1) and their copy
    or reversal."""
    symbols = rng.integers(2, vocab, size=(count, length))
    targets = symbols if task == "copy" else symbols[:, ::-1]
    return [(list(s), list(t)) for s, t in zip(symbols, targets)]


class Words:
    """A word vocabulary: PAD 0 and BOS 1, then every word in order of first sight."""

    def __init__(self, sentences: Sequence[str]):
        self.ids = {"<pad>": PAD, "<bos>": BOS}
        for sentence in sentences:
            for word in sentence.split():
                self.ids.setdefault(word, len(self.ids))

    def encode(self, sentence: str) -> list[int]:
        return [self.ids[word] for word in sentence.split()]

    def __len__(self) -> int:
        return len(self.ids)


def sentence_data(make: Callable, length: int, train: int, test: int, seed: int):
    """Training and held-out pairs from ``make(count, length, seed)``, as word ids, and the
    source and target vocabulary sizes."""
    train_text, test_text = make(train, length, seed), make(test, length, seed + 1)
    source = Words([s for s, _ in train_text + test_text])
    target = Words([t for _, t in train_text + test_text])

    def encode(pairs):
        return [(source.encode(s), target.encode(t)) for s, t in pairs]

    return encode(train_text), encode(test_text), len(source), len(target)


def batch_arrays(pairs: Pairs):
    """(source, target_in, target_out, source_pad) int64/bool arrays for a list of pairs:
    sources padded on the left, targets on the right; target_in is BOS then the target
    without its last word, target_out the target with IGNORE after its end."""
    source_len = max(len(s) for s, _ in pairs)
    target_len = max(len(t) for _, t in pairs)
    source = np.full((len(pairs), source_len), PAD, dtype=np.int64)
    target_in = np.full((len(pairs), target_len), PAD, dtype=np.int64)
    target_out = np.full((len(pairs), target_len), IGNORE, dtype=np.int64)
    for row, (s, t) in enumerate(pairs):
        source[row, source_len - len(s) :] = s
        target_in[row, : len(t)] = [BOS, *t[:-1]]
        target_out[row, : len(t)] = t
    return source, target_in, target_out, source == PAD


# -- training and measuring ----------------------------------------------------------------------


def train_and_measure(model, train: Pairs | Callable, test: Pairs, settings: dict, seed: int):
    """Train ``model`` with Adam for ``settings['steps']`` steps on batches drawn from
    ``train`` (pairs, or a function rng -> a fresh batch of pairs); return (token accuracy,
    exact match, final loss) on ``test`` with teacher forcing."""
    rng = np.random.default_rng(seed)
    optimizer = optim.Adam(model.parameters(), lr=settings["lr"])
    vocab = model.out.out_features
    losses = []
    for _ in range(settings["steps"]):
        if callable(train):
            batch = train(rng)
        else:
            batch = [train[i] for i in rng.integers(0, len(train), settings["batch"])]
        source, target_in, target_out, pad = batch_arrays(batch)
        logits = model(mg.tensor(source), mg.tensor(target_in), pad)
        loss = F.cross_entropy(logits.reshape(-1, vocab), mg.tensor(target_out.reshape(-1)))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    source, target_in, target_out, pad = batch_arrays(test)
    with mg.no_grad():
        predicted = model(mg.tensor(source), mg.tensor(target_in), pad).array.argmax(-1)
    counted = target_out != IGNORE
    right = (predicted == target_out) & counted
    token = right.sum() / counted.sum()
    exact = (right.sum(axis=1) == counted.sum(axis=1)).mean()
    return float(token), float(exact), float(np.mean(losses[-20:]))


def parameter_count(model) -> int:
    return sum(p.numel() for p in model.parameters())


def run_task(task: str, lengths, seed: int, settings: dict, make=None) -> list[dict]:
    """One row per (length, model): accuracy after the shared training budget."""
    rows = []
    for length in lengths:
        rng = np.random.default_rng(1000 * seed + length)
        if make is None:
            vocab = settings["symbols"] + 2
            test = symbol_pairs(task, settings["test"], length, vocab, rng)

            def train(rng, length=length, vocab=vocab):
                return symbol_pairs(task, settings["batch"], length, vocab, rng)

            source_vocab = target_vocab = vocab
        else:
            train, test, source_vocab, target_vocab = sentence_data(
                make, length, settings["sentences"], settings["test"], seed
            )
        longest = max(max(len(s), len(t)) for s, t in test) + 1
        for model_name in MODELS:
            mg.manual_seed(seed)
            model = build(
                model_name,
                source_vocab,
                target_vocab,
                settings["width"],
                settings["n_heads"],
                max(2 * longest, 64),
            )
            token, exact, loss = train_and_measure(model, train, test, settings, seed)
            rows.append(
                {
                    "task": task,
                    "length": length,
                    "model": model_name,
                    "seed": seed,
                    "token acc": token,
                    "exact": exact,
                    "final loss": loss,
                    "params": parameter_count(model),
                }
            )
    return rows


def averaged(rows: list[dict]) -> list[dict]:
    """The rows averaged over seeds: one per (task, length, model), in the order run."""
    runs = {}
    for row in rows:
        runs.setdefault((row["task"], row["length"], row["model"]), []).append(row)
    return [
        {
            "task": task,
            "length": length,
            "model": model,
            **{
                k: float(np.mean([r[k] for r in group]))
                for k in ("token acc", "exact", "final loss")
            },
            "params": group[0]["params"],
        }
        for (task, length, model), group in runs.items()
    ]


def accuracy(rows: list[dict], task: str, model: str) -> dict[int, float]:
    """length -> token accuracy of ``model`` on ``task``."""
    return {r["length"]: r["token acc"] for r in rows if r["task"] == task and r["model"] == model}


def bottleneck_checks(rows: list[dict], tasks: Sequence[str], margin: float = 0.1) -> list[Check]:
    """The criterion on the (averaged) rows, per task (pure: testable on made-up rows).

    From the shortest to the longest length, the last-state LSTM's token accuracy falls by
    more than the attention LSTM's, by at least ``margin``; at the longest length it is below
    both the attention LSTM and the Transformer; the Transformer holds up there (it keeps at
    least 0.9 of its accuracy at the shortest length).
    """
    last, attention, transformer = MODELS
    checks = []
    for task in tasks:
        curves = {model: accuracy(rows, task, model) for model in MODELS}
        lengths = sorted(curves[last])
        short, long = lengths[0], lengths[-1]
        drop = {m: curves[m][short] - curves[m][long] for m in MODELS}
        checks += [
            Check(
                f"{task}: accuracy drop {short} -> {long}, last state vs attention",
                f"{drop[last]:.3f} vs {drop[attention]:.3f}",
                f"last state drops more, by > {margin:g}",
                drop[last] > drop[attention] + margin,
            ),
            Check(
                f"{task}: at length {long}, last state < attention and < Transformer",
                f"{curves[last][long]:.3f} < {curves[attention][long]:.3f}, "
                f"{curves[transformer][long]:.3f}",
                "the bottleneck costs accuracy",
                curves[last][long] < min(curves[attention][long], curves[transformer][long]),
            ),
            Check(
                f"{task}: Transformer accuracy at {long} / at {short}",
                curves[transformer][long] / max(curves[transformer][short], 1e-12),
                "> 0.9 (holds up)",
                curves[transformer][long] > 0.9 * curves[transformer][short],
            ),
        ]
    return checks


@timed
def bottleneck(
    seeds=(0,),
    task: str = "copy",
    lengths=(4, 8, 16, 32),
    extra_tasks: Mapping[str, Callable] | None = None,
    extra_lengths=(2, 4, 6, 8),
    width: int = 32,
    n_heads: int = 2,
    steps: int = 200,
    batch: int = 32,
    lr: float = 1e-2,
    symbols: int = 8,
    sentences: int = 2000,
    test: int = 200,
) -> StudyResult:
    """Token accuracy against length of the last-state LSTM, the attention LSTM and the
    Transformer encoder-decoder on ``task`` (copy or reverse) and on each of ``extra_tasks``
    (at ``extra_lengths``), after the same training budget."""
    if task not in ("copy", "reverse"):
        raise ValueError(f"bottleneck: task must be 'copy' or 'reverse', got {task!r}")
    extra_tasks = dict(extra_tasks or {})
    settings = dict(
        width=width,
        n_heads=n_heads,
        steps=steps,
        batch=batch,
        lr=lr,
        symbols=symbols,
        sentences=sentences,
        test=test,
    )
    measured = []
    for seed in seeds:
        measured += run_task(task, lengths, seed, settings)
        for name, make in extra_tasks.items():
            measured += run_task(name, extra_lengths, seed, settings, make)
    rows = averaged(measured)
    tasks = [task, *extra_tasks]
    notes = [
        "Accuracy is teacher-forced on held-out sequences: each target word is predicted "
        "from the true previous ones and the source. For copy and reverse the symbols are "
        "drawn independently, so the previous targets say nothing about the next one.",
        "Parameters at width "
        + f"{width}: "
        + ", ".join(
            f"{r['model']} {r['params']}"
            for r in rows
            if r["length"] == lengths[0] and r["task"] == task
        ),
    ]
    if extra_tasks:
        notes.append(
            f"{', '.join(extra_tasks)}: {sentences} training sentences per length, "
            f"{test} held-out ones from another seed, words as tokens; length is the task's "
            "own knob (for translate, the number of content words)."
        )
    return StudyResult(
        name="bottleneck",
        title="the last-state bottleneck: LSTM, LSTM + attention, Transformer",
        claim=(
            "An LSTM encoder-decoder passes on only its last hidden state, so information "
            "about the source is lost as it grows longer; attention over the encoder states "
            "fixes that, and the Transformer, which keeps only attention, holds up."
        ),
        criterion=(
            "For every task, from the shortest to the longest length the last-state LSTM's "
            "token accuracy falls by more than the attention LSTM's (by > 0.1); at the longest "
            "length it is below both others; the Transformer keeps > 0.9 of its accuracy."
        ),
        columns=["task", "length", "model", "token acc", "exact", "final loss"],
        rows=rows,
        checks=bottleneck_checks(rows, tasks),
        settings={
            "seeds": list(seeds),
            "task": task,
            "lengths": list(lengths),
            "extra tasks": list(extra_tasks),
            "extra lengths": list(extra_lengths),
            "width": width,
            "heads": n_heads,
            "steps": steps,
            "batch": batch,
            "Adam lr": lr,
            "symbols": symbols,
            "held out": test,
        },
        notes=notes,
    )
