"""Loss layers: each wraps one loss of ``minigrad.nn.functional``, as PyTorch's do, so that
``criterion = nn.CrossEntropyLoss(); loss = criterion(logits, targets)`` ports unchanged."""

from __future__ import annotations

from minigrad import ops
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
