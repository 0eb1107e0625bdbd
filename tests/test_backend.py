"""The backend's own numerics: the fast float32 normal CDF behind the exact GELU."""

import numpy as np
import pytest

import minigrad as mg
from minigrad import backend

scipy_special = pytest.importorskip("scipy.special")


def test_cdf_grid_holds_phi_and_the_rise_to_the_next_point():
    level, rise = backend._cdf_grid()
    h = 2.0**-backend._CDF_GRID_SHIFT
    x = np.arange(backend._CDF_GRID_FIRST, backend._CDF_GRID_LAST) * h
    assert level.dtype == rise.dtype == np.float32 and level.shape == rise.shape == x.shape
    np.testing.assert_allclose(level, scipy_special.ndtr(x), rtol=1e-7, atol=1e-45)
    want_rise = scipy_special.ndtr(x + h) - scipy_special.ndtr(x)  # near 1: float64 cancels
    np.testing.assert_allclose(rise, want_rise, rtol=1e-6, atol=1e-15)


def test_normal_cdf_float32_between_grid_points_is_within_the_interpolation_bound():
    # a dense sweep: every value within 1e-7 of Phi (the line's error is at most 7e-9, the
    # rest is float32's rounding), and within 1e-5 relative in the left tail
    x = np.linspace(-14.0, 9.0, 3_000_001).astype(np.float32)
    want = scipy_special.ndtr(x.astype(np.float64))
    got = backend.normal_cdf(x)
    assert np.max(np.abs(got - want)) < 1e-7
    normal = want > np.finfo(np.float32).tiny
    assert np.max(np.abs(got[normal] / want[normal] - 1.0)) < 1e-5


@pytest.mark.parametrize("size", [1, 7, 70_000, 200_003])
def test_normal_cdf_float32_matches_scipy(monkeypatch, size):
    monkeypatch.setattr(backend, "_CHUNK", 1 << 16)  # below, at and across chunk edges
    x = np.random.default_rng(size).normal(scale=4.0, size=size).astype(np.float32)
    x[0] = 0.0
    got = backend.normal_cdf(x)
    want = scipy_special.ndtr(x.astype(np.float64))
    assert got.dtype == np.float32 and got.shape == x.shape
    assert got[0] == np.float32(0.5)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)


def test_normal_cdf_keeps_the_tails():
    # the grid holds Phi itself, not 1 - Phi(-x): tiny values keep their digits
    x = np.array([-12.0, -8.0, -5.0, 5.0], dtype=np.float32)
    got = backend.normal_cdf(x)
    want = scipy_special.ndtr(x.astype(np.float64))
    np.testing.assert_allclose(got[:3], want[:3], rtol=1e-5)
    assert got[3] == np.float32(want[3])


def test_normal_cdf_float32_beyond_the_grid_and_at_nan():
    x = np.array([-np.inf, -1e30, -16.5, 8.5, 1e30, np.inf, np.nan], dtype=np.float32)
    got = backend.normal_cdf(x)
    np.testing.assert_array_equal(got[:-1], [0.0, 0.0, 0.0, 1.0, 1.0, 1.0])
    assert np.isnan(got[-1])


def test_normal_cdf_float64_is_erf_based():
    x = np.linspace(-6, 6, 101)
    want = 0.5 * (1.0 + scipy_special.erf(x / np.sqrt(2.0)))
    np.testing.assert_allclose(backend.normal_cdf(x), want, rtol=1e-15, atol=1e-300)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_normal_cdf_writes_into_out(dtype):
    x = np.linspace(-6, 6, 101).astype(dtype).reshape(1, 101)
    out = np.full_like(x, np.nan)
    assert backend.normal_cdf(x, out=out) is out
    np.testing.assert_array_equal(out, backend.normal_cdf(x))


def _gelu(x):
    from minigrad import ops

    return ops.gelu(x)


def _gelu_tanh(x):
    from minigrad import ops

    return ops.gelu(x, "tanh")


def _softmax(x):
    return x.softmax(-1)


def _layer_norm(x):
    import minigrad as mg
    from minigrad import ops

    weight = mg.linspace(0.5, 1.5, x.shape[-1])
    return ops.layer_norm(x, (x.shape[-1],), weight, mg.ones(x.shape[-1]))


@pytest.mark.parametrize("op", [_gelu, _gelu_tanh, _softmax, _layer_norm])
def test_two_threads_compute_what_the_plain_call_does(op):
    # in_two_halves is a fast path: the same values as one call on the whole array
    import minigrad as mg

    x = mg.randn(4, 300, 300)  # 360,000 values: above PARALLEL_MIN_SIZE
    assert x.numel() >= 2 * backend.PARALLEL_MIN_SIZE
    x.requires_grad_()
    grad = mg.randn(4, 300, 300)

    def value_and_grad():
        y = op(x)
        y.backward(grad)
        result = (y.numpy().copy(), x.grad.numpy().copy())
        x.grad = None
        return result

    mg.set_num_threads(2)  # the suite runs on one thread (tests/conftest.py)
    try:
        threaded = value_and_grad()
    finally:
        mg.set_num_threads(1)
    plain = value_and_grad()
    np.testing.assert_array_equal(threaded[0], plain[0])
    np.testing.assert_array_equal(threaded[1], plain[1])


@pytest.mark.parametrize(
    "rows, index_shape, row_shape",
    [(5, (12,), (3,)), (64, (4, 16), (8,)), (7, (9,), ()), (3, (0,), (2,)), (6, (5, 4), (2, 3))],
)
@pytest.mark.parametrize("path", ["one-hot product", "sorted reduceat"])
def test_index_add_of_rows_equals_np_add_at(rows, index_shape, row_shape, path, monkeypatch):
    """Both ways of summing an embedding's gradient give np.add.at's sums, repeated and
    negative indices included, and leave what was in the target."""
    if path == "sorted reduceat":
        monkeypatch.setattr(backend, "ONE_HOT_MAX_SIZE", 0)
    rng = np.random.default_rng(0)
    index = rng.integers(-rows, rows, index_shape)
    values = rng.standard_normal(index_shape + row_shape).astype(np.float32)
    start = rng.standard_normal((rows,) + row_shape).astype(np.float32)
    expected, ours = start.copy(), start.copy()
    np.add.at(expected, index, values)
    backend.index_add(ours, index, values)
    np.testing.assert_allclose(ours, expected, rtol=1e-6, atol=1e-6)


def test_index_add_of_rows_keeps_an_inf_in_its_own_row():
    """In the one-hot product, 0 * inf would be nan in every row; the sum falls back to the
    sorted one, and only the row that got the inf holds it (as np.add.at)."""
    index = np.array([0, 2, 2, 1])
    values = np.ones((4, 3), np.float32)
    values[1, 0] = np.inf
    expected, ours = np.zeros((3, 3), np.float32), np.zeros((3, 3), np.float32)
    np.add.at(expected, index, values)
    backend.index_add(ours, index, values)
    np.testing.assert_array_equal(ours, expected)


def test_index_add_of_rows_out_of_range_raises():
    with pytest.raises(IndexError):
        backend.index_add(np.zeros((3, 2)), np.array([0, 3]), np.ones((2, 2)))
    with pytest.raises(IndexError):
        backend.index_add(np.zeros((3, 2)), np.array([0, -4]), np.ones((2, 2)))


@pytest.mark.parametrize("axes", [(2,), (1, 2)])
def test_sum_of_products_is_the_sum_of_the_product(axes):
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((3, 5, 7)).astype(np.float32) for _ in range(2))
    expected = (a * b).sum(axis=axes, keepdims=True)
    np.testing.assert_allclose(backend.sum_of_products(a, b, axes), expected, rtol=1e-5)
    out = np.empty(expected.shape, np.float32)
    assert backend.sum_of_products(a, b, axes, out=out) is out
    np.testing.assert_allclose(out, expected, rtol=1e-5)


@pytest.mark.parametrize("dtype, eps", [(np.float64, 1e-15), (np.float32, 1e-6)])
@pytest.mark.parametrize(
    "shape",
    [(3, 5), (64, 64), (4096, 1), (2, 3, 1024), (1, 8192)],
)
def test_row_and_column_sums_are_the_sums(shape, dtype, eps):
    a = np.random.default_rng(0).standard_normal(shape).astype(dtype)
    exact = a.astype(np.float64)  # float32 sums may differ in order, within eps * sum |a|
    row_scale = np.abs(exact).sum(axis=-1, keepdims=True)
    for got, want, scale in [
        (backend.row_means(a), exact.mean(axis=-1, keepdims=True), row_scale / shape[-1]),
        (backend.row_sums(a), exact.sum(axis=-1, keepdims=True), row_scale),
    ]:
        assert got.shape == want.shape and got.dtype == a.dtype
        assert np.all(np.abs(got - want) <= eps * scale)
    matrix, exact = a.reshape(-1, shape[-1]), exact.reshape(-1, shape[-1])
    got = backend.column_sums(matrix)
    assert got.shape == (shape[-1],) and got.dtype == a.dtype
    assert np.all(np.abs(got - exact.sum(axis=0)) <= eps * np.abs(exact).sum(axis=0))


def test_row_sums_of_a_strided_view():
    a = np.random.default_rng(0).standard_normal((128, 256))[:, ::2]  # not contiguous
    np.testing.assert_allclose(backend.row_sums(a), a.sum(axis=-1, keepdims=True))
    np.testing.assert_allclose(backend.row_means(a), a.mean(axis=-1, keepdims=True))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(8, 8), (1, 5), (7, 1), (5,), (3, 4, 5), (2, 4, 16, 16)])
def test_row_maxima_are_the_maxima_of_the_rows(shape, dtype):
    a = np.random.default_rng(0).standard_normal(shape).astype(dtype)
    got, want = backend.row_maxima(a), np.max(a, axis=-1, keepdims=True)
    assert got.shape == want.shape and got.dtype == a.dtype
    np.testing.assert_array_equal(got, want)
    transposed = a.T  # not C-ordered: the reduction's way
    np.testing.assert_array_equal(backend.row_maxima(transposed), transposed.max(-1, keepdims=True))


def test_row_maxima_of_rows_with_nan_inf_and_ties():
    a = np.array([[1, np.nan, 3], [-np.inf, -np.inf, -np.inf], [2, 5, 5], [np.inf, 0, 1]])
    np.testing.assert_array_equal(backend.row_maxima(a).ravel(), [np.nan, -np.inf, 5, np.inf])
    assert backend.row_maxima(np.zeros((0, 4))).shape == (0, 1)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
@pytest.mark.parametrize("size", [0, 1, 9])
def test_weighted_sum_is_a_0d_array(size, dtype):
    a = np.arange(size).astype(dtype)
    for weight in (-1.0, 0.25):
        got = backend.weighted_sum(a, weight)
        assert type(got) is np.ndarray and got.shape == ()
        assert got.dtype == (a.dtype if dtype != np.int64 else np.float64)
        np.testing.assert_allclose(got, a.sum() * weight)
    assert np.isnan(backend.weighted_sum(a.astype(np.float32), np.nan))


def test_an_array_laid_out_like_attention_heads():
    heads = np.zeros((2, 5, 3, 4), np.float32).transpose(0, 2, 1, 3)  # (B, H, T, d_k) view
    out = backend.empty_laid_out_like(heads)
    assert out.shape == heads.shape and out.strides == heads.strides
    assert out.transpose(0, 2, 1, 3).flags.c_contiguous  # so the merge back is a view
    matrix = np.zeros((3, 4), np.float64)
    assert backend.empty_laid_out_like(matrix).flags.c_contiguous
    assert backend.empty_laid_out_like(matrix.T).flags.f_contiguous  # as K^T in attention
    assert backend.empty_laid_out_like(np.zeros((4, 6))[::2, ::2]) is None  # neither contiguous


def test_matmul_gradients_are_laid_out_as_their_inputs():
    x = mg.randn(2, 6, 12, requires_grad=True)
    q = x.reshape(2, 6, 3, 4).transpose(1, 2)  # heads: (B, H, T, d_k) views of x
    k = (x * 2.0).reshape(2, 6, 3, 4).transpose(1, 2)
    q.retain_grad()
    k.retain_grad()
    scores = q @ k.transpose(-2, -1)
    grad = mg.randn(*scores.shape)
    scores.backward(grad)
    assert q.grad.data.strides == q.data.strides and k.grad.data.strides == k.data.strides
    qd, kd, g = q.data.astype(np.float64), k.data.astype(np.float64), grad.data.astype(np.float64)
    np.testing.assert_allclose(q.grad.data, g @ kd, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(k.grad.data, g.swapaxes(-1, -2) @ qd, rtol=1e-5, atol=1e-5)


def test_a_product_with_the_shape_of_b_is_laid_out_as_b():
    v = mg.randn(2, 6, 12).reshape(2, 6, 3, 4).transpose(1, 2)  # (B, H, T, d_k) view
    weights = mg.randn(2, 3, 6, 6)
    heads = weights @ v
    assert heads.data.strides == v.data.strides
    assert heads.transpose(1, 2).data.flags.c_contiguous  # the merge of the heads is a view
    np.testing.assert_allclose(heads.data, weights.data @ v.data, rtol=1e-6)
    # other dtypes: the promoted dtype, not b's
    mixed = weights.double() @ v
    assert mixed.dtype == mg.float64
    # a plain 2-D product stays C-ordered, whatever b's layout
    w = mg.randn(5, 5)
    assert (mg.randn(5, 5) @ w.T).data.flags.c_contiguous


SMALL = backend.SMALL_RANGE_SIZE


@pytest.mark.parametrize("size", [1, 5, SMALL, SMALL + 1, 3000])
@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint8])
def test_index_range_is_min_and_max_as_python_ints(size, dtype):
    a = np.random.default_rng(size).integers(0 if dtype == np.uint8 else -50, 100, size)
    a = a.astype(dtype).reshape(-1, 1) if size % 2 else a.astype(dtype)  # any shape
    lowest, highest = backend.index_range(a)
    assert (lowest, highest) == (int(a.min()), int(a.max()))
    assert type(lowest) is int and type(highest) is int
