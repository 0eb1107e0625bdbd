"""Losses: cross-entropy (log_softmax and the negative log-likelihood fused in one node) and
mean squared error.

    loss_i = -log softmax(x_i)[t_i] = logsumexp(x_i) - x_i[t_i]
    dloss_i/dx_i = softmax(x_i) - onehot(t_i)
"""

from __future__ import annotations

import math

from minigrad.autograd.function import Function
from minigrad.errors import OutOfRangeError, ShapeError
from minigrad.ops._helpers import as_index, xp_of


class CrossEntropy(Function):
    # x: (N, C) logits, t: (N,) class indices; a row whose target is ignore_index counts for
    # nothing.  loss_i = logsumexp(x_i) - x_i[t_i] = -log softmax(x_i)[t_i], reduced by the
    # mean over the counted rows, the sum, or none
    @staticmethod
    def forward(ctx, logits, target, ignore_index, reduction):
        xp = xp_of(logits)
        rows, classes = logits.shape
        counted = target != ignore_index  # the rows that count
        target = xp.where(counted, target, 0)  # (an ignored row's target: any valid class)
        if rows and (target.min() < 0 or target.max() >= classes):
            bad = target[(target < 0) | (target >= classes)][0]
            raise OutOfRangeError(
                f"cross_entropy: target {int(bad)} is out of range for {classes} classes "
                f"(logits of shape {logits.shape})"
            )
        shifted = logits - logits.max(axis=1, keepdims=True)  # x - m: e^x cannot overflow
        log_probs = shifted - xp.log(xp.exp(shifted).sum(axis=1, keepdims=True))
        losses = -log_probs[xp.arange(rows), target] * counted
        ctx.reduction, ctx.count = reduction, int(counted.sum())
        ctx.save_for_backward(logits, target, counted)
        if reduction == "none":
            return losses
        if reduction == "sum":
            return losses.sum()
        return losses.sum() / ctx.count if ctx.count else xp.asarray(math.nan, logits.dtype)

    @staticmethod
    def backward(ctx, grad):
        # dL/dx_i = w_i * (softmax(x_i) - onehot(t_i)),  w_i = the weight of row i in the
        # reduction (1, 1/count, or 0 where ignored) times g
        logits, target, counted = ctx.saved_tensors
        xp = xp_of(logits.array)
        onehot = xp.zeros(logits.shape, logits.dtype)
        onehot[xp.arange(logits.shape[0]), target.array] = 1
        row_weight = counted.array.astype(logits.dtype)[:, None] * _mean_scale(ctx)
        upstream = grad.reshape(-1, 1) if ctx.reduction == "none" else grad
        return (logits.softmax(dim=1) - onehot) * (upstream * row_weight), None


def _mean_scale(ctx) -> float:
    """d loss / d loss_i for a counted row: 1 / count for the mean (0 when no row counts: the
    loss is nan but its gradient zero, as in PyTorch), 1 otherwise."""
    if ctx.reduction != "mean":
        return 1.0
    return 1.0 / ctx.count if ctx.count else 0.0


def cross_entropy(logits, target, ignore_index: int = -100, reduction: str = "mean"):
    """Cross-entropy of ``logits`` (N, C) or (N, C, d1, ...) or (C,) against class indices.

    As in PyTorch the class dim is dim 1 (dim 0 for a single (C,) row).
    """
    check_reduction("cross_entropy", reduction)
    target = as_index(logits, target).array
    if target.dtype.kind not in "iu":
        raise TypeError(
            f"cross_entropy: target must hold class indices (int64), got {target.dtype}"
        )
    shape = logits.shape
    expected = shape[:1] + shape[2:] if len(shape) > 1 else ()  # the target's shape
    if target.shape != expected:
        raise ShapeError(
            f"cross_entropy: target of shape {target.shape} does not fit logits of shape "
            f"{shape} (expected target shape {expected})"
        )
    if len(shape) == 2:
        rows = logits
    elif len(shape) == 1:
        rows = logits.reshape(1, -1)
    else:  # (N, C, d1, ...) -> (N, d1, ..., C) -> (N * d1 * ..., C)
        order = (0,) + tuple(range(2, len(shape))) + (1,)
        rows = logits.permute(*order).reshape(-1, shape[1])
    targets = target if target.ndim == 1 else target.reshape(-1)
    loss = CrossEntropy.apply(rows, targets, ignore_index=ignore_index, reduction=reduction)
    if reduction == "none":
        return loss.reshape(expected)
    return loss


def mse_loss(input, target, reduction: str = "mean"):  # noqa: A002  (PyTorch's name)
    """Mean squared error: mean((input - target)^2)."""
    check_reduction("mse_loss", reduction)
    squared = (input - target) ** 2
    if reduction == "none":
        return squared
    return squared.sum() if reduction == "sum" else squared.mean()


def check_reduction(op: str, reduction: str) -> str:
    """``reduction`` if it is one a loss knows (mean, sum, none), else an error naming ``op``."""
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{op}: reduction must be mean, sum or none, got {reduction!r}")
    return reduction
