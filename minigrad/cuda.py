"""``mg.cuda``: whether the "cuda" device (CuPy on an NVIDIA GPU) can be used, and the seed of
its random numbers, under PyTorch's names (``torch.cuda.is_available()``, ...)."""

from minigrad import rng
from minigrad.backend import cuda_is_available


def is_available() -> bool:
    return cuda_is_available()


def device_count() -> int:
    """1 where CUDA can be used (minigrad uses one GPU), else 0."""
    return int(cuda_is_available())


def manual_seed(seed) -> None:
    """Seed the "cuda" generator; without a GPU nothing happens, as in PyTorch."""
    rng.manual_seed_cuda(seed)


def manual_seed_all(seed) -> None:
    """The same as ``manual_seed``: minigrad uses one GPU."""
    rng.manual_seed_cuda(seed)
