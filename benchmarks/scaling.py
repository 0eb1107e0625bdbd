"""Step time of a toy GPT as it grows: layers (1 to 12), width (32 to 512) and sequence
length (16 to 512), minigrad and PyTorch side by side.

    python benchmarks/scaling.py                # all three sweeps, plot to docs/scaling.png
    python benchmarks/scaling.py --sweeps layers --steps 3

Each point starts from the base model below and changes one thing; both frameworks train the
same model on the same batches (see train_step.py), timed alternately.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from benchmarks.train_step import Setting, run  # noqa: E402

BASE = Setting(vocab=64, T=64, d=64, heads=4, layers=2, batch=8)
SWEEPS = {
    "layers": ("layers", [1, 2, 4, 8, 12]),
    "width": ("d", [32, 64, 128, 256, 512]),
    "length": ("T", [16, 32, 64, 128, 256, 512]),
}


def sweep(name: str, steps: int, warmup: int, device: str, torch) -> list[dict]:
    field, values = SWEEPS[name]
    rows = []
    for value in values:
        setting = dataclasses.replace(BASE, **{field: value})
        row = run(setting, steps, warmup, device, torch)
        row[field] = value
        rows.append(row)
        ratio = f"{row['ratio']:.2f}x" if "ratio" in row else "-"
        torch_ms = f"{row['torch_ms']:.1f}" if "torch_ms" in row else "-"
        print(f"| {name} | {field}={value} | {row['minigrad_ms']:.1f} | {torch_ms} | {ratio} |")
    return rows


def plot(results: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(results), figsize=(4.2 * len(results), 3.6))
    axes = [axes] if len(results) == 1 else axes
    for ax, (name, rows) in zip(axes, results.items()):
        field = SWEEPS[name][0]
        xs = [row[field] for row in rows]
        ax.plot(xs, [row["minigrad_ms"] for row in rows], "o-", label="minigrad")
        if "torch_ms" in rows[0]:
            ax.plot(xs, [row["torch_ms"] for row in rows], "s--", label="PyTorch (eager)")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel({"layers": "layers", "d": "d_model", "T": "sequence length"}[field])
        ax.set_ylabel("ms per AdamW step")
        ax.set_title(f"{name} (base: d=64, T=64, 2 layers, batch 8)", fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweeps", nargs="+", default=list(SWEEPS), choices=list(SWEEPS))
    # 15 steps: about 12 timed in 5 blocks a point (with 5, 4 in 2 blocks, and a point's
    # ratio moved by 10-20% between runs; one small model came out at 1.71x)
    parser.add_argument("--steps", type=int, default=15)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--out", default=os.path.join("docs", "scaling.png"))
    args = parser.parse_args(argv)
    try:
        import torch
    except ImportError:
        torch = None
    print("| sweep | point | minigrad ms | PyTorch ms | ratio |")
    print("|---|---|---|---|---|")
    results = {
        name: sweep(name, args.steps, args.warmup, args.device, torch) for name in args.sweeps
    }
    with open(os.path.splitext(args.out)[0] + ".json", "w") as f:
        json.dump(results, f, indent=1)
    plot(results, args.out)


if __name__ == "__main__":
    main()
