"""PyTorch's tensor functions that teaching programs reach for, each beside torch's own:
elementwise math (sin, cos, log2, square, sign, floor ...), maximum / minimum, reductions
with ``keepdim`` / ``keepdims``, max / min / topk / sort with indices, cumsum, norm, gather,
flip / roll / repeat, F.pad, F.one_hot, mm / bmm / einsum, histogram.

Each differentiable one is compared with PyTorch (values and gradients) and checked with
float64 finite differences, to second order where its backward is itself differentiable.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import check_gradients, compare_with_torch

import minigrad as mg
import minigrad.nn.functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional

# -- elementwise functions of one tensor -----------------------------------------------------

UNARY = {  # name: domain of the inputs
    "sin": "real",
    "cos": "real",
    "log2": "positive",
    "log10": "positive",
    "log1p": "positive",
    "expm1": "real",
    "rsqrt": "positive",
    "reciprocal": "away_from_zero",
    "square": "real",
}


@pytest.mark.parametrize("name", UNARY)
@pytest.mark.parametrize("form", ["function", "method"])
def test_unary_matches_torch(name, form, device):
    if form == "function":
        ours = getattr(mg, name)
    else:
        ours = lambda t: getattr(t, name)()  # noqa: E731
    compare_with_torch(ours, getattr(torch, name), (3, 4), domain=UNARY[name], device=device)
    compare_with_torch(
        ours, getattr(torch, name), (2, 5), domain=UNARY[name], dtype=np.float32, device=device
    )


@pytest.mark.parametrize("name", UNARY)
def test_unary_gradients(name, device):
    check_gradients(getattr(mg, name), (2, 3), domain=UNARY[name], device=device, second_order=True)


STEPS = {
    "sign": (mg.sign, torch.sign),
    "floor": (mg.floor, torch.floor),
    "ceil": (mg.ceil, torch.ceil),
    "trunc": (mg.trunc, torch.trunc),
    "round": (mg.round, torch.round),
    "round(decimals=1)": (lambda t: t.round(decimals=1), lambda t: torch.round(t, decimals=1)),
    "clamp_min": (lambda t: t.clamp_min(0.1), lambda t: t.clamp_min(0.1)),
    "clamp_max": (lambda t: mg.clamp_max(t, 0.1), lambda t: torch.clamp_max(t, 0.1)),
}


@pytest.mark.parametrize("name", STEPS)
def test_step_functions_match_torch_and_have_zero_gradient(name, device):
    ours, theirs = STEPS[name]
    values = np.array([[-2.5, -1.5, -0.5, 0.0], [0.5, 1.5, 2.5, 1.25], [-1.26, 3.7, -3.2, 0.04]])
    compare_with_torch(lambda t: ours(t) * t, lambda t: theirs(t) * t, values, device=device)
    x = mg.tensor(values, dtype=mg.float64, device=device, requires_grad=True)
    y = ours(x)
    assert y.requires_grad  # in the graph, as in PyTorch, with a zero (or 0/1) gradient
    y.sum().backward()
    leaf = torch.tensor(values, requires_grad=True)
    theirs(leaf).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), leaf.grad.numpy())


def test_step_functions_keep_integer_dtypes():
    ints = mg.tensor([-2, 0, 3])
    for name in ("floor", "ceil", "round", "trunc", "sign", "square"):
        ours, theirs = getattr(mg, name)(ints), getattr(torch, name)(torch.tensor([-2, 0, 3]))
        assert ours.dtype == np.int64 and ours.tolist() == theirs.tolist(), name
    assert mg.sign(mg.tensor([True, False])).tolist() == [True, False]


@pytest.mark.parametrize("name", ["sin", "exp", "log2", "sqrt", "sigmoid", "tanh"])
def test_integer_input_becomes_float32(name):
    ours = getattr(mg, name)(mg.tensor([1, 2, 3]))
    theirs = getattr(torch, name)(torch.tensor([1, 2, 3]))
    assert ours.dtype == np.float32 and str(theirs.dtype) == "torch.float32"
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-6)


def test_pow_function_takes_numbers_on_either_side(device):
    compare_with_torch(lambda t: mg.pow(t, 3), lambda t: torch.pow(t, 3), (3, 4), device=device)
    compare_with_torch(lambda t: mg.pow(2.0, t), lambda t: torch.pow(2.0, t), (3,), device=device)
    compare_with_torch(
        mg.pow, torch.pow, (2, 3), (3,), domain="positive", device=device
    )  # both tensors, broadcasting
    compare_with_torch(lambda t: t.pow(2), lambda t: t.pow(2), (4,), device=device)
    with pytest.raises(TypeError, match="pow"):
        mg.pow(2, 3)


# -- maximum, minimum ---------------------------------------------------------------------------

PAIRS = {
    "maximum": (mg.maximum, torch.maximum),
    "minimum": (mg.minimum, torch.minimum),
    "max(a, b)": (mg.max, torch.max),
    "min(a, b)": (mg.min, torch.min),
    "a.maximum(b)": (lambda a, b: a.maximum(b), lambda a, b: a.maximum(b)),
    "a.min(b)": (lambda a, b: a.min(b), lambda a, b: a.min(b)),
}


@pytest.mark.parametrize("name", PAIRS)
def test_maximum_minimum_match_torch(name, device):
    ours, theirs = PAIRS[name]
    compare_with_torch(ours, theirs, (3, 4), (4,), device=device)
    compare_with_torch(ours, theirs, (2, 1, 3), (4, 1), dtype=np.float32, device=device)
    # ties: each side gets half the gradient, as in PyTorch
    a, b = np.array([[1.0, 2.0, 3.0], [0.0, -1.0, 5.0]]), np.array([1.0, 0.0, 3.0])
    compare_with_torch(ours, theirs, a, b, device=device)


def test_maximum_gradients(device):
    check_gradients(mg.maximum, (3, 4), (4,), device=device, second_order=True)
    check_gradients(mg.minimum, (2, 3), (2, 3), device=device, second_order=True)


def test_maximum_needs_tensors():
    with pytest.raises(TypeError, match="maximum.*other.*Tensor"):
        mg.maximum(mg.ones(2), 1.0)


# -- reductions: keepdim and keepdims -----------------------------------------------------------

REDUCTIONS = {  # name: (ours(t, **kw), torch's(t, **kw))
    "sum": (mg.sum, torch.sum),
    "mean": (mg.mean, torch.mean),
    "var": (mg.var, torch.var),
    "std": (mg.std, torch.std),
    "amax": (mg.amax, torch.amax),
    "amin": (mg.amin, torch.amin),
    "logsumexp": (mg.logsumexp, torch.logsumexp),
    "max.values": (lambda t, **kw: mg.max(t, **kw).values, lambda t, **kw: t.max(**kw).values),
    "min.values": (lambda t, **kw: t.min(**kw)[0], lambda t, **kw: t.min(**kw)[0]),
    "t.sum": (lambda t, **kw: t.sum(**kw), lambda t, **kw: t.sum(**kw)),
    "t.std": (lambda t, **kw: t.std(**kw), lambda t, **kw: t.std(**kw)),
    "t.amax": (lambda t, **kw: t.amax(**kw), lambda t, **kw: t.amax(**kw)),
}


@pytest.mark.parametrize("name", REDUCTIONS)
@pytest.mark.parametrize("keyword", ["keepdim", "keepdims"])
@pytest.mark.parametrize("keep", [True, False])
def test_reductions_take_keepdim_and_keepdims(name, keyword, keep, device):
    ours, theirs = REDUCTIONS[name]
    options = {"dim": 1, keyword: keep}
    compare_with_torch(
        lambda t: ours(t, **options), lambda t: theirs(t, **options), (3, 4, 2), device=device
    )


@pytest.mark.parametrize("name", ["all", "any"])
@pytest.mark.parametrize("form", ["function", "method"])
def test_all_any_match_torch(name, form, device):
    values = np.array([[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]) > 0.5
    ours = getattr(mg, name) if form == "function" else getattr(mg.Tensor, name)
    theirs = getattr(torch, name)
    for options in ({}, {"dim": 0}, {"dim": 1, "keepdim": True}, {"dim": -1, "keepdims": True}):
        result = ours(mg.tensor(values, device=device), **options)
        expected = theirs(torch.tensor(values), **options)
        assert result.dtype == np.bool_ and result.shape == tuple(expected.shape)
        assert result.tolist() == expected.tolist(), options


def test_sum_of_bools_and_mean_of_integers_as_torch():
    flags = mg.tensor([True, False, True])
    assert mg.sum(flags).dtype == np.int64 and mg.sum(flags).item() == 2
    assert mg.sum(mg.tensor([1, 2]), dtype=mg.float64).dtype == np.float64
    with pytest.raises(RuntimeError, match="mean.*floating"):
        mg.mean(mg.tensor([1, 2]))
    assert mg.tensor([1, 2]).float().mean().item() == 1.5


def test_reduction_dim_out_of_range_is_an_index_error():
    for reduce in (mg.sum, mg.amax, mg.argmax, mg.cumsum, mg.all):
        with pytest.raises(IndexError, match="out of range"):
            reduce(mg.ones(2, 3), 5)


# -- max / min with indices, argmax, topk, sort ---------------------------------------------------


@pytest.mark.parametrize("name", ["max", "min"])
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_max_min_along_dim_match_torch(name, dim, keepdim, device):
    def ours(t):
        return getattr(t, name)(dim, keepdim)

    def theirs(t):
        return getattr(torch, name)(t, dim, keepdim)

    compare_with_torch(ours, theirs, (3, 4), device=device)
    result = ours(mg.randn(3, 4, device=device))
    assert result.values is result[0] and result.indices is result[1]


def test_max_along_dim_sends_the_gradient_to_one_entry_as_torch(device):
    ties = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]])
    compare_with_torch(lambda t: t.max(1).values, lambda t: t.max(1).values, ties, device=device)
    compare_with_torch(lambda t: mg.min(t, 0)[0], lambda t: torch.min(t, 0)[0], ties, device=device)
    # the whole tensor's max shares it between ties (as amax)
    compare_with_torch(mg.max, torch.max, ties, device=device)
    compare_with_torch(lambda t: t.min(), lambda t: t.min(), ties, device=device)


def test_max_along_dim_gradients(device):
    check_gradients(lambda t: t.max(1).values, (3, 4), device=device, second_order=True)
    check_gradients(lambda t: mg.min(t, 0, keepdim=True)[0], (3, 4), device=device)


@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_argmax_argmin_match_torch(name, device):
    values = np.random.default_rng(3).standard_normal((3, 4, 5))
    for options in ({}, {"dim": 1}, {"dim": -1, "keepdim": True}, {"keepdim": True}):
        ours = getattr(mg, name)(mg.tensor(values, device=device), **options)
        theirs = getattr(torch, name)(torch.tensor(values), **options)
        assert ours.dtype == np.int64 and ours.shape == tuple(theirs.shape), options
        assert ours.tolist() == theirs.tolist(), options


def test_reducing_empty_tensors_raises_as_torch():
    with pytest.raises(RuntimeError, match="numel"):
        mg.max(mg.zeros(0))
    with pytest.raises(IndexError, match="non-zero size"):
        mg.zeros(2, 0).max(1)
    with pytest.raises(RuntimeError):
        mg.argmax(mg.zeros(0))


TOPK_SORT = {
    "topk": (lambda t: t.topk(3), lambda t: t.topk(3)),
    "topk smallest dim 0": (
        lambda t: mg.topk(t, 2, dim=0, largest=False),
        lambda t: torch.topk(t, 2, dim=0, largest=False),
    ),
    "sort": (lambda t: t.sort(), lambda t: t.sort()),
    "sort descending": (
        lambda t: mg.sort(t, dim=0, descending=True),
        lambda t: torch.sort(t, dim=0, descending=True),
    ),
    "argsort": (lambda t: mg.argsort(t, dim=1), lambda t: torch.argsort(t, dim=1)),
    "argsort descending": (
        lambda t: t.argsort(descending=True),
        lambda t: t.argsort(descending=True),
    ),
}


@pytest.mark.parametrize("name", TOPK_SORT)
def test_topk_and_sort_match_torch(name, device):
    ours, theirs = TOPK_SORT[name]
    compare_with_torch(ours, theirs, (4, 5), device=device)
    compare_with_torch(ours, theirs, (3, 6), dtype=np.float32, device=device)


def test_topk_values_and_named_fields(device):
    x = mg.tensor([[1.0, 5.0, 3.0, 4.0]], device=device)
    values, indices = x.topk(2)
    assert values.tolist() == [[5.0, 4.0]] and indices.tolist() == [[1, 3]]
    assert x.topk(2).values.tolist() == [[5.0, 4.0]] and x.topk(2).indices.dtype == np.int64
    with pytest.raises(RuntimeError, match="k out of range"):
        x.topk(5)
    check_gradients(lambda t: t.topk(2, dim=0).values, (4, 3), device=device, second_order=True)
    check_gradients(lambda t: mg.sort(t, descending=True)[0], (3, 4), device=device)


def test_stable_sort_keeps_ties_in_order_as_torch():
    values = np.array([2, 1, 2, 0, 1, 2, float("nan"), 1])
    for descending in (False, True):
        ours = mg.sort(mg.tensor(values), descending=descending, stable=True)
        theirs = torch.sort(torch.tensor(values), descending=descending, stable=True)
        assert ours.indices.tolist() == theirs.indices.tolist(), descending
        np.testing.assert_array_equal(ours.values.numpy(), theirs.values.numpy())
    ints = mg.tensor([3, 1, 3, 2])
    assert mg.sort(ints, descending=True).values.tolist() == [3, 3, 2, 1]


def test_gather_matches_torch(device):
    index = np.array([[0, 2, 2], [1, 1, 0]])
    compare_with_torch(
        lambda t, i: mg.gather(t, 1, i),
        lambda t, i: torch.gather(t, 1, i),
        (2, 4),
        index,
        device=device,
    )  # index 2 twice in row 0: its gradient adds up
    compare_with_torch(
        lambda t, i: t.gather(0, i), lambda t, i: t.gather(0, i), (3, 4), index, device=device
    )  # an index smaller than the input in the other dim
    compare_with_torch(
        lambda t, i: mg.take_along_dim(t, i, 1),
        lambda t, i: torch.take_along_dim(t, i, 1),
        (2, 4),
        index,
        device=device,
    )
    check_gradients(lambda t, i: t.gather(1, i), (2, 4), index, device=device, second_order=True)
    with pytest.raises(RuntimeError, match="out of bounds"):
        mg.ones(2, 3).gather(1, mg.tensor([[3]]))
    with pytest.raises(RuntimeError, match="int64"):
        mg.ones(2, 3).gather(1, mg.tensor([[0.0]]))


# -- cumsum, norm ---------------------------------------------------------------------------------


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cumsum_matches_torch(dim, device):
    compare_with_torch(lambda t: mg.cumsum(t, dim), lambda t: torch.cumsum(t, dim), (3, 4),
                       device=device)  # fmt: skip
    compare_with_torch(lambda t: t.cumsum(dim=dim), lambda t: t.cumsum(dim=dim), (2, 3, 2),
                       dtype=np.float32, device=device)  # fmt: skip
    check_gradients(lambda t: t.cumsum(dim), (3, 4), device=device, second_order=True)


def test_cumsum_of_integers_and_bools_is_int64():
    assert mg.cumsum(mg.tensor([True, True, False]), 0).tolist() == [1, 2, 2]
    assert mg.cumsum(mg.tensor([1, 2, 3]).to(mg.int32), 0).dtype == np.int64


NORMS = [
    {},
    {"p": 2, "dim": 1},
    {"p": "fro", "dim": (0, 1)},
    {"p": 1, "dim": 0, "keepdim": True},
    {"p": 3, "dim": -1},
    {"p": float("inf"), "dim": 1},
]


@pytest.mark.parametrize("options", NORMS, ids=str)
def test_norm_matches_torch(options, device):
    compare_with_torch(lambda t: t.norm(**options), lambda t: t.norm(**options), (3, 4),
                       domain="away_from_zero", device=device)  # fmt: skip
    compare_with_torch(lambda t: mg.norm(t, **options), lambda t: torch.norm(t, **options),
                       (2, 5), domain="away_from_zero", device=device)  # fmt: skip
    check_gradients(lambda t: t.norm(**options), (3, 4), domain="away_from_zero",
                    device=device, second_order=options.get("p") != float("inf"))  # fmt: skip


def test_norm_of_zeros_has_zero_gradient_as_torch(device):
    zeros = np.zeros((2, 3))
    compare_with_torch(lambda t: t.norm(), lambda t: t.norm(), zeros, device=device)
    compare_with_torch(lambda t: t.norm(dim=1), lambda t: t.norm(dim=1), zeros, device=device)


# -- shape: flip, roll, repeat, expand_as, view_as ... ----------------------------------------

SHAPES = {
    "flip": (lambda t: mg.flip(t, (0, 2)), lambda t: torch.flip(t, (0, 2))),
    "t.flip(int)": (lambda t: t.flip(-1), lambda t: t.flip(-1)),
    "roll": (lambda t: mg.roll(t, 2, 1), lambda t: torch.roll(t, 2, 1)),
    "roll dims": (lambda t: t.roll((1, -1), (0, 2)), lambda t: t.roll((1, -1), (0, 2))),
    "roll flat": (lambda t: t.roll(5), lambda t: t.roll(5)),
    "repeat": (lambda t: t.repeat(2, 1, 3), lambda t: t.repeat(2, 1, 3)),
    "repeat new dims": (lambda t: t.repeat((2, 1, 2, 1)), lambda t: t.repeat((2, 1, 2, 1))),
    "expand_as": (
        lambda t: t[:, :1].expand_as(mg.zeros(2, 5, 4)),
        lambda t: t[:, :1].expand_as(torch.zeros(2, 5, 4)),
    ),
    "view_as": (lambda t: t.view_as(mg.zeros(4, 6)), lambda t: t.view_as(torch.zeros(4, 6))),
    "flatten": (lambda t: mg.flatten(t, 1), lambda t: torch.flatten(t, 1)),
    "unbind": (lambda t: t.unbind(1), lambda t: t.unbind(1)),
    "narrow": (lambda t: t.narrow(2, 1, 2), lambda t: t.narrow(2, 1, 2)),
    "t()": (lambda t: t[0].t(), lambda t: t[0].t()),
    "masked_select": (
        lambda t: t.masked_select(t > 0),
        lambda t: t.masked_select(t > 0),
    ),
    "reshape/transpose/permute": (
        lambda t: mg.permute(mg.transpose(mg.reshape(t, (4, 6)), 0, 1), (1, 0)),
        lambda t: torch.permute(torch.transpose(torch.reshape(t, (4, 6)), 0, 1), (1, 0)),
    ),
}


@pytest.mark.parametrize("name", SHAPES)
def test_shape_ops_match_torch(name, device):
    ours, theirs = SHAPES[name]
    compare_with_torch(ours, theirs, (2, 3, 4), device=device)


@pytest.mark.parametrize("name", ["flip", "roll dims", "roll flat", "repeat", "repeat new dims"])
def test_shape_op_gradients(name, device):
    ours, _ = SHAPES[name]
    check_gradients(ours, (2, 3, 4), device=device, second_order=True)


def test_shape_op_errors():
    with pytest.raises(RuntimeError, match="repeat"):
        mg.ones(2, 3).repeat(2)
    with pytest.raises(RuntimeError, match="shifts and dimensions must align"):
        mg.ones(2, 3).roll((1, 2), 0)
    with pytest.raises(IndexError, match="flip"):
        mg.ones(2, 3).flip(2)


# -- F.pad ----------------------------------------------------------------------------------------

PADS = {
    "constant": ((1, 2), {}),
    "constant 2 dims, value": ((1, 0, 2, 3), {"value": -1.5}),
    "constant 3 dims": ((0, 1, 1, 0, 2, 1), {}),
    "constant negative": ((1, -1, -1, 2), {"value": 5.0}),
    "reflect": ((2, 1), {"mode": "reflect"}),
    "reflect 2 dims": ((1, 2, 2, 0), {"mode": "reflect"}),
    "replicate": ((3, 1, 1, 2), {"mode": "replicate"}),
    "circular": ((2, 4), {"mode": "circular"}),
    "circular 2 dims": ((1, 1, 2, 0), {"mode": "circular"}),
    "reflect negative": ((-1, 2), {"mode": "reflect"}),
}


@pytest.mark.parametrize("name", PADS)
def test_pad_matches_torch(name, device):
    pad, options = PADS[name]
    compare_with_torch(
        lambda t: F.pad(t, pad, **options),
        lambda t: TF.pad(t, pad, **options),
        (2, 3, 4),
        device=device,
    )
    check_gradients(lambda t: F.pad(t, pad, **options), (2, 3, 4), device=device,
                    second_order=True)  # fmt: skip


def test_pad_of_integers_and_4d_inputs():
    ints = mg.arange(3)
    assert (
        F.pad(ints, (1, 1), value=2.5).tolist()
        == TF.pad(torch.arange(3), (1, 1), value=2.5).tolist()
    )
    compare_with_torch(
        lambda t: F.pad(t, (1, 1, 2, 2), mode="reflect"),
        lambda t: TF.pad(t, (1, 1, 2, 2), mode="reflect"),
        (1, 2, 3, 4),
    )


@pytest.mark.parametrize(
    "pad, options, error, match",
    [
        ((1,), {}, RuntimeError, "divisible by 2"),
        ((1, 1) * 4, {}, RuntimeError, "less than or equal to two times"),
        ((3, 0), {"mode": "reflect"}, RuntimeError, "should be less than"),
        ((5, 0), {"mode": "circular"}, RuntimeError, "wrapping around more than once"),
        ((1, 1), {"mode": "wrong"}, NotImplementedError, "Unrecognised padding mode"),
        ((1, 1), {"mode": "reflect", "value": 2.0}, RuntimeError, "doesn't take in value"),
        ((1,) * 6, {"mode": "reflect"}, NotImplementedError, "not supported for 3D"),
        ((1.5, 1), {}, TypeError, "tuple of ints"),
    ],
)
def test_pad_errors_as_torch(pad, options, error, match):
    x = mg.zeros(1, 2, 3)
    with pytest.raises(error, match=match):
        F.pad(x, pad, **options)
    with pytest.raises(error):
        TF.pad(torch.zeros(1, 2, 3), pad, **options)


# -- F.one_hot, histogram, bincount -----------------------------------------------------------


def test_one_hot_matches_torch(device):
    classes = [[0, 2], [3, 1]]
    for num_classes in (-1, 5):
        ours = F.one_hot(mg.tensor(classes, device=device), num_classes)
        theirs = TF.one_hot(torch.tensor(classes), num_classes)
        assert ours.dtype == np.int64 and ours.tolist() == theirs.tolist()
    assert F.one_hot(mg.tensor([], dtype=mg.int64), 3).shape == (0, 3)


@pytest.mark.parametrize(
    "classes, num_classes, match",
    [
        ([0, -1], -1, "non-negative"),
        ([0, 3], 3, "smaller than num_classes"),
        ([0.0, 1.0], -1, "LongTensor"),
        ([], -1, "empty tensor"),
    ],
)
def test_one_hot_errors_as_torch(classes, num_classes, match):
    dtype = mg.float32 if classes and isinstance(classes[0], float) else mg.int64
    with pytest.raises(RuntimeError, match=match):
        F.one_hot(mg.tensor(classes, dtype=dtype), num_classes)
    with pytest.raises(RuntimeError, match=match):
        TF.one_hot(torch.tensor(classes, dtype=getattr(torch, np.dtype(dtype).name)), num_classes)


HISTOGRAMS = [
    ((5,), {}),
    ((4,), {"range": (-1.0, 1.0)}),
    ((3,), {"density": True}),
    ((6,), {"weight": True}),
    ((6,), {"weight": True, "density": True}),
]


@pytest.mark.parametrize("bins, options", HISTOGRAMS, ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_histogram_matches_torch(bins, options, dtype):
    rng = np.random.default_rng(0)
    values = rng.standard_normal((4, 10)).astype(dtype)
    weight = rng.random((4, 10)).astype(dtype)
    ours_kw, theirs_kw = dict(options), dict(options)
    if options.get("weight"):
        ours_kw["weight"], theirs_kw["weight"] = (
            mg.tensor(weight, dtype=dtype),
            torch.tensor(weight),
        )
    ours = mg.histogram(mg.tensor(values, dtype=dtype), *bins, **ours_kw)
    theirs = torch.histogram(torch.tensor(values), *bins, **theirs_kw)
    assert ours.hist.dtype == dtype and ours.bin_edges.dtype == dtype
    np.testing.assert_allclose(ours.hist.numpy(), theirs.hist.numpy(), rtol=1e-5)
    np.testing.assert_allclose(ours[1].numpy(), theirs[1].numpy(), rtol=1e-5, atol=1e-6)


def test_histogram_edges_histc_and_bincount_match_torch():
    values = [1.0, 2.0, 1.0, 5.0, 2.5]
    edges = [0.0, 1.5, 3.0]
    ours = mg.histogram(mg.tensor(values), mg.tensor(edges))
    theirs = torch.histogram(torch.tensor(values), torch.tensor(edges))
    assert ours.hist.tolist() == theirs.hist.tolist()
    same_value = mg.histogram(mg.tensor([1.0, 1.0]), 2)
    assert same_value.bin_edges.tolist() == torch.histogram(torch.tensor([1.0, 1.0]), 2)[1].tolist()
    for options in ({"bins": 4}, {"bins": 4, "min": 0, "max": 3}, {"bins": 2, "min": 1, "max": 1}):
        assert (
            mg.histc(mg.tensor(values), **options).tolist()
            == torch.histc(torch.tensor(values), **options).tolist()
        ), options
    assert mg.histc(mg.tensor([1.0, 1.0, 1.0]), 2).tolist() == [0.0, 3.0]
    with pytest.raises(RuntimeError, match="max must be larger than min"):
        mg.histc(mg.tensor(values), 2, min=3, max=1)
    with pytest.raises(NotImplementedError):
        mg.histogram(mg.tensor([1, 2]), 2)
    ints = [0, 2, 2, 5]
    assert mg.bincount(mg.tensor(ints)).tolist() == torch.bincount(torch.tensor(ints)).tolist()
    weighted = mg.bincount(mg.tensor(ints), weights=mg.tensor([1.0, 2.0, 3.0, 4.0]), minlength=8)
    expected = torch.bincount(torch.tensor(ints), torch.tensor([1.0, 2.0, 3.0, 4.0]), 8)
    assert weighted.dtype == np.float32 and weighted.tolist() == expected.tolist()
    with pytest.raises(RuntimeError, match="non-negative"):
        mg.bincount(mg.tensor([0, -1]))


# -- mm, bmm, mv, dot, outer ----------------------------------------------------------------------

PRODUCTS = {
    "mm": (mg.mm, torch.mm, [(2, 3), (3, 4)]),
    "t.mm": (lambda a, b: a.mm(b), lambda a, b: a.mm(b), [(2, 3), (3, 4)]),
    "bmm": (mg.bmm, torch.bmm, [(2, 3, 4), (2, 4, 5)]),
    "t.bmm": (lambda a, b: a.bmm(b), lambda a, b: a.bmm(b), [(3, 2, 2), (3, 2, 4)]),
    "mv": (mg.mv, torch.mv, [(2, 3), (3,)]),
    "dot": (mg.dot, torch.dot, [(4,), (4,)]),
    "outer": (mg.outer, torch.outer, [(3,), (4,)]),
}


@pytest.mark.parametrize("name", PRODUCTS)
def test_products_match_torch(name, device):
    ours, theirs, shapes = PRODUCTS[name]
    compare_with_torch(ours, theirs, *shapes, device=device)
    check_gradients(ours, *shapes, device=device, second_order=True)


@pytest.mark.parametrize(
    "op, shapes, match",
    [
        ("bmm", [(2, 3, 4), (2, 5, 6)], r"batch2 tensor to be: \[2, 4\] but got: \[2, 5\]"),
        ("bmm", [(2, 3, 4), (3, 4, 6)], r"to be: \[2, 4\] but got: \[3, 4\]"),
        ("bmm", [(3, 4), (3, 4, 6)], "batch1 must be a 3D tensor"),
        ("mm", [(2, 3), (4, 5)], r"cannot be multiplied \(2x3 and 4x5\)"),
        ("mm", [(2, 3, 1), (4, 5)], "must be a matrix"),
        ("dot", [(2, 3), (3,)], "1D tensors expected"),
        ("dot", [(3,), (4,)], "inconsistent tensor size"),
    ],
)
def test_product_shape_errors_as_torch(op, shapes, match):
    with pytest.raises(RuntimeError, match=match):
        getattr(mg, op)(*[mg.ones(*s) for s in shapes])
    with pytest.raises(RuntimeError):
        getattr(torch, op)(*[torch.ones(*s) for s in shapes])


# -- einsum ---------------------------------------------------------------------------------------

EINSUMS = {
    "ij,jk->ik": [(2, 3), (3, 4)],
    "bij,bjk->bik": [(2, 3, 4), (2, 4, 2)],
    "bhqd,bhkd->bhqk": [(2, 2, 3, 4), (2, 2, 5, 4)],
    "ij->ji": [(2, 3)],
    "ij->": [(2, 3)],
    "ij->j": [(2, 3)],
    "ii->i": [(3, 3)],
    "ii": [(3, 3)],
    "iij->j": [(2, 2, 3)],
    "i,j->ij": [(3,), (4,)],
    "i,i": [(4,), (4,)],
    "ij,jk": [(2, 3), (3, 4)],
    "ba": [(2, 3)],
    "ij,ij->i": [(2, 3), (1, 3)],
    "...ij,...jk->...ik": [(2, 1, 2, 3), (5, 3, 4)],
    "...ij->...ji": [(2, 3, 4)],
    "...ij,...jk": [(3, 2, 3), (3, 4)],
    "b...d,bd->b...": [(2, 3, 4), (2, 4)],
    "ij,jk,kl->il": [(2, 3), (3, 4), (4, 2)],
    "ab, b c -> a": [(2, 3), (3, 4)],
    "Ab,bC->AC": [(2, 3), (3, 2)],
    "i->...": [(3,)],
}


@pytest.mark.parametrize("equation", EINSUMS)
def test_einsum_matches_torch(equation, device):
    shapes = EINSUMS[equation]
    compare_with_torch(
        lambda *ts: mg.einsum(equation, *ts),
        lambda *ts: torch.einsum(equation, *ts),
        *shapes,
        device=device,
    )


EINSUM_GRADIENTS = ["bij,bjk->bik", "ii->i", "iij->j", "ij,ij->i", "...ij,...jk->...ik",
                    "b...d,bd->b...", "ij,jk,kl->il"]  # fmt: skip


@pytest.mark.parametrize("equation", EINSUM_GRADIENTS)
def test_einsum_gradients(equation, device):
    check_gradients(lambda *ts: mg.einsum(equation, *ts), *EINSUMS[equation], device=device,
                    second_order=True)  # fmt: skip


def test_einsum_takes_operands_as_one_list_and_keeps_float32(device):
    a, b = mg.randn(2, 3, device=device), mg.randn(3, device=device)
    result = mg.einsum("ij,j->i", [a, b])
    assert result.dtype == np.float32 and result.shape == (2,)
    np.testing.assert_allclose(result.numpy(), (a @ b).numpy(), rtol=1e-5)


@pytest.mark.parametrize(
    "equation, shapes, match",
    [
        (
            "ij,jk",
            [(2, 3), (4, 4)],
            "subscript j has size 4 for operand 1 which does not broadcast",
        ),
        ("ij", [(3, 3, 3)], r"number of subscripts in the equation \(2\) does not match"),
        ("ii->i", [(2, 3)], "subscript i is repeated for operand 0 but the sizes don't match"),
        ("ij->k", [(2, 3)], "output subscript k does not appear"),
        ("ij->jj", [(3, 3)], "appears more than once in the output"),
        ("ij,jk", [(2, 3)], "fewer operands"),
        ("ij", [(3, 3), (3,)], "more operands"),
        ("i1", [(3, 3)], "subscripts must be in"),
    ],
)
def test_einsum_errors_as_torch(equation, shapes, match):
    with pytest.raises(RuntimeError, match=match):
        mg.einsum(equation, *[mg.ones(*s) for s in shapes])
    with pytest.raises(RuntimeError, match=match):
        torch.einsum(equation, *[torch.ones(*s) for s in shapes])


# -- small conveniences of torch.Tensor ---------------------------------------------------------


def test_new_tensors_take_dtype_and_device_from_self(device):
    x = mg.ones(2, dtype=mg.float64, device=device)
    for ours, theirs in [
        (x.new_zeros(2, 3), torch.zeros(2, 3, dtype=torch.float64)),
        (x.new_ones((3,)), torch.ones(3, dtype=torch.float64)),
        (x.new_full((2,), 7.0), torch.full((2,), 7.0, dtype=torch.float64)),
        (x.new_tensor([1.0, 2.0]), torch.tensor([1.0, 2.0], dtype=torch.float64)),
    ]:
        assert ours.dtype == np.float64 and ours.device == device
        assert ours.tolist() == theirs.tolist()
    assert x.new_zeros(2, dtype=mg.int64).dtype == np.int64
    assert x.new_empty(4).shape == (4,)
    assert x.new_ones(2, requires_grad=True).requires_grad


def test_isnan_isinf_isfinite_as_torch():
    values = [1.0, float("nan"), float("inf"), -float("inf")]
    for name in ("isnan", "isinf", "isfinite"):
        ours = getattr(mg.tensor(values), name)()
        assert ours.tolist() == getattr(torch.tensor(values), name)().tolist(), name
