"""Learning-rate schedules: each sets ``group["lr"]`` of an optimizer, step by step.

    scheduler = warmup_cosine(opt, warmup_steps=100, total_steps=1000)
    for batch in batches:
        ...; opt.step(); scheduler.step()

Step 0 (before the first ``scheduler.step()``) already has its learning rate set.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from minigrad.optim.optimizer import Optimizer


class LRScheduler:
    """Base: ``lr_at(group, step)`` is the learning rate of parameter group ``group`` (an
    index) at ``step``, from its starting rate ``self.base_lrs[group]``."""

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1):
        self.optimizer = optimizer
        for group in optimizer.param_groups:
            group.setdefault("initial_lr", group["lr"])
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self.step()

    def lr_at(self, group: int, step: int) -> float:
        raise NotImplementedError

    def step(self) -> None:
        """Move to the next step and set every group's learning rate for it."""
        self.last_epoch += 1
        self._set_lrs()

    def _set_lrs(self) -> None:
        for index, group in enumerate(self.optimizer.param_groups):
            group["lr"] = self.lr_at(index, self.last_epoch)
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def get_last_lr(self) -> list[float]:
        """The learning rates set by the last ``step()``, one per group."""
        return list(self._last_lr)

    def state_dict(self) -> dict:
        return {"last_epoch": self.last_epoch, "base_lrs": list(self.base_lrs)}

    def load_state_dict(self, state_dict: dict) -> None:
        self.last_epoch = int(state_dict["last_epoch"])
        self.base_lrs = [float(lr) for lr in state_dict["base_lrs"]]
        self._set_lrs()


class LambdaLR(LRScheduler):
    """lr = base_lr * lr_lambda(step) (one function, or one per parameter group)."""

    def __init__(self, optimizer: Optimizer, lr_lambda, last_epoch: int = -1):
        groups = len(optimizer.param_groups)
        lambdas = list(lr_lambda) if isinstance(lr_lambda, (list, tuple)) else [lr_lambda] * groups
        if len(lambdas) != groups:
            raise ValueError(f"LambdaLR: {len(lambdas)} lr_lambdas for {groups} parameter groups")
        self.lr_lambdas: list[Callable[[int], float]] = lambdas
        super().__init__(optimizer, last_epoch)

    def lr_at(self, group: int, step: int) -> float:
        return self.base_lrs[group] * self.lr_lambdas[group](step)


class WarmupCosine(LRScheduler):
    """Linear warm-up, then a cosine decay to ``min_lr``:

    step < warmup:  lr = base_lr * (step + 1) / warmup_steps
    after:          lr = min_lr + (base_lr - min_lr) * (1 + cos(pi * progress)) / 2,
                    progress = (step - warmup_steps) / (total_steps - warmup_steps),
                    held at min_lr once progress reaches 1
    """

    def __init__(
        self,
        optimizer: Optimizer,
        warmup_steps: int,
        total_steps: int,
        min_lr: float = 0.0,
        last_epoch: int = -1,
    ):
        if warmup_steps < 0 or total_steps <= 0 or warmup_steps > total_steps:
            raise ValueError(
                f"warmup_cosine: need 0 <= warmup_steps <= total_steps and total_steps > 0, "
                f"got warmup_steps={warmup_steps}, total_steps={total_steps}"
            )
        self.warmup_steps, self.total_steps, self.min_lr = warmup_steps, total_steps, min_lr
        super().__init__(optimizer, last_epoch)

    def lr_at(self, group: int, step: int) -> float:
        base_lr = self.base_lrs[group]
        if step < self.warmup_steps:
            return base_lr * (step + 1) / self.warmup_steps
        decay_steps = max(1, self.total_steps - self.warmup_steps)
        progress = min(1.0, (step - self.warmup_steps) / decay_steps)
        cosine = 0.5 * (1.0 + math.cos(math.pi * progress))
        return self.min_lr + (base_lr - self.min_lr) * cosine


def warmup_cosine(
    optimizer: Optimizer, warmup_steps: int, total_steps: int, min_lr: float = 0.0
) -> WarmupCosine:
    """A scheduler that warms the learning rate up linearly over ``warmup_steps`` steps, then
    lowers it along a half cosine to ``min_lr`` at ``total_steps``."""
    return WarmupCosine(optimizer, warmup_steps, total_steps, min_lr)
