"""Changing dtype or device, or copying, differentiably: the gradient goes back the way it
came."""

from __future__ import annotations

from collections import namedtuple

from minigrad.autograd.function import Function
from minigrad.backend import device_of
from minigrad.backend import to_device as _move


class Cast(Function):
    # y = x as another dtype;  dL/dx = g as x's dtype
    @staticmethod
    def forward(ctx, x, dtype):
        ctx.input_dtype = x.dtype
        return x.astype(dtype)

    @staticmethod
    def backward(ctx, grad):
        return cast(grad, ctx.input_dtype), None


class ToDevice(Function):
    # y = x copied to another device;  dL/dx = g copied back
    @staticmethod
    def forward(ctx, x, device):
        ctx.input_device = device_of(x)
        return _move(x, device)

    @staticmethod
    def backward(ctx, grad):
        return to_device(grad, ctx.input_device), None


class Clone(Function):
    # y = a copy of x in new memory;  dL/dx = g
    @staticmethod
    def forward(ctx, x):
        return x.copy()

    @staticmethod
    def backward(ctx, grad):
        return grad


def clone(x):
    """A copy of ``x`` that owns its memory (writing to it leaves x alone), still in the
    graph: the gradient flows back to x unchanged."""
    return Clone.apply(x)


def cast(x, dtype):
    return x if x.dtype == dtype else Cast.apply(x, dtype)


def to_device(x, device: str):
    return x if x.device == device else ToDevice.apply(x, device)


MaxResult = namedtuple("MaxResult", ["values", "indices"])
