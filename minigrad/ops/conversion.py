"""Changing dtype or device, differentiably: the gradient goes back the way it came."""

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


def cast(x, dtype):
    return x if x.dtype == dtype else Cast.apply(x, dtype)


def to_device(x, device: str):
    return x if x.device == device else ToDevice.apply(x, device)


MaxResult = namedtuple("MaxResult", ["values", "indices"])
