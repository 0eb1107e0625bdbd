"""minigrad: a small reverse-mode autograd engine on NumPy (CPU) and CuPy (GPU) arrays, with
the layers and optimizers to train toy transformers, and tools that draw how gradients flow.

    import minigrad as mg
    x = mg.randn(3, 4, requires_grad=True)
    loss = (x @ x.T).tanh().sum()
    loss.backward()        # x.grad now holds dloss/dx
"""

import numpy as np

from minigrad.tensor import Tensor  # noqa: I001  (Tensor first: the ops import it)
from minigrad import autograd, cuda
from minigrad.autograd import (
    detect_anomaly,
    enable_grad,
    gradcheck,
    gradgradcheck,
    is_grad_enabled,
    no_grad,
    set_grad_enabled,
)
from minigrad.creation import (
    arange,
    empty,
    eye,
    from_numpy,
    full,
    full_like,
    linspace,
    ones,
    ones_like,
    rand,
    rand_like,
    randint,
    randn,
    randn_like,
    tensor,
    zeros,
    zeros_like,
)
from minigrad.ops import cat, matmul, stack, where
from minigrad.ops import exp, log, sqrt, tanh, sigmoid, relu, abs, clamp  # noqa: A004
from minigrad.ops import softmax, log_softmax
from minigrad.rng import manual_seed

float32 = np.float32
float64 = np.float64
float16 = np.float16
int64 = np.int64
int32 = np.int32
bool_ = np.bool_
long = np.int64
double = np.float64


def sum(x, dim=None, keepdim=False):  # noqa: A001
    return x.sum(dim, keepdim)


def mean(x, dim=None, keepdim=False):
    return x.mean(dim, keepdim)


def is_tensor(obj) -> bool:
    return isinstance(obj, Tensor)


def __getattr__(name):
    # subpackages that pull in more (nn, optim, viz, study, save/load) load on first use
    import importlib

    if name in ("nn", "optim", "viz", "study"):
        return importlib.import_module(f"minigrad.{name}")
    if name in ("save", "load"):
        return getattr(importlib.import_module("minigrad.serialization"), name)
    raise AttributeError(f"module 'minigrad' has no attribute {name!r}")


__version__ = "0.1.0"
