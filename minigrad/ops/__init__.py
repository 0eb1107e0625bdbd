"""Every differentiable op, forward and backward side by side. One module per kind:

arithmetic    + - * / ** and unary minus (broadcasting)
unary         exp, log, sqrt, tanh, sigmoid, relu, abs, clamp
reduce        sum, mean, var, amax
shape         reshape, permute/transpose, broadcast_to / sum_to, (un)squeeze, flatten
indexing      t[index], cat, stack, split, chunk, where, masked_fill
linalg        matmul (@), linear
activation    softmax, log_softmax, gelu (fused)
normalization layer_norm (fused)
loss          cross_entropy (fused), mse_loss
embedding     embedding, dropout
conversion    dtype and device changes, clone
triangle      tril, triu
"""

from minigrad.ops.activation import gelu, log_softmax, softmax
from minigrad.ops.arithmetic import add, div, mul, neg, pow, sub
from minigrad.ops.conversion import MaxResult, cast, clone, to_device
from minigrad.ops.embedding import dropout, embedding
from minigrad.ops.indexing import _raw_index as raw_index
from minigrad.ops.indexing import (
    cat,
    chunk,
    getitem,
    masked_fill,
    split,
    stack,
    where,
)
from minigrad.ops.linalg import linear, matmul
from minigrad.ops.loss import cross_entropy, mse_loss
from minigrad.ops.normalization import layer_norm
from minigrad.ops.reduce import amax, mean, sum, var
from minigrad.ops.shape import _shape_arg as shape_arg
from minigrad.ops.shape import (
    broadcast_to,
    flatten,
    permute,
    reshape,
    squeeze,
    sum_to,
    transpose,
    unsqueeze,
)
from minigrad.ops.triangle import tril, triu
from minigrad.ops.unary import abs, clamp, exp, log, relu, sigmoid, sqrt, tanh

__all__ = [
    "abs", "add", "amax", "broadcast_to", "cast", "cat", "chunk", "clamp", "clone",
    "cross_entropy", "div", "dropout", "embedding", "exp", "flatten", "gelu", "getitem",
    "layer_norm", "linear", "log", "log_softmax", "masked_fill", "matmul", "MaxResult", "mean",
    "mse_loss", "mul", "neg", "permute", "pow", "raw_index", "relu", "reshape", "shape_arg",
    "sigmoid", "softmax", "split", "sqrt", "squeeze", "stack", "sub", "sum", "sum_to", "tanh",
    "to_device", "transpose", "tril", "triu", "unsqueeze", "var", "where",
]  # fmt: skip

# Last, as they need the ops above: attach the Tensor methods that call them (t + u, t.exp(),
# t += u ...); tensor.py itself imports no op.
from minigrad.ops import inplace, tensor_methods  # noqa: F401  (imported for what they attach)
