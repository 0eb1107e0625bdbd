"""Optimizers against torch.optim (5 steps on the same gradients), their state_dict, and the
learning-rate schedules against their formulas."""

from __future__ import annotations

import math

import numpy as np
import pytest

import minigrad as mg
from minigrad import optim
from minigrad.fast import adam as fast_adam
from minigrad.optim.lr_scheduler import LambdaLR, warmup_cosine

SHAPES = [(4, 3), (3,)]

OPTIMIZERS = {
    "sgd": ("SGD", dict(lr=0.1)),
    "sgd_momentum_wd": ("SGD", dict(lr=0.1, momentum=0.9, weight_decay=0.01)),
    "sgd_nesterov": ("SGD", dict(lr=0.05, momentum=0.8, nesterov=True)),
    "sgd_dampening": ("SGD", dict(lr=0.05, momentum=0.8, dampening=0.3)),
    "adam": ("Adam", dict(lr=0.01)),
    "adam_wd": ("Adam", dict(lr=0.01, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1)),
    "adamw": ("AdamW", dict(lr=0.01)),
    "adamw_wd": ("AdamW", dict(lr=0.02, betas=(0.85, 0.95), weight_decay=0.1)),
}


def initial_values(seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape).astype(np.float32) for shape in SHAPES]


def gradients(step: int) -> list[np.ndarray]:
    """The gradients fed at ``step``: random, and different every step."""
    rng = np.random.default_rng(100 + step)
    return [rng.standard_normal(shape).astype(np.float32) for shape in SHAPES]


def run_minigrad(name: str, options: dict, steps: int, device: str = "cpu"):
    params = [mg.tensor(v, requires_grad=True, device=device) for v in initial_values()]
    optimizer = getattr(optim, name)(params, **options)
    for step in range(steps):
        for param, grad in zip(params, gradients(step)):
            param.grad = mg.tensor(grad, device=device)
        optimizer.step()
    return params, optimizer


@pytest.mark.parametrize("case", list(OPTIMIZERS))
def test_five_steps_match_torch(case, device):
    torch = pytest.importorskip("torch")
    name, options = OPTIMIZERS[case]
    params, _ = run_minigrad(name, options, steps=5, device=device)

    twins = [torch.tensor(v, requires_grad=True) for v in initial_values()]
    optimizer = getattr(torch.optim, name)(twins, **options)
    for step in range(5):
        for twin, grad in zip(twins, gradients(step)):
            twin.grad = torch.from_numpy(grad)
        optimizer.step()

    for param, twin in zip(params, twins):
        assert param.dtype == np.float32 and param.device == device  # no float64 by accident
        np.testing.assert_allclose(param.numpy(), twin.detach().numpy(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("case", ["sgd_momentum_wd", "adam_wd", "adamw_wd"])
def test_state_dict_resumes_exactly(case, device):
    """3 steps, save the state, a fresh optimizer loads it, 2 more steps == 5 steps at once."""
    name, options = OPTIMIZERS[case]
    straight, _ = run_minigrad(name, options, steps=5, device=device)

    params, first = run_minigrad(name, options, steps=3, device=device)
    saved = first.state_dict()
    resumed_params = [mg.tensor(p.numpy(), requires_grad=True, device=device) for p in params]
    second = getattr(optim, name)(resumed_params, lr=123.0)  # lr comes back from the state
    second.load_state_dict(saved)
    for step in range(3, 5):
        for param, grad in zip(resumed_params, gradients(step)):
            param.grad = mg.tensor(grad, device=device)
        second.step()
    for a, b in zip(straight, resumed_params):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


@pytest.mark.skipif(not mg.fast.is_enabled(), reason="MINIGRAD_REFERENCE=1: no fast layer")
@pytest.mark.parametrize("case", ["adam", "adamw", "adamw_wd"])
@pytest.mark.parametrize("skipped", [None, 1])
def test_fast_adam_equals_the_reference_bit_for_bit(case, skipped):
    """The fast layer updates Adam(W)'s small NumPy parameters all at once, over flat
    moments, and big ones in two halves; the numbers are those of the reference's
    one-by-one update, bit for bit: with a big parameter beside them, and when a parameter
    has no gradient at some step (its step count falls behind, so every parameter goes one
    by one from then on)."""
    name, options = OPTIMIZERS[case]
    shapes = [*SHAPES, (), (1 << 17,), (5, 2)]

    def train():
        rng = np.random.default_rng(1)
        params = [
            mg.tensor(rng.standard_normal(s).astype(np.float32), requires_grad=True) for s in shapes
        ]
        optimizer = getattr(optim, name)(params, **options)
        for step in range(4):
            for index, param in enumerate(params):
                missing = index == skipped and step == 2
                grad = rng.standard_normal(param.shape).astype(np.float32)
                param.grad = None if missing else mg.tensor(grad)
            optimizer.step()
        return params, optimizer

    fast_params, optimizer = train()
    flat = fast_adam._flat_moments.get(optimizer)
    assert flat or case == "adam"  # the path under test was taken (Adam's L2 term: one by one)
    with mg.fast.disabled():
        reference_params, _ = train()
    for a, b in zip(fast_params, reference_params):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_adam_state_is_plain_arrays_and_numbers():
    _, optimizer = run_minigrad("Adam", {}, steps=2)
    state = optimizer.state_dict()
    assert state["param_groups"][0]["params"] == [0, 1]
    first = state["state"][0]
    assert first["step"] == 2
    assert type(first["exp_avg"]) is np.ndarray and first["exp_avg"].dtype == np.float32
    assert first["exp_avg_sq"].shape == SHAPES[0]


def test_zero_grad_and_parameters_without_gradient():
    params = [mg.tensor(v, requires_grad=True) for v in initial_values()]
    optimizer = optim.SGD(params, lr=0.1)
    params[0].grad = mg.ones(*SHAPES[0])
    before = params[1].numpy().copy()
    optimizer.step()  # params[1] has no gradient: left alone
    np.testing.assert_array_equal(params[1].numpy(), before)
    optimizer.zero_grad(set_to_none=False)
    assert params[0].grad.numpy().sum() == 0
    optimizer.zero_grad()
    assert params[0].grad is None


def test_param_groups_have_their_own_learning_rate():
    a, b = mg.zeros(2, requires_grad=True), mg.zeros(2, requires_grad=True)
    optimizer = optim.SGD([{"params": [a]}, {"params": [b], "lr": 1.0}], lr=0.1)
    a.grad, b.grad = mg.ones(2), mg.ones(2)
    optimizer.step()
    assert a.tolist() == pytest.approx([-0.1, -0.1]) and b.tolist() == [-1.0, -1.0]


@pytest.mark.parametrize(
    "params, error",
    [
        ([], "empty parameter list"),
        ([mg.zeros(2)], "requires grad"),
        ([mg.zeros(2, requires_grad=True) * 2], "leaf"),
    ],
    ids=["empty", "no_grad", "not_leaf"],
)
def test_bad_parameters_are_refused(params, error):
    with pytest.raises(ValueError, match=error):
        optim.Adam(params)


def test_the_same_parameter_twice_is_refused():
    p = mg.zeros(2, requires_grad=True)
    with pytest.raises(ValueError, match="more than one place"):
        optim.SGD([p, p], lr=0.1)


# -- schedules --------------------------------------------------------------------------------


def expected_warmup_cosine(step, base, warmup, total, min_lr):
    """The schedule written out by hand."""
    if step < warmup:
        return base * (step + 1) / warmup
    progress = min(1.0, (step - warmup) / (total - warmup))
    return min_lr + (base - min_lr) * 0.5 * (1 + math.cos(math.pi * progress))


@pytest.mark.parametrize("warmup, total, min_lr", [(10, 100, 0.0), (5, 40, 1e-4), (0, 20, 0.0)])
def test_warmup_cosine_follows_the_formula(warmup, total, min_lr):
    optimizer = optim.AdamW([mg.zeros(1, requires_grad=True)], lr=1e-3)
    scheduler = warmup_cosine(optimizer, warmup, total, min_lr=min_lr)
    seen = []
    for _ in range(total + 5):
        seen.append(optimizer.param_groups[0]["lr"])
        assert scheduler.get_last_lr() == [seen[-1]]
        scheduler.step()
    expected = [expected_warmup_cosine(s, 1e-3, warmup, total, min_lr) for s in range(total + 5)]
    np.testing.assert_allclose(seen, expected, rtol=1e-12, atol=1e-15)
    assert seen[-1] == pytest.approx(min_lr)
    assert max(seen) == pytest.approx(1e-3)


def test_scheduler_state_dict_resumes():
    optimizer = optim.SGD([mg.zeros(1, requires_grad=True)], lr=0.5)
    scheduler = warmup_cosine(optimizer, 3, 10)
    for _ in range(4):
        scheduler.step()
    saved = scheduler.state_dict()
    fresh_optimizer = optim.SGD([mg.zeros(1, requires_grad=True)], lr=0.5)
    fresh = warmup_cosine(fresh_optimizer, 3, 10)
    fresh.load_state_dict(saved)
    assert fresh.get_last_lr() == scheduler.get_last_lr()
    scheduler.step(), fresh.step()
    assert fresh_optimizer.param_groups[0]["lr"] == optimizer.param_groups[0]["lr"]


def test_lambda_lr_matches_torch():
    torch = pytest.importorskip("torch")

    def schedule(step):
        return 0.9**step

    optimizer = optim.SGD([mg.zeros(1, requires_grad=True)], lr=0.3)
    twin_optimizer = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.3)
    scheduler = LambdaLR(optimizer, schedule)
    twin = torch.optim.lr_scheduler.LambdaLR(twin_optimizer, schedule)
    for _ in range(6):
        assert scheduler.get_last_lr() == pytest.approx(twin.get_last_lr(), rel=1e-12)
        twin_optimizer.step()
        scheduler.step(), twin.step()


@pytest.mark.parametrize("decoupled, weight_decay", [(True, 0.01), (False, 0.1), (False, 0.0)])
def test_fused_cuda_adam_kernel_equals_the_plain_lines(decoupled, weight_decay):
    """On the GPU, Adam(W) runs as one kernel; it computes what adam_update's lines compute."""
    if not mg.cuda.is_available():
        pytest.skip("no CUDA device (CuPy with an NVIDIA GPU is needed)")
    from minigrad.backend import fused_adam_update
    from minigrad.optim.adam import AdamCoefficients, adam_update

    rng = np.random.default_rng(0)
    p, g, m = (rng.standard_normal((37, 5)).astype(np.float32) for _ in range(3))
    v = rng.random((37, 5)).astype(np.float32)
    c = AdamCoefficients(
        lr=1e-2, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=weight_decay, decoupled=decoupled,
        step_size=1e-2 / (1 - 0.9**3), bias_correction2_sqrt=(1 - 0.999**3) ** 0.5,
    )  # fmt: skip
    plain = [mg.tensor(a, device="cuda").array for a in (p, m, v)]
    fused = [mg.tensor(a, device="cuda").array for a in (p, m, v)]
    grad = mg.tensor(g, device="cuda").array
    adam_update(plain[0], grad, plain[1], plain[2], c)
    fused_adam_update(fused[0], grad, fused[1], fused[2], c)
    for a, b in zip(plain, fused):
        np.testing.assert_allclose(a.get(), b.get(), rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(grad.get(), g)  # the gradient is left as it was
