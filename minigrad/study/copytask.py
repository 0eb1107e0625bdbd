"""The copy task and a short training loop, for the studies that train (``ln``, ``scale``).

The copy task is the smallest sequence task that needs attention: the model sees ``length``
random symbols and a separator, and must then repeat the symbols. Before the separator
nothing can be predicted, so the loss counts only the second half.
"""

from __future__ import annotations

import numpy as np

import minigrad as mg
import minigrad.nn.functional as F
from minigrad import optim

IGNORE = -100  # cross_entropy's ignore_index


def copy_batch(rng: np.random.Generator, batch: int, length: int, vocab: int):
    """(x, y) int64 arrays of shape (batch, 2 * length + 1).

    The sequence is ``s_1 .. s_L, 0, s_1 .. s_L, 0`` with symbols s_i in 1..vocab-1 and 0 the
    separator; x is all but its last token, y the next token at each position, with
    IGNORE over the first half.
    """
    symbols = rng.integers(1, vocab, size=(batch, length))
    separator = np.zeros((batch, 1), dtype=np.int64)
    sequence = np.concatenate([symbols, separator, symbols, separator], axis=1)
    x, y = sequence[:, :-1], sequence[:, 1:].copy()
    y[:, :length] = IGNORE
    return x, y


def train_copy(
    model,
    steps: int,
    lr: float = 1e-3,
    warmup: int = 0,
    seed: int = 0,
    batch: int = 16,
    length: int = 8,
    vocab: int = 10,
) -> list[float]:
    """Train ``model`` (idx (B, T) -> logits (B, T, vocab)) with Adam on fresh copy batches;
    the learning rate rises linearly over ``warmup`` steps (none when 0). Returns the loss of
    every step; a non-finite loss stops the run."""
    rng = np.random.default_rng(seed)
    optimizer = optim.Adam(model.parameters(), lr=lr)
    warmup_factor = (lambda step: min(1.0, (step + 1) / warmup)) if warmup else (lambda _: 1.0)
    schedule = optim.lr_scheduler.LambdaLR(optimizer, warmup_factor)
    losses = []
    for _ in range(steps):
        x, y = copy_batch(rng, batch, length, vocab)
        logits = model(mg.tensor(x))
        loss = F.cross_entropy(logits.reshape(-1, vocab), mg.tensor(y.reshape(-1)))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
        losses.append(loss.item())
        if not np.isfinite(losses[-1]):
            break
    return losses


def final_loss(losses: list[float], last: int = 20) -> float:
    """The mean loss over the last ``last`` steps (a single step is too noisy)."""
    return float(np.mean(losses[-last:]))
