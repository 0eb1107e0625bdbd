"""The loss curve of a run folder as loss.png (skipped quietly without matplotlib)."""

from __future__ import annotations

from pathlib import Path

from models.run import RunDir


def plot_loss(run: RunDir) -> Path | None:
    """Train loss (every logged step) and validation loss (every evaluation) against step,
    written to ``run.plot_path``; None when matplotlib is not installed or nothing is logged."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        return None
    records = run.read_metrics()
    train = [(r["step"], r["loss"]) for r in records if r.get("kind") == "train"]
    val = [(r["step"], r["val_loss"]) for r in records if r.get("kind") == "eval"]
    if not train:
        return None
    figure = Figure(figsize=(6.0, 3.8), layout="constrained")
    ax = figure.add_subplot()
    ax.plot(*zip(*train), label="train", linewidth=1.0)
    if val:
        ax.plot(*zip(*val), label="val", marker="o", markersize=3)
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy loss")
    ax.set_yscale("log")
    ax.set_title(run.path.name)
    ax.grid(alpha=0.3)
    ax.legend()
    # write beside, then rename: a crash never leaves half a PNG where the last one was
    temporary = run.plot_path.with_name(f".{run.plot_path.name}.tmp.png")
    figure.savefig(temporary, dpi=110)
    temporary.replace(run.plot_path)
    return run.plot_path
