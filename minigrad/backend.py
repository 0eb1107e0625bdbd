"""The array backend: NumPy on "cpu", CuPy on "cuda".

This is the only module that imports CuPy, and only when a "cuda" device is asked for.
Everything that differs between the two libraries lives here, behind small named functions,
so that the ops above can be written once against ``xp`` (whichever module holds the array).
"""

from __future__ import annotations

import contextlib

import numpy as np

DEVICES = ("cpu", "cuda")
GPU_INSTALL_HINT = (
    'GPU support needs CuPy and an NVIDIA GPU: pip install "minigrad[gpu]" (brings cupy-cuda12x)'
)

_cupy = None  # the cupy module once imported, False if importing it failed
_cupy_error = ""


def _import_cupy():
    """Import CuPy on first use; return the module or None if it is not usable."""
    global _cupy, _cupy_error
    if _cupy is None:
        try:
            import cupy

            if cupy.cuda.runtime.getDeviceCount() < 1:
                raise RuntimeError("no CUDA device found")
            _cupy = cupy
        except Exception as error:  # ImportError, CUDARuntimeError, ...
            _cupy, _cupy_error = False, f"{type(error).__name__}: {error}"
    return _cupy or None


def cuda_is_available() -> bool:
    """True when CuPy imports and sees at least one GPU."""
    return _import_cupy() is not None


def check_device(device) -> str:
    """Normalize a device name ("cpu", "cuda", "cuda:0") and make sure it can be used."""
    name = str(device).split(":")[0]
    if name not in DEVICES:
        raise ValueError(f"unknown device {device!r}: expected 'cpu' or 'cuda'")
    if name == "cuda" and _import_cupy() is None:
        from minigrad.errors import DeviceError

        raise DeviceError(f"device 'cuda' is not available ({_cupy_error}). {GPU_INSTALL_HINT}")
    return name


def device_and_dtype(args, kwargs) -> tuple:
    """Read ``.to(...)``'s arguments, as PyTorch takes them: ``to("cuda")``,
    ``to(mg.float64)``, ``to("cuda", mg.float64)`` or keywords. Returns (device, dtype), each
    None when not given; the device is checked, the dtype a numpy dtype."""
    device, dtype = kwargs.get("device"), kwargs.get("dtype")
    for arg in args:
        if isinstance(arg, str) and arg.split(":")[0] in DEVICES:
            device = arg
        else:
            dtype = arg
    return (
        check_device(device) if device is not None else None,
        np.dtype(dtype) if dtype is not None else None,
    )


def xp_for(device: str):
    """The array module (numpy or cupy) that serves ``device``."""
    return np if device == "cpu" else _import_cupy()


def is_numpy(array) -> bool:
    return isinstance(array, (np.ndarray, np.generic))


def array_module(array):
    """numpy for NumPy arrays, cupy for CuPy arrays."""
    return np if is_numpy(array) else _import_cupy()


def device_of(array) -> str:
    return "cpu" if is_numpy(array) else "cuda"


def to_device(array, device: str):
    """Copy ``array`` to ``device`` ("cpu" or "cuda"); returns it unchanged if already there."""
    if device_of(array) == device:
        return array
    if device == "cpu":
        return array.get()
    return _import_cupy().asarray(array)


def as_array(value, like=()):
    """``value`` as an array: NumPy's reductions return scalars (np.float32), not 0-d arrays,
    and an op may return a Python number; made an array of the module of the first array in
    ``like``. An array comes back as it is."""
    if hasattr(value, "shape") and not isinstance(value, np.generic):
        return value
    return next((array_module(a) for a in like if hasattr(a, "shape")), np).asarray(value)


def to_numpy(array) -> np.ndarray:
    return np.asarray(array) if is_numpy(array) else array.get()


# -- where NumPy and CuPy differ ------------------------------------------------------------


def index_add(target, index, values) -> None:
    """target[index] += values, accumulating repeated indices (unlike plain ``+=``)."""
    if is_numpy(target):
        np.add.at(target, index, values)
    else:
        import cupyx

        cupyx.scatter_add(target, index, values)


def erf(x):
    """The error function erf(x) = 2/sqrt(pi) * integral_0^x exp(-t^2) dt, elementwise.
    NumPy has none: SciPy's, or (without SciPy) Python's math.erf value by value."""
    if not is_numpy(x):
        import cupyx.scipy.special

        return cupyx.scipy.special.erf(x)
    try:
        from scipy.special import erf as scipy_erf
    except ImportError:
        import math

        return np.vectorize(math.erf, otypes=[x.dtype])(x)
    return scipy_erf(x)


def ignore_overflow(array):
    """A context in which NumPy does not warn when exp overflows to inf (CuPy never warns)."""
    return np.errstate(over="ignore") if is_numpy(array) else contextlib.nullcontext()
