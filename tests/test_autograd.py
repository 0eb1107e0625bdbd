"""What backward does, as PyTorch users expect it: accumulation, hooks, retain_grad,
freeing the graph, grad modes, anomaly detection, custom Functions, ``mg.autograd.grad``,
second derivatives (Hessian-vector products), very deep graphs and memory that stays flat.
"""

from __future__ import annotations

import gc
import sys
import tracemalloc

import numpy as np
import pytest

import minigrad as mg
from minigrad import ops


def leaf(values, device="cpu", dtype=mg.float64):
    return mg.tensor(values, dtype=dtype, device=device, requires_grad=True)


# -- accumulation and the multivariate chain rule ----------------------------------------------


def test_gradients_accumulate_across_backward_calls(device):
    x = leaf([1.0, 2.0], device)
    (x * 3.0).sum().backward()
    (x * x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [3.0 + 2.0, 3.0 + 4.0])
    x.grad = None
    (x * 3.0).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [3.0, 3.0])


@pytest.mark.parametrize(
    "fn, expected",
    [
        pytest.param(lambda x: x + x, lambda x: 2 * np.ones_like(x), id="x+x"),
        pytest.param(lambda x: x * x, lambda x: 2 * x, id="x*x"),
        pytest.param(lambda x: x * x.exp(), lambda x: (1 + x) * np.exp(x), id="x*exp(x)"),
        pytest.param(lambda x: (x @ x) * x, lambda x: 2 * x * x.sum() + x @ x, id="(x@x)*x"),
    ],
)
def test_tensor_used_twice_gets_both_contributions(fn, expected, device):
    x = leaf([0.5, -1.0, 2.0], device)
    fn(x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), expected(x.numpy()), rtol=1e-12)


def test_diamond_graph_runs_each_node_once(device):
    x = leaf([1.0, 2.0], device)
    h = x.exp()
    y = h * 2.0 + h.tanh() + h  # three paths through h
    y.sum().backward()
    e = np.exp(x.numpy())
    np.testing.assert_allclose(x.grad.numpy(), e * (3.0 + (1 - np.tanh(e) ** 2)), rtol=1e-12)


def test_an_op_that_read_a_tensor_before_a_write_in_place_sees_the_old_values(device):
    """x += exp(x): exp read x as it was, so dL/da = 2 (1 + exp(2a)), with no cycle; an op
    that runs after the write reads the new x (x * x below: d(x_new^2)/da)."""
    values = np.array([0.1, -0.3, 0.5])
    a = leaf(values, device)
    x = a * 2.0
    x += x.exp()
    x.sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), 2.0 * (1.0 + np.exp(2.0 * values)), rtol=1e-12)
    b = leaf(values, device)
    y = b * 2.0
    y += y.exp()
    (y * y).sum().backward()
    new, slope = 2.0 * values + np.exp(2.0 * values), 2.0 * (1.0 + np.exp(2.0 * values))
    np.testing.assert_allclose(b.grad.numpy(), 2.0 * new * slope, rtol=1e-12)


# -- hooks and retain_grad -----------------------------------------------------------------


def test_hook_on_leaf_replaces_its_gradient_until_removed(device):
    x = leaf([1.0, 2.0], device)
    seen = []
    handle = x.register_hook(lambda g: seen.append(g.numpy().copy()) or g * 10.0)
    (x * x).sum().backward()
    np.testing.assert_allclose(seen[0], [2.0, 4.0])
    np.testing.assert_allclose(x.grad.numpy(), [20.0, 40.0])
    handle.remove()
    x.grad = None
    (x * x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 4.0])
    assert len(seen) == 1


def test_hook_on_non_leaf_changes_what_flows_upstream(device):
    x = leaf([1.0, 2.0], device)
    h = x * 3.0
    h.register_hook(lambda g: g * 0.0 + 1.0)
    (h * h).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [3.0, 3.0])  # 3 * (replaced dL/dh = 1)


def test_hook_on_leaf_used_twice_runs_once_with_the_total(device):
    x = leaf([1.0, 2.0], device)
    calls = []
    x.register_hook(lambda g: calls.append(g.tolist()))
    (x * x + x).sum().backward()
    assert calls == [[3.0, 5.0]]


def test_hooks_run_in_registration_order(device):
    x = leaf([1.0], device)
    x.register_hook(lambda g: g + 1.0)
    x.register_hook(lambda g: g * 10.0)
    (x * 2.0).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [30.0])


def test_non_leaf_grad_is_none_unless_retained(device):
    x = leaf([1.0, 2.0], device)
    h = x * x
    kept = x.exp()
    kept.retain_grad()
    (h.sum() + kept.sum()).backward()
    assert h.grad is None
    assert not h.is_leaf and x.is_leaf
    np.testing.assert_allclose(kept.grad.numpy(), [1.0, 1.0])
    assert kept.grad.grad_fn is None


# -- freeing the graph ---------------------------------------------------------------------


def test_second_backward_through_freed_graph_says_retain_graph(device):
    x = leaf([1.0, 2.0], device)
    y = x.exp().sum()  # exp saves its output for backward
    y.backward()
    with pytest.raises(RuntimeError, match=r"(?s)Exp.*second time.*retain_graph=True"):
        y.backward()


def test_retain_graph_allows_a_second_backward(device):
    x = leaf([1.0, 2.0], device)
    y = x.exp().sum()
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.exp([1.0, 2.0]))


def test_backward_frees_saved_arrays_but_keeps_structure(device):
    x = leaf([1.0, 2.0], device)
    y = (x.exp() * x).sum()
    mul = y.grad_fn.inputs[0].grad_fn
    assert mul.count_saved_bytes() > 0
    y.backward()
    assert mul.name == "Mul" and mul.inputs[1] is x  # the graph can still be drawn
    assert all(not node._saved for node in (mul, mul.inputs[0].grad_fn))


def test_products_and_quotients_with_a_number_keep_no_array(device):
    x = leaf([1.0, 2.0], device)
    for y in (x * 0.5, 0.5 * x, x / 4.0):
        assert y.grad_fn.count_saved_bytes() == 0  # dy/dx is the number: x is not needed
        y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [1.25, 1.25])
    y = x * x  # here each factor is the other's gradient: both are kept
    assert y.grad_fn.count_saved_bytes() >= x.numpy().nbytes


def test_create_graph_implies_retain_graph(device):
    x = leaf([1.0, 2.0], device)
    y = (x**3).sum()
    y.backward(create_graph=True)
    np.testing.assert_allclose(x.grad.numpy(), [3.0, 12.0])
    assert x.grad.requires_grad  # the gradient is itself a graph
    y.backward()  # arrays were kept
    np.testing.assert_allclose(x.grad.detach().numpy(), [6.0, 24.0])


# -- grad modes --------------------------------------------------------------------------------


def test_no_grad_records_nothing(device):
    x = leaf([1.0, 2.0], device)
    with mg.no_grad():
        y = (x * 2.0).exp().sum()
        assert not mg.is_grad_enabled()
    assert mg.is_grad_enabled()
    assert not y.requires_grad and y.grad_fn is None and y.is_leaf


def test_no_grad_as_decorator(device):
    @mg.no_grad()
    def step(t):
        return t * 2.0

    assert not step(leaf([1.0], device)).requires_grad


def test_enable_grad_inside_no_grad_records(device):
    x = leaf([1.0, 2.0], device)
    with mg.no_grad():
        with mg.enable_grad():
            y = (x * x).sum()
        z = x * 2.0
    assert y.requires_grad and y.grad_fn is not None
    assert not z.requires_grad
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 4.0])


def test_set_grad_enabled_false(device):
    x = leaf([1.0], device)
    with mg.set_grad_enabled(False):
        assert not (x + 1.0).requires_grad
    with mg.set_grad_enabled(True):
        assert (x + 1.0).requires_grad


def test_detach_cuts_the_graph_and_shares_data(device):
    x = leaf([1.0, 2.0], device)
    d = (x * 2.0).detach()
    assert not d.requires_grad and d.grad_fn is None
    y = (x * d).sum()
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 4.0])


# -- anomaly detection ---------------------------------------------------------------------


def test_detect_anomaly_names_the_forward_op_and_shapes(device):
    x = leaf([[1.0, -1.0, 2.0]], device)
    with mg.detect_anomaly(), np.errstate(invalid="ignore"):
        with pytest.raises(RuntimeError, match=r"Log forward produced nan.*\(1, 3\)"):
            x.log()


def test_detect_anomaly_names_the_backward_op(device):
    x = leaf([0.0, 4.0], device)
    with mg.detect_anomaly(), np.errstate(divide="ignore"):
        y = x.sqrt().sum()  # finite forward; d sqrt(x)/dx = 1 / (2 sqrt x) is inf at 0
        with pytest.raises(RuntimeError, match=r"Sqrt backward produced inf.*\(2,\)"):
            y.backward()


def test_without_detect_anomaly_nan_passes_silently(device):
    x = leaf([-1.0], device)
    with np.errstate(invalid="ignore"):
        assert np.isnan(x.log().item())


# -- custom Functions, as in PyTorch ---------------------------------------------------------


class ScaledCube(mg.autograd.Function):
    """y = scale * x^3, dL/dx = g * 3 scale x^2 (scale is a constant: no gradient)."""

    @staticmethod
    def forward(ctx, x, scale):
        ctx.save_for_backward(x)
        ctx.scale = scale
        return scale * x**3

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * 3.0 * ctx.scale * x * x, None


def test_custom_function_forward_backward_and_graph(device):
    x = leaf([1.0, 2.0], device)
    y = ScaledCube.apply(x, 0.5)
    assert y.grad_fn.function is ScaledCube and y.grad_fn.needs_input_grad == (True, False)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [1.5, 6.0])


def test_custom_function_passes_gradcheck_and_gradgradcheck(device):
    x = leaf([0.3, -1.2, 2.0], device)
    assert mg.gradcheck(lambda t: ScaledCube.apply(t, 2.0), (x,))
    assert mg.gradgradcheck(lambda t: ScaledCube.apply(t, 2.0), (x,))


class ReturnsWhatItIsTold(mg.autograd.Function):
    """y = x + w; backward returns ``ctx.grads``, whatever a test puts there."""

    @staticmethod
    def forward(ctx, x, w, grads):
        ctx.grads = grads
        return x + w

    @staticmethod
    def backward(ctx, grad):
        return (*ctx.grads, None)


def test_a_gradient_of_the_wrong_shape_names_the_op_and_the_input():
    x, w = mg.zeros(2, 3, requires_grad=True), mg.zeros(3, requires_grad=True)
    y = ReturnsWhatItIsTold.apply(x, w, (mg.zeros(2, 3), mg.zeros(2, 3)))
    with pytest.raises(
        RuntimeError,
        match=r"ReturnsWhatItIsTold.backward returned a gradient "
        r"of shape \(2, 3\) for input 1 of shape \(3,\)",
    ):
        y.sum().backward()


def test_a_gradient_of_another_dtype_takes_the_dtype_of_its_input():
    x, w = mg.zeros(2, 3, requires_grad=True), mg.zeros(3, requires_grad=True)
    grads = (mg.ones(2, 3, dtype=mg.float64), mg.ones(3, dtype=mg.float64) * 2)
    ReturnsWhatItIsTold.apply(x, w, grads).sum().backward()
    assert x.grad.dtype == mg.float32 and w.grad.dtype == mg.float32
    np.testing.assert_array_equal(w.grad.numpy(), [2.0, 2.0, 2.0])


class ExpKeepingOutput(mg.autograd.Function):
    """y = e^x, which saves its input, its output and a third array: what comes back?"""

    @staticmethod
    def forward(ctx, x):
        y = np.exp(x)
        ctx.save_for_backward(x, y, y * 2.0)
        return y

    @staticmethod
    def backward(ctx, grad):
        x, y, twice = ctx.saved_tensors
        ctx.seen = (x, y, twice)
        return grad * y


def test_saved_tensors_are_the_input_and_output_tensors_themselves():
    x = mg.tensor([0.5, -1.0], requires_grad=True)
    y = ExpKeepingOutput.apply(x)
    node = y.grad_fn
    y.backward(mg.ones_like(y), create_graph=True)
    saved_x, saved_y, twice = node.seen
    assert saved_x is x and saved_y is y  # linked to the graph: second derivatives see them
    assert twice.grad_fn is None and not twice.requires_grad  # anything else: a constant
    np.testing.assert_allclose(x.grad.numpy(), np.exp([0.5, -1.0]), rtol=1e-6)
    (second,) = mg.autograd.grad(x.grad.sum(), [x])  # d/dx of dy/dx = e^x, through saved y
    np.testing.assert_allclose(second.numpy(), np.exp([0.5, -1.0]), rtol=1e-6)


def test_saved_output_whose_tensor_is_gone_comes_back_as_a_constant():
    x = mg.tensor([0.5, -1.0], requires_grad=True)
    y = ExpKeepingOutput.apply(x)
    node = y.grad_fn
    del y  # the node holds its outputs weakly: nothing keeps the output Tensor now
    grad_x = ExpKeepingOutput.backward(node, mg.ones(2))
    saved_x, saved_y, _ = node.seen
    assert saved_x is x and saved_y.grad_fn is None
    np.testing.assert_allclose(saved_y.numpy(), np.exp([0.5, -1.0]), rtol=1e-6)
    np.testing.assert_allclose(grad_x.numpy(), np.exp([0.5, -1.0]), rtol=1e-6)


class SplitScale(mg.autograd.Function):
    """Two outputs: (2x, 3x); dL/dx = 2 g_a + 3 g_b."""

    @staticmethod
    def forward(ctx, x):
        return x * 2.0, x * 3.0

    @staticmethod
    def backward(ctx, grad_a, grad_b):
        return grad_a * 2.0 + grad_b * 3.0


@pytest.mark.parametrize(
    "use, expected",
    [
        (lambda a, b: b.sum(), 3.0),  # the unused output's gradient arrives as zeros
        (lambda a, b: a.sum() + 2.0 * b.sum(), 8.0),
        (lambda a, b: (a * b).sum(), None),
    ],
    ids=["second_only", "both", "product"],
)
def test_custom_function_with_two_outputs(use, expected, device):
    x = leaf([1.0, 2.0], device)
    use(*SplitScale.apply(x)).backward()
    expected = [expected] * 2 if expected is not None else 12.0 * x.numpy()  # d(6x^2)/dx
    np.testing.assert_allclose(x.grad.numpy(), expected)


def test_custom_function_without_grad_records_nothing(device):
    x = mg.tensor([1.0, 2.0], dtype=mg.float64, device=device)
    y = ScaledCube.apply(x, 1.0)
    assert y.grad_fn is None and not y.requires_grad


# -- mg.autograd.grad and second derivatives ---------------------------------------------------


def test_autograd_grad_returns_gradients_without_touching_dot_grad(device):
    x, w = leaf([1.0, 2.0], device), leaf([3.0, -1.0], device)
    (dx, dw) = mg.autograd.grad((x * w).sum(), [x, w])
    np.testing.assert_allclose(dx.numpy(), [3.0, -1.0])
    np.testing.assert_allclose(dw.numpy(), [1.0, 2.0])
    assert x.grad is None and w.grad is None


def test_autograd_grad_leaves_every_dot_grad_alone(device):
    x, w = leaf([1.0, 2.0], device), leaf([3.0, -1.0], device)
    w.grad = mg.tensor([5.0, 5.0], dtype=mg.float64, device=device)
    (dx,) = mg.autograd.grad((x * w).sum(), x)
    np.testing.assert_allclose(dx.numpy(), [3.0, -1.0])
    assert x.grad is None and w.grad.tolist() == [5.0, 5.0]  # w is in the graph, not an input


def test_autograd_grad_with_respect_to_intermediate_and_unused_tensors(device):
    x, unused = leaf([1.0, 2.0], device), leaf([0.0], device)
    h = x * 2.0
    dh, dx, du = mg.autograd.grad((h * h).sum(), [h, x, unused])
    np.testing.assert_allclose(dh.numpy(), [4.0, 8.0])  # 2h
    np.testing.assert_allclose(dx.numpy(), [8.0, 16.0])  # 2h * 2
    assert du is None and h.grad is None and not h._retains_grad


def test_autograd_grad_of_several_outputs_adds_their_seeded_gradients(device):
    x = leaf([1.0, 2.0], device)
    y, z = x * x, (x * 3.0).sum()  # dy/dx = 2x (seeded with g), dz/dx = 3
    g = mg.tensor([1.0, -2.0], dtype=mg.float64, device=device)
    (dx,) = mg.autograd.grad([y, z], [x], [g, None])
    np.testing.assert_allclose(dx.numpy(), [2.0 * 1.0 + 3.0, 2.0 * 2.0 * -2.0 + 3.0])
    with pytest.raises(ValueError, match="1 grad_outputs for 2 outputs"):
        mg.autograd.grad([y, z], [x], [g])


def test_autograd_grad_create_graph_gives_higher_derivatives(device):
    x = leaf([0.5, 2.0], device)
    (first,) = mg.autograd.grad((x**4).sum(), x, create_graph=True)
    (second,) = mg.autograd.grad(first.sum(), x, create_graph=True)
    (third,) = mg.autograd.grad(second.sum(), x)
    np.testing.assert_allclose(first.detach().numpy(), 4 * x.numpy() ** 3)
    np.testing.assert_allclose(second.detach().numpy(), 12 * x.numpy() ** 2)
    np.testing.assert_allclose(third.numpy(), 24 * x.numpy())


def _hessian_vector_product(loss_fn, params, vectors):
    """H v = d/dparams <dloss/dparams, v>, through create_graph=True (double backward)."""
    grads = mg.autograd.grad(loss_fn(*params), params, create_graph=True)
    dot = sum(((g * v).sum() for g, v in zip(grads, vectors)), mg.tensor(0.0, dtype=mg.float64))
    return mg.autograd.grad(dot, params)


def _torch_hessian_vector_product(torch, loss_fn, params, vectors):
    grads = torch.autograd.grad(loss_fn(*params), params, create_graph=True)
    dot = sum((g * v).sum() for g, v in zip(grads, vectors))
    return torch.autograd.grad(dot, params)


def _check_hvp_against_torch(mg_loss, torch_loss, shapes):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s) for s in shapes]
    vectors = [rng.standard_normal(s) for s in shapes]
    ours = _hessian_vector_product(
        mg_loss,
        [mg.tensor(a, dtype=mg.float64, requires_grad=True) for a in arrays],
        [mg.tensor(v, dtype=mg.float64) for v in vectors],
    )
    theirs = _torch_hessian_vector_product(
        torch,
        torch_loss,
        [torch.tensor(a, requires_grad=True) for a in arrays],
        [torch.tensor(v) for v in vectors],
    )
    for i, (o, t) in enumerate(zip(ours, theirs)):
        np.testing.assert_allclose(o.numpy(), t.numpy(), rtol=1e-6, atol=1e-10, err_msg=f"{i}")


MLP_SHAPES = [(5, 4), (3, 4), (3,), (2, 3), (2,)]  # x, W1, b1, W2, b2
TARGET = np.array([0, 1, 1, 0, 1])


@pytest.mark.parametrize("activation", ["tanh", "gelu", "gelu_tanh", "sigmoid"])
def test_hessian_vector_product_of_mlp_matches_torch(activation):
    torch = pytest.importorskip("torch")
    tf = torch.nn.functional
    mg_act = {
        "tanh": mg.tanh,
        "gelu": ops.gelu,
        "gelu_tanh": lambda h: ops.gelu(h, approximate="tanh"),
        "sigmoid": mg.sigmoid,
    }[activation]
    torch_act = {
        "tanh": torch.tanh,
        "gelu": tf.gelu,
        "gelu_tanh": lambda h: tf.gelu(h, approximate="tanh"),
        "sigmoid": torch.sigmoid,
    }[activation]

    def mg_loss(x, w1, b1, w2, b2):
        logits = ops.linear(mg_act(ops.linear(x, w1, b1)), w2, b2)
        return ops.cross_entropy(logits, mg.tensor(TARGET)) + (w1 * w1).sum() * 0.01

    def torch_loss(x, w1, b1, w2, b2):
        logits = tf.linear(torch_act(tf.linear(x, w1, b1)), w2, b2)
        return tf.cross_entropy(logits, torch.from_numpy(TARGET)) + (w1 * w1).sum() * 0.01

    _check_hvp_against_torch(mg_loss, torch_loss, MLP_SHAPES)


def test_hessian_vector_product_of_layer_norm_matches_torch():
    torch = pytest.importorskip("torch")
    tf = torch.nn.functional
    weights = np.linspace(-1.0, 1.0, 4)

    def mg_loss(x, gamma, beta):
        y = ops.layer_norm(x, (4,), gamma, beta)
        return (y.tanh() * mg.tensor(weights, dtype=mg.float64)).sum() + (y * y).mean()

    def torch_loss(x, gamma, beta):
        y = tf.layer_norm(x, (4,), gamma, beta)
        return (y.tanh() * torch.tensor(weights)).sum() + (y * y).mean()

    _check_hvp_against_torch(mg_loss, torch_loss, [(3, 4), (4,), (4,)])


# -- deep graphs and memory ------------------------------------------------------------------


def test_100k_node_chain_backpropagates_and_frees_without_recursion():
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)  # Python's default
    try:
        x = leaf(1.0, dtype=mg.float32)
        y = x
        for _ in range(100_000):
            y = y + 1.0
        y.backward()
        assert x.grad.item() == 1.0
        assert y.item() == 100_001.0
        del y  # dropping the chain must not recurse either (it frees 100,000 nodes)
        gc.collect()
    finally:
        sys.setrecursionlimit(limit)


def _mlp_step(x, target, params, lr=0.01):
    w1, b1, w2, b2 = params
    logits = ops.linear(ops.linear(x, w1, b1).relu(), w2, b2)
    loss = ops.cross_entropy(logits, target)
    loss.backward()
    with mg.no_grad():
        for p in params:
            p.data -= lr * p.grad.data
            p.grad = None
    return loss.item()


def test_training_loop_memory_stays_flat():
    mg.manual_seed(0)
    x, target = mg.randn(16, 8), mg.randint(0, 4, (16,))
    params = [
        mg.randn(32, 8, requires_grad=True),
        mg.zeros(32, requires_grad=True),
        mg.randn(4, 32, requires_grad=True),
        mg.zeros(4, requires_grad=True),
    ]
    gc.collect()
    tracemalloc.start()
    try:
        for step in range(1, 1001):
            _mlp_step(x, target, params)
            if step == 100:
                gc.collect()
                after_100, _ = tracemalloc.get_traced_memory()
        gc.collect()
        after_1000, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    growth = after_1000 - after_100
    assert growth < 64 * 1024, f"memory grew by {growth} bytes over 900 iterations"
