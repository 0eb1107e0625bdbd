"""Dtypes: float32 by default, float64 on request, int64 for indices; a Python (or NumPy)
number never upcasts a float32 tensor; every gradient has the dtype of its tensor.
"""

from __future__ import annotations

import numpy as np
import pytest

import minigrad as mg
from minigrad import ops

# -- creation ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make, dtype",
    [
        (lambda d: mg.tensor([1.0, 2.0], device=d), np.float32),
        (lambda d: mg.tensor(np.array([1.0, 2.0], dtype=np.float64), device=d), np.float32),
        (lambda d: mg.tensor(np.float64(3.0), device=d), np.float32),
        (lambda d: mg.tensor(np.ones(2), dtype=mg.float64, device=d), np.float64),
        (lambda d: mg.tensor([1.0], dtype="float64", device=d), np.float64),
        (lambda d: mg.tensor([1, 2], device=d), np.int64),
        (lambda d: mg.tensor(np.arange(3, dtype=np.int32), device=d), np.int64),
        (lambda d: mg.tensor([True, False], device=d), np.bool_),
        (lambda d: mg.tensor(mg.tensor([1.0], dtype=mg.float64), device=d), np.float32),
        (lambda d: mg.zeros(2, 3, device=d), np.float32),
        (lambda d: mg.ones((2, 3), device=d), np.float32),
        (lambda d: mg.randn(2, device=d), np.float32),
        (lambda d: mg.randn(2, dtype=mg.float64, device=d), np.float64),
        (lambda d: mg.rand(2, device=d), np.float32),
        (lambda d: mg.full((2,), 1.5, device=d), np.float32),
        (lambda d: mg.full((2,), 1, device=d), np.int64),
        (lambda d: mg.arange(5, device=d), np.int64),
        (lambda d: mg.arange(0, 1, 0.25, device=d), np.float32),
        (lambda d: mg.randint(0, 5, (3,), device=d), np.int64),
        (lambda d: mg.zeros_like(mg.randn(2, dtype=mg.float64, device=d)), np.float64),
        (lambda d: mg.ones_like(mg.arange(3, device=d)), np.int64),
    ],
    ids=[
        "list_of_floats", "float64_numpy_array", "numpy_float64_scalar", "dtype_float64",
        "dtype_string", "list_of_ints", "int32_array", "bools", "from_float64_tensor", "zeros",
        "ones", "randn", "randn_float64", "rand", "full_float", "full_int", "arange_int",
        "arange_float", "randint", "zeros_like", "ones_like",
    ],
)  # fmt: skip
def test_creation_dtypes(make, dtype, device):
    assert make(device).dtype == dtype


# -- numbers never upcast float32 -------------------------------------------------------------

SCALAR_OPS = {
    "add": lambda x: x + 2.5,
    "radd": lambda x: 2.5 + x,
    "sub_int": lambda x: x - 1,
    "rsub": lambda x: 1e10 - x,
    "mul": lambda x: x * 0.1,
    "rmul_numpy_float64": lambda x: np.float64(0.1) * x,
    "mul_numpy_int64": lambda x: x * np.int64(3),
    "div": lambda x: x / 3.0,
    "div_numpy_sqrt": lambda x: x / np.sqrt(8.0),
    "rdiv": lambda x: 1.0 / x,
    "pow": lambda x: x**2.0,
    "pow_numpy": lambda x: x ** np.float64(2.0),
    "rpow": lambda x: 2.0**x,
    "clamp": lambda x: x.clamp(0.1, 0.5),
    "where": lambda x: mg.where(x > 0, x, 0.0),
    "masked_fill": lambda x: x.masked_fill(x > 0, -1e9),
    "softmax": lambda x: ops.softmax(x * 0.5, -1),
    "gelu": lambda x: ops.gelu(x),
    "gelu_tanh": lambda x: ops.gelu(x, approximate="tanh"),
    "layer_norm": lambda x: ops.layer_norm(x, 3, eps=1e-5),
    "dropout": lambda x: ops.dropout(x, 0.25),
    "mean_var": lambda x: x.mean() + x.var(),
    "mse_loss": lambda x: ops.mse_loss(x, x * 0.5),
    "cross_entropy": lambda x: ops.cross_entropy(x, mg.tensor([0, 2], device=x.device)),
}


@pytest.mark.parametrize("name", SCALAR_OPS)
def test_python_and_numpy_numbers_keep_float32(name, device):
    x = mg.randn(2, 3, device=device, requires_grad=True)
    y = SCALAR_OPS[name](x)
    assert y.dtype == np.float32
    y.sum().backward()
    assert x.grad.dtype == np.float32


@pytest.mark.parametrize(
    "fn, dtype",
    [
        (lambda i: i * 2.5, np.float32),  # as in PyTorch: int tensor meets a float number
        (lambda i: i / 2, np.float32),  # true division gives floats
        (lambda i: i + 1, np.int64),
        (lambda i: i * np.int64(2), np.int64),
        (lambda i: i.float(), np.float32),
        (lambda i: i + mg.ones(3, dtype=mg.float64, device=i.device), np.float64),
        (lambda i: i > 1, np.bool_),
        (lambda i: i.sum(), np.int64),
    ],
    ids=["times_float", "div_int", "plus_int", "times_numpy_int", "float", "plus_float64",
         "compare", "sum"],
)  # fmt: skip
def test_integer_tensor_promotion(fn, dtype, device):
    assert fn(mg.arange(3, device=device)).dtype == dtype


def test_float32_meets_float64_tensor_gives_float64(device):
    a = mg.randn(3, device=device, requires_grad=True)
    b = mg.randn(3, dtype=mg.float64, device=device, requires_grad=True)
    y = a * b
    assert y.dtype == np.float64
    y.sum().backward()
    assert a.grad.dtype == np.float32 and b.grad.dtype == np.float64


# -- indices -------------------------------------------------------------------------------------


def test_indices_are_int64(device):
    x = mg.randn(3, 4, device=device)
    assert x.argmax().dtype == np.int64
    assert x.argmax(1).dtype == np.int64
    assert x.max(dim=0).indices.dtype == np.int64
    assert x.min(dim=1).indices.dtype == np.int64
    assert (x > 0).dtype == np.bool_


# -- every gradient has its tensor's dtype --------------------------------------------------------


def transformer_like(x, w, b, gamma, beta, emb):
    """A small graph with most ops a transformer uses."""
    tokens = ops.embedding(mg.tensor([[0, 2, 2]], device=x.device), emb)  # (1, 3, 4)
    h = ops.layer_norm(tokens + x, (4,), gamma, beta)
    scores = (h @ h.transpose(-1, -2)) / 2.0
    mask = mg.tensor(np.tril(np.ones((3, 3), dtype=bool)), device=x.device)
    attn = ops.softmax(scores.masked_fill(~mask, -1e9), -1) @ h
    out = ops.linear(ops.gelu(attn), w, b)
    loss = ops.cross_entropy(out.reshape(3, 5), mg.tensor([1, 4, 0], device=x.device))
    return loss + (out.var() + out[0, :, 1:3].abs().sum()) * 0.01


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_every_gradient_has_its_tensor_dtype(dtype, device):
    rng = np.random.default_rng(0)
    shapes = [(1, 3, 4), (5, 4), (5,), (4,), (4,), (3, 4)]
    params = [
        mg.tensor(rng.standard_normal(s), dtype=dtype, device=device, requires_grad=True)
        for s in shapes
    ]
    loss = transformer_like(*params)
    assert loss.dtype == dtype
    loss.backward()
    for p in params:
        assert p.grad is not None and p.grad.dtype == dtype and p.grad.shape == p.shape
        assert p.grad.device == device


@pytest.mark.parametrize("on_leaf", [False, True], ids=["through_op", "on_leaf_itself"])
def test_float64_seed_gradient_gives_float32_grads(on_leaf, device):
    x = mg.randn(3, device=device, requires_grad=True)
    y = x if on_leaf else x * 2.0
    y.backward(mg.ones(3, dtype=mg.float64, device=device))
    assert x.grad.dtype == np.float32


def test_gradient_through_a_cast_comes_back_in_the_leaf_dtype(device):
    x = mg.randn(3, device=device, requires_grad=True)
    (x.double() * 2.0).sum().backward()
    assert x.grad.dtype == np.float32
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 2.0, 2.0])


def test_second_derivatives_keep_float32(device):
    x = mg.randn(3, device=device, requires_grad=True)
    (g,) = mg.autograd.grad((x**3).sum(), x, create_graph=True)
    (h,) = mg.autograd.grad(g.sum(), x)
    assert g.dtype == h.dtype == np.float32
