"""A training checkpoint: one safetensors file written by ``mg.save`` (atomic, never pickle).

    {"model": model.state_dict(),          tensors under "model.<name>"
     "optimizer": optimizer.state_dict(),  Adam's moments under "optimizer.state.<i>.exp_avg"
     "scheduler": scheduler.state_dict(),  numbers: kept as JSON in the file's metadata
     "trainer": {"step", "elapsed_s", "rng"}}

It opens in PyTorch with ``safetensors.torch.load_file``. Reading one checks every part of
it (``mg.load`` checks the file and its checksum; ``read_checkpoint`` what the parts hold),
so a damaged checkpoint is one UsageError, never a traceback halfway through a resume.
"""

from __future__ import annotations

from pathlib import Path

import minigrad as mg
from models.errors import UsageError


def save_checkpoint(path: Path, model, optimizer, scheduler, trainer: dict) -> None:
    """Write model, optimizer, scheduler and ``trainer`` (step, RNG state, ...) to ``path``.
    A failed write (a full disk) is a UsageError, and the checkpoint before it stays."""
    state = {
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        "trainer": trainer,
    }
    try:
        mg.save(state, path)
    except OSError as error:
        kept = "the previous checkpoint is kept" if path.exists() else "no checkpoint was saved"
        raise UsageError(
            f"cannot save the checkpoint {path}: {error.strerror or error}; {kept}"
        ) from None


def read_checkpoint(path: Path) -> dict:
    """The saved dict; a file that is not a minigrad checkpoint is a UsageError."""
    try:
        state = mg.load(path)
    except (OSError, ValueError) as error:
        raise UsageError(f"{path}: not a readable checkpoint ({error})") from None
    if not isinstance(state, dict) or "model" not in state:
        raise UsageError(f"{path}: not a minigrad training checkpoint (it has no model)")
    model = state["model"]
    if not isinstance(model, dict) or not all(isinstance(v, mg.Tensor) for v in model.values()):
        raise UsageError(f"{path}: not a minigrad training checkpoint (its model is not tensors)")
    return state


def check_size(path: Path, state: dict, parameters: int) -> None:
    """A UsageError unless the checkpoint ``state`` holds ``parameters`` model numbers: a
    config that describes another model is refused before that model is built."""
    saved = sum(tensor.numel() for tensor in state["model"].values())
    if saved != parameters:
        raise UsageError(
            f"{path} holds a model of {saved:,} parameters, but the run's config.json "
            f"describes one of {parameters:,}: the two do not belong together"
        )


def load_checkpoint(path: Path, model, optimizer=None, scheduler=None, state=None) -> dict:
    """Restore what ``save_checkpoint`` wrote (or ``state``, already read from ``path``)
    into the given objects; returns the whole saved dict (its "trainer" and, where
    ``optimizer`` is given, "scheduler" are dicts)."""
    state = read_checkpoint(path) if state is None else state
    parts = {"optimizer": optimizer, "scheduler": scheduler, "trainer": optimizer}
    for name in [name for name, part in parts.items() if part is not None]:
        if not isinstance(state.get(name), dict):
            raise UsageError(f"{path}: not a minigrad training checkpoint (its {name} is missing)")
    try:
        model.load_state_dict(state["model"])
        if optimizer is not None:
            optimizer.load_state_dict(state["optimizer"])
        if scheduler is not None:
            scheduler.load_state_dict(state["scheduler"])
    except (KeyError, TypeError, ValueError, RuntimeError, IndexError, AttributeError) as error:
        message = str(error) or type(error).__name__
        raise UsageError(f"{path} does not fit this model: {message}") from None
    return state
