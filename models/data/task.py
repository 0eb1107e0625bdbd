"""What every built-in task offers the training loop, and how a model completes prompts.

A task is a character vocabulary, a batch sampler with a fixed train/val split, and an
evaluation on completions the model generates itself. Batches are NumPy int64 arrays:

    x: (B, T) token ids           y: (B, T) the next token at each position,
                                     or IGNORE (-100) where no loss is taken
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

import minigrad as mg
from models.data.vocab import CharVocab

IGNORE = -100  # F.cross_entropy's default ignore_index: these targets count for nothing
SPLITS = ("train", "val")


class Task:
    """Base class of the built-in tasks."""

    name: str = ""
    vocab: CharVocab
    default_block_size: int = 32
    # how the samples printed after training are drawn (temperature 0 is greedy)
    sample_tokens: int = 40
    sample_temperature: float = 0.8
    sample_stop: str | None = "\n"

    def min_block_size(self) -> int:
        """The smallest context in which one training example fits."""
        return 1

    def get_batch(
        self, split: str, batch_size: int, block_size: int, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray]:
        """A batch (x, y) of shape (batch_size, block_size) from ``split`` ("train" or "val")."""
        raise NotImplementedError

    def evaluate(self, model, device: str = "cpu") -> dict[str, float]:
        """Task metrics (accuracies in [0, 1]) from completions that ``model`` generates."""
        return {}

    def sample_prompts(self) -> list[str]:
        """A few prompts whose completions show what the model learned."""
        return ["\n"]


def check_split(split: str) -> None:
    if split not in SPLITS:
        raise ValueError(f"get_batch: split must be 'train' or 'val', got {split!r}")


def complete(
    model,
    vocab: CharVocab,
    prompts: list[str],
    max_new_tokens: int,
    device: str = "cpu",
    temperature: float = 1.0,
    top_k: int | None = None,
    stop: str | None = "\n",
) -> list[str]:
    """The text ``model`` generates after each prompt, cut at the first ``stop`` character.

    Prompts of the same length go through ``model.generate`` together as one batch;
    ``top_k=1`` is greedy decoding.
    """
    by_length: dict[int, list[int]] = defaultdict(list)
    for i, prompt in enumerate(prompts):
        by_length[len(prompt)].append(i)
    completions = [""] * len(prompts)
    was_training = model.training
    model.eval()
    try:
        with mg.no_grad():
            for length, indices in by_length.items():
                ids = np.array([vocab.encode(prompts[i]) for i in indices], dtype=np.int64)
                idx = mg.tensor(ids, device=device)
                out = model.generate(idx, max_new_tokens, temperature=temperature, top_k=top_k)
                for row, i in zip(out.numpy(), indices):
                    text = vocab.decode(row[length:])
                    completions[i] = text.split(stop)[0] if stop else text
    finally:
        model.train(was_training)
    return completions
