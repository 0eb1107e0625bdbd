"""Learning-rate schedules: each sets ``group["lr"]`` of an optimizer, step by step.

    scheduler = warmup_cosine(opt, warmup_steps=100, total_steps=1000)
    for batch in batches:
        ...; opt.step(); scheduler.step()

Step 0 (before the first ``scheduler.step()``) already has its learning rate set. PyTorch's
schedules (StepLR, MultiStepLR, ExponentialLR, CosineAnnealingLR, LinearLR, ConstantLR,
OneCycleLR) keep its names and arguments; each is written here as the closed form of the
rate at step t, which is what PyTorch's step-by-step updates arrive at.
"""

from __future__ import annotations

import bisect
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


class StepLR(LRScheduler):
    """lr = base_lr * gamma ** (step // step_size): lowered by ``gamma`` every ``step_size``."""

    def __init__(self, optimizer: Optimizer, step_size: int, gamma: float = 0.1, last_epoch=-1):
        self.step_size, self.gamma = step_size, gamma
        super().__init__(optimizer, last_epoch)

    def lr_at(self, group: int, step: int) -> float:
        return self.base_lrs[group] * self.gamma ** (step // self.step_size)


class MultiStepLR(LRScheduler):
    """lr = base_lr * gamma ** (the number of milestones reached by step)."""

    def __init__(self, optimizer: Optimizer, milestones, gamma: float = 0.1, last_epoch=-1):
        self.milestones, self.gamma = sorted(milestones), gamma
        super().__init__(optimizer, last_epoch)

    def lr_at(self, group: int, step: int) -> float:
        return self.base_lrs[group] * self.gamma ** bisect.bisect_right(self.milestones, step)


class ExponentialLR(LRScheduler):
    """lr = base_lr * gamma ** step."""

    def __init__(self, optimizer: Optimizer, gamma: float, last_epoch: int = -1):
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def lr_at(self, group: int, step: int) -> float:
        return self.base_lrs[group] * self.gamma**step


class CosineAnnealingLR(LRScheduler):
    """lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * step / T_max)) / 2: down to eta_min
    at T_max, then (as in PyTorch) back up, with period 2 T_max."""

    def __init__(
        self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0, last_epoch: int = -1
    ):
        self.T_max, self.eta_min = T_max, eta_min
        super().__init__(optimizer, last_epoch)

    def lr_at(self, group: int, step: int) -> float:
        cosine = (1 + math.cos(math.pi * step / self.T_max)) / 2
        return self.eta_min + (self.base_lrs[group] - self.eta_min) * cosine


class LinearLR(LRScheduler):
    """lr = base_lr * factor, the factor going linearly from ``start_factor`` to
    ``end_factor`` over ``total_iters`` steps, then held."""

    def __init__(
        self,
        optimizer: Optimizer,
        start_factor: float = 1.0 / 3,
        end_factor: float = 1.0,
        total_iters: int = 5,
        last_epoch: int = -1,
    ):
        if not 0 < start_factor <= 1:
            raise ValueError(f"LinearLR: start_factor must be > 0 and <= 1, got {start_factor}")
        if not 0 <= end_factor <= 1:
            raise ValueError(f"LinearLR: end_factor must lie in [0, 1], got {end_factor}")
        self.start_factor, self.end_factor = start_factor, end_factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def lr_at(self, group: int, step: int) -> float:
        progress = min(step, self.total_iters) / self.total_iters if self.total_iters else 1.0
        factor = self.start_factor + (self.end_factor - self.start_factor) * progress
        return self.base_lrs[group] * factor


class ConstantLR(LRScheduler):
    """lr = base_lr * factor for the first ``total_iters`` steps, then base_lr."""

    def __init__(
        self,
        optimizer: Optimizer,
        factor: float = 1.0 / 3,
        total_iters: int = 5,
        last_epoch: int = -1,
    ):
        if not 0 <= factor <= 1:
            raise ValueError(f"ConstantLR: factor must lie in [0, 1], got {factor}")
        self.factor, self.total_iters = factor, total_iters
        super().__init__(optimizer, last_epoch)

    def lr_at(self, group: int, step: int) -> float:
        return self.base_lrs[group] * (self.factor if step < self.total_iters else 1.0)


class OneCycleLR(LRScheduler):
    """The 1cycle policy: the rate climbs from max_lr / div_factor to ``max_lr`` over the
    first ``pct_start`` of ``total_steps``, then anneals to max_lr / div_factor /
    final_div_factor (``three_phase``: back to the start first, then down); the momentum (or
    Adam's beta1) moves the other way, between ``max_momentum`` and ``base_momentum``."""

    def __init__(
        self,
        optimizer: Optimizer,
        max_lr,
        total_steps: int | None = None,
        epochs: int | None = None,
        steps_per_epoch: int | None = None,
        pct_start: float = 0.3,
        anneal_strategy: str = "cos",
        cycle_momentum: bool = True,
        base_momentum=0.85,
        max_momentum=0.95,
        div_factor: float = 25.0,
        final_div_factor: float = 1e4,
        three_phase: bool = False,
        last_epoch: int = -1,
    ):
        self.total_steps = _total_steps(total_steps, epochs, steps_per_epoch)
        if not 0 <= pct_start <= 1 or not isinstance(pct_start, (int, float)):
            raise ValueError(f"Expected float between 0 and 1 pct_start, but got {pct_start}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(
                f"anneal_strategy must be one of 'cos' or 'linear', instead got {anneal_strategy}"
            )
        self.anneal_strategy, self.cycle_momentum = anneal_strategy, cycle_momentum
        groups = optimizer.param_groups
        max_lrs = _per_group(max_lr, groups, "max_lr")
        for group, top in zip(groups, max_lrs):
            if last_epoch == -1:
                group["initial_lr"] = top / div_factor
                group["max_lr"], group["min_lr"] = top, top / div_factor / final_div_factor
        self._use_beta1 = "betas" in optimizer.defaults
        if cycle_momentum:
            self._start_momentum(optimizer, base_momentum, max_momentum, last_epoch)
        end = self.total_steps - 1
        if three_phase:
            start_to_max = float(pct_start * self.total_steps) - 1
            max_to_start = float(2 * pct_start * self.total_steps) - 2
            self._phases = [
                (start_to_max, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                (max_to_start, "max_lr", "initial_lr", "base_momentum", "max_momentum"),
                (end, "initial_lr", "min_lr", "max_momentum", "max_momentum"),
            ]
        else:
            self._phases = [
                (float(pct_start * self.total_steps) - 1, "initial_lr", "max_lr",
                 "max_momentum", "base_momentum"),
                (end, "max_lr", "min_lr", "base_momentum", "max_momentum"),
            ]  # fmt: skip
        super().__init__(optimizer, last_epoch)

    def _start_momentum(self, optimizer, base_momentum, max_momentum, last_epoch) -> None:
        if "momentum" not in optimizer.defaults and not self._use_beta1:
            raise ValueError(
                "optimizer must support momentum or beta1 with `cycle_momentum` option enabled"
            )
        groups = optimizer.param_groups
        bases = _per_group(base_momentum, groups, "base_momentum")
        tops = _per_group(max_momentum, groups, "max_momentum")
        for group, base, top in zip(groups, bases, tops):
            if last_epoch == -1:
                self._set_momentum(group, top)
                group["max_momentum"], group["base_momentum"] = top, base

    def _set_momentum(self, group: dict, momentum: float) -> None:
        if self._use_beta1:
            group["betas"] = (momentum, *group["betas"][1:])
        else:
            group["momentum"] = momentum

    def _anneal(self, start: float, end: float, pct: float) -> float:
        if self.anneal_strategy == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def _phase_values(self, group: dict, step: int) -> tuple[float, float | None]:
        """The (lr, momentum) of ``group`` at ``step``: interpolated within its phase."""
        if step > self.total_steps:
            raise ValueError(
                f"Tried to step {step} times. The specified number of total steps is "
                f"{self.total_steps}"
            )
        phase_start = 0.0
        for i, (phase_end, lr_from, lr_to, m_from, m_to) in enumerate(self._phases):
            if step <= phase_end or i == len(self._phases) - 1:
                pct = (step - phase_start) / (phase_end - phase_start)
                lr = self._anneal(group[lr_from], group[lr_to], pct)
                if not self.cycle_momentum:
                    return lr, None
                return lr, self._anneal(group[m_from], group[m_to], pct)
            phase_start = phase_end
        raise AssertionError("unreachable: the last phase always answers")

    def lr_at(self, group: int, step: int) -> float:
        return self._phase_values(self.optimizer.param_groups[group], step)[0]

    def _set_lrs(self) -> None:
        super()._set_lrs()
        if self.cycle_momentum:
            for group in self.optimizer.param_groups:
                self._set_momentum(group, self._phase_values(group, self.last_epoch)[1])


def _total_steps(total_steps, epochs, steps_per_epoch) -> int:
    if total_steps is not None:
        if not isinstance(total_steps, int) or total_steps <= 0:
            raise ValueError(f"Expected positive integer total_steps, but got {total_steps}")
        return total_steps
    if epochs is None or steps_per_epoch is None:
        raise ValueError("You must define either total_steps OR (epochs AND steps_per_epoch)")
    if not isinstance(epochs, int) or epochs <= 0:
        raise ValueError(f"Expected positive integer epochs, but got {epochs}")
    if not isinstance(steps_per_epoch, int) or steps_per_epoch <= 0:
        raise ValueError(f"Expected positive integer steps_per_epoch, but got {steps_per_epoch}")
    return epochs * steps_per_epoch


def _per_group(value, groups: list, name: str) -> list:
    """One value per parameter group: ``value`` for each, or ``value``'s own list."""
    if isinstance(value, (list, tuple)):
        if len(value) != len(groups):
            raise ValueError(f"expected {len(groups)} values for {name}, got {len(value)}")
        return list(value)
    return [value] * len(groups)
