"""Text from a trained run: rebuild its model from config.json and checkpoint, then generate
(a GPT continues the prompt; an encoder-decoder translates it)."""

from __future__ import annotations

from pathlib import Path

import minigrad as mg
from minigrad import nn
from models.checkpoint import check_size, load_checkpoint, read_checkpoint
from models.config import TrainConfig, check_seed, check_settings
from models.data import CharVocab, WordVocab
from models.errors import UsageError
from models.memory import check_fits, parameter_count
from models.run import RunDir
from models.train import build_model, config_class, resolve_device


def load_model(run_path: str | Path, device: str = "cpu") -> tuple[nn.Module, object]:
    """The trained model of a run folder (in eval mode) and its vocabulary: a GPT and its
    CharVocab, or an encoder-decoder and its WordVocab."""
    device = resolve_device(device)
    run = RunDir.existing(run_path, option="--run")
    saved = run.read_config()
    kind = TrainConfig.from_dict(saved["train"]).model
    config = model_config(saved["model"], run.config_path, config_class(kind))
    vocab = CharVocab(saved["vocab"]) if kind == "gpt" else WordVocab.from_string(saved["vocab"])
    if len(vocab) != config.vocab_size:
        raise UsageError(
            f"{run.config_path}: its vocab holds {len(vocab)} tokens, its model {config.vocab_size}"
        )
    check_fits(config, 1, config.block_size, device, training=False)
    state = read_checkpoint(run.checkpoint_path)
    check_size(run.checkpoint_path, state, parameter_count(config))
    model = build_model(config)
    load_checkpoint(run.checkpoint_path, model, state=state)
    return model.to(device).eval(), vocab


def model_config(values: dict, source: Path, cls: type):
    """The model's config (``cls``) from the "model" section of config.json, its settings
    checked by type."""
    check_settings(values, cls, f"{source} (model)")
    try:
        return cls(**values)
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
    """``prompt`` followed by ``max_new_tokens`` characters the run's model generates; for
    an encoder-decoder run, the greedy translation of ``prompt``."""
    if seed is not None:
        check_seed(seed)
    model, vocab = load_model(run_path, device)
    if isinstance(vocab, WordVocab):
        return translate(model, vocab, prompt, max_new_tokens, resolve_device(device))
    if not prompt:
        raise UsageError("--prompt must hold at least one character")
    ids = vocab.encode(prompt)
    if seed is not None:
        mg.manual_seed(seed)
    out = model.generate(
        mg.tensor([ids], device=resolve_device(device)), max_new_tokens, temperature, top_k
    )
    return vocab.decode(out.numpy()[0])


def translate(model, vocab: WordVocab, sentence: str, max_new_tokens: int, device: str) -> str:
    """The greedy translation of ``sentence`` (words separated by spaces)."""
    if not sentence.split():
        raise UsageError('--prompt must hold a sentence to translate, e.g. "사과는 맛있다"')
    ids = vocab.encode(sentence)
    if len(ids) > model.config.block_size:
        raise UsageError(
            f"--prompt has {len(ids)} words; this model reads at most {model.config.block_size}"
        )
    out = model.generate(mg.tensor([ids], device=device), max_new_tokens)
    return vocab.decode(out.numpy()[0])
