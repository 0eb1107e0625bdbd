"""minigrad.backend, the device layer: which array library serves a device ("cpu": NumPy,
"cuda": CuPy), moving arrays between them, and the few calls in which the two differ.
(The fast layer's array routines: tests/test_fast_arrays.py.)"""

from __future__ import annotations

import math
import sys
import warnings

import numpy as np
import pytest

import minigrad as mg
from minigrad import backend
from minigrad.errors import DeviceError

# -- devices ------------------------------------------------------------------------------


@pytest.mark.parametrize("name, want", [("cpu", "cpu"), ("cuda", "cuda"), ("cuda:0", "cuda")])
def test_check_device_normalizes_the_name(name, want):
    if want == "cuda" and not backend.cuda_is_available():
        pytest.skip("no CUDA device")
    assert backend.check_device(name) == want


@pytest.mark.parametrize("wrong", ["gpu", "tpu", "", "CPU", None])
def test_check_device_refuses_an_unknown_device(wrong):
    with pytest.raises(ValueError, match="unknown device"):
        backend.check_device(wrong)


def test_cuda_without_a_gpu_is_a_device_error_with_the_install_hint():
    if backend.cuda_is_available():
        pytest.skip("a CUDA device is available")
    with pytest.raises(DeviceError, match="is not available") as error:
        backend.check_device("cuda")
    assert backend.GPU_INSTALL_HINT in str(error.value)
    assert backend.cuda_is_available() is False and mg.cuda.is_available() is False


@pytest.mark.parametrize(
    "args, kwargs, want",
    [
        (("cpu",), {}, ("cpu", None)),
        ((mg.float64,), {}, (None, np.dtype(np.float64))),
        (("cpu", mg.float32), {}, ("cpu", np.dtype(np.float32))),
        ((), {"device": "cpu", "dtype": "float16"}, ("cpu", np.dtype(np.float16))),
        ((), {}, (None, None)),
    ],
)
def test_device_and_dtype_reads_to_arguments_as_pytorch_takes_them(args, kwargs, want):
    assert backend.device_and_dtype(args, kwargs) == want


def test_device_and_dtype_checks_the_device():
    with pytest.raises(ValueError, match="unknown device"):
        backend.device_and_dtype((), {"device": "gpu"})


# -- which library holds an array ---------------------------------------------------------


@pytest.mark.parametrize("array", [np.zeros(3), np.float32(1.0), np.int64(2)])
def test_numpy_arrays_and_scalars_are_on_the_cpu(array):
    assert backend.is_numpy(array)
    assert backend.array_module(array) is np
    assert backend.device_of(array) == "cpu"


@pytest.mark.parametrize("not_an_array", [[1.0, 2.0], 3.0, None])
def test_what_is_not_a_numpy_array_is_not_numpy(not_an_array):
    assert not backend.is_numpy(not_an_array)


def test_the_cpu_is_served_by_numpy():
    assert backend.xp_for("cpu") is np


def test_moves_between_devices(device):
    a = np.arange(6.0).reshape(2, 3)
    on_device = backend.to_device(a, device)
    assert backend.device_of(on_device) == device
    assert backend.array_module(on_device) is backend.xp_for(device)
    back = backend.to_numpy(on_device)
    assert type(back) is np.ndarray
    np.testing.assert_array_equal(back, a)
    assert backend.to_device(on_device, device) is on_device  # already there: the same array
    assert backend.to_device(back, "cpu") is back


# -- where NumPy and CuPy differ ----------------------------------------------------------


def test_index_add_accumulates_repeated_indices(device):
    xp = backend.xp_for(device)
    target = xp.zeros((4, 2))
    index = xp.asarray([0, 2, 2, -1])
    backend.index_add(target, index, xp.ones((4, 2)))
    np.testing.assert_array_equal(backend.to_numpy(target), [[1, 1], [0, 0], [2, 2], [1, 1]])
    plain = np.zeros((4, 2))
    plain[[0, 2, 2, -1]] += 1  # what index_add is for: a plain += counts a repeat once
    assert plain[2, 0] == 1


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_erf_is_the_error_function(device, dtype):
    xp = backend.xp_for(device)
    x = np.linspace(-4, 4, 41).astype(dtype)
    got = backend.to_numpy(backend.erf(xp.asarray(x)))
    assert got.dtype == dtype
    want = [math.erf(value) for value in x.astype(np.float64)]
    np.testing.assert_allclose(got, want, rtol=1e-6 if dtype == np.float32 else 1e-14, atol=1e-7)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_erf_without_scipy_is_pythons(monkeypatch, dtype):
    monkeypatch.setitem(sys.modules, "scipy.special", None)  # importing it fails
    x = np.linspace(-4, 4, 9).astype(dtype).reshape(3, 3)
    got = backend.erf(x)
    assert got.dtype == dtype and got.shape == x.shape
    np.testing.assert_array_equal(
        got, np.array([math.erf(v) for v in x.ravel()], dtype).reshape(3, 3)
    )


def test_ignore_overflow_keeps_numpy_quiet_about_exp_overflowing(device):
    xp = backend.xp_for(device)
    x = xp.asarray([1000.0])
    before = np.geterr()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a warning would fail the test
        with backend.ignore_overflow(x):
            assert bool(xp.isinf(xp.exp(x)).all())
    assert np.geterr() == before  # only inside
