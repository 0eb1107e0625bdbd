"""``F.pad``: a border added around a tensor's last dims, in PyTorch's order of the pad
tuple: (left, right) of the last dim first, then (top, bottom) of the one before, and so on.

Constant padding is one op: forward writes x into the middle of a tensor full of ``value``,
backward cuts the middle out of the gradient (the border is constant, so it gets none).
"reflect", "replicate" and "circular" padding pick entries of x by an integer index along
each padded dim (``t[..., idx]``, built by NumPy's own pad of ``arange``), so their backward
is indexing's: each entry gets the gradients of all the places it was copied to.
A negative pad crops, as in PyTorch.
"""

from __future__ import annotations

import numpy as np

from minigrad.autograd.function import Function
from minigrad.ops._helpers import xp_of
from minigrad.ops.indexing import getitem
from minigrad.tensor import Tensor

_NUMPY_MODE = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}


class ConstantPad(Function):
    # y = value everywhere, x in the middle;  dL/dx = g cut to the middle
    @staticmethod
    def forward(ctx, x, widths, value):
        ctx.middle = tuple(slice(before, before + n) for (before, _), n in zip(widths, x.shape))
        shape = tuple(before + n + after for (before, after), n in zip(widths, x.shape))
        out = xp_of(x).full(shape, value, dtype=x.dtype)
        out[ctx.middle] = x
        return out

    @staticmethod
    def backward(ctx, grad):
        return grad[ctx.middle], None, None


def pad(input, pad, mode: str = "constant", value=None):  # noqa: A002  (PyTorch's names)
    """``input`` with ``pad[2i]`` entries before and ``pad[2i+1]`` after its i-th dim from
    the end. ``mode``: "constant" (``value``, 0 by default), "reflect", "replicate" or
    "circular"."""
    pad = tuple(pad)
    if any(not isinstance(p, (int, np.integer)) or isinstance(p, bool) for p in pad):
        raise TypeError(f"pad(): argument 'pad' must be a tuple of ints, got {pad}")
    if len(pad) % 2:
        raise RuntimeError(f"pad: Padding length must be divisible by 2, got {len(pad)}")
    if len(pad) // 2 > input.ndim:
        raise RuntimeError(
            f"pad: Padding length should be less than or equal to two times the input "
            f"dimension but got padding length {len(pad)} and input of dimension {input.ndim}"
        )
    # (before, after) per dim, first dim first
    widths = [(0, 0)] * (input.ndim - len(pad) // 2) + [
        (pad[i], pad[i + 1]) for i in range(len(pad) - 2, -1, -2)
    ]
    if mode == "constant":
        return _constant(input, widths, 0 if value is None else value)
    if mode not in _NUMPY_MODE:
        raise NotImplementedError(f"pad: Unrecognised padding mode {mode}")
    if value is not None and value != 0:
        raise RuntimeError(f'pad: Padding mode "{mode}" doesn\'t take in value argument')
    _check_non_constant(input, pad, mode)
    return _by_index(_crop(input, widths), widths, mode)


def _crop(x, widths):
    """x with the negative pads cut off its ends."""
    if all(before >= 0 and after >= 0 for before, after in widths):
        return x
    cut = []
    for (before, after), n in zip(widths, x.shape):
        start, stop = max(-before, 0), n - max(-after, 0)
        if stop < start:
            raise RuntimeError(
                f"pad: the negative padding {(before, after)} removes more than the {n} "
                f"entries of a dim of shape {x.shape}"
            )
        cut.append(slice(start, stop))
    return getitem(x, tuple(cut))


def _constant(x, widths, value):
    x = _crop(x, widths)
    widths = tuple((max(before, 0), max(after, 0)) for before, after in widths)
    if not any(before or after for before, after in widths):
        return x
    if isinstance(value, Tensor):
        value = value.item()
    return ConstantPad.apply(x, widths, value)


def _by_index(x, widths, mode: str):
    for axis, (before, after) in enumerate(widths):
        before, after = max(before, 0), max(after, 0)
        if before or after:
            positions = np.pad(np.arange(x.shape[axis]), (before, after), _NUMPY_MODE[mode])
            x = getitem(x, (slice(None),) * axis + (positions,))
    return x


def _check_non_constant(x, pad, mode: str) -> None:
    padded = len(pad) // 2
    if padded > 3 or x.ndim not in (padded + 1, padded + 2):
        raise NotImplementedError(
            f"pad: Padding size {len(pad)} is not supported for {x.ndim}D input tensor "
            f"in mode {mode!r}. Supported combinations for non-constant padding: 2D or 3D "
            "input with padding size 2, 3D or 4D with 4, 4D or 5D with 6"
        )
    for i in range(padded):
        axis = x.ndim - 1 - i
        size, before, after = x.shape[axis], pad[2 * i], pad[2 * i + 1]
        if size == 0:
            raise RuntimeError(f"pad: {mode} padding of a dim of size 0 (input shape {x.shape})")
        if mode == "reflect" and (before >= size or after >= size):
            raise RuntimeError(
                f"pad: Padding size should be less than the corresponding input dimension, "
                f"but got: padding {(before, after)} at dimension {axis} of input {x.shape}"
            )
        if mode == "circular" and (before > size or after > size):
            raise RuntimeError(
                f"pad: Padding value causes wrapping around more than once: padding "
                f"{(before, after)} at dimension {axis} of input {x.shape}"
            )
