"""minigrad: a small reverse-mode autograd engine on NumPy (CPU) and CuPy (GPU) arrays, with
the layers and optimizers to train toy transformers, and tools that draw how gradients flow.

    import minigrad as mg
    x = mg.randn(3, 4, requires_grad=True)
    loss = (x @ x.T).tanh().sum()
    loss.backward()        # x.grad now holds dloss/dx
"""

import numpy as np

from minigrad import autograd, cuda, fast
from minigrad.autograd import (
    detect_anomaly,
    enable_grad,
    gradcheck,
    gradgradcheck,
    is_grad_enabled,
    no_grad,
    set_grad_enabled,
)
from minigrad.autograd.grad_mode import inference_mode
from minigrad.creation import (
    BoolTensor,
    ByteTensor,
    DoubleTensor,
    FloatTensor,
    HalfTensor,
    IntTensor,
    LongTensor,
    arange,
    as_tensor,
    bernoulli,
    empty,
    empty_like,
    eye,
    from_numpy,
    full,
    full_like,
    get_default_dtype,
    linspace,
    multinomial,
    normal,
    ones,
    ones_like,
    rand,
    rand_like,
    randint,
    randn,
    randn_like,
    randperm,
    tensor,
    zeros,
    zeros_like,
)
from minigrad.fast.threads import get_num_threads, set_num_threads
from minigrad.ops import (
    abs,
    cat,
    clamp,
    exp,
    log,
    log_softmax,
    matmul,
    relu,
    sigmoid,
    softmax,
    sqrt,
    stack,
    tanh,
    tril,
    triu,
    where,
)
from minigrad.rng import (
    Generator,
    default_generator,
    get_rng_state,
    initial_seed,
    manual_seed,
    seed,
    set_rng_state,
)
from minigrad.tensor import Tensor

float32 = np.float32
float64 = np.float64
float16 = np.float16
int64 = np.int64
int32 = np.int32
int16 = np.int16
int8 = np.int8
uint8 = np.uint8
bool_ = np.bool_
long = np.int64
double = np.float64
half = np.float16
short = np.int16


def sum(x, dim=None, keepdim=False):  # noqa: A001
    return x.sum(dim, keepdim)


def mean(x, dim=None, keepdim=False):
    return x.mean(dim, keepdim)


bool = np.bool_  # noqa: A001  (torch.bool)
float = np.float32  # noqa: A001  (torch.float)
int = np.int32  # noqa: A001  (torch.int)


def is_tensor(obj) -> bool:
    return isinstance(obj, Tensor)


def __getattr__(name):
    # subpackages that pull in more (nn, optim, viz, study, save/load) load on first use
    import importlib

    if name in ("nn", "optim", "viz", "study", "utils"):
        return importlib.import_module(f"minigrad.{name}")
    if name in ("save", "load"):
        return getattr(importlib.import_module("minigrad.serialization"), name)
    raise AttributeError(f"module 'minigrad' has no attribute {name!r}")


__version__ = "0.1.0"

__all__ = [
    "Tensor", "autograd", "cuda", "detect_anomaly", "enable_grad", "gradcheck",
    "gradgradcheck", "is_grad_enabled", "no_grad", "set_grad_enabled", "arange", "empty",
    "eye", "from_numpy", "full", "full_like", "linspace", "ones", "ones_like", "rand",
    "multinomial", "rand_like", "randint", "randn", "randn_like", "tensor", "zeros",
    "zeros_like", "cat", "matmul", "stack", "tril", "triu", "where", "exp", "log", "sqrt",
    "tanh", "sigmoid", "relu", "abs", "clamp", "softmax", "log_softmax", "manual_seed",
    "float32", "float64", "float16", "int64", "int32", "bool_", "bool", "long", "double",
    "sum", "mean", "is_tensor", "set_num_threads", "get_num_threads", "nn", "optim", "viz",
    "study", "save", "load", "fast", "utils", "inference_mode", "as_tensor", "bernoulli",
    "empty_like", "get_default_dtype", "normal", "randperm", "Generator", "default_generator",
    "get_rng_state", "initial_seed", "seed", "set_rng_state", "int16", "int8", "uint8", "half",
    "short", "FloatTensor", "DoubleTensor", "HalfTensor", "LongTensor",
    "IntTensor", "BoolTensor", "ByteTensor",
]  # fmt: skip

from minigrad.fast import kernels as _kernels  # noqa: E402, F401  (registers the kernels)
