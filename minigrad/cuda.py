"""``mg.cuda.is_available()``: whether the "cuda" device (CuPy on an NVIDIA GPU) can be used."""

from minigrad.backend import cuda_is_available


def is_available() -> bool:
    return cuda_is_available()
