"""Every op against PyTorch: forward values, shape and dtype, and the gradient of every input,
on shapes and values that hypothesis draws (broadcastable pairs, any dim, keepdim or not).

float64 must agree to rtol 1e-6; a float32 pass checks the same ops at float32 precision.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from helpers import compare_with_torch
from hypothesis import assume, given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import minigrad as mg
from minigrad import ops

torch = pytest.importorskip("torch")
TF = torch.nn.functional

# -- strategies ------------------------------------------------------------------------------

ELEMENTS = {
    "real": st.floats(-3, 3, allow_subnormal=False),
    "positive": st.floats(0.5, 3),
    "away_from_zero": st.floats(0.2, 3) | st.floats(-3, -0.2),
}


def values(draw, shape, domain="real", unique=False):
    """A float64 array of ``shape`` with hypothesis-drawn values from ``domain``."""
    return draw(hnp.arrays(np.float64, shape, elements=ELEMENTS[domain], unique=unique))


SHAPES = hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=4)
NONSCALAR_SHAPES = hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4)
BROADCAST_PAIRS = hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=3, max_side=4)
MATMUL_PAIRS = hnp.mutually_broadcastable_shapes(
    signature=np.matmul.signature, max_dims=2, max_side=4
)


def dim_of(draw, shape):
    """A dim of ``shape``, as likely negative as not."""
    return draw(st.integers(-len(shape), len(shape) - 1))


def same(fn):
    """An op spelled the same in minigrad and PyTorch (operators and Tensor methods)."""
    return fn, fn


# -- elementwise: two inputs, broadcasting -----------------------------------------------------

BINARY = {
    "add": (*same(lambda a, b: a + b), "real"),
    "sub": (*same(lambda a, b: a - b), "real"),
    "mul": (*same(lambda a, b: a * b), "real"),
    "div": (*same(lambda a, b: a / b), "away_from_zero"),
    "pow": (*same(lambda a, b: a**b), "positive"),
    "where": (
        lambda a, b: mg.where(a > b, a, b),
        lambda a, b: torch.where(a > b, a, b),
        "real",
    ),
    "masked_fill": (
        lambda a, b: a.masked_fill(b > 0, 0.5) * b,
        lambda a, b: a.masked_fill(b > 0, 0.5) * b,
        "real",
    ),
    "eq": (*same(lambda a, b: a == b), "real"),
    "lt": (*same(lambda a, b: a < b), "real"),
    "ge": (*same(lambda a, b: a >= b), "real"),
}


@pytest.mark.parametrize("name", BINARY)
@given(data=st.data())
def test_binary_ops_broadcast(name, data, device):
    mg_fn, torch_fn, domain = BINARY[name]
    shape_a, shape_b = data.draw(BROADCAST_PAIRS).input_shapes
    if name == "masked_fill":  # the mask broadcasts to a, not the other way round
        shape_b = data.draw(hnp.broadcastable_shapes(shape_a, max_dims=len(shape_a)))
    a = values(data.draw, shape_a, domain)
    b = values(data.draw, shape_b, domain)
    compare_with_torch(mg_fn, torch_fn, a, b, device=device)


def test_pow_with_zero_base_has_zero_exponent_gradient(device):
    """d a^b / db = a^b log a is taken as 0 at a = 0 (its limit), for tensor and number bases."""
    base, exponent = np.array([0.0, 1.0, 2.0, 0.0]), np.array([2.0, 2.0, 0.5, 0.0])
    compare_with_torch(*same(lambda a, b: a**b), base, exponent, device=device)
    compare_with_torch(*same(lambda b: 0.0**b), exponent, device=device)


# -- elementwise: one input, and ops with a Python number ---------------------------------------

UNARY = {
    "neg": (*same(lambda x: -x), "real"),
    "exp": (*same(lambda x: x.exp()), "real"),
    "log": (*same(lambda x: x.log()), "positive"),
    "sqrt": (*same(lambda x: x.sqrt()), "positive"),
    "tanh": (*same(lambda x: x.tanh()), "real"),
    "sigmoid": (*same(lambda x: x.sigmoid()), "real"),
    "relu": (*same(lambda x: x.relu()), "real"),
    "abs": (*same(lambda x: x.abs()), "real"),
    "clamp": (*same(lambda x: x.clamp(-0.5, 1.0)), "real"),
    "clamp_min": (*same(lambda x: x.clamp(min=0.25)), "real"),
    "clamp_max": (*same(lambda x: x.clamp(max=0.25)), "real"),
    "add_scalar": (*same(lambda x: 1.5 + x + 2), "real"),
    "sub_scalar": (*same(lambda x: 1.5 - x - 2), "real"),
    "mul_scalar": (*same(lambda x: 1.5 * x * -2), "real"),
    "div_scalar": (*same(lambda x: 1.5 / x / 4), "away_from_zero"),
    "pow_int": (*same(lambda x: x**3), "real"),
    "pow_float": (*same(lambda x: x**-1.5), "positive"),
    "rpow": (*same(lambda x: 2.0**x), "real"),
    "gelu_exact": (ops.gelu, TF.gelu, "real"),
    "gelu_tanh": (
        lambda x: ops.gelu(x, approximate="tanh"),
        lambda x: TF.gelu(x, approximate="tanh"),
        "real",
    ),
    "dropout_eval": (
        lambda x: ops.dropout(x, 0.5, training=False),
        lambda x: TF.dropout(x, 0.5, training=False),
        "real",
    ),
    "mg.functions": (
        lambda x: mg.relu(mg.exp(x)) + mg.tanh(x) * mg.sigmoid(x) - mg.abs(x),
        lambda x: torch.relu(torch.exp(x)) + torch.tanh(x) * torch.sigmoid(x) - torch.abs(x),
        "real",
    ),
}


@pytest.mark.parametrize("name", UNARY)
@given(data=st.data())
def test_unary_ops(name, data, device):
    mg_fn, torch_fn, domain = UNARY[name]
    x = values(data.draw, data.draw(SHAPES), domain)
    compare_with_torch(mg_fn, torch_fn, x, device=device)


# -- reductions ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["sum", "mean", "amax"])
@given(data=st.data())
def test_reductions_over_a_dim(name, data, device):
    shape = data.draw(NONSCALAR_SHAPES)
    dim = dim_of(data.draw, shape)
    keepdim = data.draw(st.booleans())
    x = values(data.draw, shape)
    compare_with_torch(*same(lambda t: getattr(t, name)(dim, keepdim=keepdim)), x, device=device)


@pytest.mark.parametrize("name", ["sum", "mean", "amax"])
@given(data=st.data())
def test_reductions_over_dim_tuples(name, data, device):
    shape = data.draw(NONSCALAR_SHAPES)
    dims = data.draw(st.lists(st.integers(0, len(shape) - 1), min_size=1, unique=True))
    dims = tuple(d - len(shape) if data.draw(st.booleans()) else d for d in dims)
    keepdim = data.draw(st.booleans())
    x = values(data.draw, shape)
    compare_with_torch(*same(lambda t: getattr(t, name)(dims, keepdim=keepdim)), x, device=device)


@pytest.mark.parametrize("name", ["sum", "mean", "max", "min"])
@given(data=st.data())
def test_reductions_of_whole_tensor(name, data, device):
    x = values(data.draw, data.draw(SHAPES))  # ties in max/min share the gradient, as in torch
    compare_with_torch(*same(lambda t: getattr(t, name)()), x, device=device)


@given(data=st.data())
def test_var(data, device):
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=2, max_side=4))
    dim = data.draw(st.none() | st.integers(-len(shape), len(shape) - 1))
    unbiased, keepdim = data.draw(st.booleans()), data.draw(st.booleans())
    x = values(data.draw, shape)
    compare_with_torch(
        lambda t: t.var(dim, unbiased=unbiased, keepdim=keepdim),
        lambda t: t.var(dim, unbiased=unbiased, keepdim=keepdim),
        x,
        device=device,
    )


@given(data=st.data())
def test_max_and_min_over_dim_give_values_and_indices(data, device):
    shape = data.draw(NONSCALAR_SHAPES)
    dim = dim_of(data.draw, shape)
    x = values(data.draw, shape, unique=True)  # torch sends a tied max's gradient to one index
    compare_with_torch(*same(lambda t: tuple(t.max(dim))), x, device=device)
    compare_with_torch(*same(lambda t: tuple(t.min(dim, keepdim=True))), x, device=device)


# -- shape ops ---------------------------------------------------------------------------------


@given(data=st.data())
def test_reshape_and_view(data, device):
    shape = data.draw(SHAPES)
    target = data.draw(st.permutations(shape)) if shape else ()
    x = values(data.draw, shape)
    compare_with_torch(*same(lambda t: t.reshape(*target, 1)), x, device=device)
    compare_with_torch(*same(lambda t: t.view(-1)), x, device=device)


@given(data=st.data())
def test_transpose_permute_and_T(data, device):
    shape = data.draw(NONSCALAR_SHAPES)
    d0, d1 = dim_of(data.draw, shape), dim_of(data.draw, shape)
    order = data.draw(st.permutations(range(len(shape))))
    x = values(data.draw, shape)
    compare_with_torch(*same(lambda t: t.transpose(d0, d1)), x, device=device)
    compare_with_torch(*same(lambda t: t.permute(*order)), x, device=device)
    matrix = values(data.draw, data.draw(hnp.array_shapes(min_dims=2, max_dims=2)))
    compare_with_torch(*same(lambda t: t.T), matrix, device=device)


@given(data=st.data())
def test_unsqueeze_squeeze_flatten_expand(data, device):
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=3))
    dim = data.draw(st.integers(-len(shape) - 1, len(shape)))
    x = values(data.draw, shape)
    compare_with_torch(*same(lambda t: t.unsqueeze(dim)), x, device=device)
    compare_with_torch(*same(lambda t: t.squeeze()), x, device=device)
    squeezed = dim_of(data.draw, shape)
    compare_with_torch(*same(lambda t: t.squeeze(squeezed)), x, device=device)
    start = data.draw(st.integers(0, len(shape) - 1))
    compare_with_torch(*same(lambda t: t.flatten(start)), x, device=device)
    compare_with_torch(*same(lambda t: t.expand(2, *shape)), x, device=device)


# -- indexing and joining ----------------------------------------------------------------------


def _positive_steps(index) -> bool:
    items = index if isinstance(index, tuple) else (index,)
    return all(not isinstance(i, slice) or i.step is None or i.step > 0 for i in items)


@given(data=st.data())
def test_getitem_basic_indices(data, device):
    shape = data.draw(NONSCALAR_SHAPES)
    index = data.draw(hnp.basic_indices(shape, allow_newaxis=True))
    assume(_positive_steps(index))  # torch has no negative steps
    x = values(data.draw, shape)
    compare_with_torch(*same(lambda t: t[index]), x, device=device)


@given(data=st.data())
def test_getitem_integer_arrays(data, device):
    shape = data.draw(NONSCALAR_SHAPES)
    index = data.draw(hnp.integer_array_indices(shape, result_shape=hnp.array_shapes(max_side=5)))
    x = values(data.draw, shape)
    compare_with_torch(
        lambda t: t[tuple(mg.tensor(i, device=device) for i in index)],
        lambda t: t[tuple(torch.from_numpy(i) for i in index)],
        x,
        device=device,
    )


@given(data=st.data())
def test_cat_and_stack(data, device):
    shape = data.draw(NONSCALAR_SHAPES)
    dim = dim_of(data.draw, shape)
    other = list(shape)
    other[dim] = data.draw(st.integers(1, 3))
    a, b = values(data.draw, shape), values(data.draw, tuple(other))
    compare_with_torch(
        lambda s, t: mg.cat([s, t, s], dim),
        lambda s, t: torch.cat([s, t, s], dim),
        a,
        b,
        device=device,
    )
    c = values(data.draw, shape)
    stack_dim = data.draw(st.integers(-len(shape) - 1, len(shape)))
    compare_with_torch(
        lambda s, t: mg.stack([s, t], stack_dim),
        lambda s, t: torch.stack([s, t], stack_dim),
        a,
        c,
        device=device,
    )


@given(data=st.data())
def test_split_and_chunk(data, device):
    shape = data.draw(NONSCALAR_SHAPES)
    dim = dim_of(data.draw, shape)
    size = data.draw(st.integers(1, 4))
    x = values(data.draw, shape)
    compare_with_torch(*same(lambda t: t.split(size, dim)), x, device=device)
    compare_with_torch(*same(lambda t: t.chunk(size, dim)), x, device=device)


# -- matrix products ---------------------------------------------------------------------------


@given(data=st.data())
def test_matmul_batched_broadcast_and_1d(data, device):
    shape_a, shape_b = data.draw(MATMUL_PAIRS).input_shapes
    a, b = values(data.draw, shape_a), values(data.draw, shape_b)
    compare_with_torch(*same(lambda s, t: s @ t), a, b, device=device)


@given(data=st.data())
def test_linear(data, device):
    lead = data.draw(hnp.array_shapes(min_dims=1, max_dims=2, max_side=3))
    n_in, n_out = data.draw(st.integers(1, 4)), data.draw(st.integers(1, 4))
    x = values(data.draw, (*lead, n_in))
    w, b = values(data.draw, (n_out, n_in)), values(data.draw, (n_out,))
    compare_with_torch(ops.linear, TF.linear, x, w, b, device=device)
    compare_with_torch(ops.linear, TF.linear, x, w, device=device)


# -- fused activations, normalization, losses --------------------------------------------------


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@given(data=st.data())
def test_softmax_and_log_softmax(name, data, device):
    shape = data.draw(NONSCALAR_SHAPES)
    dim = dim_of(data.draw, shape)
    x = values(data.draw, shape)
    compare_with_torch(
        lambda t: getattr(ops, name)(t, dim),
        lambda t: getattr(TF, name)(t, dim),
        x,
        device=device,
    )
    compare_with_torch(*same(lambda t: getattr(t, name)(dim)), x, device=device)


@given(data=st.data())
def test_layer_norm(data, device):
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=2, max_side=4))
    n_norm = data.draw(st.integers(1, len(shape)))
    normalized = shape[len(shape) - n_norm :]
    affine = data.draw(st.booleans())
    x = values(data.draw, shape)
    if affine:
        w, b = values(data.draw, normalized), values(data.draw, normalized)
        compare_with_torch(
            lambda t, g, h: ops.layer_norm(t, normalized, g, h),
            lambda t, g, h: TF.layer_norm(t, normalized, g, h),
            x,
            w,
            b,
            device=device,
        )
    else:
        compare_with_torch(
            lambda t: ops.layer_norm(t, normalized),
            lambda t: TF.layer_norm(t, normalized),
            x,
            device=device,
        )


@given(data=st.data())
def test_cross_entropy(data, device):
    rows, classes = data.draw(st.integers(1, 5)), data.draw(st.integers(2, 5))
    extra = data.draw(hnp.array_shapes(min_dims=0, max_dims=1, max_side=3))  # (N, C, d) logits
    target_shape = (rows, *extra)
    target = data.draw(hnp.arrays(np.int64, target_shape, elements=st.integers(0, classes - 1)))
    reduction = data.draw(st.sampled_from(["mean", "sum", "none"]))
    ignored = data.draw(hnp.arrays(np.bool_, target_shape))
    ignored.flat[0] = False  # at least one counted row, or the mean is 0/0
    target = np.where(ignored, -100, target)
    x = values(data.draw, (rows, classes, *extra))
    compare_with_torch(
        lambda t: ops.cross_entropy(t, mg.tensor(target, device=device), reduction=reduction),
        lambda t: TF.cross_entropy(t, torch.from_numpy(target), reduction=reduction),
        x,
        device=device,
    )


def test_cross_entropy_with_every_row_ignored_is_nan_with_zero_gradient(device):
    """The mean over no rows is 0/0 = nan, as in PyTorch; the gradient is zero, not nan."""
    logits = np.random.default_rng(0).standard_normal((3, 4))
    target = np.full(3, -100)
    ours = mg.tensor(logits, device=device, requires_grad=True)
    loss = ops.cross_entropy(ours, mg.tensor(target, device=device))
    loss.backward()
    theirs = torch.tensor(logits, requires_grad=True)
    expected = TF.cross_entropy(theirs, torch.from_numpy(target))
    expected.backward()
    assert np.isnan(loss.item()) and np.isnan(expected.item())
    np.testing.assert_array_equal(ours.grad.numpy(), theirs.grad.numpy())


@given(data=st.data())
def test_mse_loss(data, device):
    shape = data.draw(SHAPES)
    reduction = data.draw(st.sampled_from(["mean", "sum", "none"]))
    a, b = values(data.draw, shape), values(data.draw, shape)
    compare_with_torch(
        lambda s, t: ops.mse_loss(s, t, reduction=reduction),
        lambda s, t: TF.mse_loss(s, t, reduction=reduction),
        a,
        b,
        device=device,
    )


@given(data=st.data())
def test_embedding_accumulates_repeated_indices(data, device):
    count, width = data.draw(st.integers(1, 5)), data.draw(st.integers(1, 4))
    index_shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=2, max_side=5))
    index = data.draw(hnp.arrays(np.int64, index_shape, elements=st.integers(0, count - 1)))
    weight = values(data.draw, (count, width))
    compare_with_torch(
        lambda w: ops.embedding(mg.tensor(index, device=device), w),
        lambda w: TF.embedding(torch.from_numpy(index), w),
        weight,
        device=device,
    )


@given(data=st.data())
def test_dropout_keeps_or_zeroes_and_scales(data, device):
    """Masks come from different generators, so check the law, not torch's draw."""
    p = data.draw(st.sampled_from([0.1, 0.5, 0.9]))
    x = mg.tensor(values(data.draw, (4, 8), "away_from_zero"), dtype=mg.float64, device=device)
    x.requires_grad_()
    y = ops.dropout(x, p, training=True)
    y.backward(mg.ones_like(y))
    kept = y.numpy() != 0
    np.testing.assert_allclose(y.numpy()[kept], x.numpy()[kept] / (1 - p), rtol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), kept / (1 - p), rtol=1e-12)


# -- edge shapes: 0-d tensors, empty tensors, a variance over one element ---------------------

EDGE_CASES = {
    "softmax_0d": (lambda x: ops.softmax(x, 0), lambda x: TF.softmax(x, 0), [()]),
    "log_softmax_0d": (lambda x: ops.log_softmax(x, -1), lambda x: TF.log_softmax(x, -1), [()]),
    "sum_0d_dim0": (*same(lambda x: x.sum(0)), [()]),
    "mean_0d_keepdim": (*same(lambda x: x.mean(-1, keepdim=True)), [()]),
    "amax_0d": (*same(lambda x: x.amax(0)), [()]),
    "unsqueeze_0d": (*same(lambda x: x.unsqueeze(0)), [()]),
    "getitem_none_0d": (*same(lambda x: x[None, ...]), [()]),
    "var_of_one_element_is_nan": (*same(lambda x: x.var(0)), [(1, 3)]),
    "add_empty": (*same(lambda a, b: a + b), [(0, 3), (3,)]),
    "sum_empty": (*same(lambda x: x.sum(0)), [(0, 3)]),
    "amax_empty_rows": (*same(lambda x: x.amax(1)), [(0, 3)]),
    "matmul_empty": (*same(lambda a, b: a @ b), [(0, 3), (3, 2)]),
    "matmul_inner_zero": (*same(lambda a, b: a @ b), [(2, 0), (0, 2)]),
    "softmax_empty": (lambda x: ops.softmax(x, -1), lambda x: TF.softmax(x, -1), [(0, 3)]),
    "layer_norm_empty": (
        lambda x: ops.layer_norm(x, 3),
        lambda x: TF.layer_norm(x, (3,)),
        [(0, 3)],
    ),
    "cat_empty": (
        lambda a, b: mg.cat([a, b]),
        lambda a, b: torch.cat([a, b]),
        [(0, 3), (2, 3)],
    ),
    "getitem_empty_slice": (*same(lambda x: x[2:2]), [(3, 3)]),
    "split_larger_than_dim": (*same(lambda x: x.split(5)), [(3, 2)]),
    "chunk_more_than_rows": (*same(lambda x: x.chunk(5)), [(3, 2)]),
    "getitem_bool_tensor": (*same(lambda x: x[x > 0]), [(3, 4)]),
    "masked_fill_tensor_value": (
        *same(lambda x, v: x.masked_fill(x > 0, v)),
        [(2, 3), ()],
    ),
}


@pytest.mark.parametrize("name", EDGE_CASES)
def test_edge_shapes(name, device):
    mg_fn, torch_fn, shapes = EDGE_CASES[name]
    with warnings.catch_warnings():  # NumPy and torch both warn about var of one element
        warnings.simplefilter("ignore", RuntimeWarning)
        warnings.simplefilter("ignore", UserWarning)
        compare_with_torch(mg_fn, torch_fn, *shapes, device=device)


# -- float32: the same ops, at float32 precision -----------------------------------------------

FLOAT32_CASES = {
    **{
        name: (mg_fn, torch_fn, domain, [(3, 4), (4,)])
        for name, (mg_fn, torch_fn, domain) in BINARY.items()
    },
    **{
        name: (mg_fn, torch_fn, domain, [(3, 4)])
        for name, (mg_fn, torch_fn, domain) in UNARY.items()
    },
    "matmul": (*same(lambda a, b: a @ b), "real", [(2, 3, 4), (4, 5)]),
    "linear": (ops.linear, TF.linear, "real", [(2, 3, 4), (5, 4), (5,)]),
    "softmax": (lambda x: ops.softmax(x, -1), lambda x: TF.softmax(x, -1), "real", [(3, 5)]),
    "log_softmax": (
        lambda x: ops.log_softmax(x, 0),
        lambda x: TF.log_softmax(x, 0),
        "real",
        [(3, 5)],
    ),
    "layer_norm": (
        lambda x, w, b: ops.layer_norm(x, (5,), w, b),
        lambda x, w, b: TF.layer_norm(x, (5,), w, b),
        "real",
        [(2, 3, 5), (5,), (5,)],
    ),
    "cross_entropy": (
        lambda x: ops.cross_entropy(x, mg.tensor([0, 3, 1], device=x.device)),
        lambda x: TF.cross_entropy(x, torch.tensor([0, 3, 1])),
        "real",
        [(3, 5)],
    ),
    "sum_mean_var_amax": (
        *same(
            lambda x: x.sum(0) + x.mean(-1, keepdim=True) + x.var(1, keepdim=True) + x.amax(1, True)
        ),
        "real",
        [(3, 4)],
    ),
}


@pytest.mark.parametrize("name", FLOAT32_CASES)
def test_float32(name, device):
    mg_fn, torch_fn, domain, shapes = FLOAT32_CASES[name]
    compare_with_torch(mg_fn, torch_fn, *shapes, dtype=np.float32, domain=domain, device=device)
