"""The Tensor as Python and NumPy see it, and writing into it, each beside PyTorch:

- the protocols: ``np.asarray(t)`` (and so matplotlib), ``t`` as an index, ``f"{t:.4f}"``,
  ``t.type()``, ``t.nelement()``, ``mg.numel``;
- comparisons within a tolerance: ``isclose``, ``allclose``, ``equal``;
- writes along an index: ``scatter`` / ``scatter_``, ``scatter_add``, ``index_fill_``,
  ``masked_fill_``, ``index_select``, ``nonzero``;
- in-place writes inside the graph, as PyTorch records them: ``t[idx] = v``, ``t[idx] -= 1``,
  ``t += u``, ``t.add_(u)``..., with gradchecks (float64 finite differences, second order
  where it applies) and gradients compared with PyTorch's;
- the errors of indexing and assignment, in PyTorch's exception types.
"""

from __future__ import annotations

import functools
import re

import numpy as np
import pytest
from helpers import check_gradients, compare_with_torch

import minigrad as mg


def torch_or_skip():
    return pytest.importorskip("torch")


# -- np.asarray(t) ---------------------------------------------------------------------------


def test_asarray_is_the_numpy_array_sharing_memory():
    t = mg.tensor([[1.0, 2.0], [3.0, 4.0]])
    array = np.asarray(t)
    assert type(array) is np.ndarray and array.dtype == np.float32
    np.testing.assert_array_equal(array, t.numpy())
    array[0, 0] = 9.0  # shared, as torch's np.asarray(t)
    assert t.tolist()[0][0] == 9.0
    assert np.asarray(t, dtype=np.float64).dtype == np.float64
    copied = np.array(t, copy=True)
    copied[0, 0] = -1.0
    assert t.tolist()[0][0] == 9.0
    assert np.asarray(mg.tensor(3)).shape == () and np.asarray(mg.arange(3)).dtype == np.int64


def test_asarray_matches_torch_for_a_tensor_that_requires_grad():
    torch = torch_or_skip()
    with pytest.raises(RuntimeError, match="Can't call numpy"):
        np.asarray(torch.ones(2, requires_grad=True))
    x = mg.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"Can't call numpy\(\) on Tensor that requires grad"):
        np.asarray(x)
    np.testing.assert_array_equal(np.asarray(x.detach()), [1.0, 1.0])
    np.testing.assert_array_equal(np.asarray(torch.ones(2) * 2), np.asarray(mg.ones(2) * 2))


def test_asarray_refuses_a_gpu_tensor_with_a_type_error():
    class FakeGpuArray:  # not a NumPy array, so minigrad sees it on "cuda"
        shape, dtype, ndim, size = (2,), np.dtype(np.float32), 1, 2

    t = mg.Tensor._make(FakeGpuArray())
    with pytest.raises(TypeError, match=r"can't convert cuda tensor to numpy.*\.cpu\(\)"):
        np.asarray(t)


def test_numpy_array_times_tensor_stays_a_tensor():
    result = np.array([1.0, 2.0], dtype=np.float32) * mg.tensor([3.0, 4.0])
    assert isinstance(result, mg.Tensor) and result.tolist() == [3.0, 8.0]


def test_matplotlib_plots_a_tensor(tmp_path):
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    losses = mg.tensor([3.0, 2.0, 1.5, 1.2])
    figure = plt.figure()
    (line,) = plt.plot(losses)
    plt.hist(mg.randn(100), bins=10)
    np.testing.assert_array_equal(line.get_ydata(), losses.numpy())
    figure.savefig(tmp_path / "plot.png")
    plt.close(figure)


# -- t as an index, f"{t:.4f}", int(), float(), bool() ---------------------------------------


def test_a_one_element_integer_tensor_is_an_index():
    torch = torch_or_skip()
    data = list(range(20))
    mg.manual_seed(0)
    i = mg.randint(0, 10, ())
    j = int(i)
    assert data[i : i + 4] == data[j : j + 4] == data[torch.tensor(j) : torch.tensor(j) + 4]
    assert np.arange(20)[i] == j and range(30)[mg.tensor([j])] == j
    text = mg.arange(20)
    assert text[i : i + 4].tolist() == list(range(j, j + 4))
    assert [10, 20][mg.tensor(True)] == [10, 20][torch.tensor(True)] == 20


@pytest.mark.parametrize(
    "make", [lambda m: m.tensor(2.0), lambda m: m.tensor([1, 2]), lambda m: m.tensor([[1.5]])]
)
def test_other_tensors_are_no_index_as_in_torch(make):
    torch = torch_or_skip()
    with pytest.raises(TypeError):
        [1, 2, 3][make(torch)]
    with pytest.raises(TypeError, match="only integer tensors of a single element"):
        [1, 2, 3][make(mg)]


def test_format_as_torch():
    torch = torch_or_skip()
    for spec in ("", ".4f", ">12", ".2e"):
        assert f"{mg.tensor(1.23456):{spec}}" == f"{torch.tensor(1.23456):{spec}}"
        assert format(mg.tensor(7), spec) == format(torch.tensor(7), spec)
    loss = mg.tensor(2.5, requires_grad=True) * 1.0
    assert f"{loss:.4f}" == "2.5000"
    assert f"{mg.tensor([1.0, 2.0])}" == repr(mg.tensor([1.0, 2.0]))
    for make in (lambda m: m.tensor([1.5]), lambda m: m.tensor([1.0, 2.0])):
        with pytest.raises(TypeError):
            f"{make(torch):.2f}"
        with pytest.raises(TypeError, match="unsupported format string"):
            f"{make(mg):.2f}"


def test_int_float_bool_of_one_element():
    assert int(mg.tensor([3])) == 3 and float(mg.tensor(2.5)) == 2.5 and bool(mg.tensor([1]))
    with pytest.raises(ValueError):
        float(mg.ones(2))
    with pytest.raises(RuntimeError, match="ambiguous"):
        bool(mg.ones(2))


# -- type(), nelement(), numel ----------------------------------------------------------------

DTYPES = ["float32", "float64", "float16", "int64", "int32", "int16", "int8", "uint8", "bool"]


@pytest.mark.parametrize("dtype", DTYPES)
def test_type_names_as_torch(dtype):
    torch = torch_or_skip()
    ours = mg.zeros(2).to(getattr(mg, "bool_" if dtype == "bool" else dtype))
    assert ours.type() == torch.zeros(2).to(getattr(torch, dtype)).type()


def test_type_converts_to_a_dtype_or_a_named_type():
    torch = torch_or_skip()
    values = [1.7, -2.2, 3.9]
    for target in ("torch.LongTensor", "torch.DoubleTensor", "torch.BoolTensor"):
        ours, theirs = mg.tensor(values).type(target), torch.tensor(values).type(target)
        assert ours.type() == theirs.type() and ours.tolist() == theirs.tolist()
    assert mg.tensor(values).type(mg.int64).tolist() == [1, -2, 3]
    assert mg.tensor(values).type(mg.LongTensor).dtype == np.int64
    same = mg.tensor(values)
    assert same.type(mg.float32) is same and same.type("torch.FloatTensor") is same
    with pytest.raises(ValueError, match="invalid type 'torch.Bogus'"):
        same.type("torch.Bogus")


def test_type_keeps_the_graph():
    x = mg.tensor([1.0, 2.0], requires_grad=True)
    (x.type(mg.float64) * 3.0).sum().backward()
    assert x.grad.dtype == np.float32 and x.grad.tolist() == [3.0, 3.0]


def test_nelement_and_numel():
    torch = torch_or_skip()
    assert mg.zeros(2, 3, 4).nelement() == torch.zeros(2, 3, 4).nelement() == 24
    assert mg.numel(mg.zeros(5, 0)) == torch.numel(torch.zeros(5, 0)) == 0
    assert mg.numel(mg.tensor(1.0)) == 1


# -- isclose, allclose, equal ----------------------------------------------------------------

NAN, INF = float("nan"), float("inf")
CLOSE_CASES = {
    "near": ([1.0, 2.0, 3.0], [1.0 + 1e-6, 2.0, 3.1]),
    "nan": ([NAN, 1.0], [NAN, 1.0]),
    "inf": ([INF, -INF, INF], [INF, -INF, -INF]),
    "broadcast": ([[1.0, 2.0], [1.0, 2.5]], [1.0, 2.0]),
    "zeros": ([0.0, 1e-9], [0.0, 0.0]),
}


@pytest.mark.parametrize("case", CLOSE_CASES)
@pytest.mark.parametrize(
    "options", [{}, {"equal_nan": True}, {"rtol": 0.1}, {"atol": 0.2, "rtol": 0.0}], ids=str
)
def test_isclose_allclose_as_torch(case, options, device):
    torch = torch_or_skip()
    a, b = CLOSE_CASES[case]
    ours = mg.isclose(mg.tensor(a, device=device), mg.tensor(b, device=device), **options)
    theirs = torch.isclose(torch.tensor(a), torch.tensor(b), **options)
    assert ours.dtype == np.bool_ and ours.tolist() == theirs.tolist()
    assert mg.tensor(a, device=device).allclose(mg.tensor(b, device=device), **options) == (
        torch.allclose(torch.tensor(a), torch.tensor(b), **options)
    )


def test_isclose_refuses_what_torch_refuses():
    with pytest.raises(RuntimeError, match="isclose: dtypes must match, got float32 and float64"):
        mg.isclose(mg.ones(2), mg.ones(2).double())
    with pytest.raises(RuntimeError, match="allclose: dtypes must match"):
        mg.allclose(mg.ones(2), mg.ones(2).double())
    with pytest.raises(ValueError, match=r"isclose: shapes \(2, 3\) and \(2,\) do not broadcast"):
        mg.isclose(mg.ones(2, 3), mg.ones(2))
    with pytest.raises(TypeError, match="isclose: expected two tensors"):
        mg.isclose(mg.ones(2), 1.0)


@pytest.mark.parametrize(
    "a, b",
    [
        (lambda m: m.ones(2), lambda m: m.ones(2)),
        (lambda m: m.ones(2), lambda m: m.ones(3)),
        (lambda m: m.ones(2), lambda m: m.ones(2, dtype=m.float64)),
        (lambda m: m.ones(2), lambda m: m.ones(2, dtype=m.int64)),
        (lambda m: m.tensor([NAN]), lambda m: m.tensor([NAN])),
        (lambda m: m.tensor([1.0, 2.0]), lambda m: m.tensor([1.0, 2.5])),
    ],
    ids=["same", "shapes", "dtypes", "int and float", "nan", "values"],
)
def test_equal_as_torch(a, b):
    torch = torch_or_skip()
    assert mg.equal(a(mg), b(mg)) == torch.equal(a(torch), b(torch))
    assert a(mg).equal(b(mg)) == torch.equal(a(torch), b(torch))


# -- scatter, scatter_add, index_fill, masked_fill_, index_select, nonzero ------------------

ROW_INDEX = np.array([[3, 0], [1, 2], [0, 3]])  # distinct per row: no write races


def test_scatter_matches_torch_values_and_gradients(device):
    torch_or_skip()
    compare_with_torch(
        lambda x, src, index: x.scatter(1, index, src),
        lambda x, src, index: x.scatter(1, index, src),
        (3, 4),
        (3, 2),
        ROW_INDEX,
        device=device,
    )
    compare_with_torch(
        lambda x, index: x.scatter(0, index, 2.5),
        lambda x, index: x.scatter(0, index, 2.5),
        (4, 3),
        ROW_INDEX.T[:, :3] % 4,
        device=device,
    )


def test_scatter_gradcheck(device):
    check_gradients(
        lambda x, src, index: x.tanh().scatter(1, index, src * src) ** 2,
        (3, 4),
        (3, 3),  # larger than the index: only its leading part is read (torch's backward fails)
        ROW_INDEX,
        device=device,
        second_order=True,
    )


def test_scatter_in_place_makes_a_one_hot_and_keeps_the_tensor(device):
    torch = torch_or_skip()
    targets = [2, 0, 3]
    ours = mg.zeros(3, 4, device=device)
    same = ours.scatter_(1, mg.tensor(targets, device=device).unsqueeze(1), 1.0)
    theirs = torch.zeros(3, 4).scatter_(1, torch.tensor(targets).unsqueeze(1), 1.0)
    assert same is ours and ours.tolist() == theirs.tolist()
    mask = mg.zeros(2, 3, dtype=mg.bool_, device=device)
    mask.scatter_(1, mg.tensor([[2], [0]], device=device), True)
    assert mask.tolist() == [[False, False, True], [True, False, False]]


@pytest.mark.filterwarnings("ignore:The reduce argument of torch.scatter")
@pytest.mark.parametrize("reduce", ["add", "multiply"])
@pytest.mark.parametrize("src", ["tensor", "number"])
def test_scatter_reduce_as_torch(reduce, src, device):
    torch = torch_or_skip()
    index = [[0, 0], [1, 2], [3, 3]]  # repeats: they combine
    values = np.arange(1.0, 7.0).reshape(3, 2)
    ours_src = mg.tensor(values, device=device) if src == "tensor" else 2.0
    theirs_src = torch.tensor(values, dtype=torch.float32) if src == "tensor" else 2.0
    ours = mg.full((3, 4), 2.0, device=device)
    theirs = torch.full((3, 4), 2.0)
    ours.scatter_(1, mg.tensor(index, device=device), ours_src, reduce=reduce)
    theirs.scatter_(1, torch.tensor(index), theirs_src, reduce=reduce)
    assert ours.tolist() == theirs.tolist()


def test_scatter_reduce_has_no_derivative_as_in_torch():
    x = mg.ones(3, 4, requires_grad=True) * 1.0
    with pytest.raises(RuntimeError, match=r"scatter\(reduce='add'\) has no derivative"):
        x.scatter(1, mg.tensor(ROW_INDEX), 1.0, reduce="add")
    with pytest.raises(RuntimeError, match="reduce must be 'add' or 'multiply'"):
        mg.ones(3).scatter_(0, mg.tensor([0]), 1.0, reduce="max")


def test_scatter_add_matches_torch_with_repeats(device):
    torch_or_skip()
    repeats = np.array([[0, 0, 1], [2, 2, 2]])
    compare_with_torch(
        lambda x, src, index: x.scatter_add(1, index, src),
        lambda x, src, index: x.scatter_add(1, index, src),
        (2, 4),
        (2, 3),
        repeats,
        device=device,
    )
    check_gradients(
        lambda x, src, index: mg.scatter_add(x, 1, index, src).exp(),
        (2, 4),
        (2, 3),
        repeats,
        device=device,
    )
    x = mg.zeros(2, 4, device=device)
    assert x.scatter_add_(1, mg.tensor(repeats, device=device), mg.ones(2, 3)) is x
    assert x.tolist() == [[2.0, 1.0, 0.0, 0.0], [0.0, 0.0, 3.0, 0.0]]


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda x: x.scatter_(1, mg.tensor([[0.0]]), 1.0), RuntimeError, "expected an int64 index"),
        (lambda x: x.scatter_(1, mg.tensor([[4]]), 1.0), RuntimeError, "index 4 is out of bounds"),
        (lambda x: x.scatter_(1, mg.tensor([-1]), 1.0), RuntimeError, "as many dims"),
        (
            lambda x: x.scatter_(1, mg.zeros(3, 2, dtype=mg.int64), mg.ones(3, 1)),
            RuntimeError,
            "index of shape (3, 2) is larger than the tensor (3, 4) apart from dim 1, and src",
        ),
        (lambda x: x.index_select(0, mg.zeros(2, 2, dtype=mg.int64)), IndexError, "a vector"),
        (lambda x: x.index_select(0, mg.tensor([1.0])), RuntimeError, "expected an int64 index"),
        (lambda x: x.index_select(0, mg.tensor([3])), IndexError, "index 3 is out of bounds"),
        (lambda x: x.index_fill_(1, mg.tensor([4]), 1.0), IndexError, "index 4 is out of bounds"),
        (
            lambda x: x.index_fill_(0, mg.tensor([1]), mg.tensor([2.0])),
            RuntimeError,
            "a number or a 0-d tensor",
        ),
        (lambda x: x.masked_fill_(mg.zeros(3, 4), 1.0), RuntimeError, "must be a bool tensor"),
        (
            lambda x: x.masked_fill_(mg.zeros(2, 3, 4, dtype=mg.bool_), 1.0),
            ValueError,
            "masked_fill_: the result has shape (2, 3, 4)",
        ),
    ],
    ids=[
        "scatter float index", "scatter out of range", "scatter index dims",
        "scatter src too small", "index_select matrix", "index_select float",
        "index_select out of range", "index_fill out of range", "index_fill value",
        "masked_fill float mask", "masked_fill mask grows",
    ],
)  # fmt: skip
def test_writes_along_an_index_refuse_as_torch(call, error, message):
    with pytest.raises(error, match=re.escape(message)):
        call(mg.zeros(3, 4))


def test_index_select_matches_torch(device):
    torch_or_skip()
    index = np.array([2, 0, 2])  # a repeat: its gradient adds up
    for dim in (0, 1, -1):
        compare_with_torch(
            lambda x, i, d=dim: x.index_select(d, i),
            lambda x, i, d=dim: x.index_select(d, i),
            (3, 4),
            index,
            device=device,
        )
    check_gradients(lambda x, i: mg.index_select(x, 1, i) ** 2, (3, 4), index, device=device)


def test_index_fill_matches_torch(device):
    torch_or_skip()
    compare_with_torch(
        lambda x, i: x.index_fill(1, i, -1.5),
        lambda x, i: x.index_fill(1, i, -1.5),
        (3, 4),
        np.array([3, 1]),
        device=device,
    )
    compare_with_torch(  # a 0-d value tensor gets the sum of the gradients where it went
        lambda x, v, i: (x * 2.0).index_fill_(0, i, v),
        lambda x, v, i: (x * 2.0).index_fill_(0, i, v),
        (3, 4),
        np.array(0.5),
        np.array([0, 2]),
        device=device,
    )


def test_masked_fill_in_place_matches_torch(device):
    torch_or_skip()
    mask = np.array([[True, False, True, False], [False, False, True, True], [True] * 4])
    compare_with_torch(
        lambda x, v, m: (x * 1.0).masked_fill_(m, v),
        lambda x, v, m: (x * 1.0).masked_fill_(m, v),
        (3, 4),
        np.array(0.5),
        mask,
        device=device,
    )
    plain = mg.ones(3, 4, device=device)
    assert plain.masked_fill_(mg.tensor(mask[0], device=device), 0.0) is plain  # broadcast
    assert plain.tolist()[2] == [0.0, 1.0, 0.0, 1.0]


@pytest.mark.parametrize(
    "values",
    [[[1, 0], [0, 3]], [0, 2, 0, 5], 3, 0, [[0.0, 0.0]]],
    ids=["2d", "1d", "0d", "0d0", "none"],
)
def test_nonzero_matches_torch(values, device):
    torch = torch_or_skip()
    ours, theirs = mg.tensor(values, device=device), torch.tensor(values)
    assert ours.nonzero().shape == tuple(theirs.nonzero().shape)
    assert mg.nonzero(ours).tolist() == theirs.nonzero().tolist()
    assert ours.nonzero().dtype == np.int64
    ours_tuple, theirs_tuple = ours.nonzero(as_tuple=True), theirs.nonzero(as_tuple=True)
    assert [t.tolist() for t in ours_tuple] == [t.tolist() for t in theirs_tuple]


# -- in-place writes inside the graph ---------------------------------------------------------
# Each case is written once, for a module ``lib`` (minigrad or torch), and run with both.


def rows_into_a_plain_buffer(lib, w, x):
    """``logits[i] = model(x[i])``: a buffer that requires no grad, filled from the graph."""
    logits = lib.zeros(3, 4, dtype=lib.float64)
    for i in range(3):
        logits[i] = (x[i] * w).tanh()
    return logits * logits


def minus_one_at_the_targets(lib, logits, targets):
    """The backprop lecture's ``dlogits[range(n), Yb] -= 1``, on a tensor in the graph."""
    dlogits = logits.softmax(1).clone()  # (torch refuses a write into softmax's own output)
    dlogits[range(logits.shape[0]), targets] -= 1
    return dlogits * logits


def broadcast_value(lib, x, v):
    h = x * 2.0
    h[:, 1:3] = v  # v: (2,) broadcast over the rows
    return h.sin()


def slice_assignment(lib, x, v):
    h = x * 1.5
    h[1:3] = v * v
    h[0, ::2] = 0.5
    return h * h


def add_into_a_non_leaf(lib, x, u):
    h = x.sin()
    same = h
    h += u  # broadcast (4,) into (3, 4)
    h *= x
    h.sub_(u, alpha=0.5)
    h.div_(2.0)
    assert h is same
    return h


def copy_from_an_earlier_row(lib, x):
    """``h[0] = h[1] * 2``: the value is read from the tensor it is written into."""
    h = x * x
    h[0] = h[1] * 2.0
    return h


def plain_buffer_add_(lib, x):
    buffer = lib.zeros(4, dtype=lib.float64)
    buffer.add_(x.sin())
    buffer.mul_(x)
    return buffer


GRAPH_WRITES = {
    "rows into a plain buffer": (rows_into_a_plain_buffer, [(4,), (3, 4)]),
    "-= at fancy indices": (minus_one_at_the_targets, [(4, 5), np.array([1, 0, 4, 1])]),
    "broadcast value": (broadcast_value, [(3, 4), (2,)]),
    "slice assignment": (slice_assignment, [(4, 4), (2, 4)]),
    "+= on a non-leaf": (add_into_a_non_leaf, [(3, 4), (4,)]),
    "value read from the same tensor": (copy_from_an_earlier_row, [(3, 4)]),
    "add_ into a plain buffer": (plain_buffer_add_, [(4,)]),
}


@pytest.mark.parametrize("case", GRAPH_WRITES)
def test_graph_writes_match_torch(case, device):
    torch = torch_or_skip()
    fn, inputs = GRAPH_WRITES[case]
    compare_with_torch(
        functools.partial(fn, mg), functools.partial(fn, torch), *inputs, device=device
    )


@pytest.mark.parametrize("case", GRAPH_WRITES)
def test_graph_writes_gradcheck(case, device):
    fn, inputs = GRAPH_WRITES[case]
    check_gradients(functools.partial(fn, mg), *inputs, device=device, second_order=True)


def test_a_write_keeps_the_tensor_and_records_its_node(device):
    torch = torch_or_skip()
    buffer = mg.zeros(2, 3, device=device)
    w = mg.ones(3, device=device, requires_grad=True)
    same = buffer
    buffer[0] = w * 2.0
    theirs = torch.zeros(2, 3)
    theirs[0] = torch.ones(3, requires_grad=True) * 2.0
    assert buffer is same and buffer.requires_grad and not buffer.is_leaf
    assert buffer.is_leaf == theirs.is_leaf and buffer.grad_fn.name == "SetItem"
    h = w * 1.0
    assert h.add_(w) is h and h.grad_fn.name == "Add"
    assert h.zero_() is h and h.fill_(mg.tensor(3.0, device=device)) is h
    h.copy_(w * w)
    h.sum().backward()
    assert w.grad.tolist() == [2.0, 2.0, 2.0]  # copy_: only the copied values' gradient


def test_without_grad_nothing_is_recorded_and_memory_is_shared(device):
    x = mg.zeros(2, 3, device=device)
    row, data = x[0], x.data  # share x's memory
    x[0, 1] = 5.0
    x += 1.0
    assert row.tolist() == [1.0, 6.0, 1.0] and data.tolist()[1] == [1.0, 1.0, 1.0]
    assert x.is_leaf and not x.requires_grad
    w = mg.ones(3, device=device, requires_grad=True)
    with mg.no_grad():
        x[1] = w * 3.0
        w[0] = 2.0
    assert x.is_leaf and x.tolist()[1] == [3.0, 3.0, 3.0] and w.is_leaf
    integers = mg.zeros(3, dtype=mg.int64, device=device)
    integers[0] = w[0] * 1.5  # no gradient in an integer tensor: a plain write, as torch
    assert integers.tolist() == [3, 0, 0] and integers.is_leaf


def test_an_op_that_saved_the_old_values_keeps_them(device):
    """exp saves its output; writing into that output afterwards must not change exp's
    gradient (PyTorch refuses this at backward; minigrad writes into new memory)."""
    x = mg.randn(2, 3, dtype=mg.float64, device=device, requires_grad=True)
    y = x.exp()
    y[0] = 0.0
    y += 1.0
    (y * y).sum().backward()
    e = np.exp(x.numpy())
    expected = 2.0 * (e + 1.0) * e
    expected[0] = 0.0
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-12)


def test_ops_that_read_the_tensor_before_the_write_see_it_as_it_was(device):
    """``x += f(x)``: f read x before the write; the gradient is that of x + f(x)."""
    x = mg.randn(3, 4, dtype=mg.float64, device=device, requires_grad=True)
    h = x * 1.0
    before = h.exp()  # reads h before the write
    h += h.tanh()
    (before * h).sum().backward()
    got = x.grad.numpy()
    x.grad = None
    (x.exp() * (x + x.tanh())).sum().backward()
    np.testing.assert_allclose(got, x.grad.numpy(), rtol=1e-12)


def test_a_value_in_another_dtype_takes_the_buffers(device):
    buffer = mg.zeros(3, device=device)  # float32
    v = mg.tensor([1.0, 2.0], dtype=mg.float64, device=device, requires_grad=True)
    buffer[1:] = v * 3.0
    buffer += v.sum()
    assert buffer.dtype == np.float32
    (buffer * mg.tensor([1.0, 2.0, 3.0], device=device)).sum().backward()
    assert v.grad.dtype == np.float64 and v.grad.tolist() == [12.0, 15.0]


def test_hooks_before_a_write_see_the_old_version_as_in_torch():
    torch = torch_or_skip()
    seen = {}

    def note(key):
        def hook(grad):
            seen[key] = grad.tolist()

        return hook

    for lib in (mg, torch):
        x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        h = x * 2.0
        h.register_hook(note((lib.__name__, "before")))
        h.retain_grad()
        h.mul_(3.0)
        h.register_hook(note((lib.__name__, "after")))
        (h * lib.tensor([1.0, 2.0, 3.0])).sum().backward()
        seen[(lib.__name__, "grad")] = h.grad.tolist()
    for what in ("before", "after", "grad"):
        assert seen[("minigrad", what)] == seen[("torch", what)], what


@pytest.mark.parametrize(
    "write",
    [
        lambda lib, w: w.__setitem__(0, 1.0),
        lambda lib, w: w.__iadd__(1.0),
        lambda lib, w: w.add_(1.0),
        lambda lib, w: w.zero_(),
        lambda lib, w: w.masked_fill_(lib.tensor([True, False, True]), 0.0),
        lambda lib, w: w.scatter_(0, lib.tensor([0]), 0.0),
        lambda lib, w: w.index_fill_(0, lib.tensor([0]), 0.0),
    ],
    ids=["setitem", "+=", "add_", "zero_", "masked_fill_", "scatter_", "index_fill_"],
)
def test_a_leaf_that_requires_grad_is_refused_as_in_torch(write):
    torch = torch_or_skip()
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        write(torch, torch.ones(3, requires_grad=True))
    w = mg.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf tensor that requires grad"):
        write(mg, w)
    assert w.tolist() == [1.0, 1.0, 1.0] and w.is_leaf


# -- errors of indexing and assignment --------------------------------------------------------


@pytest.mark.parametrize(
    "index, message",
    [
        (1.5, "only integers, slices (`:`), ellipsis (`...`), None and long or bool tensors"),
        (np.array([1.0]), "tensors used as indices must be long, int or bool tensors"),
        ((0, 0, 0), "too many indices"),
        (np.array([True, False]), "boolean index did not match"),
        ([0, 7], "index out of range: [[0, 7]] on a tensor of shape (3, 4)"),
    ],
    ids=["float", "float array", "too many", "mask shape", "out of range"],
)
def test_bad_indices_raise_index_errors_as_torch(index, message, device):
    torch = torch_or_skip()
    with pytest.raises(IndexError):
        torch.zeros(3, 4)[torch.tensor(index) if isinstance(index, np.ndarray) else index]
    t = mg.zeros(3, 4, device=device)
    with pytest.raises(IndexError, match=re.escape(message)):
        t[index]
    with pytest.raises(IndexError, match=re.escape(message)):
        t[index] = 1.0
    with pytest.raises(IndexError, match=re.escape(message)):
        (t * mg.ones(3, 4, device=device, requires_grad=True))[index] = 1.0


@pytest.mark.parametrize("in_graph", [False, True], ids=["plain", "in the graph"])
def test_assignment_of_a_wrong_shape_is_a_runtime_error_as_torch(in_graph, device):
    torch = torch_or_skip()
    with pytest.raises(RuntimeError):
        torch.zeros(3, 4)[0] = torch.ones(3)
    t = mg.zeros(3, 4, device=device)
    if in_graph:
        t = t * mg.ones(3, 4, device=device, requires_grad=True)
    message = "a value of shape (3,) cannot be broadcast to the indexing result of shape (4,)"
    with pytest.raises(RuntimeError, match=re.escape(message)):
        t[0] = mg.ones(3, device=device)
    with pytest.raises(RuntimeError, match=re.escape("result of shape (2, 4) (t[index] = value")):
        t[1:] = mg.ones(3, 4, device=device)
    t[0] = mg.ones(1, 4, device=device)  # extra leading 1s are fine, as in torch


def test_assignment_of_no_number_is_a_type_error_as_torch():
    torch = torch_or_skip()
    with pytest.raises(TypeError):
        torch.zeros(3)[0] = "a"
    with pytest.raises(TypeError, match="can't assign a str to a tensor of dtype float32"):
        mg.zeros(3)[0] = "a"
    with pytest.raises(TypeError, match="can't assign a NoneType"):
        mg.zeros(3)[0] = None
    t = mg.zeros(3)
    t[:2] = np.array([1.0, 2.0])  # arrays and lists are values here (p.data[...] = array)
    t[2:] = [3.0]
    assert t.tolist() == [1.0, 2.0, 3.0]


def test_tensors_in_slices_and_ranges_are_indices(device):
    t = mg.arange(10, device=device)
    start = mg.tensor(2)
    assert t[start : start + 3].tolist() == [2, 3, 4]
    assert t[range(1, 4)].tolist() == [1, 2, 3]
    x = mg.zeros(4, dtype=mg.float64, device=device, requires_grad=True)
    (x * 1.0)[range(2)].sum().backward()
    assert x.grad.tolist() == [1.0, 1.0, 0.0, 0.0]
