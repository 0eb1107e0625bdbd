"""The fast layer's array numerics, each against the plain NumPy (or SciPy) expression it
stands for: the routines of minigrad.fast.arrays, the float32 normal CDF table of
minigrad.fast.activation, and how minigrad.fast.linalg lays out a product in memory.
(Splitting work between two threads: tests/test_threads.py.)"""

from __future__ import annotations

import numpy as np
import pytest

import minigrad as mg
from minigrad.fast import activation, arrays, linalg
from minigrad.ops.activation import normal_cdf

# -- reductions by BLAS -------------------------------------------------------------------


@pytest.mark.parametrize("dtype, eps", [(np.float64, 1e-15), (np.float32, 1e-6)])
@pytest.mark.parametrize("shape", [(3, 5), (64, 64), (4096, 1), (2, 3, 1024), (1, 8192), (7,)])
def test_row_means_and_sums_are_numpys(shape, dtype, eps):
    a = np.random.default_rng(0).standard_normal(shape).astype(dtype)
    exact = a.astype(np.float64)  # float32 sums may differ in order, within eps * sum |a|
    row_scale = np.abs(exact).sum(axis=-1, keepdims=True)
    for got, want, scale in [
        (arrays.row_means(a), exact.mean(axis=-1, keepdims=True), row_scale / shape[-1]),
        (arrays.row_sums(a), exact.sum(axis=-1, keepdims=True), row_scale),
        (arrays.row_sums(a, keepdims=False), exact.sum(axis=-1), row_scale[..., 0]),
    ]:
        assert np.shape(got) == want.shape and got.dtype == a.dtype
        assert np.all(np.abs(got - want) <= eps * scale)


@pytest.mark.parametrize("dtype, eps", [(np.float64, 1e-15), (np.float32, 1e-6)])
@pytest.mark.parametrize("shape", [(3, 5), (64, 64), (4096, 1), (1, 8192)])
def test_column_sums_are_numpys(shape, dtype, eps):
    a = np.random.default_rng(0).standard_normal(shape).astype(dtype)
    exact = a.astype(np.float64)
    got = arrays.column_sums(a)
    assert got.shape == (shape[-1],) and got.dtype == a.dtype
    assert np.all(np.abs(got - exact.sum(axis=0)) <= eps * np.abs(exact).sum(axis=0))


def test_row_sums_and_means_of_a_strided_view():
    a = np.random.default_rng(0).standard_normal((128, 256))[:, ::2]  # not contiguous
    np.testing.assert_allclose(arrays.row_sums(a), a.sum(axis=-1, keepdims=True))
    np.testing.assert_allclose(arrays.row_means(a), a.mean(axis=-1, keepdims=True))


def test_integer_reductions_are_numpys_exactly():
    a = np.arange(24, dtype=np.int64).reshape(4, 6)
    np.testing.assert_array_equal(arrays.row_sums(a), a.sum(axis=-1, keepdims=True))
    np.testing.assert_array_equal(arrays.row_means(a), a.mean(axis=-1, keepdims=True))
    np.testing.assert_array_equal(arrays.column_sums(a), a.sum(axis=0))
    assert arrays.row_sums(a).dtype == a.sum(axis=-1).dtype


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
@pytest.mark.parametrize("shape", [(8, 8), (1, 5), (7, 1), (5,), (3, 4, 5), (2, 4, 16, 16)])
def test_row_maxima_are_numpys(shape, dtype):
    a = (np.random.default_rng(0).standard_normal(shape) * 10).astype(dtype)
    got, want = arrays.row_maxima(a), np.max(a, axis=-1, keepdims=True)
    assert got.shape == want.shape and got.dtype == a.dtype
    np.testing.assert_array_equal(got, want)
    transposed = a.T  # not C-ordered: the reduction's way
    np.testing.assert_array_equal(arrays.row_maxima(transposed), transposed.max(-1, keepdims=True))


def test_row_maxima_of_rows_with_nan_inf_and_ties():
    a = np.array([[1, np.nan, 3], [-np.inf, -np.inf, -np.inf], [2, 5, 5], [np.inf, 0, 1]])
    np.testing.assert_array_equal(arrays.row_maxima(a), a.max(axis=-1, keepdims=True))
    np.testing.assert_array_equal(arrays.row_maxima(a).ravel(), [np.nan, -np.inf, 5, np.inf])
    assert arrays.row_maxima(np.zeros((0, 4))).shape == (0, 1)


@pytest.mark.parametrize("axes", [(2,), (1, 2), (0,)])
def test_sum_of_products_is_the_sum_of_the_product(axes):
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((3, 5, 7)).astype(np.float32) for _ in range(2))
    expected = (a * b).sum(axis=axes, keepdims=True)
    np.testing.assert_allclose(arrays.sum_of_products(a, b, axes), expected, rtol=1e-5, atol=1e-6)
    out = np.empty(expected.shape, np.float32)
    assert arrays.sum_of_products(a, b, axes, out=out) is out
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
@pytest.mark.parametrize("size", [0, 1, 9])
def test_weighted_sum_is_the_weighted_sum_as_a_0d_array(size, dtype):
    a = np.arange(size).astype(dtype)
    for weight in (-1.0, 0.25):
        got = arrays.weighted_sum(a, weight)
        assert type(got) is np.ndarray and got.shape == ()
        assert got.dtype == (a.dtype if dtype != np.int64 else np.float64)
        np.testing.assert_allclose(got, a.sum() * weight)
    assert np.isnan(arrays.weighted_sum(a.astype(np.float32), np.nan))


# -- cached constants ---------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cached_constants_are_read_only_and_made_once(dtype):
    ones = arrays.ones_row(5, np.dtype(dtype))
    np.testing.assert_array_equal(ones, np.ones(5, dtype))
    column = arrays.constant_column(3, 0.5, np.dtype(dtype))
    np.testing.assert_array_equal(column, np.full((3, 1), 0.5, dtype))
    eps = arrays.scalar_operand(1e-5, np.zeros(2, dtype))
    assert eps.shape == () and eps.dtype == dtype and eps == dtype(1e-5)
    for constant in (ones, column, eps):
        assert constant.dtype == dtype and not constant.flags.writeable
    assert arrays.ones_row(5, np.dtype(dtype)) is ones
    assert arrays.constant_column(3, 0.5, np.dtype(dtype)) is column


def test_a_scalar_operand_of_a_non_numpy_array_is_the_float_itself():
    assert arrays.scalar_operand(0.5, np.float32(1.0)) == 0.5  # a NumPy scalar, not an array
    assert type(arrays.scalar_operand(0.5, np.float32(1.0))) is float


def test_is_small_counts_values_of_numpy_arrays():
    assert arrays.is_small(np.zeros(arrays.SMALL_SIZE))
    assert not arrays.is_small(np.zeros(arrays.SMALL_SIZE + 1))
    assert not arrays.is_small(np.float64(1.0))  # not an ndarray


# -- indices ------------------------------------------------------------------------------

SMALL_RANGE = arrays.SMALL_RANGE_SIZE


@pytest.mark.parametrize("size", [1, 5, SMALL_RANGE, SMALL_RANGE + 1, 3000])
@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint8])
def test_index_range_is_min_and_max_as_python_ints(size, dtype):
    a = np.random.default_rng(size).integers(0 if dtype == np.uint8 else -50, 100, size)
    a = a.astype(dtype).reshape(-1, 1) if size % 2 else a.astype(dtype)  # any shape
    lowest, highest = arrays.index_range(a)
    assert (lowest, highest) == (int(a.min()), int(a.max()))
    assert type(lowest) is int and type(highest) is int


@pytest.mark.parametrize("rows, columns", [(1, 1), (4, 3), (3, 4), (0, 5)])
def test_row_starts_are_the_flat_positions_of_the_rows(rows, columns):
    starts = arrays.row_starts(rows, columns)
    np.testing.assert_array_equal(starts, np.arange(rows) * columns)
    matrix = np.arange(rows * columns).reshape(rows, columns)
    np.testing.assert_array_equal(matrix.ravel()[starts], matrix[:, 0])
    assert not starts.flags.writeable


@pytest.mark.parametrize(
    "rows, index_shape, row_shape",
    [(5, (12,), (3,)), (64, (4, 16), (8,)), (7, (9,), ()), (3, (0,), (2,)), (6, (5, 4), (2, 3))],
)
@pytest.mark.parametrize("path", ["one-hot product", "sorted reduceat"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_add_rows_equals_np_add_at(rows, index_shape, row_shape, path, dtype, monkeypatch):
    """Both ways of summing an embedding's gradient give np.add.at's sums, repeated and
    negative indices included, and keep what was in the target."""
    if path == "sorted reduceat":
        monkeypatch.setattr(arrays, "ONE_HOT_MAX_SIZE", 0)
    rng = np.random.default_rng(0)
    index = rng.integers(-rows, rows, index_shape)
    values = rng.standard_normal(index_shape + row_shape).astype(dtype)
    start = rng.standard_normal((rows,) + row_shape).astype(dtype)
    expected, ours = start.copy(), start.copy()
    np.add.at(expected, index, values)
    arrays.add_rows(ours, index, values)
    np.testing.assert_allclose(ours, expected, rtol=1e-6, atol=1e-6)


def test_add_rows_keeps_an_inf_in_its_own_row():
    """In the one-hot product, 0 * inf would be nan in every row; the sum falls back to the
    sorted one, and only the row that got the inf holds it (as np.add.at)."""
    index = np.array([0, 2, 2, 1])
    values = np.ones((4, 3), np.float32)
    values[1, 0] = np.inf
    expected, ours = np.zeros((3, 3), np.float32), np.zeros((3, 3), np.float32)
    np.add.at(expected, index, values)
    arrays.add_rows(ours, index, values)
    np.testing.assert_array_equal(ours, expected)


@pytest.mark.parametrize("bad", [3, -4])
def test_add_rows_out_of_range_raises_as_numpy(bad):
    with pytest.raises(IndexError):
        np.add.at(np.zeros((3, 2)), np.array([0, bad]), np.ones((2, 2)))
    with pytest.raises(IndexError, match=f"index {bad} is out of bounds"):
        arrays.add_rows(np.zeros((3, 2)), np.array([0, bad]), np.ones((2, 2)))


# -- the float32 normal CDF of the exact GELU (fast.activation) ----------------------------


@pytest.fixture
def scipy_special():
    """SciPy's special functions: the oracle for Phi (a test without SciPy skips)."""
    return pytest.importorskip("scipy.special")


def _normal_cdf_float32(x):
    return activation._normal_cdf_float32(x, np.empty_like(x))


def test_cdf_grid_holds_phi_and_the_rise_to_the_next_point(scipy_special):
    level, rise = activation._cdf_grid()
    h = 2.0**-activation._CDF_GRID_SHIFT
    x = np.arange(activation._CDF_GRID_FIRST, activation._CDF_GRID_LAST) * h
    assert level.dtype == rise.dtype == np.float32 and level.shape == rise.shape == x.shape
    np.testing.assert_allclose(level, scipy_special.ndtr(x), rtol=1e-7, atol=1e-45)
    want_rise = scipy_special.ndtr(x + h) - scipy_special.ndtr(x)  # near 1: float64 cancels
    np.testing.assert_allclose(rise, want_rise, rtol=1e-6, atol=1e-15)


def test_normal_cdf_float32_between_grid_points_is_within_the_interpolation_bound(scipy_special):
    # a dense sweep: every value within 1e-7 of Phi (the line's error is at most 7e-9, the
    # rest is float32's rounding), and within 1e-5 relative in the left tail
    x = np.linspace(-14.0, 9.0, 3_000_001).astype(np.float32)
    want = scipy_special.ndtr(x.astype(np.float64))
    got = _normal_cdf_float32(x)
    assert np.max(np.abs(got - want)) < 1e-7
    normal = want > np.finfo(np.float32).tiny
    assert np.max(np.abs(got[normal] / want[normal] - 1.0)) < 1e-5


@pytest.mark.parametrize("size", [1, 7, 70_000, 200_003])
def test_normal_cdf_float32_matches_scipy(scipy_special, monkeypatch, size):
    monkeypatch.setattr(activation, "_CHUNK", 1 << 16)  # below, at and across chunk edges
    x = np.random.default_rng(size).normal(scale=4.0, size=size).astype(np.float32)
    x[0] = 0.0
    got = _normal_cdf_float32(x)
    want = scipy_special.ndtr(x.astype(np.float64))
    assert got.dtype == np.float32 and got.shape == x.shape
    assert got[0] == np.float32(0.5)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)


def test_normal_cdf_float32_keeps_the_tails(scipy_special):
    # the grid holds Phi itself, not 1 - Phi(-x): tiny values keep their digits
    x = np.array([-12.0, -8.0, -5.0, 5.0], dtype=np.float32)
    got = _normal_cdf_float32(x)
    want = scipy_special.ndtr(x.astype(np.float64))
    np.testing.assert_allclose(got[:3], want[:3], rtol=1e-5)
    assert got[3] == np.float32(want[3])


def test_normal_cdf_float32_beyond_the_grid_and_at_nan():
    x = np.array([-np.inf, -1e30, -16.5, 8.5, 1e30, np.inf, np.nan], dtype=np.float32)
    got = _normal_cdf_float32(x)
    np.testing.assert_array_equal(got[:-1], [0.0, 0.0, 0.0, 1.0, 1.0, 1.0])
    assert np.isnan(got[-1])


def test_normal_cdf_float32_writes_into_out_of_any_shape(scipy_special):
    x = np.linspace(-6, 6, 120).astype(np.float32).reshape(2, 3, 20)
    out = np.full_like(x, np.nan)
    assert activation._normal_cdf_float32(x, out) is out
    np.testing.assert_allclose(out, scipy_special.ndtr(x.astype(np.float64)), atol=1e-7)


def test_the_reference_normal_cdf_is_erf_based(scipy_special):
    x = np.linspace(-6, 6, 101)
    want = 0.5 * (1.0 + scipy_special.erf(x / np.sqrt(2.0)))
    np.testing.assert_allclose(normal_cdf(x), want, rtol=1e-15, atol=1e-300)


# -- the layout of products (fast.linalg) -------------------------------------------------


def test_an_array_laid_out_like_attention_heads():
    heads = np.zeros((2, 5, 3, 4), np.float32).transpose(0, 2, 1, 3)  # (B, H, T, d_k) view
    out = linalg._laid_out_like(heads, heads.shape)
    assert out.shape == heads.shape and out.strides == heads.strides
    assert out.transpose(0, 2, 1, 3).flags.c_contiguous  # so the merge back is a view
    matrix = np.zeros((3, 4), np.float64)
    assert linalg._laid_out_like(matrix, matrix.shape).flags.c_contiguous
    assert linalg._laid_out_like(matrix.T, (4, 3)).flags.f_contiguous  # as K^T in attention


@pytest.mark.parametrize(
    "why, x, product_shape",
    [
        ("another shape", np.zeros((3, 4)), (3, 5)),
        ("a vector", np.zeros(4), (4,)),
        ("no unit stride for BLAS", np.zeros((4, 6))[::2, ::2], (2, 3)),
    ],
)
def test_no_layout_to_copy_gives_none(why, x, product_shape):
    assert linalg._laid_out_like(x, product_shape) is None


def test_matmul_gradients_are_laid_out_as_their_inputs():
    x = mg.randn(2, 6, 12, requires_grad=True)
    q = x.reshape(2, 6, 3, 4).transpose(1, 2)  # heads: (B, H, T, d_k) views of x
    k = (x * 2.0).reshape(2, 6, 3, 4).transpose(1, 2)
    q.retain_grad()
    k.retain_grad()
    scores = q @ k.transpose(-2, -1)
    grad = mg.randn(*scores.shape)
    scores.backward(grad)
    if mg.fast.is_enabled():  # the kernel's layout; the reference's is NumPy's
        assert q.grad.array.strides == q.array.strides and k.grad.array.strides == k.array.strides
    qd, kd = q.array.astype(np.float64), k.array.astype(np.float64)
    g = grad.array.astype(np.float64)
    np.testing.assert_allclose(q.grad.array, g @ kd, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(k.grad.array, g.swapaxes(-1, -2) @ qd, rtol=1e-5, atol=1e-5)


def test_a_product_with_the_shape_of_b_is_laid_out_as_b():
    v = mg.randn(2, 6, 12).reshape(2, 6, 3, 4).transpose(1, 2)  # (B, H, T, d_k) view
    weights = mg.randn(2, 3, 6, 6)
    heads = weights @ v
    if mg.fast.is_enabled():
        assert heads.array.strides == v.array.strides
        assert heads.transpose(1, 2).array.flags.c_contiguous  # the merge of the heads: a view
    np.testing.assert_allclose(heads.array, weights.array @ v.array, rtol=1e-6)
    # other dtypes: the promoted dtype, not b's
    assert (weights.double() @ v).dtype == mg.float64
    # a plain 2-D product stays C-ordered, whatever b's layout
    w = mg.randn(5, 5)
    assert (mg.randn(5, 5) @ w.T).array.flags.c_contiguous
