"""Gradient utilities: ``clip_grad_norm_``."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from minigrad.backend import array_module
from minigrad.tensor import Tensor


def clip_grad_norm_(
    parameters: Iterable[Tensor] | Tensor, max_norm: float, norm_type: float = 2.0
) -> Tensor:
    """Scale all gradients together so that their total norm is at most ``max_norm``.

    total = sqrt(sum over parameters of |g|^2) (``norm_type=2``; ``float("inf")`` takes the
    largest |g| instead); if total > max_norm every g is multiplied by
    max_norm / (total + 1e-6), as in PyTorch. Returns the total norm before clipping (a 0-d
    Tensor).
    """
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    parameters = [p for p in parameters if p.grad is not None]
    grads = [p.grad.array for p in parameters]
    if not grads:
        return Tensor(np.zeros((), dtype=np.float32))
    xp = array_module(grads[0])
    if norm_type == float("inf"):
        total = xp.stack([xp.abs(g).max() for g in grads]).max()
    else:
        # the norm of the per-parameter norms = the norm of all entries together
        p = float(norm_type)
        norms = xp.stack([(xp.abs(g) ** p).sum() ** (1 / p) for g in grads])
        total = (norms**p).sum() ** (1 / p)
    total = total.astype(grads[0].dtype)
    coef = min(float(max_norm) / (float(total) + 1e-6), 1.0)
    if coef < 1.0:
        # new arrays, not in-place: the engine may hand two leaves the same gradient array
        for param in parameters:
            param.grad = Tensor._make(param.grad.array * param.grad.dtype.type(coef))
    return Tensor(total)
