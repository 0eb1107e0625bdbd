"""``minigrad sample``: continue a prompt with the model of a run folder."""

from __future__ import annotations

import argparse

from models.commands.options import nonnegative_float, nonnegative_int, positive_int
from models.sample import sample


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "sample",
        help="generate text (or translate a sentence) with a trained run",
        description=(
            "Print PROMPT followed by the characters the run's model generates; for a "
            'translate run, the translation of PROMPT (e.g. --prompt "사과는 맛있다").'
        ),
    )
    parser.add_argument("--run", required=True, metavar="DIR", help="a folder made by train")
    parser.add_argument("--prompt", default="\n", help="text to continue (default: a newline)")
    parser.add_argument("--max-new-tokens", type=nonnegative_int, default=100)
    parser.add_argument(
        "--temperature", type=nonnegative_float, default=0.8, help="0 picks the likeliest"
    )
    parser.add_argument("--top-k", type=positive_int, default=None)
    parser.add_argument("--seed", type=nonnegative_int, default=None)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    text = sample(
        args.run,
        args.prompt,
        max_new_tokens=args.max_new_tokens,
        temperature=args.temperature,
        top_k=args.top_k,
        seed=args.seed,
        device=args.device,
    )
    print(text)
    return 0
