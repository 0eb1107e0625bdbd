"""Gradient utilities: ``clip_grad_norm_``."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from minigrad.backend import array_module
from minigrad.tensor import Tensor


def clip_grad_norm_(parameters: Iterable[Tensor] | Tensor, max_norm: float) -> Tensor:
    """Scale all gradients together so that their total norm is at most ``max_norm``.

    total = sqrt(sum over parameters of |g|^2); if total > max_norm every g is multiplied by
    max_norm / (total + 1e-6), as in PyTorch. Returns the total norm before clipping (a 0-d
    Tensor).
    """
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    parameters = [p for p in parameters if p.grad is not None]
    grads = [p.grad.data for p in parameters]
    if not grads:
        return Tensor(np.zeros((), dtype=np.float32))
    xp = array_module(grads[0])
    # norm of the per-parameter norms = norm of all entries together
    norms = xp.stack([xp.sqrt(xp.sum(g * g)) for g in grads]).astype(grads[0].dtype)
    total = xp.sqrt(xp.sum(norms * norms))
    coef = min(float(max_norm) / (float(total) + 1e-6), 1.0)
    if coef < 1.0:
        # new arrays, not in-place: the engine may hand two leaves the same gradient array
        for p in parameters:
            p.grad = Tensor._make(p.grad.data * p.grad.dtype.type(coef))
    return Tensor(total)
