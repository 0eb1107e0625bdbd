"""Creation functions, dtypes, random generators and grad modes in PyTorch's forms: each call
is made the same way in minigrad and in torch, and must give the same shape, dtype and (where
nothing is random) values, or raise the same type of error."""

from __future__ import annotations

import numpy as np
import pytest

import minigrad as mg

# -- sizes and keywords ---------------------------------------------------------------------

SIZES = [
    ("zeros(2, 3)", lambda m: m.zeros(2, 3)),
    ("zeros((2, 3))", lambda m: m.zeros((2, 3))),
    ("zeros([2, 3])", lambda m: m.zeros([2, 3])),
    ("zeros(size=(2, 3))", lambda m: m.zeros(size=(2, 3))),
    ("zeros()", lambda m: m.zeros(())),
    ("ones(4, dtype=long)", lambda m: m.ones(4, dtype=m.long)),
    ("empty(2, 0)", lambda m: m.empty(2, 0)),
    ("full((2,), 7)", lambda m: m.full((2,), 7)),
    ("full([2, 2], 1.5)", lambda m: m.full([2, 2], 1.5)),
    ("full((2,), True)", lambda m: m.full((2,), True)),
    ("arange(5)", lambda m: m.arange(5)),
    ("arange(0, 1, 0.25)", lambda m: m.arange(0, 1, 0.25)),
    ("arange(3, dtype=float)", lambda m: m.arange(3, dtype=m.float)),
    ("eye(3, 2)", lambda m: m.eye(3, 2)),
    ("linspace(0, 1, 5)", lambda m: m.linspace(0, 1, 5)),
    ("tensor of 0-d tensors", lambda m: m.tensor([m.tensor(1.0), m.tensor(2.5)])),
    ("tensor of nested 0-d", lambda m: m.tensor([[m.tensor(1), 2], [3, m.tensor(4)]])),
    ("tensor(..., device=None)", lambda m: m.tensor([1, 2], device=None)),
    ("zeros_like(int)", lambda m: m.zeros_like(m.arange(3))),
    ("empty_like", lambda m: m.empty_like(m.ones(2, 3)).fill_(1.0)),  # (its values are garbage)
    ("full_like", lambda m: m.full_like(m.ones(2), 4.0)),
    ("ones_like(dtype=)", lambda m: m.ones_like(m.ones(2), dtype=m.float64)),
    ("LongTensor(data)", lambda m: m.LongTensor([1, 2, 3])),
    ("LongTensor(sizes)", lambda m: m.LongTensor(2, 3) * 0),
    ("FloatTensor(data)", lambda m: m.FloatTensor([[1, 2]])),
    ("FloatTensor(size)", lambda m: m.FloatTensor(3).zero_()),  # (uninitialized: NaN * 0 is NaN)
    ("DoubleTensor", lambda m: m.DoubleTensor([0.5])),
    ("BoolTensor", lambda m: m.BoolTensor([1, 0])),
    ("IntTensor", lambda m: m.IntTensor([1, 2])),
    ("ByteTensor", lambda m: m.ByteTensor([1, 255])),
    ("HalfTensor", lambda m: m.HalfTensor([1.5])),
    ("as_tensor(list)", lambda m: m.as_tensor([1, 2])),
    ("as_tensor(dtype=)", lambda m: m.as_tensor([1, 2], dtype=m.float32)),
    ("from_numpy", lambda m: m.from_numpy(np.arange(3, dtype=np.int16))),
]


def as_numpy(result):
    return result.numpy() if hasattr(result, "numpy") else np.asarray(result)


def torch_dtype_name(dtype) -> str:
    return str(dtype).replace("torch.", "")


@pytest.mark.parametrize("name, make", SIZES, ids=[name for name, _ in SIZES])
def test_creation_matches_torch(name, make):
    torch = pytest.importorskip("torch")
    ours, theirs = make(mg), make(torch)
    assert ours.shape == tuple(theirs.shape)
    assert str(ours.dtype) == torch_dtype_name(theirs.dtype)
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_creation_keywords(device):
    x = mg.zeros(2, 3, dtype=mg.float64, device=device, requires_grad=True)
    assert x.requires_grad and x.dtype == np.float64 and x.device == device
    for make in (mg.randn, mg.rand):
        y = make(size=(2, 3), dtype=mg.float64, device=device, requires_grad=True)
        assert y.shape == (2, 3) and y.dtype == np.float64 and y.requires_grad
    assert mg.randn_like(x, requires_grad=True).requires_grad
    assert mg.randint(5, (2,), device=device, dtype=mg.int32).dtype == np.int32
    assert mg.randperm(4, device=device).device == device


def test_as_tensor_shares_what_it_can():
    array = np.arange(3.0)  # float64 stays float64 and shares memory, as in torch.as_tensor
    shared = mg.as_tensor(array)
    array[0] = 10.0
    assert shared.dtype == np.float64 and shared.tolist() == [10.0, 1.0, 2.0]
    t = mg.ones(2)
    assert mg.as_tensor(t) is t
    assert mg.as_tensor(t, dtype=mg.float64).dtype == np.float64


def test_dtype_aliases_are_torchs():
    torch = pytest.importorskip("torch")
    for name in ("float", "double", "half", "int", "long", "short", "bool", "uint8", "int8",
                 "int16", "int32", "int64", "float16", "float32", "float64"):  # fmt: skip
        assert str(np.dtype(getattr(mg, name))) == torch_dtype_name(getattr(torch, name)), name
    assert mg.get_default_dtype() == np.float32
    assert mg.zeros(1, dtype=mg.float).dtype == np.float32


BAD_CALLS = [
    ("zeros(-1)", lambda m: m.zeros(-1)),
    ("zeros(2, -3)", lambda m: m.zeros(2, -3)),
    ("ones((2, -1))", lambda m: m.ones((2, -1))),
    ("randn(2.5)", lambda m: m.randn(2.5)),
    ("zeros(2, 3.0)", lambda m: m.zeros(2, 3.0)),
    ("randint(10, 3)", lambda m: m.randint(10, 3)),
    ("randint(10, 3.0)", lambda m: m.randint(10, 3.0)),
    ("randint(2.5, (3,))", lambda m: m.randint(2.5, (3,))),
    ("randint(5, 2, (3,))", lambda m: m.randint(5, 2, (3,))),
    ("randperm(-1)", lambda m: m.randperm(-1)),
    ("manual_seed(2**64)", lambda m: m.manual_seed(2**64)),
    ("manual_seed(-2**63-1)", lambda m: m.manual_seed(-(2**63) - 1)),
    ("IntTensor(2.5)", lambda m: m.IntTensor(2.5)),
    ("LongTensor(float tensor)", lambda m: m.LongTensor(m.tensor([1.0]))),
]


@pytest.mark.parametrize("name, call", BAD_CALLS, ids=[name for name, _ in BAD_CALLS])
def test_bad_arguments_raise_torchs_error_types(name, call):
    torch = pytest.importorskip("torch")
    with pytest.raises(Exception) as theirs:
        call(torch)
    with pytest.raises(type(theirs.value)) as ours:
        call(mg)
    assert "numpy" not in str(ours.value).lower()


def test_a_negative_dimension_is_named():
    with pytest.raises(RuntimeError, match=r"non-negative.*\(2, -3\)"):
        mg.zeros(2, -3)


# -- randint, randperm ----------------------------------------------------------------------

RANDINT_FORMS = [
    ("randint(high, size)", lambda m: m.randint(10, (3, 4)), 0, 10),
    ("randint(low, high, size)", lambda m: m.randint(3, 10, (50,)), 3, 10),
    ("randint(high, size=)", lambda m: m.randint(10, size=(5,)), 0, 10),
    ("randint(low, high, size=)", lambda m: m.randint(-2, 2, size=(20,)), -2, 2),
    ("randint(keywords)", lambda m: m.randint(low=2, high=5, size=(20,)), 2, 5),
    ("randint(high=, size=)", lambda m: m.randint(high=4, size=[7]), 0, 4),
    ("randint(dtype=float)", lambda m: m.randint(5, (4,), dtype=m.float32), 0, 5),
]


@pytest.mark.parametrize("name, call, low, high", RANDINT_FORMS, ids=[f[0] for f in RANDINT_FORMS])
def test_randint_takes_torchs_forms(name, call, low, high):
    torch = pytest.importorskip("torch")
    ours, theirs = call(mg), call(torch)
    assert ours.shape == tuple(theirs.shape)
    assert str(ours.dtype) == torch_dtype_name(theirs.dtype)
    values = ours.numpy()
    assert values.min() >= low and values.max() < high


def test_randint_draws_every_value():
    values = mg.randint(3, 7, (2000,)).numpy()
    assert set(values.tolist()) == {3, 4, 5, 6}


def test_randperm_is_a_permutation(device):
    torch = pytest.importorskip("torch")
    order = mg.randperm(50, device=device)
    assert order.dtype == np.int64 and str(torch.randperm(50).dtype) == "torch.int64"
    assert sorted(order.tolist()) == list(range(50))
    assert mg.randperm(0).shape == (0,)
    assert mg.randperm(6, dtype=mg.float32).dtype == np.float32


# -- normal, bernoulli ----------------------------------------------------------------------


def test_normal_in_its_forms():
    mg.manual_seed(0)
    a = mg.normal(2.0, 3.0, size=(20000,))
    assert abs(a.numpy().mean() - 2.0) < 0.1 and abs(a.numpy().std() - 3.0) < 0.1
    means = mg.tensor([0.0, 100.0])
    b = mg.normal(means, 0.01)
    assert b.shape == (2,) and abs(b.numpy() - [0.0, 100.0]).max() < 0.1
    c = mg.normal(mg.zeros(3, 1), mg.ones(1, 4))
    assert c.shape == (3, 4) and c.dtype == np.float32
    with pytest.raises(TypeError):
        mg.normal(0.0, 1.0)
    with pytest.raises(RuntimeError, match="std"):
        mg.normal(mg.zeros(2), -1.0)


def test_bernoulli_draws_its_probabilities():
    torch = pytest.importorskip("torch")
    probs = mg.tensor([0.0, 1.0, 0.3]).reshape(1, 3) * mg.ones(5000, 1)
    draws = mg.bernoulli(probs)
    assert draws.dtype == torch.bernoulli(torch.zeros(2)).numpy().dtype
    mean = draws.numpy().mean(axis=0)
    assert mean[0] == 0.0 and mean[1] == 1.0 and abs(mean[2] - 0.3) < 0.03
    with pytest.raises(RuntimeError):
        mg.bernoulli(mg.tensor([1.5]))


# -- seeds and generators -------------------------------------------------------------------


def test_manual_seed_repeats_runs_and_returns_the_default_generator():
    g = mg.manual_seed(7)
    assert g is mg.default_generator and g.initial_seed() == mg.initial_seed() == 7
    first = (mg.randn(3).tolist(), mg.randint(100, (3,)).tolist(), mg.randperm(5).tolist())
    mg.manual_seed(7)
    assert (mg.randn(3).tolist(), mg.randint(100, (3,)).tolist(), mg.randperm(5).tolist()) == first


def test_seeds_are_read_as_torch_reads_them():
    torch = pytest.importorskip("torch")
    for seed in (-1, -5, 0, 2**63, 2**64 - 1, 1.5, "3", np.int64(4)):
        torch.manual_seed(seed)
        mg.manual_seed(seed)
        assert mg.initial_seed() == torch.initial_seed(), seed
    assert mg.Generator().initial_seed() == torch.Generator().initial_seed()


def test_a_refused_seed_leaves_the_state_as_it_was():
    mg.manual_seed(11)
    expected = mg.Generator().manual_seed(11)
    for bad in (2**64, -(2**63) - 1, "x", None):
        with pytest.raises((ValueError, TypeError)):
            mg.manual_seed(bad)
    assert mg.initial_seed() == 11
    np.testing.assert_array_equal(mg.randn(4).numpy(), mg.randn(4, generator=expected).numpy())


def test_seed_picks_a_fresh_seed():
    first = mg.seed()
    assert mg.initial_seed() == first and 0 <= first < 2**64
    assert mg.seed() != first
    g = mg.Generator()
    assert g.seed() == g.initial_seed()


def test_a_generator_is_independent_of_the_default_one(device):
    g = mg.Generator(device=device).manual_seed(3)
    assert g.device == device
    mg.manual_seed(0)
    a = mg.randn(5, generator=g, device=device)
    mg.randn(100, device=device)  # draws from the default generator do not move g
    b = mg.randn(5, generator=g, device=device)
    g.manual_seed(3)
    np.testing.assert_array_equal(mg.randn(5, generator=g, device=device).numpy(), a.numpy())
    assert not np.array_equal(a.numpy(), b.numpy())


GENERATOR_USERS = {
    "randn": lambda g: mg.randn(4, generator=g),
    "rand": lambda g: mg.rand(2, 2, generator=g),
    "randint": lambda g: mg.randint(0, 50, (6,), generator=g),
    "randperm": lambda g: mg.randperm(8, generator=g),
    "multinomial": lambda g: mg.multinomial(mg.ones(10), 4, generator=g),
    "normal": lambda g: mg.normal(0.0, 1.0, (3,), generator=g),
    "bernoulli": lambda g: mg.bernoulli(mg.full((8,), 0.5), generator=g),
}


@pytest.mark.parametrize("name", GENERATOR_USERS)
def test_every_random_function_takes_a_generator(name):
    draw = GENERATOR_USERS[name]
    first = draw(mg.Generator().manual_seed(5)).numpy()
    mg.manual_seed(123)
    again = draw(mg.Generator().manual_seed(5)).numpy()
    np.testing.assert_array_equal(first, again)


def test_a_generator_of_the_wrong_kind_is_refused():
    with pytest.raises(TypeError, match="Generator"):
        mg.randn(2, generator=np.random.default_rng(0))


def test_rng_state_round_trips():
    mg.manual_seed(1)
    state = mg.get_rng_state()
    assert state.dtype == np.uint8 and state.ndim == 1
    first = mg.randn(5).numpy()
    mg.set_rng_state(state)
    np.testing.assert_array_equal(mg.randn(5).numpy(), first)
    g = mg.Generator().manual_seed(9)
    mg.rand(1, generator=g)
    saved = g.get_state()
    after = mg.rand(3, generator=g).numpy()
    assert g.set_state(saved) is g
    np.testing.assert_array_equal(mg.rand(3, generator=g).numpy(), after)
    with pytest.raises(RuntimeError, match="uint8"):
        mg.set_rng_state(mg.zeros(3))


def test_cuda_names_exist_and_seeding_works_without_a_gpu():
    assert isinstance(mg.cuda.is_available(), bool)
    assert mg.cuda.device_count() == int(mg.cuda.is_available())
    mg.cuda.manual_seed(0)
    mg.cuda.manual_seed_all(0)  # (nothing to seed without a GPU: no error, as in torch)


def test_cuda_seed_repeats_cuda_draws(device):
    if device != "cuda":
        pytest.skip("the cuda generator")
    mg.cuda.manual_seed(4)
    first = mg.randn(3, device="cuda").numpy()
    mg.cuda.manual_seed(4)
    np.testing.assert_array_equal(mg.randn(3, device="cuda").numpy(), first)


# -- grad modes -----------------------------------------------------------------------------


GRAD_DECORATORS = {
    "@no_grad": lambda m, f: m.no_grad(f),
    "@no_grad()": lambda m, f: m.no_grad()(f),
    "@enable_grad": lambda m, f: m.enable_grad(f),
    "@enable_grad()": lambda m, f: m.enable_grad()(f),
    "@inference_mode": lambda m, f: m.inference_mode(f),
    "@inference_mode()": lambda m, f: m.inference_mode()(f),
    "@inference_mode(False)": lambda m, f: m.inference_mode(False)(f),
    "@set_grad_enabled(False)": lambda m, f: m.set_grad_enabled(False)(f),
    "@set_grad_enabled(True)": lambda m, f: m.set_grad_enabled(True)(f),
}


@pytest.mark.parametrize("name", GRAD_DECORATORS)
@pytest.mark.parametrize("start", [True, False])
def test_grad_modes_decorate_as_in_torch(name, start):
    torch = pytest.importorskip("torch")
    decorate = GRAD_DECORATORS[name]
    for module in (mg, torch):
        with module.set_grad_enabled(start):
            decorated = decorate(module, lambda: module.is_grad_enabled())
            assert module.is_grad_enabled() is start  # decorating changes nothing yet
            seen = decorated()
            assert module.is_grad_enabled() is start
        if module is mg:
            ours = seen
    assert ours is seen


def test_a_decorated_function_records_no_graph():
    @mg.no_grad
    def double(x):
        return x * 2

    y = double(mg.ones(2, requires_grad=True))
    assert not y.requires_grad and y.grad_fn is None


def test_decorated_recursion_restores_the_mode():
    @mg.no_grad()
    def depth(n):
        return mg.is_grad_enabled() if n == 0 else depth(n - 1)

    assert depth(3) is False and mg.is_grad_enabled()


def test_inference_mode_as_context():
    torch = pytest.importorskip("torch")
    with mg.inference_mode():
        assert not mg.is_grad_enabled()
        assert not (mg.ones(2, requires_grad=True) * 2).requires_grad
    with mg.inference_mode(mode=False), torch.inference_mode(mode=False):
        assert mg.is_grad_enabled() == torch.is_grad_enabled() is True
    with mg.no_grad(), mg.inference_mode(False), torch.no_grad(), torch.inference_mode(False):
        assert mg.is_grad_enabled() == torch.is_grad_enabled() is True
    assert mg.is_grad_enabled()


def test_set_grad_enabled_as_a_call_and_as_a_context():
    torch = pytest.importorskip("torch")
    try:
        mg.set_grad_enabled(False), torch.set_grad_enabled(False)
        assert mg.is_grad_enabled() == torch.is_grad_enabled() is False
        assert not (mg.ones(2, requires_grad=True) * 2).requires_grad
    finally:
        mg.set_grad_enabled(True), torch.set_grad_enabled(True)
    assert mg.is_grad_enabled()
    for mode in (False, True):
        with mg.no_grad(), mg.set_grad_enabled(mode):
            assert mg.is_grad_enabled() is mode
        assert mg.is_grad_enabled()
    with mg.set_grad_enabled(False):
        with mg.set_grad_enabled(True):
            assert mg.is_grad_enabled()
        assert not mg.is_grad_enabled()
    assert mg.is_grad_enabled()


# -- PyTorch's very numbers -----------------------------------------------------------------

SAME_NUMBERS = {
    "randint(high, size)": lambda m, g: m.randint(7, (3, 5), generator=g),
    "randint(low, high, size)": lambda m, g: m.randint(-3, 1000, (40,), generator=g),
    "randint(64-bit range)": lambda m, g: m.randint(-(2**40), 2**41, (6,), generator=g),
    "rand": lambda m, g: m.rand(4, 3, generator=g),
    "rand(float64)": lambda m, g: m.rand(5, dtype=m.float64, generator=g),
    "rand(float16)": lambda m, g: m.rand(5, dtype=m.float16, generator=g),
    "randperm": lambda m, g: m.randperm(300, generator=g),
    "randperm(1)": lambda m, g: m.randperm(1, generator=g),
}


@pytest.mark.parametrize("name", SAME_NUMBERS)
@pytest.mark.parametrize("seed", [0, 42, -1, 2**40 + 7])
def test_cpu_draws_are_torchs_numbers(name, seed):
    torch = pytest.importorskip("torch")
    draw = SAME_NUMBERS[name]
    ours = draw(mg, mg.Generator().manual_seed(seed))
    theirs = draw(torch, torch.Generator().manual_seed(seed))
    assert ours.tolist() == theirs.tolist()
    mg.manual_seed(seed), torch.manual_seed(seed)  # the default generators too, in sequence
    first = [draw(mg, None).tolist(), draw(mg, None).tolist()]
    assert first == [draw(torch, None).tolist(), draw(torch, None).tolist()]
