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
    all,
    allclose,
    amax,
    amin,
    any,
    argmax,
    argmin,
    argsort,
    bincount,
    bmm,
    cat,
    ceil,
    chunk,
    clamp,
    clamp_max,
    clamp_min,
    clone,
    cos,
    cumsum,
    dot,
    einsum,
    equal,
    exp,
    expm1,
    flatten,
    flip,
    floor,
    gather,
    histc,
    histogram,
    index_fill,
    index_select,
    isclose,
    log,
    log1p,
    log2,
    log10,
    log_softmax,
    logsumexp,
    masked_fill,
    matmul,
    max,
    maximum,
    mean,
    min,
    minimum,
    mm,
    mv,
    nonzero,
    norm,
    outer,
    permute,
    reciprocal,
    relu,
    reshape,
    roll,
    round,
    rsqrt,
    scatter,
    scatter_add,
    sigmoid,
    sign,
    sin,
    softmax,
    sort,
    split,
    sqrt,
    square,
    squeeze,
    stack,
    std,
    sum,
    take_along_dim,
    tanh,
    topk,
    transpose,
    tril,
    triu,
    trunc,
    unsqueeze,
    var,
    where,
)
from minigrad.ops import power as pow
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


bool = np.bool_  # noqa: A001  (torch.bool)
float = np.float32  # noqa: A001  (torch.float)
int = np.int32  # noqa: A001  (torch.int)


def is_tensor(obj) -> bool:
    return isinstance(obj, Tensor)


def numel(x: Tensor) -> int:
    return x.numel()


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
    "all", "amax", "amin", "any", "argmax", "argmin", "argsort", "bincount", "bmm", "ceil",
    "chunk", "clamp_max", "clamp_min", "clone", "cos", "cumsum", "dot", "einsum", "expm1",
    "flatten", "flip", "floor", "gather", "histc", "histogram", "log1p", "log2", "log10",
    "logsumexp", "masked_fill", "max", "maximum", "min", "minimum", "mm", "mv", "norm",
    "outer", "permute", "pow", "reciprocal", "reshape", "roll", "round", "rsqrt", "sign",
    "sin", "sort", "split", "square", "squeeze", "std", "take_along_dim", "topk",
    "transpose", "trunc", "unsqueeze", "var",
    "allclose", "equal", "index_fill", "index_select", "isclose", "nonzero", "numel",
    "scatter", "scatter_add",
]  # fmt: skip

from minigrad.fast import kernels as _kernels  # noqa: E402, F401  (registers the kernels)
