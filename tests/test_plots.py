"""minigrad.viz.plots: figures render to PNG, Korean tick labels render with a CJK font, and
without one the user is told in one line how to install it."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

pytest.importorskip("matplotlib")

import minigrad as mg  # noqa: E402
from minigrad import nn  # noqa: E402
from minigrad.viz import plots  # noqa: E402

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
KOREAN = ["나는", "사과를", "먹었다", "."]


def render_png(figure, tmp_path, name="figure.png") -> bytes:
    path = plots.save_figure(figure, tmp_path / name)
    return path.read_bytes()


def missing_glyph_warnings(figure, tmp_path) -> list[str]:
    """The 'Glyph ... missing from font(s)' warnings matplotlib raises while drawing."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        render_png(figure, tmp_path)
    return [str(w.message) for w in caught if "missing from" in str(w.message)]


@pytest.fixture
def fresh_font_choice():
    plots.font_family.cache_clear()
    yield
    plots.font_family.cache_clear()


# -- fonts ------------------------------------------------------------------------------------


def test_find_cjk_font_takes_the_first_installed_in_order():
    assert plots.find_cjk_font({"DejaVu Sans", "Noto Sans CJK KR", "NanumGothic"}) == "NanumGothic"
    assert plots.find_cjk_font({"DejaVu Sans", "Noto Sans CJK KR"}) == "Noto Sans CJK KR"
    assert plots.find_cjk_font({"DejaVu Sans"}) is None


def test_without_a_cjk_font_it_says_how_to_install_one_in_one_line(
    monkeypatch, capsys, fresh_font_choice
):
    monkeypatch.setattr(plots, "find_cjk_font", lambda installed=None: None)
    assert plots.font_family() == (plots.LATIN_FONT,)
    plots.font_family()  # said once, not on every plot
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "apt-get install fonts-nanum" in err


@pytest.mark.filterwarnings("ignore:Glyph")  # the boxes are expected here
def test_without_a_cjk_font_plots_still_render(monkeypatch, tmp_path, fresh_font_choice):
    monkeypatch.setattr(plots, "find_cjk_font", lambda installed=None: None)
    figure = plots.plot_attention(np.full((1, 4, 4), 0.25), KOREAN)
    assert render_png(figure, tmp_path).startswith(PNG_MAGIC)


@pytest.mark.skipif(plots.find_cjk_font() is None, reason="no CJK font installed")
def test_korean_tick_labels_render_with_the_cjk_font(tmp_path, fresh_font_choice):
    figure = plots.plot_attention(np.full((2, 4, 4), 0.25), KOREAN, title="주의 가중치")
    assert plots.font_family()[1] == plots.find_cjk_font()
    assert missing_glyph_warnings(figure, tmp_path) == []
    labels = [t.get_text() for t in figure.axes[0].get_xticklabels()]
    assert labels == KOREAN


def test_latin_font_alone_would_draw_boxes_for_korean(monkeypatch, tmp_path, fresh_font_choice):
    # the check above could fail: DejaVu Sans alone has no Hangul
    monkeypatch.setattr(plots, "find_cjk_font", lambda installed=None: None)
    figure = plots.plot_attention(np.full((1, 4, 4), 0.25), KOREAN)
    assert missing_glyph_warnings(figure, tmp_path)


# -- figures ----------------------------------------------------------------------------------


def test_plot_attention_from_a_module_after_forward(tmp_path):
    mg.manual_seed(0)
    attention = nn.MultiHeadAttention(8, 2, causal=True)
    attention(mg.randn(1, 4, 8))
    figure = plots.plot_attention(attention, KOREAN)
    heatmaps = [ax for ax in figure.axes if ax.images]
    assert len(heatmaps) == 2
    weights = heatmaps[0].images[0].get_array()
    assert np.allclose(np.asarray(weights).sum(axis=-1), 1.0)  # rows of A sum to 1
    assert np.asarray(weights)[0, 1:].max() == 0.0  # causal: token 0 sees only itself
    assert render_png(figure, tmp_path).startswith(PNG_MAGIC)


def test_plot_model_attention_picks_a_layer_of_a_model(tmp_path):
    from minigrad.study.blocks import TinyLM

    mg.manual_seed(0)
    blocks = [nn.TransformerBlock(8, 2), nn.TransformerBlock(8, 2)]
    model = TinyLM(vocab_size=5, block_size=4, d_model=8, blocks=blocks, final_norm=False)
    maps = plots.attention_maps(model, [1, 2, 3, 4])
    assert [name for name, _ in maps] == ["blocks.0.attn", "blocks.1.attn"]
    assert all(weights.shape == (2, 4, 4) for _, weights in maps)
    assert model.training  # left as it was
    figure = plots.plot_model_attention(model, [1, 2, 3, 4], KOREAN, layer=1)
    assert "blocks.1.attn" in figure.get_suptitle()
    assert render_png(figure, tmp_path).startswith(PNG_MAGIC)
    with pytest.raises(ValueError, match="layer 2 of 2"):
        plots.plot_model_attention(model, [1, 2, 3, 4], KOREAN, layer=2)


@pytest.mark.parametrize(
    "weights, tokens, message",
    [
        (np.zeros((2, 3, 4)), None, "shape"),
        (np.zeros((2, 3, 3)), ["a", "b"], "2 tokens for T=3"),
    ],
)
def test_plot_attention_rejects_bad_input(weights, tokens, message):
    with pytest.raises(ValueError, match=message):
        plots.plot_attention(weights, tokens)


def test_plot_grad_norms_from_a_model_after_backward(tmp_path):
    mg.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
    model(mg.randn(5, 4)).sum().backward()
    norms = plots.grad_norms(model)
    assert list(norms) == ["0.weight", "2.weight"]
    assert norms["2.weight"] == pytest.approx(model[2].weight.grad.norm_value())
    figure = plots.plot_grad_norms(model)
    assert [t.get_text() for t in figure.axes[0].get_xticklabels()] == list(norms)
    assert render_png(figure, tmp_path).startswith(PNG_MAGIC)


def test_plot_grad_norms_compares_runs_and_needs_gradients(tmp_path):
    runs = {"post-LN": {"layer 1": 0.3, "layer 2": 0.35}, "pre-LN": {"layer 1": 0.2}}
    figure = plots.plot_grad_norms(runs)
    assert len(figure.axes[0].containers) == 2  # one group of bars per run
    assert render_png(figure, tmp_path).startswith(PNG_MAGIC)
    with pytest.raises(ValueError, match="no gradients"):
        plots.plot_grad_norms(nn.Linear(2, 2))


def test_plot_loss_draws_each_curve_and_its_running_mean(tmp_path):
    losses = list(np.linspace(3.0, 0.5, 40))
    figure = plots.plot_loss({"train": losses, "val": losses[::2]}, smooth=5)
    lines = figure.axes[0].get_lines()
    assert len(lines) == 4  # raw and smoothed, for each curve
    assert np.allclose(lines[1].get_ydata(), np.convolve(losses, np.ones(5) / 5, "valid"))
    assert render_png(figure, tmp_path).startswith(PNG_MAGIC)


def test_plot_curves_panels(tmp_path):
    panels = [
        {"curves": {"a": ([1, 2, 4], [1.0, 0.1, 0.01])}, "logx": True, "logy": True},
        {"curves": {"b": ([0, 1], [0.3, 0.4])}, "kind": "bar", "title": "막대"},
    ]
    figure = plots.plot_curves(panels, title="두 패널")
    assert len(figure.axes) == 2 and figure.axes[0].get_yscale() == "log"
    assert render_png(figure, tmp_path).startswith(PNG_MAGIC)
