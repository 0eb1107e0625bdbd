"""Elementwise arithmetic on the CPU: big sums and products on both cores, and ``x ** p``
for a small whole exponent by multiplication.

- ``a + b`` and ``a * b`` of a big float result (``HALVES_MIN_SIZE`` values) run in two
  halves of its first axis, one on the helper thread (``arrays.by_rows``); an operand that
  is broadcast along that axis (an attention mask, a scale) is read whole by both halves.
  Smaller ones are one NumPy call, as in the reference. Add's backward is the reference's;
  Mul's computes the reference's products on the arrays, without building Tensor ops.
- NumPy's power takes a shortcut for the exponents 2, 0.5 and -1 (a square, a square root,
  a reciprocal), but for any other, ``x ** 3`` included, it calls the general ``pow`` on
  every value, which costs many times the multiplications ``x * x * x``. So for p = 3 and 4
  the Pow kernel multiplies, forward (x^3 = x*x*x, x^4 = (x*x)^2) and backward
  (p * x^(p-1)); every other exponent, and a tensor exponent, runs the reference as it is.
"""

from __future__ import annotations

import math

import numpy as np

from minigrad import fast
from minigrad.fast.arrays import by_rows
from minigrad.ops._helpers import shape_of, sum_array_to
from minigrad.ops.arithmetic import Pow
from minigrad.tensor import Tensor

BY_MULTIPLICATION = (3, 4)
HALVES_MIN_SIZE = 1 << 19  # values of the result: below this a hand-off costs what it saves


@fast.register("Add", "cpu")
class AddKernel:
    backward = None  # the reference's: dL/da = g, dL/db = g, each summed to its shape

    @staticmethod
    def forward(ctx, a, b):
        ctx.shapes = shape_of(a), shape_of(b)  # what Add.backward reads
        return in_halves(np.add, a, b)


@fast.register("Mul", "cpu")
class MulKernel:
    @staticmethod
    def forward(ctx, a, b):
        ctx.shapes = shape_a, shape_b = shape_of(a), shape_of(b)  # what Mul.backward reads
        ctx.save_for_backward(
            a if shape_b is not None else None, b if shape_a is not None else None
        )
        return in_halves(np.multiply, a, b)

    @staticmethod
    def backward(ctx, grad):
        # the reference's dL/da = g * b, dL/db = g * a on the arrays: no Tensor ops to build
        a, b = ctx.saved_arrays
        (shape_a, shape_b), g = ctx.shapes, grad.array
        grad_a = _product_grad(g, b, shape_a) if ctx.needs_input_grad[0] else None
        grad_b = _product_grad(g, a, shape_b) if ctx.needs_input_grad[1] else None
        return grad_a, grad_b


def _product_grad(grad, other, shape):
    """g * other summed to ``shape``, as a Tensor (of a 0-d array: NumPy makes a scalar)."""
    return Tensor._make(np.asarray(sum_array_to(grad * other, shape)))


def in_halves(ufunc, a, b):
    """ufunc(a, b): for a big float result, in two halves of its first axis at the same
    time; otherwise one call."""
    # (the result has at least as many values as either operand)
    if max(getattr(a, "size", 1), getattr(b, "size", 1)) < HALVES_MIN_SIZE:
        return ufunc(a, b)
    dtype = np.result_type(a, b) if _arrays_or_numbers(a, b) else None
    if dtype is None or dtype.kind != "f":
        return ufunc(a, b)
    out_shape = np.broadcast_shapes(np.shape(a), np.shape(b))
    size = math.prod(out_shape)
    out = np.empty(out_shape, dtype)

    def part(_, start, stop):
        ufunc(_rows_of(a, out_shape, start, stop), _rows_of(b, out_shape, start, stop),
              out=out[start:stop])  # fmt: skip

    by_rows(out_shape[0], size, part, HALVES_MIN_SIZE)
    return out


def _arrays_or_numbers(*operands) -> bool:
    return all(type(x) is np.ndarray or isinstance(x, (int, float)) for x in operands)


def _rows_of(x, out_shape, start, stop):
    """The operand's part for the rows [start, stop) of the result: its own rows where it has
    the result's first axis, else all of it (broadcast along that axis, or a number)."""
    if getattr(x, "ndim", 0) == len(out_shape) and x.shape[0] == out_shape[0]:
        return x[start:stop]
    return x


@fast.register("Pow", "cpu")
class PowKernel:
    @staticmethod
    def forward(ctx, a, b):
        ctx.whole_power = _whole_power(a, b)
        if ctx.whole_power is None:
            return Pow.forward(ctx, a, b)
        ctx.shapes = a.shape, None
        y = _power(a, ctx.whole_power)
        ctx.save_for_backward(a, b, y)  # what Pow.backward reads, in its order
        return y

    @staticmethod
    def backward(ctx, grad):
        if ctx.whole_power is None:
            return Pow.backward(ctx, grad)
        a, _, _ = ctx.saved_arrays
        p = ctx.whole_power
        grad_a = _power(a, p - 1)  # dL/da = g * p * a^(p-1)
        grad_a *= p
        grad_a *= grad.array
        return Tensor._make(grad_a), None


def _whole_power(a, b):
    """b as an int where the kernel multiplies: a float array, a number 3 or 4; else None."""
    if getattr(b, "shape", None) is not None or isinstance(b, bool) or a.dtype.kind != "f":
        return None
    return int(b) if b in BY_MULTIPLICATION else None


def _power(a, p: int):
    """a^p for p = 2, 3 or 4 by multiplication, in a new array."""
    y = np.multiply(a, a)
    if p == 3:
        y *= a
    elif p == 4:
        y *= y
    return y
