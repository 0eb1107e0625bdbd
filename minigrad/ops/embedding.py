"""Embedding lookup and dropout: the two ops of a transformer's input layer besides ``+``."""

from __future__ import annotations

from minigrad.autograd.function import Function
from minigrad.backend import index_add
from minigrad.errors import OutOfRangeError
from minigrad.ops._helpers import as_index, xp_of


class Embedding(Function):
    # y[b, t] = W[idx[b, t]];  dL/dW[v] = sum of g[b, t] over every (b, t) with idx[b, t] = v
    @staticmethod
    def forward(ctx, indices, weight):
        count = weight.shape[0]
        if indices.size and (indices.min() < 0 or indices.max() >= count):
            bad = indices[(indices < 0) | (indices >= count)].ravel()[0]
            raise OutOfRangeError(
                f"embedding: index {int(bad)} is out of range for {count} embeddings "
                f"(weight of shape {weight.shape})"
            )
        ctx.save_for_backward(indices)
        ctx.weight_shape = weight.shape
        return weight[indices]

    @staticmethod
    def backward(ctx, grad):
        (indices,) = ctx.saved_tensors
        return None, EmbeddingBackward.apply(grad, indices.array, ctx.weight_shape)


class EmbeddingBackward(Function):
    # y = zeros(n, d); y[idx] += g (repeated indices accumulate);  its backward is the lookup
    @staticmethod
    def forward(ctx, grad, indices, weight_shape):
        ctx.indices = indices
        grad_weight = xp_of(grad).zeros(weight_shape, dtype=grad.dtype)
        index_add(grad_weight, indices.reshape(-1), grad.reshape(-1, weight_shape[-1]))
        return grad_weight

    @staticmethod
    def backward(ctx, grad):
        return grad[ctx.indices], None, None


class Dropout(Function):
    # y = x * mask / (1 - p), mask_i ~ Bernoulli(1 - p);  dL/dx = g * mask / (1 - p)
    @staticmethod
    def forward(ctx, x, scaled_mask):
        ctx.save_for_backward(scaled_mask)
        return x * scaled_mask

    @staticmethod
    def backward(ctx, grad):
        (scaled_mask,) = ctx.saved_tensors
        return grad * scaled_mask, None


def embedding(indices, weight):
    """Rows of ``weight`` (num_embeddings, dim) picked by integer ``indices`` of any shape."""
    indices = as_index(weight, indices)
    if indices.dtype.kind not in "iu":
        raise TypeError(f"embedding: indices must be integers (int64), got {indices.dtype}")
    return Embedding.apply(indices, weight)


def dropout(x, p: float = 0.5, training: bool = True):
    """Zero each value with probability p and scale the rest by 1/(1-p); identity in eval."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout: p must be between 0 and 1, got {p}")
    if not training or p == 0.0:
        return x
    if p == 1.0:
        return x * 0.0
    from minigrad import rng

    keep = rng.generator(x.device).random(x.shape) >= p
    scaled_mask = keep.astype(x.dtype) / x.dtype.type(1.0 - p)
    return Dropout.apply(x, scaled_mask)
