"""Adam and AdamW over many parameters at once: the same numbers as ``optim.adam``'s
``adam_update``, bit for bit, in fewer array calls.

On the CPU, the small parameters' moments lie end to end in two flat arrays
(``_FlatMoments``): one step over all of them is then a dozen NumPy calls on long arrays,
shared by both cores, instead of a dozen calls per parameter (a toy GPT has dozens of
parameters). A big parameter is updated on its own, in two halves on both cores. On the
GPU, each parameter's update is one fused CUDA kernel instead of a dozen launches.
"""

from __future__ import annotations

import functools
import itertools
import weakref

import numpy as np

from minigrad import fast
from minigrad.fast.arrays import PARALLEL_MIN_SIZE, in_two_halves
from minigrad.optim.adam import adam_direction, adam_update


@fast.register("adam_update_group", "cpu")
def update_group_on_cpu(optimizer, params: list, group: dict) -> list:
    """One step of ``params`` (all with a gradient); returns those it left to the caller
    (none: every NumPy parameter is handled here)."""
    together = _small_parameters(optimizer, params, group)
    if together:
        _update_together(optimizer, together, group)
    joined = {id(p) for p in together}
    for param in params:
        if id(param) not in joined:
            _update_alone(optimizer, param, group)
    return []


def _update_alone(optimizer, param, group: dict) -> None:
    """adam_update of one parameter, in two halves of its flat values where it is big."""
    state = optimizer.state.setdefault(param, {})
    if not state:
        state["step"] = 0
        state["exp_avg"] = np.zeros_like(param.array)
        state["exp_avg_sq"] = np.zeros_like(param.array)
    state["step"] += 1
    c = optimizer._coefficients(group, state["step"])
    p, grad, m, v = param.array, param.grad.array, state["exp_avg"], state["exp_avg_sq"]
    if all(a.flags.c_contiguous for a in (p, m, v)) and grad.shape == p.shape:
        flat = (a.reshape(-1) for a in (p, grad, m, v))
        in_two_halves(functools.partial(adam_update, c=c), *flat)
    else:
        adam_update(p, grad, m, v, c)


def _small_parameters(optimizer, params: list, group: dict) -> list:
    """The parameters to update at once: the small float NumPy ones of one dtype, if there
    are two or more and all are at the same step (one that had no gradient at some step has
    fallen behind). None for Adam with weight decay, whose L2 term needs each parameter in
    its gradient."""
    if not optimizer.decoupled_weight_decay and group["weight_decay"] != 0:
        return []
    dtype = params[0].array.dtype
    together = [p for p in params if _fits_flat_moments(p, dtype)]
    steps = {optimizer.state.get(p, {}).get("step", 0) for p in together}
    return together if len(together) >= 2 and len(steps) == 1 else []


def _fits_flat_moments(param, dtype) -> bool:
    """A small float NumPy parameter of ``dtype``, with a gradient of that dtype."""
    data = param.array
    return (
        type(data) is np.ndarray
        and data.dtype == dtype
        and dtype.kind == "f"
        and param.grad.array.dtype == dtype
        and param.grad.shape == data.shape
        and data.size < PARALLEL_MIN_SIZE
    )


# optimizer -> {id(group): _FlatMoments of its small parameters}; held weakly, so that the flat
# arrays go with their optimizer
_flat_moments: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _update_together(optimizer, params: list, group: dict) -> None:
    """adam_update on every parameter of ``params`` at once, over flat arrays."""
    states = [optimizer.state.setdefault(p, {}) for p in params]
    by_group = _flat_moments.setdefault(optimizer, {})
    moments = by_group.get(id(group))
    if moments is None or not moments.holds(params, states):
        moments = by_group[id(group)] = _FlatMoments(params, states)
    step = states[0]["step"] + 1
    c = optimizer._coefficients(group, step)
    np.concatenate([p.grad.array.reshape(-1) for p in params], out=moments.grads)
    in_two_halves(
        functools.partial(adam_direction, c=c),
        moments.grads,
        moments.exp_avg,
        moments.exp_avg_sq,
        moments.directions,
    )
    for param, state, direction in zip(params, states, moments.direction_views):
        if c.weight_decay != 0:
            param.array *= 1 - c.lr * c.weight_decay  # p = p (1 - lr wd)
        param.array -= direction
        state["step"] = step


class _FlatMoments:
    """The moments m and v of many small parameters, laid end to end in two flat arrays.
    Each parameter's state holds views into them, so ``state_dict()`` and the one-by-one
    update see the same numbers. The price: two more flat arrays of the same size, for the
    gradients (copied in each step) and the steps taken."""

    def __init__(self, params: list, states: list):
        dtype = params[0].array.dtype
        ends = list(itertools.accumulate(p.array.size for p in params))
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
