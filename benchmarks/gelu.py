"""GELU over a million float32 values: minigrad against PyTorch, exact and tanh forms.

NumPy has no erf, so minigrad's exact GELU reads the normal CDF off a table
(``minigrad.fast.activation._normal_cdf_float32``); its tanh form needs one exp. This times each,
forward and backward, on one thread and on two, and prints how far each framework's float32
result is from the same formula in float64 (absolute below 1, relative above).

    python benchmarks/gelu.py                 # 2^20 values, 7 rounds
    python benchmarks/gelu.py --size 196608   # the FFN of `minigrad train`'s default model

Each framework runs in a process of its own (PyTorch's OpenMP threads spin after each op
and would take the second core from minigrad's helper thread), the two alternating round by
round so that a noisy moment of the machine hits both; each number is the median over rounds
of a round's median call. PyTorch is only the yardstick: minigrad never imports it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time

import numpy as np

FORMS = ("none", "tanh")  # PyTorch's names: approximate="none" is the exact GELU
THREADS = (1, 2)


def inputs(size: int) -> tuple[np.ndarray, np.ndarray]:
    """x ~ N(0, 3^2) (values far into both tails) and the upstream gradient."""
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(size) * 3).astype(np.float32)
    return x, rng.standard_normal(size).astype(np.float32)


def _framework(name: str):
    """(set_threads, get_threads, gelu(x, form) -> output with a graph, as_array, tensor(array))."""
    if name == "minigrad":
        sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        import minigrad as mg
        from minigrad import ops

        return (
            mg.set_num_threads,
            mg.get_num_threads,
            lambda x, form: ops.gelu(x, approximate=form),
            lambda t: t.numpy(),
            lambda a, grad: mg.tensor(a, requires_grad=grad),
        )
    import torch

    return (
        torch.set_num_threads,
        torch.get_num_threads,
        lambda x, form: torch.nn.functional.gelu(x, approximate=form),
        lambda t: t.detach().numpy(),
        lambda a, grad: torch.tensor(a, requires_grad=grad),
    )


def measure(name: str, size: int, calls: int) -> dict:
    """One round in this process: median ms per forward and per backward, for each form and
    thread count, and each form's largest error against the same formula in float64
    (absolute where |GELU(x)| < 1, relative above: float32 keeps 7 digits of a big value)."""
    set_threads, get_threads, gelu, as_array, tensor = _framework(name)
    x_array, grad_array = inputs(size)
    x, upstream = tensor(x_array, True), tensor(grad_array, False)
    result = {}
    threads_before = get_threads()
    for threads in THREADS:
        set_threads(threads)
        for form in FORMS:
            forward, backward = [], []
            for _ in range(calls + 1):  # the first call is a warm-up
                x.grad = None
                start = time.perf_counter()
                y = gelu(x, form)
                middle = time.perf_counter()
                y.backward(upstream)
                end = time.perf_counter()
                forward.append(middle - start)
                backward.append(end - middle)
            key = f"{form} {threads}"
            result[key] = (
                statistics.median(forward[1:]) * 1e3,
                statistics.median(backward[1:]) * 1e3,
            )
    set_threads(threads_before)
    for form in FORMS:
        want = reference(form, x_array)
        error = np.abs(as_array(gelu(x, form)) - want) / np.maximum(1.0, np.abs(want))
        result[f"{form} error"] = float(np.max(error))
    return result


def reference(form: str, x: np.ndarray) -> np.ndarray:
    """The GELU of ``form`` in float64, what both frameworks' float32 results are compared
    with: x Phi(x) from math.erf, or the tanh formula."""
    x64 = x.astype(np.float64)
    if form == "none":
        erf = np.vectorize(math.erf, otypes=[np.float64])
        return x64 * 0.5 * (1.0 + erf(x64 / math.sqrt(2.0)))
    return 0.5 * x64 * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x64 + 0.044715 * x64**3)))


def run_round(name: str, size: int, calls: int) -> dict:
    """measure() in a fresh process."""
    child = [sys.executable, os.path.abspath(__file__), "--child", name]
    child += ["--size", str(size), "--calls", str(calls)]
    return json.loads(subprocess.run(child, check=True, capture_output=True, text=True).stdout)


def table(rounds: dict[str, list[dict]], size: int) -> str:
    """Markdown: per form and thread count, ms per call and the minigrad / PyTorch ratio."""
    frameworks = list(rounds)
    lines = [
        f"GELU over {size:,} float32 values, ms per call (median of {len(rounds['minigrad'])} "
        "rounds, each framework in its own process)",
        "",
        "| form | threads | pass | "
        + " | ".join(frameworks)
        + (" | ratio |" if len(frameworks) == 2 else " |"),
        "|---|---|---|" + "---|" * len(frameworks) + ("---|" if len(frameworks) == 2 else ""),
    ]
    for form in FORMS:
        for threads in THREADS:
            for index, phase in enumerate(("forward", "backward")):
                ms = [
                    statistics.median(r[f"{form} {threads}"][index] for r in rounds[f])
                    for f in frameworks
                ]
                row = f"| {_form_name(form)} | {threads} | {phase} | "
                row += " | ".join(f"{v:.2f}" for v in ms)
                lines.append(row + (f" | {ms[0] / ms[1]:.2f}x |" if len(ms) == 2 else " |"))
    lines.append("")
    for form in FORMS:
        errors = ", ".join(f"{f} {rounds[f][0][f'{form} error']:.1e}" for f in frameworks)
        lines.append(f"{_form_name(form)} form, largest error against float64: {errors}")
    return "\n".join(lines)


def _form_name(form: str) -> str:
    return "exact" if form == "none" else "tanh"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1 << 20, help="values per call")
    parser.add_argument("--rounds", type=int, default=7, help="processes per framework")
    parser.add_argument("--calls", type=int, default=15, help="timed calls per round")
    parser.add_argument("--child", choices=["minigrad", "torch"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(measure(args.child, args.size, args.calls)))
        return
    try:
        import torch  # noqa: F401  (only checked here: the rounds import it in their own process)

        frameworks = ["minigrad", "torch"]
    except ImportError:
        frameworks = ["minigrad"]
    rounds = {name: [] for name in frameworks}
    for _ in range(args.rounds):
        for name in frameworks:
            rounds[name].append(run_round(name, args.size, args.calls))
    print(table(rounds, args.size))


if __name__ == "__main__":
    main()
