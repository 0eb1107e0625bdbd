"""The studies of ``minigrad.study``: each runs at tiny settings, its exact checks hold at any
size, its criterion logic says pass or fail correctly on made-up numbers, and
``minigrad.viz.studies`` draws its result.

The full studies (a minute or less each) run from ``minigrad study NAME``; their tables are
in docs/study_*.md.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest
from helpers import check_study_tables

import minigrad as mg
from minigrad.study import STUDIES, Check, StudyResult
from minigrad.study.blocks import GradientGate, ResidualBlock, set_paths
from minigrad.study.common import format_value, linear_fit
from minigrad.study.copytask import IGNORE, copy_batch
from minigrad.study.depth import depth_checks, mean_token_cosine, top_singular_share
from minigrad.study.ln import ln_checks
from minigrad.study.paths import paths_checks
from minigrad.study.scale import scale_checks
from minigrad.study.time import MODELS as TIME_MODELS
from minigrad.study.time import time_checks
from minigrad.viz import studies as study_figures

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

# -- each study at tiny settings -------------------------------------------------------------

TINY = {
    "depth": dict(seeds=(0,), depths=(1, 2), d_model=16, n_heads=2, length=4, batch=1),
    "ln": dict(
        seeds=(0,),
        depths=(1, 2),
        batches=1,
        d_model=16,
        n_heads=2,
        train_steps=2,
        train_layers=1,
        train_d_model=16,
    ),
    "paths": dict(seeds=(0,), n_blocks=2, samples=2, d_model=16, n_heads=2, length=4, batch=1),
    "scale": dict(seeds=(0,), n_blocks=2, steps=2, train_blocks=1, d_model=16, n_heads=2),
    "time": dict(seeds=(0,), length=8, hidden=8, n_heads=2),
    "scaling": dict(seeds=(0,), d_ks=(4, 64), length=8, batch=2),
    "heads": dict(seeds=(0,), head_counts=(1, 2), steps=4, d_model=8, length=6, every=2),
    "qk": dict(seeds=(0,), steps=4, d_model=8, length=6),
    "sequential": dict(lengths=(4, 8), width=8, layers=1, n_heads=2, batch=1, repeats=1),
    "bottleneck": dict(lengths=(2, 3), width=8, steps=2, batch=2, test=4),
}


@functools.cache
def tiny(name: str) -> StudyResult:
    """The study ``name`` at its TINY settings, run once for every test that reads it."""
    return STUDIES[name](**TINY[name])


@pytest.mark.parametrize("name", sorted(STUDIES))
def test_study_runs_small_and_writes_its_tables(name, tmp_path):
    check_study_tables(tiny(name), name, tmp_path, whole_rows=False)


def test_paths_the_path_gradients_sum_to_the_full_gradient():
    result = tiny("paths")
    exact = [c for c in result.checks if "sum of the 16 path gradients" in c.name]
    assert len(exact) == 2 and all(c.passed and c.measured < 1e-12 for c in exact)


def test_scale_shortcut_gradient_is_lambda_to_the_n_and_rezero_is_the_identity():
    result = tiny("scale")
    exact = [c for c in result.checks if "shortcuts only" in c.name or "ReZero" in c.name]
    assert len(exact) == 5 and all(c.passed for c in exact)
    half = next(
        r for r in result.rows if r["quantity"].startswith("shortcuts only") and r["lambda"] == 0.5
    )
    assert half["measured"] == pytest.approx(0.5**4, rel=1e-12)


# -- the figures: minigrad.viz.studies draws a study's result ---------------------------------


@pytest.mark.parametrize(
    "name, panels", [("depth", 4), ("ln", 3), ("paths", 3), ("scale", 2), ("time", 1)]
)
def test_study_figure_is_drawn_and_saved_beside_the_tables(name, panels, tmp_path):
    pytest.importorskip("matplotlib")
    result = tiny(name)

    assert len(study_figures.draw_study(result).axes) == panels
    written = {path.name for path in study_figures.save_study(result, tmp_path)}
    assert written == {f"study_{name}.md", f"study_{name}.json", f"{name}.png"}
    assert (tmp_path / f"{name}.png").read_bytes()[:8] == PNG_MAGIC


def test_time_figure_draws_every_distance_not_only_the_table_rows():
    pytest.importorskip("matplotlib")
    result = tiny("time")
    length = TINY["time"]["length"]

    lines = study_figures.draw_study(result).axes[0].get_lines()
    assert [line.get_label() for line in lines] == list(TIME_MODELS)
    assert all(len(line.get_xdata()) == length for line in lines)
    assert len(result.rows) < length  # the table shows some distances, the figure all


def test_save_study_without_matplotlib_writes_the_tables(monkeypatch, tmp_path):
    monkeypatch.setattr(study_figures, "has_matplotlib", lambda: False)
    written = {path.name for path in study_figures.save_study(tiny("time"), tmp_path)}
    assert written == {"study_time.md", "study_time.json"}


def test_draw_study_names_the_studies_it_can_draw():
    result = StudyResult("nope", "title", "claim", "criterion", [], [], [])
    with pytest.raises(ValueError, match="no figure for study 'nope'"):
        study_figures.draw_study(result)


# -- the pieces the studies are built from ---------------------------------------------------


def test_gradient_gate_keeps_the_value_and_stops_only_its_edge():
    x = mg.randn(3, 4, dtype=mg.float64, requires_grad=True)
    y = GradientGate.apply(x, False) + 2.0 * x
    assert np.array_equal(y.array, 3.0 * x.array)
    y.sum().backward()
    assert np.array_equal(x.grad.array, np.full((3, 4), 2.0))  # only the open edge's 2


@pytest.mark.parametrize("norm_first", [False, True])
def test_set_paths_opens_one_edge_per_sublayer(norm_first):
    mg.manual_seed(0)
    blocks = [ResidualBlock(8, 2, norm_first=norm_first) for _ in range(2)]
    set_paths(blocks, {1, 2})
    assert [b.paths for b in blocks] == [
        [(True, False), (False, True)],
        [(False, True), (True, False)],
    ]
    set_paths(blocks, None)
    assert all(b.paths == [(True, True), (True, True)] for b in blocks)


def test_copy_batch_repeats_the_symbols_after_the_separator():
    x, y = copy_batch(np.random.default_rng(0), batch=3, length=5, vocab=7)
    assert x.shape == y.shape == (3, 11)
    assert np.array_equal(x[:, :5], x[:, 6:]) and (x[:, 5] == 0).all()
    assert (y[:, :5] == IGNORE).all() and np.array_equal(y[:, 5:10], x[:, :5])
    assert ((x[:, :5] >= 1) & (x[:, :5] < 7)).all()


def test_top_singular_share_is_one_for_rank_one_and_small_for_random():
    rng = np.random.default_rng(0)
    rank_one = np.outer(rng.normal(size=6), rng.normal(size=10))[None]
    assert top_singular_share(rank_one) == pytest.approx(1.0)
    assert top_singular_share(rng.normal(size=(2, 6, 10))) < 0.5


def test_mean_token_cosine():
    same = np.tile(np.arange(1.0, 5.0), (1, 3, 1))  # three tokens, one direction
    assert mean_token_cosine(same) == pytest.approx(1.0)
    orthogonal = np.eye(3)[None]
    assert mean_token_cosine(orthogonal) == pytest.approx(0.0)


def test_linear_fit_recovers_a_line():
    slope, intercept, r2 = linear_fit([0, 1, 2, 3], [1.0, -0.4, -1.8, -3.2])
    assert (slope, intercept, r2) == pytest.approx((-1.4, 1.0, 1.0))


def test_result_passes_on_required_checks_only_and_escapes_pipes():
    checks = [Check("a", 1.0, "> 0", True), Check("b |x|", 0.5, "< 0", False, required=False)]
    result = StudyResult("t", "title", "claim", "criterion", ["|g|"], [{"|g|": 2.5e-7}], checks)
    assert result.passed
    assert "\\|g\\|" in result.table_markdown() and "2.50e-07" in result.table_markdown()
    assert "FAIL (reported, not required)" in result.checks_markdown()
    result.checks.append(Check("c", 0.0, "> 0", False))
    assert not result.passed


@pytest.mark.parametrize(
    "value, text",
    [(0.000123, "1.23e-04"), (0.5, "0.5"), (12345.0, "1.23e+04"), (3, "3"), (True, "yes")],
)
def test_format_value(value, text):
    assert format_value(value) == text


# -- the criteria on made-up numbers ---------------------------------------------------------


def depth_rows(plain_fall=1e-8, share_deep=1.0, share_res=0.6, query_fall=1e-10):
    rows = []
    for d in (1, 8, 32):
        frac = math.log2(d) / 5
        rows.append(
            {"model": "MLP", "shortcuts": False, "depth": d, "|dW1|": 300 * plain_fall**frac}
        )
        rows.append({"model": "MLP", "shortcuts": True, "depth": d, "|dW1|": 300 * (1 + frac)})
        for model in ("post-LN", "pre-LN"):
            rows.append(
                {
                    "model": model,
                    "shortcuts": False,
                    "depth": d,
                    "share": 0.7 + (share_deep - 0.7) * min(1, d / 8),
                    "cos": 0.5,
                    "|dWq|": 0.1 * query_fall**frac,
                    "|dWv|": 0.2,
                    "|dL/dX|": 0.02,
                }
            )
            rows.append(
                {
                    "model": model,
                    "shortcuts": True,
                    "depth": d,
                    "share": 0.1 + (share_res - 0.1) * frac,
                    "cos": 0.1,
                    "|dWq|": 0.01,
                    "|dWv|": 0.05,
                    "|dL/dX|": 0.02,
                }
            )
    return rows


def required_pass(checks) -> bool:
    return all(c.passed for c in checks if c.required)


@pytest.mark.parametrize(
    "rows, passes",
    [
        (depth_rows(), True),
        (depth_rows(plain_fall=0.1), False),  # the MLP gradient does not vanish
        (depth_rows(share_deep=0.9), False),  # no rank collapse
        (depth_rows(share_res=0.97), False),  # collapse even with shortcuts
        (depth_rows(query_fall=0.5), False),  # query gradients do not vanish
    ],
)
def test_depth_criterion(rows, passes):
    assert required_pass(depth_checks(rows)) is passes


def paths_rows(slope=-1.4, noise=0.0, n=12):
    rng = np.random.default_rng(0)
    rows = []
    for k in range(n + 1):
        g = math.exp(3 + slope * k + noise * rng.normal())
        row = {"k": k}
        for model in ("post-LN", "pre-LN"):
            row[f"{model} |g_k|"], row[f"{model} mass"] = g, math.comb(n, k) * g
        rows.append(row)
    return rows


@pytest.mark.parametrize(
    "rows, errors, passes",
    [
        (paths_rows(), 1e-16, True),
        (paths_rows(), 1e-3, False),  # path gradients do not add up to the full one
        (paths_rows(slope=0.1), 1e-16, False),  # grows with k, mass peaks at n
        (paths_rows(slope=-0.05), 1e-16, False),  # decays too slowly: mass peaks at n/2
        (paths_rows(noise=3.0), 1e-16, False),  # not linear in k
    ],
)
def test_paths_criterion(rows, errors, passes):
    checks = paths_checks(rows, 12, {"post-LN": errors, "pre-LN": errors})
    assert required_pass(checks) is passes


def scale_rows(error=0.0, loss_half=0.6, rezero=0.0, alpha=0.2):
    rows = [
        {
            "quantity": "max |dL/dx - lambda^n dL/dy| (rel., shortcuts only)",
            "lambda": s,
            "measured": error,
        }
        for s in (1.0, 0.5)
    ]
    rows += [
        {"quantity": "copy-task loss (last 20 steps)", "lambda": 1.0, "measured": 0.1},
        {"quantity": "copy-task loss (last 20 steps)", "lambda": 0.5, "measured": loss_half},
        {"quantity": "ReZero: max |dy/dx - I|", "lambda": "-", "measured": rezero},
        {"quantity": "ReZero: min |dL/dalpha|", "lambda": "-", "measured": alpha},
    ]
    return rows


@pytest.mark.parametrize(
    "rows, passes",
    [
        (scale_rows(), True),
        (scale_rows(error=1e-17), False),  # a power of two must scale exactly
        (scale_rows(loss_half=0.05), False),  # lambda = 0.5 trained better
        (scale_rows(rezero=1e-16), False),
        (scale_rows(alpha=0.0), False),
    ],
)
def test_scale_criterion(rows, passes):
    assert required_pass(scale_checks(rows)) is passes


def ln_rows(post_last=(0.34, 0.35, 0.34), pre_last=(0.25, 0.23, 0.21)):
    rows = []
    for layers, post, pre in zip((2, 6, 12), post_last, pre_last):
        rows.append(
            {"part": "last layer vs depth", "model": "post-LN", "layers": layers, "|dW2|": post}
        )
        rows.append(
            {"part": "last layer vs depth", "model": "pre-LN", "layers": layers, "|dW2|": pre}
        )
    for model, value in (("post-LN", 0.34), ("pre-LN", 0.22)):
        rows += [{"part": "per layer", "model": model, "layer": i, "|dW2|": value} for i in (1, 2)]
    return rows


@pytest.mark.parametrize(
    "rows, passes",
    [
        (ln_rows(), True),
        (ln_rows(post_last=(0.2, 0.35, 0.5)), False),  # post-LN grows with depth
        (ln_rows(pre_last=(0.25, 0.25, 0.26)), False),  # pre-LN does not fall
    ],
)
def test_ln_criterion(rows, passes):
    assert required_pass(ln_checks(rows)) is passes


def time_rows(rnn_far=1e-21, bias3_far=0.3, attention_far=0.08):
    rnn, default, bias1, bias3, attention = TIME_MODELS
    near = {rnn: 3.0, default: 0.9, bias1: 0.9, bias3: 0.9, attention: 8.0}
    one = {**near, attention: 0.06}
    far = {rnn: rnn_far, default: 1e-14, bias1: 1e-6, bias3: bias3_far, attention: attention_far}
    return [{"distance": 0, **near}, {"distance": 1, **one}, {"distance": 63, **far}]


@pytest.mark.parametrize(
    "rows, passes",
    [
        (time_rows(), True),
        (time_rows(rnn_far=1e-3), False),  # the RNN keeps its gradient
        (time_rows(bias3_far=1e-7), False),  # forget bias 3 loses it (and breaks the order)
        (time_rows(attention_far=1e-5), False),  # attention decays with distance
    ],
)
def test_time_criterion(rows, passes):
    assert required_pass(time_checks(rows, 63)) is passes


# -- the command ----------------------------------------------------------------------------


def test_minigrad_study_command_writes_table_json_and_figure(tmp_path, capsys):
    from models.cli import main

    code = main(["study", "time", "--out", str(tmp_path), "--seeds", "0"])

    assert code == 0
    assert {p.name for p in tmp_path.iterdir()} == {"study_time.md", "study_time.json", "time.png"}
    assert "study time: passed" in capsys.readouterr().out


def test_minigrad_study_rejects_an_unknown_study(capsys):
    from models.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(["study", "nope"])
    assert exit_info.value.code == 2
