"""nn.DataParallel: the two halves of a batch on two threads must give the outputs and the
gradients of the model called on the whole batch."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn
from minigrad.nn.parallel import DataParallelCall
from models import GPT, GPTConfig, next_token_loss


def tiny_gpt(dropout: float = 0.0) -> GPT:
    mg.manual_seed(0)
    config = GPTConfig(vocab_size=11, block_size=8, d_model=16, n_heads=2, n_layers=2)
    return GPT(GPTConfig(**{**config.__dict__, "dropout": dropout}))


def tokens(batch: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    return mg.tensor(rng.integers(0, 11, (batch, 8))), mg.tensor(rng.integers(0, 11, (batch, 8)))


def parameter_grads(model) -> dict:
    return {name: p.grad.numpy().copy() for name, p in model.named_parameters()}


def assert_same_grads(ours: dict, expected: dict) -> None:
    # float32, summed in another order: within 1e-5 of the largest gradient entry (a gradient
    # that is 0 in exact arithmetic, the key projection's bias, is rounding noise either way)
    scale = max(float(np.abs(grad).max()) for grad in expected.values())
    for name, grad in expected.items():
        np.testing.assert_allclose(ours[name], grad, rtol=1e-4, atol=1e-5 * scale, err_msg=name)


@pytest.mark.parametrize("batch", [6, 5])  # 5: halves of 3 and 2
def test_gpt_loss_and_gradients_match_the_whole_batch(two_threads, batch):
    model = tiny_gpt()
    x, y = tokens(batch)
    y.data[:, :3] = -100  # positions the loss skips, more in some rows than in others
    y.data[0, 3:6] = -100
    logits, loss = model(x, y)
    loss.backward()
    expected_logits, expected_loss, expected = logits.numpy(), loss.item(), parameter_grads(model)

    model.zero_grad()
    logits, _ = nn.DataParallel(model)(x)
    assert logits.grad_fn.function is DataParallelCall  # it did split
    loss = next_token_loss(logits, y)
    loss.backward()
    np.testing.assert_allclose(logits.numpy(), expected_logits, rtol=1e-5, atol=1e-6)
    assert loss.item() == pytest.approx(expected_loss, rel=1e-6)
    assert_same_grads(parameter_grads(model), expected)


def test_a_loss_is_gathered_as_the_halves_values_as_in_pytorch(two_threads):
    model = tiny_gpt()
    x, y = tokens(5)
    _, losses = nn.DataParallel(model)(x, y)
    first, second = model(x[:3], y[:3])[1].item(), model(x[3:], y[3:])[1].item()
    np.testing.assert_allclose(losses.numpy(), [first, second], rtol=1e-6)
    # the gradient of their mean: each half's graph seeded with 1/2
    losses.mean().backward()
    parallel = parameter_grads(model)
    model.zero_grad()
    ((model(x[:3], y[:3])[1] + model(x[3:], y[3:])[1]) * 0.5).backward()
    assert_same_grads(parallel, parameter_grads(model))


def mlp() -> nn.Module:
    mg.manual_seed(1)
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3)).to(mg.float64)


def test_input_gradients_and_a_batch_of_outputs(two_threads):
    # the inputs' gradients are the halves' joined; a (B, 3) output is concatenated
    model, rng = mlp(), np.random.default_rng(2)
    x = mg.tensor(rng.standard_normal((7, 4)), requires_grad=True)
    upstream = mg.tensor(rng.standard_normal((7, 3)))
    model(x).backward(upstream)
    expected_x, expected = x.grad.numpy(), parameter_grads(model)

    x.grad = None
    model.zero_grad()
    out = nn.DataParallel(model)(x)
    assert out.shape == (7, 3)
    out.backward(upstream)
    np.testing.assert_allclose(x.grad.numpy(), expected_x, rtol=1e-12)
    for name, grad in expected.items():
        np.testing.assert_allclose(parameter_grads(model)[name], grad, rtol=1e-12)


def test_halves_run_on_two_threads_at_once(two_threads):
    seen, both_inside = [], threading.Barrier(2, timeout=10)

    class Recorder(nn.Module):
        def forward(self, x):
            seen.append((threading.get_ident(), x.shape[0]))
            both_inside.wait()  # times out unless the other half runs at the same time
            return x * 2.0

    out = nn.DataParallel(Recorder())(mg.ones(5, 2))
    assert sorted(size for _, size in seen) == [2, 3]
    assert len({ident for ident, _ in seen}) == 2
    np.testing.assert_array_equal(out.numpy(), np.full((5, 2), 2.0, np.float32))


def test_second_backward_needs_retain_graph(two_threads):
    model, x = mlp(), mg.tensor(np.linspace(-1, 1, 12).reshape(6, 2).repeat(2, axis=1))
    loss = (nn.DataParallel(model)(x) ** 2).mean()
    loss.backward(retain_graph=True)
    once = parameter_grads(model)
    loss.backward()  # the halves' graphs were kept: the gradients add up
    for name, grad in parameter_grads(model).items():
        np.testing.assert_allclose(grad, 2 * once[name], rtol=1e-12)
    with pytest.raises(RuntimeError, match="retain_graph=True"):
        loss.backward()


def test_autograd_grad_and_no_create_graph(two_threads):
    model, data = mlp(), np.random.default_rng(3).standard_normal((6, 4))
    results = []
    for wrap in (lambda m: m, nn.DataParallel):
        x = mg.tensor(data, requires_grad=True)
        first = model[0].weight
        results.append(mg.autograd.grad(wrap(model)(x).tanh().sum(), [x, first]))
    for ours, expected in zip(results[1], results[0]):
        np.testing.assert_allclose(ours.numpy(), expected.numpy(), rtol=1e-12)

    x = mg.tensor(data, requires_grad=True)
    loss = nn.DataParallel(model)(x).tanh().sum()
    with pytest.raises(RuntimeError, match="create_graph=True is not supported"):
        mg.autograd.grad(loss, [x], create_graph=True)


def test_no_grad_gives_the_outputs_without_a_graph(two_threads):
    model, x = mlp(), mg.tensor(np.ones((4, 4)))
    with mg.no_grad():
        out = nn.DataParallel(model)(x)
    assert out.grad_fn is None and not out.requires_grad
    np.testing.assert_allclose(out.numpy(), model(x).numpy(), rtol=1e-12)


def test_dropout_repeats_with_the_seed_and_nothing_else_moves_the_generator(two_threads):
    model = tiny_gpt(dropout=0.3)
    parallel, (x, y) = nn.DataParallel(model), tokens(6)
    losses = []
    for _ in range(2):
        mg.manual_seed(7)
        losses.append(parallel(x, y)[1].numpy())
    np.testing.assert_array_equal(losses[0], losses[1])

    model.eval()  # no dropout: the CPU generator must be where it was
    mg.manual_seed(7)
    parallel(x, y)
    after = mg.rand(3).numpy()
    mg.manual_seed(7)
    np.testing.assert_array_equal(after, mg.rand(3).numpy())


def test_on_one_thread_it_calls_the_model_on_the_whole_batch():
    # the suite runs on one thread (tests/conftest.py)
    model, (x, y) = tiny_gpt(), tokens(4)
    _, loss = nn.DataParallel(model)(x, y)
    assert loss.grad_fn.function is not DataParallelCall and loss.ndim == 0
    assert loss.item() == model(x, y)[1].item()


def test_grad_mode_is_each_threads_own():
    seen = []
    with mg.no_grad():
        thread = threading.Thread(target=lambda: seen.append(mg.is_grad_enabled()))
        thread.start()
        thread.join()
        assert not mg.is_grad_enabled()
    assert seen == [True]


def test_outputs_must_be_tensors(two_threads):
    class Dictionary(nn.Module):
        def forward(self, x):
            return {"out": x}

    with pytest.raises(TypeError, match="DataParallel: the module must return a tensor"):
        nn.DataParallel(Dictionary())(mg.ones(4, 2))


def test_cuda_batches_are_not_split(two_threads):
    # CuPy queues its kernels on one stream: the model runs on the whole batch
    if not mg.cuda.is_available():
        pytest.skip("no CUDA device (CuPy with an NVIDIA GPU is needed)")
    model = tiny_gpt().to("cuda")
    x, y = (t.to("cuda") for t in tokens(4))
    logits, loss = nn.DataParallel(model)(x, y)
    assert loss.grad_fn.function is not DataParallelCall and loss.ndim == 0
    assert loss.item() == pytest.approx(model(x, y)[1].item(), rel=1e-6)


def test_halves_that_disagree_or_fail_raise_in_the_caller(two_threads):
    class Uneven(nn.Module):
        def forward(self, x):
            if x.shape[0] == 2:  # the second half of 5 rows
                raise ValueError("second half refused")
            return x * 2.0 if x.shape[0] == 3 else None

    with pytest.raises(ValueError, match="second half refused"):
        nn.DataParallel(Uneven())(mg.ones(5, 2))

    class Mismatched(nn.Module):
        def forward(self, x):
            return x if x.shape[0] == 3 else None

    with pytest.raises(TypeError, match="different kinds.*shape \\(3, 2\\) and None"):
        nn.DataParallel(Mismatched())(mg.ones(5, 2))


def test_a_tensor_that_is_not_batched_keeps_the_call_whole(two_threads):
    class Masked(nn.Module):
        def forward(self, x, mask):
            return x * mask

    x, mask = mg.ones(6, 3, requires_grad=True), mg.tensor(np.array([1.0, 0.0, 1.0], np.float32))
    out = nn.DataParallel(Masked())(x, mask)  # mask has no batch axis: no split
    assert out.grad_fn.function is not DataParallelCall
    np.testing.assert_array_equal(out.numpy(), np.tile([1.0, 0.0, 1.0], (6, 1)))
    scale = 2.0  # a non-tensor argument goes to both halves as it is

    class Scaled(nn.Module):
        def forward(self, x, factor):
            return x * factor

    seen = nn.DataParallel(Scaled())(mg.ones(6, 3, requires_grad=True), scale)
    assert seen.grad_fn.function is DataParallelCall
    np.testing.assert_array_equal(seen.numpy(), np.full((6, 3), 2.0, np.float32))


@pytest.mark.parametrize("keep_wrapper", [True, False])
def test_the_drawn_graph_names_the_parameters(two_threads, keep_wrapper):
    # the DataParallelCall node is the model's call: its parameters are drawn with their
    # names, also when the DataParallel wrapper was a temporary that is gone by then
    pytest.importorskip("graphviz")
    model = tiny_gpt()
    x, y = tokens(4)
    wrapper = nn.DataParallel(model)
    logits, _ = wrapper(x)
    if not keep_wrapper:
        del wrapper
    source = mg.viz.draw_graph(next_token_loss(logits, y)).source
    assert "DataParallelCall" in source
    assert "blocks.0.attn.q_proj.weight" in source and "leaf (requires grad)" not in source
