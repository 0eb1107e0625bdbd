"""``minigrad explore``: a GPT's graph as an interactive page, to step through its backward pass.

    minigrad explore --out gpt.html                          a fresh 2-layer GPT, one backward
    minigrad explore --run runs/grammar-... --prompt "사과는 맛있다" --out gpt.html --open
    minigrad explore --layers 12 --out deep.html             the 12 blocks fold into one box

The page (``mg.viz.explore``) is one self-contained HTML file: the graph, a slider that walks
the backward pass node by node, the gradient norm on every edge, each shortcut beside its
branch, and a click on any node for its values, gradient and attention maps. The sequence is
the prompt (its characters label the attention maps), or one sequence of the task.
"""

from __future__ import annotations

import argparse
import os
import webbrowser
from pathlib import Path

import numpy as np

import minigrad as mg
from minigrad.viz.draw import NO_GRADIENT_YET
from models.commands.graph import add_model_options, gpt_and_task
from models.commands.options import nonnegative_int, positive_int
from models.errors import UsageError


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "explore",
        help="an interactive page of a GPT's graph: step through its backward pass",
        description=(
            "Write one self-contained HTML page of a GPT's graph after one backward pass "
            "on a prompt: step through the backward pass, see the gradient on every edge "
            "and each shortcut beside its branch, click a node for its values."
        ),
    )
    parser.add_argument("--run", metavar="DIR", help="a folder made by train (default: fresh)")
    parser.add_argument(
        "--prompt", metavar="TEXT", help="the sequence to run (default: one from the task)"
    )
    parser.add_argument("--out", default="explore.html", metavar="FILE", help="explore.html")
    parser.add_argument("--open", action="store_true", help="open the page in a browser")
    parser.add_argument("--no-backward", action="store_true", help="draw the forward graph only")
    add_model_options(parser)
    parser.add_argument("--block-size", type=positive_int, default=None)
    parser.add_argument(
        "--depth", type=nonnegative_int, default=None, help="collapse modules below it"
    )
    parser.add_argument(
        "--no-fold", action="store_true", help="draw every block, not one box marked xN"
    )
    parser.add_argument("--seed", type=nonnegative_int, default=0)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    out = _writable(Path(args.out))
    mg.manual_seed(args.seed)
    model, task = gpt_and_task(args, batch_size=1)
    x, y = _sequence(args, model, task)
    model.eval()  # no dropout: the page shows what the model computes
    _, loss = model(x[None], y[None])
    loss.name = "loss"
    if not args.no_backward:
        with mg.viz.record_grads():
            loss.backward()
    tokens = [_display(char) for char in task.vocab.decode(x)]
    try:
        page = mg.viz.explore(
            loss, params=model, tokens=tokens, depth=args.depth, fold_repeated=not args.no_fold
        )
    except RuntimeError as error:  # Graphviz's dot is missing
        raise UsageError(str(error)) from None
    try:
        page.save(out)
    except OSError as error:
        raise UsageError(f"cannot write --out {out}: {error.strerror or error}") from None
    note = "" if page.has_grads else f" ({NO_GRADIENT_YET})"
    print(f"wrote {out} ({out.stat().st_size / 1024:.0f} KiB){note}")
    if args.open and not webbrowser.open(out.resolve().as_uri()):
        print(f"found no browser to open it with; open {out} yourself")
    return 0


def _writable(path: Path) -> Path:
    """``path`` if a page can be written there (its folder made), else a UsageError."""
    if path.is_dir():
        raise UsageError(f"--out {path} is a folder; give a file name such as {path}/gpt.html")
    blocking = next((p for p in path.parents if p.exists() and not p.is_dir()), None)
    if blocking is not None:
        raise UsageError(f"cannot write --out {path}: {blocking} is a file, not a folder")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UsageError(f"cannot write --out {path}: {error.strerror or error}") from None
    target = path if path.exists() else path.parent
    if not os.access(target, os.W_OK):
        raise UsageError(f"cannot write --out {path}: permission denied")
    return path


def _sequence(args, model, task) -> tuple[np.ndarray, np.ndarray]:
    """(x, y), int64 (T,): the prompt's characters and the next one at each position, or the
    first validation sequence of the task."""
    if args.prompt is not None:
        if len(args.prompt) < 2:
            raise UsageError("--prompt needs at least two characters (an input and its target)")
        ids = np.array(task.vocab.encode(args.prompt), dtype=np.int64)
        if len(ids) > model.config.block_size + 1:
            raise UsageError(
                f"--prompt has {len(ids)} characters; this model reads at most "
                f"{model.config.block_size} (plus one target)"
            )
        return ids[:-1], ids[1:]
    length = min(args.block_size or task.default_block_size, model.config.block_size)
    x, y = task.get_batch("val", 1, length, np.random.default_rng(args.seed))
    return x[0], y[0]


def _display(char: str) -> str:
    """A token as a label: the newline as \\n, the space as _."""
    return "\\n" if char == "\n" else "_" if char == " " else char
