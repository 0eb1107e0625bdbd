"""The Tensor as a user meets it: attributes, conversions, creation, in-place data access,
identity hashing, and the random generator's seed (docs/api.md, "A Tensor")."""

from __future__ import annotations

import numpy as np
import pytest

import minigrad as mg


def test_attributes(device):
    t = mg.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], device=device, requires_grad=True)
    assert t.shape == (2, 3) and isinstance(t.shape, tuple)
    assert t.ndim == 2 and t.dim() == 2 and t.numel() == 6 and len(t) == 2
    assert t.nbytes == 24 and t.double().nbytes == 48  # 6 values of 4 and of 8 bytes
    assert t.size() == (2, 3) and t.size(-1) == 3
    assert t.dtype == np.float32 and t.device == device
    assert t.requires_grad and t.is_leaf and t.grad is None and t.grad_fn is None


def test_numpy_item_tolist(device):
    t = mg.tensor([[1.5, 2.0]], device=device)
    assert isinstance(t.numpy(), np.ndarray)
    np.testing.assert_array_equal(t.numpy(), [[1.5, 2.0]])
    assert t.tolist() == [[1.5, 2.0]]
    assert t[0, 0].item() == 1.5 and isinstance(t[0, 0].item(), float)
    assert mg.tensor(7, device=device).item() == 7
    assert float(t[0, 1]) == 2.0 and int(t[0, 1]) == 2


def test_data_is_the_live_array(device):
    t = mg.zeros(3, device=device)
    t.data[1] = 5.0
    assert t.tolist() == [0.0, 5.0, 0.0]
    p = mg.zeros(2, device=device, requires_grad=True)
    p.data[...] = mg.tensor([1.0, 2.0], device=device).data  # an optimizer step
    assert p.tolist() == [1.0, 2.0] and p.requires_grad


def test_tensor_copies_its_data_from_numpy_but_from_numpy_shares_it():
    array = np.array([1.0, 2.0], dtype=np.float32)
    copied, shared = mg.tensor(array), mg.from_numpy(array)
    array[0] = 9.0
    assert copied.tolist() == [1.0, 2.0] and shared.tolist() == [9.0, 2.0]


def test_detach_shares_data_and_leaves_the_graph(device):
    x = mg.randn(3, device=device, requires_grad=True)
    y = x * 2.0
    d = y.detach()
    assert d.array is y.array and d.grad_fn is None and not d.requires_grad and d.is_leaf


def test_requires_grad_and_grad_assignment(device):
    t = mg.zeros(2, device=device)
    assert t.requires_grad_() is t and t.requires_grad
    t.grad = mg.ones(2, device=device)
    assert t.grad.tolist() == [1.0, 1.0]
    t.grad = None
    assert t.grad is None
    with pytest.raises(RuntimeError, match="only be turned off on a leaf"):
        (t * 2.0).requires_grad = False


def test_equality_is_elementwise_and_tensors_hash_by_identity(device):
    a, b = mg.tensor([1.0, 2.0], device=device), mg.tensor([1.0, 3.0], device=device)
    assert (a == b).tolist() == [True, False] and (a != b).tolist() == [False, True]
    assert len({a, b, a}) == 2
    assert {a: "a"}[a] == "a"


def test_comparisons_return_bool_tensors_without_grad(device):
    x = mg.tensor([1.0, 2.0, 3.0], device=device, requires_grad=True)
    for result in (x < 2, x <= 2, x > 2, x >= 2, x == 2, x != 2, (x > 1) & (x < 3), ~(x > 1)):
        assert result.dtype == np.bool_ and not result.requires_grad
    assert (x > 1.5).tolist() == [False, True, True]


def test_conversions(device):
    x = mg.tensor([1.7, -2.2], device=device)
    assert x.double().dtype == np.float64 and x.double().float().dtype == np.float32
    assert x.long().tolist() == [1, -2]
    assert x.to(mg.float64).dtype == np.float64
    assert x.to(device) is x and x.cpu().device == "cpu"
    assert x.to("cpu", mg.float64).dtype == np.float64
    assert isinstance(x.cpu().numpy(), np.ndarray)


def test_cpu_to_cuda_round_trip_is_differentiable(device):
    if device == "cpu":
        pytest.skip("needs a GPU: runs in the cuda case")
    x = mg.randn(3, requires_grad=True)
    y = x.cuda() * 2.0
    assert y.device == "cuda"
    y.cpu().sum().backward()
    assert x.grad.device == "cpu" and x.grad.tolist() == [2.0, 2.0, 2.0]


def test_shape_helpers(device):
    x = mg.arange(6, device=device).float().reshape(2, 3)
    assert x.T.shape == (3, 2) and x.mT.shape == (3, 2)
    assert x.view(3, 2).shape == (3, 2) and x.reshape((6,)).shape == (6,)
    assert x.unsqueeze(0).squeeze(0).shape == (2, 3)
    assert x.expand(4, 2, 3).shape == (4, 2, 3) and x[None].expand(4, -1, -1).shape == (4, 2, 3)
    assert x.flatten().tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    assert x.contiguous() is x
    assert [p.shape for p in x.split(2, dim=1)] == [(2, 2), (2, 1)]
    assert [p.shape for p in x.chunk(2, dim=0)] == [(1, 3), (1, 3)]


def test_max_and_min_with_dim_give_values_and_indices(device):
    x = mg.tensor([[1.0, 5.0, 3.0], [7.0, 2.0, 0.0]], device=device)
    values, indices = x.max(dim=1)
    assert values.tolist() == [5.0, 7.0] and indices.tolist() == [1, 0]
    assert x.min(dim=0).values.tolist() == [1.0, 2.0, 0.0]
    assert x.max().item() == 7.0 and x.min().item() == 0.0


def test_repr_shows_values_and_grad_fn(device):
    x = mg.tensor([1.0, 2.0], device=device, requires_grad=True)
    assert repr(x).startswith("tensor([1., 2.]") and "requires_grad=True" in repr(x)
    assert "grad_fn=<Mul>" in repr(x * 2.0)
    assert "dtype=float64" in repr(x.double().detach())


def test_setitem_writes_in_place_without_grad(device):
    t = mg.zeros(2, 3, device=device)
    t[0, 1:] = 1.0
    t[1] = mg.tensor([4.0, 5.0, 6.0], device=device)
    assert t.tolist() == [[0.0, 1.0, 1.0], [4.0, 5.0, 6.0]]


def test_in_place_helpers(device):
    t = mg.ones(3, device=device)
    assert t.zero_() is t and t.tolist() == [0.0, 0.0, 0.0]
    t.fill_(2.5)
    t.copy_(t * 2.0)
    assert t.tolist() == [5.0, 5.0, 5.0]


def test_in_place_operators_change_values_and_keep_the_tensor(device):
    t = mg.ones(2, 3, device=device)
    same = t
    t += 1.0
    t -= mg.tensor([0.0, 1.0, 2.0], device=device)  # broadcast into t's shape
    t *= 3
    t /= 2.0
    assert t is same and t.shape == (2, 3) and t.dtype == np.float32
    np.testing.assert_allclose(t.numpy(), [[3.0, 1.5, 0.0], [3.0, 1.5, 0.0]])


def test_in_place_operators_refuse_what_does_not_fit(device):
    t = mg.ones(3, device=device)
    with pytest.raises(mg.errors.ShapeError, match=r"\+=: the result has shape \(2, 3\)"):
        t += mg.ones(2, 3, device=device)
    n = mg.arange(3, device=device)
    with pytest.raises(TypeError, match="/=: the result has dtype float64.*dtype int64"):
        n /= 2
    n += 2  # int into int is fine
    assert n.tolist() == [2, 3, 4]


def test_hand_written_gradient_descent_updates_the_leaves_in_place(device):
    """The loop of PyTorch's tutorials: w -= lr * w.grad under no_grad, then w.grad.zero_()."""
    mg.manual_seed(0)
    x = mg.randn(16, 3, device=device)
    y = x @ mg.tensor([1.0, -2.0, 0.5], device=device) + 0.25
    w = mg.zeros(3, device=device, requires_grad=True)
    b = mg.zeros(1, device=device, requires_grad=True)
    for _ in range(300):
        loss = ((x @ w + b - y) ** 2).mean()
        loss.backward()
        with mg.no_grad():
            w -= 0.1 * w.grad
            b -= 0.1 * b.grad
        w.grad.zero_()
        b.grad.zero_()
    assert w.is_leaf and w.requires_grad and b.is_leaf
    np.testing.assert_allclose(w.numpy(), [1.0, -2.0, 0.5], atol=1e-3)
    np.testing.assert_allclose(b.numpy(), [0.25], atol=1e-3)


def test_in_place_operators_with_grad_on(device):
    w = mg.ones(3, device=device, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"leaf tensor that requires grad.*\(-=\).*no_grad"):
        w -= 1.0
    h = w * 2.0  # made by an op: += is recorded into h, which stays the same object
    before = h
    h += w
    assert h is before and h.grad_fn.name == "Add"
    h.sum().backward()
    assert w.grad.tolist() == [3.0, 3.0, 3.0]
    plain = mg.zeros(3, device=device)  # nothing requires grad: in place, grad mode or not
    same = plain
    plain += 1.0
    assert plain is same and plain.tolist() == [1.0, 1.0, 1.0]


def test_zero_fill_copy_refuse_a_leaf_that_requires_grad(device):
    w = mg.ones(3, device=device, requires_grad=True)
    for change in (w.zero_, lambda: w.fill_(2.0), lambda: w.copy_(mg.zeros(3, device=device))):
        with pytest.raises(RuntimeError, match="leaf tensor that requires grad"):
            change()
    h = w * 2.0
    assert h.zero_() is h and h.grad_fn.name == "SetItem"  # recorded: no gradient reaches w
    h.sum().backward()
    assert w.grad.tolist() == [0.0, 0.0, 0.0]
    with mg.no_grad():  # as an optimizer or an init function does
        w.fill_(mg.tensor(3.0, device=device))
        assert w.tolist() == [3.0, 3.0, 3.0]
        w.zero_()
    assert w.tolist() == [0.0, 0.0, 0.0] and w.requires_grad


def test_leaf_gradients_are_each_leafs_own(device):
    """As PyTorch's: changing one leaf's .grad in place changes nothing else, even where
    the engine got one array for several (Add's two inputs, a sum's broadcast view)."""
    a = mg.randn(3, device=device, requires_grad=True)
    b = mg.randn(3, device=device, requires_grad=True)
    seed = mg.ones(3, device=device)
    (a + b).backward(seed)
    a.grad.zero_()
    b.grad *= 2.0
    assert a.grad.tolist() == [0.0] * 3 and b.grad.tolist() == [2.0] * 3
    assert seed.tolist() == [1.0] * 3
    x = mg.randn(2, 4, device=device, requires_grad=True)
    x.sum().backward()  # dL/dx: 1 spread over x
    x.grad *= 3.0
    assert x.grad.tolist() == [[3.0] * 4] * 2
    scalar = mg.tensor(1.0, device=device, requires_grad=True)
    for _ in range(2):  # the second backward adds to .grad: still a 0-d array, still writable
        (scalar * 3.0).backward()
    assert scalar.grad.zero_().item() == 0.0
    leaf = mg.randn(3, device=device, requires_grad=True)
    leaf.backward(seed)  # a leaf's gradient is the seed: a copy of it
    leaf.grad.zero_()
    assert seed.tolist() == [1.0] * 3


# -- creation functions and the seed ---------------------------------------------------------


def test_creation_shapes_and_values(device):
    assert mg.zeros(2, 3, device=device).tolist() == [[0.0] * 3] * 2
    assert mg.ones((2,), device=device).tolist() == [1.0, 1.0]
    assert mg.full((2, 2), 3.0, device=device).tolist() == [[3.0, 3.0], [3.0, 3.0]]
    assert mg.arange(2, 8, 2, device=device).tolist() == [2, 4, 6]
    assert mg.eye(2, device=device).tolist() == [[1.0, 0.0], [0.0, 1.0]]
    assert mg.linspace(0, 1, 3, device=device).tolist() == [0.0, 0.5, 1.0]
    assert mg.zeros_like(mg.ones(2, 2, device=device)).shape == (2, 2)
    assert mg.randn(2, 3, device=device, requires_grad=True).requires_grad


def test_manual_seed_repeats_random_draws(device):
    mg.manual_seed(123)
    first = (mg.randn(4, device=device), mg.rand(4, device=device), mg.randint(0, 9, (4,)))
    mg.manual_seed(123)
    second = (mg.randn(4, device=device), mg.rand(4, device=device), mg.randint(0, 9, (4,)))
    for a, b in zip(first, second):
        assert a.tolist() == b.tolist()
    assert first[0].tolist() != mg.randn(4, device=device).tolist()


def test_random_ranges(device):
    mg.manual_seed(0)
    u = mg.rand(1000, device=device).numpy()
    assert u.min() >= 0.0 and u.max() < 1.0
    n = mg.randn(10_000, device=device).numpy()
    assert abs(n.mean()) < 0.05 and abs(n.std() - 1.0) < 0.05
    k = mg.randint(3, 7, (1000,), device=device).numpy()
    assert set(np.unique(k)) == {3, 4, 5, 6}


def test_module_level_functions(device):
    x = mg.tensor([-1.0, 0.5], device=device)
    assert mg.relu(x).tolist() == [0.0, 0.5]
    assert mg.abs(x).tolist() == [1.0, 0.5]
    assert mg.clamp(x, min=0.0).tolist() == [0.0, 0.5]
    assert mg.sum(x).item() == -0.5 and mg.mean(x).item() == -0.25
    assert mg.is_tensor(x) and not mg.is_tensor(x.numpy())
    np.testing.assert_allclose(mg.softmax(x, -1).numpy().sum(), 1.0, rtol=1e-6)
