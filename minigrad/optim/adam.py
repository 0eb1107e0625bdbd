"""Adam and AdamW, with PyTorch's exact update (Kingma and Ba 2015; Loshchilov and Hutter 2019):

    t = t + 1
    g = grad + weight_decay * p                  (Adam: L2 penalty folded into the gradient)
    p = p * (1 - lr * weight_decay)              (AdamW instead: decoupled weight decay)
    m = beta1 * m + (1 - beta1) * g              (first moment: mean of g)
    v = beta2 * v + (1 - beta2) * g^2            (second moment: mean of g^2)
    p = p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)

The bias corrections 1 - beta^t undo the start of m and v at zero. All array arithmetic is
in place in the parameter's dtype; only the scalar factors are Python floats. These lines
are ``adam_update`` (and ``adam_direction``) below, for one parameter; small NumPy
parameters go through the same lines all at once, over flat arrays (``_FlatMoments``), with
the same numbers.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Iterable
from typing import NamedTuple

import numpy as np

from minigrad.backend import (
    PARALLEL_MIN_SIZE,
    array_module,
    fused_adam_update,
    in_two_halves,
    is_numpy,
)
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
        self._flat_moments: dict = {}  # id(group) -> _FlatMoments of its small parameters

    def update(self, param: Tensor, grad, state: dict, group: dict) -> None:
        if not state:
            xp = array_module(param.data)
            state["step"] = 0
            state["exp_avg"] = xp.zeros_like(param.data)
            state["exp_avg_sq"] = xp.zeros_like(param.data)
        state["step"] += 1
        coefficients = self._coefficients(group, state["step"])
        m, v = state["exp_avg"], state["exp_avg_sq"]
        p = param.data
        if is_numpy(p) and p.flags.c_contiguous and m.flags.c_contiguous and v.flags.c_contiguous:
            # flat views of p, m and v: a big parameter is updated on both cores, half each
            update = functools.partial(adam_update, c=coefficients)
            in_two_halves(
                update,
                p.reshape(-1),
                grad.reshape(-1),
                m.reshape(-1),
                v.reshape(-1),
                writes=(0, 2, 3),
            )
        elif is_numpy(p):
            adam_update(p, grad, m, v, coefficients)
        else:  # the same lines as one CUDA kernel: one launch per parameter instead of a dozen
            fused_adam_update(param.data, grad, m, v, coefficients)

    def update_group(self, params: list, group: dict) -> None:
        """Small NumPy parameters are updated all at once (see _FlatMoments), the others one
        by one; both compute the same numbers, bit for bit."""
        together = self._small_parameters(params, group)
        if together:
            self._update_together(together, group)
            joined = {id(p) for p in together}
            params = [p for p in params if id(p) not in joined]
        super().update_group(params, group)

    def _small_parameters(self, params: list, group: dict) -> list:
        """The parameters to update at once: the small float NumPy ones of one dtype, if
        there are two or more and all are at the same step (one that had no gradient at some
        step has fallen behind). None for Adam with weight decay, whose L2 term needs each
        parameter in its gradient."""
        if not self.decoupled_weight_decay and group["weight_decay"] != 0:
            return []
        dtype = params[0].data.dtype
        together = [p for p in params if _fits_flat_moments(p, dtype)]
        steps = {self.state.get(p, {}).get("step", 0) for p in together}
        return together if len(together) >= 2 and len(steps) == 1 else []

    def _update_together(self, params: list, group: dict) -> None:
        """adam_update on every parameter of ``params`` at once, over flat arrays."""
        states = [self.state.setdefault(p, {}) for p in params]
        moments = self._flat_moments.get(id(group))
        if moments is None or not moments.holds(params, states):
            moments = self._flat_moments[id(group)] = _FlatMoments(params, states)
        step = states[0]["step"] + 1
        c = self._coefficients(group, step)
        np.concatenate([p.grad.data.reshape(-1) for p in params], out=moments.grads)
        in_two_halves(
            functools.partial(adam_direction, c=c),
            moments.grads,
            moments.exp_avg,
            moments.exp_avg_sq,
            moments.directions,
            writes=(1, 2, 3),
        )
        for param, state, direction in zip(params, states, moments.direction_views):
            if c.weight_decay != 0:
                param.data *= 1 - c.lr * c.weight_decay  # p = p (1 - lr wd)
            param.data -= direction
            state["step"] = step

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


def _fits_flat_moments(param: Tensor, dtype) -> bool:
    """A small float NumPy parameter of ``dtype``, with a gradient of that dtype. (Big ones
    are updated on both cores one by one already, and skip the copy of their gradient.)"""
    data = param.data
    return (
        type(data) is np.ndarray
        and data.dtype == dtype
        and dtype.kind == "f"
        and param.grad.data.dtype == dtype
        and data.size < PARALLEL_MIN_SIZE
    )


class _FlatMoments:
    """The moments m and v of many small parameters, laid end to end in two flat arrays.

    One Adam step over all of them is then a dozen NumPy calls on long arrays, shared by
    both cores (in_two_halves), instead of a dozen calls per parameter: the ``small`` GPT
    of benchmarks/train_step.py has 68 parameters, and its optimizer step took 3.6-3.9 ms
    one by one, 2.4-2.9 ms together. Each parameter's state holds views into the flat
    arrays, so ``state_dict()`` and the one-by-one ``update`` see the same numbers. The
    price: two more flat arrays of the same size, for the gradients (copied in each step)
    and the steps taken, kept from one step to the next.
    """

    def __init__(self, params: list, states: list):
        dtype = params[0].data.dtype
        ends = list(itertools.accumulate(p.data.size for p in params))
        total = ends[-1]
        self.params = list(params)
        self.exp_avg, self.exp_avg_sq = np.zeros(total, dtype), np.zeros(total, dtype)
        self.grads, self.directions = np.empty(total, dtype), np.empty(total, dtype)
        self.direction_views = []
        for param, state, start, end in zip(params, states, [0] + ends[:-1], ends):
            m = self.exp_avg[start:end].reshape(param.shape)
            v = self.exp_avg_sq[start:end].reshape(param.shape)
            if state:  # moments from earlier steps (or a loaded state_dict) move in
                m[...], v[...] = state["exp_avg"], state["exp_avg_sq"]
            else:
                state["step"] = 0
            state["exp_avg"], state["exp_avg_sq"] = m, v
            self.direction_views.append(self.directions[start:end].reshape(param.shape))

    def holds(self, params: list, states: list) -> bool:
        """Whether these are still the parameters, in order, whose states view our arrays
        (load_state_dict replaces the states; a parameter may gain or lose its gradient)."""
        return (
            len(params) == len(self.params)
            and all(p is q for p, q in zip(params, self.params))
            and all(
                _views(state["exp_avg"], self.exp_avg)
                and _views(state["exp_avg_sq"], self.exp_avg_sq)
                for state in states
            )
        )


def _views(array, flat) -> bool:
    return isinstance(array, np.ndarray) and array.base is flat


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
