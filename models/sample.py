"""Text from a trained run: rebuild its GPT from config.json and checkpoint, then generate."""

from __future__ import annotations

from pathlib import Path

import minigrad as mg
from models.checkpoint import load_checkpoint
from models.data import CharVocab
from models.errors import UsageError
from models.gpt import GPT, GPTConfig
from models.run import RunDir


def load_model(run_path: str | Path, device: str = "cpu") -> tuple[GPT, CharVocab]:
    """The trained GPT of a run folder (in eval mode) and its vocabulary."""
    run = RunDir.existing(run_path, option="--run")
    saved = run.read_config()
    try:
        config = GPTConfig(**saved["model"])
        vocab = CharVocab(saved["vocab"])
    except (KeyError, TypeError) as error:
        raise UsageError(f"{run.config_path}: not a minigrad run config ({error})") from None
    model = GPT(config)
    load_checkpoint(run.checkpoint_path, model)
    return model.to(device).eval(), vocab


def sample(
    run_path: str | Path,
    prompt: str,
    max_new_tokens: int = 200,
    temperature: float = 1.0,
    top_k: int | None = None,
    seed: int | None = None,
    device: str = "cpu",
) -> str:
    """``prompt`` followed by ``max_new_tokens`` characters the run's model generates."""
    model, vocab = load_model(run_path, device)
    if not prompt:
        raise UsageError("--prompt must hold at least one character")
    ids = vocab.encode(prompt)
    if seed is not None:
        mg.manual_seed(seed)
    out = model.generate(mg.tensor([ids], device=device), max_new_tokens, temperature, top_k)
    return vocab.decode(out.numpy()[0])
