"""Losses composed from minigrad's ops, so that their gradients come from autograd:

    nll_loss:                  loss_n = -w[t_n] * x_n[t_n]          (x: log-probabilities)
    binary_cross_entropy:      loss = -w * (y log p + (1 - y) log(1 - p))
    bce_with_logits:           loss = -w * (p_w y log sigmoid(x) + (1 - y) log(1 - sigmoid(x)))
                                    = w * ((1 - y) x + (1 + (p_w - 1) y) softplus(-x))
    kl_div:                    loss = y (log y - x)   (x: log-probabilities; y: probabilities,
                                                      or log-probabilities with log_target)

Each is reduced as in PyTorch: "mean", "sum" or "none" (kl_div also "batchmean").
"""

from __future__ import annotations

import math

from minigrad import ops
from minigrad.backend import array_module
from minigrad.errors import OutOfRangeError, ShapeError
from minigrad.ops._helpers import as_index
from minigrad.ops.loss import check_reduction
from minigrad.tensor import Tensor


def _reduce(losses: Tensor, reduction: str) -> Tensor:
    if reduction == "none":
        return losses
    return losses.sum() if reduction == "sum" else losses.mean()


def _check_same_shape(op: str, input: Tensor, target) -> None:  # noqa: A002
    if tuple(target.shape) != input.shape:
        raise ValueError(
            f"{op}: target of shape {tuple(target.shape)} must have the shape of the input "
            f"{input.shape}"
        )


def nll_loss(
    input: Tensor,  # noqa: A002  (PyTorch's names)
    target,
    weight: Tensor | None = None,
    ignore_index: int = -100,
    reduction: str = "mean",
) -> Tensor:
    """Negative log-likelihood of class indices under log-probabilities ``input``.

    input: (N, C), (N, C, d1, ...) or (C,) log-probabilities (e.g. from log_softmax);
    target: (N,), (N, d1, ...) or () class indices; weight: (C,) per-class weights.
    "mean" divides by the total weight of the targets that are not ``ignore_index``.
    """
    check_reduction("nll_loss", reduction)
    target = as_index(input, target).array
    if target.dtype.kind not in "iu":
        raise TypeError(f"nll_loss: target must hold class indices (int64), got {target.dtype}")
    shape = input.shape
    expected = shape[:1] + shape[2:] if len(shape) > 1 else ()
    if target.shape != expected:
        raise ShapeError(
            f"nll_loss: target of shape {target.shape} does not fit input of shape {shape} "
            f"(expected target shape {expected})"
        )
    classes = shape[1] if len(shape) > 1 else shape[0]
    if weight is not None and weight.shape != (classes,):
        raise ShapeError(f"nll_loss: weight must have shape ({classes},), got {weight.shape}")

    # rows (M, C): the class dim last, every other dim flattened
    if len(shape) == 1:
        rows = input.reshape(1, -1)
    else:
        rows = input.permute(0, *range(2, len(shape)), 1).reshape(-1, classes)
    xp = array_module(target)
    flat = target.reshape(-1)
    counted = flat != ignore_index
    flat = xp.where(counted, flat, 0)  # an ignored row picks any class; its weight is 0
    if flat.size and (flat.min() < 0 or flat.max() >= classes):
        bad = flat[(flat < 0) | (flat >= classes)][0]
        raise OutOfRangeError(
            f"nll_loss: target {int(bad)} is out of range for {classes} classes "
            f"(input of shape {shape})"
        )
    # w_n = weight[t_n], 0 where t_n is ignored
    row_weight = counted.astype(input.dtype)
    if weight is not None:
        row_weight = row_weight * weight.array.astype(input.dtype)[flat]
    picked = rows[xp.arange(rows.shape[0]), flat]  # x_n[t_n]
    losses = -picked * Tensor._make(row_weight)
    if reduction == "none":
        return losses.reshape(expected)
    if reduction == "sum":
        return losses.sum()
    total = float(row_weight.sum())
    if not total:  # nothing counted: the loss is nan, its gradient zero (as in PyTorch)
        return losses.sum() * 0.0 + math.nan
    return losses.sum() / total


def binary_cross_entropy(
    input: Tensor,  # noqa: A002
    target: Tensor,
    weight: Tensor | None = None,
    reduction: str = "mean",
) -> Tensor:
    """-w * (y log p + (1 - y) log(1 - p)) for probabilities p (``input``) and targets y in
    [0, 1] of the same shape. As in PyTorch each log is clamped at -100, so a p of exactly 0
    or 1 gives a finite loss."""
    check_reduction("binary_cross_entropy", reduction)
    _check_same_shape("binary_cross_entropy", input, target)
    outside = (input.array < 0) | (input.array > 1)
    if bool(outside.any()):
        raise RuntimeError(
            "binary_cross_entropy: all elements of input should be between 0 and 1 "
            "(apply sigmoid first, or use binary_cross_entropy_with_logits)"
        )
    log_p, log_not_p = _clamped_log(input), _clamped_log(1.0 - input)
    losses = -(target * log_p + (1.0 - target) * log_not_p)
    if weight is not None:
        losses = losses * weight
    return _reduce(losses, reduction)


def _clamped_log(p: Tensor) -> Tensor:
    """max(log p, -100), as in PyTorch's BCE, with no log of 0 taken (its inf would make the
    gradient nan): where p is 0 the value is -100 and the gradient 0."""
    positive = p.array > 0
    safe = ops.where(positive, p, 1.0)
    return ops.where(positive, ops.clamp(ops.log(safe), min=-100.0), -100.0)


def binary_cross_entropy_with_logits(
    input: Tensor,  # noqa: A002
    target: Tensor,
    weight: Tensor | None = None,
    size_average=None,
    reduce=None,  # noqa: A002
    reduction: str = "mean",
    pos_weight: Tensor | None = None,
) -> Tensor:
    """Binary cross-entropy of logits x: sigmoid and the log in one stable expression,

        loss = (1 - y) x + (1 + (p_w - 1) y) softplus(-x),
        softplus(-x) = log(1 + exp(-x)) = max(-x, 0) + log(1 + exp(-|x|))

    where exp never overflows. ``pos_weight`` p_w (broadcast over the last dim: one per
    class) weighs the positive term; ``weight`` each entry. ``size_average`` and ``reduce``
    are PyTorch's deprecated arguments, accepted but not used."""
    check_reduction("binary_cross_entropy_with_logits", reduction)
    _check_same_shape("binary_cross_entropy_with_logits", input, target)
    softplus_of_minus_x = ops.relu(-input) + ops.log(1.0 + ops.exp(-ops.abs(input)))
    if pos_weight is None:
        losses = (1.0 - target) * input + softplus_of_minus_x
    else:
        losses = (1.0 - target) * input + (1.0 + (pos_weight - 1.0) * target) * softplus_of_minus_x
    if weight is not None:
        losses = losses * weight
    return _reduce(losses, reduction)


def kl_div(
    input: Tensor,  # noqa: A002
    target: Tensor,
    size_average=None,
    reduce=None,  # noqa: A002
    reduction: str = "mean",
    log_target: bool = False,
) -> Tensor:
    """KL(target || model), pointwise y (log y - x), with ``input`` x the model's
    log-probabilities and ``target`` y probabilities (log-probabilities if ``log_target``).

    reduction: "mean" (over every entry, as PyTorch), "batchmean" (the sum divided by the
    batch size, input.shape[0]: the true KL divergence per sample), "sum" or "none".
    """
    if reduction not in ("mean", "batchmean", "sum", "none"):
        raise ValueError(
            f"kl_div: reduction must be mean, batchmean, sum or none, got {reduction!r}"
        )
    if log_target:
        losses = ops.exp(target) * (target - input)
    else:
        # y log y is 0 where y is 0: log(1) there keeps the branch finite (0 * -inf is nan)
        positive = target.array > 0
        safe_target = ops.where(positive, target, 1.0)
        losses = target * ops.log(safe_target) - target * input
    if reduction == "batchmean":
        batch = input.shape[0] if input.ndim else 1
        return losses.sum() / batch
    return _reduce(losses, reduction)


__all__ = ["binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div", "nll_loss"]
