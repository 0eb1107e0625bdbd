"""Regenerate every figure the README shows, into docs/ (or ``--out``).

    python docs/make_figures.py                    everything (several minutes on 2 CPU cores)
    python docs/make_figures.py --only graph attention

What it writes, and the minigrad function that draws it:

    gpt_block_graph.svg/.png   a 2-layer post-LN GPT's graph after one backward pass: shortcuts
                               highlighted, every edge labelled with its gradient norm
                               (models.commands.graph.write_docs_figure)
    attention_grammar.png      attention heatmaps of a GPT trained briefly on the grammar task
                               (examples/04_train_toy_gpt.py, 250 steps), on "사과는 맛있다",
                               the layer whose head looks back at the noun most (viz.plots)
    grammar_loss.png           that run's loss curve (models.plots)
    depth.png, ln.png, paths.png, scale.png, time.png and study_<name>.md/.json
                               the studies of minigrad.study at their default settings:
                               gradient against depth with and without residuals, post-LN
                               against pre-LN, path lengths, scaled shortcuts, through time
                               (viz.studies)

Every figure comes from fixed seeds, so running the script again redraws the same pictures.
"""

from __future__ import annotations

import argparse
import runpy
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # models/ is imported from the checkout, like the examples

from minigrad import study  # noqa: E402
from minigrad.viz.studies import save_study  # noqa: E402
from models.commands.graph import write_docs_figure  # noqa: E402

FIGURES = ("graph", "attention", *study.STUDIES)


def graph_figure(out: Path) -> list[Path]:
    return write_docs_figure(out)


def attention_figure(out: Path) -> list[Path]:
    """The model of examples/04_train_toy_gpt.py (the grammar task, 250 steps) and its
    attention on "사과는 맛있다", drawn by that example's own functions."""
    example = runpy.run_path(str(ROOT / "examples" / "04_train_toy_gpt.py"))
    with tempfile.TemporaryDirectory() as folder:
        model, vocab = example["train_grammar"](Path(folder))
        loss = Path(shutil.copy(Path(folder) / "04_loss.png", out / "grammar_loss.png"))
    attention = example["draw_noun_attention"](model, vocab, out / "attention_grammar.png")
    return [attention, loss]


def study_figure(name: str, out: Path) -> list[Path]:
    result = study.run(name)
    print(f"study {name}: {'PASSED' if result.passed else 'FAILED'} in {result.seconds:.1f} s")
    return save_study(result, out)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "docs"), help="default: docs/")
    parser.add_argument("--only", nargs="+", choices=FIGURES, default=FIGURES, metavar="NAME",
                        help=f"some of: {' '.join(FIGURES)}")  # fmt: skip
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    started = time.perf_counter()
    for name in args.only:
        start = time.perf_counter()
        if name == "graph":
            written = graph_figure(out)
        elif name == "attention":
            written = attention_figure(out)
        else:
            written = study_figure(name, out)
        for path in written:
            print(f"wrote {path} ({Path(path).stat().st_size / 1024:.0f} KB)")
        print(f"{name}: {time.perf_counter() - start:.1f} s")
    print(f"all figures in {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
