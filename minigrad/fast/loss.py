"""Cross-entropy on the CPU: ``ops.loss.CrossEntropy`` with its backward on arrays.

Forward keeps e^(x - m) and the row sums, so that backward's softmax is one division; the
target's logits are picked by flat position (i * C + t_i) from a cached row-start array; the
loss is a product with a column of weights (``arrays.weighted_sum``). At the targets,
p - 1 is written as expm1(log p): exact where p is near 1.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from minigrad import fast
from minigrad.errors import OutOfRangeError
from minigrad.fast.arrays import (
    index_range,
    row_maxima,
    row_starts,
    row_sums,
    scalar_operand,
    weighted_sum,
)
from minigrad.tensor import Tensor


@fast.register("CrossEntropy", "cpu")
class CrossEntropyKernel:
    @staticmethod
    def forward(ctx, logits, target, ignore_index, reduction):
        rows, classes = logits.shape
        lowest, highest = index_range(target) if rows else (0, 0)
        if lowest <= ignore_index <= highest:  # some rows may be ignored: find them
            counted = target != ignore_index
            ctx.count = int(counted.sum())
            target = np.where(counted, target, 0)
            lowest, highest = index_range(target)
        else:  # no target equals ignore_index: every row counts (the common case)
            counted, ctx.count = _all_true(rows), rows
        if lowest < 0 or highest >= classes:
            bad = lowest if lowest < 0 else highest
            raise OutOfRangeError(
                f"cross_entropy: target {bad} is out of range for {classes} classes "
                f"(logits of shape {logits.shape})"
            )
        ctx.reduction = reduction
        ctx.save_for_backward(logits, target, counted)  # what the reference's backward reads
        rowmajor = np.ascontiguousarray(logits)  # so that flat position i * C + t is (i, t)
        shifted = rowmajor - row_maxima(rowmajor)  # x - m
        picked = row_starts(rows, classes) + target  # flat positions i * C + t_i
        target_shifted = shifted.reshape(-1).take(picked)  # x_i[t_i] - m_i
        exps = np.exp(shifted, out=shifted)  # e^(x - m): softmax(x) = exps / row sums
        sums = row_sums(exps, keepdims=False)
        log_p = target_shifted - np.log(sums)  # log p of the target: -loss_i
        if ctx.count != rows:
            log_p *= counted
        ctx.save_for_kernel(exps, sums, picked, log_p)
        if reduction == "none":
            return np.negative(log_p)
        if reduction == "sum":
            return weighted_sum(log_p, -1.0)
        return weighted_sum(log_p, -1.0 / ctx.count if ctx.count else math.nan)

    @staticmethod
    def backward(ctx, grad):
        (_, _, counted), (exps, sums, picked, log_p) = ctx.saved_arrays, ctx.kernel_saved
        grad = grad.array
        grad_x = exps / sums[:, None]  # softmax(x)
        grad_x.reshape(-1)[picked] = np.expm1(log_p)  # softmax(x) - onehot(t)
        rows = grad_x.shape[0]
        scale = 1.0  # d loss / d loss_i of a counted row (0 when none counts, as in PyTorch)
        if ctx.reduction == "mean":
            scale = 1.0 / ctx.count if ctx.count else 0.0
        if ctx.reduction != "none" and ctx.count == rows:
            grad_x *= grad
            if scale != 1.0:
                grad_x *= scalar_operand(scale, grad_x)
            return Tensor._make(grad_x), None
        row_weight = counted * (grad.reshape(-1) if ctx.reduction == "none" else grad * scale)
        grad_x *= row_weight[:, None]
        return Tensor._make(grad_x), None


@functools.lru_cache(maxsize=64)
def _all_true(rows: int) -> np.ndarray:
    counted = np.ones(rows, bool)
    counted.flags.writeable = False
    return counted
