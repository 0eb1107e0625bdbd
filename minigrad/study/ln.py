"""Study ``ln``: where LayerNorm sits (Xiong et al. 2020, "On Layer Normalization in the
Transformer Architecture").

    post-LN:  x = LN(x + F(x))          pre-LN:  x = x + F(LN(x)),  then LN once at the end

Xiong et al. bound the gradient of the last layer's FFN weight W^{2,L} at initialization:
for post-LN it does not depend on the depth L; for pre-LN it shrinks like 1/sqrt(L), because
the final LayerNorm divides by the norm of a residual stream that grows like sqrt(L). Large
gradients near the output are why post-LN needs a learning-rate warm-up, they argue, and
pre-LN does not.

Measured here at init, width 64, on a small GPT-style language model: the gradient norm of
every layer's FFN weights for L = 2 .. 12 layers, averaged (geometrically) over seeds and
batches of the copy task; then short training runs at lr 1e-3 with and without warm-up.
"""

from __future__ import annotations

import numpy as np

import minigrad as mg
import minigrad.nn.functional as F
from minigrad import nn
from minigrad.study.blocks import TinyLM
from minigrad.study.common import (
    Check,
    StudyResult,
    above,
    below,
    linear_fit,
    timed,
)
from minigrad.study.copytask import copy_batch, final_loss, train_copy

VOCAB, COPY_LENGTH = 10, 8
MODELS = (("post-LN", False), ("pre-LN", True))


def build_model(layers: int, norm_first: bool, d_model: int, n_heads: int) -> TinyLM:
    blocks = [nn.TransformerBlock(d_model, n_heads, norm_first=norm_first) for _ in range(layers)]
    return TinyLM(VOCAB, 2 * COPY_LENGTH + 1, d_model, blocks, final_norm=norm_first)


def ffn_gradients(
    layers: int,
    norm_first: bool,
    seed: int,
    batches: int,
    d_model: int,
    n_heads: int,
    batch: int = 16,
) -> np.ndarray:
    """|dL/dW| of each layer's FFN weights at init, shape (layers, 2): columns fc1, fc2
    (W^1 and W^2 of the paper), geometric mean over ``batches`` copy-task batches; and the
    mean norm of a token's residual stream after the last block (what the final LN divides
    by in pre-LN)."""
    mg.manual_seed(seed)
    model = build_model(layers, norm_first, d_model, n_heads)
    rng = np.random.default_rng(seed)
    logs, streams = [], []
    for _ in range(batches):
        x, y = copy_batch(rng, batch, COPY_LENGTH, VOCAB)
        model.zero_grad()
        stream = model.residual_stream(mg.tensor(x))
        logits = model.logits(stream)
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), mg.tensor(y.reshape(-1)))
        loss.backward()
        norms = [
            [b.ffn.fc1.weight.grad.norm_value(), b.ffn.fc2.weight.grad.norm_value()]
            for b in model.blocks
        ]
        logs.append(np.log(norms))
        streams.append(np.linalg.norm(stream.array, axis=-1).mean())
    return np.exp(np.mean(logs, axis=0)), float(np.mean(streams))


def ln_checks(rows: list[dict]) -> list[Check]:
    """The criterion on the table rows (pure: testable on made-up rows)."""
    last = {
        model: {
            r["layers"]: r["|dW2|"]
            for r in rows
            if r["part"] == "last layer vs depth" and r["model"] == model
        }
        for model, _ in MODELS
    }
    post = list(last["post-LN"].values())
    depths = list(last["pre-LN"])
    slope, _, _ = linear_fit(np.log(depths), np.log(list(last["pre-LN"].values())))
    per_layer = [r["|dW2|"] for r in rows if r["part"] == "per layer" and r["model"] == "post-LN"]
    checks = [
        below(
            "post-LN: max/min of the last layer's |dW2| over depth",
            max(post) / min(post),
            1.25,
            "flat; twins: 1.02",
        ),
        below(
            "pre-LN: log-log slope of the last layer's |dW2| against depth",
            slope,
            -0.05,
            "falls; twins: -0.14",
        ),
        below("pre-LN: that slope against the paper's asymptote -0.5", slope, -0.4, required=False),
        above(
            "post-LN: last layer's |dW2| / first layer's (deepest model)",
            per_layer[-1] / per_layer[0],
            1.5,
            "paper: rises towards the output",
            required=False,
        ),
    ]
    trained = {(r["model"], r["warm-up"]): r["loss"] for r in rows if r["part"] == "training"}
    if trained:
        finite = all(np.isfinite(v) for v in trained.values())
        checks += [
            above(
                "post-LN: loss without warm-up minus with",
                trained[("post-LN", False)] - trained[("post-LN", True)],
                0.0,
                "post-LN needs the warm-up",
                required=False,
            ),
            below(
                "pre-LN: loss without warm-up / with",
                trained[("pre-LN", False)] / trained[("pre-LN", True)],
                1.1,
                "pre-LN does not need it",
                required=False,
            ),
            Check("every training run stays finite", finite, "yes", finite),
        ]
    return checks


def ln_notes(rows: list[dict]) -> list[str]:
    """Why the measured numbers differ from the paper's, from the numbers themselves."""
    stream = {
        r["layers"]: r["|x_L|"]
        for r in rows
        if r["part"] == "last layer vs depth" and r["model"] == "pre-LN"
    }
    shallow, deep = min(stream), max(stream)
    growth = stream[deep] / stream[shallow]
    predicted = float(np.log(1 / growth) / np.log(deep / shallow))
    notes = [
        f"|x_L| is a token's residual-stream norm after the last block. In pre-LN it grows "
        f"only {growth:.2f}x from {shallow} to {deep} layers, not sqrt({deep}/{shallow}) = "
        f"{np.sqrt(deep / shallow):.2f}x as the paper's analysis assumes: token plus position "
        "embeddings (N(0, 1) entries, |x_0| ~ sqrt(2 d)) dominate the stream, and each "
        "branch adds little at PyTorch's default init. The final LN divides the gradient by "
        f"|x_L|, which predicts a slope of {predicted:.3f}, close to the measured one, "
        "rather than -0.5; the L^-0.5 law needs the branches to dominate the stream, "
        "which takes far more layers (or larger branch outputs) than here.",
        "Post-LN re-normalises after every sublayer, so every layer sees the same scale: "
        "flat across depth and across layers at this size; the per-layer rise of the paper "
        "(its Figure 3) does not show here.",
    ]
    trained = {(r["model"], r["warm-up"]): r["loss"] for r in rows if r["part"] == "training"}
    if trained:
        post_no, pre_no = (trained[(m, False)] for m, _ in MODELS)
        post_warm, pre_warm = (trained[(m, True)] for m, _ in MODELS)
        summary = (
            f"Training: final loss without / with warm-up: post-LN {post_no:.3f} / "
            f"{post_warm:.3f}, pre-LN {pre_no:.3f} / {pre_warm:.3f}. "
        )
        if post_no <= post_warm:
            summary += (
                "Post-LN does not need the warm-up here: at lr 1e-3 with Adam a 6-layer d=32 "
                "model trains without it, and in so short a run the warm-up only delays "
                "learning. Xiong et al. saw post-LN fail without warm-up on d=512 "
                "translation models, whose output-layer gradients and first Adam steps are "
                "far larger; this toy model is not in that regime."
            )
        else:
            summary += "Post-LN ends better with the warm-up than without, as the paper predicts."
        notes.append(summary)
    return notes


@timed
def ln(
    seeds=(0, 1, 2),
    depths=(2, 4, 6, 8, 10, 12),
    batches: int = 2,
    d_model: int = 64,
    n_heads: int = 4,
    train_steps: int = 150,
    train_layers: int = 6,
    train_d_model: int = 32,
    warmup: int = 50,
    lr: float = 1e-3,
) -> StudyResult:
    """Per-layer FFN gradient norms at init against depth, post-LN vs pre-LN, then short
    copy-task runs (``train_steps`` Adam steps at ``lr``, with and without ``warmup``);
    ``train_steps=0`` skips the runs."""
    rows, per_layer = [], {}
    for model, norm_first in MODELS:
        for layers in depths:
            runs = [
                ffn_gradients(layers, norm_first, seed, batches, d_model, n_heads) for seed in seeds
            ]
            norms = np.exp(np.mean([np.log(grads) for grads, _ in runs], axis=0))
            rows.append(
                {
                    "part": "last layer vs depth",
                    "model": model,
                    "layers": layers,
                    "|dW1|": norms[-1, 0],
                    "|dW2|": norms[-1, 1],
                    "|x_L|": float(np.mean([s for _, s in runs])),
                }
            )
            per_layer[model] = norms
    for model, _ in MODELS:
        for index, (fc1, fc2) in enumerate(per_layer[model]):
            rows.append(
                {
                    "part": "per layer",
                    "model": model,
                    "layers": max(depths),
                    "layer": index + 1,
                    "|dW1|": fc1,
                    "|dW2|": fc2,
                }
            )

    curves = {}
    if train_steps:
        for model, norm_first in MODELS:
            for warm in (False, True):
                mg.manual_seed(seeds[0])
                network = build_model(train_layers, norm_first, train_d_model, n_heads)
                losses = train_copy(
                    network,
                    train_steps,
                    lr=lr,
                    warmup=warmup if warm else 0,
                    seed=seeds[0],
                    length=COPY_LENGTH,
                    vocab=VOCAB,
                )
                curves[f"{model}, {'warm-up' if warm else 'no warm-up'}"] = losses
                rows.append(
                    {
                        "part": "training",
                        "model": model,
                        "layers": train_layers,
                        "warm-up": warm,
                        "loss": final_loss(losses),
                    }
                )

    return StudyResult(
        name="ln",
        title="post-LN vs pre-LN: gradient norms at init, and warm-up",
        claim=(
            "At init the last layer's FFN weight gradient does not depend on depth for "
            "post-LN and shrinks with depth for pre-LN (like L^-0.5 asymptotically); post-LN "
            "gradients grow towards the output, which is why post-LN needs warm-up."
        ),
        criterion=(
            "Required: post-LN last-layer |dW2| max/min over depth < 1.25; pre-LN log-log "
            "slope < -0.05. Reported without being required: the paper's -0.5 slope, post-LN "
            "rising with layer index, and whether warm-up matters in the training runs."
        ),
        columns=["part", "model", "layers", "layer", "warm-up", "|dW1|", "|dW2|", "|x_L|", "loss"],
        rows=rows,
        checks=ln_checks(rows),
        settings={
            "seeds": list(seeds),
            "depths": list(depths),
            "batches": batches,
            "d_model": d_model,
            "n_heads": n_heads,
            "task": "copy, length 8, vocab 10",
            "train": f"{train_layers} layers, d={train_d_model}, Adam lr={lr}, "
            f"{train_steps} steps, warm-up {warmup} steps (linear)",
        },
        notes=ln_notes(rows),
        curves=curves,
    )
