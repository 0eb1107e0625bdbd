"""Loss layers: each wraps one loss of ``minigrad.nn.functional``, as PyTorch's do, so that
``criterion = nn.CrossEntropyLoss(); loss = criterion(logits, targets)`` ports unchanged."""

from __future__ import annotations

from minigrad import ops
from minigrad.nn import loss_functions as composed
from minigrad.nn.module import Module
from minigrad.ops.loss import check_reduction
from minigrad.tensor import Tensor


class CrossEntropyLoss(Module):
    """Cross-entropy of logits against class indices, ``F.cross_entropy``:
    loss_i = logsumexp(x_i) - x_i[t_i], averaged over the rows whose target is not
    ``ignore_index`` (``reduction="mean"``), summed (``"sum"``) or kept (``"none"``).

    input: (N, C), (N, C, d1, ...) or (C,) logits; target: (N,), (N, d1, ...) or () int64.
    """

    def __init__(self, ignore_index: int = -100, reduction: str = "mean"):
        super().__init__()
        self.ignore_index = ignore_index
        self.reduction = check_reduction("CrossEntropyLoss", reduction)

    def forward(self, input: Tensor, target) -> Tensor:  # noqa: A002  (PyTorch's name)
        return ops.cross_entropy(input, target, self.ignore_index, self.reduction)

    def extra_repr(self) -> str:
        return f"ignore_index={self.ignore_index}, reduction={self.reduction!r}"


class MSELoss(Module):
    """Mean squared error, ``F.mse_loss``: (input - target)^2, averaged over every entry
    (``reduction="mean"``), summed (``"sum"``) or kept (``"none"``)."""

    def __init__(self, reduction: str = "mean"):
        super().__init__()
        self.reduction = check_reduction("MSELoss", reduction)

    def forward(self, input: Tensor, target: Tensor) -> Tensor:  # noqa: A002
        return ops.mse_loss(input, target, self.reduction)

    def extra_repr(self) -> str:
        return f"reduction={self.reduction!r}"


class NLLLoss(Module):
    """Negative log-likelihood of class indices, ``F.nll_loss``: loss_n = -w[t_n] x_n[t_n]
    for log-probabilities x (``nn.LogSoftmax`` then ``nn.NLLLoss`` is ``nn.CrossEntropyLoss``).
    """

    def __init__(self, weight: Tensor | None = None, size_average=None, ignore_index: int = -100,
                 reduce=None, reduction: str = "mean"):  # fmt: skip
        super().__init__()
        self.ignore_index = ignore_index
        self.reduction = check_reduction("NLLLoss", reduction)
        self.register_buffer("weight", weight)

    def forward(self, input: Tensor, target) -> Tensor:  # noqa: A002
        return composed.nll_loss(input, target, self.weight, self.ignore_index, self.reduction)

    def extra_repr(self) -> str:
        return f"ignore_index={self.ignore_index}, reduction={self.reduction!r}"


class BCELoss(Module):
    """Binary cross-entropy of probabilities, ``F.binary_cross_entropy``:
    -w (y log p + (1 - y) log(1 - p))."""

    def __init__(self, weight: Tensor | None = None, size_average=None, reduce=None,
                 reduction: str = "mean"):  # fmt: skip
        super().__init__()
        self.reduction = check_reduction("BCELoss", reduction)
        self.register_buffer("weight", weight)

    def forward(self, input: Tensor, target: Tensor) -> Tensor:  # noqa: A002
        return composed.binary_cross_entropy(input, target, self.weight, self.reduction)

    def extra_repr(self) -> str:
        return f"reduction={self.reduction!r}"


class BCEWithLogitsLoss(Module):
    """Binary cross-entropy of logits, ``F.binary_cross_entropy_with_logits``: sigmoid and
    BCE in one numerically stable expression; ``pos_weight`` weighs the positive term."""

    def __init__(self, weight: Tensor | None = None, size_average=None, reduce=None,
                 reduction: str = "mean", pos_weight: Tensor | None = None):  # fmt: skip
        super().__init__()
        self.reduction = check_reduction("BCEWithLogitsLoss", reduction)
        self.register_buffer("weight", weight)
        self.register_buffer("pos_weight", pos_weight)

    def forward(self, input: Tensor, target: Tensor) -> Tensor:  # noqa: A002
        return composed.binary_cross_entropy_with_logits(
            input, target, self.weight, reduction=self.reduction, pos_weight=self.pos_weight
        )

    def extra_repr(self) -> str:
        return f"reduction={self.reduction!r}"


class KLDivLoss(Module):
    """KL divergence, ``F.kl_div``: y (log y - x) for log-probabilities x and target y.
    Use ``reduction="batchmean"`` for the KL divergence per sample."""

    def __init__(self, size_average=None, reduce=None, reduction: str = "mean",
                 log_target: bool = False):  # fmt: skip
        super().__init__()
        if reduction not in ("mean", "batchmean", "sum", "none"):
            raise ValueError(
                f"KLDivLoss: reduction must be mean, batchmean, sum or none, got {reduction!r}"
            )
        self.reduction, self.log_target = reduction, log_target

    def forward(self, input: Tensor, target: Tensor) -> Tensor:  # noqa: A002
        return composed.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)

    def extra_repr(self) -> str:
        return f"reduction={self.reduction!r}, log_target={self.log_target}"
