"""A character-level vocabulary: every distinct character is one token."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from models.errors import UsageError


class CharVocab:
    """Maps characters to token ids and back; ids follow the sorted order of the characters."""

    def __init__(self, chars: Iterable[str]):
        self.chars = sorted(set(chars))
        self.stoi = {ch: i for i, ch in enumerate(self.chars)}

    def __len__(self) -> int:
        return len(self.chars)

    def __repr__(self) -> str:
        return f"CharVocab({len(self)} characters)"

    def encode(self, text: str) -> list[int]:
        unknown = sorted({ch for ch in text if ch not in self.stoi})
        if unknown:
            raise UsageError(
                f"text holds characters the model never saw: {''.join(unknown)!r} "
                f"(its vocabulary has {len(self)} characters)"
            )
        return [self.stoi[ch] for ch in text]

    def encode_array(self, text: str) -> np.ndarray:
        return np.array(self.encode(text), dtype=np.int64)

    def decode(self, ids: Iterable[int]) -> str:
        return "".join(self.chars[int(i)] for i in ids)

    def to_string(self) -> str:
        """The vocabulary as one string, to keep in a run's config."""
        return "".join(self.chars)
