"""Study ``scale``: why the shortcut should be a clean identity (He et al. 2016).

In a pre-LN block nothing but the addition sits on the shortcut: y = lambda * x + F(LN(x)).
Along the shortcuts alone (every branch closed) backward multiplies by lambda once per
sublayer, so after n sublayers

    dL/dx = prod_i lambda_i * dL/dy = lambda^n * g_L

exactly: with lambda = 0.5 and n = 12 that is 0.5^12 = 1/4096, and in binary floating point a
multiplication by 0.5 is exact, so the check is equality. lambda < 1 shrinks the gradient
that reaches early layers exponentially, and a model trains worse in the same steps.

ReZero goes the other way: y = x + alpha * F(x) with alpha = 0 at initialization is exactly
the identity, dy/dx = I + alpha * dF/dx = I, and alpha itself still gets a gradient
(dL/dalpha = <dL/dy, F(x)>), so the branch can switch itself on.
"""

from __future__ import annotations

import numpy as np

import minigrad as mg
from minigrad.study.blocks import ResidualBlock, ReZeroBlock, TinyLM, set_paths
from minigrad.study.common import (
    Check,
    StudyResult,
    above,
    random_input,
    timed,
)
from minigrad.study.copytask import final_loss, train_copy


def shortcut_gradients(
    scale: float, n_blocks: int, seed: int, d_model: int = 64, n_heads: int = 4, length: int = 16
) -> dict[str, float]:
    """Along the shortcuts only and along all paths: |dL/dx| / |dL/dy|, and the largest
    difference between dL/dx along the shortcuts and scale^n * dL/dy, relative to the
    largest entry of scale^n * dL/dy."""
    mg.manual_seed(seed)
    blocks = [
        ResidualBlock(d_model, n_heads, norm_first=True, shortcut_scale=scale).double()
        for _ in range(n_blocks)
    ]
    x = random_input((1, length, d_model))
    upstream = random_input((1, length, d_model), requires_grad=False)

    def input_grad(branches_taken):
        set_paths(blocks, branches_taken)
        x.grad = None
        y = x
        for block in blocks:
            y = block(y)
        y.backward(upstream)
        set_paths(blocks, None)
        return x.grad.array

    predicted = scale ** (2 * n_blocks) * upstream.array
    shortcut_only = input_grad(set())  # no branch taken: the path of shortcuts alone
    every_path = input_grad(None)
    g = np.linalg.norm(upstream.array)
    return {
        "shortcuts": float(np.linalg.norm(shortcut_only) / g),
        "error": float(np.abs(shortcut_only - predicted).max() / np.abs(predicted).max()),
        "all paths": float(np.linalg.norm(every_path) / g),
    }


def rezero_jacobian_error(
    seed: int = 0, d_model: int = 16, n_heads: int = 2, length: int = 4, n_blocks: int = 2
) -> tuple[float, float]:
    """max |dy/dx - I| over the full Jacobian of ReZero blocks at init (one backward per
    output entry), and the smallest |dL/dalpha| for a random loss."""
    mg.manual_seed(seed)
    blocks = [ReZeroBlock(d_model, n_heads).double() for _ in range(n_blocks)]
    x = random_input((1, length, d_model))
    size = length * d_model
    jacobian = np.zeros((size, size))
    for row in range(size):
        basis = np.zeros(size)
        basis[row] = 1.0
        x.grad = None
        y = x
        for block in blocks:
            y = block(y)
        y.backward(mg.tensor(basis.reshape(x.shape), dtype=mg.float64))
        jacobian[row] = x.grad.array.reshape(-1)  # row i: d y_i / dx
    error = float(np.abs(jacobian - np.eye(size)).max())

    for block in blocks:
        block.zero_grad()
    y = x
    for block in blocks:
        y = block(y)
    (y * random_input(y.shape, requires_grad=False)).sum().backward()
    alpha_grads = [abs(float(b.alpha_attn.grad.item())) for b in blocks]
    alpha_grads += [abs(float(b.alpha_ffn.grad.item())) for b in blocks]
    return error, min(alpha_grads)


def train_scaled(
    scale: float, seed: int, steps: int, n_blocks: int, d_model: int, n_heads: int, lr: float
) -> list[float]:
    """Train a pre-LN TinyLM whose shortcuts are scaled by ``scale`` on the copy task."""
    mg.manual_seed(seed)
    length = 8
    blocks = [
        ResidualBlock(d_model, n_heads, norm_first=True, shortcut_scale=scale)
        for _ in range(n_blocks)
    ]
    model = TinyLM(10, 2 * length + 1, d_model, blocks, final_norm=True)
    return train_copy(model, steps, lr=lr, seed=seed, length=length)


def _geometric(values) -> float:
    return float(np.exp(np.mean(np.log(values))))


def scale_checks(rows: list[dict]) -> list[Check]:
    """The criterion on the table rows (pure: testable on made-up rows)."""
    checks = []
    by = {(row["quantity"], row["lambda"]): row for row in rows}
    for (quantity, scale), row in by.items():
        if not quantity.startswith("max |dL/dx - lambda^n"):
            continue
        # a power of two scales without rounding: equality; otherwise n roundings differ
        # from the one rounding of lambda^n by a few ulp
        exact = float(scale) == 2.0 ** round(np.log2(float(scale)))
        expected = "== 0 (exact: a power of two)" if exact else "< 1e-12 (round-off)"
        passed = row["measured"] == 0.0 if exact else row["measured"] < 1e-12
        checks.append(
            Check(
                f"shortcuts only, lambda={scale}: max |dL/dx - lambda^n g_L| / max |lambda^n g_L|",
                row["measured"],
                expected,
                passed,
            )
        )
    half, one = (by[("copy-task loss (last 20 steps)", s)]["measured"] for s in (0.5, 1.0))
    rezero = by[("ReZero: max |dy/dx - I|", "-")]["measured"]
    alpha = by[("ReZero: min |dL/dalpha|", "-")]["measured"]
    checks += [
        above("copy-task loss, lambda=0.5 minus lambda=1", half - one, 0.0, "0.5 trains worse"),
        Check("ReZero at init: max |dy/dx - I|", rezero, "== 0 (exact)", rezero == 0.0),
        above("ReZero at init: min |dL/dalpha|", alpha, 0.0, "alpha can learn"),
    ]
    return checks


@timed
def scale(
    seeds=(0,),
    scales=(1.0, 0.9, 0.5),
    n_blocks: int = 6,
    steps: int = 200,
    train_blocks: int = 4,
    d_model: int = 32,
    n_heads: int = 4,
    lr: float = 1e-3,
) -> StudyResult:
    """Scaled shortcuts lambda * x + F(LN(x)) and ReZero, at init and in a short training run
    (``train_blocks`` blocks of width ``d_model`` for ``steps`` Adam steps at ``lr``).
    Over ``seeds``: the worst error, the geometric mean of ratios, the mean final loss."""
    n = 2 * n_blocks
    rows = []
    for s in scales:
        runs = [shortcut_gradients(s, n_blocks, seed) for seed in seeds]
        rows.append(
            {
                "quantity": "shortcuts only: |dL/dx| / |dL/dy|",
                "lambda": s,
                "measured": _geometric([r["shortcuts"] for r in runs]),
                "prediction": s**n,
            }
        )
        rows.append(
            {
                "quantity": "max |dL/dx - lambda^n dL/dy| (rel., shortcuts only)",
                "lambda": s,
                "measured": max(r["error"] for r in runs),
                "prediction": 0.0,
            }
        )
        rows.append(
            {
                "quantity": "all paths: |dL/dx| / |dL/dy|",
                "lambda": s,
                "measured": _geometric([r["all paths"] for r in runs]),
                "prediction": "-",
            }
        )
    curves = {}
    for s in (1.0, 0.5):
        runs = [train_scaled(s, seed, steps, train_blocks, d_model, n_heads, lr) for seed in seeds]
        curves[f"lambda={s}"] = runs[0]
        rows.append(
            {
                "quantity": "copy-task loss (last 20 steps)",
                "lambda": s,
                "measured": float(np.mean([final_loss(r) for r in runs])),
                "prediction": "lower for 1",
            }
        )
    rezero = [rezero_jacobian_error(seed) for seed in seeds]
    rows.append(
        {
            "quantity": "ReZero: max |dy/dx - I|",
            "lambda": "-",
            "measured": max(error for error, _ in rezero),
            "prediction": 0.0,
        }
    )
    rows.append(
        {
            "quantity": "ReZero: min |dL/dalpha|",
            "lambda": "-",
            "measured": min(alpha for _, alpha in rezero),
            "prediction": "> 0",
        }
    )

    return StudyResult(
        name="scale",
        title="scaled shortcuts and ReZero",
        claim=(
            "Scaling each shortcut by lambda multiplies the gradient along the shortcuts by "
            "prod(lambda) = lambda^n, exactly; lambda = 0.5 trains worse than 1 in the same "
            "steps. ReZero (alpha = 0) is the identity at init: dy/dx = I exactly."
        ),
        criterion=(
            f"Along the shortcuts alone dL/dx equals lambda^n dL/dy (n = {n}) exactly when "
            "lambda is a power of two, to 1e-12 otherwise (round-off); the copy-task loss "
            f"after {steps} steps is higher for lambda = 0.5 than for 1; ReZero's Jacobian "
            "equals I exactly and alpha gets a non-zero gradient."
        ),
        columns=["quantity", "lambda", "measured", "prediction"],
        rows=rows,
        checks=scale_checks(rows),
        settings={
            "seeds": list(seeds),
            "blocks": n_blocks,
            "n": n,
            "d_model (gradients)": 64,
            "train": f"{train_blocks} pre-LN blocks, d={d_model}, Adam lr={lr}, "
            f"{steps} steps, batch 16, copy length 8",
            "dtype (gradients)": "float64",
        },
        notes=[
            "The gradients at init use 6 pre-LN blocks of width 64 in float64; the training "
            "runs use smaller models so that the study finishes in about a minute.",
        ],
        curves=curves,
    )
