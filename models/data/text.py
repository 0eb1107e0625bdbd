"""``text``: any UTF-8 file the user names, modelled character by character."""

from __future__ import annotations

from pathlib import Path

from models.data.corpus import CorpusTask
from models.errors import UsageError


def read_text(path: str | Path) -> str:
    """The file's text; a missing, unreadable, empty or non-UTF-8 file is a UsageError."""
    path = Path(path)
    if not path.exists():
        raise UsageError(f"--data {path}: no such file")
    if not path.is_file():
        raise UsageError(f"--data {path}: not a file")
    try:
        raw = path.read_bytes()
    except OSError as error:
        raise UsageError(f"--data {path}: cannot read it ({error.strerror})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise UsageError(
            f"--data {path}: not UTF-8 text (byte 0x{raw[error.start]:02x} at offset {error.start})"
        ) from None
    if not text:
        raise UsageError(f"--data {path}: the file is empty")
    return text


class TextTask(CorpusTask):
    """The characters of a text file: the first 90% to train on, the last 10% to validate."""

    name = "text"
    default_block_size = 64
    sample_tokens = 200
    sample_stop = None

    def __init__(self, path: str | Path):
        self.path = Path(path)
        super().__init__(read_text(self.path))

    def sample_prompts(self) -> list[str]:
        # the first character of each of a few validation lines
        lines = [line for line in self.text[int(len(self.text) * 0.9) :].splitlines() if line]
        return [line[0] for line in lines[:3]] or [self.text[0]]
