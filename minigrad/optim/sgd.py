"""Stochastic gradient descent, with momentum and weight decay, as PyTorch computes it:

g = grad + weight_decay * p
b = g                                  (first step)
b = momentum * b + (1 - dampening) * g (later steps)
g = g + momentum * b  if nesterov  else  b
p = p - lr * g
"""

from __future__ import annotations

from collections.abc import Iterable

from minigrad.optim.optimizer import Optimizer
from minigrad.tensor import Tensor


class SGD(Optimizer):
    def __init__(
        self,
        params: Iterable,
        lr: float,
        momentum: float = 0.0,
        weight_decay: float = 0.0,
        dampening: float = 0.0,
        nesterov: bool = False,
    ):
        if lr < 0 or momentum < 0 or weight_decay < 0:
            raise ValueError(
                f"SGD: lr, momentum and weight_decay must be >= 0, got lr={lr}, "
                f"momentum={momentum}, weight_decay={weight_decay}"
            )
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("SGD: nesterov momentum needs momentum > 0 and dampening 0")
        defaults = dict(
            lr=lr,
            momentum=momentum,
            weight_decay=weight_decay,
            dampening=dampening,
            nesterov=nesterov,
        )
        super().__init__(params, defaults)

    def update(self, param: Tensor, grad, state: dict, group: dict) -> None:
        if group["weight_decay"] != 0:
            grad = grad + group["weight_decay"] * param.array  # a new array: grad stays intact
        momentum = group["momentum"]
        if momentum != 0:
            buffer = state.get("momentum_buffer")
            if buffer is None:
                buffer = state["momentum_buffer"] = grad.copy()
            else:
                buffer *= momentum
                buffer += (1 - group["dampening"]) * grad
            grad = grad + momentum * buffer if group["nesterov"] else buffer
        param.array -= group["lr"] * grad
