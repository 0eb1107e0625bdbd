"""``x ** p`` on the CPU for a small whole exponent: by multiplication.

NumPy's power takes a shortcut for the exponents 2, 0.5 and -1 (a square, a square root, a
reciprocal), but for any other, ``x ** 3`` included, it calls the general ``pow`` on every
value, which costs many times the multiplications ``x * x * x``. So for p = 3 and 4 this
kernel multiplies, forward (x^3 = x*x*x, x^4 = (x*x)^2) and backward (p * x^(p-1)); every
other exponent, and a tensor exponent, runs the reference as it is.
"""

from __future__ import annotations

import numpy as np

from minigrad import fast
from minigrad.ops.arithmetic import Pow
from minigrad.tensor import Tensor

BY_MULTIPLICATION = (3, 4)


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
