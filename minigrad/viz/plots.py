"""Plots of what training and backprop do: loss curves, gradient norm per layer, attention.

Needs matplotlib (``pip install minigrad[plot]``). Every function returns a
``matplotlib.figure.Figure`` built without pyplot (so nothing global is left open, and it
works on a server); Jupyter shows it inline, ``save_figure`` writes PNG, SVG or PDF.

Tokens and titles may be Korean (or any CJK text): the first installed CJK font
(NanumGothic, Noto Sans CJK, ...) is used as a fallback after DejaVu Sans, so Latin
text keeps its usual look and Hangul renders instead of empty boxes.
"""

from __future__ import annotations

import functools
import math
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

# Fonts tried in order; the first one matplotlib can find renders the CJK characters.
CJK_FONTS = (
    "NanumGothic",
    "NanumBarunGothic",
    "Noto Sans CJK KR",
    "Noto Sans KR",
    "Noto Sans CJK JP",
    "Source Han Sans KR",
    "UnDotum",
    "Malgun Gothic",
    "AppleGothic",
)
LATIN_FONT = "DejaVu Sans"
INSTALL_HINT = (
    "minigrad.viz.plots: no CJK font found, Korean text will show as boxes; install one "
    "with `apt-get install fonts-nanum` (or `brew install --cask font-nanum-gothic`)"
)


def _matplotlib():
    try:
        import matplotlib  # noqa: F401
        from matplotlib.figure import Figure
    except ImportError as error:
        raise ImportError(
            "minigrad.viz.plots needs matplotlib: pip install 'minigrad[plot]'"
        ) from error
    return Figure


def installed_font_names() -> set[str]:
    """Family names of every font matplotlib knows about."""
    from matplotlib import font_manager

    return {entry.name for entry in font_manager.fontManager.ttflist}


def find_cjk_font(installed: set[str] | None = None) -> str | None:
    """The first font of ``CJK_FONTS`` that is installed, or None."""
    installed = installed_font_names() if installed is None else installed
    return next((name for name in CJK_FONTS if name in installed), None)


@functools.lru_cache(maxsize=1)
def font_family() -> tuple[str, ...]:
    """The font family list for text: DejaVu Sans, then a CJK fallback when one exists.

    Without a CJK font it says once, in one line on stderr, how to install one.
    """
    cjk = find_cjk_font()
    if cjk is None:
        print(INSTALL_HINT, file=sys.stderr)
        return (LATIN_FONT,)
    return (LATIN_FONT, cjk)


def _figure(width: float, height: float):
    Figure = _matplotlib()
    return Figure(figsize=(width, height), layout="constrained")


def save_figure(figure, path: str | Path, dpi: int = 120) -> Path:
    """Write ``figure`` to ``path``; the suffix (.png, .svg, .pdf) picks the format."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=dpi)
    return path


# -- loss curves ----------------------------------------------------------------------------


def plot_loss(
    history: Sequence[float] | Mapping[str, Sequence[float]],
    title: str = "training loss",
    log_scale: bool = False,
    smooth: int = 1,
):
    """Loss against step. ``history`` is one list of losses or a dict label -> list.

    ``smooth`` > 1 draws a running mean over that many steps over the raw (faint) curve.
    """
    curves = dict(history) if isinstance(history, Mapping) else {"loss": history}
    family = font_family()
    figure = _figure(6.0, 3.8)
    ax = figure.add_subplot()
    for label, values in curves.items():
        values = np.asarray(values, dtype=np.float64)
        steps = np.arange(1, len(values) + 1)
        if smooth > 1 and len(values) >= smooth:
            (raw,) = ax.plot(steps, values, alpha=0.25, linewidth=0.8)
            kernel = np.ones(smooth) / smooth
            ax.plot(steps[smooth - 1 :], np.convolve(values, kernel, "valid"),
                    color=raw.get_color(), label=label)  # fmt: skip
        else:
            ax.plot(steps, values, label=label)
    if log_scale:
        ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    ax.set_title(title, fontfamily=family)
    ax.grid(alpha=0.3)
    if len(curves) > 1 or "loss" not in curves:
        ax.legend(prop={"family": list(family)})
    return figure


# -- gradient norm per layer -----------------------------------------------------------------


def grad_norms(model, kind: str = "weight") -> dict[str, float]:
    """``{parameter name: |grad|}`` for a Module's parameters after a backward pass.

    ``kind="weight"`` keeps matrices only (the usual per-layer picture), ``"all"`` keeps
    biases and LayerNorm gains too. Parameters without a gradient are left out.
    """
    norms = {}
    for name, parameter in model.named_parameters():
        if parameter.grad is None or (kind == "weight" and parameter.ndim < 2):
            continue
        norms[name] = parameter.grad.norm_value()
    return norms


def plot_grad_norms(
    norms,
    title: str = "gradient norm per layer",
    log_scale: bool = True,
    kind: str = "weight",
):
    """Bar chart of gradient norms, one bar per parameter, in the model's order.

    ``norms`` is a dict name -> norm, or a Module after ``loss.backward()``. Several runs
    can be compared with a dict label -> (dict name -> norm): grouped bars.
    """
    if hasattr(norms, "named_parameters"):
        norms = grad_norms(norms, kind)
    runs = norms if norms and isinstance(next(iter(norms.values())), Mapping) else {"": norms}
    names = list(dict.fromkeys(name for run in runs.values() for name in run))
    if not names:
        raise ValueError("plot_grad_norms: no gradients to plot (call loss.backward() first)")

    family = font_family()
    figure = _figure(max(6.0, 0.28 * len(names) * max(1, len(runs)) + 2), 4.2)
    ax = figure.add_subplot()
    width = 0.8 / len(runs)
    positions = np.arange(len(names))
    for index, (label, run) in enumerate(runs.items()):
        values = [run.get(name, np.nan) for name in names]
        offset = (index - (len(runs) - 1) / 2) * width
        ax.bar(positions + offset, values, width, label=label or None)
    ax.set_xticks(positions, names, rotation=90, fontsize=7, fontfamily=family)
    if log_scale:
        ax.set_yscale("log")
    ax.set_ylabel("|dL/dW|")
    ax.set_title(title, fontfamily=family)
    ax.grid(axis="y", alpha=0.3)
    if len(runs) > 1:
        ax.legend(prop={"family": list(family)})
    return figure


# -- attention heatmaps ----------------------------------------------------------------------


def _attention_array(weights) -> np.ndarray:
    """(n_heads, T, T) as a NumPy array, from a Tensor, an array, or a MultiHeadAttention."""
    if hasattr(weights, "attn_weights"):
        weights = weights.attn_weights
        if weights is None:
            raise ValueError("plot_attention: the module has no attn_weights yet (run forward)")
    if hasattr(weights, "numpy"):
        weights = weights.numpy()
    array = np.asarray(weights, dtype=np.float64)
    if array.ndim == 4:  # (B, H, T, T): the first sequence of the batch
        array = array[0]
    if array.ndim == 2:
        array = array[None]
    if array.ndim != 3 or array.shape[-1] != array.shape[-2]:
        raise ValueError(
            f"plot_attention: expected weights of shape (n_heads, T, T) or (B, n_heads, T, T), "
            f"got {tuple(np.shape(weights))}"
        )
    return array


def plot_attention(
    weights,
    tokens: Sequence[str] | None = None,
    title: str = "attention weights",
    columns: int | None = None,
):
    """One heatmap per head: row = query token, column = key token, A = softmax(QK^T/sqrt(d_k)).

    ``weights``: (n_heads, T, T), (B, n_heads, T, T) (the first sequence is drawn), a
    Tensor, or a ``MultiHeadAttention`` after a forward pass (its ``.attn_weights``).
    ``tokens``: T strings used as tick labels on both axes (Korean renders with a CJK font).
    """
    array = _attention_array(weights)
    heads, length, _ = array.shape
    if tokens is not None and len(tokens) != length:
        raise ValueError(f"plot_attention: {len(tokens)} tokens for T={length} positions")
    labels = list(tokens) if tokens is not None else [str(i) for i in range(length)]

    family = font_family()
    columns = columns or min(heads, 4)
    rows = math.ceil(heads / columns)
    cell = max(2.6, 0.28 * length + 1.0)
    figure = _figure(cell * columns + 0.8, cell * rows + 0.5)
    axes = figure.subplots(rows, columns, squeeze=False)
    image = None
    for head, ax in enumerate(axes.flat):
        if head >= heads:
            ax.set_visible(False)
            continue
        image = ax.imshow(array[head], vmin=0.0, vmax=1.0, cmap="viridis")
        ax.set_title(f"head {head}", fontsize=9)
        ticks = np.arange(length)
        ax.set_xticks(ticks, labels, rotation=90, fontsize=8, fontfamily=family)
        ax.set_yticks(ticks, labels, fontsize=8, fontfamily=family)
        ax.set_xlabel("key", fontsize=8)
        ax.set_ylabel("query", fontsize=8)
    figure.colorbar(image, ax=axes, shrink=0.8, label="weight")
    figure.suptitle(title, fontfamily=family)
    return figure


def attention_maps(model, idx) -> list[tuple[str, np.ndarray]]:
    """Run ``model(idx)`` without grad and return, for every attention module in order,
    ``(its name, its weights (n_heads, T, T) for the first sequence)``.

    Any module with an ``attn_weights`` attribute counts (``nn.MultiHeadAttention``), so
    this works for ``models.GPT`` and any user model built from minigrad.nn.
    """
    import minigrad as mg

    if not hasattr(idx, "data"):
        idx = mg.tensor(np.asarray(idx))
    if idx.ndim == 1:
        idx = idx.reshape(1, -1)
    was_training = model.training
    model.eval()
    try:
        with mg.no_grad():
            model(idx)
    finally:
        model.train(was_training)
    return [
        (name, _attention_array(module))
        for name, module in model.named_modules()
        if getattr(module, "attn_weights", None) is not None
    ]


def plot_model_attention(model, idx, tokens: Sequence[str], layer: int = 0, title=None):
    """Heatmaps of every head of the ``layer``-th attention module of ``model`` on ``idx``
    (one sequence of token ids), labelled with ``tokens`` (e.g. the decoded characters)."""
    maps = attention_maps(model, idx)
    if not maps:
        raise ValueError("plot_model_attention: the model has no attention modules")
    if not -len(maps) <= layer < len(maps):
        raise ValueError(f"plot_model_attention: layer {layer} of {len(maps)} attention layers")
    name, weights = maps[layer]
    return plot_attention(weights, tokens, title=title or f"attention weights: {name}")


# -- lines on log axes, used by the studies -------------------------------------------------


def plot_curves(
    panels: Sequence[Mapping],
    title: str = "",
    width: float = 4.2,
    height: float = 3.4,
):
    """A row of panels of labelled curves; each panel is a dict with keys

    ``curves`` (label -> (x, y)), and optionally ``xlabel``, ``ylabel``, ``title``,
    ``logx``, ``logy``, ``plain_ticks`` (tick labels 0.25 rather than 2.5e-1 on a log axis
    that spans less than a decade), ``kind`` ("line" or "bar").
    """
    from matplotlib.ticker import FuncFormatter

    family = font_family()
    figure = _figure(width * len(panels), height)
    axes = figure.subplots(1, len(panels), squeeze=False)[0]
    for ax, panel in zip(axes, panels):
        for label, (x, y) in panel["curves"].items():
            if panel.get("kind") == "bar":
                ax.bar(x, y, label=label, alpha=0.6)
            else:
                marker = "o" if len(x) <= 40 else None  # dots on short series only
                ax.plot(x, y, marker=marker, markersize=3, label=label)
        if panel.get("logx"):
            ax.set_xscale("log", base=2)
        if panel.get("logy"):
            ax.set_yscale("log")
            if panel.get("plain_ticks"):  # a narrow log range: label ticks as 0.25, not 2.5e-1
                plain = FuncFormatter(lambda value, _: f"{value:.3g}")
                ax.yaxis.set_major_formatter(plain)
                ax.yaxis.set_minor_formatter(plain)
        ax.set_xlabel(panel.get("xlabel", ""))
        ax.set_ylabel(panel.get("ylabel", ""))
        ax.set_title(panel.get("title", ""), fontsize=10, fontfamily=family)
        ax.grid(alpha=0.3)
        if len(panel["curves"]) > 1:
            ax.legend(prop={"family": list(family), "size": 7})
    if title:
        figure.suptitle(title, fontfamily=family)
    return figure
