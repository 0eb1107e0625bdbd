"""Each fused op against its plain twin, built from primitive ops, forward and backward; and
the fused ops' numerical stability at inputs of +-1000.

The fused ops (one graph node, hand-derived backward) are written from their derivatives;
the twins below are the equations written out with + - * / exp log sqrt tanh and indexing.
If both give the same values and gradients, the fused op computes what the equations say.
The suite runs this file with the fast layer on and with ``MINIGRAD_REFERENCE=1``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import minigrad as mg
from minigrad import ops
from minigrad.backend import erf

# -- the twins, from primitive ops -----------------------------------------------------------


def softmax_twin(x, dim):
    # y_i = e^(x_i - m) / sum_j e^(x_j - m)
    exps = (x - x.amax(dim, keepdim=True)).exp()
    return exps / exps.sum(dim, keepdim=True)


def log_softmax_twin(x, dim):
    # y_i = (x_i - m) - log sum_j e^(x_j - m)
    shifted = x - x.amax(dim, keepdim=True)
    return shifted - shifted.exp().sum(dim, keepdim=True).log()


def cross_entropy_twin(logits, target, ignore_index=-100, reduction="mean"):
    # loss_i = -log_softmax(x_i)[t_i], rows with t_i = ignore_index count for nothing
    counted = target.numpy() != ignore_index
    safe = np.where(counted, target.numpy(), 0)
    picked = log_softmax_twin(logits, 1)[np.arange(logits.shape[0]), safe]  # gather
    losses = -picked * mg.tensor(counted, dtype=logits.dtype, device=logits.device)
    if reduction == "none":
        return losses
    return losses.sum() if reduction == "sum" else losses.sum() / float(counted.sum())


def layer_norm_twin(x, weight, bias, eps=1e-5):
    # gamma * (z - mu) / sqrt(sigma^2 + eps) + beta, over the last dim
    mu = x.mean(-1, keepdim=True)
    centered = x - mu
    var = (centered * centered).mean(-1, keepdim=True)
    y = centered / (var + eps).sqrt()
    if weight is not None:
        y = y * weight
    return y + bias if bias is not None else y


def layer_norm_twin_2d(x, weight, bias, eps=1e-5):
    # the same over the last two dims
    mu = x.mean((-2, -1), keepdim=True)
    centered = x - mu
    var = (centered * centered).mean((-2, -1), keepdim=True)
    return centered / (var + eps).sqrt() * weight + bias


class Erf(mg.autograd.Function):
    """erf as a primitive: d erf(x)/dx = 2/sqrt(pi) e^(-x^2)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return erf(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * (2.0 / math.sqrt(math.pi)) * (-(x * x)).exp()


def gelu_exact_twin(x):
    # x * Phi(x), Phi(x) = (1 + erf(x / sqrt 2)) / 2
    return x * 0.5 * (1.0 + Erf.apply(x / math.sqrt(2.0)))


def gelu_tanh_twin(x):
    # x/2 * (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
    return 0.5 * x * (1.0 + (math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)).tanh())


def linear_twin(x, weight, bias):
    # x W^T + b
    return x @ weight.T + bias


# -- one comparison for all pairs ------------------------------------------------------------


def assert_twins_agree(fused, twin, arrays, dtype, device, rtol):
    """Same values and same gradient for every float input, from the same upstream gradient."""
    results = []
    for fn in (fused, twin):
        inputs = [
            mg.tensor(a, dtype=dtype, device=device, requires_grad=True)
            if a.dtype.kind == "f"
            else mg.tensor(a, device=device)  # class indices stay int64
            for a in arrays
        ]
        out = fn(*inputs)
        upstream = np.random.default_rng(1).standard_normal(out.shape)
        out.backward(mg.tensor(upstream, dtype=dtype, device=device))
        results.append((out, [t.grad for t in inputs if t.requires_grad]))
    (out, grads), (twin_out, twin_grads) = results
    assert out.shape == twin_out.shape and out.dtype == twin_out.dtype == np.dtype(dtype)
    np.testing.assert_allclose(out.numpy(), twin_out.numpy(), rtol=rtol, atol=rtol)
    for i, (g, twin_g) in enumerate(zip(grads, twin_grads)):
        assert g.dtype == np.dtype(dtype)
        np.testing.assert_allclose(
            g.numpy(), twin_g.numpy(), rtol=rtol, atol=rtol, err_msg=f"grad of input {i}"
        )


RNG = np.random.default_rng(0)
X = RNG.standard_normal((4, 5)) * 3
X3 = RNG.standard_normal((2, 3, 5)) * 3
TARGET = np.array([0, 4, 2, 2])
TARGET_IGNORED = np.array([0, -100, 2, -1])
W, B = RNG.standard_normal((6, 5)), RNG.standard_normal(6)
GAMMA, BETA = RNG.standard_normal(5), RNG.standard_normal(5)
# big enough for the kernels' two halves (fast.arrays.PARALLEL_MIN_SIZE)
X_BIG = RNG.standard_normal((8, 64, 256)) * 3
X_ROWS = RNG.standard_normal((256, 4, 8))
GAMMA_BIG, BETA_BIG = RNG.standard_normal(256), RNG.standard_normal(256)
GAMMA_2D, BETA_2D = RNG.standard_normal((4, 8)), RNG.standard_normal((4, 8))
X_LINEAR = RNG.standard_normal((128, 40, 5))

PAIRS = {
    "softmax_last": (lambda x: ops.softmax(x, -1), lambda x: softmax_twin(x, -1), [X3]),
    "softmax_dim1": (lambda x: ops.softmax(x, 1), lambda x: softmax_twin(x, 1), [X3]),
    "log_softmax_last": (
        lambda x: ops.log_softmax(x, -1),
        lambda x: log_softmax_twin(x, -1),
        [X3],
    ),
    "log_softmax_dim0": (lambda x: ops.log_softmax(x, 0), lambda x: log_softmax_twin(x, 0), [X]),
    "cross_entropy_mean": (ops.cross_entropy, cross_entropy_twin, [X, TARGET]),
    "cross_entropy_sum": (
        lambda x, t: ops.cross_entropy(x, t, reduction="sum"),
        lambda x, t: cross_entropy_twin(x, t, reduction="sum"),
        [X, TARGET],
    ),
    "cross_entropy_none_ignore_index": (
        lambda x, t: ops.cross_entropy(x, t, reduction="none"),
        lambda x, t: cross_entropy_twin(x, t, reduction="none"),
        [X, TARGET_IGNORED * (TARGET_IGNORED != -1)],
    ),
    "cross_entropy_custom_ignore_index": (
        lambda x, t: ops.cross_entropy(x, t, ignore_index=-1),
        lambda x, t: cross_entropy_twin(x, t, ignore_index=-1),
        [X, np.where(TARGET_IGNORED == -100, 1, TARGET_IGNORED)],
    ),
    "layer_norm_affine": (
        lambda x, w, b: ops.layer_norm(x, (5,), w, b),
        layer_norm_twin,
        [X3, GAMMA, BETA],
    ),
    "layer_norm_plain": (
        lambda x: ops.layer_norm(x, 5),
        lambda x: layer_norm_twin(x, None, None),
        [X3],
    ),
    "layer_norm_weight_only": (
        lambda x, w: ops.layer_norm(x, (5,), w, None),
        lambda x, w: layer_norm_twin(x, w, None),
        [X3, GAMMA],
    ),
    "layer_norm_bias_only": (
        lambda x, b: ops.layer_norm(x, (5,), None, b),
        lambda x, b: layer_norm_twin(x, None, b),
        [X3, BETA],
    ),
    "layer_norm_big": (
        lambda x, w, b: ops.layer_norm(x, (256,), w, b),
        layer_norm_twin,
        [X_BIG, GAMMA_BIG, BETA_BIG],
    ),
    "layer_norm_two_dims": (
        lambda x, w, b: ops.layer_norm(x, (4, 8), w, b),
        layer_norm_twin_2d,
        [X_ROWS, GAMMA_2D, BETA_2D],
    ),
    "softmax_big": (lambda x: ops.softmax(x, -1), lambda x: softmax_twin(x, -1), [X_BIG]),
    "gelu_exact": (ops.gelu, gelu_exact_twin, [X3]),
    "gelu_tanh": (lambda x: ops.gelu(x, approximate="tanh"), gelu_tanh_twin, [X3]),
    "linear": (ops.linear, linear_twin, [X3, W, B]),
    "linear_big": (ops.linear, linear_twin, [X_LINEAR, W, B]),
}


@pytest.mark.parametrize("name", PAIRS)
@pytest.mark.parametrize("dtype, rtol", [(mg.float64, 1e-10), (mg.float32, 2e-5)])
def test_fused_op_matches_its_twin(name, dtype, rtol, device):
    fused, twin, arrays = PAIRS[name]
    assert_twins_agree(fused, twin, arrays, dtype, device, rtol)


@pytest.mark.parametrize("dtype, rtol", [(mg.float64, 1e-12), (mg.float32, 1e-6)])
@pytest.mark.parametrize("rows", [X_BIG, X_BIG[:1, :8]])  # the general path and the small one
def test_layer_norm_with_a_frozen_weight(rows, dtype, rtol, device):
    # gamma without requires_grad: no dL/dgamma (its g * xhat is skipped on the GPU), and
    # the same dL/dx and dL/dbeta as with a trainable gamma
    grads = []
    for trainable in (True, False):
        x = mg.tensor(rows, dtype=dtype, device=device, requires_grad=True)
        weight = mg.tensor(GAMMA_BIG, dtype=dtype, device=device, requires_grad=trainable)
        bias = mg.tensor(BETA_BIG, dtype=dtype, device=device, requires_grad=True)
        out = ops.layer_norm(x, (256,), weight, bias)
        out.backward(mg.tensor(rows[::-1].copy(), dtype=dtype, device=device))
        assert (weight.grad is not None) == trainable
        grads.append((x.grad.numpy(), bias.grad.numpy()))
    for trained, frozen in zip(*grads):
        np.testing.assert_allclose(frozen, trained, rtol=rtol, atol=rtol)


# -- numerical stability -----------------------------------------------------------------------

HUGE = np.array([[1000.0, -1000.0, 0.0], [-1000.0, -1000.0, 1000.0], [1000.0, 1000.0, 1000.0]])

STABLE = {
    "softmax": lambda x: ops.softmax(x, -1),
    "log_softmax": lambda x: ops.log_softmax(x, -1),
    "cross_entropy": lambda x: ops.cross_entropy(x, mg.tensor([1, 0, 2], device=x.device)),
    "layer_norm": lambda x: ops.layer_norm(x, 3),
    "sigmoid": lambda x: x.sigmoid(),
    "gelu_exact": ops.gelu,
    "gelu_tanh": lambda x: ops.gelu(x, approximate="tanh"),
}


@pytest.mark.parametrize("dtype", [mg.float32, mg.float64])
def test_softmax_rows_with_and_without_the_max_shift(dtype, device):
    # On NumPy, softmax skips the row max where e^x neither overflows nor underflows and
    # shifts the other rows: here the first half of X_BIG's rows (one thread's half) holds
    # rows far beyond that range, the second half ordinary and masked ones
    x = X_BIG.copy()
    x[:2, :32] += 500.0  # e^x overflows
    x[:2, 32:] -= 500.0  # every e^x underflows
    x[3, 5, :] = -np.inf  # a fully masked row: nan, as with the shift
    x[6, 6, 1:] = -np.inf  # all weight on one position
    x[7, :, 128:] = -np.inf  # half of each row masked
    x = x.astype(dtype)  # the reference starts from the same rounded inputs
    with np.errstate(invalid="ignore"):
        expected = np.exp(x.astype(np.float64) - x.max(axis=-1, keepdims=True))
        expected /= expected.sum(axis=-1, keepdims=True)
        out = ops.softmax(mg.tensor(x, dtype=dtype, device=device), -1).numpy()
    rtol = 2e-6 if dtype == mg.float32 else 1e-12
    np.testing.assert_allclose(out, expected, rtol=rtol, atol=1e-30)
    assert np.isnan(out[3, 5]).all() and out[6, 6, 0] == 1.0


@pytest.mark.skipif(not mg.fast.is_enabled(), reason="a property of the fast kernel")
def test_softmax_kernel_takes_the_row_max_only_where_needed(monkeypatch):
    from minigrad.fast import activation

    calls = []

    def counted(row_max):
        def counted_max(*args, **kwargs):
            calls.append(args[0].shape)
            return row_max(*args, **kwargs)

        return counted_max

    monkeypatch.setattr(activation, "row_maxima", counted(activation.row_maxima))
    x = X_BIG.astype(np.float32)
    ops.softmax(mg.tensor(x), -1)
    assert calls == []  # ordinary scores: no row max at all
    x[5, 0, 0] = 1000.0  # one value that overflows e^x, in the second half's rows
    out = ops.softmax(mg.tensor(x), -1).numpy()
    # that half alone is redone with the shift (on a one-core machine, the whole)
    assert calls in ([(4, 64, 256)], [(8, 64, 256)])
    assert out[5, 0, 0] == 1.0 and np.isfinite(out).all()


@pytest.mark.parametrize("op", [ops.softmax, ops.log_softmax])
@pytest.mark.parametrize("shape", [(0, 5), (3, 0)])
def test_softmax_of_empty_rows_or_no_rows(op, shape, device):
    x = mg.zeros(shape, device=device, requires_grad=True)  # PyTorch gives empty results too
    out = op(x, -1)
    out.sum().backward()
    assert out.shape == shape and x.grad.shape == shape


@pytest.mark.parametrize("name", STABLE)
@pytest.mark.parametrize("dtype", [mg.float32, mg.float64])
def test_no_nan_or_inf_at_plus_minus_1000(name, dtype, device):
    x = mg.tensor(HUGE, dtype=dtype, device=device, requires_grad=True)
    with mg.detect_anomaly():  # raises at the first op that makes nan or inf
        out = STABLE[name](x)
        out.backward(mg.ones_like(out))
    assert np.isfinite(out.numpy()).all() and np.isfinite(x.grad.numpy()).all()


@pytest.mark.parametrize("dtype", [mg.float32, mg.float64])
def test_stable_values_at_plus_minus_1000(dtype, device):
    x = mg.tensor(HUGE, dtype=dtype, device=device)
    np.testing.assert_allclose(ops.softmax(x, -1).numpy()[0], [1.0, 0.0, 0.0])
    np.testing.assert_allclose(ops.log_softmax(x, -1).numpy()[0], [0.0, -2000.0, -1000.0])
    np.testing.assert_allclose(ops.softmax(x, -1).numpy()[2], [1 / 3] * 3, rtol=1e-6)
    loss = ops.cross_entropy(x, mg.tensor([1, 0, 2], device=device), reduction="none")
    np.testing.assert_allclose(loss.numpy(), [2000.0, 2000.0, math.log(3)], rtol=1e-6)
    np.testing.assert_allclose(x.sigmoid().numpy()[0], [1.0, 0.0, 0.5])
    np.testing.assert_allclose(ops.gelu(x).numpy()[0], [1000.0, 0.0, 0.0])
    np.testing.assert_allclose(ops.gelu(x, approximate="tanh").numpy()[0], [1000.0, 0.0, 0.0])
