"""Streams (backend, "streams"): ops whose forward hands its halves to the helper thread
without waiting. Each test slows the helper down, so that any read of a half before the wait
for it would see an unwritten array, and compares with the same computation on one thread."""

from __future__ import annotations

import time

import numpy as np
import pytest

import minigrad as mg
from minigrad import backend, nn, ops
from minigrad.ops import activation
from models import GPT, GPTConfig


@pytest.fixture
def slow_stream(two_threads, monkeypatch):
    """Two threads, every op split (tiny sizes too), each posted half 2 ms late."""
    if not two_threads.spins:
        pytest.skip("no pthread spin locks in this C library: nothing is posted")
    monkeypatch.setattr(backend, "PARALLEL_MIN_SIZE", 1 << 6)
    monkeypatch.setattr(activation, "PARALLEL_MIN_SIZE", 1 << 6)
    monkeypatch.setattr(backend, "PRODUCT_MIN_SIZE", 1)
    post = two_threads.post
    posted = []

    def late_post(task):
        posted.append(task)
        return post(lambda: (time.sleep(0.002), task()))

    monkeypatch.setattr(two_threads, "post", late_post)
    return posted


def _step_results(model, x, y):
    model.zero_grad()
    logits, loss = model(x, y)
    loss.backward()
    grads = {name: p.grad.numpy().copy() for name, p in model.named_parameters()}
    return logits.numpy().copy(), loss.item(), grads


@pytest.mark.parametrize("batch", [4, 3])  # an odd batch: halves of rows and of sequences differ
@pytest.mark.parametrize("activation", ["gelu", "gelu_tanh"])
def test_a_gpt_step_in_streams_matches_one_thread(slow_stream, batch, activation):
    config = GPTConfig(
        vocab_size=13, block_size=16, d_model=32, n_heads=4, n_layers=2, activation=activation
    )
    mg.manual_seed(0)
    model = GPT(config)
    rng = np.random.default_rng(0)
    x = mg.tensor(rng.integers(0, 13, (batch, 16)))
    y = mg.tensor(rng.integers(0, 13, (batch, 16)))
    streamed = _step_results(model, x, y)
    assert slow_stream, "nothing was posted"
    mg.set_num_threads(1)
    plain = _step_results(model, x, y)
    np.testing.assert_allclose(streamed[0], plain[0], rtol=1e-5, atol=1e-6)
    assert streamed[1] == pytest.approx(plain[1], rel=1e-6)
    for name, grad in plain[2].items():
        np.testing.assert_allclose(streamed[2][name], grad, rtol=1e-4, atol=1e-6, err_msg=name)


def test_reading_data_waits_for_the_stream(slow_stream):
    layer = nn.Linear(32, 32)
    x = mg.randn(64, 32, requires_grad=True)
    expected = x.numpy() @ layer.weight.numpy().T + layer.bias.numpy()
    for read in (
        lambda y: y.numpy(),
        lambda y: y.data.copy(),
        lambda y: (y + 0.0).numpy(),  # an op that streams, then a read
        lambda y: y.sum().item() * np.ones(1),  # an op that does not stream
    ):
        y = layer(x)
        assert backend._posted_writes, "the product's second half was not left to the helper"
        result = read(y)
        if result.shape == expected.shape:
            np.testing.assert_allclose(result, expected, rtol=1e-5, atol=1e-5)
        else:
            assert result[0] == pytest.approx(expected.sum(), rel=1e-4, abs=1e-3)
        assert not backend._posted_writes


def test_a_copy_of_a_half_written_array_waits(slow_stream):
    x = mg.randn(8, 16, 12)
    y = ops.softmax(x, dim=-1)  # posted
    assert backend._posted_writes
    flat = y.transpose(0, 1).reshape(16 * 8 * 12)  # a reshape that must copy: reads all of y
    np.testing.assert_allclose(
        flat.numpy(), ops.softmax(x, dim=-1).numpy().transpose(1, 0, 2).reshape(-1), rtol=1e-6
    )


@pytest.mark.parametrize(
    "shape_a, shape_b",
    [
        ((6, 16, 8), (6, 16, 8)),  # residual additions: both split
        ((6, 4, 16, 16), (16, 16)),  # an attention mask: broadcast, read whole
        ((6, 16, 8), (1, 16, 8)),  # broadcast along the first axis
        ((6, 16, 8), None),  # a Python number
    ],
)
def test_streamed_additions_and_products_match_numpy(slow_stream, shape_a, shape_b):
    rng = np.random.default_rng(1)
    a = rng.standard_normal(shape_a).astype(np.float32)
    b = 0.5 if shape_b is None else rng.standard_normal(shape_b).astype(np.float32)
    ta = mg.tensor(a)
    tb = b if shape_b is None else mg.tensor(b)
    total, product = ta + tb, ta * tb
    np.testing.assert_array_equal(total.numpy(), a + b)
    np.testing.assert_array_equal(product.numpy(), a * b)
    assert total.dtype == mg.float32 and product.dtype == mg.float32


def test_a_half_that_fails_raises_at_the_next_read(slow_stream, two_threads, monkeypatch):
    post = two_threads.post

    def failing_post(task):
        def fail():
            raise FloatingPointError("half failed")

        return post(fail)

    x = mg.randn(64, 32)
    monkeypatch.setattr(two_threads, "post", failing_post)
    y = ops.softmax(x, dim=-1)
    monkeypatch.setattr(two_threads, "post", post)
    with pytest.raises(FloatingPointError, match="half failed"):
        y.numpy()
    assert not backend._posted_writes and two_threads._poster is None
    np.testing.assert_allclose(ops.softmax(x, dim=-1).numpy().sum(axis=-1), 1.0, rtol=1e-5)


def test_an_open_stream_lets_the_idle_helper_park_and_set_num_threads_close_it(
    slow_stream, two_threads, monkeypatch
):
    from minigrad import threads

    monkeypatch.setattr(threads, "IDLE_SECONDS", 0.01)
    x = mg.randn(64, 32)
    expected = ops.softmax(x, dim=-1).numpy()
    y = ops.softmax(x, dim=-1)  # a stream left open: nothing reads y
    deadline = time.monotonic() + 10
    while two_threads._awake.is_set() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not two_threads._awake.is_set(), "the helper spun on beside an open stream"
    assert backend._posted_writes
    z = ops.softmax(x, dim=-1)  # a post wakes it again
    np.testing.assert_allclose(y.numpy(), expected, rtol=1e-6)
    z2 = ops.softmax(x, dim=-1)
    mg.set_num_threads(1)  # closes this thread's stream first (parking waits for it)
    assert not backend._posted_writes
    np.testing.assert_allclose(z.numpy(), expected, rtol=1e-6)
    np.testing.assert_allclose(z2.numpy(), expected, rtol=1e-6)
