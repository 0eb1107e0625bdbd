"""``minigrad train``: train a toy GPT on a built-in task or a text file, or an
encoder-decoder on translate."""

from __future__ import annotations

import argparse
import signal
import sys
from dataclasses import fields
from pathlib import Path

import minigrad as mg
from models.commands.options import (
    nonnegative_float,
    nonnegative_int,
    positive_float,
    positive_int,
    probability,
)
from models.config import MODELS, TrainConfig, config_for_task, resumed_config
from models.data import TASKS
from models.errors import UsageError
from models.run import RunDir
from models.train import TrainResult, load_run_config, train

SETTINGS = {f.name for f in fields(TrainConfig)}


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "train",
        help="train a toy GPT (default: the Korean grammar task, about a minute on a CPU)",
        description=(
            "Train a GPT and write a run folder (checkpoint, config.json, metrics.jsonl, "
            "loss.png). Ctrl-C (exit code 130) or SIGTERM (143) saves a checkpoint; --resume "
            "DIR continues from it, and a larger --steps continues its learning-rate schedule. "
            "A loss that stops being finite ends the run (exit code 2) and keeps the last good "
            "checkpoint. Unset options take the task's defaults (see models/config.py)."
        ),
        argument_default=argparse.SUPPRESS,  # only options given explicitly reach args
    )
    data = parser.add_argument_group("data")
    data.add_argument("--task", choices=list(TASKS), help="what to learn (default: grammar)")
    data.add_argument("--data", metavar="FILE", help="the UTF-8 text file of --task text")
    data.add_argument(
        "--block-size", type=positive_int, metavar="N", help="context length in characters"
    )

    model = parser.add_argument_group("model")
    model.add_argument(
        "--model",
        choices=list(MODELS),
        help="gpt (default), or an encoder-decoder for --task translate: seq2seq (the "
        "Transformer, its default), rnn / lstm / gru (last state only), *-attn (with attention)",
    )
    model.add_argument(
        "--layers", dest="n_layers", type=positive_int, metavar="N", help="transformer blocks"
    )
    model.add_argument(
        "--d-model", type=positive_int, metavar="N", help="width of the residual stream"
    )
    model.add_argument(
        "--heads", dest="n_heads", type=positive_int, metavar="N", help="attention heads"
    )
    model.add_argument(
        "--d-ff", type=positive_int, metavar="N", help="hidden width of the FFN (4 d_model)"
    )
    model.add_argument("--dropout", type=probability, metavar="X")
    model.add_argument("--activation", choices=["gelu", "gelu_tanh", "relu"])
    model.add_argument(
        "--norm-first", action="store_const", const=True, help="pre-LN blocks (default: post-LN)"
    )
    model.add_argument(
        "--no-residual",
        dest="residual",
        action="store_const",
        const=False,
        help="remove both shortcuts of every block",
    )

    training = parser.add_argument_group("training")
    training.add_argument("--steps", type=positive_int, metavar="N", help="total optimizer steps")
    training.add_argument("--batch-size", type=positive_int, metavar="N")
    training.add_argument(
        "--lr", type=positive_float, metavar="X", help="peak learning rate of AdamW"
    )
    training.add_argument(
        "--min-lr", type=nonnegative_float, metavar="X", help="lr at the end of the cosine"
    )
    training.add_argument("--warmup", dest="warmup_steps", type=nonnegative_int, metavar="N")
    training.add_argument("--weight-decay", type=nonnegative_float, metavar="X")
    training.add_argument("--grad-clip", type=positive_float, metavar="X")
    training.add_argument(
        "--eval-every", type=positive_int, metavar="N", help="steps between evaluations"
    )
    training.add_argument("--seed", type=nonnegative_int, metavar="N")
    training.add_argument("--device", choices=["cpu", "cuda"])
    training.add_argument(
        "--data-parallel",
        action="store_const",
        const=True,
        help="run each half of a batch on its own thread (nn.DataParallel): faster when a "
        "batch holds 2048 tokens or more (batch size x block size), slower below",
    )

    runs = parser.add_argument_group("run folder")
    runs.add_argument("--out", metavar="DIR", help="run folder (default: runs/<task>-<time>)")
    runs.add_argument("--resume", metavar="DIR", help="continue the run in DIR")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    explicit = {name: value for name, value in vars(args).items() if name in SETTINGS}
    resume = getattr(args, "resume", None)
    out = getattr(args, "out", None)
    if resume is not None:
        if out is not None:
            raise UsageError("--out and --resume do not go together: a run resumes in its folder")
        if "data" in explicit:  # the run keeps its file's absolute path
            explicit["data"] = str(Path(explicit["data"]).resolve())
        config = resumed_config(load_run_config(RunDir.existing(resume)), explicit)
    else:
        config = config_for_task(explicit.pop("task", "grammar"), **explicit)
    # a process that does little but train: freed arrays stay in it for the next step
    # (MINIGRAD_KEEP_FREED_MEMORY=0 turns this off)
    mg.fast.keep_freed_memory()
    result = train(config, out=out, resume=resume)
    return report(result)


def report(result: TrainResult) -> int:
    """Print how the run went; the exit code: 130 after Ctrl-C, 143 after SIGTERM (128 plus
    the signal's number, as a shell reports a process that the signal ended)."""
    path = result.run.path
    if result.interrupted:
        by = " by SIGTERM" if result.signal == signal.SIGTERM else ""
        print(
            f"minigrad train: stopped{by} at step {result.step}/{result.config.steps}; "
            f"checkpoint saved in {path} (continue with: minigrad train --resume {path})",
            file=sys.stderr,
        )
        return 128 + (result.signal or signal.SIGINT)
    steps_per_s = result.steps_done / result.wall_s if result.wall_s else 0.0
    print(
        f"trained {result.steps_done} steps in {result.wall_s:.1f} s "
        f"({steps_per_s:.1f} steps/s, evaluations included)"
    )
    print("samples:")
    for sample in result.samples:
        print("  " + sample.strip("\n").replace("\n", "⏎"))
    print(f"run folder: {path}")
    return 0
