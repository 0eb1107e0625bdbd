"""Every example runs on its own at its quick settings and shows what its docstring promises.

Each example is run as a learner would run it, ``python examples/0N_*.py --quick --out DIR``,
in a fresh interpreter; the test reads what it printed and opens what it saved.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
HAS_DOT = shutil.which("dot") is not None


def run_example(name: str, out: Path) -> str:
    """Run ``examples/<name>.py --quick --out out``; return its stdout (fails on exit != 0)."""
    completed = subprocess.run(
        [sys.executable, str(EXAMPLES / f"{name}.py"), "--quick", "--out", str(out)],
        cwd=ROOT,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        },
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
    )
    assert completed.returncode == 0, f"{name} failed:\n{completed.stdout}\n{completed.stderr}"
    return completed.stdout


def number_after(label: str, text: str) -> float:
    """The number printed after ``label`` (the first occurrence)."""
    match = re.search(re.escape(label) + r"\s*([-+0-9.e]+)", text)
    assert match, f"{label!r} not found in:\n{text}"
    return float(match.group(1))


def assert_png(path: Path) -> None:
    assert path.is_file(), f"{path} was not written"
    assert path.read_bytes()[:8] == PNG_MAGIC, f"{path} is not a PNG"


def assert_graph(path: Path) -> None:
    """An SVG drawn by Graphviz, or its .dot source where Graphviz is not installed."""
    if not HAS_DOT:
        path = path.with_suffix(".dot")
        assert path.read_text(encoding="utf-8").lstrip().startswith("digraph")
        return
    text = path.read_text(encoding="utf-8")
    assert "<svg" in text and "</svg>" in text, f"{path} is not an SVG"


def test_01_autograd_by_hand(tmp_path):
    printed = run_example("01_autograd_by_hand", tmp_path)

    # the four scalar gradients, each equal to the hand-derived one
    assert len(re.findall(r"dL/d[abcf] = .* by hand .* ok", printed)) == 4
    assert "MISMATCH" not in printed
    assert number_after("dL/da =", printed) == 6.0  # f * b = (-2) * (-3)
    assert number_after("do/dw1 =", printed) == pytest.approx(1.0, abs=1e-4)
    errors = [float(e) for e in re.findall(r"max \|autograd - by hand\| = ([0-9.e+-]+)", printed)]
    assert len(errors) == 3 and max(errors) < 1e-12
    assert "mg.gradcheck (finite differences, float64): passed" in printed
    # gradient descent by hand: y = 2x - 1 found, the loss down from 2.42
    last = re.findall(r"step 100: L = ([0-9.]+), w = ([0-9.-]+), b = ([0-9.-]+)", printed)
    assert len(last) == 1
    loss, w, b = map(float, last[0])
    assert loss < 1e-4 and w == pytest.approx(2.0, abs=0.01) and b == pytest.approx(-1.0, abs=0.01)
    assert_graph(tmp_path / "01_scalar_graph.svg")
    assert_graph(tmp_path / "01_tensor_graph.svg")


def test_02_attention_step_by_step(tmp_path):
    printed = run_example("02_attention_step_by_step", tmp_path)

    assert "사과 / 는 / 맛있다" in printed
    shapes = (
        "X = E + PE  shape (1, 3, 8)",
        "S_0 = Q_0 K_0^T / sqrt(d_k)  shape (1, 3, 3)",
        "head_1 = A_1 V_1  shape (1, 3, 4)",
        "O = Concat(heads) W_O  shape (1, 3, 8)",
    )
    for line in shapes:
        assert line in printed
    assert printed.count("(all 1: True)") == 2  # the rows of each head's A sum to 1
    assert number_after("max |O_module - O_by_hand| =", printed) < 1e-5
    assert "same: True" in printed
    assert_png(tmp_path / "02_attention.png")


def test_03_add_and_norm(tmp_path):
    printed = run_example("03_add_and_norm", tmp_path)
    with_residual, without = printed.split("=== without")

    assert "shortcuts found in the graph: 1" in with_residual
    assert "shortcuts found in the graph: 0" in without
    # the shortcut edge carries dL/dY unchanged: the identity term of dL/dX
    identity = number_after("identity term |dL/dY|          =", with_residual)
    assert number_after("shortcut edge carried |dL/dY| =", with_residual) == identity > 0
    assert number_after("identity term |dL/dY|          =", without) == 0.0
    for part in (with_residual, without):
        assert number_after("max |autograd dL/dY - by hand| =", part) < 1e-12
    assert_graph(tmp_path / "03_add_norm_graph.svg")
    assert_graph(tmp_path / "03_no_residual_graph.svg")


def test_04_train_toy_gpt(tmp_path):
    printed = run_example("04_train_toy_gpt", tmp_path)

    assert "trained 30 steps" in printed
    for name in ("particle_acc =", "predicate_acc ="):
        assert 0.0 <= number_after(name, printed) <= 1.0
    samples = printed.split("samples (prompt + completion):")[1].splitlines()[1:6]
    assert [s.strip()[:2] for s in samples] == ["사과", "수박", "스킬", "수익", "고양"]
    weight = number_after("weight on the noun", printed)
    assert 0.0 < weight <= 1.0
    assert_png(tmp_path / "04_attention.png")


def test_05_residual_studies(tmp_path):
    printed = run_example("05_residual_studies", tmp_path)

    for name in ("depth", "ln", "paths"):
        assert re.search(rf"study {name}: (PASSED|FAILED) in", printed)
        table = json.loads((tmp_path / "05_studies" / f"study_{name}.json").read_text())
        assert table["name"] == name and table["rows"] and table["checks"]
        assert_png(tmp_path / "05_studies" / f"{name}.png")
    # exact at any size: the path gradients sum to the full gradient
    paths = json.loads((tmp_path / "05_studies" / "study_paths.json").read_text())
    exact = [c for c in paths["checks"] if "sum of the 16 path gradients" in c["name"]]
    assert len(exact) == 2 and all(c["passed"] for c in exact)


def test_06_rnn_lstm_attention(tmp_path):
    printed = run_example("06_rnn_lstm_attention", tmp_path)

    assert re.search(r"study time: (PASSED|FAILED) in", printed)
    table = json.loads((tmp_path / "06_time" / "study_time.json").read_text())
    far = table["rows"][-1]
    assert far["distance"] == 11  # T = 12 at the quick settings
    # even over 11 steps: the RNN loses the most, an open forget gate keeps more
    assert far["RNN"] < far["LSTM (default init)"] < far["LSTM (forget bias 3)"]
    assert number_after("RNN", printed.split("is:")[1]) == pytest.approx(far["RNN"], rel=0.01)
    assert_png(tmp_path / "06_time" / "time.png")


def test_07_translate_with_attention(tmp_path):
    printed = run_example("07_translate_with_attention", tmp_path)

    assert "trained 40 steps" in printed
    for name in ("exact_match =", "token_acc ="):
        assert 0.0 <= number_after(name, printed) <= 1.0
    assert "(the reference: small cat eats red apple)" in printed
    rows = printed.split("the decoder looks most at:")[1].splitlines()[1:7]
    assert [row.split()[0] for row in rows] == ["small", "cat", "eats", "red", "apple", "</s>"]
    for row in rows:
        assert 0.0 < number_after("weight", row) <= 1.0
    assert_png(tmp_path / "07_cross_attention.png")


def test_08_seed_claims(tmp_path):
    printed = run_example("08_seed_claims", tmp_path)
    folder = tmp_path / "08_claims"

    figures = {"scaling": "sqrt_dk", "heads": "heads", "qk": "qk",
               "sequential": "sequential", "bottleneck": "bottleneck"}  # fmt: skip
    for name, figure in figures.items():
        assert re.search(rf"study {name}: (PASSED|FAILED) in", printed)
        table = json.loads((folder / f"study_{name}.json").read_text())
        assert table["name"] == name and table["rows"] and table["checks"]
        assert_png(folder / f"{figure}.png")
    assert len(re.findall(r"^claim: .+", printed, flags=re.M)) == 5
    assert len(re.findall(r"^measured: .+", printed, flags=re.M)) == 5
    assert "with a single attention head, averaging inhibits this" in printed
    assert "influence between tokens is not symmetric" in printed
    assert "passes on only its last hidden state, so information is lost" in printed
    # exact at any size: the unscaled spread is sqrt(d_k) times the scaled one, and tied
    # W_Q = W_K gives symmetric scores
    rows = json.loads((folder / "study_scaling.json").read_text())["rows"]
    for plain, scaled in zip(rows[: len(rows) // 2], rows[len(rows) // 2 :]):
        ratio = plain["std(S)"] / scaled["std(S)"]
        assert ratio == pytest.approx(plain["d_k"] ** 0.5, rel=1e-9)
    qk = json.loads((folder / "study_qk.json").read_text())["rows"]
    tied = next(row for row in qk if row["W_K"] == "tied")
    assert tied["||S - S^T|| / ||S||"] < 1e-6


def test_make_figures_writes_what_it_is_asked_for(tmp_path):
    """docs/make_figures.py regenerates the README's figures; its fastest one here."""
    completed = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "make_figures.py"), "--only", "graph", "--out",
         str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, encoding="utf-8", timeout=120,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr
    assert_graph(tmp_path / "gpt_block_graph.svg")
    if HAS_DOT:
        assert_png(tmp_path / "gpt_block_graph.png")
    assert "all figures in" in completed.stdout
