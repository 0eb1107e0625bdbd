"""Every differentiable op, forward and backward side by side. One module per kind:

arithmetic    + - * / ** and unary minus (broadcasting); isclose, allclose, equal
pointwise     maximum, minimum, pow (the function form of **)
unary         exp, log, log2, log10, log1p, expm1, sqrt, rsqrt, reciprocal, square, sin, cos,
              tanh, sigmoid, relu, abs, clamp; sign, floor, ceil, round, trunc (zero gradient)
reduce        sum, mean, var, std, amax, amin, norm, logsumexp, cumsum; all, any
ordering      max / min (with indices), argmax, argmin, topk, sort, argsort, gather
shape         reshape, permute/transpose, broadcast_to / sum_to, (un)squeeze, flatten, expand,
              flip, roll, repeat
padding       pad (constant, reflect, replicate, circular)
indexing      t[index], setitem, index_select, scatter, index_fill, nonzero, cat, stack,
              split, chunk, where, masked_fill
inplace       t += u, t.add_(u), t[index] = v, scatter_ ... recorded in the graph
linalg        matmul (@), linear, mm, bmm, mv, dot, outer
einsum        einsum
counting      histogram, histc, bincount, one_hot (no gradient)
activation    softmax, log_softmax, gelu (fused)
normalization layer_norm (fused)
loss          cross_entropy (fused), mse_loss
embedding     embedding, dropout
conversion    dtype and device changes, clone
triangle      tril, triu
"""

from minigrad.ops.activation import gelu, log_softmax, softmax
from minigrad.ops.arithmetic import add, allclose, div, equal, isclose, mul, neg, pow, sub
from minigrad.ops.conversion import MaxResult, cast, clone, to_device
from minigrad.ops.counting import bincount, histc, histogram, one_hot
from minigrad.ops.einsum import einsum
from minigrad.ops.embedding import dropout, embedding
from minigrad.ops.indexing import _raw_index as raw_index
from minigrad.ops.indexing import (
    cat,
    chunk,
    getitem,
    index_fill,
    index_select,
    masked_fill,
    nonzero,
    scatter,
    scatter_add,
    setitem,
    split,
    stack,
    where,
)
from minigrad.ops.linalg import bmm, dot, linear, matmul, mm, mv, outer
from minigrad.ops.loss import cross_entropy, mse_loss
from minigrad.ops.normalization import layer_norm
from minigrad.ops.ordering import (
    argmax,
    argmin,
    argsort,
    gather,
    max,
    min,
    sort,
    take_along_dim,
    topk,
)
from minigrad.ops.padding import pad
from minigrad.ops.pointwise import maximum, minimum
from minigrad.ops.pointwise import pow as power  # (``pow`` here is the raw op of **)
from minigrad.ops.reduce import (
    all,
    amax,
    amin,
    any,
    cumsum,
    logsumexp,
    mean,
    norm,
    std,
    sum,
    var,
)
from minigrad.ops.shape import _shape_arg as shape_arg
from minigrad.ops.shape import (
    broadcast_to,
    expand,
    flatten,
    flip,
    permute,
    repeat,
    reshape,
    roll,
    squeeze,
    sum_to,
    transpose,
    unsqueeze,
)
from minigrad.ops.triangle import tril, triu
from minigrad.ops.unary import (
    abs,
    ceil,
    clamp,
    clamp_max,
    clamp_min,
    cos,
    exp,
    expm1,
    floor,
    log,
    log1p,
    log2,
    log10,
    reciprocal,
    relu,
    round,
    rsqrt,
    sigmoid,
    sign,
    sin,
    sqrt,
    square,
    tanh,
    trunc,
)

__all__ = [
    "abs", "add", "amax", "broadcast_to", "cast", "cat", "chunk", "clamp", "clone",
    "cross_entropy", "div", "dropout", "embedding", "exp", "flatten", "gelu", "getitem",
    "layer_norm", "linear", "log", "log_softmax", "masked_fill", "matmul", "MaxResult", "mean",
    "mse_loss", "mul", "neg", "permute", "pow", "raw_index", "relu", "reshape", "shape_arg",
    "sigmoid", "softmax", "split", "sqrt", "squeeze", "stack", "sub", "sum", "sum_to", "tanh",
    "to_device", "transpose", "tril", "triu", "unsqueeze", "var", "where",
    "all", "amin", "any", "argmax", "argmin", "argsort", "bincount", "bmm", "ceil",
    "clamp_max", "clamp_min", "cos", "cumsum", "dot", "einsum", "expand", "expm1", "flip",
    "floor", "gather", "histc", "histogram", "log10", "log1p", "log2", "logsumexp", "max",
    "maximum", "min", "minimum", "mm", "mv", "norm", "one_hot", "outer", "pad", "power",
    "reciprocal", "repeat", "roll", "round", "rsqrt", "sign", "sin", "sort", "square", "std",
    "take_along_dim", "topk", "trunc",
    "allclose", "equal", "index_fill", "index_select", "isclose", "nonzero", "scatter",
    "scatter_add", "setitem",
]  # fmt: skip

# Last, as they need the ops above: attach the Tensor methods that call them (t + u, t.exp(),
# t += u ...); tensor.py itself imports no op.
from minigrad.ops import inplace, tensor_methods, tensor_protocols  # noqa: F401  (what they attach)
