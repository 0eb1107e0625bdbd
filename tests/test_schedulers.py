"""PyTorch's learning-rate schedules against torch.optim.lr_scheduler: the same ``get_last_lr()``
at every step (and the momentum or beta1 that OneCycleLR moves), with two parameter groups,
and the same errors; ``state_dict`` resumes a schedule where it was."""

from __future__ import annotations

import pytest

import minigrad as mg
from minigrad.optim import lr_scheduler

SCHEDULES = {
    "StepLR": ("StepLR", dict(step_size=3), "SGD"),
    "StepLR_gamma": ("StepLR", dict(step_size=2, gamma=0.5), "SGD"),
    "MultiStepLR": ("MultiStepLR", dict(milestones=[2, 5, 5, 9], gamma=0.3), "SGD"),
    "ExponentialLR": ("ExponentialLR", dict(gamma=0.9), "Adam"),
    "CosineAnnealingLR": ("CosineAnnealingLR", dict(T_max=10), "AdamW"),
    "CosineAnnealingLR_eta_min": ("CosineAnnealingLR", dict(T_max=7, eta_min=1e-3), "SGD"),
    "LinearLR": ("LinearLR", dict(), "SGD"),
    "LinearLR_down": ("LinearLR", dict(start_factor=1.0, end_factor=0.1, total_iters=8), "Adam"),
    "ConstantLR": ("ConstantLR", dict(factor=0.5, total_iters=4), "SGD"),
    "OneCycleLR": ("OneCycleLR", dict(max_lr=0.5, total_steps=20), "SGD_momentum"),
    "OneCycleLR_adam": (
        "OneCycleLR",
        dict(max_lr=[0.1, 0.2], epochs=4, steps_per_epoch=5),
        "AdamW",
    ),
    "OneCycleLR_linear": (
        "OneCycleLR",
        dict(max_lr=0.3, total_steps=16, anneal_strategy="linear", pct_start=0.25),
        "SGD_momentum",
    ),
    "OneCycleLR_three_phase": (
        "OneCycleLR",
        dict(max_lr=0.3, total_steps=20, three_phase=True, div_factor=10.0),
        "Adam",
    ),
    "OneCycleLR_no_momentum": (
        "OneCycleLR",
        dict(max_lr=0.3, total_steps=12, cycle_momentum=False),
        "SGD",
    ),
}
STEPS = 22  # past T_max and the milestones, to see what comes after


def make_optimizer(module, kind: str):
    """Two parameter groups with different learning rates."""
    params = [module.zeros(2, requires_grad=True), module.zeros(3, requires_grad=True)]
    groups = [{"params": [params[0]], "lr": 0.1}, {"params": [params[1]], "lr": 0.02}]
    if kind == "SGD_momentum":
        return module.optim.SGD(groups, lr=0.1, momentum=0.9)
    return getattr(module.optim, kind)(groups, lr=0.1)


def momenta(optimizer) -> list:
    return [group.get("betas", (group.get("momentum"),))[0] for group in optimizer.param_groups]


@pytest.mark.parametrize("case", SCHEDULES)
def test_schedules_match_torch(case):
    torch = pytest.importorskip("torch")
    name, options, kind = SCHEDULES[case]
    steps = options.get("total_steps", 20) if name == "OneCycleLR" else STEPS
    ours_opt, their_opt = make_optimizer(mg, kind), make_optimizer(torch, kind)
    ours = getattr(lr_scheduler, name)(ours_opt, **options)
    theirs = getattr(torch.optim.lr_scheduler, name)(their_opt, **options)
    for step in range(steps):
        assert ours.last_epoch == theirs.last_epoch == step
        assert ours.get_last_lr() == pytest.approx(theirs.get_last_lr(), rel=1e-9, abs=1e-15)
        assert [g["lr"] for g in ours_opt.param_groups] == pytest.approx(
            [g["lr"] for g in their_opt.param_groups], rel=1e-9, abs=1e-15
        )
        assert momenta(ours_opt) == pytest.approx(momenta(their_opt), rel=1e-9)
        their_opt.step()  # (torch warns when the schedule steps first)
        ours.step(), theirs.step()


def test_one_cycle_refuses_to_step_past_its_end():
    torch = pytest.importorskip("torch")
    for module in (torch, mg):
        opt = make_optimizer(module, "SGD_momentum")
        schedule = module.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=3)
        for _ in range(3):
            opt.step(), schedule.step()
        with pytest.raises(ValueError, match="Tried to step 4 times"):
            schedule.step()


BAD = [
    ("OneCycleLR", dict(max_lr=0.1)),
    ("OneCycleLR", dict(max_lr=0.1, total_steps=0)),
    ("OneCycleLR", dict(max_lr=0.1, total_steps=5, pct_start=1.5)),
    ("OneCycleLR", dict(max_lr=0.1, total_steps=5, anneal_strategy="step")),
    ("LinearLR", dict(start_factor=0.0)),
    ("LinearLR", dict(end_factor=1.5)),
    ("ConstantLR", dict(factor=2.0)),
]


@pytest.mark.parametrize("name, options", BAD, ids=[f"{n}-{o}" for n, o in BAD])
def test_bad_arguments_raise_as_in_torch(name, options):
    torch = pytest.importorskip("torch")
    with pytest.raises(Exception) as theirs:
        getattr(torch.optim.lr_scheduler, name)(make_optimizer(torch, "SGD_momentum"), **options)
    with pytest.raises(type(theirs.value)):
        getattr(lr_scheduler, name)(make_optimizer(mg, "SGD_momentum"), **options)


def test_one_cycle_needs_momentum_when_it_cycles_it():
    torch = pytest.importorskip("torch")
    for module in (torch, mg):
        param = module.zeros(1, requires_grad=True)
        opt = module.optim.SGD([param], lr=0.1)  # momentum=0 is still a momentum: accepted
        module.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=4)


RESUMED = [
    ("StepLR", dict(step_size=2)),
    ("CosineAnnealingLR", dict(T_max=6)),
    ("OneCycleLR", dict(max_lr=0.2, total_steps=10)),
]


@pytest.mark.parametrize("name, options", RESUMED, ids=[name for name, _ in RESUMED])
def test_state_dict_resumes(name, options):
    opt = make_optimizer(mg, "SGD_momentum")
    schedule = getattr(lr_scheduler, name)(opt, **options)
    for _ in range(4):
        opt.step(), schedule.step()
    saved = schedule.state_dict()
    fresh_opt = make_optimizer(mg, "SGD_momentum")
    fresh = getattr(lr_scheduler, name)(fresh_opt, **options)
    fresh.load_state_dict(saved)
    assert fresh.last_epoch == 4 and fresh.get_last_lr() == schedule.get_last_lr()
    schedule.step(), fresh.step()
    assert fresh.get_last_lr() == schedule.get_last_lr()
