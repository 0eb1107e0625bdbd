"""One AdamW training step of a toy GPT: minigrad against its PyTorch twin, side by side.

    python benchmarks/train_step.py                 # tiny, small, medium on the CPU
    python benchmarks/train_step.py --configs tiny --steps 50
    python benchmarks/train_step.py --device cuda   # CuPy against PyTorch CUDA
    python benchmarks/train_step.py --threads 1     # each framework on one thread

Both models start from the same weights and see the same batches; the steps are timed
alternately in one process, in blocks of a few steps (warm-up first, then the median of
many), so that a noisy machine slows both alike; on the CPU each block starts once the other
framework's worker threads have stopped spinning. The table gives ms/step, the ratio
minigrad / PyTorch of the two medians, the quartiles of the block-by-block ratios (how much
that ratio moves within the run: see ``paired_ratio``), how far the two loss curves drift
apart, and the memory each holds for backward (the arrays saved by the ops, each storage
counted once).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from dataclasses import dataclass

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)

import minigrad as mg  # noqa: E402
from minigrad import nn, optim  # noqa: E402
from models import GPT, GPTConfig, next_token_loss  # noqa: E402


@dataclass
class Setting:
    vocab: int
    T: int
    d: int
    heads: int
    layers: int
    batch: int


BLOCK = 4  # steps in a row of one framework before switching to the other
# On the CPU, seconds to wait before each block: after its last product OpenBLAS's worker
# threads spin for about 0.1 s (2^28 cycles) on the core that the other framework needs
# (PyTorch's OpenMP threads, for much less). Without the wait PyTorch's `tiny` steps,
# shorter than that, ran at half their speed (16 against 7-8 ms).
SETTLE_S = 0.25

SETTINGS = {
    "tiny": Setting(vocab=32, T=16, d=32, heads=2, layers=2, batch=8),
    "small": Setting(vocab=64, T=64, d=128, heads=4, layers=4, batch=32),
    "medium": Setting(vocab=256, T=128, d=256, heads=8, layers=6, batch=16),
}


def config_of(s: Setting) -> GPTConfig:
    return GPTConfig(
        vocab_size=s.vocab,
        block_size=s.T,
        d_model=s.d,
        n_heads=s.heads,
        n_layers=s.layers,
        activation="gelu_tanh",
    )


def minigrad_saved_bytes(loss) -> int:
    """Bytes of the distinct arrays the graph of ``loss`` keeps for backward."""
    seen, total = set(), 0
    stack, visited = [loss.grad_fn], set()
    while stack:
        node = stack.pop()
        if node is None or id(node) in visited:
            continue
        visited.add(id(node))
        for array in node.saved_arrays:  # (a saved ndarray's own .data is a memoryview)
            base = array
            while getattr(base, "base", None) is not None:
                base = base.base
            if hasattr(base, "nbytes") and id(base) not in seen:
                seen.add(id(base))
                total += base.nbytes
        stack.extend(getattr(arg, "grad_fn", None) for arg in node.inputs)
    return total


def torch_saved_bytes(torch, model, x, y) -> int:
    storages = {}

    def pack(t):
        storage = t.untyped_storage()
        storages[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(x, y)
    return sum(storages.values())


def sync(device: str) -> None:
    if device == "cuda":
        import cupy

        cupy.cuda.get_current_stream().synchronize()


def paired_ratio(ours: list, theirs: list) -> tuple:
    """How much the ratio minigrad / PyTorch moves within one run: each block of minigrad
    steps is divided by the PyTorch block right after it, and the median of those ratios is
    returned with their quartiles, (median, lower, upper). Neighbouring blocks share the
    machine's slow or fast phase, so the quartiles show the noise that is left."""
    ratios = sorted(a / b for a, b in zip(ours, theirs))
    if not ratios:
        return float("nan"), float("nan"), float("nan")
    if len(ratios) < 4:
        median = statistics.median(ratios)
        return median, ratios[0], ratios[-1]
    lower, median, upper = statistics.quantiles(ratios, n=4)
    return median, lower, upper


PHASES = ("forward", "backward", "optimizer")


def run(
    s: Setting,
    steps: int,
    warmup: int,
    device: str,
    torch,
    phases: bool = False,
    parallel: bool = False,
) -> dict:
    """Time ``steps`` training steps of the GPT described by ``s``, minigrad and PyTorch.
    With ``phases``, each timed step is also split into forward, backward and optimizer step
    (synchronized on the GPU at each boundary), for the row's "phases": {phase: (minigrad
    ms, PyTorch ms)}. With ``parallel``, a third arm trains its own copy of the model through
    ``nn.DataParallel`` (half the batch on each of two threads), for the row's "parallel"
    entry: a row of its own against the same PyTorch steps."""
    mg.manual_seed(0)
    config = config_of(s)
    model = GPT(config).to(device)
    rng = np.random.default_rng(0)
    batches = [
        (rng.integers(0, s.vocab, (s.batch, s.T)), rng.integers(0, s.vocab, (s.batch, s.T)))
        for _ in range(warmup + steps)
    ]

    twin = None
    if torch is not None:
        sys.path.insert(0, os.path.join(ROOT, "tests"))  # the tests' PyTorch twins
        from torch_twins import TorchGPT, load_into_torch

        twin = TorchGPT(config)
        load_into_torch(twin, model)  # t.numpy() copies from the GPU too
        twin = twin.to(device)
        twin_opt = torch.optim.AdamW(twin.parameters(), lr=1e-3, weight_decay=0.01)

    def mg_sync():
        sync(device)

    def torch_sync():
        if device == "cuda":
            torch.cuda.synchronize()

    laps = {}  # per arm, the step in progress: the ends of its phases

    def lap(name, sync_device):
        """With ``phases``, the end of a phase: once the device has finished it."""
        if phases:
            sync_device()
            laps[name].append(time.perf_counter())

    def minigrad_step(name, model, parallel=False):
        """A step of minigrad on ``model`` with an optimizer of its own; with ``parallel``,
        through nn.DataParallel, with the loss of the gathered logits."""
        opt = optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
        halves = nn.DataParallel(model) if parallel else None

        def step(x, y):
            xb, yb = mg.tensor(x, device=device), mg.tensor(y, device=device)
            if parallel:
                logits, _ = halves(xb)
                loss = next_token_loss(logits, yb)
            else:
                _, loss = model(xb, yb)
            lap(name, mg_sync)
            opt.zero_grad()
            loss.backward()
            lap(name, mg_sync)
            opt.step()
            mg_sync()
            return loss.item()

        return step

    def torch_step(x, y):
        xb = torch.from_numpy(x).to(device)
        yb = torch.from_numpy(y).to(device)
        _, loss = twin(xb, yb)
        lap("torch", torch_sync)
        twin_opt.zero_grad()
        loss.backward()
        lap("torch", torch_sync)
        twin_opt.step()
        torch_sync()
        return loss.item()

    steps_of = {"minigrad": minigrad_step("minigrad", model)}
    if parallel:
        copy = GPT(config).to(device)
        copy.load_state_dict(model.state_dict())
        steps_of["parallel"] = minigrad_step("parallel", copy, parallel=True)
    if twin is not None:
        steps_of["torch"] = torch_step

    # Alternate in blocks of BLOCK steps, each after the other arms' worker threads have
    # gone to sleep (SETTLE_S), and time all but the first step of each block (it wakes its
    # own framework's threads).
    times = {name: [] for name in steps_of}  # per arm, every timed step (s)
    losses = {name: [] for name in steps_of}
    blocks = {name: [] for name in steps_of}  # per block, the median of its timed steps
    split = {name: [] for name in steps_of}  # per timed step: [forward, backward, optimizer]
    for start in range(0, len(batches), BLOCK):
        block = batches[start : start + BLOCK]
        for name, step in steps_of.items():
            timed = []
            if device == "cpu":
                time.sleep(SETTLE_S)
            for offset, (x, y) in enumerate(block):
                laps[name] = []
                begin = time.perf_counter()
                losses[name].append(step(x, y))
                end = time.perf_counter()
                if offset > 0 and start + offset >= warmup:
                    timed.append(end - begin)
                    if phases:
                        ends = [begin, *laps[name], end]
                        split[name].append([b - a for a, b in zip(ends, ends[1:])])
            times[name].extend(timed)
            if timed:
                blocks[name].append(statistics.median(timed))

    x, y = batches[0]
    _, loss = model(mg.tensor(x, device=device), mg.tensor(y, device=device))
    row = arm_row("minigrad", times, blocks, losses)
    row["minigrad_saved_mb"] = minigrad_saved_bytes(loss) / 2**20
    if twin is not None:
        xb, yb = torch.from_numpy(x).to(device), torch.from_numpy(y).to(device)
        row["torch_saved_mb"] = torch_saved_bytes(torch, twin, xb, yb) / 2**20
    if parallel:
        row["parallel"] = arm_row("parallel", times, blocks, losses)
    if phases:
        for arm, target in (("minigrad", row), ("parallel", row.get("parallel"))):
            if target is not None:
                target["phases"] = {
                    phase: tuple(
                        1e3 * statistics.median([step[i] for step in split[name]])
                        if split.get(name)
                        else None
                        for name in (arm, "torch")
                    )
                    for i, phase in enumerate(PHASES)
                }
    return row


def arm_row(arm: str, times: dict, blocks: dict, losses: dict) -> dict:
    """One minigrad arm's figures: its median ms and, where PyTorch ran, the ratio, the
    block-by-block quartiles and how far its losses drift from PyTorch's."""
    row = {"minigrad_ms": 1e3 * statistics.median(times[arm])}
    if "torch" in times:
        row["torch_ms"] = 1e3 * statistics.median(times["torch"])
        row["ratio"] = row["minigrad_ms"] / row["torch_ms"]  # the ratio of the two medians
        row["block_ratio"], row["block_low"], row["block_high"] = paired_ratio(
            blocks[arm], blocks["torch"]
        )
        row["loss_drift"] = max(
            (abs(a - b) / abs(b) for a, b in zip(losses[arm], losses["torch"])),
            default=float("nan"),
        )
    return row


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    parser.add_argument("--steps", type=int, default=None, help="timed steps (default by size)")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument(
        "--phases",
        action="store_true",
        help="also split each step into forward, backward and optimizer, side by side",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="threads of each framework (default: each its own choice, two on two cores)",
    )
    parser.add_argument(
        "--parallel",
        action="store_true",
        help="also time minigrad through nn.DataParallel (half the batch on each thread)",
    )
    args = parser.parse_args(argv)

    try:
        import torch
    except ImportError:
        torch = None
        print("PyTorch is not installed: timing minigrad alone")

    if args.threads is not None:
        set_threads(args.threads, torch)
    default_steps = {"tiny": 200, "small": 32, "medium": 16}
    header = (
        "| config | minigrad ms | PyTorch ms | ratio | block ratios (quartiles) "
        "| max loss drift | saved MB minigrad / torch |"
    )
    print(
        f"device {args.device}; threads: minigrad {mg.get_num_threads()}, "
        f"torch {torch.get_num_threads() if torch else '-'}"
    )
    print(header)
    print("|---|---|---|---|---|---|---|")
    rows = {}
    for name in args.configs:
        steps = args.steps or default_steps[name]
        row = rows[name] = run(
            SETTINGS[name], steps, args.warmup, args.device, torch, args.phases, args.parallel
        )
        theirs = f"{row['torch_saved_mb']:.1f}" if torch is not None else "-"
        saved = f"{row['minigrad_saved_mb']:.1f} / {theirs}"
        print_row(name, row, saved)
        if "parallel" in row:
            print_row(f"{name}, DataParallel", row["parallel"], "as above")
    if args.phases:
        print_phases(rows)


def set_threads(count: int, torch) -> None:
    """Each framework on ``count`` threads (minigrad uses at most two). With its helper
    thread off, minigrad leaves NumPy's BLAS to its own threads, so one thread also holds
    BLAS at one (PyTorch's count covers its BLAS)."""
    if count < 1:
        raise SystemExit(f"--threads: expected 1 or more, got {count}")
    mg.set_num_threads(count)
    if count == 1:
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=1, user_api="blas")
    if torch is not None:
        torch.set_num_threads(count)


def print_row(label: str, row: dict, saved: str) -> None:
    if "torch_ms" not in row:
        print(f"| {label} | {row['minigrad_ms']:.2f} | - | - | - | - | {saved} |")
        return
    print(
        f"| {label} | {row['minigrad_ms']:.2f} | {row['torch_ms']:.2f} | {row['ratio']:.2f}x "
        f"| {row['block_low']:.2f}-{row['block_high']:.2f} | {row['loss_drift']:.1e} "
        f"| {saved} |"
    )


def print_phases(rows: dict) -> None:
    """The medians of each phase of the timed steps (the phases of one step need not add up
    to the step's median)."""
    print()
    print("| config | phase | minigrad ms | PyTorch ms | ratio |")
    print("|---|---|---|---|---|")
    for name, row in rows.items():
        arms = [(name, row)]
        if "parallel" in row:
            arms.append((f"{name}, DataParallel", row["parallel"]))
        for label, arm in arms:
            for phase, (ours, theirs) in arm["phases"].items():
                if theirs is None:
                    print(f"| {label} | {phase} | {ours:.2f} | - | - |")
                else:
                    ratio = f"{ours / theirs:.2f}x"
                    print(f"| {label} | {phase} | {ours:.2f} | {theirs:.2f} | {ratio} |")


if __name__ == "__main__":
    main()
