"""The studies of the claims made for attention: ``scaling`` (sqrt(d_k)), ``heads`` (one
head against several) and ``qk`` (separate W_Q, W_K against tied ones).

Each runs at quick settings and writes a well-formed table, JSON and figure; the facts that
hold whatever training does are checked exactly (an unscaled score's spread is sqrt(d_k),
tied W_Q = W_K gives S = S^T); each criterion says pass or fail correctly on made-up rows.
The full studies run from ``minigrad study NAME``; their tables are in docs/study_*.md.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest
from helpers import check_study_tables

import minigrad as mg
from minigrad.study import STUDIES, StudyResult
from minigrad.study.copytask import IGNORE
from minigrad.study.heads import (
    TwoRelationModel,
    head_weights,
    heads_checks,
    lookup_table,
    single_input_accuracy,
    steps_to,
    two_back_batch,
)
from minigrad.study.qk import LeftNeighbourModel, asymmetry, left_neighbour_batch, qk_checks
from minigrad.study.scaling import attention_at_init, scaling_checks
from minigrad.viz import studies as study_figures

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

QUICK = {
    "scaling": dict(seeds=(0,), d_ks=(4, 64, 1024), length=16, batch=4),
    "heads": dict(seeds=(0,), head_counts=(1, 2), steps=20, length=8, every=10),
    "qk": dict(seeds=(0,), steps=20, length=6),
}
PANELS = {"scaling": 4, "heads": 2, "qk": 2}
# docs/scaling.png is the step-time benchmark's plot: the study's figure must not replace it
FIGURES = {"scaling": "sqrt_dk.png", "heads": "heads.png", "qk": "qk.png"}


@functools.cache
def quick(name: str) -> StudyResult:
    return STUDIES[name](**QUICK[name])


# -- each study at quick settings: runs, tables, JSON, figure ---------------------------------


@pytest.mark.parametrize("name", sorted(QUICK))
def test_study_runs_quick_and_writes_a_well_formed_table(name, tmp_path):
    assert name in STUDIES
    check_study_tables(quick(name), name, tmp_path)


@pytest.mark.parametrize("name", sorted(QUICK))
def test_study_figure_is_drawn_and_saved(name, tmp_path):
    pytest.importorskip("matplotlib")
    result = quick(name)

    assert len(study_figures.draw_study(result).axes) == PANELS[name]
    figure = FIGURES[name]
    written = {path.name for path in study_figures.save_study(result, tmp_path)}
    assert written == {f"study_{name}.md", f"study_{name}.json", figure}
    assert (tmp_path / figure).read_bytes()[:8] == PNG_MAGIC


def test_minigrad_study_offers_the_new_studies(capsys):
    from models.cli import main

    with pytest.raises(SystemExit):
        main(["study", "--help"])
    usage = capsys.readouterr().out
    assert all(name in usage for name in QUICK)


# -- scaling: what holds at initialization, whatever the seed ---------------------------------


@pytest.mark.parametrize("d_k", [4, 64, 1024])
def test_unscaled_spread_is_sqrt_d_k_and_scaled_spread_is_one(d_k):
    plain = attention_at_init(d_k, scaled=False, seed=0, length=32, batch=8)
    scaled = attention_at_init(d_k, scaled=True, seed=0, length=32, batch=8)

    assert plain["std(S)"] == pytest.approx(math.sqrt(d_k), rel=0.05)
    assert scaled["std(S)"] == pytest.approx(1.0, rel=0.05)
    assert plain["std(S)"] / scaled["std(S)"] == pytest.approx(math.sqrt(d_k), rel=1e-12)


def test_scaling_table_saturates_without_the_division_only():
    rows = quick("scaling").rows
    plain = [r for r in rows if not r["scaled"]]
    scaled = [r for r in rows if r["scaled"]]
    assert [r["d_k"] for r in plain] == [r["d_k"] for r in scaled] == [4, 64, 1024]
    assert plain[0]["max A"] < plain[1]["max A"] < plain[2]["max A"]
    assert plain[0]["entropy"] > plain[1]["entropy"] > plain[2]["entropy"]
    assert all(0.0 < r["entropy"] <= math.log(16) + 1e-12 for r in rows)
    assert all(1 / 16 <= r["max A"] <= 1.0 for r in rows)


def test_scaling_gradient_to_q_is_the_softmax_jacobian_times_k():
    """attention_at_init's autograd gradient against dL/dQ = scale (A * (G - rowsum(A G))) K,
    on the same seeded draws."""
    d_k, length, batch = 8, 5, 2
    measured = attention_at_init(d_k, scaled=True, seed=3, length=length, batch=batch)
    mg.manual_seed(3)
    query, key, upstream = (
        mg.randn(*shape, dtype=mg.float64).array
        for shape in [(batch, length, d_k), (batch, length, d_k), (batch, length, length)]
    )
    scores = query @ key.transpose(0, 2, 1) / math.sqrt(d_k)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    grad_scores = weights * (upstream - (weights * upstream).sum(-1, keepdims=True))
    grad_query = grad_scores @ key / math.sqrt(d_k)
    rows = np.linalg.norm(grad_query, axis=-1)
    assert measured["median |dL/dQ_i|"] == pytest.approx(np.median(rows), rel=1e-10)
    assert measured["rms |dL/dQ_i|"] == pytest.approx(np.sqrt(np.mean(rows**2)), rel=1e-10)


def scaling_rows(slope=0.5, peak=0.95, fall=1e-3, spread=1.0, scaled_gradient=1.0):
    rows = []
    for d_k in (4, 64, 1024):
        position = math.log(d_k / 4) / math.log(256)  # 0 .. 1
        rows.append({"scaled": False, "d_k": d_k, "std(S)": 2 * (d_k / 4) ** slope,
                     "max A": 0.3 + (peak - 0.3) * position, "median |dL/dQ_i|": fall**position,
                     "rms |dL/dQ_i|": 1.0})  # fmt: skip
        rows.append({"scaled": True, "d_k": d_k, "std(S)": spread ** position, "max A": 0.16,
                     "median |dL/dQ_i|": 0.2 * scaled_gradient**position,
                     "rms |dL/dQ_i|": 0.24})  # fmt: skip
    return rows


def required_pass(checks) -> bool:
    return all(c.passed for c in checks if c.required)


@pytest.mark.parametrize(
    "rows, passes",
    [
        (scaling_rows(), True),
        (scaling_rows(slope=0.3), False),  # the spread does not grow as sqrt(d_k)
        (scaling_rows(peak=0.6), False),  # softmax does not saturate
        (scaling_rows(fall=0.5), False),  # the typical row keeps its gradient
        (scaling_rows(spread=1.5), False),  # the division does not keep std(S) ~ 1
        (scaling_rows(scaled_gradient=0.01), False),  # the scaled gradient still falls
    ],
)
def test_scaling_criterion(rows, passes):
    assert required_pass(scaling_checks(rows)) is passes


# -- heads: the task, and what the trained heads attend to ------------------------------------


def test_two_back_task_is_f_of_the_tokens_one_and_three_back():
    table = lookup_table(8)
    x, y = two_back_batch(np.random.default_rng(0), table, batch=5, length=9)

    assert x.shape == y.shape == (5, 9) and (y[:, :3] == IGNORE).all()
    for b in range(5):
        for t in range(3, 9):
            assert y[b, t] == table[x[b, t - 1], x[b, t - 3]]


def test_the_lookup_needs_both_tokens():
    table = lookup_table(8)
    assert np.array_equal(table, lookup_table(8))  # fixed
    assert single_input_accuracy(table) < 0.5
    assert single_input_accuracy(np.add.outer(np.zeros(8, int), np.arange(8))) == 1.0


def test_head_weights_are_one_pair_per_head_and_rows_of_weights():
    mg.manual_seed(0)
    model = TwoRelationModel(vocab=8, d_model=16, n_heads=4, length=10)
    x, _ = two_back_batch(np.random.default_rng(0), lookup_table(8), batch=3, length=10)
    weights = head_weights(model, x)
    assert len(weights) == 4 and all(0 < near + far <= 1 for near, far in weights)


def test_steps_to_counts_evaluations_from_every():
    assert steps_to([0.5, 0.98, 0.99, 1.0], every=20) == 60
    assert steps_to([0.5, 0.98], every=20) is None


def heads_rows(one_steps=300.0, many_steps=200.0, one_runs=3, many_final=1.0):
    def row(heads, steps, runs, final):
        return {"heads": heads, "final accuracy": final, "runs": 3, "runs at 99%": runs,
                "mean steps to 99%": steps if runs else "-"}  # fmt: skip

    return [row(1, one_steps, one_runs, 0.995), row(4, many_steps, 3, many_final)]


@pytest.mark.parametrize(
    "rows, passes",
    [
        (heads_rows(), True),
        (heads_rows(one_runs=0), True),  # one head never gets there
        (heads_rows(one_runs=2, many_steps=400.0), True),  # more runs at 99%
        (heads_rows(many_steps=280.0), False),  # not clearly faster
        (heads_rows(many_final=0.9), False),  # four heads do not learn it
    ],
)
def test_heads_criterion(rows, passes):
    assert required_pass(heads_checks(rows, 600)) is passes


# -- qk: tied W_Q = W_K gives symmetric scores, exactly ---------------------------------------


@pytest.mark.parametrize("tied", [False, True])
def test_tied_scores_are_symmetric_and_separate_ones_are_not(tied):
    mg.manual_seed(0)
    model = LeftNeighbourModel(vocab=10, d_model=16, length=7, tied=tied).double()
    x, _ = left_neighbour_batch(np.random.default_rng(0), batch=4, length=7, vocab=10)
    scores = model.scores(mg.tensor(x)).array

    assert scores.shape == (4, 7, 7)
    if tied:
        assert asymmetry(scores) < 1e-14
        assert model.k_proj is None
    else:
        assert asymmetry(scores) > 0.1


def test_trained_tied_scores_stay_symmetric():
    tied = next(r for r in quick("qk").rows if r["W_K"] == "tied")
    assert tied["||S - S^T|| / ||S||"] < 1e-6  # float32


def test_left_neighbour_task():
    x, y = left_neighbour_batch(np.random.default_rng(1), batch=3, length=6, vocab=10)
    assert (y[:, 0] == IGNORE).all() and np.array_equal(y[:, 1:], x[:, :-1])


def test_asymmetry_of_known_matrices():
    symmetric = np.array([[[1.0, 2.0], [2.0, 3.0]]])
    antisymmetric = np.array([[[0.0, 1.0], [-1.0, 0.0]]])
    assert asymmetry(symmetric) == 0.0
    assert asymmetry(antisymmetric) == pytest.approx(2.0)


def qk_rows(separate=1.0, tied=0.75, separate_ratio=1.5, tied_ratio=0.0):
    key = "||S - S^T|| / ||S||"
    return [
        {"W_K": "separate", "accuracy": separate, key: separate_ratio},
        {"W_K": "tied", "accuracy": tied, key: tied_ratio},
    ]


@pytest.mark.parametrize(
    "rows, passes",
    [
        (qk_rows(), True),
        (qk_rows(separate=0.8), False),  # separate does not learn it
        (qk_rows(separate_ratio=0.01), False),  # separate scores symmetric
        (qk_rows(tied_ratio=1e-3), False),  # tied scores not symmetric
        (qk_rows(tied=0.95), False),  # tied does as well
    ],
)
def test_qk_criterion(rows, passes):
    assert required_pass(qk_checks(rows)) is passes
