"""PyTorch names that code ported from PyTorch (e.g. "Let's build GPT") reaches for:
``t.clone()``, ``mg.tril`` / ``mg.triu``, the in-place ``add_``, ``sub_``, ``mul_``, ``div_``,
``nn.CrossEntropyLoss`` / ``nn.MSELoss`` and ``mg.multinomial``.

Values and gradients are checked against PyTorch where it is installed, and gradients with
float64 finite differences everywhere; multinomial's draws are checked statistically.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import check_gradients, compare_with_torch

import minigrad as mg
from minigrad import nn

# -- clone -----------------------------------------------------------------------------------


def test_clone_is_a_copy_in_new_memory(device):
    x = mg.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=mg.float64, device=device)
    copy = x.clone()
    assert copy is not x and copy.array is not x.array
    assert copy.shape == x.shape and copy.dtype == x.dtype and copy.device == device
    copy[0, 0] = 10.0  # writing to the copy leaves the original alone
    assert x.tolist() == [[1.0, 2.0], [3.0, 4.0]]
    assert not copy.requires_grad  # nothing required grad: no graph


def test_clone_keeps_the_graph(device):
    x = mg.randn(2, 3, device=device, requires_grad=True)
    copy = x.clone()
    assert copy.requires_grad and not copy.is_leaf
    (copy * 3.0).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.full((2, 3), 3.0))
    check_gradients(lambda t: t.clone() * t, (3, 4), device=device, second_order=True)


def test_clone_matches_torch():
    pytest.importorskip("torch")
    compare_with_torch(lambda t: t.clone() ** 2, lambda t: t.clone() ** 2, (2, 3, 4))


# -- tril / triu -----------------------------------------------------------------------------

TRIANGLES = {
    "tril": (lambda t, k: mg.tril(t, k), "tril"),
    "triu": (lambda t, k: mg.triu(t, diagonal=k), "triu"),
    "t.tril": (lambda t, k: t.tril(k), "tril"),
    "t.triu": (lambda t, k: t.triu(diagonal=k), "triu"),
}
MATRIX_SHAPES = [(4, 4), (3, 5), (5, 2), (2, 3, 4, 4)]  # batched over the leading dims


@pytest.mark.parametrize("name", TRIANGLES)
@pytest.mark.parametrize("shape", MATRIX_SHAPES, ids=str)
@pytest.mark.parametrize("diagonal", [-2, -1, 0, 1, 3])
def test_triangles_match_torch(name, shape, diagonal, device):
    torch = pytest.importorskip("torch")
    ours, torch_name = TRIANGLES[name]
    compare_with_torch(
        lambda t: ours(t, diagonal),
        lambda t: getattr(torch, torch_name)(t, diagonal),
        shape,
        device=device,
    )


@pytest.mark.parametrize("name", TRIANGLES)
@pytest.mark.parametrize("shape", [(3, 3), (2, 3, 4)], ids=str)
def test_triangle_gradients(name, shape, device):
    ours, _ = TRIANGLES[name]
    check_gradients(lambda t: ours(t, 0) * t, shape, device=device, second_order=True)


def test_triangle_gradient_is_the_same_mask(device):
    x = mg.randn(3, 3, device=device, requires_grad=True)
    mg.triu(x, 1).backward(mg.ones(3, 3, device=device))
    assert x.grad.tolist() == [[0.0, 1.0, 1.0], [0.0, 0.0, 1.0], [0.0, 0.0, 0.0]]


def test_causal_mask_as_in_lets_build_gpt(device):
    """tril = torch.tril(torch.ones(T, T)); wei.masked_fill(tril == 0, float("-inf"))."""
    T = 4
    tril = mg.tril(mg.ones(T, T, device=device))
    weights = mg.zeros(T, T, device=device).masked_fill(tril == 0, float("-inf")).softmax(-1)
    expected = np.tril(np.ones((T, T))) / np.arange(1, T + 1)[:, None]
    np.testing.assert_allclose(weights.numpy(), expected, rtol=1e-6)


def test_triangles_keep_integer_and_bool_dtypes(device):
    ints = mg.tril(mg.ones(3, 3, dtype=mg.int64, device=device))
    assert ints.dtype == np.int64 and ints.tolist() == [[1, 0, 0], [1, 1, 0], [1, 1, 1]]
    bools = mg.ones(2, 2, dtype=mg.bool_, device=device).triu()
    assert bools.dtype == np.bool_ and bools.tolist() == [[True, True], [False, True]]


@pytest.mark.parametrize("op", ["tril", "triu"])
def test_triangles_need_a_matrix(op, device):
    with pytest.raises(mg.errors.ShapeError, match=rf"{op}: .*at least 2 dimensions.*\(3,\)"):
        getattr(mg, op)(mg.ones(3, device=device))


# -- add_, sub_, mul_, div_ ------------------------------------------------------------------

IN_PLACE = {
    "add_": lambda t, o: t.add_(o),
    "add_ alpha": lambda t, o: t.add_(o, alpha=-0.5),
    "sub_": lambda t, o: t.sub_(o),
    "sub_ alpha": lambda t, o: t.sub_(o, alpha=2),
    "mul_": lambda t, o: t.mul_(o),
    "div_": lambda t, o: t.div_(o),
}


@pytest.mark.parametrize("name", IN_PLACE)
@pytest.mark.parametrize("other_shape", [(2, 3), (3,), "number"], ids=str)
def test_in_place_methods_match_torch_and_return_self(name, other_shape, device):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    values = rng.uniform(0.5, 2.0, (2, 3))
    other = 1.5 if other_shape == "number" else rng.uniform(0.5, 2.0, other_shape)
    ours = mg.tensor(values, device=device)
    ours_other = other if other_shape == "number" else mg.tensor(other, device=device)
    theirs_other = other if other_shape == "number" else torch.tensor(other, dtype=torch.float32)
    theirs = torch.tensor(values, dtype=torch.float32)
    result = IN_PLACE[name](ours, ours_other)
    IN_PLACE[name](theirs, theirs_other)
    assert result is ours and ours.dtype == np.float32 and ours.shape == (2, 3)
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-6)


def test_in_place_methods_step_a_leaf_under_no_grad(device):
    """The SGD step of PyTorch's own optimizer: p.add_(p.grad, alpha=-lr)."""
    w = mg.tensor([1.0, 2.0], device=device, requires_grad=True)
    (w * w).sum().backward()  # dL/dw = 2w
    with mg.no_grad():
        same = w.add_(w.grad, alpha=-0.25)
    assert same is w and w.is_leaf and w.requires_grad
    assert w.tolist() == [0.5, 1.0]


def test_in_place_methods_refuse_a_leaf_that_requires_grad(device):
    w = mg.ones(3, device=device, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"leaf tensor that requires grad.*\(sub_\).*no_grad"):
        w.sub_(1.0)
    assert w.tolist() == [1.0, 1.0, 1.0]


def test_in_place_methods_change_the_tensor_itself_and_are_recorded(device):
    """``h.add_(w)`` returns h itself; on a tensor in the graph the write is recorded, as in
    PyTorch, so the gradient reaches both w's uses."""
    w = mg.ones(3, device=device, requires_grad=True)
    h = w * 2.0
    assert h.add_(w) is h and h.div_(2.0) is h  # h = (2w + w) / 2
    plain = mg.zeros(3, device=device)
    assert plain.mul_(w) is plain and plain.requires_grad  # 0 * w: w reaches plain's graph
    (h.sum() + plain.sum()).backward()
    np.testing.assert_allclose(w.grad.numpy(), np.full(3, 1.5))
    assert h.tolist() == [1.5, 1.5, 1.5]
    with pytest.raises(RuntimeError, match="leaf"):  # a leaf that requires grad: refused
        w.add_(1.0)


def test_in_place_methods_refuse_what_does_not_fit(device):
    t = mg.ones(3, device=device)
    with pytest.raises(mg.errors.ShapeError, match=r"add_: the result has shape \(2, 3\)"):
        t.add_(mg.ones(2, 3, device=device))
    n = mg.arange(3, device=device)
    with pytest.raises(TypeError, match="div_: the result has dtype float64.*dtype int64"):
        n.div_(2)
    assert n.mul_(2).add_(1, alpha=3).tolist() == [3, 5, 7]  # int into int is fine


# -- nn.CrossEntropyLoss, nn.MSELoss ---------------------------------------------------------


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("ignore_index", [-100, 2])
@pytest.mark.parametrize("logits_shape", [(6, 4), (3, 4, 5)], ids=str)
def test_cross_entropy_loss_matches_torch(reduction, ignore_index, logits_shape, device):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    target_shape = (logits_shape[0],) + logits_shape[2:]
    target = rng.integers(0, logits_shape[1], target_shape)
    ours = nn.CrossEntropyLoss(ignore_index=ignore_index, reduction=reduction)
    theirs = torch.nn.CrossEntropyLoss(ignore_index=ignore_index, reduction=reduction)
    compare_with_torch(ours, theirs, logits_shape, target, device=device)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_loss_matches_torch(reduction, device):
    torch = pytest.importorskip("torch")
    compare_with_torch(
        nn.MSELoss(reduction=reduction),
        torch.nn.MSELoss(reduction=reduction),
        (3, 4),
        (3, 4),
        device=device,
    )


def test_loss_modules_call_the_functional_losses(device):
    logits = mg.randn(5, 3, dtype=mg.float64, device=device)
    target = mg.tensor([0, 2, 1, 1, -100], device=device)
    criterion = nn.CrossEntropyLoss()
    assert criterion(logits, target).item() == mg.nn.functional.cross_entropy(logits, target).item()
    assert list(criterion.parameters()) == [] and "reduction='mean'" in repr(criterion)
    a, b = mg.randn(4, device=device), mg.randn(4, device=device)
    assert nn.MSELoss(reduction="sum")(a, b).item() == ((a - b) ** 2).sum().item()


@pytest.mark.parametrize("layer", [nn.CrossEntropyLoss, nn.MSELoss])
def test_loss_modules_check_the_reduction(layer):
    with pytest.raises(ValueError, match=rf"{layer.__name__}: reduction must be.*'avg'"):
        layer(reduction="avg")


# -- multinomial -----------------------------------------------------------------------------

DRAWS = 20000
TOLERANCE = 0.015  # about 4 standard deviations of a frequency estimated from 20000 draws


def frequencies(indices: np.ndarray, categories: int) -> np.ndarray:
    return np.bincount(indices.reshape(-1), minlength=categories) / indices.size


def test_multinomial_with_replacement_draws_in_proportion_to_the_weights(device):
    mg.manual_seed(0)
    weights = mg.tensor([1.0, 0.0, 3.0, 6.0], device=device)  # need not sum to 1
    draws = mg.multinomial(weights, DRAWS, replacement=True)
    assert draws.shape == (DRAWS,) and draws.dtype == np.int64 and draws.device == device
    assert not draws.requires_grad
    np.testing.assert_allclose(frequencies(draws.numpy(), 4), [0.1, 0.0, 0.3, 0.6], atol=TOLERANCE)


def test_multinomial_rows_draw_independently(device):
    mg.manual_seed(1)
    probs = mg.tensor([[0.5, 0.5, 0.0], [0.0, 0.1, 0.9]], device=device)
    draws = mg.multinomial(probs, DRAWS, replacement=True).numpy()
    assert draws.shape == (2, DRAWS)
    np.testing.assert_allclose(frequencies(draws[0], 3), [0.5, 0.5, 0.0], atol=TOLERANCE)
    np.testing.assert_allclose(frequencies(draws[1], 3), [0.0, 0.1, 0.9], atol=TOLERANCE)


def test_multinomial_without_replacement_draws_one_at_a_time(device):
    """Each row draws 2 of 3 categories: the first with probability p_j, the second with
    P(second = j) = sum over i != j of p_i * p_j / (1 - p_i), never the first again."""
    mg.manual_seed(2)
    p = np.array([0.2, 0.3, 0.5])
    rows = mg.tensor(np.tile(p, (DRAWS, 1)), device=device)
    draws = mg.multinomial(rows, 2).numpy()
    assert draws.shape == (DRAWS, 2) and (draws[:, 0] != draws[:, 1]).all()
    second = [sum(p[i] * p[j] / (1 - p[i]) for i in range(3) if i != j) for j in range(3)]
    np.testing.assert_allclose(frequencies(draws[:, 0], 3), p, atol=TOLERANCE)
    np.testing.assert_allclose(frequencies(draws[:, 1], 3), second, atol=TOLERANCE)


def test_multinomial_without_replacement_can_draw_every_category(device):
    weights = mg.tensor([[0.1, 5.0, 1.0, 2.0]] * 50, device=device)
    draws = mg.multinomial(weights, 4).numpy()
    assert (np.sort(draws, axis=1) == np.arange(4)).all()


def test_multinomial_repeats_after_manual_seed(device):
    weights = mg.rand(3, 10, device=device)
    mg.manual_seed(7)
    first = mg.multinomial(weights, 5).tolist(), mg.multinomial(weights, 5, True).tolist()
    mg.manual_seed(7)
    second = mg.multinomial(weights, 5).tolist(), mg.multinomial(weights, 5, True).tolist()
    assert first == second


def test_multinomial_samples_the_next_token_as_in_generate(device):
    """idx_next = torch.multinomial(F.softmax(logits, dim=-1), num_samples=1): (B, 1)."""
    logits = mg.tensor([[0.0, 50.0, 0.0], [50.0, 0.0, 0.0]], device=device)
    idx_next = mg.multinomial(logits.softmax(-1), num_samples=1)
    assert idx_next.shape == (2, 1) and idx_next.tolist() == [[1], [0]]


@pytest.mark.parametrize(
    ("weights", "num_samples", "replacement", "error", "message"),
    [
        ([0.5, 0.5], 3, False, ValueError, r"3 samples without replacement from 2 categories"),
        ([0.5, 0.0, 0.5], 3, False, ValueError, r"only 2 categories of weight > 0"),
        ([0.5, 0.5], 0, True, ValueError, r"num_samples=0"),
        ([0.5, -0.1], 1, True, ValueError, r"inf, nan or a value < 0"),
        ([0.5, float("nan")], 1, True, ValueError, r"inf, nan or a value < 0"),
        ([[0.5, 0.5], [0.0, 0.0]], 1, True, ValueError, r"a row of weights sums to 0"),
        ([[[0.5, 0.5]]], 1, True, mg.errors.ShapeError, r"1-D or 2-D, got shape \(1, 1, 2\)"),
        ([1, 2], 1, True, TypeError, r"floating point, got int64"),
    ],
    ids=["too-many", "too-few-nonzero", "none", "negative", "nan", "zero-row", "3-D", "int"],
)
def test_multinomial_refuses_what_torch_refuses(
    weights, num_samples, replacement, error, message, device
):
    with pytest.raises(error, match=rf"multinomial: .*{message}"):
        mg.multinomial(mg.tensor(weights, device=device), num_samples, replacement)
