"""Study ``sequential``: an RNN or LSTM works through a sequence one token after another.

A recurrent layer computes h_t = cell(x_t, h_{t-1}): step t cannot start before step t-1 has
finished, so a sequence of T tokens is T steps in a row, and a stack of L layers at least
T + L - 1 (cell (l, t) waits for (l, t-1) and (l-1, t)). A Transformer encoder layer computes
every position at once (attention is a few matrix products over the whole sequence), so L
layers are L steps in a row, whatever T is. Its price is the T x T attention matrix per head.

Measured here for T from 8 to 256 at equal width, one forward and backward pass of a loss
on every output (L = mean of the outputs squared), for

    RNN           h_t = tanh(W_ih x_t + W_hh h_{t-1} + b)
    LSTM          four gates per step: i, f, o = sigmoid(..), g = tanh(..),
                  c_t = f * c_{t-1} + i * g,  h_t = o * tanh(c_t)
    Transformer   nn.TransformerEncoderLayer (post-LN, FFN 4 * width, no dropout)

with L layers each:

* sequential steps: T + L - 1 for the recurrent ones, L for the Transformer (by the
  equations above);
* graph depth: the longest chain of recorded ops from the input to the loss, counted on the
  autograd graph (``topological_order``): what backward must walk one op after another;
* saved bytes: what every op of the graph saved for backward (``Context.count_saved_bytes``);
* step time: forward + backward, the median of a few runs (``time.perf_counter``).
"""

from __future__ import annotations

import time as clock

import numpy as np

import minigrad as mg
from minigrad import nn
from minigrad.autograd.engine import topological_order
from minigrad.study.common import Check, StudyResult, above, below, linear_fit, timed

MODELS = ("RNN", "LSTM", "Transformer")


def build(model: str, width: int, layers: int, n_heads: int):
    """The module and its forward, x (B, T, width) -> outputs (B, T, width)."""
    if model == "Transformer":
        layer = nn.TransformerEncoderLayer(
            width, n_heads, dim_feedforward=4 * width, dropout=0.0, batch_first=True
        )
        encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        return encoder, encoder
    recurrent = (nn.RNN if model == "RNN" else nn.LSTM)(
        width, width, num_layers=layers, batch_first=True
    )
    return recurrent, lambda x: recurrent(x)[0]


def sequential_steps(model: str, length: int, layers: int) -> int:
    """The fewest steps in a row any schedule needs: T + L - 1, or L for the Transformer."""
    return layers if model == "Transformer" else length + layers - 1


def graph_depth(loss) -> int:
    """The longest chain of recorded ops that ends in ``loss``."""
    order = topological_order(loss.grad_fn)  # each node before the ones it reads
    depth = {}
    for node in reversed(order):  # inputs first
        parents = [getattr(arg, "grad_fn", None) for arg in node.inputs]
        depth[node] = 1 + max((depth[p] for p in parents if p is not None), default=0)
    return depth[loss.grad_fn]


def saved_bytes(loss) -> int:
    """The bytes every op of the graph saved for backward."""
    return sum(node.count_saved_bytes() for node in topological_order(loss.grad_fn))


def measure(model: str, length: int, settings: dict, seed: int) -> dict:
    """Graph depth, saved bytes and the median step time of ``model`` at length T."""
    mg.manual_seed(seed)
    module, forward = build(model, settings["width"], settings["layers"], settings["n_heads"])
    x = mg.randn(settings["batch"], length, settings["width"])

    def loss_of_one_pass():
        return (forward(x) ** 2).mean()

    loss = loss_of_one_pass()
    depth, saved = graph_depth(loss), saved_bytes(loss)
    loss.backward()
    seconds = []
    for _ in range(settings["repeats"]):
        module.zero_grad()
        start = clock.perf_counter()
        loss_of_one_pass().backward()
        seconds.append(clock.perf_counter() - start)
    return {
        "T": length,
        "model": model,
        "sequential steps": sequential_steps(model, length, settings["layers"]),
        "graph depth": depth,
        "saved KB": saved / 1024,
        "step ms": 1000 * float(np.median(seconds)),
        "params": sum(p.numel() for p in module.parameters()),
    }


def column(rows: list[dict], model: str, key: str) -> dict[int, float]:
    """T -> ``key`` for ``model``."""
    return {row["T"]: row[key] for row in rows if row["model"] == model}


def slope(values: dict[int, float]) -> float:
    """The slope of log(value) against log(T): 1 for linear growth, 2 for quadratic."""
    lengths = sorted(values)
    return linear_fit(np.log(lengths), np.log([values[t] for t in lengths]))[0]


def sequential_checks(rows: list[dict]) -> list[Check]:
    """The criterion on the table rows (pure: testable on made-up rows)."""
    depth = {m: column(rows, m, "graph depth") for m in MODELS}
    saved = {m: column(rows, m, "saved KB") for m in MODELS}
    step = {m: column(rows, m, "step ms") for m in MODELS}
    lengths = sorted(depth["LSTM"])
    short, long = lengths[0], lengths[-1]
    checks = [
        above(
            "LSTM: graph depth against T, log-log slope",
            slope(depth["LSTM"]),
            0.9,
            "grows as T: one cell after another",
        ),
        below(
            "Transformer: graph depth at largest T / at smallest",
            depth["Transformer"][long] / depth["Transformer"][short],
            1.01,
            "the same at every T",
        ),
        above(
            f"T = {long}: LSTM graph depth / Transformer's",
            depth["LSTM"][long] / depth["Transformer"][long],
            10,
            "far more steps in a row",
        ),
        above(
            "LSTM: step time against T, log-log slope",
            slope(step["LSTM"]),
            0.7,
            "time grows with T",
        ),
        Check(
            "LSTM step time > Transformer's at every T",
            ", ".join(f"{t}: {step['LSTM'][t] / step['Transformer'][t]:.2f}x" for t in lengths),
            "ratio > 1 at every T",
            all(step["LSTM"][t] > step["Transformer"][t] for t in lengths),
        ),
        Check(
            "the gates' cost: LSTM / RNN saved bytes and step time (at every T)",
            f"saved {min(saved['LSTM'][t] / saved['RNN'][t] for t in lengths):.2f}x .. "
            f"{max(saved['LSTM'][t] / saved['RNN'][t] for t in lengths):.2f}x, time "
            f"{min(step['LSTM'][t] / step['RNN'][t] for t in lengths):.2f}x .. "
            f"{max(step['LSTM'][t] / step['RNN'][t] for t in lengths):.2f}x",
            "both > 1.5x at every T",
            all(saved["LSTM"][t] > 1.5 * saved["RNN"][t] for t in lengths)
            and all(step["LSTM"][t] > 1.5 * step["RNN"][t] for t in lengths),
        ),
    ]
    return checks


@timed
def sequential(
    seeds=(0,),
    lengths=(8, 16, 32, 64, 128, 256),
    width: int = 64,
    layers: int = 2,
    n_heads: int = 4,
    batch: int = 8,
    repeats: int = 5,
) -> StudyResult:
    """Sequential steps, graph depth, saved bytes and step time of an RNN, an LSTM and a
    Transformer encoder of equal width and depth as T grows (the first seed is timed)."""
    settings = dict(width=width, layers=layers, n_heads=n_heads, batch=batch, repeats=repeats)
    seed = seeds[0]
    rows = [measure(model, length, settings, seed) for length in lengths for model in MODELS]
    checks = sequential_checks(rows)
    step = {m: column(rows, m, "step ms") for m in MODELS}
    saved = {m: column(rows, m, "saved KB") for m in MODELS}
    longest = lengths[-1]
    crossing = [t for t in lengths if saved["Transformer"][t] > saved["LSTM"][t]]
    params = {m: next(r["params"] for r in rows if r["model"] == m) for m in MODELS}
    return StudyResult(
        name="sequential",
        title="recurrence is sequential: RNN, LSTM and Transformer as T grows",
        claim=(
            "RNNs and LSTMs process tokens in order, so they cannot be parallelised and "
            "training is slow; the LSTM's gates cost memory and compute."
        ),
        criterion=(
            "The LSTM's graph depth grows as T (log-log slope > 0.9) and the Transformer's "
            "stays the same at every T, over 10x shallower at the largest T; the LSTM's step "
            "time grows with T (slope > 0.7) and is above the Transformer's at every T; the "
            "LSTM saves > 1.5x the RNN's bytes and takes > 1.5x its time at every T."
        ),
        columns=["T", "model", "sequential steps", "graph depth", "saved KB", "step ms"],
        rows=rows,
        checks=checks,
        settings={
            "seed": seed,
            "lengths": list(lengths),
            "width": width,
            "layers": layers,
            "heads": n_heads,
            "batch": batch,
            "repeats": repeats,
            "loss": "mean(output^2)",
            "dtype": "float32",
        },
        notes=[
            "Parameters: " + ", ".join(f"{m} {p}" for m, p in params.items()) + ".",
            "Step time is on this machine's CPU with NumPy: the Transformer's parallelism is "
            "only NumPy's vectorised matrix products, the recurrent layers pay Python's cost "
            "per op T times. At T = "
            f"{longest} the LSTM takes {step['LSTM'][longest]:.0f} ms, the Transformer "
            f"{step['Transformer'][longest]:.0f} ms. Log-log slopes against T (1 is linear, "
            f"2 quadratic): step time LSTM {slope(step['LSTM']):.2f}, Transformer "
            f"{slope(step['Transformer']):.2f}; saved bytes LSTM {slope(saved['LSTM']):.2f}, "
            f"Transformer {slope(saved['Transformer']):.2f} (its T x T attention weights "
            "grow in share as T grows).",
            (
                "The Transformer saves more bytes than the LSTM from T = "
                f"{crossing[0]} on: its attention weights are (B, heads, T, T) per layer."
                if crossing
                else "The Transformer saves fewer bytes than the LSTM at every T measured, "
                "although its attention weights grow as T^2."
            ),
        ],
    )
