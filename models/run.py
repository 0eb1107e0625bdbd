"""A run folder: everything one training run leaves behind, in files a person can open.

    config.json              what was trained, on what, with which settings (+ vocabulary)
    checkpoint.safetensors   model, optimizer and scheduler state, step, RNG state
    metrics.jsonl            one JSON object per line: {"kind": "train" | "eval", "step": ...}
    loss.png                 the loss curve (when matplotlib is installed)

Files are replaced atomically (write a temporary file, then rename), so an interrupted
write never leaves a half-written file where a good one was. While a run writes to its
folder it holds ``.lock`` (an advisory ``flock`` holding its process id), so that a second
``minigrad train`` on the same folder is refused instead of interleaving with the first.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

from models.config import TrainConfig
from models.errors import UsageError

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None

CONFIG = "config.json"
CHECKPOINT = "checkpoint.safetensors"
METRICS = "metrics.jsonl"
LOSS_PLOT = "loss.png"
LOCK = ".lock"
SECTIONS = {"train": dict, "model": dict, "vocab": str}  # what config.json must hold


def write_atomically(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` so that readers see the old file or the new one."""
    temporary = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        temporary.write_text(text, encoding="utf-8")
        os.replace(temporary, path)
    except OSError as error:
        raise UsageError(f"cannot write {path}: {error.strerror or error}") from None
    finally:
        temporary.unlink(missing_ok=True)


def check_writable(folder: Path, option: str) -> None:
    """Make ``folder`` (with its parents) and check that this process can write in it; a
    UsageError naming ``option`` otherwise, before any work is done."""
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"{option} {folder}: not a folder (a file of that name exists)")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as error:
        raise UsageError(f"{option} {folder}: cannot write there ({error.strerror})") from None


class RunDir:
    """The folder of one training run."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._lock_file = None

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
        """config.json, checked to hold its sections: "train" (settings of TrainConfig, each
        of its type), "model" (an object, checked by whoever builds the model) and "vocab"."""
        try:
            config = json.loads(self.config_path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError, RecursionError) as error:
            reason = str(error).splitlines()[0][:120] if str(error) else type(error).__name__
            raise UsageError(f"{self.config_path}: not a readable config ({reason})") from None
        if not isinstance(config, dict):
            kind = "a list" if isinstance(config, list) else f"{type(config).__name__} value"
            raise UsageError(
                f"{self.config_path}: not a minigrad run config (it holds {kind}, not an object)"
            )
        for section, kind in SECTIONS.items():
            if not isinstance(config.get(section), kind):
                what = "an object" if kind is dict else "a string"
                found = "has none" if section not in config else "holds something else"
                raise UsageError(
                    f"{self.config_path}: not a minigrad run config (its {section!r} must be "
                    f"{what}; it {found})"
                )
        TrainConfig.from_dict(config["train"], source=f"{self.config_path} (train)")
        return config

    def write_config(self, config: dict) -> None:
        write_atomically(self.config_path, json.dumps(config, indent=2, ensure_ascii=False))

    def append_metrics(self, record: dict) -> None:
        try:
            with open(self.metrics_path, "a", encoding="utf-8") as file:
                file.write(json.dumps(record, ensure_ascii=False) + "\n")
        except OSError as error:
            raise UsageError(f"cannot write {self.metrics_path}: {error.strerror}") from None

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

    # -- the lock ------------------------------------------------------------------------------

    def acquire(self) -> None:
        """Hold the folder for this process; a UsageError naming the process that holds it.
        Also removes the temporary files of writes that a killed process left behind."""
        path = self.path / LOCK
        while True:
            try:
                file = open(path, "a+", encoding="utf-8")
            except OSError as error:
                raise UsageError(
                    f"cannot write to the run folder {self.path}: {error.strerror}"
                ) from None
            if not _try_lock(file):
                file.seek(0)
                holder = file.read().strip() or "?"
                file.close()
                raise UsageError(
                    f"{self.path} is in use by process {holder}, which is writing to it; wait "
                    "for it to finish (or stop it) before training in this folder"
                )
            # the holder before us may have removed the file between our open and our lock
            if os.path.exists(path) and os.path.samestat(os.fstat(file.fileno()), os.stat(path)):
                break
            file.close()
        file.seek(0)
        file.truncate()
        file.write(str(os.getpid()))
        file.flush()
        self._lock_file = file
        for stale in self.path.glob(".*.tmp*"):  # no one else writes here while we hold it
            if stale.name.endswith(".tmp") or ".tmp-" in stale.name:
                stale.unlink(missing_ok=True)

    def release(self) -> None:
        """Let go of the folder (a no-op unless ``acquire`` succeeded)."""
        if self._lock_file is None:
            return
        (self.path / LOCK).unlink(missing_ok=True)
        self._lock_file.close()  # closing the file releases the flock
        self._lock_file = None


def _try_lock(file) -> bool:
    """Take an exclusive lock on the open ``file`` without waiting; False if another has it.
    The kernel drops the lock when its process ends, however it ends (kill -9 too)."""
    if fcntl is None:  # no flock here (Windows): the folder goes unlocked
        return True
    try:
        fcntl.flock(file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True
