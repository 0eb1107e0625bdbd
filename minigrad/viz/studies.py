"""The figures of the studies of ``minigrad.study``: each study's result, drawn.

A study measures and returns a ``StudyResult`` (its table, checks and curves); it draws
nothing. Here one function per study turns that result into a figure with ``plot_curves``:

    result = mg.study.run("depth")
    figure = draw_study(result)        # a matplotlib Figure; Jupyter shows it inline
    save_study(result, "docs")         # docs/study_depth.md, study_depth.json, depth.png

The figure needs matplotlib (``pip install minigrad[plot]``); without it ``save_study``
still writes the two tables.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from minigrad.study import STUDIES, StudyResult, run
from minigrad.study.depth import series
from minigrad.study.ln import MODELS as LN_MODELS
from minigrad.viz.plots import plot_curves, save_figure


def draw_depth(result: StudyResult):
    """Four panels against depth: MLP |dW1|, rank share, first-block |dWq|, token-gradient
    cosine; each with and without shortcuts."""

    def curves(models, key):
        found = {}
        for model in models:
            for shortcuts in (False, True):
                values = series(result.rows, model, shortcuts, key)
                label = f"{model}, {'with' if shortcuts else 'no'} shortcuts"
                found[label] = (list(values), list(values.values()))
        return found

    transformers = ("post-LN", "pre-LN")
    panels = [
        {
            "curves": curves(["MLP"], "|dW1|"),
            "title": "tanh MLP: first layer |dL/dW1|",
            "xlabel": "depth",
            "logx": True,
            "logy": True,
        },
        {
            "curves": curves(transformers, "share"),
            "title": "rank collapse: top singular share",
            "xlabel": "blocks",
            "logx": True,
        },
        {
            "curves": curves(transformers, "|dWq|"),
            "title": "first block |dL/dW_Q|",
            "xlabel": "blocks",
            "logx": True,
            "logy": True,
        },
        {
            "curves": curves(transformers, "cos"),
            "title": "cosine between token gradients",
            "xlabel": "blocks",
            "logx": True,
        },
    ]
    return plot_curves(panels, title="depth at initialization: with and without shortcuts")


def draw_ln(result: StudyResult):
    """The last layer's FFN |dW2| against depth, |dW2| per layer of the deepest model, and
    (when the study trained) the copy-task loss with and without warm-up."""

    def curve(part, model, x_key):
        chosen = [r for r in result.rows if r["part"] == part and r["model"] == model]
        return [r[x_key] for r in chosen], [r["|dW2|"] for r in chosen]

    panels = [
        {
            "curves": {m: curve("last layer vs depth", m, "layers") for m, _ in LN_MODELS},
            "title": "last layer's FFN |dL/dW2| at init",
            "xlabel": "layers L",
            "logx": True,
            "logy": True,
            "plain_ticks": True,
        },
        {
            "curves": {m: curve("per layer", m, "layer") for m, _ in LN_MODELS},
            "title": "FFN |dL/dW2| per layer (deepest model)",
            "xlabel": "layer",
            "logy": True,
            "plain_ticks": True,
        },
    ]
    if result.curves:  # the training runs' losses, one per step
        panels.append(_loss_panel(result.curves, "copy task, lr 1e-3"))
    return plot_curves(panels, title="LayerNorm placement (Xiong et al. 2020)")


def _loss_panel(losses: dict, title: str) -> dict:
    """A panel of training losses, one curve per run, against the step (from 1)."""
    return {
        "curves": {k: (list(range(1, len(v) + 1)), v) for k, v in losses.items()},
        "title": title,
        "xlabel": "step",
        "ylabel": "loss",
        "logy": True,
    }


def draw_paths(result: StudyResult):
    """Against the path length k: the gradient along one path, how many paths there are,
    and the gradient mass C(n,k)|g_k| they carry."""
    rows, n = result.rows, result.settings["n"]
    ks = [row["k"] for row in rows]
    models = ("post-LN", "pre-LN")
    total = sum(row["paths C(n,k)"] for row in rows)
    panels = [
        {
            "curves": {m: (ks, [row[f"{m} |g_k|"] for row in rows]) for m in models},
            "title": "gradient along one path of length k",
            "xlabel": "k (branches on the path)",
            "ylabel": "|dL/dx|",
            "logy": True,
        },
        {
            "curves": {"Binomial(n, 1/2)": (ks, [row["paths C(n,k)"] / total for row in rows])},
            "title": f"share of the {total} paths with length k",
            "xlabel": "k",
            "kind": "bar",
        },
        {
            "curves": {m: (ks, [row[f"{m} mass"] for row in rows]) for m in models},
            "title": "gradient mass C(n,k)|g_k|",
            "xlabel": "k",
            "logy": False,
        },
    ]
    return plot_curves(panels, title=f"paths through {n} branches (Veit et al. 2016)")


def draw_scale(result: StudyResult):
    """|dL/dx| / |dL/dy| against lambda (shortcuts only, lambda^n, all paths), and the
    copy-task loss for each trained lambda."""
    rows, n = result.rows, result.settings["n"]
    shortcut_rows = [r for r in rows if r["quantity"].startswith("shortcuts only")]
    all_rows = [r for r in rows if r["quantity"].startswith("all paths")]
    lambdas = [r["lambda"] for r in shortcut_rows]
    panels = [
        {
            "curves": {
                "shortcuts only": (lambdas, [r["measured"] for r in shortcut_rows]),
                f"lambda^{n}": (lambdas, [r["prediction"] for r in shortcut_rows]),
                "all paths": (lambdas, [r["measured"] for r in all_rows]),
            },
            "title": "|dL/dx| / |dL/dy| at init",
            "xlabel": "lambda",
            "logy": True,
        },
        _loss_panel(result.curves, "copy task, pre-LN"),
    ]
    return plot_curves(panels, title="shortcut scaled by lambda: y = lambda x + F(LN(x))")


def draw_time(result: StudyResult):
    """|dL/dx_t| against the distance T-1-t from the loss, one curve per model."""
    panel = {
        "curves": {m: (list(range(len(c))), c) for m, c in result.curves.items()},
        "title": "|dL/dx_t|, loss on the last step",
        "xlabel": "distance T-1-t",
        "ylabel": "|dL/dx_t|",
        "logy": True,
    }
    return plot_curves(
        [panel], title="gradient through time at initialization", width=7.0, height=4.4
    )


def draw_scaling(result: StudyResult):
    """Against d_k, with and without 1/sqrt(d_k): the scores' spread, the largest weight of
    a row, the row entropy, and the gradient that reaches Q (median row and rms)."""

    def curve(scaled, key):
        chosen = [r for r in result.rows if r["scaled"] == scaled]
        return [r["d_k"] for r in chosen], [r[key] for r in chosen]

    def both(key):
        return {"S = Q K^T": curve(False, key), "S = Q K^T / sqrt(d_k)": curve(True, key)}

    gradient = {
        f"{label}, {kind}": curve(scaled, f"{kind} |dL/dQ_i|")
        for scaled, label in ((False, "unscaled"), (True, "scaled"))
        for kind in ("median", "rms")
    }
    panels = [
        {"curves": both("std(S)"), "title": "std(S)", "xlabel": "d_k", "logx": True,
         "logy": True},
        {"curves": both("max A"), "title": "mean largest weight of a row", "xlabel": "d_k",
         "logx": True},
        {"curves": both("entropy"), "title": "mean row entropy", "xlabel": "d_k",
         "logx": True},
        {"curves": gradient, "title": "|dL/dQ_i| per row", "xlabel": "d_k", "logx": True,
         "logy": True},
    ]  # fmt: skip
    return plot_curves(panels, title="softmax(Q K^T) at initialization, with and without sqrt(d_k)")


def draw_heads(result: StudyResult):
    """The held-out accuracy and the training loss of every run against the step."""
    every = result.settings["eval every"]
    accuracy = {
        label.removesuffix(" accuracy"): ([every * (i + 1) for i in range(len(v))], v)
        for label, v in result.curves.items()
        if label.endswith(" accuracy")
    }
    losses = {
        label.removesuffix(" loss"): v
        for label, v in result.curves.items()
        if label.endswith(" loss")
    }
    panels = [
        {"curves": accuracy, "title": "held-out accuracy", "xlabel": "step"},
        _loss_panel(losses, "training loss"),
    ]
    return plot_curves(panels, title="y_t = f(x_{t-1}, x_{t-3}) at equal d_model: 1, 2, 4 heads")


def draw_qk(result: StudyResult):
    """The training loss of each run, and the weight a position gives its left neighbour,
    its right one and itself, for separate and tied W_Q, W_K."""
    sides = ("left", "right", "self")
    neighbours = {
        row["W_K"]: ([f"{row['W_K']}\n{side}" for side in sides],
                     [row[f"A to {side}"] for side in sides])
        for row in result.rows
    }  # fmt: skip
    panels = [
        _loss_panel(result.curves, "training loss, y_i = x_{i-1}"),
        {"curves": neighbours, "title": "weight on x_{i-1}, x_{i+1} and x_i", "kind": "bar"},
    ]
    return plot_curves(panels, title="separate W_Q, W_K against tied (S = S^T)", width=5.4)


def draw_sequential(result: StudyResult):
    """Against T: the graph depth (ops in a row), the bytes saved for backward, and the
    step time (forward + backward), one curve per model."""
    models = list(dict.fromkeys(row["model"] for row in result.rows))

    def curves(key):
        chosen = {m: [r for r in result.rows if r["model"] == m] for m in models}
        return {m: ([r["T"] for r in rows], [r[key] for r in rows]) for m, rows in chosen.items()}

    panels = [
        {"curves": curves(key), "title": title, "xlabel": "T", "logx": True, "logy": True}
        for key, title in (
            ("graph depth", "graph depth: ops in a row"),
            ("saved KB", "saved for backward (KB)"),
            ("step ms", "forward + backward (ms)"),
        )
    ]
    return plot_curves(panels, title="recurrence is sequential: cost against sequence length T")


def draw_bottleneck(result: StudyResult):
    """Token accuracy against length, one panel per task, one curve per model."""
    tasks = list(dict.fromkeys(row["task"] for row in result.rows))
    models = list(dict.fromkeys(row["model"] for row in result.rows))
    panels = []
    for task in tasks:
        rows = [r for r in result.rows if r["task"] == task]
        curves = {}
        for model in models:
            chosen = [r for r in rows if r["model"] == model]
            curves[model] = ([r["length"] for r in chosen], [r["token acc"] for r in chosen])
        lengths = [r["length"] for r in rows]
        wide = max(lengths) >= 8 * min(lengths)  # a log axis for 4 .. 32, not for 2 .. 8
        panels.append({"curves": curves, "title": task, "xlabel": "length",
                       "ylabel": "token accuracy", "logx": wide})  # fmt: skip
    return plot_curves(panels, title="the last-state bottleneck: accuracy against length")


DRAWINGS = {
    "depth": draw_depth,
    "ln": draw_ln,
    "paths": draw_paths,
    "scale": draw_scale,
    "time": draw_time,
    "scaling": draw_scaling,
    "heads": draw_heads,
    "qk": draw_qk,
    "sequential": draw_sequential,
    "bottleneck": draw_bottleneck,
}


def draw_study(result: StudyResult):
    """The figure of a study's result (a matplotlib Figure), drawn by its ``DRAWINGS``."""
    if result.name not in DRAWINGS:
        raise ValueError(
            f"minigrad.viz.studies: no figure for study {result.name!r}; one of {sorted(DRAWINGS)}"
        )
    return DRAWINGS[result.name](result)


def has_matplotlib() -> bool:
    """Whether matplotlib is installed (it is needed for the figure only)."""
    return importlib.util.find_spec("matplotlib") is not None


# a figure's file name where the study's own would clash (docs/scaling.png is the step-time
# benchmark's plot)
FIGURE_NAMES = {"scaling": "sqrt_dk"}


def figure_name(name: str) -> str:
    """The file name (without suffix) of study ``name``'s figure: the name itself, or its
    entry in ``FIGURE_NAMES``."""
    return FIGURE_NAMES.get(name, name)


def save_study(result: StudyResult, out_dir: str | Path, figure_format: str = "png") -> list[Path]:
    """Write ``study_<name>.md``, ``study_<name>.json`` and the figure ``<name>.<format>``
    (png, svg or pdf; ``figure_name`` gives the name) under ``out_dir``; return their paths.
    Without matplotlib the figure is left out and the tables are written all the same."""
    files = result.write(out_dir)
    if has_matplotlib():
        figure = draw_study(result)
        path = Path(out_dir) / f"{figure_name(result.name)}.{figure_format}"
        files.append(save_figure(figure, path))
    return files


def make_all_figures(out_dir: str | Path = "docs") -> dict[str, StudyResult]:
    """Run every study at its defaults and write its tables and figure under ``out_dir``."""
    results = {}
    for name in STUDIES:
        results[name] = run(name)
        save_study(results[name], out_dir)  # each as it finishes
    return results
