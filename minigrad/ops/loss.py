"""Losses: cross-entropy (log_softmax and the negative log-likelihood fused in one node) and
mean squared error.

    loss_i = -log softmax(x_i)[t_i] = logsumexp(x_i) - x_i[t_i]
    dloss_i/dx_i = softmax(x_i) - onehot(t_i)
"""

from __future__ import annotations

import math

from minigrad.autograd.function import Function
from minigrad.autograd.grad_mode import is_grad_enabled
from minigrad.backend import (
    index_range,
    row_maxima,
    row_starts,
    row_sums,
    scalar_operand,
    weighted_sum,
)
from minigrad.errors import OutOfRangeError, ShapeError
from minigrad.ops._helpers import xp_of
from minigrad.tensor import Tensor


class CrossEntropy(Function):
    # x: (N, C) logits, t: (N,) class indices; rows whose target is ignore_index count for
    # nothing.  loss_i = logsumexp(x_i) - x_i[t_i];  reduced by mean over counted rows,
    # sum, or none.  dL/dx_i = w_i * (softmax(x_i) - onehot(t_i)), w_i the weight of row i
    # in the reduction times g
    @staticmethod
    def forward(ctx, logits, target, ignore_index, reduction):
        xp = xp_of(logits)
        rows, classes = logits.shape
        lowest, highest = index_range(target) if rows else (0, 0)
        if lowest <= ignore_index <= highest:  # some rows may be ignored: find them
            counted = target != ignore_index
            ctx.count = int(counted.sum())  # rows that count (the mean divides by them)
            safe_target = xp.where(counted, target, 0)
            lowest, highest = index_range(safe_target)
        else:  # no target equals ignore_index: every row counts (the common case)
            counted, ctx.count, safe_target = None, rows, target
        if lowest < 0 or highest >= classes:
            bad = lowest if lowest < 0 else highest
            raise OutOfRangeError(
                f"cross_entropy: target {bad} is out of range for {classes} classes "
                f"(logits of shape {logits.shape})"
            )
        rowmajor = xp.ascontiguousarray(logits)  # so that flat position i * C + t is (i, t)
        shifted = rowmajor - row_maxima(rowmajor)  # x - m
        picked = row_starts(rows, classes, logits) + safe_target  # flat positions i * C + t_i
        target_shifted = shifted.reshape(-1).take(picked)  # x_i[t_i] - m_i
        exps = xp.exp(shifted, out=shifted)  # e^(x - m), kept: softmax(x) = exps / row sums
        sums = row_sums(exps, keepdims=False)
        log_p = target_shifted - xp.log(sums)  # log p of the target: -loss_i
        if counted is not None:
            log_p *= counted
        ctx.reduction = reduction
        ctx.save_for_backward(logits, exps, sums, picked, counted, log_p)
        if reduction == "none":
            return xp.negative(log_p)
        # -sum, or -sum / count (nan when no row counts, as in PyTorch)
        if reduction == "sum":
            return weighted_sum(log_p, -1.0)
        return weighted_sum(log_p, -1.0 / ctx.count if ctx.count else math.nan)

    @staticmethod
    def backward(ctx, grad):
        if not is_grad_enabled():
            _, exps, sums, picked, counted, log_p = ctx.saved_arrays
            probs = exps / sums[:, None]  # softmax(x)
            return _backward_on_arrays(ctx, grad.data, probs, picked, counted, log_p)
        logits, _, _, picked, counted, _ = ctx.saved_tensors
        xp = xp_of(logits.data)
        counted = None if counted is None else counted.data  # None: every row counts
        probs = logits.softmax(dim=1)  # create_graph: softmax of the logits, differentiably
        onehot = xp.zeros(logits.shape, dtype=logits.dtype)
        onehot.reshape(-1)[picked.data] = 1
        if counted is None:
            row_weight = xp.ones(logits.shape[0], dtype=logits.dtype)
        else:
            row_weight = counted.astype(logits.dtype)
        if ctx.reduction == "mean":
            row_weight *= _mean_scale(ctx.count)
        row_weight = type(logits)._make(row_weight[:, None])
        if ctx.reduction == "none":
            row_weight = row_weight * grad.reshape(-1, 1)
        else:
            row_weight = row_weight * grad
        return (probs - type(logits)._make(onehot)) * row_weight, None


def _backward_on_arrays(ctx, grad, probs, picked, counted, log_p):
    """CrossEntropy.backward's formula on raw arrays, in place on ``probs`` (softmax(x), a
    new array): the fast path outside create_graph (the Tensor version above is its plain
    twin). ``counted`` is None when every row counts. At the targets, p - 1 is written as
    expm1(log p), from the forward's log p: exact where p is near 1, and one write."""
    xp = xp_of(probs)
    grad_x = probs
    grad_x.reshape(-1)[picked] = xp.expm1(log_p)  # softmax(x) - onehot(t)
    if ctx.reduction != "none" and counted is None:
        grad_x *= grad
        if ctx.reduction == "mean":
            grad_x *= scalar_operand(_mean_scale(ctx.count), grad_x)
        return Tensor._make(grad_x), None
    if counted is None:
        counted = xp.ones(grad_x.shape[0], dtype=bool)
    if ctx.reduction == "none":
        row_weight = counted * grad.reshape(-1)
    elif ctx.reduction == "sum":
        row_weight = counted * grad
    else:
        row_weight = counted * (grad * _mean_scale(ctx.count))
    grad_x *= row_weight[:, None]
    return Tensor._make(grad_x), None


def _mean_scale(count: int) -> float:
    """d mean / d loss_i = 1 / count for a counted row; with no row counted the loss is nan
    but its gradient is zero, as in PyTorch."""
    return 1.0 / count if count else 0.0


def cross_entropy(logits, target, ignore_index: int = -100, reduction: str = "mean"):
    """Cross-entropy of ``logits`` (N, C) or (N, C, d1, ...) or (C,) against class indices.

    As in PyTorch the class dim is dim 1 (dim 0 for a single (C,) row).
    """
    check_reduction("cross_entropy", reduction)
    target = logits.as_index(target).data
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
