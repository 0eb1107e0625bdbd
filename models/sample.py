"""Text from a trained run: rebuild its GPT from config.json and checkpoint, then generate."""

from __future__ import annotations

from pathlib import Path

import minigrad as mg
from models.checkpoint import check_size, load_checkpoint, read_checkpoint
from models.config import check_seed, check_settings
from models.data import CharVocab
from models.errors import UsageError
from models.gpt import GPT, GPTConfig
from models.memory import check_fits, parameter_count
from models.run import RunDir
from models.train import resolve_device


def load_model(run_path: str | Path, device: str = "cpu") -> tuple[GPT, CharVocab]:
    """The trained GPT of a run folder (in eval mode) and its vocabulary."""
    device = resolve_device(device)
    run = RunDir.existing(run_path, option="--run")
    saved = run.read_config()
    config = model_config(saved["model"], run.config_path)
    vocab = CharVocab(saved["vocab"])
    if len(vocab) != config.vocab_size:
        raise UsageError(
            f"{run.config_path}: its vocab holds {len(vocab)} characters, its model "
            f"{config.vocab_size}"
        )
    check_fits(config, 1, config.block_size, device, training=False)
    state = read_checkpoint(run.checkpoint_path)
    check_size(run.checkpoint_path, state, parameter_count(config))
    model = GPT(config)
    load_checkpoint(run.checkpoint_path, model, state=state)
    return model.to(device).eval(), vocab


def model_config(values: dict, source: Path) -> GPTConfig:
    """GPTConfig from the "model" section of config.json, its settings checked by type."""
    check_settings(values, GPTConfig, f"{source} (model)")
    try:
        return GPTConfig(**values)
    except ValueError as error:
        raise UsageError(f"{source}: {error}") from None


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
    if seed is not None:
        check_seed(seed)
    model, vocab = load_model(run_path, device)
    if not prompt:
        raise UsageError("--prompt must hold at least one character")
    ids = vocab.encode(prompt)
    if seed is not None:
        mg.manual_seed(seed)
    out = model.generate(
        mg.tensor([ids], device=resolve_device(device)), max_new_tokens, temperature, top_k
    )
    return vocab.decode(out.numpy()[0])
