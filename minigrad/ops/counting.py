"""Counting values, with no gradient (a count is not a smooth function of the values):
``histogram`` and ``histc`` (how many values fall in each bin), ``bincount`` (how often each
integer occurs) and ``F.one_hot`` (each integer as a row of zeros with a 1 at its place).
"""

from __future__ import annotations

import math
from collections import namedtuple

import numpy as np

from minigrad.ops._helpers import xp_of
from minigrad.tensor import Tensor

HistogramResult = namedtuple("HistogramResult", ["hist", "bin_edges"])


def histogram(input, bins, range=None, weight=None, density=False):  # noqa: A001, A002
    """Counts of ``input``'s values (flattened) in ``bins``: an int (equal bins over
    ``range``, by default from the smallest value to the largest) or a 1-D tensor of edges.
    Returns (hist, bin_edges), both float tensors of input's dtype; with ``weight``, each
    value counts its weight; ``density=True`` scales hist to integrate to 1 over the bins."""
    _check_float(input, "histogram")
    values = input.array.reshape(-1)
    xp = xp_of(values)
    if isinstance(bins, Tensor):
        if bins.dtype != input.dtype:
            raise RuntimeError(
                f"histogram: input tensor and bins tensors should have the same dtype, but "
                f"got input with dtype {input.dtype} and bins with dtype {bins.dtype}"
            )
        edges = bins.array
        if edges.ndim != 1 or edges.size < 2 or bool((edges[1:] < edges[:-1]).any()):
            raise RuntimeError(
                f"histogram: bins must be a 1-D tensor of at least 2 increasing edges, got "
                f"shape {bins.shape}"
            )
    else:
        edges = _even_edges(values, bins, range, "histogram", widen=0.5)
    weights = None
    if weight is not None:
        if tuple(weight.shape) != input.shape:
            raise RuntimeError(
                f"histogram: weight of shape {tuple(weight.shape)} must have the shape of "
                f"the input, {input.shape}"
            )
        weights = weight.array.reshape(-1)
    hist, _ = xp.histogram(values, bins=edges, weights=weights)
    if density:
        hist = hist / (hist.sum() * xp.diff(edges))
    hist, edges = hist.astype(input.dtype), xp.asarray(edges).astype(input.dtype)
    return HistogramResult(Tensor._make(hist), Tensor._make(edges))


def histc(input, bins: int = 100, min=0, max=0):  # noqa: A001, A002
    """Counts of ``input``'s values in ``bins`` equal bins from ``min`` to ``max`` (both 0,
    or equal: the smallest and largest value); values outside are not counted."""
    _check_float(input, "histc")
    if max < min:
        raise RuntimeError(f"histc: max must be larger than min, got min {min} and max {max}")
    values = input.array.reshape(-1)
    limits = None if min == max else (min, max)
    edges = _even_edges(values, bins, limits, "histc", widen=1.0)
    hist, _ = xp_of(values).histogram(values, bins=edges)
    return Tensor._make(hist.astype(input.dtype))


def _even_edges(values, bins, limits, op: str, widen: float):
    """``bins`` + 1 evenly spaced edges over ``limits`` (None: the values' own range), widened
    by ``widen`` each side where both ends are the same."""
    if not isinstance(bins, (int, np.integer)) or bins <= 0:
        raise RuntimeError(f"{op}: bins must be a positive integer, but got {bins}")
    if limits is None:
        limits = (float(values.min()), float(values.max())) if values.size else (0.0, 1.0)
    low, high = float(limits[0]), float(limits[1])
    if not (math.isfinite(low) and math.isfinite(high)):
        raise RuntimeError(f"{op}: range [{low}, {high}] is not finite")
    if low > high:
        raise RuntimeError(f"{op}: min should not exceed max, but got min {low} max {high}")
    if low == high:
        low, high = low - widen, high + widen
    return xp_of(values).linspace(low, high, int(bins) + 1)


def _check_float(x, op: str) -> None:
    if x.dtype.kind != "f":
        raise NotImplementedError(f"{op}: not implemented for dtype {x.dtype}; use .float()")


def bincount(input, weights=None, minlength: int = 0):  # noqa: A002
    """How often each integer 0, 1, ... occurs in a 1-D int tensor (with ``weights``: the
    sum of the weights of its occurrences); at least ``minlength`` entries."""
    if input.dtype.kind not in "iu":
        raise NotImplementedError(f"bincount: not implemented for dtype {input.dtype}")
    if input.ndim != 1 or (input.numel() and int(input.array.min()) < 0):
        raise RuntimeError(
            f"bincount only supports 1-d non-negative integral inputs (got shape {input.shape})"
        )
    counts = xp_of(input.array).bincount(
        input.array, weights=None if weights is None else weights.array, minlength=minlength
    )
    if weights is None:
        return Tensor._make(counts.astype(np.int64))
    dtype = weights.dtype if weights.dtype.kind == "f" else np.float64
    return Tensor._make(counts.astype(dtype))


def one_hot(tensor, num_classes: int = -1):
    """Each int64 class index as a row of ``num_classes`` zeros with a 1 at the index: shape
    (*tensor.shape, num_classes), int64. num_classes=-1: one more than the largest index."""
    if not isinstance(tensor, Tensor) or tensor.dtype != np.int64:
        kind = tensor.dtype if isinstance(tensor, Tensor) else type(tensor).__name__
        raise RuntimeError(
            f"one_hot is only applicable to index tensor of type LongTensor (int64), got {kind}"
        )
    classes = tensor.array
    xp = xp_of(classes)
    if num_classes == -1:
        if classes.size == 0:
            raise RuntimeError("one_hot: Can not infer total number of classes from empty tensor.")
        num_classes = int(classes.max()) + 1
    if classes.size and int(classes.min()) < 0:
        raise RuntimeError("one_hot: Class values must be non-negative.")
    if classes.size and int(classes.max()) >= num_classes:
        raise RuntimeError(
            f"one_hot: Class values must be smaller than num_classes ({num_classes}), got "
            f"{int(classes.max())}"
        )
    return Tensor._make((classes[..., None] == xp.arange(num_classes)).astype(np.int64))
