"""Per-op overhead: forward + backward of small ops (8x8) in minigrad and in PyTorch (CPU).

At this size the arithmetic is nothing; what is measured is the framework's own cost per op:
building the graph node, dispatching, and walking it backward. Both frameworks run in the same
process, interleaved round by round (so that a noisy moment hits both), after a warm-up; each
number is the median over rounds of the mean time per call within a round.

    python benchmarks/op_overhead.py                # the table, in microseconds per op
    python benchmarks/op_overhead.py --markdown     # the same, as a Markdown table

PyTorch is only the yardstick here: minigrad never imports it.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as TF

import minigrad as mg
from minigrad import ops

SIZE = 8


def make_inputs(seed: int = 0) -> dict:
    """The same 8x8 values for both frameworks: x, y, weight (out, in), bias, gamma, beta."""
    rng = np.random.default_rng(seed)
    arrays = {
        name: rng.standard_normal(shape).astype(np.float32)
        for name, shape in [
            ("x", (SIZE, SIZE)),
            ("y", (SIZE, SIZE)),
            ("weight", (SIZE, SIZE)),
            ("bias", (SIZE,)),
            ("gamma", (SIZE,)),
            ("beta", (SIZE,)),
        ]
    }
    targets = rng.integers(0, SIZE, size=SIZE)
    ours = {k: mg.tensor(v, requires_grad=True) for k, v in arrays.items()}
    ours["target"] = mg.tensor(targets)
    theirs = {k: torch.tensor(v, requires_grad=True) for k, v in arrays.items()}
    theirs["target"] = torch.tensor(targets)
    return {"minigrad": ours, "torch": theirs}


# name -> (minigrad forward, torch forward); each takes the dict of inputs
OPS: dict[str, tuple[Callable, Callable]] = {
    "add": (lambda t: t["x"] + t["y"], lambda t: t["x"] + t["y"]),
    "mul": (lambda t: t["x"] * t["y"], lambda t: t["x"] * t["y"]),
    "matmul": (lambda t: t["x"] @ t["y"], lambda t: t["x"] @ t["y"]),
    "sum": (lambda t: t["x"].sum(), lambda t: t["x"].sum()),
    "softmax": (lambda t: ops.softmax(t["x"], -1), lambda t: TF.softmax(t["x"], -1)),
    "relu": (lambda t: t["x"].relu(), lambda t: t["x"].relu()),
    "gelu": (lambda t: ops.gelu(t["x"]), lambda t: TF.gelu(t["x"])),
    "linear": (
        lambda t: ops.linear(t["x"], t["weight"], t["bias"]),
        lambda t: TF.linear(t["x"], t["weight"], t["bias"]),
    ),
    "layer_norm": (
        lambda t: ops.layer_norm(t["x"], (SIZE,), t["gamma"], t["beta"]),
        lambda t: TF.layer_norm(t["x"], (SIZE,), t["gamma"], t["beta"]),
    ),
    "cross_entropy": (
        lambda t: ops.cross_entropy(t["x"], t["target"]),
        lambda t: TF.cross_entropy(t["x"], t["target"]),
    ),
}


def step_function(forward: Callable, inputs: dict, framework: str) -> Callable[[], None]:
    """One forward + backward of the op, from a fixed upstream gradient; grads cleared."""
    leaves = [t for t in inputs.values() if t.requires_grad]
    out = forward(inputs)
    if framework == "minigrad":
        upstream = mg.ones_like(out.detach()) if out.numel() > 1 else None
    else:
        upstream = torch.ones_like(out) if out.numel() > 1 else None

    def step() -> None:
        for leaf in leaves:
            leaf.grad = None
        forward(inputs).backward(upstream)

    return step


def time_calls(step: Callable[[], None], number: int) -> float:
    """Mean seconds per call over ``number`` back-to-back calls."""
    start = time.perf_counter()
    for _ in range(number):
        step()
    return (time.perf_counter() - start) / number


def measure(name: str, rounds: int, number: int, warmup: int) -> tuple[float, float]:
    """Median microseconds per forward+backward of op ``name``: (minigrad, torch)."""
    inputs = make_inputs()
    steps = {
        framework: step_function(OPS[name][i], inputs[framework], framework)
        for i, framework in enumerate(("minigrad", "torch"))
    }
    for step in steps.values():
        time_calls(step, warmup)
    samples: dict[str, list[float]] = {"minigrad": [], "torch": []}
    for _ in range(rounds):  # interleaved: each round times both, back to back
        for framework, step in steps.items():
            samples[framework].append(time_calls(step, number))
    return tuple(statistics.median(samples[f]) * 1e6 for f in ("minigrad", "torch"))


def format_table(rows: list[tuple[str, float, float]], markdown: bool) -> str:
    header = ("op (8x8, fwd+bwd)", "minigrad us", "torch us", "minigrad/torch")
    lines = []
    if markdown:
        lines.append("| " + " | ".join(header) + " |")
        lines.append("|---|---:|---:|---:|")
        for name, ours, theirs in rows:
            lines.append(f"| {name} | {ours:.1f} | {theirs:.1f} | {ours / theirs:.2f} |")
    else:
        lines.append(f"{header[0]:<18} {header[1]:>12} {header[2]:>10} {header[3]:>15}")
        for name, ours, theirs in rows:
            lines.append(f"{name:<18} {ours:>12.1f} {theirs:>10.1f} {ours / theirs:>15.2f}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=21, help="timed rounds per op")
    parser.add_argument("--number", type=int, default=200, help="calls per round")
    parser.add_argument("--warmup", type=int, default=200, help="untimed calls first")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    parser.add_argument("ops", nargs="*", default=list(OPS), help="ops to time (default all)")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    rows = [(name, *measure(name, args.rounds, args.number, args.warmup)) for name in args.ops]
    print(
        f"numpy {np.__version__}, torch {torch.__version__} ({args.threads} thread), "
        f"median of {args.rounds} rounds x {args.number} calls"
    )
    print(format_table(rows, args.markdown))


if __name__ == "__main__":
    main()
