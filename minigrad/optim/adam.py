"""Adam and AdamW, with PyTorch's exact update (Kingma and Ba 2015; Loshchilov and Hutter 2019):

    t = t + 1
    g = grad + weight_decay * p                  (Adam: L2 penalty folded into the gradient)
    p = p * (1 - lr * weight_decay)              (AdamW instead: decoupled weight decay)
    m = beta1 * m + (1 - beta1) * g              (first moment: mean of g)
    v = beta2 * v + (1 - beta2) * g^2            (second moment: mean of g^2)
    p = p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)

The bias corrections 1 - beta^t undo the start of m and v at zero. All array arithmetic is
in place in the parameter's dtype; only the scalar factors are Python floats. These lines
are ``adam_update`` (and ``adam_direction``) below, for one parameter.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import NamedTuple

from minigrad import fast
from minigrad.backend import array_module
from minigrad.optim.optimizer import Optimizer
from minigrad.tensor import Tensor


class Adam(Optimizer):
    decoupled_weight_decay = False

    def __init__(
        self,
        params: Iterable,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
    ):
        name = type(self).__name__
        if lr < 0 or eps < 0 or weight_decay < 0:
            raise ValueError(f"{name}: lr, eps and weight_decay must be >= 0")
        if not all(0.0 <= beta < 1.0 for beta in betas):
            raise ValueError(f"{name}: betas must be in [0, 1), got {betas}")
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay)
        super().__init__(params, defaults)

    def update(self, param: Tensor, grad, state: dict, group: dict) -> None:
        if not state:
            xp = array_module(param.array)
            state["step"] = 0
            state["exp_avg"] = xp.zeros_like(param.array)
            state["exp_avg_sq"] = xp.zeros_like(param.array)
        state["step"] += 1
        coefficients = self._coefficients(group, state["step"])
        adam_update(param.array, grad, state["exp_avg"], state["exp_avg_sq"], coefficients)

    def update_group(self, params: list, group: dict) -> None:
        """One step of every parameter of the group; the fast layer's, where it has one
        (minigrad.fast.adam: the same numbers, bit for bit)."""
        update_fast = fast.routine("adam_update_group", params[0].device) if params else None
        if update_fast is not None:
            params = update_fast(self, params, group)  # (the parameters it left to us)
        super().update_group(params, group)

    def _coefficients(self, group: dict, step: int) -> AdamCoefficients:
        lr, (beta1, beta2) = group["lr"], group["betas"]
        return AdamCoefficients(
            lr=lr,
            beta1=beta1,
            beta2=beta2,
            eps=group["eps"],
            weight_decay=group["weight_decay"],
            decoupled=self.decoupled_weight_decay,
            step_size=lr / (1 - beta1**step),
            bias_correction2_sqrt=math.sqrt(1 - beta2**step),
        )


class AdamCoefficients(NamedTuple):
    lr: float
    beta1: float
    beta2: float
    eps: float
    weight_decay: float
    decoupled: bool  # AdamW's decay of p, or Adam's L2 term in g
    step_size: float  # lr / (1 - beta1^t)
    bias_correction2_sqrt: float  # sqrt(1 - beta2^t)


def adam_update(p, grad, m, v, c: AdamCoefficients) -> None:
    """One Adam(W) step on arrays, in place: p, m and v are updated, grad is left as it is."""
    if c.weight_decay != 0:
        if c.decoupled:
            p *= 1 - c.lr * c.weight_decay  # p = p (1 - lr wd)
        else:
            grad = grad + c.weight_decay * p  # g = g + wd p (a new array)
    direction = array_module(p).empty_like(m)
    adam_direction(grad, m, v, direction, c)
    p -= direction


def adam_direction(grad, m, v, out, c: AdamCoefficients) -> None:
    """Update m and v from grad, in place, and write the step that p takes (down) into out:
    step_size * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)."""
    xp = array_module(m)
    # m = m + (1 - beta1) (g - m)   (= beta1 m + (1 - beta1) g, as PyTorch's lerp)
    xp.subtract(grad, m, out=out)
    out *= 1 - c.beta1
    m += out
    # v = beta2 v + (1 - beta2) g^2
    v *= c.beta2
    xp.multiply(grad, grad, out=out)
    out *= 1 - c.beta2
    v += out
    # step_size * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
    xp.sqrt(v, out=out)
    out /= c.bias_correction2_sqrt
    out += c.eps
    xp.divide(m, out, out=out)
    out *= c.step_size


class AdamW(Adam):
    """Adam with decoupled weight decay: p shrinks by lr * weight_decay each step, apart from
    the gradient (Loshchilov and Hutter 2019). weight_decay defaults to 0.01."""

    decoupled_weight_decay = True

    def __init__(
        self,
        params: Iterable,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.01,
    ):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
