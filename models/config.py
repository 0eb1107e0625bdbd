"""What a training run is told: ``TrainConfig``, the defaults per task, and the checks that
turn nonsensical settings into one-line UsageErrors before anything is built."""

from __future__ import annotations

import math
import typing
from dataclasses import MISSING, asdict, dataclass, fields, replace

from models.errors import UsageError

MAX_SEED = 2**64 - 1  # seeds are 64-bit, as in PyTorch


@dataclass
class TrainConfig:
    """Every setting of a run. ``block_size=None`` means the task's own default."""

    task: str = "grammar"
    data: str | None = None  # the text file of --task text
    model: str = "gpt"  # one of MODELS; the encoder-decoders learn --task translate
    steps: int = 800
    batch_size: int = 32
    block_size: int | None = None
    n_layers: int = 2
    d_model: int = 64
    n_heads: int = 4
    d_ff: int | None = None
    dropout: float = 0.0
    norm_first: bool = False
    residual: bool = True
    activation: str = "gelu"
    lr: float = 3e-3
    min_lr: float = 3e-4
    warmup_steps: int = 100
    weight_decay: float = 0.01
    grad_clip: float = 1.0
    eval_every: int = 200
    seed: int = 0
    device: str = "cpu"
    data_parallel: bool = False  # half of each batch on each of two threads (nn.DataParallel)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict, source: str = "config") -> TrainConfig:
        """The config that ``to_dict`` wrote; ``values`` is checked setting by setting (it
        comes from a file), and anything unknown or of the wrong type is a UsageError."""
        check_settings(values, cls, source)
        return cls(**values)


def check_settings(values, cls, source: str) -> None:
    """A UsageError unless ``values`` (read from a file) are settings of the dataclass
    ``cls``, each of its annotated type, with every setting that has no default."""
    if not isinstance(values, dict):
        raise UsageError(f"{source}: expected an object of settings, got {_json_type(values)}")
    known = {f.name: f for f in fields(cls)}
    unknown = sorted(map(str, set(values) - set(known)))
    if unknown:
        raise UsageError(f"{source} has settings minigrad does not know: {', '.join(unknown)}")
    missing = [n for n, f in known.items() if n not in values and f.default is MISSING]
    if missing:
        raise UsageError(f"{source} lacks the settings {', '.join(missing)}")
    hints = typing.get_type_hints(cls)
    for name, value in values.items():
        if not _has_type(value, hints[name]):
            raise UsageError(
                f"{source}: {name} must be {_type_words(hints[name])}, got {value!r:.60}"
            )


# "gpt": decoder-only; "seq2seq": the Transformer encoder-decoder; "<cell>" and
# "<cell>-attn": the recurrent encoder-decoder (models.RNNSeq2Seq) without or with attention
MODELS = ("gpt", "seq2seq", "rnn", "rnn-attn", "lstm", "lstm-attn", "gru", "gru-attn")
SEQ2SEQ_TASKS = ("translate",)

# settings that may change when a run is resumed; any other must match the run's config
RESUMABLE = ("steps", "eval_every", "device", "data_parallel")

# per task, the defaults that differ from TrainConfig's; tuned so that `minigrad train
# --task NAME` learns the task on two CPU cores in about a minute
TASK_DEFAULTS: dict[str, dict] = {
    "grammar": {},
    "copy": {"batch_size": 64, "steps": 600},
    "reverse": {"batch_size": 64, "steps": 600},
    "sort": {"batch_size": 64, "steps": 800},
    "add": {"batch_size": 64, "steps": 3000, "eval_every": 500},
    "translate": {"model": "seq2seq", "batch_size": 64, "steps": 600},
    "text": {"steps": 2000, "eval_every": 500},
}


def config_for_task(task: str, **explicit) -> TrainConfig:
    """TrainConfig's defaults, then the task's, then the settings given explicitly."""
    values = {"task": task, **TASK_DEFAULTS.get(task, {}), **explicit}
    return TrainConfig(**values)


def resumed_config(saved: TrainConfig, explicit: dict) -> TrainConfig:
    """The saved config with the RESUMABLE settings from ``explicit``; a different value for
    any other setting is a UsageError (it would be another run)."""
    for name, value in explicit.items():
        if name in RESUMABLE or getattr(saved, name) == value:
            continue
        raise UsageError(
            f"--{_flag(name)} {_show(value)} conflicts with this run's {name}="
            f"{_show(getattr(saved, name))}; drop the option to resume, or start a new run"
        )
    return replace(saved, **{k: v for k, v in explicit.items() if k in RESUMABLE})


def check_config(config: TrainConfig) -> None:
    """A UsageError naming the first setting that makes no sense."""
    positive = {
        "steps": config.steps,
        "batch_size": config.batch_size,
        "n_layers": config.n_layers,
        "d_model": config.d_model,
        "n_heads": config.n_heads,
        "eval_every": config.eval_every,
    }
    for name, value in positive.items():
        if value < 1:
            raise UsageError(f"--{_flag(name)} must be at least 1, got {value}")
    if config.block_size is not None and config.block_size < 1:
        raise UsageError(f"--block-size must be at least 1, got {config.block_size}")
    if config.d_ff is not None and config.d_ff < 1:
        raise UsageError(f"--d-ff must be at least 1, got {config.d_ff}")
    if config.d_model % config.n_heads:
        raise UsageError(
            f"--d-model {config.d_model} is not divisible by --heads {config.n_heads} "
            "(each head gets d_model / heads dimensions)"
        )
    if not config.lr > 0:
        raise UsageError(f"--lr must be positive, got {config.lr}")
    if not 0 <= config.min_lr <= config.lr:
        raise UsageError(f"--min-lr must lie in [0, lr={config.lr}], got {config.min_lr}")
    if not 0 <= config.dropout < 1:
        raise UsageError(f"--dropout must lie in [0, 1), got {config.dropout}")
    if config.warmup_steps < 0:
        raise UsageError(f"--warmup must be at least 0, got {config.warmup_steps}")
    if config.weight_decay < 0:
        raise UsageError(f"--weight-decay must be at least 0, got {config.weight_decay}")
    if not config.grad_clip > 0:
        raise UsageError(f"--grad-clip must be positive, got {config.grad_clip}")
    if config.activation not in ("gelu", "gelu_tanh", "relu"):
        raise UsageError(f"--activation must be gelu, gelu_tanh or relu, got {config.activation!r}")
    check_model(config)
    check_seed(config.seed)


def check_model(config: TrainConfig) -> None:
    """A UsageError unless the model fits the task: the encoder-decoders translate, the GPT
    does everything else."""
    if config.model not in MODELS:
        raise UsageError(f"--model must be one of {', '.join(MODELS)}, got {config.model!r}")
    seq2seq_task = config.task in SEQ2SEQ_TASKS
    if config.model == "gpt" and seq2seq_task:
        raise UsageError(
            f"--task {config.task} needs an encoder-decoder: --model "
            f"{' | '.join(MODELS[1:])} (not gpt)"
        )
    if config.model != "gpt" and not seq2seq_task:
        raise UsageError(
            f"--model {config.model} is an encoder-decoder for --task "
            f"{' | '.join(SEQ2SEQ_TASKS)}; --task {config.task} trains --model gpt"
        )
    if config.model != "gpt" and not config.residual:
        raise UsageError("--no-residual is for --model gpt only")
    if config.model != "gpt" and config.data_parallel:
        raise UsageError("--data-parallel is for --model gpt only")


def check_seed(seed: int, option: str = "--seed") -> None:
    """A UsageError unless ``seed`` is a whole number in [0, 2**64 - 1]."""
    if not 0 <= seed <= MAX_SEED:
        raise UsageError(f"{option} must lie in [0, 2**64 - 1], got {seed}")


_FLAGS = {"n_layers": "layers", "n_heads": "heads", "warmup_steps": "warmup"}


def _flag(name: str) -> str:
    """The command-line option of a setting: n_layers -> layers, batch_size -> batch-size."""
    return _FLAGS.get(name, name).replace("_", "-")


def _show(value) -> str:
    return "on" if value is True else "off" if value is False else str(value)


def _has_type(value, hint) -> bool:
    """Whether a JSON ``value`` fits the annotation ``hint`` (int, float, str, bool, X | None)."""
    options = typing.get_args(hint) or (hint,)
    for option in options:
        if option is type(None) and value is None:
            return True
        if option is bool and isinstance(value, bool):
            return True
        if option is int and isinstance(value, int) and not isinstance(value, bool):
            return True
        if option is float and isinstance(value, (int, float)) and not isinstance(value, bool):
            return math.isfinite(value)
        if option is str and isinstance(value, str):
            return True
    return False


def _type_words(hint) -> str:
    words = {
        int: "a whole number",
        float: "a finite number",
        str: "a string",
        bool: "true or false",
    }
    options = typing.get_args(hint) or (hint,)
    return " or ".join(words.get(option, "null") for option in options)


def _json_type(value) -> str:
    names = {list: "a list", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number")
