"""Reshape and permute on the CPU, backward on the arrays.

Their forward is the reference's (a view). The reference's backward is the inverse view as a
Tensor op, which runs ``Function.apply`` once more for a result that needs no graph node
outside ``create_graph``: a small GPT's step has about twenty of them, at a few microseconds
each. These kernels take the inverse view of the gradient's array instead.
"""

from __future__ import annotations

from minigrad import fast
from minigrad.ops.shape import Permute, Reshape, inverse_permutation
from minigrad.tensor import Tensor


@fast.register("Reshape", "cpu")
class ReshapeKernel:
    forward = Reshape.forward  # (saves the input's shape)

    @staticmethod
    def backward(ctx, grad):
        return Tensor._make(grad.array.reshape(ctx.input_shape)), None


@fast.register("Permute", "cpu")
class PermuteKernel:
    forward = Permute.forward  # (saves the axes)

    @staticmethod
    def backward(ctx, grad):
        return Tensor._make(grad.array.transpose(inverse_permutation(ctx.axes))), None
