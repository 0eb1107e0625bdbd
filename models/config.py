"""What a training run is told: ``TrainConfig``, the defaults per task, and the checks that
turn nonsensical settings into one-line UsageErrors before anything is built."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace

from models.errors import UsageError


@dataclass
class TrainConfig:
    """Every setting of a run. ``block_size=None`` means the task's own default."""

    task: str = "grammar"
    data: str | None = None  # the text file of --task text
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
    def from_dict(cls, values: dict) -> TrainConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise UsageError(f"config has settings minigrad does not know: {', '.join(unknown)}")
        return cls(**values)


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


_FLAGS = {"n_layers": "layers", "n_heads": "heads", "warmup_steps": "warmup"}


def _flag(name: str) -> str:
    """The command-line option of a setting: n_layers -> layers, batch_size -> batch-size."""
    return _FLAGS.get(name, name).replace("_", "-")


def _show(value) -> str:
    return "on" if value is True else "off" if value is False else str(value)
