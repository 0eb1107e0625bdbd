"""Every differentiable op's backward against float64 finite differences (``mg.gradcheck``),
and its second derivatives (``mg.gradgradcheck``, through ``create_graph=True``).

Each case names an op and the situation it covers: broadcasting with size-1 dims, keepdim,
negative dims, repeated indices. Inputs are tuples (random float64 arrays of that shape that
require grad) or arrays (integer indices and bool masks, passed as constants).
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import check_gradients

import minigrad as mg
from minigrad import ops


def case(name, fn, *inputs, domain="real"):
    return pytest.param(fn, inputs, domain, id=name)


def seeded_dropout(x):
    mg.manual_seed(7)  # the same mask on every call, so finite differences see one function
    return ops.dropout(x, p=0.3, training=True)


INDEX = np.array([2, 0, 2, 1])  # repeated: gradients must accumulate
TARGET = np.array([1, 0, 3, 3, 2])
TARGET_IGNORED = np.array([1, -100, 3, -100, 2])
MASK = np.array([[True], [False]])

CASES = [
    # -- arithmetic, with broadcasting over size-1 and missing dims -------------------------
    case("add", lambda a, b: a + b, (2, 3), (2, 3)),
    case("add_broadcast_row", lambda a, b: a + b, (2, 3), (3,)),
    case("add_broadcast_size1", lambda a, b: a + b, (2, 1, 3), (4, 1)),
    case("add_broadcast_left", lambda a, b: a + b, (1,), (2, 3)),
    case("add_scalar", lambda a: a + 2.5, (2, 3)),
    case("radd_scalar", lambda a: 2.5 + a, (2, 3)),
    case("sub", lambda a, b: a - b, (2, 3), (2, 3)),
    case("sub_broadcast_size1", lambda a, b: a - b, (3, 1), (1, 4)),
    case("rsub_scalar", lambda a: 1.0 - a, (2, 3)),
    case("mul", lambda a, b: a * b, (2, 3), (2, 3)),
    case("mul_broadcast_size1", lambda a, b: a * b, (2, 1, 3), (4, 1)),
    case("mul_scalar", lambda a: a * -3.0, (2, 3)),
    case("div", lambda a, b: a / b, (2, 3), (2, 3), domain="away_from_zero"),
    case(
        "div_broadcast",
        lambda a, b: a / b,
        (2, 3),
        (2, 1),
        domain="away_from_zero",
    ),
    case("rdiv_scalar", lambda a: 2.0 / a, (2, 3), domain="away_from_zero"),
    case("neg", lambda a: -a, (2, 3)),
    case("pow_int_exponent", lambda a: a**3, (2, 3)),
    case("pow_float_exponent", lambda a: a**2.5, (2, 3), domain="positive"),
    case("pow_negative_exponent", lambda a: a**-0.5, (2, 3), domain="positive"),
    case("rpow_scalar_base", lambda a: 2.0**a, (2, 3)),
    case("pow_tensors", lambda a, b: a**b, (2, 3), (2, 3), domain="positive"),
    case(
        "pow_tensors_broadcast",
        lambda a, b: a**b,
        (2, 3),
        (3,),
        domain="positive",
    ),
    # -- unary -----------------------------------------------------------------------------
    case("exp", lambda a: a.exp(), (2, 3)),
    case("log", lambda a: a.log(), (2, 3), domain="positive"),
    case("sqrt", lambda a: a.sqrt(), (2, 3), domain="positive"),
    case("tanh", lambda a: a.tanh(), (2, 3)),
    case("sigmoid", lambda a: a.sigmoid(), (2, 3)),
    case("relu", lambda a: a.relu(), (2, 3), domain="away_from_zero"),
    case("abs", lambda a: a.abs(), (2, 3), domain="away_from_zero"),
    case(
        "clamp_both",
        lambda a: a.clamp(-0.9, 1.1),
        (3, 4),
        domain="away_from_zero",
    ),
    case("clamp_min", lambda a: a.clamp(min=0.1), (3, 4), domain="away_from_zero"),
    case("clamp_max", lambda a: a.clamp(max=-0.1), (3, 4), domain="away_from_zero"),
    case("mg.exp_function", lambda a: mg.exp(a) * mg.tanh(a), (3,)),
    # -- reductions: all dims, one dim, negative dims, tuples, keepdim --------------------
    case("sum_all", lambda a: a.sum(), (2, 3)),
    case("sum_dim1", lambda a: a.sum(1), (2, 3, 2)),
    case("sum_negative_dim_keepdim", lambda a: a.sum(dim=-1, keepdim=True), (2, 3)),
    case("sum_dims_tuple", lambda a: a.sum(dim=(0, 2)), (2, 3, 2)),
    case("mean_all", lambda a: a.mean(), (2, 3)),
    case("mean_negative_dim", lambda a: a.mean(dim=-2), (2, 3, 2)),
    case("mean_keepdim", lambda a: a.mean(dim=(0, -1), keepdim=True), (2, 3, 2)),
    case("var_all", lambda a: a.var(), (2, 3)),
    case("var_dim_unbiased", lambda a: a.var(dim=1), (2, 4)),
    case(
        "var_negative_dim_biased_keepdim",
        lambda a: a.var(dim=-1, unbiased=False, keepdim=True),
        (3, 4),
    ),
    case("amax_dim", lambda a: a.amax(dim=1), (3, 4)),
    case("amax_negative_dim_keepdim", lambda a: a.amax(dim=-1, keepdim=True), (2, 3, 4)),
    case("amax_dims_tuple", lambda a: a.amax(dim=(0, 2)), (2, 3, 4)),
    case("max_whole_tensor", lambda a: a.max(), (3, 4)),
    case("max_dim_values", lambda a: a.max(dim=0).values, (3, 4)),
    case("min_whole_tensor", lambda a: a.min(), (3, 4)),
    # -- shape -----------------------------------------------------------------------------
    case("reshape", lambda a: a.reshape(3, 2) * a.reshape(3, 2), (2, 3)),
    case("reshape_minus_one", lambda a: a.reshape(-1, 4), (2, 2, 4)),
    case("view", lambda a: a.view(6), (2, 3)),
    case("transpose_negative_dims", lambda a: a.transpose(0, -1), (2, 3, 4)),
    case("permute", lambda a: a.permute(2, 0, 1), (2, 3, 4)),
    case("T", lambda a: a.T, (2, 3)),
    case("unsqueeze_negative", lambda a: a.unsqueeze(-1) * a.unsqueeze(0), (3,)),
    case("squeeze_dim", lambda a: a.squeeze(1), (3, 1, 2)),
    case("squeeze_all", lambda a: a.squeeze(), (1, 3, 1)),
    case("flatten", lambda a: a.flatten(1), (2, 3, 2)),
    case("expand", lambda a: a.expand(2, 3, 4), (3, 1)),
    # -- indexing and joining --------------------------------------------------------------
    case("getitem_int", lambda a: a[1], (3, 4)),
    case("getitem_negative_int", lambda a: a[-1, -2], (3, 4)),
    case("getitem_slices", lambda a: a[:, 1:3], (3, 4)),
    case("getitem_step", lambda a: a[::2, 1:], (5, 3)),
    case("getitem_none_ellipsis", lambda a: a[..., None, 0], (2, 3, 4)),
    case("getitem_int_array_repeated", lambda a: a[INDEX], (3, 2)),
    case("getitem_int_tensor", lambda a, i: a[i], (3, 2), INDEX),
    case("getitem_two_int_arrays", lambda a: a[[0, 2, 0], [1, 1, 1]], (3, 2)),
    case("getitem_array_and_slice", lambda a: a[:, [2, 0, 2]], (2, 3)),
    case("getitem_bool_mask", lambda a: a[np.array([True, False, True])], (3, 2)),
    case("cat_dim0", lambda a, b: mg.cat([a, b, a], 0), (2, 3), (1, 3)),
    case("cat_negative_dim", lambda a, b: mg.cat([a, b], dim=-1), (2, 3), (2, 1)),
    case("stack_dim0", lambda a, b: mg.stack([a, b, a]), (2, 3), (2, 3)),
    case("stack_negative_dim", lambda a, b: mg.stack([a, b], dim=-1), (2, 3), (2, 3)),
    case("split_size", lambda a: a.split(2, dim=1), (2, 5)),
    case("split_sections", lambda a: a.split([1, 3], dim=-1), (2, 4)),
    case("chunk", lambda a: a.chunk(3, dim=0), (5, 2)),
    case("where", lambda c, a, b: mg.where(c, a, b), MASK, (2, 3), (2, 3)),
    case("where_broadcast", lambda c, a, b: mg.where(c, a, b), MASK, (1, 3), (2, 1)),
    case("where_scalar", lambda c, a: mg.where(c, a, 0.0), MASK, (2, 3)),
    case("masked_fill", lambda a, m: a.masked_fill(m, -1e9), (2, 3), MASK),
    # -- matrix products -------------------------------------------------------------------
    case("matmul_2d", lambda a, b: a @ b, (2, 3), (3, 4)),
    case("matmul_1d_1d", lambda a, b: a @ b, (3,), (3,)),
    case("matmul_1d_2d", lambda a, b: a @ b, (3,), (3, 2)),
    case("matmul_2d_1d", lambda a, b: a @ b, (2, 3), (3,)),
    case("matmul_batched", lambda a, b: a @ b, (2, 2, 3), (2, 3, 2)),
    case("matmul_broadcast_batch", lambda a, b: a @ b, (2, 3), (2, 3, 2)),
    case("matmul_broadcast_size1_batch", lambda a, b: a @ b, (2, 1, 2, 3), (3, 3, 2)),
    case("matmul_batched_1d", lambda a, b: a @ b, (2, 2, 3), (3,)),
    case("linear", lambda x, w, b: ops.linear(x, w, b), (4, 3), (2, 3), (2,)),
    case("linear_no_bias", lambda x, w: ops.linear(x, w), (4, 3), (2, 3)),
    case("linear_3d_input", lambda x, w, b: ops.linear(x, w, b), (2, 3, 3), (2, 3), (2,)),
    # -- fused activations, normalization, losses ------------------------------------------
    case("softmax_last", lambda a: ops.softmax(a, -1), (2, 4)),
    case("softmax_dim0", lambda a: ops.softmax(a, 0), (3, 2, 2)),
    case("log_softmax_last", lambda a: ops.log_softmax(a, dim=-1), (2, 4)),
    case("log_softmax_dim1", lambda a: ops.log_softmax(a, dim=1), (2, 3, 2)),
    case("gelu_exact", lambda a: ops.gelu(a), (2, 4)),
    case("gelu_tanh", lambda a: ops.gelu(a, approximate="tanh"), (2, 4)),
    case(
        "layer_norm_affine",
        lambda x, w, b: ops.layer_norm(x, (4,), w, b),
        (3, 4),
        (4,),
        (4,),
    ),
    case("layer_norm_plain", lambda x: ops.layer_norm(x, 4), (2, 3, 4)),
    case("layer_norm_two_dims", lambda x, w: ops.layer_norm(x, (2, 3), w), (2, 2, 3), (2, 3)),
    case(
        "cross_entropy_mean",
        lambda x, t: ops.cross_entropy(x, t),
        (5, 4),
        TARGET,
    ),
    case(
        "cross_entropy_sum", lambda x, t: ops.cross_entropy(x, t, reduction="sum"), (5, 4), TARGET
    ),
    case(
        "cross_entropy_none", lambda x, t: ops.cross_entropy(x, t, reduction="none"), (5, 4), TARGET
    ),
    case(
        "cross_entropy_ignore_index",
        lambda x, t: ops.cross_entropy(x, t, ignore_index=-100),
        (5, 4),
        TARGET_IGNORED,
    ),
    case(
        "cross_entropy_ignore_index_none",
        lambda x, t: ops.cross_entropy(x, t, reduction="none"),
        (5, 4),
        TARGET_IGNORED,
    ),
    case(
        "cross_entropy_NCd",
        lambda x, t: ops.cross_entropy(x, t),
        (2, 3, 2),
        np.array([[0, 2], [1, 1]]),
    ),
    case(
        "cross_entropy_NCd_none",
        lambda x, t: ops.cross_entropy(x, t, reduction="none"),
        (2, 3, 2),
        np.array([[0, 2], [1, 1]]),
    ),
    case(
        "cross_entropy_single_row",
        lambda x: ops.cross_entropy(x, mg.tensor(2, device=x.device)),
        (4,),
    ),
    case("mse_loss_mean", lambda a, b: ops.mse_loss(a, b), (2, 3), (2, 3)),
    case("mse_loss_sum", lambda a, b: ops.mse_loss(a, b, reduction="sum"), (2, 3), (2, 3)),
    case("mse_loss_none", lambda a, b: ops.mse_loss(a, b, reduction="none"), (2, 3), (2, 3)),
    case(
        "embedding_repeated", lambda w, i: ops.embedding(i, w), (4, 3), np.array([[1, 3], [1, 1]])
    ),
    case("dropout_fixed_seed", seeded_dropout, (4, 5)),
    case("dropout_eval_identity", lambda a: ops.dropout(a, 0.5, training=False), (2, 3)),
    # -- dtype and composite expressions ---------------------------------------------------
    case("double_no_op_cast", lambda a: a.double() * 2.0, (2, 2)),
    case("std", lambda a: a.std(dim=-1), (2, 4)),
    case("norm", lambda a: a.norm(), (2, 3)),
    case("tensor_used_twice", lambda a: a * a.exp() + a, (2, 3)),
]


@pytest.mark.parametrize("fn, inputs, domain", CASES)
def test_gradcheck(fn, inputs, domain, device):
    check_gradients(fn, *inputs, domain=domain, device=device)


@pytest.mark.parametrize("fn, inputs, domain", CASES)
def test_gradgradcheck(fn, inputs, domain, device):
    """Second derivatives through create_graph=True, for every op (not only the elementwise
    ops, matmul, softmax, log_softmax, layer_norm, gelu and cross_entropy)."""
    check_gradients(fn, *inputs, domain=domain, device=device, second_order=True)


def test_gradcheck_reports_worst_entry():
    """A wrong backward is caught, and the error names the input, the entry and both values."""

    class WrongSquare(mg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * x  # should be 2 x

    x = mg.tensor([1.0, 2.0, 3.0], dtype=mg.float64, requires_grad=True)
    with pytest.raises(AssertionError, match=r"input 0 .*entry 2.*analytic value is 3.*give 6"):
        mg.gradcheck(WrongSquare.apply, (x,))


class SquareWithDetachedBackward(mg.autograd.Function):
    """x^2 with a right first derivative that create_graph cannot see through."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * 2.0 * x.detach()  # correct value, but cut from the graph


def test_gradgradcheck_catches_a_backward_cut_from_the_graph():
    x = mg.tensor([0.5, -1.0], dtype=mg.float64, requires_grad=True)
    assert mg.gradcheck(SquareWithDetachedBackward.apply, (x,))
    with pytest.raises(AssertionError, match=r"analytic value is 0 but finite differences"):
        mg.gradgradcheck(SquareWithDetachedBackward.apply, (x,))


def test_gradcheck_catches_an_output_cut_from_the_graph():
    x = mg.tensor([0.5, -1.0], dtype=mg.float64, requires_grad=True)
    with pytest.raises(AssertionError, match=r"analytic value is 0 but finite differences give 3"):
        mg.gradcheck(lambda t: (t * 3.0).detach(), (x,))


def test_gradcheck_refuses_float32():
    x = mg.randn(3, requires_grad=True)
    with pytest.raises(TypeError, match="float64"):
        mg.gradcheck(lambda t: t * 2.0, (x,))
