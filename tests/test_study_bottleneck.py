"""The studies ``sequential`` (RNN, LSTM and Transformer as T grows) and ``bottleneck`` (the
last-state LSTM encoder-decoder against attention and the Transformer).

Each runs at quick settings and writes a well-formed table, JSON and figure; the facts that
hold whatever the timing or the training gives are checked exactly (sequential steps, graph
depth, saved bytes growing with T, padding); each criterion says pass or fail correctly on
made-up rows. The full studies run from ``minigrad study NAME``; their tables are in
docs/study_*.md.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from helpers import check_study_tables

import minigrad as mg
from minigrad.study import STUDIES, StudyResult
from minigrad.study.bottleneck import (
    BOS,
    IGNORE,
    PAD,
    LSTMEncoderDecoder,
    TransformerEncoderDecoder,
    Words,
    batch_arrays,
    bottleneck_checks,
    symbol_pairs,
)
from minigrad.study.bottleneck import MODELS as ENCODER_DECODERS
from minigrad.study.sequential import MODELS as SEQUENTIAL_MODELS
from minigrad.study.sequential import graph_depth, saved_bytes, sequential_checks
from minigrad.viz import studies as study_figures

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def word_task(count: int, length: int, seed: int) -> list[tuple[str, str]]:
    """A made-up sentence task: ``length`` words, translated backwards with a suffix."""
    rng = np.random.default_rng(seed)
    words = ["가", "나", "다", "라"]
    pairs = []
    for _ in range(count):
        source = [words[i] for i in rng.integers(0, len(words), length)]
        pairs.append((" ".join(source), " ".join(w + "x" for w in reversed(source))))
    return pairs


QUICK = {
    "sequential": dict(lengths=(4, 8, 16), width=8, layers=2, n_heads=2, batch=2, repeats=1),
    "bottleneck": dict(
        lengths=(2, 4),
        extra_tasks={"words": word_task},
        extra_lengths=(2, 3),
        width=8,
        steps=3,
        batch=4,
        sentences=20,
        test=6,
    ),
}
PANELS = {"sequential": 3, "bottleneck": 2}


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

    figure = study_figures.draw_study(result)
    assert len([ax for ax in figure.axes if ax.get_title()]) == PANELS[name]
    paths = study_figures.save_study(result, tmp_path)
    image = tmp_path / f"{name}.png"
    assert image in paths and image.read_bytes()[:8] == PNG_MAGIC


# -- sequential: the facts that hold whatever the clock says ----------------------------------


def test_sequential_steps_are_t_plus_layers_for_recurrence_and_layers_for_attention():
    result = quick("sequential")
    layers = result.settings["layers"]
    for row in result.rows:
        expected = layers if row["model"] == "Transformer" else row["T"] + layers - 1
        assert row["sequential steps"] == expected


def test_sequential_graph_depth_grows_with_t_only_for_recurrence():
    rows = quick("sequential").rows
    depth = {(r["model"], r["T"]): r["graph depth"] for r in rows}
    for model in ("RNN", "LSTM"):
        assert depth[model, 4] < depth[model, 8] < depth[model, 16]
        # each step of T adds the same ops to the chain
        assert depth[model, 16] - depth[model, 8] == 2 * (depth[model, 8] - depth[model, 4])
    assert depth["Transformer", 4] == depth["Transformer", 8] == depth["Transformer", 16]


def test_sequential_saved_bytes_grow_with_t_and_the_gates_save_more():
    rows = quick("sequential").rows
    saved = {(r["model"], r["T"]): r["saved KB"] for r in rows}
    for model in SEQUENTIAL_MODELS:
        assert saved[model, 4] < saved[model, 8] < saved[model, 16]
    for length in (4, 8, 16):
        assert saved["LSTM", length] > 2 * saved["RNN", length]


def test_graph_depth_and_saved_bytes_of_a_known_chain():
    x = mg.randn(10, requires_grad=True)  # float32: 40 bytes
    loss = (x * 2.0).exp().exp().sum()

    assert graph_depth(loss) == 4  # mul, exp, exp, sum
    # exp saves its output (40 bytes each); a product by a number saves nothing it needs
    assert saved_bytes(loss) >= 80
    branched = (x.exp() + x.exp().exp()).sum()
    assert graph_depth(branched) == 4  # the longer branch: exp, exp, add, sum


def sequential_rows(lstm_ms: float, lstm_saved: float = 4.0) -> list[dict]:
    """Made-up rows: depth as the equations say, the LSTM's step time ``lstm_ms`` * T."""
    rows = []
    for t in (8, 64):
        rows += [
            {"T": t, "model": "RNN", "graph depth": 6 * t, "saved KB": t, "step ms": t},
            {
                "T": t,
                "model": "LSTM",
                "graph depth": 16 * t,
                "saved KB": lstm_saved * t,
                "step ms": lstm_ms * t,
            },
            {
                "T": t,
                "model": "Transformer",
                "graph depth": 40,
                "saved KB": 3 * t,
                "step ms": 2 * t,
            },
        ]
    return rows


@pytest.mark.parametrize(
    "rows, passes",
    [
        (sequential_rows(lstm_ms=3.0), True),
        (sequential_rows(lstm_ms=1.5), False),  # slower than the RNN by too little
        (sequential_rows(lstm_ms=3.0, lstm_saved=1.2), False),  # gates saving nothing
    ],
)
def test_sequential_criterion(rows, passes):
    checks = sequential_checks(rows)
    assert all(c.passed for c in checks if c.required) == passes


def test_sequential_criterion_fails_when_the_transformer_is_slower():
    rows = sequential_rows(lstm_ms=3.0)
    for row in rows:
        if row["model"] == "Transformer" and row["T"] == 64:
            row["step ms"] = 1000.0
    checks = sequential_checks(rows)
    failed = [c.name for c in checks if not c.passed]
    assert failed == ["LSTM step time > Transformer's at every T"]


# -- bottleneck: data, models, criterion -------------------------------------------------------


def test_bottleneck_measures_every_task_length_and_model():
    result = quick("bottleneck")
    keys = [(r["task"], r["length"], r["model"]) for r in result.rows]
    expected = [("copy", n, m) for n in (2, 4) for m in ENCODER_DECODERS]
    expected += [("words", n, m) for n in (2, 3) for m in ENCODER_DECODERS]
    assert keys == expected
    assert all(0.0 <= r["token acc"] <= 1.0 and 0.0 <= r["exact"] <= 1.0 for r in result.rows)
    assert len(result.checks) == 3 * 2  # three per task


def test_batch_arrays_pad_sources_on_the_left_and_shift_targets_right():
    source, target_in, target_out, pad = batch_arrays([([5, 6, 7], [8, 9]), ([4], [3, 2, 6])])

    assert source.tolist() == [[5, 6, 7], [PAD, PAD, 4]]
    assert pad.tolist() == [[False] * 3, [True, True, False]]
    assert target_in.tolist() == [[BOS, 8, PAD], [BOS, 3, 2]]
    assert target_out.tolist() == [[8, 9, IGNORE], [3, 2, 6]]


def test_symbol_pairs_copy_and_reverse():
    rng = np.random.default_rng(0)
    for source, target in symbol_pairs("copy", 4, 5, 10, rng):
        assert target == source and len(source) == 5 and min(source) >= 2
    for source, target in symbol_pairs("reverse", 4, 5, 10, rng):
        assert target == source[::-1]


def test_words_vocabulary_keeps_pad_and_bos_first():
    words = Words(["사과는 맛있다", "사과를 먹는다"])
    assert words.encode("사과는 맛있다 사과를") == [2, 3, 4] and len(words) == 6
    assert words.ids["<pad>"] == PAD and words.ids["<bos>"] == BOS


@pytest.mark.parametrize("attention", [False, True])
def test_lstm_encoder_decoder_without_attention_sees_only_the_last_state(attention):
    mg.manual_seed(0)
    model = LSTMEncoderDecoder(8, 8, width=6, attention=attention)
    source = mg.tensor(np.array([[2, 3, 4, 5]]))
    target_in = mg.tensor(np.array([[BOS, 2, 3]]))
    pad = np.zeros((1, 4), dtype=bool)
    with mg.no_grad():
        full = model(source, target_in, pad).array
        _, last_state = model.encoder(model.source_embedding(source))
        decoded, _ = model.decoder(model.target_embedding(target_in), last_state)
        from_state_alone = model.out(decoded).array

    assert full.shape == (1, 3, 8)
    # without attention the logits are a function of the final (h, c) alone; with it they
    # also read every encoder state
    assert np.allclose(full, from_state_alone, atol=1e-6) == (not attention)


def test_attention_ignores_padded_source_positions():
    mg.manual_seed(0)
    model = TransformerEncoderDecoder(8, 8, width=8, n_heads=2, max_len=16)
    target_in = mg.tensor(np.array([[BOS, 2]]))
    pad = np.array([[True, False, False]])
    with mg.no_grad():
        one = model(mg.tensor(np.array([[PAD, 3, 4]])), target_in, pad).array
        other = model(mg.tensor(np.array([[7, 3, 4]])), target_in, pad).array
    np.testing.assert_allclose(one, other, rtol=1e-5, atol=1e-6)


def bottleneck_rows(last_long: float, transformer_long: float = 0.99) -> list[dict]:
    accuracies = {
        "LSTM, last state": (1.0, last_long),
        "LSTM + attention": (1.0, 0.95),
        "Transformer": (1.0, transformer_long),
    }
    return [
        {"task": "copy", "length": n, "model": m, "token acc": acc[i]}
        for m, acc in accuracies.items()
        for i, n in enumerate((4, 32))
    ]


@pytest.mark.parametrize(
    "rows, passes",
    [
        (bottleneck_rows(last_long=0.2), True),
        (bottleneck_rows(last_long=0.9), False),  # falls, but not faster than attention
        (bottleneck_rows(last_long=0.2, transformer_long=0.5), False),  # Transformer fails
    ],
)
def test_bottleneck_criterion(rows, passes):
    checks = bottleneck_checks(rows, ["copy"])
    assert all(c.passed for c in checks if c.required) == passes


def test_bottleneck_rejects_an_unknown_task():
    with pytest.raises(ValueError, match="copy"):
        STUDIES["bottleneck"](task="sort")


def test_minigrad_study_passes_the_translate_task_to_bottleneck():
    from models.commands.study import study_options

    assert study_options("sequential") == {}
    make = study_options("bottleneck")["extra_tasks"]["translate"]
    pairs = make(3, 2, 0)
    assert len(pairs) == 3 and all(isinstance(s, str) and isinstance(t, str) for s, t in pairs)
