"""Study ``scaling``: why the scores are divided by sqrt(d_k), measured at initialization.

Take queries and keys with independent entries of mean 0 and variance 1 (what a LayerNorm
followed by a variance-keeping projection gives). A score is a sum of d_k such products,

    S_ij = q_i . k_j = sum_c q_ic k_jc,   Var(S_ij) = d_k,

so its spread grows as sqrt(d_k). Softmax of scores that far apart puts almost all the
weight of a row on its largest score, and its Jacobian, dA_ij/dS_il = A_ij (delta_jl - A_il),
is then nearly zero: the gradient that reaches Q through softmax,

    dL/dQ = (dL/dS) K * scale,   dL/dS_ij = A_ij (dL/dA_ij - sum_l A_il dL/dA_il),

vanishes. Dividing by sqrt(d_k) keeps Var(S_ij) = 1 at every d_k. The study measures, for
each d_k, with and without the division: std(S), the mean largest weight of a row, the mean
row entropy (log T for uniform rows, 0 for one-hot rows), and the gradient dL/dQ for
L = <A, G>, a fixed random upstream gradient G = dL/dA (so only softmax stands between it
and Q): the norm of a row dL/dQ_i, its median over rows and its root mean square.

A saturated row is not the same as every row: where a row's two largest scores happen to be
close, softmax is not saturated, and there dL/dQ_i is sqrt(d_k) times larger than with the
division (K is not scaled down). The median row shows the typical row; the root mean square
is carried by the few near-ties.
"""

from __future__ import annotations

import math

import numpy as np

import minigrad as mg
import minigrad.nn.functional as F
from minigrad.study.common import Check, StudyResult, above, below, linear_fit, random_input, timed

D_KS = (4, 8, 16, 32, 64, 128, 256, 512, 1024)


SILENT = 1e-2  # a row whose |dL/dQ_i| is below this gets (almost) no gradient


def attention_at_init(d_k: int, scaled: bool, seed: int, length: int, batch: int) -> dict:
    """One draw of Q, K ~ N(0, 1), (batch, T, d_k), and G ~ N(0, 1), (batch, T, T): the
    scores' spread, the weights' peak and entropy, and the rows of dL/dQ for
    L = <softmax(Q K^T * scale), G>."""
    mg.manual_seed(seed)
    query = random_input((batch, length, d_k))
    key = random_input((batch, length, d_k), requires_grad=False)
    upstream = random_input((batch, length, length), requires_grad=False)  # G = dL/dA
    scale = 1.0 / math.sqrt(d_k) if scaled else 1.0
    scores = (query @ key.transpose(-2, -1)) * scale  # S
    weights = F.softmax(scores, dim=-1)  # A
    (weights * upstream).sum().backward()  # L = <A, G>
    peak = weights.array.max(axis=-1)
    entropy = -(weights.array * np.log(np.maximum(weights.array, 1e-300))).sum(axis=-1)
    row_norms = np.linalg.norm(query.grad.array, axis=-1)  # |dL/dQ_i|, (batch, T)
    return {
        "std(S)": float(scores.array.std()),
        "max A": float(peak.mean()),
        "entropy": float(entropy.mean()),
        "median |dL/dQ_i|": float(np.median(row_norms)),
        "rms |dL/dQ_i|": float(np.sqrt(np.mean(row_norms**2))),
        "silent rows": float(np.mean(row_norms < SILENT)),
    }


def scaling_checks(rows: list[dict]) -> list[Check]:
    """The criterion on the table rows (pure: testable on made-up rows)."""
    plain = {r["d_k"]: r for r in rows if not r["scaled"]}
    scaled = {r["d_k"]: r for r in rows if r["scaled"]}
    small, large = min(plain), max(plain)
    slope, _, _ = linear_fit(np.log(list(plain)), np.log([r["std(S)"] for r in plain.values()]))
    spreads = [r["std(S)"] for r in scaled.values()]
    gradients = [r["median |dL/dQ_i|"] for r in scaled.values()]
    return [
        Check(
            "unscaled: slope of log std(S) against log d_k",
            slope,
            "0.5 +- 0.05 (std(S) = sqrt(d_k))",
            abs(slope - 0.5) < 0.05,
        ),
        above(f"unscaled: mean max A at d_k={large}", plain[large]["max A"], 0.9, "saturated"),
        below(
            f"unscaled: median |dL/dQ_i| at d_k={large} / at d_k={small}",
            plain[large]["median |dL/dQ_i|"] / plain[small]["median |dL/dQ_i|"],
            0.1,
            "the typical row's gradient vanishes",
        ),
        below(
            f"unscaled: rms |dL/dQ_i| at d_k={large} / at d_k={small}",
            plain[large]["rms |dL/dQ_i|"] / plain[small]["rms |dL/dQ_i|"],
            0.1,
            "the whole gradient vanishes",
            required=False,
        ),
        Check(
            "scaled: std(S) at every d_k",
            f"{min(spreads):.3g} .. {max(spreads):.3g}",
            "within 0.8 .. 1.25 (~1)",
            0.8 <= min(spreads) and max(spreads) <= 1.25,
        ),
        below(
            "scaled: max / min median |dL/dQ_i| over d_k",
            max(gradients) / min(gradients),
            10.0,
            "one order of magnitude",
        ),
    ]


@timed
def scaling(seeds=(0, 1, 2), d_ks=D_KS, length: int = 32, batch: int = 32) -> StudyResult:
    """Softmax attention at initialization for each d_k, with and without 1/sqrt(d_k):
    std(S), the mean largest weight per row, the row entropy and the rows of dL/dQ; mean
    over seeds."""
    rows = []
    for scaled in (False, True):
        for d_k in d_ks:
            runs = [attention_at_init(d_k, scaled, seed, length, batch) for seed in seeds]
            row = {"scaled": scaled, "d_k": d_k}
            row.update({key: float(np.mean([run[key] for run in runs])) for key in runs[0]})
            rows.append(row)

    return StudyResult(
        name="scaling",
        title="dividing the scores by sqrt(d_k)",
        claim=(
            "Scores are divided by sqrt(d_k): q . k is a sum of d_k products, so without "
            "the division its spread grows as sqrt(d_k), softmax saturates and the gradient "
            "that reaches Q through it vanishes."
        ),
        criterion=(
            f"Without scaling: std(S) grows as sqrt(d_k) (log-log slope 0.5 +- 0.05), the "
            f"mean largest weight at d_k={max(d_ks)} exceeds 0.9, and the median row's "
            f"|dL/dQ_i| at d_k={max(d_ks)} is below 0.1 of its value at d_k={min(d_ks)}. With "
            "it: std(S) stays within 0.8 .. 1.25 and the median |dL/dQ_i| within a factor of "
            "10 over every d_k."
        ),
        columns=[
            "scaled",
            "d_k",
            "std(S)",
            "max A",
            "entropy",
            "median |dL/dQ_i|",
            "rms |dL/dQ_i|",
            "silent rows",
        ],
        rows=rows,
        checks=scaling_checks(rows),
        settings={
            "seeds": list(seeds),
            "T": length,
            "batch": batch,
            "Q, K, G": "N(0, 1)",
            "loss": "<softmax(Q K^T * scale), G>",
            "dtype": "float64",
        },
        notes=[
            f"Uniform rows have entropy log T = {math.log(length):.3g} and largest weight "
            f"1/T = {1 / length:.3g}; one-hot rows have entropy 0 and largest weight 1.",
            "|dL/dQ_i| is the norm of one row of dL/dQ (one query). With the division it does "
            "not depend on d_k: its d_k entries each have variance |dL/dS_i|^2 / d_k. "
            f"'silent rows' is the share of rows with |dL/dQ_i| < {SILENT:g}.",
            "Without the division the root mean square over rows does not vanish: rows whose "
            "two largest scores nearly tie stay unsaturated, and their gradient carries a "
            "factor sqrt(d_k) from the unscaled K. The gradient is then concentrated on a few "
            "rows while most get none (the 'silent rows' column), which is the saturation the "
            "claim describes; the table reports both.",
        ],
    )
