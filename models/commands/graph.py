"""``minigrad graph``: draw a GPT's computation graph, its gradient shortcuts highlighted.

    minigrad graph                                  a fresh 2-layer GPT -> graph.svg
    minigrad graph --grads --out gpt.svg gpt.png    after one backward: gradient per edge
    minigrad graph --layers 12 --depth 1            blocks folded into one box marked x12
    minigrad graph --run runs/grammar-... --grads   a trained model, on a batch of its task

The graph is that of the loss on one batch of the task (the run's task with ``--run``).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import numpy as np

import minigrad as mg
from models.commands.options import nonnegative_int, positive_int
from models.config import check_seed
from models.data import TASKS, make_task
from models.errors import UsageError
from models.gpt import GPT, GPTConfig
from models.memory import check_fits
from models.run import RunDir, check_writable

FORMATS = ("svg", "png", "pdf", "dot")
# options that describe the model; with --run, its config.json fixes them
MODEL_OPTIONS = {
    "task": "--task",
    "data": "--data",
    "layers": "--layers",
    "d_model": "--d-model",
    "heads": "--heads",
    "norm_first": "--norm-first",
    "no_residual": "--no-residual",
}
FRESH = {"task": "grammar", "layers": 2, "d_model": 32, "heads": 2}  # without --run


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "graph",
        help="draw a GPT's computation graph with its gradient shortcuts",
        description=(
            "Draw the computation graph of a GPT's loss on one batch (SVG, PNG or PDF by the "
            "file suffix; .dot writes the Graphviz source, as does any suffix when Graphviz "
            "is not installed), shortcuts highlighted. An --out that is a folder gets "
            "graph.svg inside it."
        ),
    )
    parser.add_argument("--run", metavar="DIR", help="a folder made by train (default: fresh)")
    parser.add_argument(
        "--grads", action="store_true", help="label each edge with its gradient norm"
    )
    parser.add_argument(
        "--out", nargs="+", default=["graph.svg"], metavar="FILE", help="default graph.svg"
    )
    add_model_options(parser)
    parser.add_argument("--batch-size", type=positive_int, default=2)
    parser.add_argument("--block-size", type=positive_int, default=None)
    parser.add_argument(
        "--depth", type=nonnegative_int, default=None, help="collapse modules below it"
    )
    parser.add_argument(
        "--no-fold", action="store_true", help="draw every block, not one box marked xN"
    )
    parser.add_argument("--expand-fused", action="store_true", help="show fused ops' steps")
    parser.add_argument("--saved-bytes", action="store_true", help="bytes saved per op")
    parser.add_argument("--seed", type=nonnegative_int, default=0)
    parser.set_defaults(func=run)


def add_model_options(parser) -> None:
    """The options of a fresh GPT (``graph`` and ``explore``); --run's config.json fixes them."""
    model = parser.add_argument_group("a fresh model (the run's own with --run)")
    model.add_argument("--task", choices=sorted(TASKS), help="default grammar")
    model.add_argument("--data", metavar="FILE", help="the text file of --task text")
    model.add_argument("--layers", type=positive_int, help="default 2")
    model.add_argument("--d-model", type=positive_int, help="default 32")
    model.add_argument("--heads", type=positive_int, help="default 2")
    model.add_argument("--norm-first", action="store_true", help="pre-LN blocks")
    model.add_argument("--no-residual", action="store_true", help="blocks without shortcuts")


def gpt_and_task(args, batch_size: int):
    """The GPT the options describe (a fresh one, or --run's) and its task."""
    model, task_name, data = _model(args, batch_size)
    task = make_task(task_name, data)
    if getattr(task, "seq2seq", False):
        raise UsageError(
            f"--run: a {task_name} run holds an encoder-decoder; this command reads GPT runs "
            "(draw an encoder-decoder's graph in code with mg.viz.draw_graph)"
        )
    return model, task


def run(args: argparse.Namespace) -> int:
    check_seed(args.seed)
    outputs = [output_path(out) for out in args.out]
    mg.manual_seed(args.seed)
    model, task = gpt_and_task(args, args.batch_size)
    block_size = args.block_size or min(model.config.block_size, task.default_block_size)
    if block_size > model.config.block_size:
        raise UsageError(
            f"--block-size {block_size} is longer than the model's block_size "
            f"{model.config.block_size}"
        )
    check_fits(model.config, args.batch_size, block_size, "cpu", training=False)
    x, y = task.get_batch("val", args.batch_size, block_size, np.random.default_rng(args.seed))
    graph = draw_gpt(
        model,
        x,
        y,
        grads=args.grads,
        depth=args.depth,
        fold_repeated=not args.no_fold,
        expand_fused=args.expand_fused,
        show_saved_bytes=args.saved_bytes,
    )
    for out in outputs:
        print(f"wrote {write_graph(graph, out)}")
    return 0


def output_path(text: str) -> Path:
    """The file that --out TEXT names: inside TEXT when it is a folder (graph.svg), with .svg
    added when it has no suffix; its folder is made and checked to be writable."""
    path = Path(text)
    if path.is_dir() or text.endswith(("/", os.sep)):
        path = path / "graph.svg"
    elif not path.suffix:
        path = path.with_name(f"{path.name}.svg")
    if path.suffix.lstrip(".").lower() not in FORMATS:
        raise UsageError(f"--out {text}: the file must end in .svg, .png, .pdf or .dot")
    check_writable(path.parent, "--out")
    return path


def write_graph(graph, path: Path) -> Path:
    """Write ``graph`` to ``path``: its DOT source for .dot, else a picture through Graphviz."""
    try:
        if path.suffix.lower() == ".dot":
            path.write_text(graph.source, encoding="utf-8")
            return path
        return mg.viz.render(graph, path)
    except OSError as error:
        raise UsageError(f"--out {path}: cannot write it ({error.strerror})") from None


def draw_gpt(model: GPT, x, y, grads: bool = False, **options):
    """The graph of ``model``'s loss on the batch (x, y) (int arrays (B, T)) as a
    graphviz.Digraph; with ``grads``, after one backward inside ``viz.record_grads()``.
    ``options`` go to ``mg.viz.draw_graph`` (depth, fold_repeated, expand_fused, ...)."""
    _, loss = model(x, y)
    if grads:
        with mg.viz.record_grads():
            loss.backward()
    loss.name = "loss"
    return mg.viz.draw_graph(loss, params=model, **options)


def write_docs_figure(folder: str | Path = "docs") -> list[Path]:
    """docs/gpt_block_graph.svg and .png: a fresh 2-layer post-LN GPT on the grammar task,
    after one backward pass, its two blocks folded into one box."""
    mg.manual_seed(0)
    task = make_task("grammar")
    config = GPTConfig(len(task.vocab), task.default_block_size, 32, 2, 2)
    x, y = task.get_batch("val", 2, 8, np.random.default_rng(0))
    graph = draw_gpt(GPT(config), x, y, grads=True)
    folder = Path(folder)
    return [mg.viz.render(graph, folder / f"gpt_block_graph.{fmt}") for fmt in ("svg", "png")]


def _model(args, batch_size: int) -> tuple[GPT, str, str | None]:
    """The GPT to draw, its task's name and data file."""
    given = [
        flag for name, flag in MODEL_OPTIONS.items() if getattr(args, name) not in (None, False)
    ]
    if args.run is None:
        options = {name: getattr(args, name) or default for name, default in FRESH.items()}
        task = make_task(options["task"], args.data)
        block_size = args.block_size or task.default_block_size
        if options["d_model"] % options["heads"]:
            raise UsageError(
                f"--d-model {options['d_model']} must be divisible by --heads {options['heads']}"
            )
        config = GPTConfig(
            vocab_size=len(task.vocab),
            block_size=block_size,
            d_model=options["d_model"],
            n_heads=options["heads"],
            n_layers=options["layers"],
            norm_first=args.norm_first,
            residual=not args.no_residual,
        )
        check_fits(config, batch_size, block_size, "cpu", training=False)
        return GPT(config), options["task"], args.data
    if given:
        raise UsageError(
            f"{given[0]} does not go with --run {args.run}: the run's config.json fixes its "
            f"model and task; drop {' and '.join(given)}, or drop --run to draw a fresh model"
        )
    from models.sample import load_model

    model, _ = load_model(args.run)
    train = RunDir.existing(args.run, option="--run").read_config()["train"]
    task, data = train.get("task"), train.get("data")
    if task not in TASKS or not (data is None or isinstance(data, str)):
        raise UsageError(f"--run {args.run}: its config.json names no task minigrad knows")
    return model, task, data
