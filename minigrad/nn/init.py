"""Initialising parameters in place, with mg's random generator (seeded by mg.manual_seed).

PyTorch's defaults, which the layers use:

    Linear weight   kaiming_uniform_(a=sqrt(5)) = U(-1/sqrt(fan_in), 1/sqrt(fan_in))
    Linear bias     U(-1/sqrt(fan_in), 1/sqrt(fan_in))
    Embedding       N(0, 1)
    LayerNorm       weight 1, bias 0
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from minigrad import rng, versions
from minigrad.autograd.grad_mode import no_grad
from minigrad.tensor import Tensor


def _fill(tensor: Tensor, values: np.ndarray) -> Tensor:
    """Write float64 samples into ``tensor`` in place (cast to its dtype, on its device)."""
    with no_grad():
        tensor.array[...] = values if tensor.device == "cpu" else _on_device(values, tensor)
    versions.bump(tensor.array)
    return tensor


def _on_device(values, tensor):
    from minigrad import backend

    return backend.to_device(values, tensor.device)


def _generator():
    return rng.generator("cpu")  # sampled on the CPU, so a seed gives the same weights anywhere


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0) -> Tensor:
    """Fill with samples of U(a, b)."""
    return _fill(tensor, _generator().uniform(a, b, size=tensor.shape))


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0) -> Tensor:
    """Fill with samples of N(mean, std^2)."""
    return _fill(tensor, _generator().normal(mean, std, size=tensor.shape))


def constant_(tensor: Tensor, value: float) -> Tensor:
    with no_grad():
        tensor.array[...] = value
    return tensor


def zeros_(tensor: Tensor) -> Tensor:
    return constant_(tensor, 0.0)


def ones_(tensor: Tensor) -> Tensor:
    return constant_(tensor, 1.0)


def fan_in_and_fan_out(tensor: Tensor) -> tuple[int, int]:
    """For a weight (out, in, ...): fan_in = in * receptive field, fan_out = out * it."""
    if tensor.ndim < 2:
        raise ValueError(f"fan in and fan out need a tensor of 2 or more dims, got {tensor.shape}")
    receptive = int(np.prod(tensor.shape[2:])) if tensor.ndim > 2 else 1
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    if nonlinearity in ("linear", "sigmoid", "identity"):
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3.0
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else param
        return math.sqrt(2.0 / (1 + slope**2))
    raise ValueError(f"calculate_gain: unknown nonlinearity {nonlinearity!r}")


def kaiming_uniform_(tensor: Tensor, a: float = 0.0, nonlinearity: str = "leaky_relu") -> Tensor:
    """U(-bound, bound), bound = gain * sqrt(3 / fan_in) (He et al. 2015)."""
    if tensor.numel() == 0:  # nn.Linear(0, 3): nothing to fill, as in PyTorch
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=2)
        return tensor
    fan_in, _ = fan_in_and_fan_out(tensor)
    bound = calculate_gain(nonlinearity, a) * math.sqrt(3.0 / fan_in)
    return uniform_(tensor, -bound, bound)


def xavier_uniform_(tensor: Tensor, gain: float = 1.0) -> Tensor:
    """U(-bound, bound), bound = gain * sqrt(6 / (fan_in + fan_out)) (Glorot and Bengio 2010)."""
    fan_in, fan_out = fan_in_and_fan_out(tensor)
    bound = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform_(tensor, -bound, bound)


def xavier_normal_(tensor: Tensor, gain: float = 1.0) -> Tensor:
    fan_in, fan_out = fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)))
