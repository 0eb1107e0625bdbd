"""The backend's own numerics: the fast float32 normal CDF behind the exact GELU."""

import numpy as np
import pytest

from minigrad import backend

scipy_special = pytest.importorskip("scipy.special")


def test_erfc_fit_relative_error_is_below_its_bound():
    # the fit behind normal_cdf, evaluated in float64: relative error < 1.2e-7 for z >= 0
    z = np.linspace(0.0, 9.0, 200_001)
    t = 1.0 / (1.0 + 0.5 * z)
    poly = np.zeros_like(z)
    for coefficient in backend._ERFC_FIT[::-1]:
        poly = poly * t + float(coefficient)
    fitted = t * np.exp(-z * z + poly)
    assert np.max(np.abs(fitted / scipy_special.erfc(z) - 1.0)) < 1.2e-7


@pytest.mark.parametrize("size", [1, 7, 70_000, 200_003])  # below, at and across chunk edges
def test_normal_cdf_float32_matches_scipy(size):
    x = np.random.default_rng(size).normal(scale=4.0, size=size).astype(np.float32)
    x[0] = 0.0
    got = backend.normal_cdf(x)
    want = scipy_special.ndtr(x.astype(np.float64))
    assert got.dtype == np.float32 and got.shape == x.shape
    assert got[0] == np.float32(0.5)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=3e-7)


def test_normal_cdf_keeps_the_tails():
    # Phi(-|x|) is computed directly, not as 1 - Phi(|x|): tiny values keep their digits
    x = np.array([-12.0, -8.0, -5.0, 5.0], dtype=np.float32)
    got = backend.normal_cdf(x)
    want = scipy_special.ndtr(x.astype(np.float64))
    np.testing.assert_allclose(got[:3], want[:3], rtol=2e-5)
    assert got[3] == np.float32(want[3])


def test_normal_cdf_float64_is_erf_based():
    x = np.linspace(-6, 6, 101)
    want = 0.5 * (1.0 + scipy_special.erf(x / np.sqrt(2.0)))
    np.testing.assert_allclose(backend.normal_cdf(x), want, rtol=1e-15, atol=1e-300)
