"""Where one training step of the toy GPT spends its time: the split into forward, backward
and optimizer step, then the functions that take the most time (cProfile).

    python benchmarks/profile_step.py --config small
    python benchmarks/profile_step.py --config tiny --device cuda --top 40

The model and the optimizer are the ones of ``benchmarks/train_step.py``. On "cuda" each
phase ends with a synchronize, so the split counts the GPU's work, not only its launch.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from train_step import SETTINGS, config_of  # noqa: E402

import minigrad as mg  # noqa: E402
from minigrad import optim  # noqa: E402
from models import GPT, GPTConfig  # noqa: E402


def sync(device: str) -> None:
    """Wait for the GPU's queued kernels (nothing to wait for on the CPU)."""
    if device == "cuda":
        import cupy

        cupy.cuda.Device().synchronize()


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="small", choices=list(SETTINGS))
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--top", type=int, default=30, help="functions listed")
    parser.add_argument("--sort", default="tottime", choices=["tottime", "cumtime"])
    args = parser.parse_args(argv)

    s = SETTINGS[args.config]
    mg.manual_seed(0)
    model = GPT(GPTConfig(**config_of(s))).to(args.device)
    opt = optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    rng = np.random.default_rng(0)

    def batch():
        x = rng.integers(0, s.vocab, (s.batch, s.T))
        y = rng.integers(0, s.vocab, (s.batch, s.T))
        return mg.tensor(x, device=args.device), mg.tensor(y, device=args.device)

    phases = {"forward": [], "backward": [], "optimizer": []}

    def step(timed: bool) -> None:
        x, y = batch()
        t0 = time.perf_counter()
        _, loss = model(x, y)
        sync(args.device)
        t1 = time.perf_counter()
        opt.zero_grad()
        loss.backward()
        sync(args.device)
        t2 = time.perf_counter()
        opt.step()
        sync(args.device)
        t3 = time.perf_counter()
        if timed:
            for name, seconds in zip(phases, (t1 - t0, t2 - t1, t3 - t2)):
                phases[name].append(seconds)

    for _ in range(3):
        step(timed=False)
    for _ in range(args.steps):  # the split, without the profiler's own cost
        step(timed=True)
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(args.steps):
        step(timed=False)
    profiler.disable()

    total = sum(statistics.median(times) for times in phases.values())
    print(f"{args.config} on {args.device}, median of {args.steps} steps: {1e3 * total:.2f} ms")
    for name, times in phases.items():
        ms = 1e3 * statistics.median(times)
        print(f"  {name:<10} {ms:8.2f} ms  {100 * ms / (1e3 * total):5.1f}%")
    print("(the phase times above are without the profiler; cProfile's own cost is in the list)")
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats(args.sort).print_stats(args.top)
    print(out.getvalue())


if __name__ == "__main__":
    main()
