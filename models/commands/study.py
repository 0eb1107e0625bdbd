"""``minigrad study``: run one of the experiments of ``minigrad.study`` (or all of them).

    minigrad study depth                    -> docs/study_depth.md, .json and docs/depth.png
    minigrad study paths --out results      the tables and figure under results/
    minigrad study time --seeds 0 1 2 3

Each study prints its table and checks, and says whether its stated criterion held; the
exit code is 0 when every study run passed and 1 otherwise.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import minigrad as mg
from minigrad.viz.studies import save_study
from models.commands.options import nonnegative_int
from models.config import check_seed
from models.errors import UsageError
from models.run import check_writable


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "study",
        help="run a study of gradients through residual connections",
        description=(
            "Run a study of minigrad.study at its defaults (under a minute each on 2 "
            "cores), print its table and checks, and write study_NAME.md, study_NAME.json "
            "and NAME.png under --out."
        ),
    )
    names = sorted(mg.study.STUDIES)
    parser.add_argument(
        "name", choices=[*names, "all"], metavar="NAME", help=f"one of {', '.join(names)}, or all"
    )
    parser.add_argument("--out", default="docs", metavar="DIR", help="default docs/")
    parser.add_argument(
        "--seeds",
        type=nonnegative_int,
        nargs="+",
        metavar="SEED",
        help="seeds to average over (default: the study's own)",
    )
    parser.set_defaults(func=run)


def study_options(name: str) -> dict:
    """What a study takes from models/: ``bottleneck`` also measures the translate task."""
    if name != "bottleneck":
        return {}
    from models.data.translate import sentence_pairs

    return {"extra_tasks": {"translate": sentence_pairs}}


def run(args: argparse.Namespace) -> int:
    names = sorted(mg.study.STUDIES) if args.name == "all" else [args.name]
    for seed in args.seeds or ():
        check_seed(seed, "--seeds")
    options = {"seeds": tuple(args.seeds)} if args.seeds else {}
    check_writable(Path(args.out), "--out")  # before minutes of work, not after
    failed = []
    for name in names:
        result = mg.study.run(name, **options, **study_options(name))
        print(result.to_markdown())
        try:
            paths = save_study(result, args.out)
        except OSError as error:
            raise UsageError(f"--out {args.out}: cannot write there ({error.strerror})") from None
        for path in paths:
            print(f"wrote {path}")
        verdict = "passed" if result.passed else "FAILED"
        print(f"study {name}: {verdict} its criterion in {result.seconds:.1f} s\n")
        if not result.passed:
            failed.append(name)
    return 1 if failed else 0
