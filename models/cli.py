"""The ``minigrad`` command.

    minigrad train                   train a toy GPT on the built-in grammar task (~1 minute)
    minigrad train --task reverse --layers 2
    minigrad sample --run runs/grammar-... --prompt 사과
    minigrad run train.py --steps 100    a PyTorch script, with minigrad standing in for torch

Each subcommand is a module of ``models.commands`` with ``register(subparsers)``, which adds
its parser and sets ``parser.set_defaults(func=run)``, ``run(args) -> exit code`` raising
``models.errors.UsageError`` for bad input. Bad input ends in one line on stderr and
exit code 2; Ctrl-C in exit code 130.
"""

from __future__ import annotations

import argparse
import contextlib
import sys

from models.commands import explore, graph, run, sample, study, train
from models.errors import UsageError

# the subcommands, in the order `minigrad --help` lists them
COMMANDS = (train, sample, graph, study, explore, run)


class ArgumentParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (the full usage is in --help)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(
        prog="minigrad",
        description="Train toy transformers with minigrad and look inside them.",
    )
    parser.add_argument(
        "--blas-threads",
        type=int,
        default=1,
        metavar="N",
        help="threads for NumPy's BLAS (default 1). minigrad splits its big products "
        "between two threads itself (MINIGRAD_NUM_THREADS=1 turns that off), and holds BLAS "
        "at one thread while it does",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in COMMANDS:
        command.register(subparsers)
    return parser


def blas_threads(count: int):
    """Limit NumPy's BLAS to ``count`` threads while the command runs (a no-op without
    threadpoolctl)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return contextlib.nullcontext()
    return threadpool_limits(limits=count, user_api="blas")


def main(argv: list[str] | None = None) -> int:
    """Run ``minigrad`` with ``argv`` (default: the process's arguments); the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    prog = f"minigrad {args.command}"
    if args.blas_threads < 1:
        parser.error(f"--blas-threads must be at least 1, got {args.blas_threads}")
    try:
        with blas_threads(args.blas_threads):
            return int(args.func(args) or 0)
    except UsageError as error:
        message = " ".join(str(error).split())  # one line, whatever the message holds
        print(f"{prog}: error: {message}", file=sys.stderr)
        return 2
    except MemoryError as error:  # NumPy's names the shape and dtype it could not allocate
        message = " ".join(str(error).split()) or "an allocation failed"
        print(f"{prog}: error: out of memory: {message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
