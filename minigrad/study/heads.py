"""Study ``heads``: one head against several, on a task that needs two relations at once.

Each position t must output y_t = f(x_{t-1}, x_{t-3}): a fixed random lookup table f of the
token one back *and* the token three back. Attention must fetch both. One head has one row
of weights per position: it can put weight on t-1 and t-3 together, but then its output is
the weighted average a v_{t-1} + (1 - a) v_{t-3} of two value vectors, and the FFN has to
tell the two tokens apart inside that one mixture. Two heads can each look at one position
and hand the FFN both tokens side by side (Concat(head_1, head_2) W_O).

The models are one causal transformer block (pre-LN, learned positions) at the same d_model,
with 1, 2 or 4 heads of size d_model / H, trained with Adam on fresh batches from fixed
seeds. The study reports the accuracy on a fixed held-out batch and the first step at which
it reaches 99%.
"""

from __future__ import annotations

import numpy as np

import minigrad as mg
import minigrad.nn.functional as F
from minigrad import nn, optim
from minigrad.study.common import Check, StudyResult, above, timed
from minigrad.study.copytask import IGNORE

BACK = (1, 3)  # y_t = f(x_{t-1}, x_{t-3})


def lookup_table(vocab: int, seed: int = 0) -> np.ndarray:
    """f: a fixed random table (vocab, vocab) -> 0 .. vocab-1, f[a, b] = y."""
    return np.random.default_rng(seed).integers(0, vocab, size=(vocab, vocab))


def two_back_batch(rng: np.random.Generator, table: np.ndarray, batch: int, length: int):
    """(x, y) int64 arrays (batch, length): x random tokens, y_t = f(x_{t-1}, x_{t-3}),
    IGNORE where t - 3 < 0."""
    near, far = BACK
    x = rng.integers(0, table.shape[0], size=(batch, length))
    y = np.full((batch, length), IGNORE, dtype=np.int64)
    y[:, far:] = table[x[:, far - near : length - near], x[:, : length - far]]
    return x, y


def single_input_accuracy(table: np.ndarray) -> float:
    """The best accuracy of a rule that sees only one of the two tokens (the larger of the
    two): how much f needs both."""
    vocab = table.shape[0]

    def best(counts_by_token):
        return sum(np.bincount(row, minlength=vocab).max() for row in counts_by_token)

    return max(best(table), best(table.T)) / table.size


class TwoRelationModel(nn.Module):
    """idx (B, T) -> logits (B, T, vocab): token and learned position embeddings, one causal
    pre-LN transformer block with ``n_heads`` heads, a LayerNorm and a linear readout."""

    def __init__(self, vocab: int, d_model: int, n_heads: int, length: int):
        super().__init__()
        self.tokens = nn.Embedding(vocab, d_model)
        self.positions = nn.Embedding(length, d_model)
        self.block = nn.TransformerBlock(d_model, n_heads, causal=True, norm_first=True)
        self.ln = nn.LayerNorm(d_model)
        self.readout = nn.Linear(d_model, vocab)

    def forward(self, idx):
        x = self.tokens(idx) + self.positions(mg.arange(idx.shape[1]))
        return self.readout(self.ln(self.block(x)))


def accuracy(model, x: np.ndarray, y: np.ndarray) -> float:
    """The share of counted positions (y != IGNORE) where the argmax is y."""
    with mg.no_grad():
        predicted = model(mg.tensor(x)).array.argmax(axis=-1)
    counted = y != IGNORE
    return float((predicted[counted] == y[counted]).mean())


def head_weights(model, x: np.ndarray) -> list[tuple[float, float]]:
    """For each head, the mean weight a position t >= 3 gives t-1 and t-3."""
    with mg.no_grad():
        model(mg.tensor(x))
    weights = model.block.attn.attn_weights.array  # (B, H, T, T)
    t = np.arange(BACK[1], x.shape[1])
    return [
        (float(head[:, t, t - BACK[0]].mean()), float(head[:, t, t - BACK[1]].mean()))
        for head in np.swapaxes(weights, 0, 1)
    ]


def train_heads(
    n_heads: int,
    seed: int,
    steps: int,
    vocab: int,
    d_model: int,
    length: int,
    batch: int,
    lr: float,
    every: int,
) -> tuple[list[float], list[float], list[tuple[float, float]]]:
    """Train one model; return the loss of every step, the held-out accuracy every
    ``every`` steps (after steps every, 2 every, ...), and each trained head's weights on
    t-1 and t-3."""
    mg.manual_seed(seed)
    table = lookup_table(vocab)
    model = TwoRelationModel(vocab, d_model, n_heads, length)
    optimizer = optim.Adam(model.parameters(), lr=lr)
    rng = np.random.default_rng(seed)
    held_out = two_back_batch(np.random.default_rng(10_000 + seed), table, 256, length)
    losses, accuracies = [], []
    for step in range(1, steps + 1):
        x, y = two_back_batch(rng, table, batch, length)
        logits = model(mg.tensor(x))
        loss = F.cross_entropy(logits.reshape(-1, vocab), mg.tensor(y.reshape(-1)))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if step % every == 0:
            accuracies.append(accuracy(model, *held_out))
    return losses, accuracies, head_weights(model, held_out[0])


def steps_to(accuracies: list[float], every: int, target: float = 0.99) -> int | None:
    """The first evaluated step whose accuracy reaches ``target`` (None if never)."""
    return next(((i + 1) * every for i, a in enumerate(accuracies) if a >= target), None)


def heads_checks(rows: list[dict], steps: int) -> list[Check]:
    """The criterion on the table rows (pure: testable on made-up rows): more heads learn
    the task, or learn it faster, at equal d_model."""
    by_heads = {row["heads"]: row for row in rows}
    fewest, most = min(by_heads), max(by_heads)
    one, many = by_heads[fewest], by_heads[most]

    def cost(row):  # mean steps to 99%; infinite where some run never got there
        return row["mean steps to 99%"] if row["runs at 99%"] == row["runs"] else float("inf")

    faster = many["runs at 99%"] > one["runs at 99%"] or cost(many) < 0.8 * cost(one)
    return [
        above(
            f"{most} heads: final accuracy", many["final accuracy"], 0.99, "learns both relations"
        ),
        Check(
            f"{most} heads learn it in more runs, or in under 0.8x the steps, of {fewest} head",
            f"{most} heads: {many['runs at 99%']}/{many['runs']} runs, "
            f"{_steps(many)}; {fewest} head: {one['runs at 99%']}/{one['runs']} runs, "
            f"{_steps(one)}",
            "more heads learn it, or learn it faster",
            faster,
        ),
        Check(
            f"{fewest} head: final accuracy below {most} heads'",
            f"{one['final accuracy']:.3f} vs {many['final accuracy']:.3f}",
            f"lower after {steps} steps (averaging mixes the two tokens)",
            one["final accuracy"] < many["final accuracy"],
            required=False,
        ),
    ]


def single_head_note(rows: list[dict]) -> list[str]:
    """What the table says about one head, in words, when it learns the task as well."""
    by_heads = {row["heads"]: row for row in rows}
    one, many = by_heads[min(by_heads)], by_heads[max(by_heads)]
    if one["runs at 99%"] < one["runs"] or many["runs at 99%"] < many["runs"]:
        return []
    ratio = one["mean steps to 99%"] / many["mean steps to 99%"]
    return [
        f"At this scale one head learns the task too, {ratio:.2f}x as many steps as "
        f"{max(by_heads)} heads: it puts unequal weights on t-1 and t-3, and the FFN can "
        "still tell an unequal mixture of two tokens apart. Averaging slows one head down "
        "here; it does not stop it."
    ]


def _steps(row: dict) -> str:
    steps = row["mean steps to 99%"]
    return "never at 99%" if steps == "-" else f"{steps:.0f} steps to 99% (mean of those)"


@timed
def heads(
    seeds=(0, 1, 2),
    head_counts=(1, 2, 4),
    steps: int = 600,
    vocab: int = 8,
    d_model: int = 32,
    length: int = 16,
    batch: int = 32,
    lr: float = 3e-3,
    every: int = 20,
) -> StudyResult:
    """Train 1, 2 and 4 heads at equal d_model on y_t = f(x_{t-1}, x_{t-3}); report the
    held-out accuracy and the steps to 99% over seeds."""
    rows, curves = [], {}
    for n_heads in head_counts:
        finals, reached = [], []
        for seed in seeds:
            losses, accuracies, weights = train_heads(
                n_heads, seed, steps, vocab, d_model, length, batch, lr, every
            )
            if seed == seeds[0]:
                first_weights = " ".join(f"{near:.2f}/{far:.2f}" for near, far in weights)
            label = f"{n_heads} head{'s' if n_heads > 1 else ''}, seed {seed}"
            curves[f"{label} accuracy"] = accuracies
            curves[f"{label} loss"] = losses
            finals.append(accuracies[-1] if accuracies else float("nan"))
            reached.append(steps_to(accuracies, every))
        hits = [s for s in reached if s is not None]
        rows.append(
            {
                "heads": n_heads,
                "d_k": d_model // n_heads,
                "final accuracy": float(np.mean(finals)),
                "worst seed": float(np.min(finals)),
                "runs": len(seeds),
                "runs at 99%": len(hits),
                "mean steps to 99%": float(np.mean(hits)) if hits else "-",
                "steps to 99% per seed": " ".join("-" if s is None else str(s) for s in reached),
                "A on t-1/t-3 per head": first_weights,
            }
        )

    return StudyResult(
        name="heads",
        title="one head against several at equal d_model",
        claim=(
            "With a single attention head, averaging inhibits this: one head mixes the "
            "relations it attends to, so H heads of size d/H learn two relations at once "
            "better than one head of size d."
        ),
        criterion=(
            f"On y_t = f(x_{{t-1}}, x_{{t-3}}) after {steps} steps: {max(head_counts)} heads "
            f"reach over 99% held-out accuracy (mean over seeds), and reach 99% in more runs "
            f"than {min(head_counts)} head, or in under 0.8x its mean steps."
        ),
        columns=[
            "heads",
            "d_k",
            "final accuracy",
            "worst seed",
            "runs at 99%",
            "mean steps to 99%",
            "steps to 99% per seed",
            "A on t-1/t-3 per head",
        ],
        rows=rows,
        checks=heads_checks(rows, steps),
        settings={
            "seeds": list(seeds),
            "steps": steps,
            "vocab": vocab,
            "d_model": d_model,
            "T": length,
            "batch": batch,
            "lr": lr,
            "eval every": every,
            "model": "1 causal pre-LN block, learned positions",
        },
        notes=[
            f"f is a random table on {vocab} x {vocab} pairs; knowing only one of the two "
            f"tokens gets at most {single_input_accuracy(lookup_table(vocab)):.0%} right.",
            f"Accuracy is measured every {every} steps on 256 held-out sequences (positions "
            "t >= 3); 'steps to 99%' is the first such step at 99% or more.",
            f"'A on t-1/t-3 per head' is, for seed {seeds[0]}'s trained model, the mean weight "
            "each head gives the two positions the task needs.",
            *single_head_note(rows),
        ],
        curves=curves,
    )
