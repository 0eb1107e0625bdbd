"""A character-level corpus: one long string, split 90/10 into train and val, read in
random windows of ``block_size`` characters (the classic character language model)."""

from __future__ import annotations

import numpy as np

from models.data.task import Task, check_split
from models.data.vocab import CharVocab
from models.errors import UsageError

TRAIN_FRACTION = 0.9


class CorpusTask(Task):
    """Next-character prediction at every position of a text."""

    def __init__(self, text: str, vocab: CharVocab | None = None):
        self.text = text
        self.vocab = vocab if vocab is not None else CharVocab(text)
        tokens = self.vocab.encode_array(text)
        cut = int(len(tokens) * TRAIN_FRACTION)
        self.splits = {"train": tokens[:cut], "val": tokens[cut:]}

    def min_block_size(self) -> int:
        return 1

    def check_block_size(self, block_size: int) -> None:
        """Both splits must hold at least one window of block_size + 1 characters."""
        shortest = min(len(tokens) for tokens in self.splits.values())
        if shortest < block_size + 1:
            raise UsageError(
                f"{self.name}: the text has {len(self.text)} characters, too short for "
                f"--block-size {block_size}: its 10% validation part ({shortest} characters) "
                f"must hold one context of {block_size + 1} characters "
                f"(needs at least {(block_size + 1) * 10} characters, or a smaller --block-size)"
            )

    def get_batch(
        self, split: str, batch_size: int, block_size: int, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray]:
        check_split(split)
        self.check_block_size(block_size)
        tokens = self.splits[split]
        # a window starts at s: x = tokens[s : s + T], y = tokens[s + 1 : s + T + 1]
        starts = rng.integers(0, len(tokens) - block_size, size=batch_size)
        window = starts[:, None] + np.arange(block_size)[None, :]
        return tokens[window], tokens[window + 1]
