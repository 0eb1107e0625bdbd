"""A run folder: everything one training run leaves behind, in files a person can open.

    config.json              what was trained, on what, with which settings (+ vocabulary)
    checkpoint.safetensors   model, optimizer and scheduler state, step, RNG state
    metrics.jsonl            one JSON object per line: {"kind": "train" | "eval", "step": ...}
    loss.png                 the loss curve (when matplotlib is installed)

Files are replaced atomically (write a temporary file, then rename), so an interrupted
write never leaves a half-written file where a good one was.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from models.errors import UsageError

CONFIG = "config.json"
CHECKPOINT = "checkpoint.safetensors"
METRICS = "metrics.jsonl"
LOSS_PLOT = "loss.png"


def write_atomically(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` so that readers see the old file or the new one."""
    temporary = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        temporary.write_text(text, encoding="utf-8")
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


class RunDir:
    """The folder of one training run."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"RunDir({str(self.path)!r})"

    @property
    def config_path(self) -> Path:
        return self.path / CONFIG

    @property
    def checkpoint_path(self) -> Path:
        return self.path / CHECKPOINT

    @property
    def metrics_path(self) -> Path:
        return self.path / METRICS

    @property
    def plot_path(self) -> Path:
        return self.path / LOSS_PLOT

    @classmethod
    def create(cls, out: str | Path | None, task: str, root: str | Path = "runs") -> RunDir:
        """A fresh folder: ``out`` if given (it must not hold a run already), else
        ``runs/<task>-<date>-<time>``."""
        if out is None:
            stamp = time.strftime("%Y%m%d-%H%M%S")
            path = Path(root) / f"{task}-{stamp}"
            suffix = 2
            while path.exists():
                path = Path(root) / f"{task}-{stamp}-{suffix}"
                suffix += 1
        else:
            path = Path(out)
            if (path / CONFIG).exists() or (path / CHECKPOINT).exists():
                raise UsageError(
                    f"--out {path} already holds a run; continue it with --resume {path} "
                    "or choose another --out"
                )
            if path.exists() and not path.is_dir():
                raise UsageError(f"--out {path} exists and is not a folder")
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise UsageError(f"cannot create the run folder {path}: {error.strerror}") from None
        return cls(path)

    @classmethod
    def existing(cls, path: str | Path, option: str = "--resume") -> RunDir:
        """A folder written by ``minigrad train``; anything else is a UsageError."""
        run = cls(path)
        if not run.path.is_dir():
            raise UsageError(f"{option} {run.path}: no such run folder")
        for needed in (run.config_path, run.checkpoint_path):
            if not needed.is_file():
                raise UsageError(f"{option} {run.path}: not a run folder (it has no {needed.name})")
        return run

    def read_config(self) -> dict:
        try:
            return json.loads(self.config_path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
            raise UsageError(f"{self.config_path}: not a readable config ({error})") from None

    def write_config(self, config: dict) -> None:
        write_atomically(self.config_path, json.dumps(config, indent=2, ensure_ascii=False))

    def append_metrics(self, record: dict) -> None:
        with open(self.metrics_path, "a", encoding="utf-8") as file:
            file.write(json.dumps(record, ensure_ascii=False) + "\n")

    def read_metrics(self) -> list[dict]:
        if not self.metrics_path.exists():
            return []
        records = []
        for line in self.metrics_path.read_text(encoding="utf-8").splitlines():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:  # a line cut short by a crash
                continue
        return records

    def keep_metrics_until(self, step: int) -> None:
        """Drop records after ``step``: a resumed run repeats those steps from its checkpoint."""
        kept = [r for r in self.read_metrics() if r.get("step", 0) <= step]
        write_atomically(
            self.metrics_path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in kept)
        )
